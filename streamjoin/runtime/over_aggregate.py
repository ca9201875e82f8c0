"""OVER aggregation: ``agg(col) OVER (PARTITION BY … ORDER BY time {ROWS|RANGE} BETWEEN … PRECEDING AND CURRENT ROW)``.

SEMANTICS.md §5; Flink's ``flink-table-runtime/.../operators/over/``. One
output row per input row: the input row followed by the aggregates over its
frame. Input is insert-only, output is insert-only (``+I``).

Frames (``preceding`` rows / ``preceding_ms`` milliseconds, ``None`` = UNBOUNDED):

- ROWS: the row and the ``preceding`` rows before it in the partition, in time
  order; rows with the same time keep their arrival order.
- RANGE: every row whose time is within ``preceding_ms`` before the row's time,
  the row's peers (same time) included; peers get the same values.

Event time (``order_by`` = a rowtime column). Rows wait in state until the
watermark passes their time, then are emitted in time order (Flink registers
an event-time timer per distinct time). A row is **late**, and dropped and
counted, when

- bounded frames (``RowTimeRowsBoundedPrecedingFunction``,
  ``RowTimeRangeBoundedPrecedingFunction``): its time is ≤ the time of the last
  timer that fired for its partition key (Flink's ``lastTriggeringTs``, 0
  before any), so a row behind the watermark is still accepted if no timer of
  its key fired at or after its time;
- unbounded frames (``RowTime{Rows,Range}UnboundedPrecedingFunction``): its
  time is ≤ the current watermark.

Bounded RANGE also registers Flink's clean-up timer at
``t + 1.5 × preceding_ms + 1`` after each accepted row at ``t``: when the latest
one fires the key's state is cleared (its frame is empty by then), and, as in
Flink, an earlier clean-up timer that fires counts as a fired timer for the
late rule.

Processing time (``order_by=None``): the wall clock; on Spark a key's rows
of one micro-batch are one instant, arriving in ``_seq`` order. ROWS frames and unbounded
frames emit each row on arrival (``ProcTimeRowsBoundedPrecedingFunction``,
``ProcTimeUnboundedPrecedingFunction``; Flink treats unbounded RANGE like ROWS
here). A bounded RANGE frame (``ProcTimeRangeBoundedPrecedingFunction``)
emits the rows of one instant together, as peers, once the instant is over.
(With a zero interval Flink's clean-up timer coincides with the emission timer
and Flink clears the instant's rows without emitting them; here they are
emitted — the one deliberate difference.)

State per partition key (what the frame can still need): rows waiting for the
watermark; for a bounded frame the aggregate arguments of the rows still inside
it and retractable accumulators; for an unbounded frame only the accumulators.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from time import time as wall_clock_seconds
from typing import Literal

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.types import DataType, LongType, StructField, StructType, TimestampNTZType, TimestampType

from streamjoin.changelog import RowKind
from streamjoin.errors import ValidationError
from streamjoin.runtime.aggregates import AggregateCall, Aggregates, parse_calls
from streamjoin.runtime.timers import TimerService
from streamjoin.runtime.tws import (
    BlobState,
    changelog_columns,
    check_insert,
    output_schema,
    require_columns,
    require_order_value,
    rows_in_order,
    sync_timer,
    unshared_exchange,
    without_watermark_columns,
)

__all__ = [
    "OverWindow",
    "OverState",
    "OverFunction",
    "RowTimeRowsBoundedPrecedingFunction",
    "RowTimeRangeBoundedPrecedingFunction",
    "RowTimeRowsUnboundedPrecedingFunction",
    "RowTimeRangeUnboundedPrecedingFunction",
    "ProcTimeRowsBoundedPrecedingFunction",
    "ProcTimeRangeBoundedPrecedingFunction",
    "ProcTimeUnboundedPrecedingFunction",
    "over_aggregate",
]

Frame = Literal["rows", "range"]


@dataclass(frozen=True)
class OverWindow:
    """An OVER window definition and its aggregates.

    Args:
        order_by: the rowtime column (event time), or ``None`` for processing time.
        frame: ``"rows"`` or ``"range"``.
        preceding: rows before the current row (``"rows"``) or milliseconds
            before its time (``"range"``); ``None`` for UNBOUNDED PRECEDING.
        aggregates: the aggregates computed over each row's frame.

    Raises:
        ValidationError: for an unknown frame or a negative ``preceding``.
    """

    order_by: str | None
    frame: Frame
    preceding: int | None
    aggregates: tuple[AggregateCall, ...]

    def __post_init__(self) -> None:
        if self.frame not in ("rows", "range"):
            raise ValidationError(f"frame must be 'rows' or 'range'; got {self.frame!r}")
        if self.preceding is not None and (not isinstance(self.preceding, int) or self.preceding < 0):
            raise ValidationError(f"preceding must be a non-negative int or None (UNBOUNDED); got {self.preceding!r}")

    def function(self, input_types: dict[str, DataType], input_columns: Sequence[str]) -> "OverFunction":
        """The Flink process function for this window (as ``StreamExecOverAggregate`` picks it)."""
        bounded = self.preceding is not None
        aggs = Aggregates(self.aggregates, input_types, input_columns, retractable=bounded)
        rows = self.frame == "rows"
        if self.order_by is not None:
            if not bounded:
                return RowTimeRowsUnboundedPrecedingFunction(aggs) if rows else RowTimeRangeUnboundedPrecedingFunction(aggs)
            if rows:
                # Flink's precedingOffset for ROWS counts the current row.
                return RowTimeRowsBoundedPrecedingFunction(aggs, self.preceding + 1)
            return RowTimeRangeBoundedPrecedingFunction(aggs, self.preceding)
        if not bounded:
            return ProcTimeUnboundedPrecedingFunction(aggs)
        if rows:
            return ProcTimeRowsBoundedPrecedingFunction(aggs, self.preceding + 1)
        return ProcTimeRangeBoundedPrecedingFunction(aggs, self.preceding)


@dataclass
class OverState:
    """One partition key's state.

    Attributes:
        timers: the key's timers and the latest watermark / processing time it saw.
        pending: time → rows waiting to be emitted, in arrival order.
        frame: ``(time, aggregate arguments)`` of emitted rows still inside a
            bounded frame, oldest first.
        accs, views: the aggregates' accumulators (see :class:`Aggregates`).
        last_triggering_ts: time of the last fired timer (bounded event-time frames).
        cleanup_ts: time of the latest clean-up timer (bounded RANGE frames).
        late_dropped: rows dropped as late.
        spark_timer: the Spark timer standing for :attr:`timers` (Spark operator only).
    """

    accs: list
    views: dict
    timers: TimerService = field(default_factory=TimerService)
    pending: dict[int, list[tuple]] = field(default_factory=dict)
    frame: deque = field(default_factory=deque)
    last_triggering_ts: int = 0
    cleanup_ts: int | None = None
    late_dropped: int = 0
    spark_timer: int | None = None


class OverFunction:
    """A per-key OVER process function (Flink's ``KeyedProcessFunction``), state passed in.

    Rows are tuples of the input columns; outputs are the row followed by the
    aggregate values. ``process_element`` takes the row's time (rowtime, or the
    processing time for processing-time windows) and returns what it emits at
    once; ``on_timer`` is called by the key's :class:`TimerService` when a
    timer fires.
    """

    def __init__(self, aggregates: Aggregates) -> None:
        self.aggregates = aggregates

    def create_state(self) -> OverState:
        accs, views = self.aggregates.create()
        return OverState(accs=accs, views=views)

    def process_element(self, state: OverState, row: tuple, time: int) -> list[tuple]:
        raise NotImplementedError

    def on_timer(self, state: OverState, time: int) -> list[tuple]:
        raise NotImplementedError

    def _accumulate(self, state: OverState, args: tuple) -> None:
        self.aggregates.accumulate(state.accs, state.views, args)

    def _retract(self, state: OverState, args: tuple) -> None:
        self.aggregates.retract(state.accs, state.views, args)

    def _value(self, state: OverState) -> tuple:
        return self.aggregates.get_values(state.accs, state.views)

    def _buffer(self, state: OverState, row: tuple, time: int) -> None:
        """Keep ``row`` until the timer at ``time`` fires (one timer per distinct time)."""
        rows = state.pending.get(time)
        if rows is None:
            state.pending[time] = [row]
            state.timers.register(time)
        else:
            rows.append(row)

    def _emit_rows_one_by_one(self, state: OverState, time: int, rows: list[tuple], limit: int | None) -> list[tuple]:
        """ROWS frame: each row gets the aggregates over itself and the rows before it (at most ``limit``)."""
        out = []
        for row in rows:
            args = self.aggregates.args(row)
            if limit is not None:
                if len(state.frame) >= limit:
                    self._retract(state, state.frame.popleft()[1])
                state.frame.append((time, args))
            self._accumulate(state, args)
            out.append(row + self._value(state))
        return out

    def _emit_peers(self, state: OverState, time: int, rows: list[tuple], keep: bool) -> list[tuple]:
        """RANGE frame: the rows of one time are peers and share one value."""
        for row in rows:
            args = self.aggregates.args(row)
            self._accumulate(state, args)
            if keep:
                state.frame.append((time, args))
        value = self._value(state)
        return [row + value for row in rows]

    def _retract_older_than(self, state: OverState, limit: int) -> None:
        """Retract the frame's rows whose time is before ``limit``."""
        while state.frame and state.frame[0][0] < limit:
            self._retract(state, state.frame.popleft()[1])

    def _register_cleanup(self, state: OverState, time: int, offset: int) -> None:
        """Flink's bounded-RANGE clean-up timer: at most ``1.5 × offset`` after the key's last row."""
        earliest = time + offset + 1
        if state.cleanup_ts is None or state.cleanup_ts < earliest:
            state.cleanup_ts = time + int(offset * 1.5) + 1
            state.timers.register(state.cleanup_ts)

    def _clear(self, state: OverState) -> None:
        fresh = self.create_state()
        state.accs, state.views = fresh.accs, fresh.views
        state.pending.clear()
        state.frame.clear()
        state.last_triggering_ts = 0
        state.cleanup_ts = None


