"""``dagster dev`` (webserver, daemon, code server) for the tests that need runs launched as users launch them.

Each :class:`DagsterDev` has a temporary ``DAGSTER_HOME`` with the project's ``dagster.yaml``, so runs are
queued by the run coordinator and executed by Dagster's run worker in a fresh process, as in production;
its own local state (the broker service of ``streamjoin kafka start``, the lakehouse) and a copy of the
project's ``gx/`` context (``GX_HOME``), so the project folder is not written.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from conftest import DAYS, SCALE_FACTOR
from dagster import DagsterInstance, DagsterRunStatus
from processes import descendants

from streamjoin.config import PROJECT_ROOT, local_dir
from streamjoin.connectors.kafka_service import start_service, stop_service

VENV_BIN = Path(sys.executable).parent
FINISHED = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DagsterDev:
    """``dagster dev`` (webserver + daemon) on 127.0.0.1 with its own instance, local state and Kafka service.

    ``workspace``: the code locations (the project's ``workspace.yaml`` by default). ``env`` over the process's
    environment; with ``KAFKA_BOOTSTRAP_SERVERS`` in it no Kafka service is started (``kafka`` is ``None``).
    """

    def __init__(self, root: Path, env: dict[str, str] | None = None, workspace: Path | str = "workspace.yaml"):
        self.home = root / "dagster_home"
        self.home.mkdir()
        shutil.copy(PROJECT_ROOT / "dagster_project" / "dagster.yaml", self.home / "dagster.yaml")
        with open(self.home / "dagster.yaml", "a") as config:
            # The queue is polled every 5 s by default: a test waits on each launch and on each run leaving its pool.
            config.write("\nrun_queue:\n  dequeue_interval_seconds: 1\n")
        # Local state (broker data, lakehouse) of its own; the jars, the drivers' class archive and generated TPC-H are
        # shared.
        state = root / "local"
        state.mkdir()
        for shared in ("jars", "cds", "tpch"):
            (state / shared).symlink_to(local_dir(shared))
        self.state = state
        # The local service of `make kafka`, on this local state: the runs and sensors find it there. A test that
        # gives dagster dev a broker of its own (`KAFKA_BOOTSTRAP_SERVERS`) starts none: no run would reach it.
        self.kafka = None if (env or {}).get("KAFKA_BOOTSTRAP_SERVERS") else start_service(state / "kafka")[0]
        # The project's GX context without its results: the checks add theirs and build Data Docs here.
        self.gx = root / "gx"
        shutil.copytree(PROJECT_ROOT / "gx", self.gx, ignore=shutil.ignore_patterns("uncommitted"))
        self.workspace = str(workspace)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DAGSTER_HOME": str(self.home),
            "STREAMJOIN_LOCAL_DIR": str(state),
            "TPCH_SCALE_FACTOR": str(SCALE_FACTOR),
            "TPCH_DAYS": str(DAYS),
            "GX_HOME": str(self.gx),
        }
        self.env.pop("KAFKA_BOOTSTRAP_SERVERS", None)  # the embedded default
        self.env.pop("STREAMJOIN_LAKEHOUSE", None)
        self.env.update(env or {})
        # Created before the services start: on a new DAGSTER_HOME the webserver, the daemon and the
        # code server would each create the SQLite storage and race on its schema migrations.
        self.instance = DagsterInstance.from_config(str(self.home))
        self.instance.get_runs()
        self.log = open(root / "dagster-dev.log", "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [VENV_BIN / "dagster", "dev", "-w", self.workspace, "-h", "127.0.0.1", "-p", str(self.port)],
            cwd=PROJECT_ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout_s: float = 240) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (
                f"dagster dev exited with {self.process.returncode}; see {self.log.name}"
            )
            try:
                # The code location is loaded once the GraphQL API lists its jobs.
                with urllib.request.urlopen(f"{self.url}/server_info", timeout=5):
                    pass
                if self._location_loaded():
                    return
            except OSError:
                pass
            time.sleep(2)
        raise AssertionError(f"dagster dev not ready after {timeout_s} s; see {self.log.name}")

    def _location_loaded(self) -> bool:
        """Whether every code location has loaded; a location that failed to load fails at once, with its error."""
        entries = self.graphql(
            "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
            "locationOrLoadError { __typename ... on PythonError { message } } } } } }"
        )
        entries = entries["workspaceOrError"]["locationEntries"]
        errors = [
            f"{e['name']}: {e['locationOrLoadError']['message']}"
            for e in entries
            if (e["locationOrLoadError"] or {}).get("__typename") == "PythonError"
        ]
        assert not errors, "\n".join(errors)
        return bool(entries) and all(e["loadStatus"] == "LOADED" for e in entries)

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        """The ``data`` of a query or mutation of the webserver's GraphQL API (what the UI sends)."""
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())["data"]

    def launch(self, job: str, config: dict | None = None) -> str:
        """``dagster job launch`` (with ``config`` as its run config): the run goes into the queue; its id."""
        before = {r.run_id for r in self.instance.get_runs()}
        result = subprocess.run(
            [
                VENV_BIN / "dagster",
                "job",
                "launch",
                "-w",
                self.workspace,
                "-j",
                job,
                *(["--config-json", json.dumps(config)] if config else []),
            ],
            cwd=PROJECT_ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        [run_id] = [r.run_id for r in self.instance.get_runs() if r.run_id not in before]
        return run_id

    def submit(self, job: str, config: dict | None = None) -> str:
        """Launch ``job`` (with ``config`` as its run config) through the webserver's GraphQL API, as the UI's
        Launchpad does: the run goes into the queue; its id. (``launch`` runs the CLI, a process of its own
        that loads the code location again.)"""
        repositories = self.graphql(
            "{ repositoriesOrError { ... on RepositoryConnection { nodes { name location { name } jobs { name } } } } }"
        )
        [selector] = [
            {"repositoryLocationName": r["location"]["name"], "repositoryName": r["name"], "jobName": job}
            for r in repositories["repositoriesOrError"]["nodes"]
            if job in {j["name"] for j in r["jobs"]}
        ]
        answer = self.graphql(
            "mutation($params: ExecutionParams!) { launchRun(executionParams: $params) { __typename "
            "... on LaunchRunSuccess { run { runId } } ... on PythonError { message } "
            "... on RunConfigValidationInvalid { errors { message } } } }",
            {"params": {"selector": selector, "runConfigData": config or {}}},
        )["launchRun"]
        assert answer["__typename"] == "LaunchRunSuccess", answer
        return answer["run"]["runId"]

    def runs(self, job: str | None = None) -> list:
        return [r for r in self.instance.get_runs() if job is None or r.job_name == job]

    def wait(self, run_id: str, statuses=FINISHED, timeout_s: float = 1200):
        # The default bounds a hang, not the speed: a run with checks took up to 10 minutes beside a busy worker.
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            run = self.instance.get_run_by_id(run_id)
            if run.status in statuses:
                return run
            time.sleep(2)
        raise AssertionError(f"run {run_id} still {self.instance.get_run_by_id(run_id).status} after {timeout_s} s")

    def run_processes(self, run_id: str) -> dict[int, str]:
        """A started run's worker process and every process below it now (its Spark driver's JVM): pid -> command
        line."""
        from dagster import DagsterEventType

        [start] = self.instance.get_records_for_run(run_id, of_type=DagsterEventType.RUN_START).records
        worker = start.event_log_entry.dagster_event.pid
        return {worker: "run worker", **{pid: args for pid, (_, args) in descendants(worker).items()}}

    def failure(self, run_id: str) -> str:
        """The run's error events, for an assertion message."""
        events = [e for e in self.instance.all_logs(run_id) if e.dagster_event and e.dagster_event.is_failure]
        return "\n".join(str(e.user_message) for e in events)

    def check_results(self, run_id: str) -> dict:
        """``{"<asset>:<check>": AssetCheckEvaluation}`` of a run's asset check evaluations."""
        from dagster import DagsterEventType

        records = self.instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION).records
        results = {}
        for record in records:
            evaluation = record.event_log_entry.dagster_event.event_specific_data
            results[f"{evaluation.asset_key.to_user_string()}:{evaluation.check_name}"] = evaluation
        return results

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()
        if self.kafka:
            stop_service(self.state / "kafka")
