"""The sensors and freshness checks of the pipelines, evaluated with Dagster's test contexts against real parts.

The Kafka-lag sensor reads the real broker's offsets and a checkpoint written by a real Spark
streaming query; the run-failure sensor reports a real failed run of a pipeline job.
"""

import json

import pytest
from dagster import (
    AssetMaterialization,
    AssetSelection,
    DagsterInstance,
    DefaultSensorStatus,
    RunRequest,
    SkipReason,
    build_run_status_sensor_context,
    build_sensor_context,
    materialize,
)

from jobs.sensors import failure_report, kafka_lag_sensor, pipeline_run_failures
from resources import KafkaResource, LakehouseResource, SparkResource
from streamjoin.connectors.kafka_admin import ensure_topics, produce, topic_offsets
from streamjoin.connectors.kafka_lag import checkpoint_offsets
from streamjoin.pipeline import Lakehouse


def _evaluate(sensor, cursor, resources):
    context = build_sensor_context(cursor=cursor, resources=resources)
    return sensor(context), context.cursor


def _catch_up(spark, bootstrap: str, topics: list[str], checkpoint: str) -> None:
    """A Spark streaming query over ``topics`` (one Kafka source each, as a pipeline reads them), availableNow."""
    streams = [
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        for topic in topics
    ]
    union = streams[0]
    for stream in streams[1:]:
        union = union.unionByName(stream)
    query = union.writeStream.format("noop").option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()


@pytest.mark.e2e
def test_the_lag_sensor_requests_a_catch_up_run_when_the_checkpoint_falls_behind(spark, kafka_bootstrap, tmp_path):
    """The lakehouse on another file system than ``file:`` (as an object store would be): Hadoop's ``viewfs://``
    mounting the local folder the streaming query writes its checkpoint in, configured by the ``spark``
    resource's settings."""
    from dagster_project.definitions import PIPELINE_JOBS

    topics = ["lag_a", "lag_b"]
    ensure_topics(kafka_bootstrap, {"lag_a": 2, "lag_b": 1})
    produce(kafka_bootstrap, "lag_a", [(str(i), "{}") for i in range(5)])
    sensor = kafka_lag_sensor("probe", topics, PIPELINE_JOBS["orders_current_job"], threshold=3)
    assert sensor.job_name == "orders_current_job"
    resources = {
        "kafka": KafkaResource(bootstrap_servers=kafka_bootstrap),
        "lakehouse": LakehouseResource(root="viewfs://sensorlake/"),
        "spark": SparkResource(
            conf={"spark.hadoop.fs.viewfs.mounttable.sensorlake.linkFallback": f"file://{tmp_path}"}
        ),
    }

    # No checkpoint yet: every record is lag.
    request, cursor = _evaluate(sensor, None, resources)
    assert isinstance(request, RunRequest) and request.tags["kafka_lag"] == "5"
    ends = {t: {str(p): high for p, (_, high) in topic_offsets(kafka_bootstrap, t).items()} for t in topics}
    assert json.loads(cursor) == ends and request.run_key == f"probe:{cursor}"

    # The requested run has not caught up yet: not requested again, the cursor stays.
    waiting, same = _evaluate(sensor, cursor, resources)
    assert isinstance(waiting, SkipReason) and "as when its last run was requested" in waiting.skip_message
    assert same == cursor

    checkpoint = Lakehouse(str(tmp_path)).checkpoint("probe", "main")
    _catch_up(spark, kafka_bootstrap, topics, checkpoint)
    assert checkpoint_offsets(checkpoint) == {t: {int(p): o for p, o in parts.items()} for t, parts in ends.items()}
    caught_up, same = _evaluate(sensor, cursor, resources)
    assert caught_up.skip_message == "probe is 0 records behind lag_a, lag_b: under the threshold 3" and same == cursor

    produce(kafka_bootstrap, "lag_b", [("k", "{}"), ("k", "{}")])
    below, same = _evaluate(sensor, cursor, resources)
    assert below.skip_message.startswith("probe is 2 records behind") and same == cursor

    produce(kafka_bootstrap, "lag_a", [("k", "{}")])
    again, moved = _evaluate(sensor, cursor, resources)
    assert isinstance(again, RunRequest) and again.tags["kafka_lag"] == "3"
    lag = json.loads(again.tags["kafka_lag_per_partition"])
    assert sum(lag["lag_a"].values()) == 1 and lag["lag_b"] == {"0": 2}
    assert moved != cursor and again.run_key == f"probe:{moved}"