class RowTimeRowsBoundedPrecedingFunction(OverFunction):
    """Event time, ``ROWS BETWEEN n PRECEDING AND CURRENT ROW``; ``offset`` = n + 1 rows in a frame."""

    def __init__(self, aggregates: Aggregates, offset: int) -> None:
        super().__init__(aggregates)
        self.offset = offset

    def process_element(self, state, row, time):
        if time > state.last_triggering_ts:
            self._buffer(state, row, time)
        else:
            state.late_dropped += 1
        return []

    def on_timer(self, state, time):
        rows = state.pending.pop(time, None)
        out = self._emit_rows_one_by_one(state, time, rows, self.offset) if rows else []
        state.last_triggering_ts = time
        return out


class RowTimeRangeBoundedPrecedingFunction(OverFunction):
    """Event time, ``RANGE BETWEEN INTERVAL offset PRECEDING AND CURRENT ROW``; ``offset`` in ms."""

    def __init__(self, aggregates: Aggregates, offset: int) -> None:
        super().__init__(aggregates)
        self.offset = offset

    def process_element(self, state, row, time):
        if time > state.last_triggering_ts:
            self._buffer(state, row, time)
            self._register_cleanup(state, time, self.offset)
        else:
            state.late_dropped += 1
        return []

    def on_timer(self, state, time):
        if state.cleanup_ts is not None and state.cleanup_ts <= time:
            self._clear(state)
            return []
        rows = state.pending.pop(time, None)
        out = []
        if rows:
            self._retract_older_than(state, time - self.offset)
            out = self._emit_peers(state, time, rows, keep=True)
        state.last_triggering_ts = time
        return out


