"""The ``streamjoin`` command: explain, run and replay SQL pipelines; start, check and stop the local Kafka broker.

::

    streamjoin kafka start [--port PORT] [--data-dir DIR] | status [--data-dir DIR] | stop [--data-dir DIR]
    streamjoin explain [-i INIT.sql]... sql/PIPELINE.sql
    streamjoin run [-i INIT.sql]... sql/PIPELINE.sql... [--available-now [--end-of-input]]
                   [--bootstrap-servers HOST:PORT] [--lakehouse ROOT]
    streamjoin replay CASE.json... --out-dir DIR [--micro-batch-rows N] [--parallelism K]
    streamjoin backfill [-i INIT.sql]... sql/PIPELINE.sql --from YYYY-MM-DD --to YYYY-MM-DD
                        [--bootstrap-servers HOST:PORT] [--lakehouse ROOT]

``-i`` names initialization scripts planned before the file (tables and
settings only, as Flink's ``sql-client.sh -i``); without it, the files of
``catalog/`` next to the pipeline are. ``explain`` plans the file (no Spark) and prints every statement's plan with
changelog modes, and a ``[WARNING]`` line under an ``INSERT INTO`` a Delta table whose primary key does not hold
its partition columns (every MERGE reads the whole table). ``run`` runs every ``INSERT INTO`` of its files at once,
in one Spark application (as Flink's SQL client runs each as a job), against Kafka
(``--bootstrap-servers``, else ``$KAFKA_BOOTSTRAP_SERVERS``, else the local broker
of ``streamjoin kafka start``, else the tables' ``properties.bootstrap.servers``) and Delta (``--lakehouse``, else
``$STREAMJOIN_LAKEHOUSE``, else ``.local/lakehouse``), until the topics are
consumed (``--available-now``) or it is stopped. ``replay`` runs test cases in
the ``flink-cases`` format in one Spark session and writes ``DIR/NAME.json``. ``backfill`` recomputes
the days ``--from``..``--to`` of each ``INSERT INTO`` a day-partitioned table and replaces them in Delta
(:mod:`streamjoin.backfill`); a plan that needs a full rebuild is refused before anything runs.
``kafka`` manages the local broker service (:mod:`streamjoin.connectors.kafka_service`);
``kafka status`` exits with the LSB status codes (0 running, 1 dead with a stale state
file, 3 stopped, 4 alive but not answering), the other commands as below.

An error the user can fix prints one line, ``streamjoin: error: <message>``, to
stderr and no traceback; ``--debug`` (or ``STREAMJOIN_DEBUG=1``) adds the
traceback. Exit status (the table is also in ``docs/cli.md``):

====  ==========================================================================
code  meaning
====  ==========================================================================
0     success
1     run-time failure: an unexpected error (a bug, or Spark failing the query), or a replayed case that failed
2     usage: a bad command line, or an input file that does not exist or cannot be read
3     invalid SQL or arguments (``ValidationError``; the message names file, line, column and rule)
4     valid SQL the engine cannot run with Flink's semantics (``UnsupportedPlanError``)
5     a sink that cannot take the changes (``SinkError``)
6     a malformed changelog or inconsistent operator state (``ChangelogError``, ``StateError``)
7     an external system failed: Kafka cluster, embedded broker (``ConnectorError``)
130   interrupted (Ctrl-C), as shells report SIGINT
====  ==========================================================================
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from streamjoin.errors import (
    ChangelogError,
    ConnectorError,
    EngineError,
    SinkError,
    StateError,
    StreamJoinError,
    UnsupportedPlanError,
    ValidationError,
)

__all__ = ["EXIT_CODES", "exit_code", "main"]

#: Exit status per error class, most specific first (a class maps to the first entry it is an instance of).
EXIT_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (ValidationError, 3),
    (UnsupportedPlanError, 4),
    (SinkError, 5),
    (ChangelogError, 6),
    (StateError, 6),
    (ConnectorError, 7),
    (EngineError, 8),
    (KeyboardInterrupt, 130),
)
_USAGE = 2
_FAILURE = 1

_EPILOG = """exit status:
  0    success
  1    run-time failure: an unexpected error, or a replayed case that failed
  2    usage: bad command line, or an input file that does not exist or cannot be read
  3    invalid SQL or arguments (ValidationError)
  4    SQL the engine cannot run with Flink's semantics (UnsupportedPlanError)
  5    a sink that cannot take the changes (SinkError)
  6    a malformed changelog or inconsistent operator state (ChangelogError, StateError)
  7    Kafka cluster or embedded broker failure (ConnectorError)
  8    the jvm engine's jar is missing or built for another Spark (EngineError)
  130  interrupted
