"""Runs launched the way users launch them: from the Dagster UI and with ``dagster job launch``.

``make demo`` and the other Dagster tests execute jobs in their own process; here every run goes
through ``dagster dev`` (webserver, daemon, code server) on a temporary ``DAGSTER_HOME`` with the
project's ``dagster.yaml``, so runs are queued by the run coordinator and executed by Dagster's run
worker in a fresh process, as in production. Kafka is the local broker service (``streamjoin kafka
start``), started by the test on its temporary local folder and stopped after it; Great Expectations is a copy
of the project's ``gx/`` context (``GX_HOME``), so the checks' Data Docs are built there and the project folder is
not written. The UI is driven by Debian's Chromium through its ChromeDriver (``make setup`` installs both);
screenshots go to ``.local/test-artifacts/dagster-ui/``.
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
import sys
import time

import pytest
from dagster import AssetKey, DagsterRunStatus, RunsFilter
from dagster_dev_server import FINISHED, DagsterDev

from jobs import TERMINATED_MESSAGE
from streamjoin.config import PROJECT_ROOT, local_dir

pytestmark = pytest.mark.e2e

ARTIFACTS = local_dir("test-artifacts", "dagster-ui")


def test_definitions_load_in_a_bare_interpreter():
    """Dagster's run worker imports the code location from a ``__main__`` without a file.

    PySpark's Spark Connect dependency check (reached through Great Expectations) takes such a
    process for a doctest run and calls ``sys.exit(0)`` when the connect extras are missing, so
    the process would end before the definitions load, with exit code 0 and no error.
    """
    code = "import dagster_project.definitions as d; print('loaded', len(d.defs.resolve_all_job_defs()))"
    result = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("loaded "), (
        f"the interpreter exited before the definitions loaded:\n{result.stdout}\n{result.stderr}"
    )
    assert int(result.stdout.split()[1]) > 10


@pytest.fixture(scope="module")
def dagster_dev(tmp_path_factory):
    """A running ``dagster dev`` whose demo topics are loaded by a launched ``load_tpch_topics_job``."""
    dev = DagsterDev(tmp_path_factory.mktemp("dagster-dev"))
    try:
        dev.wait_ready()
        run = dev.wait(dev.submit("load_tpch_topics_job"))
        assert run.status == DagsterRunStatus.SUCCESS, dev.failure(run.run_id)
        yield dev
    finally:
        dev.stop()


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    # Without the background-networking flags Chromium keeps calling home through a closed network.
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1600,1000",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def _shot(driver, name: str) -> None:
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def _click(driver, xpath: str, timeout_s: float = 60) -> None:
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout_s).until(ec.element_to_be_clickable(("xpath", xpath))).click()


def _dismiss_welcome(driver) -> None:
    # The first visit of an instance asks to join the community; "Skip" records the answer.
    for button in driver.find_elements("xpath", "//button[normalize-space()='Skip']"):
        button.click()


def _materialize_selected(driver) -> None:
    _click(driver, "//button[starts-with(normalize-space(), 'Materialize selected')]")
    # The sink and its changelog table are one multi-asset: the UI asks to confirm materialising both.
    _click(driver, "//button[normalize-space()='Confirm']")


def _jump_to(driver, url: str, asset: str) -> None:
    """The global asset lineage graph with ``asset`` selected and in view."""
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{url}/asset-groups")
    jump = WebDriverWait(driver, 120).until(lambda d: d.find_elements("xpath", "//input[@placeholder='Jump to…']"))[0]
    time.sleep(2)  # the welcome dialog opens once the page has settled
    _dismiss_welcome(driver)
    # The graph draws only the nodes in view: "Jump to" selects the asset and brings it there.
    jump.send_keys(asset, Keys.ENTER)
    WebDriverWait(driver, 60).until(lambda d: d.find_elements("xpath", f"//h3[normalize-space()='{asset}']"))


def test_every_schedule_and_sensor_starts_stopped_but_the_run_failure_sensor(dagster_dev):
    """What README.md and docs/dagster.md tell a user: nothing is launched by itself until turned on."""
    nodes = dagster_dev.graphql(
        "{ repositoriesOrError { ... on RepositoryConnection { nodes { "
        "schedules { name scheduleState { status } } sensors { name sensorState { status } } } } } }"
    )["repositoriesOrError"]["nodes"]
    states = {s["name"]: s["scheduleState"]["status"] for n in nodes for s in n["schedules"]}
    states |= {s["name"]: s["sensorState"]["status"] for n in nodes for s in n["sensors"]}
    named = {"orders_current_hourly", "orders_shipped_fast_daily", "delta_maintenance_daily"}
    assert named | {"orders_current_kafka_lag", "freshness_checks_sensor", "pipeline_run_failures"} <= set(states)
    assert {name for name, status in states.items() if status == "RUNNING"} == {"pipeline_run_failures"}, states
    for page in ("README.md", "docs/dagster.md"):
        assert "`pipeline_run_failures`" in (PROJECT_ROOT / page).read_text(), page


def _event_errors(events) -> list[str]:
    """The error (class and message) of every event of a run's log that carries one: a failure's, an interrupt's."""
    errors = []
    for entry in events:
        data = entry.dagster_event.event_specific_data if entry.dagster_event else None
        error = getattr(data, "error", None)
        if error is not None:
            errors.append(f"{entry.dagster_event.event_type_value}: {error.cls_name}: {error.message}")
    return errors


