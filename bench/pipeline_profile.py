"""Where a ``sql/`` pipeline's micro-batch spends its task time: Kafka read and decoding, the operators, the Delta sink,
the dead-letter query (the goal: each pipeline ≥ 0.5× the Kafka → Delta passthrough).

    .venv/bin/python -m bench.pipeline_profile                                  # lineitem_with_order, sf 0.01, 2 runs
    .venv/bin/python -m bench.pipeline_profile --pipeline orders_in_eur --runs 3
    .venv/bin/python -m bench.pipeline_profile --scale-factor 0.1 --stages    # and every stage of each run, in order

The TPC-H changelog goes into a fresh embedded broker as ``make bench``'s pipeline step loads it
(:func:`bench.pipelines.run_pipelines`); the pipeline then runs ``--runs`` times in one Spark session, each time
into a fresh lakehouse from the topics' start (``run_pipeline``, ``availableNow``), the first run on a cold JVM.
Spark's event log (uncompressed, in a temporary folder) gives every stage's task run time and CPU time (ms,
summed over its tasks), put in one part per stage:

- ``dead-letter query``: the stages of the ``<pipeline>_dead_letters`` query (it reads and decodes every record
  again to find the bad ones);
- ``read + decode``: the main query's stages that read Kafka records (decoding, the changes, the shuffle write);
- ``operators``: the main query's stages with a state store (the stateful operators and their state commit);
- ``sink``: the main query's other stages (Delta's MERGE and the changelog append);
- ``outside the queries``: jobs of no streaming query (Delta's snapshot and log work).

Prints one table per run (stages, task run s, task CPU s, share of the run's task time) and the run's wall time, and
with ``--stages`` each stage of the run (when it was submitted after the run's start, its wall time, part, job,
tasks, records read, task run and CPU time); nothing is written.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

PARTS = ("read + decode", "operators", "sink", "dead-letter query", "outside the queries")


def classify(job_description: str, pipeline: str, rdd_names: list[str], records_read: int) -> str:
    """The part (:data:`PARTS`) of one stage, from its job's description (Spark's streaming job description starts
    with the query name; Delta prefixes ``Delta: ``), its RDDs' names and the records it read from a source."""
    query = job_description.removeprefix("Delta: ").split("\n", 1)[0]
    if query == f"{pipeline}_dead_letters":
        return "dead-letter query"
    if query != pipeline:
        return "outside the queries"
    if any(name.startswith("StateStoreRDD") for name in rdd_names):
        return "operators"
    return "read + decode" if records_read > 0 else "sink"


class Stage(NamedTuple):
    """One completed stage: submission time (epoch ms), its part (:data:`PARTS`), task run and CPU time summed over its
    tasks (ms), wall time from submission to completion (ms), tasks, records read from a source or a cache, and the
    first line of its job's description (the streaming query's name; Delta prefixes ``Delta: ``)."""

    submitted: int
    part: str
    run_ms: int
    cpu_ms: int
    wall_ms: int
    tasks: int
    records: int
    job: str