'kafka status' exits 0 running, 1 dead (stale state file), 3 stopped, 4 alive but not answering.
errors print one line, 'streamjoin: error: <message>'; --debug or STREAMJOIN_DEBUG=1 adds the traceback."""


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error: ``streamjoin: error: <message>``, exit status 2."""

    def error(self, message: str):
        self.exit(_USAGE, f"streamjoin: error: {message} (see streamjoin --help)\n")


def _input_file(text: str) -> Path:
    # Checked while parsing, so a missing file is a usage error naming the file, not a traceback.
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: {'is a directory' if path.is_dir() else 'no such file'}")
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text}: permission denied")
    return path


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def _day(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a day YYYY-MM-DD, got {text!r}") from None


def _parser() -> argparse.ArgumentParser:
    debug = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: a subcommand without --debug must not reset a --debug given before it.
    debug.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the traceback of an error (also: STREAMJOIN_DEBUG=1)",
    )
    parser = _Parser(
        prog="streamjoin",
        description="Flink SQL pipelines on Spark Structured Streaming.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[debug],
    )
    commands = parser.add_subparsers(dest="command", required=True)
    sub: dict[str, Any] = {
        "parents": [debug],
        "epilog": _EPILOG,
        "formatter_class": argparse.RawDescriptionHelpFormatter,
    }
    explain = commands.add_parser("explain", help="print the plan of every statement of a SQL file", **sub)
    explain.add_argument("file", type=_input_file)
    explain.add_argument(
        "-i",
        "--init",
        type=_input_file,
        action="append",
        help="initialization script (default: catalog/*.sql next to FILE)",
    )
    run = commands.add_parser(
        "run", help="run the INSERT INTO statements of SQL files against Kafka and Delta, all at once", **sub
    )
    run.add_argument("files", metavar="file", type=_input_file, nargs="+")
    run.add_argument(
        "-i",
        "--init",
        type=_input_file,
        action="append",
        help="initialization script (default: catalog/*.sql next to each FILE)",
    )
    run.add_argument("--available-now", action="store_true", help="process what the topics hold, then stop")
    run.add_argument(
        "--end-of-input",
        action="store_true",
        help="with --available-now: then end the input as Flink's bounded sources do (a +inf watermark "
        "flushes every buffered row); later runs on the same checkpoint are refused",
    )
    run.add_argument(
        "--bootstrap-servers",
        help="Kafka (default: $KAFKA_BOOTSTRAP_SERVERS, else the local broker of "
        "`streamjoin kafka start`, else the tables' properties.bootstrap.servers)",
    )
    run.add_argument("--lakehouse", default=os.environ.get("STREAMJOIN_LAKEHOUSE"))
    run.add_argument(*_ENGINE_ARGS, **_ENGINE_OPTIONS)
    backfill = commands.add_parser(
        "backfill", help="recompute days of a day-partitioned pipeline and replace them in Delta", **sub
    )
    backfill.add_argument("file", type=_input_file)
    backfill.add_argument(
        "-i",
        "--init",
        type=_input_file,
        action="append",
        help="initialization script (default: catalog/*.sql next to FILE)",
    )
    backfill.add_argument("--from", dest="first", type=_day, required=True, help="first day (YYYY-MM-DD, UTC)")
    backfill.add_argument("--to", dest="last", type=_day, required=True, help="last day, inclusive (YYYY-MM-DD, UTC)")
    backfill.add_argument("--bootstrap-servers", help="Kafka, as for run")
    backfill.add_argument("--lakehouse", default=os.environ.get("STREAMJOIN_LAKEHOUSE"))
    backfill.add_argument(*_ENGINE_ARGS, **_ENGINE_OPTIONS)
    replay = commands.add_parser("replay", help="replay flink-cases test cases", **sub)
    replay.add_argument("cases", type=_input_file, nargs="+")
    replay.add_argument("--out-dir", type=Path, required=True)
    replay.add_argument("--micro-batch-rows", type=_positive_int, default=1)
    replay.add_argument(
        "--parallelism",
        type=_positive_int,
        default=None,
        help="cases running at the same time (default: 4 on the jvm engine, 2 on python)",
    )
    replay.add_argument(*_ENGINE_ARGS, **_ENGINE_OPTIONS)
    kafka = commands.add_parser("kafka", help="start, check or stop the local Kafka broker (.local/kafka)", **sub)
    actions = kafka.add_subparsers(dest="action", required=True)
    for action, text in (
        ("start", "start the broker detached, unless it runs (idempotent)"),
        ("status", "is the broker alive and answering a metadata request?"),
        ("stop", "controlled shutdown of the broker, then remove its state file"),
    ):
        command = actions.add_parser(action, help=text, **sub)
        command.add_argument("--data-dir", type=Path, default=None, help="the broker's folder (default: .local/kafka)")
        if action == "start":
            command.add_argument("--port", type=_port, default=None, help="port on 127.0.0.1 (default: a free one)")
    return parser


