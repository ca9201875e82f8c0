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

Layers: :class:`TimeIntervalJoin` (one key's state, unit testable);
:class:`IntervalJoinOperator` (a logic of :mod:`streamjoin.runtime.keyed_two_input`;
jvm twin ``IntervalJoinLogic.scala``); :func:`interval_join`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamjoin.changelog import ChangelogError, RowKind
from streamjoin.contract import IntervalJoinSpec, TwoInputSpec
from streamjoin.errors import EngineError, ValidationError
from streamjoin.runtime.engine import RESIDUAL_IN_JOIN_ONLY, JvmLogic, residual_in_join
from streamjoin.runtime.interval_residual import ID_FIELDS, pad_after_residual
from streamjoin.runtime.keyed_two_input import SIDES, join_pairs, keyed_two_input
from streamjoin.runtime.timers import MAX_TIME, TimerService
from streamjoin.runtime.two_input import data_schema

__all__ = [
    "IntervalBounds",
    "IntervalJoinOperator",
    "IntervalJoinState",
    "JoinHow",
    "ProcTimeIntervalJoin",
    "RowTimeIntervalJoin",
    "TimeIntervalJoin",
    "interval_join",
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
    :mod:`streamjoin.runtime.interval_residual`) the logic cannot know whether a
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


class IntervalJoinOperator:
    """:class:`TimeIntervalJoin` as a :class:`KeyedTwoInputLogic`: insert-only rows in, ``+I`` rows out.

    Raises (from :meth:`on_row`):
        ChangelogError: for a row that is not ``+I`` (Flink's planner rejects
            interval joins over updating inputs).
    """

    def __init__(self, join: RowTimeIntervalJoin | ProcTimeIntervalJoin, condition: str | None = None):
        """``condition``: the residual predicate (Spark SQL) for the Scala twin to evaluate inside the
        join (jvm engine only: the Python logic never evaluates Spark SQL, and runs without one)."""
        self.join = join
        self.condition = condition

    def new_state(self, key: tuple) -> IntervalJoinState:
        return self.join.new_state(key)

    def on_row(self, state, side, kind, row, rowtime, time, timers):
        if self.condition is not None:
            raise EngineError(RESIDUAL_IN_JOIN_ONLY)
        if kind is not RowKind.INSERT:
            raise ChangelogError(
                f"an interval join consumes insert-only input; got {kind.short}{list(row)} on the {SIDES[side]} input"
            )
        process = self.join.process_left if side == 0 else self.join.process_right
        return [(RowKind.INSERT, r) for r in process(state, row, rowtime, self.join.operator_time(time), timers)]

    def on_timer(self, state, timestamp, time, timers):
        return [
            (RowKind.INSERT, r) for r in self.join.on_timer(state, timestamp, self.join.operator_time(time), timers)
        ]

    def jvm_logic(self, inputs: TwoInputSpec) -> JvmLogic:
        """Scala twin."""
        j, b = self.join, self.join.bounds
        return JvmLogic(
            "IntervalJoinLogic",
            IntervalJoinSpec(
                inputs=inputs,
                how=j.how,
                lower_ms=b.lower_ms,
                upper_ms=b.upper_ms,
                candidates=j.candidates,
                condition=self.condition,
            ),
        )


def interval_join(
    left: DataFrame,
    right: DataFrame,
    *,
    on: Sequence[str | tuple[str, str]],
    left_time: str | None,
    right_time: str | None,
    lower_bound_ms: int,
    upper_bound_ms: int,
    how: JoinHow = "inner",
    lower_inclusive: bool = True,
    upper_inclusive: bool = True,
    row_watermark_column: str | None = None,
    condition: str | None = None,
) -> DataFrame:
    """Interval join of two insert-only changelog streams, with Flink SQL's semantics (docs/semantics.md §3).

    ``left [INNER|LEFT|RIGHT|FULL] JOIN right ON left.k = right.k AND right.t
    BETWEEN left.t + lower_bound_ms AND left.t + upper_bound_ms`` (each bound
    inclusive unless told otherwise; a strict bound moves by 1 ms, as Flink
    plans ``<`` / ``>``). Inner rows are emitted as soon as both rows are
    there; an outer row that never matched is emitted null-padded once, when
    the watermark passes the end of its window; a late row (its window already
    behind the watermark) is joined with the rows still in state, never
    stored, and null-padded at once on an outer side if it matched nothing. A
    null join key never matches. See the module docstring for Flink's rules.
    A residual ``condition`` is part of the match, as in Flink: a pair for
    which it is false or NULL is not emitted and does not keep an outer row
    from being null-padded. The jvm engine evaluates it inside the join; on the
    python engine Spark does (INNER: a filter on the joined rows; outer: two
    stateful steps around a Spark filter, :mod:`streamjoin.runtime.interval_residual`).
    One line describing the operator, Flink-style, is logged at INFO by
    ``streamjoin.runtime.interval_join``.

    Spark specifics (what differs from Flink, and why):

    - The watermark is Spark's ``min`` over the inputs (an input that has seen
      no row counts as 0, like Flink's operator time before both inputs have a
      watermark), computed at the end of each micro-batch from the rows of the
      batches before. Every row of a micro-batch sees that watermark, where
      Flink's moves after each row: a row that Flink finds late because an
      earlier row of the *same* micro-batch advanced the watermark is joined
      and stored here. ``row_watermark_column`` closes that gap when the
      source knows Flink's per-row watermark.
    - Spark drops rows behind the watermark before a ``transformWithState``;
      the operator hides the watermark marker from that filter so that Flink's
      late rule decides instead.
    - Spark has no end-of-input watermark: outer rows of a bounded input whose
      window the watermark never passes stay in state (Flink flushes them at
      the end of input) until a later row moves the watermark.
    - Processing time runs in Spark's ``"ProcessingTime"`` mode (its timers
      emit the null-padded rows on time); a micro-batch's processing time is
      the time of all its rows. That mode runs a micro-batch on every trigger:
      use a processing-time trigger, or ``availableNow`` with
      ``spark.sql.streaming.noDataMicroBatches.enabled=false``, else the query
      never ends.

    Spark's native stream-stream join is not used: it drops rows behind the
    watermark (Flink joins them with what state holds) and evicts state and
    emits outer rows by its own rules, at other times than Flink.

    Args:
        left / right: changelog DataFrames (data columns + ``_rowkind`` + ``_seq``)
            holding only ``+I`` rows; no data column may be on both.
        on: join keys: column names present in both inputs, or ``(left, right)`` pairs.
        left_time / right_time: TIMESTAMP rowtime columns with a watermark
            (``withWatermark`` upstream), or both ``None`` for a processing-time
            interval join (a row's time is its micro-batch's processing time).
        lower_bound_ms / upper_bound_ms: range of ``right.t - left.t``, milliseconds.
        how: ``"inner"``, ``"left"``, ``"right"`` or ``"full"``.
        lower_inclusive / upper_inclusive: ``<=`` (True) or ``<`` (False).
        row_watermark_column: optional LONG column on both inputs with the
            combined watermark (epoch ms) in effect when the row arrived; the
            operator advances to it before the row (not part of the output).
        condition: residual predicate, a Spark SQL boolean expression over the
            output's data columns (``"l_id <> r_tag"``), or None.

    Returns:
        A changelog DataFrame: left data columns, right data columns (nullable),
        ``_rowkind`` (always ``+I``) and ``_seq`` (the key's emission order
        within the micro-batch). Rowtime columns carry no watermark.

    Raises:
        ValidationError: for bad arguments (unknown columns, rowtime without
            watermark, clashing names, unknown ``how``, non-int bounds).
        pyspark.errors.AnalysisException: for a ``condition`` Spark cannot analyse.
        pyspark.errors.StreamingQueryException: at run time, wrapping
            :class:`~streamjoin.changelog.ChangelogError` for a row that is not ``+I``.

    Example:
        >>> shipped = interval_join(orders, shipments, on=[("order_id", "ship_order_id")],
        ...     left_time="order_ts", right_time="ship_ts", lower_bound_ms=0,
        ...     upper_bound_ms=30 * 86_400_000, how="left")  # doctest: +SKIP
    """
    pairs = join_pairs(on, "interval_join")
    bounds = IntervalBounds.between(
        lower_bound_ms, upper_bound_ms, lower_inclusive=lower_inclusive, upper_inclusive=upper_inclusive
    )
    schemas = [
        StructType([f for f in data_schema(df, side).fields if f.name != row_watermark_column])
        for df, side in ((left, "left"), (right, "right"))
    ]
    arities = (len(schemas[0].fields), len(schemas[1].fields))
    join_class = ProcTimeIntervalJoin if left_time is None else RowTimeIntervalJoin
    in_join = residual_in_join(left.sparkSession, condition, *schemas)
    two_steps = condition is not None and not in_join and how != "inner"
    join = join_class(how, bounds, *arities, candidates=two_steps)
    joined = keyed_two_input(
        left,
        right,
        on=pairs,
        left_time=left_time,
        right_time=right_time,
        logic=IntervalJoinOperator(join, condition if in_join else None),
        row_watermark_column=row_watermark_column,
        extra_output=ID_FIELDS if two_steps else (),
    )
    if condition is not None:
        _log.info("interval join residual predicate %r: %s", condition, _residual_placement(how, in_join))
    if two_steps:
        assert condition is not None  # two steps evaluate a residual
        return pad_after_residual(joined, condition=condition, on=pairs, outer=(join.left_outer, join.right_outer))
    if condition is not None and not in_join:
        return joined.filter(F.coalesce(F.expr(condition), F.lit(False)))
    return joined


def _residual_placement(how: str, in_join: bool) -> str:
    """Where the engine evaluates a residual predicate (the planner's EXPLAIN shows the predicate itself)."""
    if in_join:
        return "in the join, on each pair in the window"
    if how == "inner":
        return "Spark filter on the joined rows"
    return "Spark filter on candidate pairs between two stateful steps; outer rows padded at expiry"
