"""The one ``StatefulProcessor`` of the Python engine, and the per-key logic interface it runs.

Flink runs an operator's per-key logic as a ``KeyedProcessFunction``
(``processElement``, ``onTimer``) inside an operator that owns state,
timers and output; bytewax's stateful operators have the same split (a logic
object with ``on_item`` / ``on_notify``). Here :class:`KeyedProcessor` is
that operator for Spark's row-based ``transformWithState`` (PySpark 4.2): it
owns the state variables' life cycle (through the logic's :meth:`~KeyedLogic.open`,
:meth:`~KeyedLogic.load`, :meth:`~KeyedLogic.store`), the key's timers and
the one Spark timer standing for them, the late-row counter, and the output
rows (RowKind, ``_seq``, columns). Every operator supplies only a
:class:`KeyedLogic`: how a key's rows become :class:`Element` s, and what
one element or one timer emits.

A key's timers (:class:`~streamjoin.runtime.timers.TimerService`, Flink's
timer semantics) live in the key's state and are advanced lazily: at each
visit of the key the shell first advances them to the operator's current time
(firing due timers, as a Flink watermark does before the next row), then to
each element's per-row watermark, if any. The :data:`Clock` says what the
current time is.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from time import time as wall_clock_seconds
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from streamjoin import contract
from streamjoin.changelog import RowKind, with_seq_path
from streamjoin.jvm import engine
from streamjoin.runtime.assertions import assertions_on, check_visit
from streamjoin.runtime.engine import JvmLogic, apply_jvm

__all__ = [
    "LATE_STATE",
    "TIMER_SEQ",
    "BlobState",
    "Change",
    "Clock",
    "Element",
    "KeyedLogic",
    "KeyedProcessor",
    "child_seq",
    "is_chained",
    "is_fired_upstream",
    "sync_timer",
    "timer_seq",
]

#: One output change: its RowKind and the output row's values in column order.
Change = tuple[RowKind, tuple]

#: What a key's current time is:
#:
#: * ``"none"``: no timers (``timeMode="None"``, or ``"ProcessingTime"`` when state TTL is on);
#: * ``"event"``: Spark's watermark; one Spark event-time timer per key (``timeMode="EventTime"``);
#: * ``"processing"``: Spark's batch processing time; one processing-time timer per key
#:   (``timeMode="ProcessingTime"``);
#: * ``"instant"``: the wall clock, read once per key and micro-batch, never behind what the key
#:   saw; the key's rows of one micro-batch are one instant, which is over after them (the key
#:   advances to ``now + 1``); no Spark timer (``timeMode="None"``: Spark's processing-time mode
#:   runs a micro-batch on every trigger, so an ``availableNow`` query would never end).
Clock = contract.Clock

_TIME_MODES = {"event": "EventTime", "processing": "ProcessingTime", "instant": "None"}

#: State variable mirroring a key's count of rows dropped as late (Flink's ``numLateRecordsDropped``
#: metric), readable with Spark's state data source.
LATE_STATE = contract.LATE_STATE
_LATE_SCHEMA = StructType([StructField("count", LongType(), False)])

#: The root of the ``_seq`` of changes that a timer fires at the start of a key's visit (before any of the
#: micro-batch's rows): the smallest root, so they come before every change that a row of this micro-batch
#: causes, followed by the timer's timestamp, so that across keys they come in timestamp order, as Flink's
#: timer queue fires them (docs/semantics.md §1, "Order inside a micro-batch").
TIMER_SEQ = bytes(8)


def timer_seq(timestamp: int) -> bytes:
    """The ``_seq`` prefix of the changes a timer at ``timestamp`` (ms) fires before a key's rows."""
    return TIMER_SEQ + (timestamp + (1 << 63)).to_bytes(8, "big")


def child_seq(prefix: bytes, index: int) -> bytes:
    """The ``_seq`` of the ``index``-th change caused by the input change whose ``_seq`` is ``prefix``.

    A ``_seq`` is a path: the source change's 8-byte root, then one 4-byte big-endian index per operator
    (docs/semantics.md §1). Compared as unsigned bytes, paths order the changes of a micro-batch as Flink
    processes them at parallelism 1: by source change first, then by the order in which each operator
    emitted the changes that change caused.
    """
    return bytes(prefix) + index.to_bytes(4, "big")