def _terminate_the_continuous_run(dev: DagsterDev, driver, run_id: str, asset: str) -> None:
    """Terminate a continuous run from its page, as a user does, once it has run a micro-batch: it ends canceled,
    its step stopped cleanly (succeeded, its last figures reported), with no error and no interrupt's trace in any
    event; its query stops with it (the run worker and its Spark driver exit)."""
    from dagster import DagsterEventType
    from dagster._serdes import serialize_value
    from processes import alive
    from selenium.webdriver.support.ui import WebDriverWait

    dev.wait(run_id, {DagsterRunStatus.STARTED, *FINISHED})
    deadline = time.monotonic() + 600
    while not any((e.user_message or "").startswith("batch ") for e in dev.instance.all_logs(run_id)):
        assert dev.instance.get_run_by_id(run_id).status == DagsterRunStatus.STARTED, dev.failure(run_id)
        assert time.monotonic() < deadline, "the continuous run ran no micro-batch in 600 s"
        time.sleep(2)
    processes = dev.run_processes(run_id)
    driver.get(f"{dev.url}/runs/{run_id}")
    _click(driver, "//button[normalize-space()='Terminate']")
    _click(driver, "//button[starts-with(normalize-space(), 'Terminate 1 run')]")
    assert dev.wait(run_id, timeout_s=300).status == DagsterRunStatus.CANCELED
    events = dev.instance.all_logs(run_id)
    assert not _event_errors(events), _event_errors(events)
    for name in ("KeyboardInterrupt", "DagsterExecutionInterruptedError", "Traceback"):
        assert not [e.user_message for e in events if name in serialize_value(e)], name
    steps = {e.dagster_event.event_type: e.step_key for e in events if e.dagster_event and e.step_key}
    assert steps.get(DagsterEventType.STEP_SUCCESS) == asset and DagsterEventType.STEP_FAILURE not in steps, steps
    [canceled] = [e for e in events if e.dagster_event and e.dagster_event.event_type == DagsterEventType.RUN_CANCELED]
    assert canceled.dagster_event.message == TERMINATED_MESSAGE.format(step=asset), canceled.dagster_event.message
    # Its last progress: the observations (one per report_every batches, and the rest when it stopped) add up to the
    # step's materialization, the run's totals.
    key = AssetKey(asset)
    observed = [
        e.asset_observation.metadata for e in events if e.asset_observation and e.asset_observation.asset_key == key
    ]
    [materialized] = [
        e.asset_materialization.metadata
        for e in events
        if e.asset_materialization and e.asset_materialization.asset_key == key
    ]
    for figure in ("micro_batches", "input_rows"):
        total = sum(o[figure].value for o in observed)
        assert total == materialized[figure].value > 0, (figure, observed, materialized)
    deadline = time.monotonic() + 60
    while running := {p for p in processes if alive(p)}:
        assert time.monotonic() < deadline, f"processes of the terminated run still alive: {running}"
        time.sleep(1)
    driver.get(f"{dev.url}/runs/{run_id}")
    # The step counts show before the run's logs have loaded ("Not executed (7)"): wait for the loaded page.
    WebDriverWait(driver, 60).until(
        lambda d: "Succeeded (1)" in d.find_element("tag name", "body").text,
        "the terminated run's page never showed its step succeeded",
    )
    page = driver.find_element("tag name", "body").text
    _shot(driver, "2b-continuous-run-terminated")
    assert "Canceled" in page and "Errored (0)" in page, page[:2000]


