"""The foundation path end to end: real Kafka broker → Spark Structured Streaming → Delta upsert writer → Delta.

TPC-H (scale factor 0.001) orders as a Debezium changelog with updates and
deletes; the result is compared with the batch recomputation of the final
orders table from the same generated input.
"""

import dataclasses
import gc
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DAYS, SCALE_FACTOR

from streamjoin.config import PROJECT_ROOT
from streamjoin.connectors.kafka_admin import ensure_topics, produce
from streamjoin.datagen.topics import ORDERS, debezium_record
from streamjoin.pipeline import Lakehouse, Pipeline, run_pipeline
from streamjoin.planner import load_script, sql_pipelines


def orders_pipeline(name: str, topic: str = "orders") -> Pipeline:
    source = dataclasses.replace(ORDERS, topic=topic)
    return Pipeline(name, [source], lambda tables: tables["orders"], ("o_orderkey",))


def rows(spark, path, columns):
    return {tuple(r[c] for c in columns) for r in spark.read.format("delta").load(path).collect()}


def _kafka_clients() -> int:
    from confluent_kafka.admin import AdminClient

    gc.collect()
    return sum(isinstance(o, AdminClient) for o in gc.get_objects())


def test_upsert_table_equals_batch_recomputation(spark, kafka_bootstrap, demo_topics, tpch, tmp_path):
    lakehouse = Lakehouse(str(tmp_path / "lake"))
    pipeline = orders_pipeline("orders_current")
    clients = _kafka_clients()
    run = run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)
    # No admin client of the run outlives it (each would keep connecting to the cluster until the process exits).
    assert _kafka_clients() == clients

    assert run.records_read == {"orders": demo_topics["orders"]}
    columns = ORDERS.schema.names
    expected = {tuple(o[c] for c in columns) for o in tpch.final_orders().values()}
    assert len(expected) < len(tpch.orders)  # the input really deletes orders
    assert rows(spark, lakehouse.table_path("orders_current"), columns) == expected

    kinds = {
        r["_rowkind"]: r["count"]
        for r in spark.read.format("delta")
        .load(lakehouse.table_path("orders_current_changelog"))
        .groupBy("_rowkind")
        .count()
        .collect()
    }
    updates = sum(1 for c in tpch.orders_changes() if c.kind.short == "+U")
    assert kinds == {"+I": len(tpch.orders), "-U": updates, "+U": updates, "-D": len(tpch.deleted_keys)}
    offsets = (
        spark.read.format("delta")
        .load(lakehouse.table_path("orders_current_changelog"))
        .select("_source_offsets")
        .first()[0]
    )
    assert json.loads(offsets)[0]["orders"]  # end offsets per partition of the batch


def test_malformed_records_go_to_dead_letters(spark, kafka_bootstrap, tpch, tmp_path):
    topic = "orders_with_bad_records"
    ensure_topics(kafka_bootstrap, {topic: 1})
    good = [c for c in tpch.orders_changes()][:3]
    records = [
        debezium_record(good[0]),
        "{this is not json",
        debezium_record(good[1]),
        json.dumps({"before": None, "after": {"o_orderkey": None, "o_custkey": 1}, "op": "c"}),
        json.dumps({"before": None, "after": {"o_orderkey": 7, "o_totalprice": "lots"}, "op": "c"}),
        debezium_record(good[2]),
    ]
    produce(kafka_bootstrap, topic, [(None, r) for r in records])
    lakehouse = Lakehouse(str(tmp_path / "lake"))
    pipeline = orders_pipeline("orders_dlq", topic)
    run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)

    assert rows(spark, lakehouse.table_path("orders_dlq"), ["o_orderkey"]) == {(c.row["o_orderkey"],) for c in good}
    dead = sorted(
        (r.offset, r.reason, bytes(r.value).decode(), r.topic, r.partition)
        for r in spark.read.format("delta").load(pipeline.dead_letter_path(lakehouse)).collect()
    )
    assert dead == [
        (1, "malformed JSON", records[1], topic, 0),
        (3, "primary key column o_orderkey is null", records[3], topic, 0),
        (4, 'column o_totalprice: value "lots" is not DECIMAL(15,2)', records[4], topic, 0),
    ]


def test_replayed_micro_batch_duplicates_and_loses_nothing(spark, kafka_bootstrap, tpch, tmp_path):
    """Kill between the Delta commit and the checkpoint commit: the batch re-runs and changes nothing."""
    topic = "orders_replay"
    ensure_topics(kafka_bootstrap, {topic: 2})
    changes = list(tpch.orders_changes())
    first, second = changes[:500], changes[500:]
    lakehouse = Lakehouse(str(tmp_path / "lake"))
    pipeline = orders_pipeline("orders_replay", topic)
    key = lambda c: str(c.row["o_orderkey"])
    produce(kafka_bootstrap, topic, [(key(c), debezium_record(c)) for c in first])
    run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)
    produce(kafka_bootstrap, topic, [(key(c), debezium_record(c)) for c in second])
    run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)

    table, changelog = lakehouse.table_path("orders_replay"), lakehouse.table_path("orders_replay_changelog")
    before = rows(spark, table, ORDERS.schema.names)
    changes_before = spark.read.format("delta").load(changelog).count()
    last = _forget_last_commit(lakehouse, "orders_replay")

    progress = []
    run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap, on_progress=progress.append)
    assert [p.batchId for p in progress] == [last]  # the batch really ran again
    assert rows(spark, table, ORDERS.schema.names) == before
    assert (
        spark.read.format("delta").load(changelog).count()
        == changes_before
        == len(changes) + sum(1 for c in changes if c.kind.short == "+U")
    )
    expected = {tuple(o[c] for c in ORDERS.schema.names) for o in tpch.final_orders().values()}
    assert before == expected


