"""Window aggregation, per group key: Flink's ``WindowAggOperator`` over its windows (docs/semantics.md §11).

Rows reach the operator with their window already assigned (``window_start``, ``window_end``: the window table
function's columns; a HOP or CUMULATE row comes once per window). Per group key the state holds one entry per
window not yet fired: the window's row count and accumulators. For each input change of a window:

- the window is **late** when its end − 1 ms is at or before the key's current watermark (Flink's
  ``isWindowFired``): the change is dropped and counted (``numLateRecordsDropped``). A HOP or CUMULATE row is
  so judged per window, so it still counts in its windows that have not fired (Flink's slice assigner does the
  same through ``getLastWindowEnd``);
- else ``+I``/``+U`` accumulate it and ``-U``/``-D`` retract it (an updating input, as Flink's window aggregate
  accepts since 1.19), and an event-time timer is registered at the window's end − 1 ms.

When the timer fires (the watermark reaches the window's end − 1 ms) the window emits ``+I[key, aggregates,
window_start, window_end]`` unless its count is 0 (every row of it was retracted), and its entry is freed. A
window without rows never emits. The output is insert-only.

A **session** window aggregate (:class:`SessionWindowAggFunction`, Flink's ``UnsliceWindowAggProcessor`` with its
``MergingWindowProcessFunction``) gets each change with its own window ``[t, t + gap)``, and merges it with every
session of the key it intersects (``start ≤ other end`` and ``end ≥ other start``: sessions that touch merge, as
Flink's ``TimeWindow.intersects``) into one session covering them all; its timer moves to the merged end − 1 ms. A
change whose merged session has fired by the watermark (only possible when it merges with none: a session not
fired ends after the watermark) is dropped and counted. Retractions (``-U``/``-D``) join sessions like any change
(Flink assigns them a window too) and retract from it. A session keeps its changes, not accumulators, and
aggregates them when it fires (Flink merges accumulators; the results are the same but for the last bits of
FLOAT/DOUBLE sums).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

from streamjoin.changelog import RowKind
from streamjoin.runtime.aggregates import Aggregates
from streamjoin.runtime.timers import TimerService

__all__ = ["Session", "SessionWindowAggFunction", "WindowAccumulator", "WindowAggFunction", "WindowAggState"]

Change = tuple[RowKind, tuple]


@dataclass
class WindowAccumulator:
    """One window of a group key: the key's values, the window's bounds (as the input carries them), its row count
    and accumulators."""

    key: tuple
    start: Any
    end: Any
    count: int
    accs: list
    views: dict[int, MutableMapping]


@dataclass
class WindowAggState:
    """One group key's state: its windows by end (epoch ms), timers, late-row count and Spark timer.

    Attributes:
        windows: window end (ms) → :class:`WindowAccumulator` (a session window aggregate's: :class:`Session`), for
            the windows not fired yet.
        timers: the key's timers (one per window, at its end − 1 ms) and the latest watermark it saw.
        late_dropped: changes dropped because their window had fired.
        spark_timer: the Spark timer standing for :attr:`timers` (Spark operator only).
    """

    windows: dict[int, Any] = field(default_factory=dict)
    timers: TimerService = field(default_factory=TimerService)
    late_dropped: int = 0
    spark_timer: int | None = None


class WindowAggFunction:
    """The window aggregate of one group key (module docstring).

    Args:
        aggregates: the aggregates (``retractable`` when the input has retractions).
    """

    def __init__(self, aggregates: Aggregates) -> None:
        self.aggregates = aggregates

    def process_element(
        self, state: WindowAggState, kind: RowKind, row: tuple, key: tuple, start: Any, end: Any, end_ms: int
    ) -> list[Change]:
        """Apply one change (``row``, of group ``key``) to window ``[start, end)`` (``end_ms``: its end in epoch
        ms); emits nothing."""
        if end_ms - 1 <= state.timers.time:
            state.late_dropped += 1
            return []
        window = state.windows.get(end_ms)
        if window is None:
            accs, views = self.aggregates.create()
            window = state.windows[end_ms] = WindowAccumulator(key, start, end, 0, accs, views)
            state.timers.register(end_ms - 1)
        args = self.aggregates.args(row)
        if kind.is_accumulate:
            self.aggregates.accumulate(window.accs, window.views, args)
            window.count += 1
        else:
            self.aggregates.retract(window.accs, window.views, args)
            window.count -= 1
        return []

    def on_timer(self, state: WindowAggState, timestamp: int) -> list[Change]:
        """The window ending at ``timestamp`` + 1 ms fires: ``+I[key, aggregates, window_start, window_end]``."""
        window = state.windows.pop(timestamp + 1, None)
        if window is None or window.count == 0:
            return []
        values = self.aggregates.get_values(window.accs, window.views)
        return [(RowKind.INSERT, (*window.key, *values, window.start, window.end))]


@dataclass
class Session:
    """One session of a group key: the key's values, its bounds as epoch ms and as the values the output carries,
    and its changes (accumulate or not, the row)."""

    key: tuple
    start_ms: int
    end_ms: int
    start: Any
    end: Any
    changes: list[tuple[bool, tuple]]


class SessionWindowAggFunction:
    """The session window aggregate of one group key (module docstring); its state is a :class:`WindowAggState`
    whose ``windows`` hold :class:`Session` s by end (ms).

    Args:
        aggregates: the aggregates (``retractable`` when the input has retractions).
        gap_ms: the session gap, milliseconds.
    """

    def __init__(self, aggregates: Aggregates, gap_ms: int) -> None:
        self.aggregates = aggregates
        self.gap_ms = gap_ms

    def process_element(
        self, state: WindowAggState, kind: RowKind, row: tuple, key: tuple, start: Any, end: Any, end_ms: int
    ) -> list[Change]:
        """Merge one change (``row`` of group ``key``, its own window ``[start, end)`` ending at ``end_ms``) into
        the key's sessions; emits nothing."""
        start_ms = end_ms - self.gap_ms
        merged = [s for s in state.windows.values() if s.start_ms <= end_ms and s.end_ms >= start_ms]
        if not merged and end_ms - 1 <= state.timers.time:
            state.late_dropped += 1
            return []
        session = Session(key, start_ms, end_ms, start, end, [])
        for other in sorted(merged, key=lambda s: s.start_ms):
            del state.windows[other.end_ms]
            state.timers.delete(other.end_ms - 1)
            if other.start_ms < session.start_ms:
                session.start_ms, session.start = other.start_ms, other.start
            if other.end_ms > session.end_ms:
                session.end_ms, session.end = other.end_ms, other.end
            session.changes += other.changes
        session.changes.append((kind.is_accumulate, row))
        state.windows[session.end_ms] = session
        state.timers.register(session.end_ms - 1)
        return []

    def on_timer(self, state: WindowAggState, timestamp: int) -> list[Change]:
        """The session ending at ``timestamp`` + 1 ms fires: ``+I[key, aggregates, window_start, window_end]``
        unless its changes cancel out."""
        session = state.windows.pop(timestamp + 1, None)
        if session is None:
            return []
        accs, views = self.aggregates.create()
        count = 0
        for accumulate, row in session.changes:
            args = self.aggregates.args(row)
            if accumulate:
                self.aggregates.accumulate(accs, views, args)
                count += 1
            else:
                self.aggregates.retract(accs, views, args)
                count -= 1
        if count == 0:
            return []
        values = self.aggregates.get_values(accs, views)
        return [(RowKind.INSERT, (*session.key, *values, session.start, session.end))]
