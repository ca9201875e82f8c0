"""Keyed two-input operators on Spark, as Flink runs a ``KeyedCoProcessOperator``: the mechanism the
interval join and the event-time temporal join share.

An operator's logic (:class:`KeyedTwoInputLogic`) sees one key's state, one row of either input at
a time with the operator's current time (the combined watermark, or the processing time), and its
key's timers (only :meth:`~streamjoin.runtime.timers.TimerService.register` and
:meth:`~streamjoin.runtime.timers.TimerService.delete`). Two drivers run it:

* :class:`LocalKeyedDriver`, in plain Python, fed one row at a time with Flink's per-input
  watermark rules: the reference execution of the tests;
* :func:`keyed_two_input`, on Spark: both inputs tagged by side, unioned, grouped by the join key
  and run by :class:`~streamjoin.runtime.processor.KeyedProcessor` (event-time or
  processing-time timers), each key's state kept as one pickled value on the python engine;
  on the jvm engine the logic's Scala twin (``jvm/operators``, a ``TwoInputLogic``) keeps it
  shaped as Flink does (per side a ``MapState``).
"""

from __future__ import annotations

import datetime as dt
import heapq
import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pyspark.sql import DataFrame
from pyspark.sql.types import BinaryType, LongType, StructField, TimestampType

from streamjoin.changelog import SEQ_COLUMN, ChangelogError, RowKind
from streamjoin.contract import Position, TwoInputSpec
from streamjoin.errors import EngineError, ValidationError
from streamjoin.runtime.engine import RESIDUAL_IN_JOIN_ONLY, JvmLogic
from streamjoin.runtime.inputs import output_schema, require_columns, unshared_exchange, without_watermark_columns
from streamjoin.runtime.processor import Element, KeyedLogic, KeyedProcessor
from streamjoin.runtime.timers import MAX_TIME, MIN_TIME, KeyTimers, TimerService
from streamjoin.runtime.two_input import ordered_changes, union_inputs

__all__ = [
    "SIDES",
    "STATE_NAME",
    "KeyState",
    "KeyedTwoInputLogic",
    "LocalKeyedDriver",
    "check_insert_only_row",
    "join_pairs",
    "keyed_two_input",
]


class KeyedTwoInputLogic(Protocol):
    """A keyed two-input operator, as the drivers (:class:`LocalKeyedDriver`, Spark's processor) call it.

    ``side`` is 0 for the left/probe input and 1 for the right/build input;
    ``time`` is the operator's current time: the watermark (event time) or the
    processing time. Both hooks return the ``(RowKind, row)`` changes to emit.
    """

    def new_state(self, key: tuple) -> Any: ...

    def on_row(
        self, state: Any, side: int, kind: RowKind, row: tuple, rowtime: int, time: int, timers: KeyTimers
    ) -> list[tuple[RowKind, tuple]]: ...

    def on_timer(self, state: Any, timestamp: int, time: int, timers: KeyTimers) -> list[tuple[RowKind, tuple]]: ...

    def jvm_logic(self, inputs: TwoInputSpec) -> JvmLogic | None:
        """The Scala twin (a ``TwoInputLogic`` in ``jvm/operators``), its spec holding ``inputs``, or None."""


#: Input names by side index (0 = left/probe, 1 = right/build), for messages.
SIDES = ("left", "right")


def check_insert_only_row(operator: str, condition: str | None, side: int, kind: RowKind, row: tuple) -> None:
    """What a python logic of an insert-only join checks of each row: that it has no residual to evaluate (the
    python logic never evaluates Spark SQL; only the Scala twin takes one) and that the row is ``+I``.

    Raises:
        EngineError: a residual handed to the python logic.
        ChangelogError: a row that is not ``+I`` (Flink's planner refuses the ``operator`` over updating input).
    """
    if condition is not None:
        raise EngineError(RESIDUAL_IN_JOIN_ONLY)
    if kind is not RowKind.INSERT:
        raise ChangelogError(
            f"{operator} consumes insert-only input; got {kind.short}{list(row)} on the {SIDES[side]} input"
        )