@dataclass(frozen=True)
class Element:
    """One input change of a key, as the shell hands it to the logic.

    Attributes:
        seq: its ``_seq`` in its input (a path, :func:`child_seq`).
        kind: its RowKind.
        row: its values, in the logic's column order.
        side: 0 (left/probe) or 1 (right/build) for two-input operators, else 0.
        time: the row's own time in epoch ms (rowtime, or an ORDER BY value), or None.
        watermark: for a source's row (an 8-byte ``_seq``), the watermark (epoch ms) in
            effect when the row arrived, if the input carries one per row (Flink's
            per-record watermark): the key advances to it before the element. For a row
            an upstream operator emitted (a longer ``_seq``, :func:`is_chained`), its
            rowtime (a windowed row: its window's start), if the input carries it: a row
            at or before the current time was fired by the watermark that made it
            current (:func:`is_fired_upstream`).
        matches: the other side's rows the element matches, when an earlier step found
            them (the regular join's residual predicate), else None.
    """

    seq: bytes
    kind: RowKind
    row: tuple
    side: int = 0
    time: Any = None
    watermark: int | None = None
    matches: list[tuple] | None = None


#: The length of a source change's ``_seq`` (its root, :func:`child_seq`).
ROOT_BYTES = 8


def is_chained(element: Element) -> bool:
    """Whether ``element`` carries an upstream operator's event time rather than a source's per-row watermark
    (:attr:`Element.watermark`)."""
    return element.watermark is not None and len(element.seq) > ROOT_BYTES


def is_fired_upstream(element: Element, now: int | None) -> bool:
    """Whether ``element`` is a row that an upstream event-time operator emitted when the watermark reached ``now``
    (ms) — a window's result, a temporal join's released row: Flink's operator emits such rows before it forwards
    that watermark, so the key takes them before it advances to ``now`` (docs/semantics.md §11.6). An operator's
    output is never late for the watermark it forwards, so a chained row at or before ``now`` is one of them."""
    if now is None or not is_chained(element):
        return False
    assert element.watermark is not None  # is_chained checks it
    return element.watermark <= now


class BlobState:
    """A key's whole operator state as one pickled value in a ``ValueState``.

    Fits states that are read and written as a whole on each visit of the key
    (a bounded OVER frame, a deduplicated row): one state-store round trip
    each way instead of one per field.

    Args:
        handle: the processor's ``StatefulProcessorHandle``.
        name: state variable name.
        ttl_ms: state TTL in ms (the value expires that long after its last write), or None.
    """

    _SCHEMA = StructType([StructField("blob", BinaryType(), False)])

    def __init__(self, handle: Any, name: str, ttl_ms: int | None = None) -> None:
        self._state = handle.getValueState(name, self._SCHEMA, ttl_ms)

    def load(self, create: Callable[[], Any]) -> Any:
        """The stored object, or ``create()`` when the key has none."""
        stored = self._state.get()
        return create() if stored is None else pickle.loads(stored[0])

    def save(self, value: Any) -> None:
        self._state.update((pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL),))

    def clear(self) -> None:
        self._state.clear()


def sync_timer(handle: Any, registered: int | None, wanted: int | None) -> int | None:
    """Keep exactly one Spark timer per key, at ``wanted`` (ms); returns what is now registered.

    A key's own timers live in its state (:class:`~streamjoin.runtime.timers.TimerService`);
    the Spark timer only wakes the key up at the earliest of them.
    """
    if registered != wanted:
        if registered is not None:
            handle.deleteTimer(registered)
        if wanted is not None:
            handle.registerTimer(wanted)
    return wanted


