"""The two ways to run a pipeline, launched through ``dagster dev`` with the daemon: continuous, then catch-up.

A continuous run (``orders_current_streaming_job``) reports its figures as asset observations while
it lives, is terminated as the UI's "Terminate" button does (through the webserver's GraphQL API),
and stops its query; the catch-up job then resumes from the checkpoint. The ``orders`` topic is
filled in three parts (before, during and after the continuous run) on a broker of this test, whose
address goes to ``dagster dev`` as ``KAFKA_BOOTSTRAP_SERVERS``; at the end the table must equal the
batch query over the whole changelog, each change written once.
"""

from __future__ import annotations

import time

import pytest
from dagster import DagsterEventType, DagsterRunStatus
from dagster_dev_server import FINISHED, DagsterDev
from dagster_graphql import DagsterGraphQLClient
from processes import alive

from checks.batch_inputs import BatchInputs
from checks.expectations import table_difference
from checks.orders_current import expected_orders_current
from streamjoin.connectors.embedded_kafka import EmbeddedKafka
from streamjoin.connectors.kafka_admin import ensure_topics, produce
from streamjoin.datagen.topics import ORDERS, debezium_record

pytestmark = pytest.mark.e2e

#: What every observation of a continuous run carries (numeric metadata; per partition for offsets and lag).
OBSERVED = {
    "micro_batches",
    "input_rows",
    "rows_per_second",
    "batch_duration_ms",
    "changes[+I]",
    "changes[-U]",
    "changes[+U]",
    "changes[-D]",
    "dead_letters",
    "offset[orders/0]",
    "offset[orders/1]",
    "lag[orders/0]",
    "lag[orders/1]",
    "lag",
    "state_rows",
    "state_bytes",
}


def _observations(dev: DagsterDev, run_id: str) -> list[dict]:
    records = dev.instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_OBSERVATION).records
    return [
        {k: v.value for k, v in r.event_log_entry.asset_observation.metadata.items()}
        for r in records
        if r.event_log_entry.asset_observation.asset_key.to_user_string() == "orders_current"
    ]


def _wait_for(predicate, what: str, dev: DagsterDev, run_id: str, timeout_s: float = 400):
    deadline = time.monotonic() + timeout_s
    while not (found := predicate()):
        assert dev.instance.get_run_by_id(run_id).status == DagsterRunStatus.STARTED, dev.failure(run_id)
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"
        time.sleep(2)
    return found


def _offsets(observation: dict) -> int:
    return observation["offset[orders/0]"] + observation["offset[orders/1]"]


def test_a_terminated_continuous_run_reports_live_and_the_catch_up_run_resumes(tmp_path_factory, spark, tpch):
    root = tmp_path_factory.mktemp("dagster-streaming")
    records = [(str(c.row["o_orderkey"]), debezium_record(c)) for c in tpch.orders_changes()]
    parts = [
        records[: len(records) // 3],
        records[len(records) // 3 : 2 * len(records) // 3],
        records[2 * len(records) // 3 :],
    ]
    with EmbeddedKafka(root / "kafka") as broker:
        bootstrap = broker.bootstrap_servers
        ensure_topics(bootstrap, {ORDERS.topic: 2})
        produce(bootstrap, ORDERS.topic, parts[0])
        dev = DagsterDev(root, env={"KAFKA_BOOTSTRAP_SERVERS": bootstrap})
        try:
            dev.wait_ready()
            live = dev.submit(
                "orders_current_streaming_job",
                {"ops": {"orders_current": {"config": {"available_now": False, "report_every": 1}}}},
            )
            dev.wait(live, {DagsterRunStatus.STARTED, *FINISHED})
            first = _wait_for(lambda: _observations(dev, live), "an observation of the continuous run", dev, live)[0]
            assert OBSERVED <= set(first), sorted(first)
            assert all(isinstance(first[k], int | float) for k in OBSERVED)  # numeric: the UI plots them
            assert first["input_rows"] > 0 and first["changes[+I]"] > 0 and first["micro_batches"] == 1

            # Records produced while it runs: later batches read them, and report offsets that far.
            produce(bootstrap, ORDERS.topic, parts[1])
            read = len(parts[0]) + len(parts[1])
            _wait_for(
                lambda: any(_offsets(o) == read for o in _observations(dev, live)),
                "the second part's offsets",
                dev,
                live,
            )

            processes = dev.run_processes(live)  # the run worker and its Spark driver's JVM
            assert any("org.apache.spark.deploy.SparkSubmit" in args for args in processes.values()), processes
            DagsterGraphQLClient("127.0.0.1", port_number=dev.port).terminate_run(live)
            assert dev.wait(live, timeout_s=180).status == DagsterRunStatus.CANCELED
            checkpoint = dev.state / "lakehouse" / "_checkpoints" / "orders_current" / "main"
            batches = sorted(p.name for p in (checkpoint / "offsets").iterdir())
            # The query stopped with the run: its run worker and Spark driver exit, so records produced now stay
            # unread until the next run.
            deadline = time.monotonic() + 60
            while running := {p for p in processes if alive(p)}:
                assert time.monotonic() < deadline, f"processes of the terminated run still alive: {running}"
                time.sleep(1)
            produce(bootstrap, ORDERS.topic, parts[2])
            assert sorted(p.name for p in (checkpoint / "offsets").iterdir()) == batches

            catch_up = dev.wait(dev.submit("orders_current_job"))
            assert catch_up.status == DagsterRunStatus.SUCCESS, dev.failure(catch_up.run_id)
            [meta] = [
                r.event_log_entry.asset_materialization.metadata
                for r in dev.instance.get_records_for_run(
                    catch_up.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION
                ).records
                if r.event_log_entry.asset_materialization.asset_key.to_user_string() == "orders_current"
            ]
            assert meta["records_read"].value == {"orders": len(parts[2])}  # from the checkpoint on
            assert meta["input_rows"].value == len(parts[2]) and meta["lag"].value == 0
            assert meta["offset[orders/0]"].value + meta["offset[orders/1]"].value == len(records)
            assert OBSERVED | {"rows", "rows_inserted", "rows_updated", "rows_deleted"} <= set(meta)
        finally:
            dev.stop()

    table = spark.read.format("delta").load(str(dev.state / "lakehouse" / "orders_current"))
    expected = expected_orders_current(BatchInputs(spark, tpch))
    assert table_difference(table, expected).count() == 0 and table.count() == expected.count() == meta["rows"].value
    # Each change once: no batch of the stopped query was written again by the next run. (The sink's key is
    # the source's: the plan drops the -U changes, as Flink's DropUpdateBefore does for an upsert sink.)
    changelog = spark.read.format("delta").load(str(dev.state / "lakehouse" / "orders_current_changelog"))
    kinds = {r["_rowkind"]: r["count"] for r in changelog.groupBy("_rowkind").count().collect()}
    updates = sum(1 for c in tpch.orders_changes() if c.kind.short == "+U")
    assert kinds == {"+I": len(tpch.orders), "+U": updates, "-D": len(tpch.deleted_keys)}