class LocalKeyedDriver:
    """Runs a :class:`KeyedTwoInputLogic` in plain Python, fed one row at a time as Flink feeds an operator.

    Per-input watermarks follow Flink's per-table rule (after each row of input
    *i*, ``wm(i) = max rowtime seen − delay_i``); the operator sees
    ``min(wm(0), wm(1))`` (``-inf`` until both inputs have a watermark). When it
    advances, due timers fire in timestamp order (per key, each timestamp once)
    before the next row is processed. :meth:`finish` sends the +inf watermark
    that ends the input. The tests use it as the reference execution; it gives
    the exact Flink changelog of a small input.

    Args:
        logic: the operator.
        watermark_delays_ms: the delay of each input's watermark (two non-negative ints).

    Raises:
        ValidationError: for bad delays.
    """

    def __init__(self, logic: KeyedTwoInputLogic, watermark_delays_ms: tuple[int, int]):
        if len(watermark_delays_ms) != 2 or any(not isinstance(d, int) or d < 0 for d in watermark_delays_ms):
            raise ValidationError(f"watermark_delays_ms must be two non-negative ints, got {watermark_delays_ms!r}")
        self.logic = logic
        self._delays = watermark_delays_ms
        self._max_time: list[int | None] = [None, None]
        self.watermark = MIN_TIME
        self.states: dict[Hashable, Any] = {}
        self._timers: list[tuple[int, int, Hashable]] = []
        self._timer_set: set[tuple[Hashable, int]] = set()
        self._order = itertools.count()
        self._rows_seen = 0
        #: Every change emitted, in order.
        self.changelog: list[tuple[RowKind, tuple]] = []
        #: For each change of :attr:`changelog`, when it was emitted: ``i`` while processing
        #: input row ``i`` (0-based), ``i + 1`` when the watermark advance after row ``i`` fired
        #: it (before row ``i + 1``), and ``rows + 1`` for the end-of-input watermark.
        self.steps: list[int] = []

    def process(self, side: int, key: tuple, kind: RowKind, row: tuple, rowtime: int) -> list[tuple[RowKind, tuple]]:
        """Feed one row of input ``side`` (0 = left/probe, 1 = right/build); returns what it emitted,
        including what the watermark advance after it fired."""
        state = self._state(key)
        emitted = list(self.logic.on_row(state, side, kind, row, rowtime, self.watermark, self._timer_service(key)))
        self._drop_if_empty(key)
        self._record(emitted, self._rows_seen)
        self._rows_seen += 1
        seen = self._max_time[side]
        self._max_time[side] = rowtime if seen is None else max(seen, rowtime)
        maxima = [t for t in self._max_time if t is not None]
        if len(maxima) == len(self._max_time):
            advanced = self.advance_watermark(min(t - d for t, d in zip(maxima, self._delays)))
            self._record(advanced, self._rows_seen)
            emitted += advanced
        return emitted

    def finish(self) -> list[tuple[RowKind, tuple]]:
        """End of input: a +inf watermark fires every timer."""
        emitted = self.advance_watermark(MAX_TIME)
        self._record(emitted, self._rows_seen + 1)
        return emitted

    def _record(self, emitted: list[tuple[RowKind, tuple]], step: int) -> None:
        self.changelog += emitted
        self.steps += [step] * len(emitted)

    def advance_watermark(self, watermark: int) -> list[tuple[RowKind, tuple]]:
        """Raise the operator watermark (never lowers it) and fire the timers now due, in time order."""
        if watermark <= self.watermark:
            return []
        self.watermark = watermark
        emitted: list[tuple[RowKind, tuple]] = []
        while self._timers and self._timers[0][0] <= watermark:
            timestamp, _, key = heapq.heappop(self._timers)
            if (key, timestamp) not in self._timer_set:
                continue  # deleted
            self._timer_set.discard((key, timestamp))
            emitted += self.logic.on_timer(self._state(key), timestamp, watermark, self._timer_service(key))
            self._drop_if_empty(key)
        return emitted

    @property
    def state_row_count(self) -> int:
        """Rows held in state over all keys (each state's ``row_count``)."""
        return sum(s.row_count for s in self.states.values())

    def _state(self, key):
        if key not in self.states:
            self.states[key] = self.logic.new_state(key)
        return self.states[key]

    def _drop_if_empty(self, key) -> None:
        if self.states[key].is_empty:
            del self.states[key]

    def _timer_service(self, key) -> KeyTimers:
        """``key``'s view of the driver's timers, with :class:`TimerService`'s ``register``/``delete``;
        the driver keeps one heap for all keys so that timers fire across keys in time order."""
        driver = self

        class _Timers:
            def register(self, timestamp: int) -> None:
                if (key, timestamp) not in driver._timer_set:
                    driver._timer_set.add((key, timestamp))
                    heapq.heappush(driver._timers, (timestamp, next(driver._order), key))

            def delete(self, timestamp: int) -> None:
                driver._timer_set.discard((key, timestamp))

        return _Timers()


# --------------------------------------------------------------------------- Spark