def test_the_lag_sensor_fails_naming_how_to_start_kafka(tmp_path, monkeypatch):
    from dagster_project.definitions import PIPELINE_JOBS

    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setenv("STREAMJOIN_LOCAL_DIR", str(tmp_path))  # no local service there
    sensor = kafka_lag_sensor("probe", ["orders"], PIPELINE_JOBS["orders_current_job"])
    with pytest.raises(Exception) as failed:  # the tick fails; Dagster wraps the resource's error
        _evaluate(
            sensor,
            None,
            {"kafka": KafkaResource(), "lakehouse": LakehouseResource(root=str(tmp_path)), "spark": SparkResource()},
        )
    causes = [failed.value]
    while causes[-1].__cause__ is not None:
        causes.append(causes[-1].__cause__)
    assert any(str(e).startswith("no Kafka cluster to use: start the local broker with `make kafka`") for e in causes)
    with pytest.raises(ValueError, match=">= 1 record"):
        kafka_lag_sensor("probe", ["orders"], PIPELINE_JOBS["orders_current_job"], threshold=0)


def test_the_run_failure_sensor_reports_a_failed_pipeline_run_with_its_error(tmp_path, monkeypatch):
    """A real failed run: ``orders_current_job`` with no Kafka cluster fails at its start, naming what to do."""
    from dagster_project.definitions import defs

    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setenv("STREAMJOIN_LOCAL_DIR", str(tmp_path))
    instance = DagsterInstance.ephemeral()
    result = defs.resolve_job_def("orders_current_job").execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    context = build_run_status_sensor_context(
        sensor_name="pipeline_run_failures",
        dagster_event=result.get_run_failure_event(),
        dagster_instance=instance,
        dagster_run=result.dagster_run,
    ).for_run_failure()

    report = failure_report(context)
    assert report.startswith(f"run {result.run_id} of orders_current_job failed:\n")
    assert report.endswith(
        "caused by streamjoin.errors.EmbeddedKafkaError: no Kafka cluster to use: start the local broker "
        "with `make kafka` (or `streamjoin kafka start`), or set KAFKA_BOOTSTRAP_SERVERS to the "
        "bootstrap servers of a Kafka cluster"
    )
    assert pipeline_run_failures(context) is None  # logged; Dagster records the sensor's handling on the run
    assert defs.get_sensor_def("pipeline_run_failures").default_status == DefaultSensorStatus.RUNNING


def test_each_sink_table_has_a_freshness_check_that_passes_after_a_materialization():
    from assets.sql_pipelines import load_sql_pipelines
    from dagster_project.definitions import FRESHNESS_CHECKS, defs

    names = [p.pipeline.name for p in load_sql_pipelines()]
    keys = {key for check in FRESHNESS_CHECKS for key in check.check_keys}
    assert {(k.asset_key.to_user_string(), k.name) for k in keys} == {(n, "freshness_check") for n in names}
    assert defs.get_sensor_def("freshness_checks_sensor").default_status == DefaultSensorStatus.STOPPED

    instance = DagsterInstance.ephemeral()
    selection = AssetSelection.checks_for_assets("orders_current")
    [stale] = materialize(FRESHNESS_CHECKS, instance=instance, selection=selection).get_asset_check_evaluations()
    assert not stale.passed
    instance.report_runless_asset_event(AssetMaterialization("orders_current"))
    [fresh] = materialize(FRESHNESS_CHECKS, instance=instance, selection=selection).get_asset_check_evaluations()
    assert fresh.passed and fresh.asset_key.to_user_string() == "orders_current"


def test_every_sql_pipeline_has_a_stopped_lag_sensor():
    from assets.sql_pipelines import load_sql_pipelines
    from dagster_project.definitions import defs

    sensors = {s.name: s for s in defs.sensors}
    for p in load_sql_pipelines():
        sensor = sensors[f"{p.pipeline.name}_kafka_lag"]
        assert sensor.job_name == f"{p.pipeline.name}_job"
        assert sensor.default_status == DefaultSensorStatus.STOPPED
        assert sensor.metadata["lag_threshold"].value == 1000
    assert not any(name.endswith("_new_records") for name in sensors)