class _RowTimeUnbounded(OverFunction):
    """Event time, UNBOUNDED PRECEDING: late when at or behind the watermark; only accumulators kept."""

    def process_element(self, state, row, time):
        if time > state.timers.time:
            self._buffer(state, row, time)
        else:
            state.late_dropped += 1
        return []


class RowTimeRowsUnboundedPrecedingFunction(_RowTimeUnbounded):
    """Event time, ``ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW``."""

    def on_timer(self, state, time):
        rows = state.pending.pop(time, None)
        return self._emit_rows_one_by_one(state, time, rows, None) if rows else []


class RowTimeRangeUnboundedPrecedingFunction(_RowTimeUnbounded):
    """Event time, ``RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW``."""

    def on_timer(self, state, time):
        rows = state.pending.pop(time, None)
        return self._emit_peers(state, time, rows, keep=False) if rows else []


class ProcTimeRowsBoundedPrecedingFunction(OverFunction):
    """Processing time, ``ROWS BETWEEN n PRECEDING AND CURRENT ROW``: each row emitted on arrival."""

    def __init__(self, aggregates: Aggregates, offset: int) -> None:
        super().__init__(aggregates)
        self.offset = offset

    def process_element(self, state, row, time):
        return self._emit_rows_one_by_one(state, time, [row], self.offset)