#: State variable holding a key's whole state (logic state and timers) as one pickled value.
STATE_NAME = "keyedTwoInputState"
#: Metadata key Spark puts on the column given to ``withWatermark``.
_WATERMARK_METADATA = "spark.watermarkDelayMs"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass
class KeyState:
    """What :func:`keyed_two_input` keeps per key: the logic's state, the key's timers, the Spark timer."""

    logic: Any
    timers: TimerService = field(default_factory=TimerService)
    spark_timer: int | None = None


def _millis(value: dt.datetime) -> int:
    """A TIMESTAMP value as epoch milliseconds (floored, as Spark's ``unix_millis``)."""
    if value.tzinfo is None:  # the session time zone is UTC
        value = value.replace(tzinfo=dt.UTC)
    return (value - _EPOCH) // dt.timedelta(milliseconds=1)


@dataclass(frozen=True)
class _Columns:
    """Where, in each side's row tuple, the rowtime and the per-row watermark are (None: absent)."""

    rowtime: tuple[int, int] | None
    row_watermark: tuple[int, int] | None


class _KeyedTwoInputLogic(KeyedLogic):
    """A :class:`KeyedTwoInputLogic` as the shell's per-key logic; see :func:`keyed_two_input`."""

    state_name = STATE_NAME

    def __init__(self, logic: KeyedTwoInputLogic, columns: _Columns, key_columns: Sequence[str]):
        self.logic = logic
        self.columns = columns
        self.key_columns = list(key_columns)

    def new_state(self, key: tuple) -> KeyState:
        return KeyState(self.logic.new_state(key))

    def is_done(self, state: KeyState) -> bool:
        return state.logic.is_empty and state.spark_timer is None

    def elements(self, rows):
        for change in ordered_changes(rows):
            row, watermark = change.row, None
            if self.columns.row_watermark is not None:
                at = self.columns.row_watermark[change.side]
                row, watermark = row[:at] + row[at + 1 :], row[at]
            time = None if self.columns.rowtime is None else _millis(row[self.columns.rowtime[change.side]])
            yield Element(change.seq, change.kind, row, side=change.side, time=time, watermark=watermark)

    def on_element(self, state, element, now):
        rowtime = now if element.time is None else element.time
        return self.logic.on_row(
            state.logic, element.side, element.kind, element.row, rowtime, state.timers.time, state.timers
        )

    def on_timer(self, state, timestamp):
        return self.logic.on_timer(state.logic, timestamp, state.timers.time, state.timers)

    def jvm_logic(self) -> JvmLogic | None:
        """The logic's twin, told where the union frame's columns are (read by ``TwoInputLogic.scala``)."""

        def positions(pair: tuple[int, int] | None) -> tuple[Position, Position] | None:
            return None if pair is None else (Position(pair[0]), Position(pair[1]))

        inputs = TwoInputSpec(
            key_columns=tuple(self.key_columns),
            rowtime=positions(self.columns.rowtime),
            row_watermark=positions(self.columns.row_watermark),
        )
        return self.logic.jvm_logic(inputs)


def join_pairs(on: Sequence[str | tuple[str, str]], what: str) -> list[tuple[str, str]]:
    """Normalise ``on=``: column names (same on both sides) or ``(left, right)`` pairs.

    Raises:
        ValidationError: for an empty or malformed ``on``.
    """
    if isinstance(on, str) or not on:
        raise ValidationError(f"{what} on= must be a non-empty list of column names or (left, right) pairs, got {on!r}")
    pairs = []
    for item in on:
        if isinstance(item, str):
            pairs.append((item, item))
        elif isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(c, str) for c in item):
            pairs.append((item[0], item[1]))
        else:
            raise ValidationError(f"{what} on= item {item!r} is neither a column name nor a (left, right) pair")
    return pairs


def _check_rowtime(df: DataFrame, column: str, what: str) -> None:
    require_columns(df, [column], what)
    field_ = df.schema[column]
    if not isinstance(field_.dataType, TimestampType):
        raise ValidationError(f"{what} {column!r} must be a TIMESTAMP rowtime; it is {field_.dataType.simpleString()}")
    # An upstream operator's output (a BINARY _seq path) has no watermark marker: Spark carries the query's watermark
    # through an event-time transformWithState to the operators after it.
    chained = isinstance(df.schema[SEQ_COLUMN].dataType, BinaryType)
    if _WATERMARK_METADATA not in field_.metadata and not chained:
        raise ValidationError(f"{what} {column!r} has no watermark: call withWatermark({column!r}, ...) upstream")


