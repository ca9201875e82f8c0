"""Interval join (time-bounded stream-stream join), as Flink SQL runs it (docs/semantics.md §3).

``A JOIN B ON A.k = B.k AND B.t BETWEEN A.t + lower AND A.t + upper`` (and the
``<``, ``<=``, ``>``, ``>=`` forms), INNER / LEFT / RIGHT / FULL, on event time
(rowtime with watermarks) or processing time; insert-only in and out.

The logic follows Flink's ``TimeIntervalJoin`` / ``RowTimeIntervalJoin`` /
``ProcTimeIntervalJoin`` (flink-table-runtime ``operators/join/interval``):

* a left row at time ``t`` joins right rows in ``[t + lower, t + upper]``; a
  right row at ``t`` joins left rows in ``[t - upper, t - lower]``;
* the operator time is the combined watermark ``min(wm(L), wm(R))`` (clamped
  at 0, as Flink does), or the processing time;
* a row is cached only while the operator time is below the upper end of its
  window; otherwise it is *late*: it is joined with what the cache holds, not
  stored, and emitted null-padded at once in an outer join if it matched nothing;
* one clean-up timer per cache and key, at ``t + window side + 1`` for the
  first cached row; when it fires, rows whose window is behind the operator
  time are removed (and, on an outer side, emitted null-padded once if they
  never matched); a new timer is set for the earliest row left. Joining a row
  also removes expired rows of the other cache, as Flink does.

State per key is the two caches (rows by rowtime) and two timer times:
bounded by rate × window length, not by stream length.

Layers: :class:`TimeIntervalJoin` and its two subclasses (one key's state, unit testable;
jvm twins in ``TimeIntervalJoin.scala``);
:class:`~streamjoin.runtime.interval_join.IntervalJoinLogic` (a logic of
:mod:`streamjoin.runtime.keyed_two_input`; jvm twin ``IntervalJoinLogic.scala``);
:func:`~streamjoin.runtime.interval_join.interval_join`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

from streamjoin.errors import ValidationError
from streamjoin.runtime.timers import MAX_TIME, TimerService

__all__ = [
    "IntervalBounds",
    "IntervalJoinState",
    "JoinHow",
    "ProcTimeIntervalJoin",
    "RowTimeIntervalJoin",
    "TimeIntervalJoin",
]

JoinHow = Literal["inner", "left", "right", "full"]
_JOIN_HOWS = ("inner", "left", "right", "full")
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IntervalBounds:
    """The time condition of an interval join, in milliseconds, both ends inclusive.

    ``right_time - left_time`` must lie in ``[lower_ms, upper_ms]``. SQL forms map as
    Flink's ``IntervalJoinUtil`` does: ``B.t BETWEEN A.t - INTERVAL '10' MINUTE AND
    A.t + INTERVAL '5' MINUTE`` is ``between(-600_000, 300_000)``; a strict bound
    (``<``, ``>``) moves by one millisecond (``B.t > A.t`` is ``lower_ms = 1``).
    ``upper_ms < lower_ms`` is a window no pair can satisfy: Flink then joins
    nothing and emits every row of an outer side null-padded at once.

    Example:
        >>> IntervalBounds.between(0, 3_600_000, upper_inclusive=False)  # A.t <= B.t < A.t + 1 h
        IntervalBounds(lower_ms=0, upper_ms=3599999)
    """

    lower_ms: int
    upper_ms: int

    def __post_init__(self):
        for name in ("lower_ms", "upper_ms"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValidationError(f"interval bound {name} must be an int of milliseconds, got {value!r}")

    @classmethod
    def between(
        cls, lower_ms: int, upper_ms: int, *, lower_inclusive: bool = True, upper_inclusive: bool = True
    ) -> IntervalBounds:
        """Bounds ``A.t + lower (<=|<) B.t (<=|<) A.t + upper``; a strict bound shifts by 1 ms."""
        bounds = cls(lower_ms, upper_ms)  # validates the types
        return cls(bounds.lower_ms + (0 if lower_inclusive else 1), bounds.upper_ms - (0 if upper_inclusive else 1))

    @property
    def is_empty(self) -> bool:
        """No pair of rows can satisfy the condition."""
        return self.upper_ms < self.lower_ms

    @property
    def left_window_end(self) -> int:
        """How far after its own time a left row can still match (Flink's ``leftRelativeSize``)."""
        return self.upper_ms

    @property
    def right_window_end(self) -> int:
        """How far after its own time a right row can still match (Flink's ``rightRelativeSize``)."""
        return -self.lower_ms


@dataclass
class IntervalJoinState:
    """State of one join key (Flink: ``IntervalJoinLeftCache`` / ``...RightCache`` / timer states).

    ``left_rows`` / ``right_rows`` map a rowtime (ms) to the rows cached at that
    time, in arrival order, each as ``[row, matched]`` where ``matched`` says the
    row was joined at least once (an outer side emits it null-padded on expiry
    only when it was not). ``left_cleanup_timer`` is the timer that cleans the
    left cache (Flink's ``rightTimerState``), likewise for the right.
    ``joinable`` is False when the key has a null column: SQL's null never matches.
    In candidate mode (:class:`TimeIntervalJoin` ``candidates=True``) each entry is
    ``[row, matched, id]``, ``id`` from ``next_id``: the key's rows numbered in arrival order.
    """

    left_rows: dict[int, list[list]] = field(default_factory=dict)
    right_rows: dict[int, list[list]] = field(default_factory=dict)
    left_cleanup_timer: int | None = None
    right_cleanup_timer: int | None = None
    joinable: bool = True
    next_id: int = 0

    @property
    def row_count(self) -> int:
        """Rows held in both caches."""
        return sum(len(v) for v in self.left_rows.values()) + sum(len(v) for v in self.right_rows.values())

    @property
    def is_empty(self) -> bool:
        return (
            not self.left_rows
            and not self.right_rows
            and self.left_cleanup_timer is None
            and (self.right_cleanup_timer is None)
        )


class TimeIntervalJoin:
    """The interval-join decision logic for one key, shared by both time domains.

    Callers give each row's time and the current operator time (see
    :class:`RowTimeIntervalJoin` / :class:`ProcTimeIntervalJoin` for how they are
    obtained), and fire the timers the logic registers. Each method returns the
    rows to emit, all ``+I``: ``left values + right values``, the missing side
    padded with ``None``.

    In candidate mode (the first step of an outer join with a residual, see
    :mod:`streamjoin.runtime.interval_join.residual`) the logic cannot know whether a
    pair matches, so it emits every pair in the window as ``left values + right
    values + (left id, right id)``, and every row of an outer side, when it leaves
    the cache (or at once if it is late), as its *expiry*: the null-padded row +
    ``(id, None)`` (left) or ``(None, id)`` (right), after all the row's pairs.

    Args:
        how: ``"inner"``, ``"left"``, ``"right"`` or ``"full"``.
        bounds: the time condition.
        left_arity / right_arity: number of columns of each input (for padding).
        candidates: candidate mode (see above).

    Raises:
        ValidationError: for an unknown ``how``, a non-IntervalBounds ``bounds``
            or a negative arity.
    """

    def __init__(
        self, how: JoinHow, bounds: IntervalBounds, left_arity: int, right_arity: int, *, candidates: bool = False
    ):
        if how not in _JOIN_HOWS:
            raise ValidationError(f"interval join type {how!r} is not supported; expected one of {_JOIN_HOWS}")
        if not isinstance(bounds, IntervalBounds):
            raise ValidationError(f"bounds must be an IntervalBounds, got {bounds!r}")
        for name, arity in (("left_arity", left_arity), ("right_arity", right_arity)):
            if not isinstance(arity, int) or arity < 0:
                raise ValidationError(f"{name} must be a non-negative int, got {arity!r}")
        self.how = how
        self.bounds = bounds
        self.left_outer = how in ("left", "full")
        self.right_outer = how in ("right", "full")
        self._left_nulls = (None,) * left_arity
        self._right_nulls = (None,) * right_arity
        self.candidates = candidates

    def new_state(self, key: tuple) -> IntervalJoinState:
        """Empty state for ``key`` (a tuple of join-key values)."""
        return IntervalJoinState(joinable=not any(v is None for v in key))

    def process_left(
        self, state: IntervalJoinState, row: tuple, row_time: int, operator_time: int, timers: TimerService
    ) -> list[tuple]:
        """A left row arrives (Flink ``processElement1``).

        1. If its window ``[t + lower, t + upper]`` may still hold cached right
           rows, join it with them; expired right rows met on the way are removed
           (and emitted null-padded if the right side is outer and they never matched).
        2. If the operator time is below ``t + upper``, cache it (and set the left
           clean-up timer if none is set); else it is late: emit it null-padded
           now if the left side is outer and it matched nothing.
        """
        return self._process(state, row, row_time, operator_time, timers, from_left=True)

    def process_right(
        self, state: IntervalJoinState, row: tuple, row_time: int, operator_time: int, timers: TimerService
    ) -> list[tuple]:
        """A right row arrives (Flink ``processElement2``); mirror of :meth:`process_left`."""
        return self._process(state, row, row_time, operator_time, timers, from_left=False)

    def on_timer(
        self, state: IntervalJoinState, timestamp: int, operator_time: int, timers: TimerService
    ) -> list[tuple]:
        """A clean-up timer fires (Flink ``onTimer``): expire rows of the cache(s) it belongs to.

        A timer whose time is no longer the one recorded in the state is ignored,
        as in Flink. The right cache is cleaned before the left when both timers
        share the timestamp (Flink's order).
        """
        out: list[tuple] = []
        if state.right_cleanup_timer is not None and timestamp == state.right_cleanup_timer:
            expiration = self._expiration_time(operator_time, self.bounds.right_window_end)
            self._remove_expired(state, expiration, timers, left=False, out=out)
        if state.left_cleanup_timer is not None and timestamp == state.left_cleanup_timer:
            expiration = self._expiration_time(operator_time, self.bounds.left_window_end)
            self._remove_expired(state, expiration, timers, left=True, out=out)
        return out

    # -- internals ---------------------------------------------------------------------------

    def _process(self, state, row, row_time, operator_time, timers, *, from_left: bool) -> list[tuple]:
        out: list[tuple] = []
        b = self.bounds
        own = [row, False]
        if self.candidates:
            own.append(state.next_id)
            state.next_id += 1
        if b.is_empty:
            # Flink plans no join at all: an outer side passes through null-padded.
            if self.left_outer if from_left else self.right_outer:
                out.extend(self._expired([own], left=from_left))
            return out
        if from_left:
            lower, upper = row_time + b.lower_ms, row_time + b.upper_ms
            other_rows, other_window_end, other_outer = state.right_rows, b.right_window_end, self.right_outer
        else:
            lower, upper = row_time - b.upper_ms, row_time - b.lower_ms
            other_rows, other_window_end, other_outer = state.left_rows, b.left_window_end, self.left_outer
        other_expiration = self._expiration_time(operator_time, other_window_end)
        matched = False
        # Flink skips the scan when the whole window is already expired. It compares with an
        # expiration time kept per operator instance and updated lazily; we use the current
        # one: a late row never meets rows that are expired but not yet cleaned up.
        if other_expiration < upper:
            for time in sorted(other_rows):
                entries = other_rows[time]
                if state.joinable and lower <= time <= upper:
                    for entry in entries:
                        out.append(self._pair(own, entry) if from_left else self._pair(entry, own))
                        matched = True
                        entry[1] = True
                if time <= other_expiration:
                    if other_outer:
                        out.extend(self._expired(entries, left=not from_left))
                    del other_rows[time]
        own[1] = matched
        if operator_time < upper:
            own_rows = state.left_rows if from_left else state.right_rows
            own_rows.setdefault(row_time, []).append(own)
            if (state.left_cleanup_timer if from_left else state.right_cleanup_timer) is None:
                self._register_cleanup(state, row_time, timers, left=from_left)
        elif self.left_outer if from_left else self.right_outer:
            out.extend(self._expired([own], left=from_left))
        return out

    def _remove_expired(self, state, expiration: int, timers: TimerService, *, left: bool, out: list) -> None:
        rows = state.left_rows if left else state.right_rows
        outer = self.left_outer if left else self.right_outer
        for time in sorted(rows):
            if time > expiration:
                break
            if outer:
                out.extend(self._expired(rows[time], left=left))
            del rows[time]
        if rows:
            self._register_cleanup(state, min(rows), timers, left=left)
        elif left:
            state.left_cleanup_timer = None
        else:
            state.right_cleanup_timer = None

    def _register_cleanup(self, state, row_time: int, timers: TimerService, *, left: bool) -> None:
        window_end = self.bounds.left_window_end if left else self.bounds.right_window_end
        cleanup_time = row_time + window_end + 1
        timers.register(cleanup_time)
        if left:
            state.left_cleanup_timer = cleanup_time
        else:
            state.right_cleanup_timer = cleanup_time

    @staticmethod
    def _expiration_time(operator_time: int, window_end: int) -> int:
        """Rows at or before this time can match nothing that is still to come."""
        return MAX_TIME if operator_time >= MAX_TIME else operator_time - window_end - 1

    def _pair(self, left: list, right: list) -> tuple:
        """The joined row of two cache entries (with their ids in candidate mode)."""
        joined = left[0] + right[0]
        return joined + (left[2], right[2]) if self.candidates else joined

    def _expired(self, entries: list[list], *, left: bool) -> list[tuple]:
        """What rows of an outer side emit when they leave: the null-padded row of each that never
        matched, or in candidate mode every row's expiry (whether a pair matched is not known here)."""
        if self.candidates:
            return [
                (e[0] + self._right_nulls + (e[2], None)) if left else (self._left_nulls + e[0] + (None, e[2]))
                for e in entries
            ]
        return [e[0] + self._right_nulls if left else self._left_nulls + e[0] for e in entries if not e[1]]


class RowTimeIntervalJoin(TimeIntervalJoin):
    """Event-time interval join (Flink ``RowTimeIntervalJoin``): rows carry their rowtime,
    the operator time is the combined watermark, clamped at 0 as Flink does."""

    @staticmethod
    def operator_time(watermark: int) -> int:
        """Flink ``updateOperatorTime``: ``max(watermark, 0)``."""
        return max(watermark, 0)


class ProcTimeIntervalJoin(TimeIntervalJoin):
    """Processing-time interval join (Flink ``ProcTimeIntervalJoin``): a row's time is its
    arrival's processing time; the operator time and the timers are processing time."""

    @staticmethod
    def operator_time(now_ms: int) -> int:
        return now_ms