class ProcTimeUnboundedPrecedingFunction(OverFunction):
    """Processing time, UNBOUNDED PRECEDING (ROWS or RANGE): each row emitted on arrival."""

    def process_element(self, state, row, time):
        return self._emit_rows_one_by_one(state, time, [row], None)


class ProcTimeRangeBoundedPrecedingFunction(OverFunction):
    """Processing time, ``RANGE BETWEEN INTERVAL offset PRECEDING AND CURRENT ROW``.

    Rows of one instant are buffered and emitted together by a timer one
    millisecond later; the frame keeps rows whose time is ≥ instant − offset.
    """

    def __init__(self, aggregates: Aggregates, offset: int) -> None:
        super().__init__(aggregates)
        self.offset = offset

    def process_element(self, state, row, time):
        if time not in state.pending:
            state.timers.register(time + 1)
            self._register_cleanup(state, time, self.offset)
        state.pending.setdefault(time, []).append(row)
        return []

    def on_timer(self, state, time):
        instant = time - 1
        # With a zero interval the clean-up timer falls on the emission timer; Flink then clears the
        # instant's rows unemitted. Emitting them first is the one place this operator departs from it.
        if state.cleanup_ts is not None and state.cleanup_ts <= time and instant not in state.pending:
            self._clear(state)
            return []
        rows = state.pending.pop(instant, None)
        if not rows:
            return []
        self._retract_older_than(state, instant - self.offset)
        return self._emit_peers(state, instant, rows, keep=True)


# --------------------------------------------------------------------------- Spark operator

#: Hidden input column: the rowtime in epoch milliseconds.
_ROWTIME_MS = "_rowtime_ms"
#: State variable names.
OVER_STATE = "overState"
LATE_STATE = "numLateRecordsDropped"
_LATE_SCHEMA = StructType([StructField("count", LongType(), False)])


class _OverProcessor(StatefulProcessor):
    """Runs an :class:`OverFunction` per partition key; see :func:`over_aggregate`."""

    def __init__(
        self,
        window: OverWindow,
        columns: list[str],
        input_types: dict[str, DataType],
        watermark_column: str | None,
        output_names: list[str],
    ) -> None:
        self.window = window
        self.output_names = output_names
        self.columns = columns
        self.input_types = input_types
        self.watermark_column = watermark_column

    def init(self, handle) -> None:
        self.handle = handle
        self.output_row = Row(*self.output_names)
        self.state = BlobState(handle, OVER_STATE)
        self.late = handle.getValueState(LATE_STATE, _LATE_SCHEMA)
        self.fn = self.window.function(self.input_types, self.columns)

    def _now(self, state: OverState, timer_values) -> int:
        if self.window.order_by is None:
            # Wall-clock processing time, as Flink's; never behind what the key already saw.
            return max(int(wall_clock_seconds() * 1000), state.timers.time)
        return timer_values.getCurrentWatermarkInMs()

    def handleInputRows(self, key, rows, timerValues):
        state = self.state.load(self.fn.create_state)
        late_before = state.late_dropped
        now = self._now(state, timerValues)
        fire = lambda t: self.fn.on_timer(state, t)  # noqa: E731
        out = state.timers.advance(now, fire)
        for row in rows_in_order(rows):
            check_insert(row, "over_aggregate")
            if self.watermark_column is not None and row[self.watermark_column] is not None:
                out += state.timers.advance(row[self.watermark_column], fire)
            values = tuple(row[c] for c in self.columns)
            if self.window.order_by is None:
                time = now
            else:
                time = require_order_value(row[_ROWTIME_MS], row, "over_aggregate", self.window.order_by)
            out += self.fn.process_element(state, values, time)
        if self.window.order_by is None:
            # Every row of this key's instant has arrived: the instant is over.
            out += state.timers.advance(now + 1, fire)
        return self._finish(state, out, late_before)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        state = self.state.load(self.fn.create_state)
        state.spark_timer = None  # Spark deletes the timer that just expired
        out = state.timers.advance(self._now(state, timerValues), lambda t: self.fn.on_timer(state, t))
        return self._finish(state, out, state.late_dropped)

    def _finish(self, state: OverState, out: list[tuple], late_before: int):
        if self.window.order_by is not None:
            state.spark_timer = sync_timer(self.handle, state.spark_timer, state.timers.next_wakeup())
        self.state.save(state)
        if state.late_dropped != late_before:
            # Mirrored out of the pickled state so that Spark's state reader shows it.
            self.late.update((state.late_dropped,))
        insert = RowKind.INSERT.short
        return iter([self.output_row(*values, insert, i) for i, values in enumerate(out)])

    def close(self) -> None:
        pass