class KeyedLogic:
    """An operator's per-key logic, as :class:`KeyedProcessor` runs it (Flink's ``KeyedProcessFunction``).

    The defaults keep a key's state as one pickled value (:class:`BlobState`
    named :attr:`state_name`), created by :meth:`new_state`. With a clock other
    than ``"none"`` the state must have the attributes ``timers`` (a
    :class:`~streamjoin.runtime.timers.TimerService`) and ``spark_timer``
    (``int | None``); with :attr:`counts_late_rows`, ``late_dropped`` (rows).

    Attributes:
        state_name: the ``ValueState`` of the default state handling.
        counts_late_rows: mirror ``state.late_dropped`` into :data:`LATE_STATE`.
        output_keyed_by_key: the output's upsert key is the grouping key, so a visit's changes are one
            upsert key's changelog (what the changelog assertions check, :mod:`streamjoin.runtime.assertions`).
    """

    state_name = "state"
    counts_late_rows = False
    output_keyed_by_key = False

    def open(self, handle: Any, state_ttl_ms: int | None) -> None:
        """Declare the state variables (once per partition and micro-batch, in ``init``)."""
        self._blob = BlobState(handle, self.state_name, state_ttl_ms)

    def new_state(self, key: tuple) -> Any:
        """A fresh state for the grouping key ``key``."""
        raise NotImplementedError

    def load(self, key: tuple) -> Any:
        """The state of ``key``, as the logic works on it."""
        return self._blob.load(lambda: self.new_state(key))

    def store(self, state: Any) -> None:
        """Write ``state`` back (or clear it, see :meth:`is_done`) after the key's visit."""
        if self.is_done(state):
            self._blob.clear()
        else:
            self._blob.save(state)

    def is_done(self, state: Any) -> bool:
        """Whether the key's state can be cleared (default: never)."""
        return False

    def elements(self, rows: Iterable[Row]) -> Iterable[Element]:
        """A key's input rows of one micro-batch as elements, in processing order."""
        raise NotImplementedError

    def on_element(self, state: Any, element: Element, now: int | None) -> list[Change]:
        """Process one element; ``now`` is the key's current time (None without a clock)."""
        raise NotImplementedError

    def on_timer(self, state: Any, timestamp: int) -> list[Change]:
        """A timer of the key fires at ``timestamp`` (ms)."""
        return []

    def finish_bundle(self, state: Any) -> list[Change]:
        """After the key's elements of one micro-batch: the changes of a logic that emits once per bundle
        (Flink's ``MapBundleFunction.finishBundle``; the micro-batch is the bundle), numbered after the last
        element's changes. Default: none."""
        return []

    def timer_seq(self, state: Any, timestamp: int) -> bytes:
        """The ``_seq`` prefix of the changes a timer at ``timestamp`` (ms) fires before the key's rows of the
        micro-batch (default :func:`timer_seq`; a logic whose timer releases a stored row gives that row's
        ``_seq``)."""
        return timer_seq(timestamp)

    def jvm_logic(self) -> JvmLogic | None:
        """This logic's Scala twin for the jvm engine, or None when it has none (runs on Python)."""
        return None