def stage_parts(event_logs: list[Path], pipeline: str) -> list[Stage]:
    """Every completed stage in the (uncompressed) event log's files, in order (:class:`Stage`)."""
    description: dict[int, str] = {}
    stages = []
    for line in (line for path in event_logs for line in path.read_text().splitlines()):
        event = json.loads(line)
        if event["Event"] == "SparkListenerJobStart":
            for stage in event["Stage IDs"]:
                description[stage] = (event.get("Properties") or {}).get("spark.job.description", "")
        elif event["Event"] == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            metrics = {a["Name"]: a.get("Value") for a in info.get("Accumulables", [])}
            run_ms = int(metrics.get("internal.metrics.executorRunTime") or 0)
            cpu_ms = int(metrics.get("internal.metrics.executorCpuTime") or 0) // 1_000_000
            records = int(metrics.get("internal.metrics.input.recordsRead") or 0)
            job = description.get(info["Stage ID"], "")
            part = classify(job, pipeline, [r["Name"] for r in info["RDD Info"]], records)
            submitted = info.get("Submission Time", 0)
            stages.append(
                Stage(
                    submitted,
                    part,
                    run_ms,
                    cpu_ms,
                    info.get("Completion Time", submitted) - submitted,
                    info["Number of Tasks"],
                    records,
                    job.split("\n", 1)[0],
                )
            )
    return stages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pipeline", default="lineitem_with_order", help="a sql/ pipeline (default lineitem_with_order)"
    )
    parser.add_argument(
        "--scale-factor", type=float, default=0.01, help="TPC-H scale factor (default 0.01, as make bench)"
    )
    parser.add_argument("--runs", type=int, default=2, help="runs in one session, the first cold (default 2)")
    parser.add_argument("--stages", action="store_true", help="also list each run's stages in order of submission")
    args = parser.parse_args(argv)

    from assets.sql_pipelines import load_sql_pipelines
    from bench.harness import load, machine
    from bench.pipelines import write_dimensions
    from streamjoin.config import local_dir
    from streamjoin.connectors.embedded_kafka import EmbeddedKafka
    from streamjoin.datagen.topics import load_topics
    from streamjoin.datagen.tpch import TpchChangelog, generate_tpch
    from streamjoin.pipeline import Lakehouse, run_pipeline
    from streamjoin.session import spark_session

    [pipeline] = [d.pipeline for d in load_sql_pipelines() if d.pipeline.name == args.pipeline] or [None]
    if pipeline is None:
        parser.error(f"no sql/ pipeline named {args.pipeline!r}")
    work = Path(tempfile.mkdtemp(prefix="pipeline-profile-"))
    events = work / "events"
    events.mkdir()
    spark = spark_session(
        "streamjoin-pipeline-profile",
        conf={"spark.eventLog.enabled": "true", "spark.eventLog.dir": str(events), "spark.eventLog.compress": "false"},
    )
    print(
        f"python -m bench.pipeline_profile --pipeline {args.pipeline} --scale-factor {args.scale_factor} "
        f"--runs {args.runs}" + (" --stages" if args.stages else "")
    )
    print(f"{machine()}, load {load()} at the start")
    try:
        tpch = TpchChangelog(generate_tpch(local_dir("tpch"), args.scale_factor))
        with EmbeddedKafka(work / "kafka") as broker:
            records = load_topics(broker.bootstrap_servers, tpch)
            topics = {s.topic for s in pipeline.sources}
            print(f"{pipeline.name}: {sum(records[t] for t in topics):,} records on {', '.join(sorted(topics))}")
            spans = []  # each run's (start, end), epoch ms
            for run in range(args.runs):
                lake = Lakehouse(str(work / f"lake-{run}"))
                write_dimensions(spark, tpch.data_dir, lake)
                start = time.time() * 1000
                run_pipeline(pipeline, spark, lake, broker.bootstrap_servers)
                spans.append((start, time.time() * 1000))
        spark.stop()  # writes the rest of the event log
        # Spark 4 rolls the log into events_<n>_<app> files in one folder.
        logs = sorted(events.rglob("events_*"), key=lambda p: int(p.name.split("_")[1]))
        stages = stage_parts(logs, pipeline.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for index, (start, end) in enumerate(spans):
        run_stages = [st for st in stages if start <= st.submitted <= end]
        totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        for st in run_stages:
            totals[st.part][0] += 1
            totals[st.part][1] += st.run_ms
            totals[st.part][2] += st.cpu_ms
        all_run = sum(t[1] for t in totals.values()) or 1
        print(f"\nrun {index + 1} ({'cold' if index == 0 else 'warm'}): {(end - start) / 1000:.1f} s wall\n")
        print(
            "| part | stages | task run s | task CPU s | share of task run time |\n| --- | ---: | ---: | ---: | ---: |"
        )
        for part in PARTS:
            n, run_ms, cpu_ms = totals.get(part, [0, 0, 0])
            print(f"| {part} | {n} | {run_ms / 1000:.1f} | {cpu_ms / 1000:.1f} | {100 * run_ms / all_run:.0f} % |")
        if args.stages:
            print(
                "\n| submitted s | wall s | part | job | tasks | records read | task run s | task CPU s |\n"
                "| ---: | ---: | --- | --- | ---: | ---: | ---: | ---: |"
            )
            for st in sorted(run_stages):
                print(
                    f"| {(st.submitted - start) / 1000:.1f} | {st.wall_ms / 1000:.1f} | {st.part} | {st.job} "
                    f"| {st.tasks} | {st.records:,} | {st.run_ms / 1000:.1f} | {st.cpu_ms / 1000:.1f} |"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
