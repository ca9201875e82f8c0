"""``make bench``: every operator on Spark native, streamjoin's ``jvm`` and ``python`` engines and Apache Flink,
on the same TPC-H rows, then each ``sql/`` pipeline end to end beside a Kafka → Delta passthrough.

    .venv/bin/python -m bench.run --scale-factor 0.1 --batches 10 --record bench/RESULTS.md

1. The input (:mod:`bench.tpch_streams`): TPC-H at ``--scale-factor`` (insert-only) plus the ECB rates,
   cut into ``--batches`` aligned micro-batches; Parquet files for Spark, CSV files for Flink.
2. Flink (:mod:`bench.flink_job`, a subprocess in Flink's venv): each query's SQL
   (:mod:`bench.operators`) on all rows, parallelism 1, after a warm-up phase on a few rows; the
   figure is the job's net runtime (JVM start excluded).
3. Spark, one session, each query into the ``noop`` sink (:mod:`bench.harness`): Spark's native
   query where Spark has the operator and streamjoin on the ``jvm`` engine on all micro-batches,
   streamjoin on the ``python`` engine on the first ``--python-batches`` (2 by default; the same rows and
   batch size, a prefix: on all of them python alone would take twice as long as the rest of the run), each
   after a warm-up run on a few rows. The jvm/python ratio compares the two engines over the same micro-batches:
   rows/s from the durations of the first ``--python-batches`` micro-batches of each (a prefix against the
   whole input would favour python, whose state is then smaller and fewer timers have fired). The engine is
   ``spark.streamjoin.engine``, set before each query is built; an operator without a Scala twin runs on python
   even on ``jvm``, and the table says so.
4. Pipelines (:mod:`bench.pipelines`) at ``--pipeline-scale-factor``.

``--only QUERY...`` runs only the matching operator queries (steps 1 to 3, no pipelines), ``--engines`` picks the
engines they run on: e.g. ``--only 'group' --engines native,jvm`` measures one operator before and after a change.

It prints the figures and the ratios and appends them, with the command, the machine and the load
averages at start and end, to ``--record`` (``bench/RESULTS.md`` by default).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyspark

from bench.harness import Measurement, failed, load, machine, measure
from bench.operators import CASES, STATE_GROWTH, Case
from bench.pipelines import run_pipelines
from bench.tpch_streams import BenchTable, bench_tables, flink_ddl, spark_streams, tpch_changelog, write_csv
from streamjoin.config import PROJECT_ROOT, local_dir
from streamjoin.jvm import ENGINE_CONF
from streamjoin.session import spark_session

#: Rows per table of the warm-up input (one micro-batch).
WARMUP_ROWS = 500
FLINK_PYTHON = PROJECT_ROOT / ".local" / "flink-venv" / "bin" / "python"
ENGINES = ("native", "jvm", "python", "flink")
HEADER = (
    "| query | engine | input rows | micro-batches | seconds | rows/s | batch p50 ms | batch p95 ms "
    "| state rows | state MiB |\n"
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale-factor", type=float, default=0.1)
    parser.add_argument("--batches", type=int, default=10, help="micro-batches of the operator input")
    parser.add_argument(
        "--python-batches", type=int, default=2, help="the prefix of micro-batches the python engine runs (default: 2)"
    )
    parser.add_argument("--pipeline-scale-factor", type=float, default=None, help="default: scale factor / 10")
    parser.add_argument(
        "--record",
        type=Path,
        default=PROJECT_ROOT / "bench" / "RESULTS.md",
        help="the Markdown file the results are appended to",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="QUERY",
        default=None,
        help="run only the operator queries whose name contains one of these (e.g. 'interval inner' "
        "'group'), without the pipelines",
    )
    parser.add_argument(
        "--pipelines-only",
        action="store_true",
        help="run only the sql/ pipelines beside their passthrough (no operator queries, no Flink)",
    )
    parser.add_argument(
        "--engines",
        default=",".join(ENGINES),
        help=f"comma-separated engines the operator queries run on (default: {','.join(ENGINES)})",
    )
    parser.add_argument(
        "--flink-state-backend",
        choices=("hashmap", "rocksdb"),
        default="hashmap",
        help="Flink's state backend (default: hashmap, Flink's own default: state as objects on the heap; "
        "rocksdb: serialized in RocksDB, as Spark's transformWithState keeps it)",
    )
    args = parser.parse_args()
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(args.engines) - set(ENGINES)
    if unknown:
        parser.error(f"unknown engine(s) {', '.join(sorted(unknown))}: {', '.join(ENGINES)}")
    args.python_batches = min(args.python_batches, args.batches)
    if args.pipeline_scale_factor is None:
        args.pipeline_scale_factor = args.scale_factor / 10
    return args


def _row(m: Measurement, engine: str) -> str:
    return (
        f"| {m.name} | {engine} | {m.input_rows:,} | {m.batches} | {m.seconds:.1f} | {m.rows_per_second:,.0f} | "
        f"{m.batch_ms_p50:,.0f} | {m.batch_ms_p95:,.0f} | {m.state_rows:,} | {m.state_bytes / 2**20:,.1f} |"
    )


def _runs_python(df) -> bool:
    """Whether the query's stateful operator runs on python (PySpark's ``transformWithState``)."""
    return "TransformWithStateInPySpark" in df._jdf.queryExecution().logical().toString()


def _selected(args) -> list[Case]:
    """The operator queries ``--only`` names (all by default)."""
    return [case for case in CASES if not args.only or any(q.lower() in case.name.lower() for q in args.only)]


def run_flink(
    cases: list[Case], tables: dict[str, BenchTable], workdir: Path, state_backend: str = "hashmap"
) -> dict[str, dict]:
    """The cases' SQL on Flink (warm-up phase on ``WARMUP_ROWS`` rows per table, then all rows), with
    ``state_backend`` as Flink's ``state.backend.type``.

    Returns:
        ``{case name: {"ms": net runtime} or {"error": text}}`` of the measured phase.

    Raises:
        FileNotFoundError: when Flink's venv is missing (``make flink`` makes it).
        subprocess.CalledProcessError: when the Flink process fails.
    """
    if not FLINK_PYTHON.exists():
        raise FileNotFoundError(f"{FLINK_PYTHON} is missing: `make flink` installs Apache Flink")
    queries = [
        {"name": c.name, "sql": c.sql, "settings": {"state.backend.type": state_backend, **dict(c.flink_settings)}}
        for c in cases
    ]
    phases = []
    for phase, phase_tables in (
        ("warm-up", {n: t.prefix(1, WARMUP_ROWS) for n, t in tables.items()}),
        ("measured", tables),
    ):
        ddl = [flink_ddl(t, write_csv(t, workdir / phase)) for t in phase_tables.values()]
        phases.append({"name": phase, "ddl": ddl, "queries": queries})
    job, result = workdir / "job.json", workdir / "result.json"
    job.write_text(json.dumps({"parallelism": 1, "phases": phases}))
    subprocess.run(
        [str(FLINK_PYTHON), str(PROJECT_ROOT / "bench" / "flink_job.py"), str(job), str(result)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return json.loads(result.read_text())["measured"]


def run_operators(
    spark, tables: dict[str, BenchTable], args, workdir: Path
) -> list[tuple[Case, dict[str, tuple[Measurement, str]]]]:
    """Each case, after a warm-up run, on Spark native, ``jvm`` (all micro-batches) and ``python`` (``--python-batches``
    micro-batches).

    Returns:
        Per case, ``{"native" | "jvm" | "python": (figures, note)}``.
    """
    inputs = {
        "warm-up": spark_streams(
            spark, {n: t.prefix(1, WARMUP_ROWS) for n, t in tables.items()}, workdir / "input-warmup"
        ),
        "all": spark_streams(spark, tables, workdir / "input-all"),
    }
    python_input = "all"
    if args.python_batches < args.batches:
        python_input = "prefix"
        inputs["prefix"] = spark_streams(
            spark, {n: t.prefix(args.python_batches) for n, t in tables.items()}, workdir / "input-prefix"
        )
    runs = [
        (engine, input_name)
        for engine, input_name in (("native", "all"), ("jvm", "all"), ("python", python_input))
        if engine in args.engines
    ]
    results = []
    print(HEADER, flush=True)
    for index, case in enumerate(_selected(args)):
        figures = {}
        for engine, input_name in runs:
            if engine == "native" and case.native is None:
                continue
            mode = case.native_mode if engine == "native" else "append"
            if engine != "native":
                spark.conf.set(ENGINE_CONF, engine)
            try:
                for phase, streams in (("warmup", inputs["warm-up"]), ("run", inputs[input_name])):
                    query = case.native(streams) if engine == "native" else case.ours(streams)
                    measured = measure(
                        case.name, query, workdir / "checkpoints" / f"{index}-{engine}-{phase}", output_mode=mode
                    )
                note = "runs on python: no Scala twin yet" if engine == "jvm" and _runs_python(query) else ""
            except Exception as e:  # noqa: BLE001 - recorded in the table; the other runs go on
                measured, note = failed(case.name, e), ""
            if engine == "python" and args.python_batches < args.batches:
                note = f"first {args.python_batches} of {args.batches} micro-batches"
            figures[engine] = (measured, note)
            print(_row(measured, engine + (f" ({note})" if note else "")), flush=True)
        results.append((case, figures))
    return results


def _ratio(a: float, b: float | None) -> str:
    return f"{a / b:.2f}×" if b else "—"


def report(args, operators, flink, pipelines, tables: dict[str, BenchTable], started: str, load_start: str) -> str:
    """The Markdown section: command, machine, load, the figures and the ratios."""
    command = f"python -m bench.run {shlex.join(sys.argv[1:])}".strip() + f"   # make bench SF={args.scale_factor:g}"
    lines = [
        (
            f"## make bench, pipelines only: sf {args.pipeline_scale_factor:g} ({started})"
            if args.pipelines_only
            else f"## make bench: sf {args.scale_factor:g}, {args.batches} micro-batches ({started})"
        ),
        "",
        "```",
        command,
        "```",
        "",
        (
            f"{machine()}, pyspark {pyspark.__version__}, Apache Flink 2.3.0 (parallelism 1, state backend "
            f"{args.flink_state_backend}); load averages (1/5/15 min) "
            f"at start {load_start}, at end {load()}."
        ),
        "",
        "Operators (input: "
        + ", ".join(f"{t.name} {t.rows:,} rows" for t in tables.values())
        + "; "
        + (
            f"python engine on the first {args.python_batches} of {args.batches} micro-batches; "
            if args.python_batches < args.batches
            else ""
        )
        + "Flink: net job runtime, "
        "JVM start excluded, job scheduling in the MiniCluster and CSV parsing included, no micro-batches, state not "
        "reported; Flink ends its bounded input with a +∞ watermark, Spark's queries do not):",
        "",
        HEADER,
    ]
    if args.only:
        lines[lines.index(HEADER) - 2] += f" Only the queries matching {', '.join(map(repr, args.only))}, no pipelines."
    if args.pipelines_only:
        del lines[lines.index(HEADER) - 2 :]
    else:
        lines += _operator_lines(args, operators, flink, tables)
    if not pipelines:
        return "\n".join(lines) + "\n"
    lines += [
        "",
        (
            f"Pipelines end to end, Kafka → Delta (TPC-H sf {args.pipeline_scale_factor:g} with updates and deletes, "
            "jvm engine, an operator without a Scala twin runs on python; rows = the records on its Kafka topics, "
            "seconds = the whole run_pipeline call, its dead-letter query included):"
        ),
        "",
        HEADER,
    ]
    for ours, limit in pipelines:
        lines += [_row(ours, "jvm"), _row(limit, "passthrough")]
    lines += ["", "| pipeline | pipeline / passthrough |", "| --- | ---: |"]
    lines += [
        f"| {ours.name.removeprefix('pipeline ')} | {_ratio(ours.rows_per_second, limit.rows_per_second)} |"
        for ours, limit in pipelines
    ]
    return "\n".join(lines) + "\n"


def _operator_lines(args, operators, flink, tables: dict[str, BenchTable]) -> list[str]:
    """The operator queries' rows (every engine and Flink), their ratios and the state-growth line."""
    lines = []
    for case, figures in operators:
        for engine, (m, note) in figures.items():
            lines.append(_row(m, engine + (f" ({note})" if note else "")))
        rows = sum(tables[t].rows for t in case.tables)
        outcome = flink.get(case.name, {"error": "not run"})
        if "ms" in outcome:
            lines.append(
                f"| {case.name} | Flink (net job runtime) | {rows:,} | — | {outcome['ms'] / 1000:.1f} | "
                f"{rows / (outcome['ms'] / 1000):,.0f} | — | — | — | — |"
            )
    prefix = args.python_batches
    over = f" (jvm / python: over the first {prefix} micro-batches of each)" if prefix < args.batches else ""
    lines += [
        "",
        f"Ratios of rows/s (jvm as a multiple of the other){over}:",
        "",
        "| query | jvm / native | jvm / python | jvm / Flink | note |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for case, figures in operators:
        if "jvm" not in figures:
            continue
        jvm, jvm_note = figures["jvm"]
        native, python = figures.get("native"), figures.get("python")
        outcome = flink.get(case.name, {})
        flink_rate = sum(tables[t].rows for t in case.tables) / (outcome["ms"] / 1000) if "ms" in outcome else None
        note = "; ".join(
            n
            for n in (
                case.no_native and f"no native: {case.no_native}",
                jvm_note,
                outcome.get("error", "") and f"Flink: {outcome['error']}",
            )
            if n
        )
        lines.append(
            f"| {case.name} | {_ratio(jvm.rows_per_second, native[0].rows_per_second if native else None)} | "
            f"{_ratio(jvm.rows_per_second_over(prefix), python[0].rows_per_second_over(prefix) if python else None)} | "
            f"{_ratio(jvm.rows_per_second, flink_rate)} | {note} |"
        )
    return lines + _state_growth(operators, flink, tables, prefix)


def _state_growth(operators, flink, tables: dict[str, BenchTable], prefix: int) -> list[str]:
    """The lines on the cost per row when the state per key grows 10× (:data:`bench.operators.STATE_GROWTH`): each
    coarse query's rows/s as a multiple of its fine query's, per engine (python over the first ``prefix``
    micro-batches, as its other figures) and Flink."""
    cases = {case.name: (case, figures) for case, figures in operators}
    lines = []
    for fine_name, coarse_name, grown in STATE_GROWTH:
        if fine_name not in cases or coarse_name not in cases:
            continue
        (fine_case, fine), (_, coarse) = cases[fine_name], cases[coarse_name]
        parts = []
        for engine in ("jvm", "python"):
            if engine in fine and engine in coarse:
                rate = (
                    (lambda m: m.rows_per_second_over(prefix)) if engine == "python" else (lambda m: m.rows_per_second)
                )
                parts.append(f"{engine} {_ratio(rate(coarse[engine][0]), rate(fine[engine][0]))}")
        if "ms" in flink.get(fine_name, {}) and "ms" in flink.get(coarse_name, {}):
            parts.append(f"Flink {_ratio(1 / flink[coarse_name]['ms'], 1 / flink[fine_name]['ms'])}")
        rows = sum(tables[t].rows for t in fine_case.tables)
        lines += [
            "",
            f"Cost per row as the state per key grows 10×, {fine_name} (the same {rows:,} rows, {grown}): "
            f"rows/s as a multiple of the fine query's (flat: 1.00×): " + ", ".join(parts) + ".",
        ]
    return lines


def main() -> None:
    args = _arguments()
    load_start, started, clock = load(), dt.datetime.now().strftime("%Y-%m-%d %H:%M"), time.perf_counter()
    workdir = local_dir("bench", "run")
    shutil.rmtree(workdir)
    tables = {} if args.pipelines_only else bench_tables(tpch_changelog(args.scale_factor), args.batches)
    print(f"TPC-H sf {args.scale_factor:g}: " + ", ".join(f"{t.name} {t.rows:,}" for t in tables.values()), flush=True)
    flink = (
        {}
        if args.pipelines_only or "flink" not in args.engines
        else run_flink(_selected(args), tables, workdir / "flink", args.flink_state_backend)
    )
    print("Flink: " + ", ".join(f"{name} {outcome}" for name, outcome in flink.items()), flush=True)
    spark = spark_session("bench", conf={"spark.sql.streaming.numRecentProgressUpdates": "1000"})
    operators = [] if args.pipelines_only else run_operators(spark, tables, args, workdir)
    spark.conf.set(ENGINE_CONF, "jvm")
    pipelines = [] if args.only else run_pipelines(spark, args.pipeline_scale_factor, workdir / "pipelines")
    section = report(args, operators, flink, pipelines, tables, started, load_start)
    section += f"\nWhole run: {(time.perf_counter() - clock) / 60:.1f} min.\n"
    print("\n" + section)
    with args.record.open("a") as out:
        out.write("\n" + section)


if __name__ == "__main__":
    main()