class KeyedProcessor(StatefulProcessor):
    """The ``StatefulProcessor`` that runs a :class:`KeyedLogic` per grouping key.

    Per visit of a key: load its state; advance its timers to the current time
    (:data:`Clock`) and fire the due ones — after the rows an upstream event-time
    operator fired on the watermark that made it current (:func:`is_fired_upstream`),
    before any other; for each element, advance to its
    per-row watermark, then call :meth:`KeyedLogic.on_element`; then
    :meth:`KeyedLogic.finish_bundle`; with the ``"instant"`` clock, end the
    instant; keep one Spark timer at the key's next wake-up; store the state;
    mirror the late-row count; emit the changes as rows ``output columns +
    _rowkind + _seq``. An expired Spark timer advances
    the key to the current time the same way. With the session's changelog
    assertions on, each visit's changes are checked first
    (:func:`~streamjoin.runtime.assertions.check_visit`).

    Args:
        logic: the operator's logic.
        output_names: the output columns, ``_rowkind`` and ``_seq`` last.
        clock: what the current time is (:data:`Clock`).
        state_ttl_ms: state TTL in ms for the logic's state variables, or None.
        watermark_delay_ms: how far (ms) the watermark of the operator's input falls behind Spark's (the interval
            joins upstream hold it back: :attr:`~streamjoin.planner.plan.Node.input_watermark_delay_ms`); the
            ``"event"`` clock's time is Spark's watermark minus it.
    """

    def __init__(
        self,
        logic: KeyedLogic,
        output_names: Iterable[str],
        *,
        clock: Clock = "none",
        state_ttl_ms: int | None = None,
        watermark_delay_ms: int = 0,
    ) -> None:
        self.logic = logic
        self.output_names = tuple(output_names)
        self.clock = clock
        self.state_ttl_ms = state_ttl_ms
        self.watermark_delay_ms = watermark_delay_ms
        self.assertions = False

    @property
    def time_mode(self) -> str:
        """The ``timeMode`` of ``transformWithState`` for this clock (TTL needs processing time)."""
        if self.clock == "none":
            return "ProcessingTime" if self.state_ttl_ms else "None"
        return _TIME_MODES[self.clock]

    def apply(self, df: DataFrame, key: Sequence[str], output: StructType) -> DataFrame:
        """Run the logic per ``key`` of ``df``; ``output`` names :attr:`output_names`.

        On the engine of :func:`~streamjoin.jvm.engine`: the logic's
        Scala twin (:meth:`KeyedLogic.jvm_logic`) on the jvm engine when it has
        one, else this processor on PySpark's ``transformWithState``.
        """
        df = with_seq_path(df)
        twin = self.logic.jvm_logic()
        if twin is not None and engine(df.sparkSession) == "jvm":
            return apply_jvm(
                df,
                list(key),
                output,
                twin,
                clock=self.clock,
                state_ttl_ms=self.state_ttl_ms,
                watermark_delay_ms=self.watermark_delay_ms,
            )
        self.assertions = assertions_on(df.sparkSession)
        return df.groupBy(*key).transformWithState(
            statefulProcessor=self, outputStructType=output, outputMode="Append", timeMode=self.time_mode
        )

    def init(self, handle) -> None:
        self.handle = handle
        self.output_row = Row(*self.output_names)
        self.late = handle.getValueState(LATE_STATE, _LATE_SCHEMA) if self.logic.counts_late_rows else None
        self.logic.open(handle, self.state_ttl_ms)

    def _now(self, state, timer_values) -> int | None:
        if self.clock == "event":
            return timer_values.getCurrentWatermarkInMs() - self.watermark_delay_ms
        if self.clock == "processing":
            return timer_values.getCurrentProcessingTimeInMs()
        if self.clock == "instant":
            return max(int(wall_clock_seconds() * 1000), state.timers.time)
        return None

    def handleInputRows(self, key, rows, timerValues):
        logic = self.logic
        state = logic.load(tuple(key))
        late_before = getattr(state, "late_dropped", 0)
        out = _Output()
        now = self._now(state, timerValues)
        # The key advances to the current time before its first row, unless that row is one an upstream event-time
        # operator fired on the watermark that made this current time: Flink delivers those before the watermark.
        pending_now = now is not None
        last_seq = last_fired = None
        for element in logic.elements(rows):
            fired = is_fired_upstream(element, now)
            if pending_now and not fired:
                assert now is not None  # pending only with a clock
                self._advance(state, now, out, last_fired)
                pending_now = False
            if element.watermark is not None and not is_chained(element):
                self._advance(state, element.watermark, out, element.seq)
            out.add(element.seq, logic.on_element(state, element, now))
            last_seq = element.seq
            if fired:
                last_fired = element.seq
        if pending_now:
            assert now is not None  # pending only with a clock
            self._advance(state, now, out, last_fired)
        if last_seq is not None:
            out.add(last_seq, logic.finish_bundle(state))
        if self.clock == "instant":
            assert now is not None  # the instant clock always tells the time
            # Every row of this key's instant has arrived: the instant is over.
            self._advance(state, now + 1, out, last_seq)
        return self._finish(key, state, out, late_before)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        state = self.logic.load(tuple(key))
        state.spark_timer = None  # Spark deletes the timer that just expired
        out = _Output()
        now = self._now(state, timerValues)
        assert now is not None  # only a logic with a clock sets timers
        self._advance(state, now, out, None)
        return self._finish(key, state, out, getattr(state, "late_dropped", 0))

    def _advance(self, state, time: int, out: _Output, seq: bytes | None) -> None:
        """Fire the key's timers up to ``time``; their changes are numbered under ``seq``, or, when None,
        under :meth:`KeyedLogic.timer_seq`."""

        def fire(timestamp: int) -> list:
            prefix = self.logic.timer_seq(state, timestamp) if seq is None else seq
            out.add(prefix, self.logic.on_timer(state, timestamp))
            return []

        state.timers.advance(time, fire)

    def _finish(self, key, state, out: _Output, late_before: int):
        if self.assertions:
            check_visit(
                type(self.logic).__name__, tuple(key), out.changes, one_upsert_key=self.logic.output_keyed_by_key
            )
        if self.clock in ("event", "processing"):
            wakeup = state.timers.next_wakeup()
            if wakeup is not None and self.clock == "event":
                wakeup += self.watermark_delay_ms  # in Spark's watermark
            state.spark_timer = sync_timer(self.handle, state.spark_timer, wakeup)
        self.logic.store(state)
        if self.late is not None and state.late_dropped != late_before:
            # Mirrored out of the pickled state so that Spark's state reader shows it.
            self.late.update((state.late_dropped,))
        return iter([self.output_row(*values, kind.short, seq) for seq, kind, values in out.changes])

    def close(self) -> None:
        pass


class _Output:
    """A key's output changes of one visit, each numbered under the ``_seq`` of the change that caused it.

    The changes caused under one prefix are numbered 0, 1, … in emission order, also when they are added in
    several calls (a row's per-row-watermark timers, then the row; two rows of equal ``_seq`` from the two
    inputs; the last row, then the bundle's end): a visit adds under equal prefixes one after the other.
    """

    def __init__(self) -> None:
        self.changes: list[tuple[bytes, RowKind, tuple]] = []
        self._prefix = b""
        self._count = 0

    def add(self, prefix: bytes, changes: list[Change]) -> None:
        if not changes:
            return
        # A LONG _seq fed straight to the shell (a test's TwsTester) is a source's: its 8-byte root.
        prefix = prefix.to_bytes(8, "big") if isinstance(prefix, int) else bytes(prefix)
        start = self._count if prefix == self._prefix else 0
        self._prefix, self._count = prefix, start + len(changes)
        self.changes.extend((child_seq(prefix, start + i), kind, values) for i, (kind, values) in enumerate(changes))
