"""The operator engines: the setting that picks one, the jvm engine really running in the JVM, and its errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from streamjoin.config import local_dir
from streamjoin.connectors.changelog_files import changelog_file_stream
from streamjoin.errors import EngineError, ValidationError
from streamjoin.jvm import ENGINE_CONF, check_versions, engine
from streamjoin.runtime.deduplicate import deduplicate

SCHEMA = StructType([StructField("k", StringType()), StructField("v", LongType())])


def _analyzed_plan(df) -> str:
    return df._jdf.queryExecution().analyzed().toString()


def test_each_engine_builds_its_own_transform_with_state(spark, engine, tmp_path):
    stream = changelog_file_stream(spark, tmp_path / "in", SCHEMA, [[("+I", ("a", 1))]])
    plan = _analyzed_plan(deduplicate(stream, key=["k"], order_by=None, keep="last"))
    assert ("TransformWithStateInPySpark" in plan) == (engine == "python"), plan
    assert "TransformWithState" in plan


def test_the_default_engine_is_jvm_and_an_unknown_one_is_refused(spark):
    before = spark.conf.get(ENGINE_CONF)
    try:
        spark.conf.unset(ENGINE_CONF)
        assert engine(spark) == "jvm"
        spark.conf.set(ENGINE_CONF, "scala")
        with pytest.raises(ValidationError, match=r"spark.streamjoin.engine='scala'.*jvm, python"):
            engine(spark)
    finally:
        spark.conf.set(ENGINE_CONF, before)


def test_the_jar_was_built_for_the_running_spark(spark):
    operators = spark.sparkContext._jvm.streamjoin.operators.Operators
    assert operators.builtForSpark() == operators.runningSpark() == spark.version


def test_a_jar_built_for_another_spark_is_refused_naming_both_versions():
    with pytest.raises(
        EngineError, match=r"streamjoin-operators.jar 0.1.0 was built for Spark 4.1.0; this is Spark 4.2.0"
    ):
        check_versions("0.1.0", "4.1.0", "4.2.0")


def test_a_missing_jar_is_a_clear_error_naming_it(tmp_path):
    # A fresh session whose local folder holds Spark's jars but not the operators jar.
    (tmp_path / "jars").mkdir()
    (tmp_path / "jars" / "spark").symlink_to(local_dir("jars", "spark"))
    script = textwrap.dedent(
        """
        from pathlib import Path
        from pyspark.sql.types import LongType, StringType, StructField, StructType
        from streamjoin.connectors.changelog_files import changelog_file_stream
        from streamjoin.runtime.deduplicate import deduplicate
        from streamjoin.errors import EngineError
        from streamjoin.session import spark_session
        spark = spark_session("missing-jar")
        schema = StructType([StructField("k", StringType()), StructField("v", LongType())])
        stream = changelog_file_stream(spark, Path({!r}), schema, [[("+I", ("a", 1))]])
        try:
            deduplicate(stream, key=["k"], order_by=None, keep="last")
        except EngineError as e:
            print("ENGINE_ERROR", e)
        from streamjoin.connectors.kafka import KafkaSource, decode
        try:  # the jvm engine's Kafka decoding is in the jar too
            decode(spark.createDataFrame([(b"k", b"{{}}")], "key BINARY, value BINARY"), KafkaSource("t", "t", schema))
        except EngineError as e:
            print("DECODE_ERROR", e)
        """.format(str(tmp_path / "in"))
    )
    env = {**os.environ, "STREAMJOIN_LOCAL_DIR": str(tmp_path), "STREAMJOIN_ENGINE": "jvm"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    message = next((line for line in done.stdout.splitlines() if line.startswith("ENGINE_ERROR")), None)
    assert message is not None, done.stdout + done.stderr[-3000:]
    assert str(tmp_path / "jars" / "operators" / "streamjoin-operators.jar") in message
    decoding = next((line for line in done.stdout.splitlines() if line.startswith("DECODE_ERROR")), "")
    assert str(tmp_path / "jars" / "operators" / "streamjoin-operators.jar") in decoding, done.stdout
    assert "make setup" in message and "spark.streamjoin.engine=python" in message
