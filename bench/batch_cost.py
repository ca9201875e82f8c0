"""The fixed cost of one micro-batch: stored differential cases replayed at one row per micro-batch.

    .venv/bin/python -m bench.batch_cost                       # 12 cases, jvm engine, one query at a time
    .venv/bin/python -m bench.batch_cost --cases 24 --parallelism 4 --engine python
    .venv/bin/python -m bench.batch_cost --conf spark.sql.streaming.stateStore.checkpointFormatVersion=2
    .venv/bin/python -m bench.batch_cost --cases 33 --parallelism 4 --shared 1 4 8

Each case of ``tests/data/flink-diff/cases`` (the first ``--cases`` in name order) runs through
:func:`streamjoin.testing.replay.replay_cases` as the suite replays it: a streaming query over one-row
micro-batches, the changelog collected by ``foreachBatch``. A listener averages Spark's progress
``durationMs`` (ms) over the micro-batches that read rows; the wall time per micro-batch counts every
micro-batch, no-data ones included. Two cases run first, unmeasured (class loading, JIT). ``--conf`` compares a
Spark setting against the session's default on the same cases (two runs, back to back, in one session). ``--shared``
replays the same cases once per value, that many to a streaming query where they may share one (``replay_cases``'
``shared``; 1: each case alone). Prints one table row per run; nothing is written.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from bench.harness import load, machine
from streamjoin.config import PROJECT_ROOT

__all__ = ["main"]

CASES = PROJECT_ROOT / "tests" / "data" / "flink-diff" / "cases"
PHASES = ("latestOffset", "getBatch", "queryPlanning", "walCommit", "addBatch", "commitOffsets", "triggerExecution")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=12, help="stored cases replayed, first in name order (default 12)")
    parser.add_argument("--engine", choices=["jvm", "python"], default="jvm")
    parser.add_argument("--parallelism", type=int, default=1, help="cases replayed at once (default 1)")
    parser.add_argument(
        "--shared",
        type=int,
        nargs="+",
        default=None,
        metavar="N",
        help="cases to a streaming query, one run per value (default: replay_cases' own)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for a second run, compared with the first (repeatable)",
    )
    return parser.parse_args(argv)


class _Durations:
    """Sums of the progress ``durationMs`` of the micro-batches that read rows, and their count."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.sums: dict[str, float] = defaultdict(float)
            self.batches = 0
            self.all_batches = 0

    def add(self, progress_json: str) -> None:
        progress = json.loads(progress_json)
        with self._lock:
            self.all_batches += 1
            if progress["numInputRows"]:
                self.batches += 1
                for phase, ms in progress["durationMs"].items():
                    self.sums[phase] += ms


def _listener(durations: _Durations):
    from pyspark.sql.streaming import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:
            durations.add(event.progress.json)

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            pass

    return Listener()


def _run(spark, paths: list[Path], parallelism: int, durations: _Durations, label: str, shared: int) -> str:
    from streamjoin.testing.replay import replay_cases

    durations.reset()
    load_before = load().split(" / ")[0]
    with tempfile.TemporaryDirectory() as out:
        started = time.monotonic()
        results = replay_cases(spark, paths, out, micro_batch_rows=1, parallelism=parallelism, shared=shared)
        wall = time.monotonic() - started
    time.sleep(2)  # the listener bus delivers the last progress events after the queries end
    errors = sum("error" in r for r in results.values())
    means = [durations.sums[p] / max(durations.batches, 1) for p in PHASES]
    return (
        f"| {label} | {durations.batches} / {durations.all_batches} | {wall:.1f} | "
        f"{wall / max(durations.all_batches, 1):.3f} | "
        + " | ".join(f"{m:.0f}" for m in means)
        + f" | {load_before} → {load().split(' / ')[0]} | {errors} |"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the measurement (module docstring) and print the table."""
    from streamjoin.jvm import ENGINE_CONF
    from streamjoin.session import spark_session
    from streamjoin.testing.replay import SHARED_QUERY_CASES

    args = _arguments(argv)
    shared = args.shared or [SHARED_QUERY_CASES]
    spark = spark_session("streamjoin-batch-cost")
    spark.conf.set(ENGINE_CONF, args.engine)
    durations = _Durations()
    spark.streams.addListener(_listener(durations))
    # The chains of operators (chain_*, up to 240 rows each) would change what the first cases in name order are.
    paths = sorted(p for p in CASES.glob("*.json") if not p.name.startswith("chain_"))[: args.cases]
    print(f"{len(paths)} cases, {args.engine} engine, {args.parallelism} at once, one row per micro-batch; {machine()}")
    print(
        "| run | micro-batches with rows / all | wall s | wall s per micro-batch | "
        + " | ".join(f"{p} ms" for p in PHASES)
        + " | load | failed cases |"
    )
    print("|---|---|---:|---:|" + "---:|" * len(PHASES) + "---|---:|")
    _run(spark, paths[:2], args.parallelism, durations, "warm-up", 1)  # class loading and JIT, not measured
    for n in shared:
        print(_run(spark, paths, args.parallelism, durations, f"session defaults, {n} to a query", n), flush=True)
    if args.conf:
        for setting in args.conf:
            key, _, value = setting.partition("=")
            spark.conf.set(key, value)
        label = ", ".join(f"`{c}`" for c in args.conf) + f", {shared[0]} to a query"
        print(_run(spark, paths, args.parallelism, durations, label, shared[0]), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