def _port(text: str) -> int:
    value = _positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be a port in 1..65535, got {text!r}")
    return value


_ENGINE_ARGS = ("--engine",)
_ENGINE_OPTIONS: dict[str, Any] = {
    "choices": ["jvm", "python"],
    "default": os.environ.get("STREAMJOIN_ENGINE", "jvm"),
    "help": "operator engine (default: $STREAMJOIN_ENGINE, else jvm)",
}


def _spark(engine: str):
    from streamjoin.jvm import ENGINE_CONF
    from streamjoin.session import spark_session

    spark = spark_session("streamjoin-cli")
    spark.conf.set(ENGINE_CONF, engine)
    return spark


def _explain(args) -> int:
    from streamjoin.planner import Flink, load_script
    from streamjoin.sink.delta import merge_warning

    script = load_script(args.file, args.init)
    for statement in script.statements:
        print(f"-- {statement.statement.sql(dialect=Flink)[:120]}")
        print(statement.explain)
        table = statement.sink_table
        if table is not None and table.connector == "delta" and table.primary_key:
            # What `run` would also log before its first micro-batch: said here, before anything runs.
            warning = merge_warning(table.name, table.primary_key, table.partition_keys)
            if warning:
                print(f"[WARNING] {warning}")
        print()
    for text in script.explains:
        print(text)
        print()
    return 0


def _run(args) -> int:
    from streamjoin.config import local_dir
    from streamjoin.pipeline import Lakehouse, check_one_pipeline_per_table, run_pipelines
    from streamjoin.planner import load_script, sql_pipelines

    scripts = [load_script(file, args.init) for file in args.files]
    lakehouse = Lakehouse(args.lakehouse or str(local_dir("lakehouse")))
    pipelines = []
    for file, script in zip(args.files, scripts):
        found = sql_pipelines(script)
        if not found:
            raise ValidationError(f"{file}: no INSERT INTO statement to run")
        pipelines += found
    check_one_pipeline_per_table(pipelines)  # before Spark starts
    if args.end_of_input and not args.available_now:
        raise ValidationError("--end-of-input ends a bounded run: use it with --available-now")
    servers = _kafka_servers(args, pipelines)
    spark = _spark(args.engine)
    if args.available_now and any(script.state_ttl_ms is not None for script in scripts):
        # State TTL runs the operators in processing-time mode, where Spark keeps planning empty
        # micro-batches and an availableNow query would never end.
        spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    runs = run_pipelines(
        pipelines,
        spark,
        lakehouse,
        servers,
        available_now=args.available_now,
        end_of_input=args.end_of_input,
        on_progress=lambda p: print(f"{p.name} batch {p.batchId}: {p.numInputRows} records", flush=True),
    )
    for name, run in runs.items():
        print(f"{name}: {run.batches} micro-batches, records read {run.records_read}")
    return 0


def _kafka_servers(args, pipelines) -> str:
    """``--bootstrap-servers``, else ``$KAFKA_BOOTSTRAP_SERVERS``, else the tables' servers, else the local broker."""
    from streamjoin.connectors.kafka_service import resolve_bootstrap_servers
    from streamjoin.planner import bootstrap_servers

    try:
        declared = bootstrap_servers(pipelines)
    except UnsupportedPlanError:  # none declared, or several: the setting, environment or local service decide
        declared = None
    return resolve_bootstrap_servers(args.bootstrap_servers, declared=declared)


def _backfill(args) -> int:
    from streamjoin.backfill import backfill, check_backfillable
    from streamjoin.config import local_dir
    from streamjoin.pipeline import Lakehouse
    from streamjoin.planner import load_script, sql_pipelines

    pipelines = sql_pipelines(load_script(args.file, args.init))
    if not pipelines:
        raise ValidationError(f"{args.file}: no INSERT INTO statement to backfill")
    if args.last < args.first:
        raise ValidationError(f"--to {args.last} is before --from {args.first}")
    for pipeline in pipelines:
        check_backfillable(pipeline)  # every pipeline of the file, before any runs
    servers = _kafka_servers(args, pipelines)
    lakehouse = Lakehouse(args.lakehouse or str(local_dir("lakehouse")))
    spark = _spark(args.engine)
    for pipeline in pipelines:
        result = backfill(pipeline, spark, lakehouse, servers, args.first, args.last)
        print(
            f"{pipeline.name}: days {result.first}..{result.last} replaced: {result.rows} rows, "
            f"{result.changes} changes; records read {result.run.records_read}; rowtime windows {result.windows}",
            flush=True,
        )
    return 0


