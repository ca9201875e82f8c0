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
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

from streamjoin.changelog import RowKind
from streamjoin.runtime.aggregates import Aggregates
from streamjoin.runtime.timers import TimerService

__all__ = ["WindowAccumulator", "WindowAggFunction", "WindowAggState"]

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
        windows: window end (ms) → :class:`WindowAccumulator`, for the windows not fired yet.
        timers: the key's timers (one per window, at its end − 1 ms) and the latest watermark it saw.
        late_dropped: changes dropped because their window had fired.
        spark_timer: the Spark timer standing for :attr:`timers` (Spark operator only).
    """

    windows: dict[int, WindowAccumulator] = field(default_factory=dict)
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