def test_materialize_from_the_asset_graph_queue_checks_and_data_docs(dagster_dev, browser):
    """Two launches of one pipeline run one after the other (its pool); another pipeline's run overlaps with them,
    a continuous one, terminated from its page.

    Then the UI shows the run's asset checks passed, and the Data Docs page linked from a check's
    metadata shows that validation (the check's suite, the run, its expectations).
    """
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser
    _jump_to(driver, dagster_dev.url, "orders_current")
    _shot(driver, "1-asset-graph-orders_current-selected")

    before = {r.run_id for r in dagster_dev.runs()}
    _materialize_selected(driver)
    deadline = time.monotonic() + 60
    while len(new := [r for r in dagster_dev.runs() if r.run_id not in before]) < 1:
        if time.monotonic() > deadline:
            _shot(driver, "1b-materialize-launched-no-run")
            raise AssertionError("clicking Materialize launched no run")
        time.sleep(1)
    first = new[0].run_id
    dagster_dev.wait(first, {DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, *FINISHED})

    # The same pipeline again while the first run holds its pool `pipeline/orders_current`: it must wait in the queue.
    _materialize_selected(driver)
    deadline = time.monotonic() + 60
    while len(new := [r for r in dagster_dev.runs() if r.run_id not in before]) < 2:
        assert time.monotonic() < deadline, "the second click launched no run"
        time.sleep(1)
    [second] = [r.run_id for r in new if r.run_id != first]
    # A launched run is created NOT_STARTED and then submitted to the queue.
    assert (
        dagster_dev.wait(second, {s for s in DagsterRunStatus if s != DagsterRunStatus.NOT_STARTED}, 60).status
        == DagsterRunStatus.QUEUED
    )
    assert dagster_dev.instance.get_run_by_id(first).status in {DagsterRunStatus.STARTING, DagsterRunStatus.STARTED}
    # Another pipeline holds another pool: it starts beside the first run, ahead of the queued second. It is
    # launched with `dagster job launch`, the CLI's way into the same queue and run worker, as its continuous job,
    # which the test terminates from its run page below.
    other = dagster_dev.launch("orders_by_status_streaming_job")
    driver.get(f"{dagster_dev.url}/runs")
    WebDriverWait(driver, 60).until(lambda d: "Queued" in d.find_element("tag name", "body").text)
    _shot(driver, "2-runs-second-queued")
    # Terminated as soon as it has run a micro-batch: its idle query would only slow the other runs down.
    _terminate_the_continuous_run(dagster_dev, driver, other, "orders_by_status")

    one = dagster_dev.wait(first)
    assert one.status == DagsterRunStatus.SUCCESS, dagster_dev.failure(first)
    two = dagster_dev.wait(second)
    assert two.status == DagsterRunStatus.SUCCESS, dagster_dev.failure(second)
    records = {r.dagster_run.run_id: r for r in dagster_dev.instance.get_run_records()}
    assert records[second].start_time >= records[first].end_time, "the second run started before the first ended"
    assert records[other].start_time < records[first].end_time, "the other pipeline's run waited for the first run"
    assert records[other].start_time < records[second].start_time, "the other pipeline's run waited behind the queue"
    for run_id in (first, second):
        checks = dagster_dev.check_results(run_id)
        assert checks and all(c.passed for c in checks.values()), checks
        assert all(name.startswith("orders_current") for name in checks)

    driver.get(f"{dagster_dev.url}/runs/{first}")
    WebDriverWait(driver, 60).until(lambda d: "Success" in d.find_element("tag name", "body").text)
    _shot(driver, "3-run-succeeded")
    driver.get(f"{dagster_dev.url}/assets/orders_current?view=checks")
    WebDriverWait(driver, 60).until(lambda d: "Passed" in d.find_element("tag name", "body").text)
    _shot(driver, "4-checks-passed")

    # The asset's lineage graph: its node shows the checks' outcome beside the materialisation.
    driver.get(f"{dagster_dev.url}/assets/orders_current?view=lineage")
    passed = WebDriverWait(driver, 60).until(
        lambda d: re.search(r"(\d+) / (\d+) Passed", d.find_element("tag name", "body").text)
    )
    _shot(driver, "5-asset-graph-with-checks")
    own = [
        name for name in dagster_dev.check_results(second) if name.startswith("orders_current:")
    ]  # not the changelog's
    assert passed[1] == passed[2] == str(len(own)), passed[0]

    # The primary-key check of the second run, as its detail in the Checks tab shows it.
    check = "orders_current_primary_key"
    evaluation = dagster_dev.check_results(second)[f"orders_current:{check}"]
    assert evaluation.passed
    docs_url = evaluation.metadata["data_docs"].value
    assert docs_url.startswith(f"file://{dagster_dev.gx}/uncommitted/data_docs/local_site/validations/{check}/")
    # Its latest execution (the second run's) shows the metadata, the data_docs link among it.
    driver.get(f"{dagster_dev.url}/assets/orders_current?view=checks&checkDetail={check}")
    link = WebDriverWait(driver, 60).until(lambda d: d.find_elements("xpath", "//a[starts-with(@href, 'file://')]"))[0]
    _shot(driver, "6-check-metadata-data-docs-link")
    assert link.get_attribute("href") == docs_url
    # Chromium does not follow a file:// link from an http:// page ("Not allowed to load local resource"):
    # the browser opens the link's address itself.
    driver.get(link.get_attribute("href"))
    WebDriverWait(driver, 30).until(lambda d: check in d.find_element("tag name", "body").text)
    page = driver.find_element("tag name", "body").text
    _shot(driver, "7-data-docs-validation")
    (ARTIFACTS / "7-data-docs-validation.txt").write_text(page)
    assert "Succeeded" in page and second in page, page[:2000]
    for expectation in ("values must never be null", "values must be unique"):
        assert expectation in page, page[:2000]


