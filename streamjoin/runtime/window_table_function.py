"""Window assignment of the window table functions ``TUMBLE``, ``HOP``, ``CUMULATE`` and ``SESSION`` (docs/semantics.md
§11).

Stateless, as Flink's ``WindowTableFunctionOperator``: each input change is emitted once per window its rowtime
falls in, with the input's RowKind and ``_seq``, and three columns added: ``window_start``, ``window_end``
(TIMESTAMP, the window is ``[start, end)``) and ``window_time`` (``window_end`` − 1 ms). The windows are Flink's
assigners' (``TumblingWindowAssigner``, ``SlidingWindowAssigner``, ``CumulativeWindowAssigner``), aligned to the
epoch shifted by ``offset_ms``: a tumbling window starts at ``t − ((t − offset) mod size)``; a row is in the
``size / slide`` hopping windows whose start is after ``t − size``, latest start first; a cumulative row is in
the windows of its ``size`` period that end after it, every ``step``, shortest first. A ``SESSION`` row gets its own
window ``[t, t + gap)`` (Flink's ``SessionWindowAssigner``): the session window aggregate merges the windows that
touch into sessions, so this is the row's session only until it merges (a ``SESSION`` table function is planned
only under a window aggregate).
"""

from __future__ import annotations

from typing import Literal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamjoin.errors import ValidationError

__all__ = ["WINDOW_END", "WINDOW_START", "WINDOW_TIME", "assign_windows"]

WINDOW_START, WINDOW_END, WINDOW_TIME = "window_start", "window_end", "window_time"


def _start(ms: Column, size_ms: int, offset_ms: int) -> Column:
    # Flink's TimeWindow.getWindowStartWithOffset: timestamp - ((timestamp - offset) % size + size) % size.
    return ms - F.pmod(ms - F.lit(offset_ms), F.lit(size_ms))


def assign_windows(
    df: DataFrame,
    *,
    kind: Literal["TUMBLE", "HOP", "CUMULATE", "SESSION"],
    time_column: str,
    size_ms: int,
    step_ms: int | None = None,
    offset_ms: int = 0,
) -> DataFrame:
    """``df`` with each row once per window of ``time_column``, and the columns ``window_start``,
    ``window_end`` and ``window_time`` (TIMESTAMP) added after its own.

    Args:
        df: any DataFrame (a changelog keeps its ``_rowkind`` and ``_seq`` per row).
        kind: ``TUMBLE``, ``HOP``, ``CUMULATE`` or ``SESSION`` (its gap as ``size_ms``).
        time_column: the TIMESTAMP column the windows are assigned by (a row where it is NULL is in no window).
        size_ms: the window size (CUMULATE: the largest window; SESSION: the gap), milliseconds.
        step_ms: HOP's slide, CUMULATE's step, milliseconds; ``None`` for TUMBLE and SESSION.
        offset_ms: the windows' offset from the epoch, milliseconds (may be negative).

    Raises:
        ValidationError: a non-positive size or step, a step missing for HOP/CUMULATE or given for TUMBLE.
    """
    if size_ms <= 0 or (step_ms is not None and step_ms <= 0):
        raise ValidationError(f"{kind}: size and step must be positive milliseconds, got {size_ms}, {step_ms}")
    single = kind in ("TUMBLE", "SESSION")
    if single != (step_ms is None):
        raise ValidationError(f"{kind}: a step (slide) is {'not ' if single else ''}taken")
    ms = F.unix_millis(F.col(f"`{time_column}`"))
    if kind == "SESSION":
        bounds = df.withColumn("_window_start_ms", ms).withColumn("_window_end_ms", ms + F.lit(size_ms))
    elif kind == "TUMBLE":
        start = _start(ms, size_ms, offset_ms)
        bounds = df.withColumn("_window_start_ms", start).withColumn("_window_end_ms", start + F.lit(size_ms))
    else:
        assert step_ms is not None  # checked above
        if kind == "HOP":
            last = _start(ms, step_ms, offset_ms)
            count = -(-size_ms // step_ms)
            # The windows whose start is after t - size, latest start first (SlidingWindowAssigner).
            starts = F.filter(
                F.transform(F.sequence(F.lit(0), F.lit(count - 1)), lambda i: last - i * F.lit(step_ms)),
                lambda s: s > ms - F.lit(size_ms),
            )
            windows = F.transform(starts, lambda s: F.struct(s.alias("s"), (s + F.lit(size_ms)).alias("e")))
        else:
            period = _start(ms, size_ms, offset_ms)
            count = -(-size_ms // step_ms)
            # The windows of the row's period ending after it, shortest first (CumulativeWindowAssigner).
            ends = F.filter(
                F.transform(F.sequence(F.lit(1), F.lit(count)), lambda i: period + i * F.lit(step_ms)),
                lambda e: e > ms,
            )
            windows = F.transform(ends, lambda e: F.struct(period.alias("s"), e.alias("e")))
        bounds = (
            df.withColumn("_window", F.explode(windows))
            .withColumn("_window_start_ms", F.col("_window.s"))
            .withColumn("_window_end_ms", F.col("_window.e"))
            .drop("_window")
        )
    return (
        bounds.withColumn(WINDOW_START, F.timestamp_millis(F.col("_window_start_ms")))
        .withColumn(WINDOW_END, F.timestamp_millis(F.col("_window_end_ms")))
        .withColumn(WINDOW_TIME, F.timestamp_millis(F.col("_window_end_ms") - F.lit(1)))
        .drop("_window_start_ms", "_window_end_ms")
    )
