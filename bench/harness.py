"""Measure streaming queries the same way, so that operators can be compared in one run.

A benchmark feeds each query the same micro-batches (Parquet files read one
per trigger, ``trigger(availableNow=True)``), writes to Spark's ``noop`` sink
(or Delta) and reads Spark's own progress reports: input rows, per-batch processing time
(``durationMs.triggerExecution``), state rows and state memory of the stateful
operators after the last batch.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame


@dataclass
class Measurement:
    """One query's figures: rows/s over the whole run, batch latency (ms), state after the last batch, and each
    micro-batch that read rows, in order, as ``(input rows, triggerExecution ms)`` (``per_batch``)."""

    name: str
    input_rows: int
    batches: int
    seconds: float
    batch_ms_p50: float
    batch_ms_p95: float
    state_rows: int
    state_bytes: int
    per_batch: tuple[tuple[int, float], ...] = ()

    @property
    def rows_per_second(self) -> float:
        return self.input_rows / self.seconds if self.seconds else 0.0

    def rows_per_second_over(self, batches: int) -> float:
        """Rows/s over the first ``batches`` micro-batches that read rows, from their own durations (the
        query's start and end excluded): what compares two runs over the same prefix of one input."""
        first = self.per_batch[:batches]
        ms = sum(d for _, d in first)
        return sum(r for r, _ in first) / (ms / 1000) if ms else 0.0


def failed(name: str, error: Exception) -> Measurement:
    """A run that failed: zero figures, the error's first line (200 characters) in its name, so that one
    failure (e.g. a Python worker timing out on a loaded machine) does not lose a whole benchmark run."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
    print(f"{name} failed: {first}", flush=True)
    return Measurement(f"{name} (failed: {first})", 0, 0, 0.0, 0.0, 0.0, 0, 0)


def from_progress(name: str, progress: list, seconds: float, *, input_rows: int | None = None) -> Measurement:
    """The figures of a run of ``seconds`` from its progress reports (Spark's ``StreamingQueryProgress``);
    ``input_rows`` overrides the sum of their ``numInputRows``."""
    busy = [p for p in progress if p.numInputRows > 0]
    durations = sorted(p.durationMs["triggerExecution"] for p in busy)
    last = progress[-1] if progress else None
    return Measurement(
        name=name,
        input_rows=sum(p.numInputRows for p in busy) if input_rows is None else input_rows,
        batches=len(busy),
        seconds=seconds,
        batch_ms_p50=statistics.median(durations) if durations else 0.0,
        batch_ms_p95=durations[min(len(durations) - 1, int(len(durations) * 0.95))] if durations else 0.0,
        state_rows=sum(op.numRowsTotal for op in last.stateOperators) if last else 0,
        state_bytes=sum(op.memoryUsedBytes for op in last.stateOperators) if last else 0,
        per_batch=tuple((p.numInputRows, float(p.durationMs["triggerExecution"])) for p in busy),
    )


def measure(
    name: str,
    query: DataFrame,
    checkpoint: Path,
    *,
    timeout_s: float = 3600,
    output_mode: str = "append",
    sink: str = "noop",
    path: str | None = None,
) -> Measurement:
    """Run ``query`` to the end of its input (``availableNow``) into ``sink`` (Spark's ``noop`` by default,
    ``"delta"`` with ``path``) and return its figures; seconds are wall-clock from start to end.

    ``output_mode`` is the sink's (``"update"`` for Spark's native streaming aggregation).

    Raises:
        TimeoutError: when the query does not finish within ``timeout_s`` seconds.
    """
    start = time.perf_counter()
    running = (
        query.writeStream.format(sink)
        .outputMode(output_mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .queryName(name.replace(" ", "_"))
        .start(path)
    )
    if not running.awaitTermination(timeout_s):
        running.stop()
        raise TimeoutError(f"{name} did not finish within {timeout_s} s")
    return from_progress(name, running.recentProgress, time.perf_counter() - start)


def machine() -> str:
    """This machine's cores and memory (GiB), as one line."""
    with open("/proc/meminfo") as info:
        total_kib = int(next(line for line in info if line.startswith("MemTotal")).split()[1])
    return f"{os.cpu_count()} cores, {total_kib / 2**20:.0f} GiB memory"


def load() -> str:
    """The 1/5/15-minute load averages (``os.getloadavg``)."""
    return " / ".join(f"{value:.2f}" for value in os.getloadavg())
