"""The new-records sensor against the real broker: a run when a topic grows, a skip otherwise."""

import json

from dagster import RunRequest, SkipReason, build_sensor_context

from jobs.sensors import new_records_sensor
from streamjoin.connectors.kafka_admin import ensure_topics, produce


def _evaluate(sensor, cursor):
    context = build_sensor_context(cursor=cursor)
    return sensor(context), context.cursor


def test_runs_the_job_once_per_growth_of_its_topics(kafka_bootstrap):
    from dagster_project.definitions import PIPELINE_JOBS

    ensure_topics(kafka_bootstrap, {"sensor_a": 2, "sensor_b": 1})
    produce(kafka_bootstrap, "sensor_a", [(str(i), "{}") for i in range(3)])
    sensor = new_records_sensor("probe", ["sensor_a", "sensor_b"], PIPELINE_JOBS["orders_current_job"],
                                bootstrap_servers=kafka_bootstrap)
    assert sensor.job_name == "orders_current_job"

    request, cursor = _evaluate(sensor, None)
    assert isinstance(request, RunRequest) and json.loads(request.tags["new_records"]) == {"sensor_a": 3}
    assert json.loads(cursor) == {"sensor_a": 3, "sensor_b": 0}

    skip, same = _evaluate(sensor, cursor)
    assert isinstance(skip, SkipReason) and skip.skip_message == "no new records in sensor_a, sensor_b"
    assert same == cursor

    produce(kafka_bootstrap, "sensor_b", [("k", "{}")])
    again, moved = _evaluate(sensor, cursor)
    assert isinstance(again, RunRequest) and json.loads(again.tags["new_records"]) == {"sensor_b": 1}
    assert again.run_key != request.run_key and json.loads(moved) == {"sensor_a": 3, "sensor_b": 1}


def test_skips_without_a_kafka_cluster(monkeypatch):
    from dagster_project.definitions import PIPELINE_JOBS

    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    sensor = new_records_sensor("probe", ["orders"], PIPELINE_JOBS["orders_current_job"])
    skip, cursor = _evaluate(sensor, None)
    assert skip.skip_message.startswith("set KAFKA_BOOTSTRAP_SERVERS") and cursor is None


def test_every_sql_pipeline_has_a_stopped_sensor():
    from dagster import DefaultSensorStatus

    from assets.sql_pipelines import load_sql_pipelines
    from dagster_project.definitions import defs

    sensors = {s.name: s for s in defs.sensors}
    for p in load_sql_pipelines():
        sensor = sensors[f"{p.pipeline.name}_new_records"]
        assert sensor.job_name == f"{p.pipeline.name}_job"
        assert sensor.default_status == DefaultSensorStatus.STOPPED