def over_aggregate(
    df: DataFrame,
    *,
    partition_by: Sequence[str],
    order_by: str | None,
    frame: Frame,
    preceding: int | None = None,
    preceding_ms: int | None = None,
    aggregates: Sequence[AggregateCall | tuple[str, str, str | None]],
    watermark_column: str | None = None,
) -> DataFrame:
    """OVER aggregation of an insert-only changelog stream (SEMANTICS.md §5).

    ``SELECT *, agg(col) OVER w AS name, … FROM df WINDOW w AS (PARTITION BY
    partition_by ORDER BY order_by {ROWS|RANGE} BETWEEN {preceding|INTERVAL
    preceding_ms|UNBOUNDED} PRECEDING AND CURRENT ROW)``. See the module
    docstring for frames, event and processing time, the late rule and state.

    Spark specifics:

    - Event time runs in ``timeMode="EventTime"``: the watermark is Spark's,
      which moves once per micro-batch (to ``max(rowtime seen) − delay`` of the
      batches before), and Spark runs a micro-batch without data when it moves,
      so buffered rows are emitted without waiting for new input. A key first
      advances to the micro-batch's watermark (firing its due timers), then
      takes its rows in ``_seq`` order; its timers live in its state and one
      Spark timer per key wakes it up when it gets no rows. Spark's own
      late-row filter (rowtime ≤ the previous batch's watermark) is switched
      off (:func:`~streamjoin.runtime.tws.without_watermark_columns`) so that
      Flink's late rule decides. With one row per micro-batch Spark's
      watermark is Flink's per-row one and the output equals Flink's. With
      more, every row of a micro-batch sees the same watermark, where Flink's
      may already have moved: a row that Flink drops because an earlier row
      of the *same* micro-batch raised the watermark is kept here (it then
      takes part in the frames as the batch window query over the kept rows
      would). ``watermark_column`` closes that gap when the source knows the
      watermark at each row.
    - Processing time runs in ``timeMode="None"`` with the wall clock read
      once per key and micro-batch: a key's rows of one micro-batch are one
      instant (peers in a RANGE frame), in ``_seq`` order. Spark's
      ``"ProcessingTime"`` mode is not used because it runs a micro-batch on
      every trigger, so an ``availableNow`` query would never end; without
      processing-time timers, the clean-up of an idle key's bounded-RANGE
      state happens at its next row instead of 1.5 × the interval later.
    - Late rows dropped per key are counted in the ``numLateRecordsDropped``
      state variable (readable with Spark's state data source).

    Args:
        df: a changelog DataFrame (columns + ``_rowkind`` + ``_seq``) holding only ``+I`` rows.
        partition_by: PARTITION BY columns (may be empty: one partition).
        order_by: the rowtime column (TIMESTAMP, with a watermark defined
            upstream by ``withWatermark``), or ``None`` for processing time.
        frame: ``"rows"`` or ``"range"``.
        preceding: for ``"rows"``: rows before the current one; ``None`` = UNBOUNDED.
        preceding_ms: for ``"range"``: the interval in milliseconds; ``None`` = UNBOUNDED.
        aggregates: ``(output_name, function, column)`` with function one of
            MIN, MAX, SUM, COUNT (column ``None`` = ``COUNT(*)``), AVG,
            FIRST_VALUE, LAST_VALUE (COUNT_DISTINCT too).
        watermark_column: optional LONG column: the watermark (epoch ms) in
            effect when the row arrived, as Flink's per-record watermark. The
            operator advances to it before the row; not part of the output.

    Returns:
        A changelog DataFrame: ``df``'s columns (without ``watermark_column``),
        one column per aggregate (Flink's result types: COUNT BIGINT, AVG/SUM of
        INT INT, SUM of DECIMAL(p,s) DECIMAL(38,s), AVG of DECIMAL(p,s)
        DECIMAL(38,max(6,s)), else the argument's type), ``_rowkind`` (always
        ``+I``) and ``_seq`` (the key's emission order within the micro-batch).
        The rowtime column carries no watermark: set one again before another
        event-time operator.

    Raises:
        ValidationError: for unknown columns, a frame/bound mismatch, a
            non-timestamp ``order_by``, or invalid aggregates.
        pyspark.errors.StreamingQueryException: at run time, wrapping
            :class:`~streamjoin.changelog.ChangelogError` when a row is not
            ``+I`` or its rowtime is null.

    Example:
        >>> out = over_aggregate(items, partition_by=["itemType"], order_by="onSellTime",
        ...                      frame="rows", preceding=2,
        ...                      aggregates=[("maxPrice", "MAX", "price")])  # doctest: +SKIP
    """
    columns = changelog_columns(df, "over_aggregate")
    window = _window(frame, order_by, preceding, preceding_ms, aggregates)
    require_columns(df, list(partition_by), "over_aggregate partition_by")
    types = {f.name: f.dataType for f in df.schema.fields}
    if order_by is not None:
        require_columns(df, [order_by], "over_aggregate order_by")
        if not isinstance(types[order_by], (TimestampType, TimestampNTZType)):
            raise ValidationError(f"over_aggregate order_by {order_by!r} must be a TIMESTAMP rowtime; it is {types[order_by]}")
    if watermark_column is not None:
        if order_by is None:
            raise ValidationError("over_aggregate watermark_column needs event time (an order_by rowtime column)")
        require_columns(df, [watermark_column], "over_aggregate watermark_column")
        if not isinstance(types[watermark_column], LongType):
            raise ValidationError(f"watermark_column {watermark_column!r} must be LONG epoch ms; it is {types[watermark_column]}")
        columns.remove(watermark_column)
    clash = sorted({c.output for c in window.aggregates} & set(columns))
    if clash:
        raise ValidationError(f"over_aggregate output names {clash} clash with input columns")
    fn = window.function(types, columns)  # validates aggregate columns and types

    prepared = unshared_exchange(without_watermark_columns(df))
    keys = list(partition_by)
    if not keys:
        # No PARTITION BY: one partition, as Flink runs it with parallelism 1.
        prepared = prepared.withColumn("_partition", F.lit(0))
        keys = ["_partition"]
    if order_by is not None:
        prepared = prepared.withColumn(_ROWTIME_MS, F.unix_millis(F.col(order_by).cast("timestamp")))
    fields = [StructField(c, types[c]) for c in columns]
    fields += [StructField(c.output, t) for c, t in zip(window.aggregates, fn.aggregates.result_types)]
    schema = output_schema(fields)
    processor = _OverProcessor(window, columns, types, watermark_column, schema.names)
    return prepared.groupBy(*keys).transformWithState(
        statefulProcessor=processor,
        outputStructType=schema,
        outputMode="Append",
        timeMode="None" if order_by is None else "EventTime",
    )


def _window(frame, order_by, preceding, preceding_ms, aggregates) -> OverWindow:
    if frame == "rows" and preceding_ms is not None:
        raise ValidationError(f"a ROWS frame takes preceding (a row count), not preceding_ms={preceding_ms!r}")
    if frame == "range" and preceding is not None:
        raise ValidationError(f"a RANGE frame takes preceding_ms (an interval), not preceding={preceding!r}")
    bound = preceding if frame == "rows" else preceding_ms
    return OverWindow(order_by=order_by, frame=frame, preceding=bound, aggregates=parse_calls(aggregates))
