"""A pipeline started on another checkpoint than the one that last wrote its sink (a reset) is reported, not silent.

Real broker, Spark and Delta: the sink's Delta ``txnAppId`` is ``streamjoin-<sink>-<checkpoint query id>``.
"""

import dataclasses
import json
import logging
import shutil

import pytest

from streamjoin.connectors.kafka_admin import ensure_topics, produce
from streamjoin.datagen.topics import ORDERS, debezium_record
from streamjoin.pipeline import Lakehouse, Pipeline, run_pipeline
from streamjoin.sink.delta import _checkpoint_query_id, last_writer


def test_a_reset_checkpoint_is_a_warning_in_the_log_and_the_result(spark, kafka_bootstrap, tpch, tmp_path, caplog):
    topic = "orders_for_checkpoint_reset"
    ensure_topics(kafka_bootstrap, {topic: 1})
    produce(kafka_bootstrap, topic, [(None, debezium_record(c)) for c in list(tpch.orders_changes())[:3]])
    pipeline = Pipeline(
        "orders_reset", [dataclasses.replace(ORDERS, topic=topic)], lambda tables: tables["orders"], ("o_orderkey",)
    )
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
    assert warning.startswith(
        f"sink orders_reset: the checkpoint was reset: the table was last written by {writer}, "
        f"this run starts on a new checkpoint at {checkpoint}"
    )
    assert [r.getMessage() for r in caplog.records if r.name == "streamjoin"] == [warning]
    # The new checkpoint wrote the sink: it is the last writer now, and its next run is not a reset.
    assert (
        last_writer(spark, pipeline.sink(lakehouse))
        == f"streamjoin-orders_reset-{_checkpoint_query_id(spark, checkpoint)}"
        != writer
    )
    assert run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap).warnings == []
    commits = sorted((tmp_path / "lake" / "orders_reset" / "_delta_log").glob("*.json"))
    assert any(
        '"txn"' in line and json.loads(line)["txn"]["appId"] == writer for line in commits[1].read_text().splitlines()
    )


def _status_pipeline(topic: str, aggregate: str):
    from streamjoin.planner import sql_pipelines
    from streamjoin.planner.script import plan_script

    [pipeline] = sql_pipelines(
        plan_script(
            f"""
CREATE TABLE orders (o_orderkey BIGINT, o_orderstatus STRING, PRIMARY KEY (o_orderkey) NOT ENFORCED)
WITH ('connector' = 'kafka', 'topic' = '{topic}', 'format' = 'debezium-json', 'scan.startup.mode' = 'earliest-offset');
CREATE TABLE by_status (o_orderstatus STRING, v BIGINT, PRIMARY KEY (o_orderstatus) NOT ENFORCED) WITH ('connector' = 'delta');
INSERT INTO by_status SELECT o_orderstatus, {aggregate} FROM orders GROUP BY o_orderstatus;
""",  # noqa: E501
            "by_status.sql",
        )
    )
    return pipeline


def test_a_checkpoint_whose_state_the_changed_query_cannot_read_is_a_clear_error(
    spark, kafka_bootstrap, tpch, tmp_path
):
    from streamjoin.cli import exit_code
    from streamjoin.errors import IncompatibleStateError

    topic = "orders_for_state_change"
    ensure_topics(kafka_bootstrap, {topic: 1})
    produce(kafka_bootstrap, topic, [(None, debezium_record(c)) for c in list(tpch.orders_changes())[:10]])
    lakehouse = Lakehouse(str(tmp_path / "lake"))
    run_pipeline(_status_pipeline(topic, "COUNT(*)"), spark, lakehouse, kafka_bootstrap)
    produce(kafka_bootstrap, topic, [(None, debezium_record(c)) for c in list(tpch.orders_changes())[10:12]])
    # The same sink, another aggregate: its state (a count) is not the one MAX keeps (its values and their counts).
    with pytest.raises(IncompatibleStateError) as refused:
        run_pipeline(_status_pipeline(topic, "MAX(o_orderkey)"), spark, lakehouse, kafka_bootstrap)
    message = str(refused.value)
    assert message.startswith(
        "pipeline 'by_status': its checkpoint holds operator state this query cannot read (Spark: STATE_STORE_"
    )
    lake = tmp_path / "lake"
    tables = f"{lake / 'by_status'}, {lake / 'by_status_changelog'} and {lake / 'by_status_dead_letters'}"
    assert f"remove {lake / '_checkpoints' / 'by_status'} and the tables {tables}, then run again" in message
    assert exit_code(refused.value) == 6