def _replay(args) -> int:
    from streamjoin.testing import replay_cases

    results = replay_cases(
        _spark(args.engine),
        args.cases,
        args.out_dir,
        micro_batch_rows=args.micro_batch_rows,
        parallelism=args.parallelism,
    )
    failed = 0
    for name, result in results.items():
        status = f"error: {result['error']}" if "error" in result else f"{len(result['final'])} final rows"
        print(f"{name}: {status}")
        failed += "error" in result
    return 1 if failed else 0


def _kafka(args) -> int:
    from streamjoin.connectors.kafka_service import (
        STATE_FILE,
        ServiceStatus,
        service_status,
        start_service,
        stop_service,
    )

    if args.action == "start":
        state, started = start_service(args.data_dir, port=args.port)
        verb = "started" if started else "already running"
        print(
            f"Kafka {verb} at {state.bootstrap_servers} (pid {state.pid}, data {state.data_dir}, log {state.log_path})"
        )
        return 0
    if args.action == "stop":
        stopped, clean = stop_service(args.data_dir)
        if stopped is None:
            print("Kafka is not running")
        else:
            how = "controlled shutdown" if clean else "killed: no controlled shutdown in time"
            print(f"Kafka stopped at {stopped.bootstrap_servers} (pid {stopped.pid}, {how}; log {stopped.log_path})")
        return 0
    status, found = service_status(args.data_dir)
    if status == ServiceStatus.STOPPED:
        print("Kafka stopped: start it with `make kafka` or `streamjoin kafka start`")
    elif status == ServiceStatus.DEAD:
        assert found is not None  # only a stopped broker has none
        print(
            f"Kafka dead: pid {found.pid} of {Path(found.data_dir) / STATE_FILE} is gone (see {found.log_path}); "
            "`streamjoin kafka start` replaces it"
        )
    else:
        assert found is not None
        health = "running" if status == ServiceStatus.RUNNING else "not answering a metadata request"
        print(
            f"Kafka {health} at {found.bootstrap_servers} (pid {found.pid}, since {found.started_at}, "
            f"data {found.data_dir}, log {found.log_path})"
        )
    return int(status)


def exit_code(error: BaseException) -> int:
    """The exit status of ``error`` (:data:`EXIT_CODES`; 1 for any other exception)."""
    return next((code for kind, code in EXIT_CODES if isinstance(error, kind)), _FAILURE)


def unexpected_error_summary(error: BaseException) -> str:
    """One line for an exception that is not one of ours: a bug, or Spark failing the query.

    Its first line says what failed. When the failure was a Python exception in a ``foreachBatch`` function
    (Spark's ``FOREACH_BATCH_USER_FUNCTION_ERROR``: the sink's writers run there), the first line ends in
    ``Traceback (most recent call last):`` and the exception is on the traceback's last line, many lines
    down: it is appended, so the one line names it (``... Return Message: ValueError: boom``).
    """
    lines = str(error).strip().splitlines()
    if not lines:
        return ""
    first = lines[0]
    traceback_start = "Traceback (most recent call last):"
    if first.endswith(traceback_start):
        # The exception raised is the first unindented line after the last frame (a chained traceback has
        # several; an exception's message may run over several lines).
        last_frame = max((i for i, line in enumerate(lines) if line.startswith('  File "')), default=0)
        raised = next((line for line in lines[last_frame + 1 :] if line and not line[0].isspace()), "")
        if raised:
            first = first[: -len(traceback_start)] + raised.strip()
    return first


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``streamjoin`` console script; returns the exit status (see the module docstring).

    Usage errors exit through argparse (``SystemExit(2)``); every other error becomes one line on stderr.
    """
    args = _parser().parse_args(argv)
    debug = getattr(args, "debug", False) or os.environ.get("STREAMJOIN_DEBUG", "") not in ("", "0")
    try:
        return {"explain": _explain, "run": _run, "replay": _replay, "backfill": _backfill, "kafka": _kafka}[
            args.command
        ](args)
    except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001 - every error becomes one line on stderr
        if debug:
            traceback.print_exc()
        if isinstance(e, KeyboardInterrupt):
            message = "interrupted"
        elif isinstance(e, StreamJoinError):
            message = str(e)
        else:
            message = f"unexpected {type(e).__name__}: {unexpected_error_summary(e)}" + (
                "" if debug else " (--debug shows the traceback)"
            )
        print(f"streamjoin: error: {message}", file=sys.stderr)
        return exit_code(e)


if __name__ == "__main__":
    sys.exit(main())