def test_a_reset_checkpoint_writes_its_batches_instead_of_skipping_them(spark, kafka_bootstrap, tpch, tmp_path):
    """A deleted checkpoint starts batch ids at 0 again: Delta must not take them for replays of the old query's."""
    topic = "orders_reset"
    ensure_topics(kafka_bootstrap, {topic: 1})
    changes = [c for c in tpch.orders_changes() if c.kind.short == "+I"][:20]
    lakehouse = Lakehouse(str(tmp_path / "lake"))
    pipeline = orders_pipeline("orders_reset", topic)
    produce(kafka_bootstrap, topic, [(None, debezium_record(c)) for c in changes[:10]])
    run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)
    shutil.rmtree(Path(lakehouse.checkpoint("orders_reset", "main")))
    produce(kafka_bootstrap, topic, [(None, debezium_record(c)) for c in changes[10:]])

    progress = []
    run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap, on_progress=progress.append)
    assert [p.batchId for p in progress] == [0]  # the new query's batch 0, which the old query had committed too
    keys = {(c.row["o_orderkey"],) for c in changes}
    assert rows(spark, lakehouse.table_path("orders_reset"), ["o_orderkey"]) == keys
    changelog = spark.read.format("delta").load(lakehouse.table_path("orders_reset_changelog"))
    assert changelog.count() == 10 + 20  # the old query's changes, then the new query's (from the topic's start)


def _forget_last_commit(lakehouse: Lakehouse, pipeline: str) -> int:
    """The crash between the Delta commit and the checkpoint commit: the checkpoint forgets its last batch."""
    commits = Path(lakehouse.checkpoint(pipeline, "main")) / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    return last


def test_a_replayed_batch_of_a_stateful_pipeline_runs_its_operators_again(
    spark, kafka_bootstrap, demo_topics, tmp_path
):
    """The same crash under stateful operators (orders_by_status: deduplication, then a group aggregate).

    Delta skips both writes of the replayed batch (its transaction version is committed); Spark still
    validates that every state store committed the batch, so the writer must run the operators all the
    same — else the first restart fails with STATE_STORE_COMMIT_VALIDATION_FAILED.
    """
    [pipeline] = sql_pipelines(load_script(PROJECT_ROOT / "sql" / "orders_by_status.sql"))
    lakehouse = Lakehouse(str(tmp_path / "lake"))
    run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)
    table, changelog = lakehouse.table_path(pipeline.name), lakehouse.table_path(f"{pipeline.name}_changelog")
    before = {tuple(r) for r in spark.read.format("delta").load(table).collect()}
    changes_before = spark.read.format("delta").load(changelog).count()
    last = _forget_last_commit(lakehouse, pipeline.name)

    progress = []
    run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap, on_progress=progress.append)
    assert [p.batchId for p in progress][:1] == [last]  # the batch really ran again, and the run succeeded
    assert {tuple(r) for r in spark.read.format("delta").load(table).collect()} == before
    assert spark.read.format("delta").load(changelog).count() == changes_before > 0


def test_dagster_definitions_load_and_every_job_resolves():
    from dagster import Definitions

    from dagster_project.definitions import defs

    Definitions.validate_loadable(defs)
    assert {j.name for j in defs.resolve_all_job_defs()} >= {"orders_current_job", "load_tpch_topics_job"}


@pytest.mark.slow  # the same job and checks run from the UI in tests/test_dagster_ui.py (make test)
def test_dagster_job_runs_from_the_cli_and_its_check_passes(kafka_bootstrap, demo_topics, tmp_path):
    """``dagster job execute -m dagster_project.definitions``: the code location loaded as a module, not through
    ``workspace.yaml``; one run in the CLI's own process."""
    env = dict(
        os.environ,
        KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap,
        STREAMJOIN_LAKEHOUSE=str(tmp_path / "lake"),
        TPCH_SCALE_FACTOR=str(SCALE_FACTOR),
        TPCH_DAYS=str(DAYS),
        DAGSTER_HOME=str(tmp_path / "dagster"),
        SPARK_DRIVER_MEMORY="1g",
    )
    (tmp_path / "dagster").mkdir()
    dagster = Path(sys.executable).with_name("dagster")
    result = subprocess.run(
        [str(dagster), "job", "execute", "-m", "dagster_project.definitions", "-j", "orders_current_job"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-5000:]
    assert "RUN_SUCCESS" in log
    assert "Asset check 'orders_current_matches_batch' on 'orders_current' passed" in log
