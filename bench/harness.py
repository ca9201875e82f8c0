"""Measure streaming queries the same way, so that operators can be compared in one run.

A benchmark feeds each query the same micro-batches (Parquet files read one
per trigger, ``trigger(availableNow=True)``), writes to Spark's ``noop`` sink
and reads Spark's own progress reports: input rows, per-batch processing time
(``durationMs.triggerExecution``), state rows and state memory of the stateful
operators after the last batch.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from streamjoin.config import local_dir
from streamjoin.session import spark_session


@dataclass
class Measurement:
    """One query's figures: rows/s over the whole run, batch latency (ms), state after the last batch."""

    name: str
    input_rows: int
    batches: int
    seconds: float
    batch_ms_p50: float
    batch_ms_p95: float
    state_rows: int
    state_bytes: int

    @property
    def rows_per_second(self) -> float:
        return self.input_rows / self.seconds if self.seconds else 0.0

    def row(self) -> str:
        return (
            f"| {self.name} | {self.input_rows:,} | {self.batches} | {self.seconds:.1f} | {self.rows_per_second:,.0f} | "
            f"{self.batch_ms_p50:,.0f} | {self.batch_ms_p95:,.0f} | {self.state_rows:,} | {self.state_bytes / 2**20:,.1f} |"
        )


HEADER = (
    "| query | input rows | micro-batches | seconds | rows/s | batch p50 ms | batch p95 ms | state rows | state MiB |\n"
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
)


def measure(
    name: str, query: DataFrame, checkpoint: Path, *, timeout_s: float = 3600, output_mode: str = "append"
) -> Measurement:
    """Run ``query`` to the end of its input into the noop sink and return its figures.

    ``output_mode`` is the sink's (``"update"`` for Spark's native streaming aggregation).

    Raises:
        TimeoutError: when the query does not finish within ``timeout_s`` seconds.
    """
    start = time.perf_counter()
    running = (
        query.writeStream.format("noop")
        .outputMode(output_mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .queryName(name.replace(" ", "_"))
        .start()
    )
    if not running.awaitTermination(timeout_s):
        running.stop()
        raise TimeoutError(f"{name} did not finish within {timeout_s} s")
    seconds = time.perf_counter() - start
    progress = [p for p in running.recentProgress if p.numInputRows > 0]
    durations = sorted(p.durationMs["triggerExecution"] for p in progress)
    last = running.recentProgress[-1]
    return Measurement(
        name=name,
        input_rows=sum(p.numInputRows for p in progress),
        batches=len(progress),
        seconds=seconds,
        batch_ms_p50=statistics.median(durations) if durations else 0.0,
        batch_ms_p95=durations[min(len(durations) - 1, int(len(durations) * 0.95))] if durations else 0.0,
        state_rows=sum(op.numRowsTotal for op in last.stateOperators),
        state_bytes=sum(op.memoryUsedBytes for op in last.stateOperators),
    )


def run_all(
    queries: list[tuple[str, Callable[[], DataFrame]] | tuple[str, Callable[[], DataFrame], str]], workdir: Path,
    *, warmup: bool = True,
) -> list[Measurement]:
    """Measure each ``(name, build)`` in turn (``build`` returns a fresh streaming DataFrame) and print a table.

    A query given as ``(name, build, output_mode)`` is written in that output mode (default ``"append"``).
    With ``warmup``, every query first runs once unmeasured (its own checkpoint), so that no query
    pays the session's first-use costs (JIT, Python workers, Delta and Kafka classes) for the others.
    """
    results = []
    if warmup:
        for index, (name, build, *mode) in enumerate(queries):
            measure(f"warm-up {name}", build(), workdir / f"warmup-{index}", output_mode=mode[0] if mode else "append")
    print(HEADER)
    for index, (name, build, *mode) in enumerate(queries):
        result = measure(name, build(), workdir / f"checkpoint-{index}", output_mode=mode[0] if mode else "append")
        print(result.row(), flush=True)
        results.append(result)
    return results


def bench_setup(name: str, description: str) -> tuple[argparse.Namespace, SparkSession, Path]:
    """The common start of a benchmark script: ``--scale-factor`` / ``--batches`` arguments, a wiped
    work folder ``.local/bench/<name>``, and a Spark session that keeps every progress report.

    Returns:
        ``(arguments, session, work folder)``.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--scale-factor", type=float, default=0.05)
    parser.add_argument("--batches", type=int, default=10)
    args = parser.parse_args()
    workdir = local_dir("bench", name)
    shutil.rmtree(workdir)
    spark = spark_session(f"bench-{name}", conf={"spark.sql.streaming.numRecentProgressUpdates": "1000"})
    print(f"TPC-H sf {args.scale_factor:g}, {args.batches} micro-batches, Spark {spark.version}, shuffle partitions "
          f"{spark.conf.get('spark.sql.shuffle.partitions')}")
    return args, spark, workdir
