"""The daily schedule and the Kafka-lag sensor of a pipeline, turned on in ``dagster dev``: its daemon launches their
runs.

``test_dagster_partitions.py`` and ``test_sensors.py`` evaluate their ticks with Dagster's test contexts;
here they are turned on as in the UI (Automation → the toggle, the same GraphQL mutations) and the daemon
ticks them. The sensor sees the demo topics loaded into the broker service and no checkpoint, so its first
tick requests the catch-up run; the schedule's tick, a minute or two ahead (``dagster_tick_location.py``), requests
the previous day's partition, which waits in the pipeline's concurrency pool until the catch-up run ends.
"""

from __future__ import annotations

import datetime as dt
import time

import pytest
from dagster import DagsterRunStatus
from dagster_dev_server import DagsterDev

from streamjoin.config import PROJECT_ROOT
from streamjoin.datagen.topics import load_topics

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # ~13 min on 2 cores: make test-all

PIPELINE = "orders_shipped_fast"  # the day-partitioned pipeline of sql/: it has a daily schedule
LOCATION = "automation"
#: From the start of the test to the schedule's tick (then up to a minute more, to the whole minute): time for dagster
#: dev to start (about 25 s on 2 busy cores) and the sensor's catch-up run to be queued before it. Its day's run then
#: waits in the pool for the catch-up run, which takes longer than this.
TICK_AFTER = dt.timedelta(seconds=75)


def _turn_on(dev: DagsterDev, kind: str, name: str) -> str:
    """Start the schedule or sensor ``name`` (``kind``: ``Schedule`` / ``Sensor``) as the UI's toggle does; its
    status."""
    field = kind.lower()
    result = {
        "Schedule": "... on ScheduleStateResult { scheduleState { status } }",
        "Sensor": "... on Sensor { sensorState { status } }",
    }[kind]
    query = (
        f"mutation($selector: {kind}Selector!) {{ start{kind}({field}Selector: $selector) "
        f"{{ __typename {result} ... on PythonError {{ message }} }} }}"
    )
    selector = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__", f"{field}Name": name}
    answer = dev.graphql(query, {"selector": selector})[f"start{kind}"]
    assert f"{field}State" in answer, answer
    return answer[f"{field}State"]["status"]


def _launched(dev: DagsterDev, job: str, deadline: float):
    while not (runs := dev.runs(job)):
        assert time.monotonic() < deadline, f"the daemon launched no run of {job}"
        time.sleep(2)
    [run] = runs
    return run


def test_the_daemon_launches_the_daily_schedule_and_the_lag_sensor_runs(tmp_path, tpch):
    tick = (dt.datetime.now(dt.UTC) + TICK_AFTER + dt.timedelta(minutes=1)).replace(second=0, microsecond=0)
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(
        "load_from:\n  - python_file:\n"
        f"      relative_path: {PROJECT_ROOT / 'tests' / 'dagster_tick_location.py'}\n"
        f"      working_directory: {PROJECT_ROOT}\n      location_name: {LOCATION}\n"
    )
    dev = DagsterDev(tmp_path, env={"STREAMJOIN_TEST_DAILY_AT": tick.strftime("%H:%M")}, workspace=workspace)
    try:
        # The lag, while dagster dev starts: the pipeline's topics filled, no checkpoint of it yet.
        records = load_topics(dev.kafka.bootstrap_servers, tpch)
        dev.wait_ready()
        assert _turn_on(dev, "Sensor", f"{PIPELINE}_kafka_lag") == "RUNNING"
        assert _turn_on(dev, "Schedule", f"{PIPELINE}_daily") == "RUNNING"
        assert dt.datetime.now(dt.UTC) < tick - dt.timedelta(seconds=5), (
            f"dagster dev started too late for the tick at {tick}"
        )

        catch_up = _launched(dev, f"{PIPELINE}_job", time.monotonic() + 120)
        # Queued before the tick: the day's run comes second in the queue and waits in the pool for this one.
        assert dt.datetime.now(dt.UTC) < tick, f"the sensor's run was launched after the schedule's tick at {tick}"
        assert catch_up.tags["dagster/sensor_name"] == f"{PIPELINE}_kafka_lag"
        assert catch_up.tags["kafka_lag"] == str(records["order_events"] + records["shipments"])
        daily = _launched(
            dev,
            f"{PIPELINE}_daily_job",
            time.monotonic() + (tick - dt.datetime.now(dt.UTC)).total_seconds() + 120,
        )
        assert daily.tags["dagster/schedule_name"] == f"{PIPELINE}_daily"
        assert daily.tags["dagster/partition"] == (tick.date() - dt.timedelta(days=1)).isoformat()

        for run in (catch_up, daily):
            assert dev.wait(run.run_id).status == DagsterRunStatus.SUCCESS, dev.failure(run.run_id)
        # One pipeline, one run at a time: the day's run waited in the pool for the catch-up run.
        first, second = (dev.instance.get_run_record_by_id(r.run_id) for r in (catch_up, daily))
        assert second.start_time >= first.end_time
    finally:
        dev.stop()
