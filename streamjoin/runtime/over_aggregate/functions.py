"""OVER process functions: the per-partition-key logic of an OVER aggregate.

That is ``agg(col) OVER (… {ROWS|RANGE} BETWEEN … PRECEDING AND CURRENT ROW)``.

Flink's ``flink-table-runtime/.../operators/over/`` in plain Python, state passed
in, no Spark: the executable specification that
:func:`~streamjoin.runtime.over_aggregate.over_aggregate` runs on Spark and the
tests run in memory. Frames, time domains, the late rule and the state are
described in :mod:`streamjoin.runtime.over_aggregate`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pyspark.sql.types import DataType

from streamjoin.errors import ValidationError
from streamjoin.runtime.aggregates import AggregateCall, Aggregates
from streamjoin.runtime.timers import TimerService

__all__ = [
    "Frame",
    "OverFunction",
    "OverState",
    "OverWindow",
    "ProcTimeRangeBoundedPrecedingFunction",
    "ProcTimeRowsBoundedPrecedingFunction",
    "ProcTimeUnboundedPrecedingFunction",
    "RowTimeRangeBoundedPrecedingFunction",
    "RowTimeRangeUnboundedPrecedingFunction",
    "RowTimeRowsBoundedPrecedingFunction",
    "RowTimeRowsUnboundedPrecedingFunction",
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

    def function(self, input_types: dict[str, DataType], input_columns: Sequence[str]) -> OverFunction:
        """The Flink process function for this window (as ``StreamExecOverAggregate`` picks it)."""
        preceding = self.preceding
        aggs = Aggregates(self.aggregates, input_types, input_columns, retractable=preceding is not None)
        rows = self.frame == "rows"
        if self.order_by is not None:
            if preceding is None:
                return (
                    RowTimeRowsUnboundedPrecedingFunction(aggs)
                    if rows
                    else RowTimeRangeUnboundedPrecedingFunction(aggs)
                )
            if rows:
                # Flink's precedingOffset for ROWS counts the current row.
                return RowTimeRowsBoundedPrecedingFunction(aggs, preceding + 1)
            return RowTimeRangeBoundedPrecedingFunction(aggs, preceding)
        if preceding is None:
            return ProcTimeUnboundedPrecedingFunction(aggs)
        if rows:
            return ProcTimeRowsBoundedPrecedingFunction(aggs, preceding + 1)
        return ProcTimeRangeBoundedPrecedingFunction(aggs, preceding)


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

    Attributes:
        offset: a bounded frame's size: rows, the current one counted (ROWS), or ms (RANGE);
            None for an unbounded frame.
    """

    offset: int | None = None

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


class _BoundedPrecedingFunction(OverFunction):
    """A bounded frame: ``offset`` rows (ROWS, counting the current row) or milliseconds (RANGE)."""

    offset: int

    def __init__(self, aggregates: Aggregates, offset: int) -> None:
        super().__init__(aggregates)
        self.offset = offset


class RowTimeRowsBoundedPrecedingFunction(_BoundedPrecedingFunction):
    """Event time, ``ROWS BETWEEN n PRECEDING AND CURRENT ROW``; ``offset`` = n + 1 rows in a frame."""

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


class RowTimeRangeBoundedPrecedingFunction(_BoundedPrecedingFunction):
    """Event time, ``RANGE BETWEEN INTERVAL offset PRECEDING AND CURRENT ROW``; ``offset`` in ms."""

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
    """Event time, UNBOUNDED PRECEDING (Flink 2.3.0's ``RowTimeUnboundedPrecedingOverFunctionV2``):
    late when at or behind the key's watermark at arrival; one timer per distinct time; only
    accumulators kept."""

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


class ProcTimeRowsBoundedPrecedingFunction(_BoundedPrecedingFunction):
    """Processing time, ``ROWS BETWEEN n PRECEDING AND CURRENT ROW``: each row emitted on arrival."""

    def process_element(self, state, row, time):
        return self._emit_rows_one_by_one(state, time, [row], self.offset)


class ProcTimeUnboundedPrecedingFunction(OverFunction):
    """Processing time, UNBOUNDED PRECEDING (ROWS or RANGE): each row emitted on arrival."""

    def process_element(self, state, row, time):
        return self._emit_rows_one_by_one(state, time, [row], None)


class ProcTimeRangeBoundedPrecedingFunction(_BoundedPrecedingFunction):
    """Processing time, ``RANGE BETWEEN INTERVAL offset PRECEDING AND CURRENT ROW``.

    Rows of one instant are buffered and emitted together by a timer one
    millisecond later; the frame keeps rows whose time is ≥ instant − offset.
    """

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
