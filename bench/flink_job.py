"""Run the benchmark's SQL queries on Apache Flink 2.3.0 local (PyFlink MiniCluster) and report each job's net runtime.

Runs with the Flink venv's python (``.local/flink-venv``, ``make flink``), not the project's:
standard library + PyFlink only. ``bench.run`` writes the job file and starts it:

    .local/flink-venv/bin/python bench/flink_job.py JOB.json RESULT.json

``JOB.json``: ``{"parallelism": int, "phases": [{"name": str, "ddl": [CREATE TABLE…], "queries":
[{"name": str, "sql": str, "settings": {key: value}}…]}…]}`` (phases: e.g. a warm-up phase on a few rows
first, then the measured phase). Each query gets a fresh streaming ``TableEnvironment`` with its settings
(e.g. mini-batch) and the phase's tables, and runs as one job
``INSERT INTO`` a ``blackhole`` sink of its own schema, to the end of its bounded input (the
filesystem sources end with Flink's +∞ watermark). ``RESULT.json``: ``{phase: {query: {"ms": net
runtime} or {"error": text}}}``, the job's net runtime from ``JobExecutionResult.getNetRuntime``:
from job submission to its end in the running JVM, so JVM start and the gateway are excluded.
"""

from __future__ import annotations

import json
import sys


def run_phase(phase: dict, parallelism: int) -> dict:
    from pyflink.java_gateway import get_gateway
    from pyflink.table import EnvironmentSettings, TableEnvironment

    jvm = get_gateway().jvm
    results = {}
    for query in phase["queries"]:
        # A table environment per query: one query's settings (mini-batch) do not leak into the next.
        env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
        env.get_config().set("parallelism.default", str(parallelism))
        for key, value in query.get("settings", {}).items():
            env.get_config().set(key, value)
        for ddl in phase["ddl"]:
            env.execute_sql(ddl)
        try:
            table = env.sql_query(query["sql"])._j_table
            schema = (
                jvm.org.apache.flink.table.api.Schema.newBuilder().fromResolvedSchema(table.getResolvedSchema()).build()
            )
            sink = jvm.org.apache.flink.table.api.TableDescriptor.forConnector("blackhole").schema(schema).build()
            job = table.executeInsert(sink).getJobClient().get()
            ms = job.getJobExecutionResult().get().getNetRuntime()
            results[query["name"]] = {"ms": ms}
        except Exception as e:  # noqa: BLE001 - a query Flink refuses or a failed job: reported, the others still run
            results[query["name"]] = {"error": str(e).splitlines()[0][:500]}
        print(f"flink {phase['name']} {query['name']}: {results[query['name']]}", file=sys.stderr, flush=True)
    return results


def main(job_path: str, result_path: str) -> None:
    with open(job_path) as file:
        job = json.load(file)
    results = {phase["name"]: run_phase(phase, job["parallelism"]) for phase in job["phases"]}
    with open(result_path, "w") as out:
        json.dump(results, out, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:3])