def keyed_two_input(
    left: DataFrame,
    right: DataFrame,
    *,
    on: Sequence[tuple[str, str]],
    left_time: str | None,
    right_time: str | None,
    logic: KeyedTwoInputLogic,
    row_watermark_column: str | None = None,
    extra_output: Sequence[StructField] = (),
    watermarked_times: bool = True,
    watermark_delay_ms: int = 0,
) -> DataFrame:
    """Run a :class:`KeyedTwoInputLogic` over two changelog streams on Spark (``transformWithState``).

    The inputs go through the shared two-input mechanism
    (:func:`~streamjoin.runtime.two_input.union_inputs`: tagged with their side,
    unioned, grouped by join key; a key's rows of one micro-batch processed in
    ``(_seq, side)`` order). A key's state (the logic's state and its timers,
    with Flink's timer semantics, :mod:`streamjoin.runtime.timers`) is one
    pickled value; one Spark timer per key wakes it up at its earliest timer. At
    each visit the key first advances to the current time (firing due timers,
    as a Flink watermark advance does before the next row), then takes its rows.
    (Event-time timers and per-row watermarks on top of the shared mechanism;
    they could move there.)

    Args:
        left / right: changelog DataFrames (data columns + ``_rowkind`` + ``_seq``);
            no data column may be on both.
        on: ``(left column, right column)`` join-key pairs, compared after widening.
        left_time / right_time: TIMESTAMP rowtime columns carrying a watermark
            (event time, ``timeMode="EventTime"``), or both ``None`` for
            processing time (a row's time is its micro-batch's processing time).
        logic: the operator.
        row_watermark_column: optional LONG column on both inputs: the operator
            watermark (epoch ms) in effect when the row arrived, as Flink's
            per-record watermark, or NULL; the key advances to it before the row.
        extra_output: columns the logic appends to every output row, after the data columns.
        watermarked_times: whether ``left_time``/``right_time`` must carry Spark's watermark (rowtimes); False for
            TIMESTAMP columns derived from a rowtime upstream, whose watermark the query carries (a window's end).
        watermark_delay_ms: how far (ms) the input's watermark falls behind Spark's (the interval joins upstream hold
            it back; :class:`~streamjoin.runtime.processor.KeyedProcessor`).

    Returns:
        A changelog DataFrame: the left data columns, the right data columns
        (all nullable), ``extra_output``, ``_rowkind`` and ``_seq`` (the key's emission order within
        the micro-batch). Rowtime columns carry no watermark: set one again
        before another event-time operator.

    Raises:
        ValidationError: for missing columns, a rowtime without watermark, one
            time column given without the other, or data columns on both inputs.
    """
    if (left_time is None) != (right_time is None):
        raise ValidationError(
            f"left_time={left_time!r}, right_time={right_time!r}: give both rowtimes (event time) "
            "or neither (processing time)"
        )
    if left_time is not None and watermarked_times:
        assert right_time is not None  # both or neither, as checked above
        _check_rowtime(left, left_time, "left rowtime")
        _check_rowtime(right, right_time, "right rowtime")
    if row_watermark_column is not None:
        for df in (left, right):
            require_columns(df, [row_watermark_column], "row_watermark_column")
            if not isinstance(df.schema[row_watermark_column].dataType, LongType):
                raise ValidationError(f"row_watermark_column {row_watermark_column!r} must be LONG epoch ms")
        # One copy of the column is enough to know the row's watermark; the union needs distinct names.
        right = right.withColumnRenamed(row_watermark_column, f"{row_watermark_column}$right")
    both = union_inputs(
        without_watermark_columns(left), without_watermark_columns(right), [lk for lk, _ in on], [rk for _, rk in on]
    )
    names = (both.left_schema.names, both.right_schema.names)
    row_watermark = None
    data = [list(names[0]), list(names[1])]
    if row_watermark_column is not None:
        row_watermark = (names[0].index(row_watermark_column), names[1].index(f"{row_watermark_column}$right"))
        data[0].remove(row_watermark_column)
        data[1].remove(f"{row_watermark_column}$right")
    clash = sorted(set(data[0]) & set(data[1]))
    if clash:
        raise ValidationError(f"columns {clash} are on both inputs; rename them on one side before the join")
    rowtime = None if left_time is None or right_time is None else (data[0].index(left_time), data[1].index(right_time))

    fields = [StructField(c, both.left_schema[c].dataType, True) for c in data[0]]
    fields += [StructField(c, both.right_schema[c].dataType, True) for c in data[1]]
    schema = output_schema(fields + list(extra_output))
    processor = KeyedProcessor(
        _KeyedTwoInputLogic(logic, _Columns(rowtime, row_watermark), both.key_columns),
        schema.names,
        clock="processing" if left_time is None else "event",
        watermark_delay_ms=watermark_delay_ms,
    )
    # A literal of its own keeps this operator's shuffle from being reused by another operator
    # over the same inputs, which would lose its watermark (tws.unshared_exchange).
    return processor.apply(unshared_exchange(both.frame), both.key_columns, schema)
