"""A pipeline started on another checkpoint than the one that last wrote its sink (a reset) is reported, not silent.

Real broker, Spark and Delta: the sink's Delta ``txnAppId`` is ``streamjoin-<sink>-<checkpoint query id>``.
"""

import dataclasses
import json
import logging
import shutil

from streamjoin.connectors.kafka_admin import ensure_topics, produce
from streamjoin.datagen.topics import ORDERS, debezium_record
from streamjoin.pipeline import Lakehouse, Pipeline, run_pipeline
from streamjoin.sink.delta import _checkpoint_query_id, last_writer


def test_a_reset_checkpoint_is_a_warning_in_the_log_and_the_result(spark, kafka_bootstrap, tpch, tmp_path, caplog):
    topic = "orders_for_checkpoint_reset"
    ensure_topics(kafka_bootstrap, {topic: 1})
    produce(kafka_bootstrap, topic, [(None, debezium_record(c)) for c in list(tpch.orders_changes())[:3]])
    pipeline = Pipeline("orders_reset", [dataclasses.replace(ORDERS, topic=topic)], lambda tables: tables["orders"], ("o_orderkey",))
    lakehouse = Lakehouse(str(tmp_path / "lake"))
    checkpoint = lakehouse.checkpoint(pipeline.name, "main")

    first = run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)
    writer = last_writer(spark, pipeline.sink(lakehouse))
    assert first.warnings == [] and writer == f"streamjoin-orders_reset-{_checkpoint_query_id(spark, checkpoint)}"
    produce(kafka_bootstrap, topic, [(None, debezium_record(c)) for c in list(tpch.orders_changes())[3:5]])
    assert run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap).warnings == []  # same checkpoint: no warning

    shutil.rmtree(tmp_path / "lake" / "_checkpoints")
    with caplog.at_level(logging.WARNING, logger="streamjoin"):
        reset = run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)
    [warning] = reset.warnings
    assert warning.startswith(f"sink orders_reset: the checkpoint was reset: the table was last written by {writer}, "
                              f"this run starts on a new checkpoint at {checkpoint}")
    assert [r.getMessage() for r in caplog.records if r.name == "streamjoin"] == [warning]
    # The new checkpoint wrote the sink: it is the last writer now, and its next run is not a reset.
    assert last_writer(spark, pipeline.sink(lakehouse)) == f"streamjoin-orders_reset-{_checkpoint_query_id(spark, checkpoint)}" != writer
    assert run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap).warnings == []
    commits = sorted((tmp_path / "lake" / "orders_reset" / "_delta_log").glob("*.json"))
    assert any('"txn"' in line and json.loads(line)["txn"]["appId"] == writer for line in commits[1].read_text().splitlines())