@pytest.mark.slow  # make test-all (docs/testing.md, "Moved to make test-all")
def test_a_two_day_backfill_launched_from_the_partition_dialog(dagster_dev, browser, tpch):
    """Materialize on the day-partitioned ``orders_shipped_fast`` opens the partition dialog; a 2-day range
    launched from it is one backfill (one run: ``BackfillPolicy.single_run``) that materialises both days."""
    from dagster._core.execution.backfill import BulkActionStatus
    from dagster._core.storage.tags import BACKFILL_ID_TAG
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    # Two consecutive days on which orders were placed (the sink's day is the placement's).
    placed = {e["event_time"].date() for e in tpch.order_events if e["op"] == "c"}
    pairs = sorted(day for day in placed if day + dt.timedelta(days=1) in placed)
    first = pairs[len(pairs) // 2]
    days = [first.isoformat(), (first + dt.timedelta(days=1)).isoformat()]

    asset = "orders_shipped_fast"
    # No run filled the table before: the backfill writes just its two days, and the checks of its run compare
    # those days with the batch queries restricted to them (checks.expectations.within_run_days); compared
    # whole, the table would miss every other day.
    driver = browser
    _jump_to(driver, dagster_dev.url, asset)
    _materialize_selected(driver)
    # The dialog opens on the recent days; the pipeline's partitions start in 2002.
    _click(driver, "//*[normalize-space()='Show all partitions']")
    field = WebDriverWait(driver, 60).until(
        lambda d: [
            i for i in d.find_elements("xpath", "//input[starts-with(@placeholder, 'ex: ')]") if i.is_displayed()
        ]
    )[0]
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(Keys.DELETE, f"[{days[0]}...{days[1]}]", Keys.ENTER)
    _shot(driver, "8-backfill-dialog-two-days")

    before = {b.backfill_id for b in dagster_dev.instance.get_backfills()}
    _click(driver, "//button[normalize-space()='Launch backfill']")
    deadline = time.monotonic() + 60
    while not (new := [b for b in dagster_dev.instance.get_backfills() if b.backfill_id not in before]):
        if time.monotonic() > deadline:
            _shot(driver, "8b-backfill-not-launched")
            raise AssertionError("clicking Launch backfill launched no backfill")
        time.sleep(1)
    [backfill] = new
    # A bound on a hang, not a speed test: the run starts a Spark driver, recomputes the days (two queries, four
    # micro-batches) and runs five checks; it took 3 to 10 minutes with the other test worker busy beside it.
    deadline = time.monotonic() + 1200
    while (status := dagster_dev.instance.get_backfill(backfill.backfill_id).status) in {
        BulkActionStatus.REQUESTED,
        BulkActionStatus.CANCELING,
        BulkActionStatus.FAILING,
    }:
        assert time.monotonic() < deadline, f"backfill {backfill.backfill_id} still {status} after 1200 s"
        time.sleep(2)
    driver.get(f"{dagster_dev.url}/runs/b/{backfill.backfill_id}")
    WebDriverWait(driver, 60).until(lambda d: f"{days[0]}...{days[1]}" in d.find_element("tag name", "body").text)
    _shot(driver, "9-backfill-completed")
    runs = dagster_dev.instance.get_runs(filters=RunsFilter(tags={BACKFILL_ID_TAG: backfill.backfill_id}))
    assert len(runs) == 1, runs
    assert runs[0].status == DagsterRunStatus.SUCCESS, dagster_dev.failure(runs[0].run_id)
    assert (
        status == BulkActionStatus.COMPLETED_SUCCESS and "Succeeded" in driver.find_element("tag name", "body").text
    ), status
    checks = dagster_dev.check_results(runs[0].run_id)
    assert checks and all(c.passed for c in checks.values()), checks
    assert {f"{asset}:{asset}_equals_batch_query", f"{asset}:{asset}_equals_batch_interval_join"} <= set(checks)
    for key in (asset, f"{asset}_changelog"):
        assert dagster_dev.instance.get_materialized_partitions(AssetKey(key)) == set(days), key
    [materialization] = [
        r.event_log_entry.asset_materialization
        for r in dagster_dev.instance.fetch_materializations(AssetKey(asset), limit=10).records
        if r.run_id == runs[0].run_id and r.event_log_entry.asset_materialization.partition == days[0]
    ]
    assert (
        materialization.metadata["days"].value == f"{days[0]}..{days[1]}" and materialization.metadata["rows"].value > 0
    )
