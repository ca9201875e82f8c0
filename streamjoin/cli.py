"""The ``streamjoin`` command: explain, run and replay SQL pipelines.

::

    streamjoin explain [-i INIT.sql]... sql/PIPELINE.sql
    streamjoin run [-i INIT.sql]... sql/PIPELINE.sql [--available-now] [--bootstrap-servers HOST:PORT] [--lakehouse ROOT]
    streamjoin replay CASE.json... --out-dir DIR [--micro-batch-rows N] [--parallelism K]

``-i`` names initialization scripts planned before the file (tables and
settings only, as Flink's ``sql-client.sh -i``); without it, the files of
``catalog/`` next to the pipeline are. ``explain`` plans the file (no Spark) and prints every statement's plan with
changelog modes. ``run`` runs each ``INSERT INTO`` of the file against Kafka
(``--bootstrap-servers``, else ``$KAFKA_BOOTSTRAP_SERVERS``, else the tables'
``properties.bootstrap.servers``) and Delta (``--lakehouse``, else
``$STREAMJOIN_LAKEHOUSE``, else ``.local/lakehouse``), until the topics are
consumed (``--available-now``) or it is stopped. ``replay`` runs test cases in
the ``flink-cases`` format in one Spark session and writes ``DIR/NAME.json``.

Exit status: 0 on success, 1 when the SQL is invalid or unsupported (the
message names file, line, column and rule) or a replayed case failed to run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from streamjoin.errors import StreamJoinError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="streamjoin", description="Flink SQL pipelines on Spark Structured Streaming.")
    commands = parser.add_subparsers(dest="command", required=True)
    explain = commands.add_parser("explain", help="print the plan of every statement of a SQL file")
    explain.add_argument("file", type=Path)
    explain.add_argument("-i", "--init", type=Path, action="append", help="initialization script (default: catalog/*.sql next to FILE)")
    run = commands.add_parser("run", help="run the INSERT INTO statements of a SQL file against Kafka and Delta")
    run.add_argument("file", type=Path)
    run.add_argument("-i", "--init", type=Path, action="append", help="initialization script (default: catalog/*.sql next to FILE)")
    run.add_argument("--available-now", action="store_true", help="process what the topics hold, then stop")
    run.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    run.add_argument("--lakehouse", default=os.environ.get("STREAMJOIN_LAKEHOUSE"))
    replay = commands.add_parser("replay", help="replay flink-cases test cases")
    replay.add_argument("cases", type=Path, nargs="+")
    replay.add_argument("--out-dir", type=Path, required=True)
    replay.add_argument("--micro-batch-rows", type=int, default=1)
    replay.add_argument("--parallelism", type=int, default=2, help="cases running at the same time")
    return parser


def _spark():
    from streamjoin.session import spark_session

    return spark_session("streamjoin-cli")


def _explain(args) -> int:
    from streamjoin.planner import Flink, load_script

    script = load_script(args.file, args.init)
    for statement in script.statements:
        print(f"-- {statement.statement.sql(dialect=Flink)[:120]}")
        print(statement.explain)
        print()
    for text in script.explains:
        print(text)
        print()
    return 0


def _run(args) -> int:
    from streamjoin.config import local_dir
    from streamjoin.pipeline import Lakehouse, run_pipeline
    from streamjoin.planner import bootstrap_servers, load_script, sql_pipelines

    script = load_script(args.file, args.init)
    lakehouse = Lakehouse(args.lakehouse or str(local_dir("lakehouse")))
    pipelines = sql_pipelines(script, lakehouse)
    if not pipelines:
        print(f"{args.file}: no INSERT INTO statement to run", file=sys.stderr)
        return 1
    servers = bootstrap_servers(pipelines, args.bootstrap_servers)
    spark = _spark()
    if script.state_ttl_ms is not None and args.available_now:
        # State TTL runs the operators in processing-time mode, where Spark keeps planning empty
        # micro-batches and an availableNow query would never end.
        spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    for pipeline in pipelines:
        run = run_pipeline(pipeline, spark, lakehouse, servers, available_now=args.available_now,
                           on_progress=lambda p: print(f"{p.name} batch {p.batchId}: {p.numInputRows} records", flush=True))
        print(f"{pipeline.name}: {run.batches} micro-batches, records read {run.records_read}")
    return 0


def _replay(args) -> int:
    from streamjoin.planner import replay_cases

    if args.micro_batch_rows < 1:
        print("--micro-batch-rows must be >= 1", file=sys.stderr)
        return 2
    results = replay_cases(_spark(), args.cases, args.out_dir, micro_batch_rows=args.micro_batch_rows,
                           parallelism=args.parallelism)
    failed = 0
    for name, result in results.items():
        status = f"error: {result['error']}" if "error" in result else f"{len(result['final'])} final rows"
        print(f"{name}: {status}")
        failed += "error" in result
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``streamjoin`` console script; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        return {"explain": _explain, "run": _run, "replay": _replay}[args.command](args)
    except StreamJoinError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
