"""The two operator engines and the switch between them (docs/architecture.md, "Operator engines").

Every stateful operator is a per-key logic run by a ``transformWithState``
processor. The ``python`` engine runs the plain-Python logic
(:class:`~streamjoin.runtime.processor.KeyedProcessor`): the executable
specification, and the engine where no jar can be loaded (Spark Connect,
serverless). The ``jvm`` engine runs the logic's Scala twin from
``jvm/operators`` (``streamjoin.operators.KeyedOperator``) inside Spark's JVM:
no Python worker, no socket round trip per state call.

The Python operator functions prepare the input DataFrame, choose keys,
columns, clock and state TTL — the planner's decisions stay in Python — and
hand both engines the same prepared input; the jvm engine receives them as a
:class:`JvmLogic` description through one facade,
``streamjoin.operators.Operators.apply(df._jdf, ...)``, the way Delta's Python
API reaches its JVM classes.

The engine is the Spark setting ``spark.streamjoin.engine`` (``jvm`` by
default; ``spark_session`` takes it from ``STREAMJOIN_ENGINE``); it is read
when a query is built, so one session can build queries on both engines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from py4j.java_gateway import JavaClass
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from streamjoin.config import local_dir
from streamjoin.errors import EngineError, ValidationError

__all__ = [
    "ENGINE_CONF", "ENGINES", "DEFAULT_ENGINE", "JvmLogic", "engine", "operators_jar", "apply_jvm",
    "check_versions",
]

#: The Spark setting naming the engine.
ENGINE_CONF = "spark.streamjoin.engine"
ENGINES = ("jvm", "python")
DEFAULT_ENGINE = "jvm"

_JAR = "streamjoin-operators.jar"


@dataclass(frozen=True)
class JvmLogic:
    """A per-key logic's description for the jvm engine.

    Attributes:
        logic_class: the Scala ``KeyedLogic`` subclass in ``streamjoin.operators``
            (simple name, e.g. ``"DeduplicateLogic"``); its constructor reads ``spec``.
        spec: JSON-serialisable parameters (column names, flags, nested descriptions).
    """

    logic_class: str
    spec: dict[str, Any] = field(default_factory=dict)


def engine(spark: SparkSession) -> str:
    """The engine queries of ``spark`` are built on: ``spark.streamjoin.engine``, ``jvm`` by default.

    Raises:
        ValidationError: for a value other than ``jvm`` or ``python``.
    """
    name = spark.conf.get(ENGINE_CONF, DEFAULT_ENGINE)
    if name not in ENGINES:
        raise ValidationError(f"{ENGINE_CONF}={name!r}: the engine is one of {', '.join(ENGINES)}")
    return name


def operators_jar() -> Path:
    """Where ``make setup`` puts the jvm engine's jar (``.local/jars/operators/streamjoin-operators.jar``)."""
    return local_dir("jars", "operators") / _JAR


def _facade(spark: SparkSession):
    # py4j names a class it cannot load a JavaPackage, not an error.
    operators = spark.sparkContext._jvm.streamjoin.operators.Operators
    if not isinstance(operators, JavaClass):
        raise EngineError(
            f"the jvm engine's jar is not on this Spark session's classpath (expected {operators_jar()}, "
            f"built by `make setup` and put on spark.jars by streamjoin.spark_session); "
            f"build it, or set {ENGINE_CONF}=python"
        )
    check_versions(operators.version(), operators.builtForSpark(), operators.runningSpark())
    return operators


def check_versions(jar_version: str, built_for: str, running: str) -> None:
    """Refuse a jar built for another Spark than the running one.

    Raises:
        EngineError: naming the jar, the Spark version it was built for and the running one.
    """
    if built_for != running:
        raise EngineError(
            f"{_JAR} {jar_version} was built for Spark {built_for}; this is Spark {running}: "
            f"rebuild it (`make setup`) against {running}, or set {ENGINE_CONF}=python"
        )


def apply_jvm(
    df: DataFrame, key: list[str], output: StructType, logic: JvmLogic, *, clock: str, state_ttl_ms: int | None
) -> DataFrame:
    """Run ``logic`` per ``key`` of ``df`` on the jvm engine; the output has ``output``'s columns.

    The same contract as :meth:`~streamjoin.runtime.processor.KeyedProcessor.apply`:
    ``df`` is the operator's prepared input, ``clock`` one of
    :data:`~streamjoin.runtime.processor.Clock`.

    Raises:
        EngineError: when the jar is missing or built for another Spark version.
    """
    spark = df.sparkSession
    operators = _facade(spark)
    jdf = operators.apply(
        df._jdf,
        list(key),
        output.json(),
        f"streamjoin.operators.{logic.logic_class}",
        json.dumps(logic.spec),
        clock,
        int(state_ttl_ms or 0),
    )
    return DataFrame(jdf, spark)
