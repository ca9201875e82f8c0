"""Window Top-N, per partition key: Flink's ``WindowRankOperator`` over its windows (docs/semantics.md §11.3).

Rows reach the operator with their window already assigned (the window table function's ``window_start``,
``window_end``). Per partition key the state holds, per window not yet fired, the rows that can still rank within
``rank_end``, in rank order. For each input row:

- the window is **late** when its end − 1 ms is at or before the key's current watermark (Flink's
  ``isWindowFired``): the row is dropped and counted (``numLateRecordsDropped``);
- else it is placed after every kept row that does not sort after it (rows that tie keep their arrival order, as
  Flink's ``TopNBuffer`` lists them) — or, for a window deduplication keeping the last row, before the rows it
  ties with (Flink's ``RowTimeDeduplicateRecordsCombiner`` replaces a row of the same rowtime) —, the window keeps
  its first ``rank_end`` rows, and an event-time timer is registered at the window's end − 1 ms.

When the timer fires the window emits ``+I[row…, rank]`` for ranks ``rank_start`` … ``rank_end`` (ROW_NUMBER: 1, 2,
… in sort order) and its rows are freed. The input must be insert-only (Flink: "Window rank does not support input
RowKind"); the output is insert-only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamjoin.changelog import RowKind
from streamjoin.runtime.timers import TimerService

__all__ = ["SortKey", "WindowRankFunction", "WindowRankState", "sort_comparator"]

Change = tuple[RowKind, tuple]


@dataclass(frozen=True)
class SortKey:
    """One ORDER BY field: its position in the row, its direction and where NULLs go (Flink: NULLS FIRST for
    ASC, NULLS LAST for DESC unless the query says otherwise)."""

    position: int
    ascending: bool
    nulls_first: bool


def sort_comparator(keys: Sequence[SortKey]) -> Callable[[tuple, tuple], int]:
    """A ``cmp(a, b)`` over rows by ``keys``: negative when ``a`` ranks before ``b``, 0 when they tie."""

    def cmp(a: tuple, b: tuple) -> int:
        for k in keys:
            x, y = a[k.position], b[k.position]
            if x is None or y is None:
                if x is None and y is None:
                    continue
                return (-1 if k.nulls_first else 1) * (1 if x is None else -1)
            if x != y:
                c = -1 if x < y else 1
                return c if k.ascending else -c
        return 0

    return cmp


@dataclass
class WindowRankState:
    """One partition key's state: its windows by end (epoch ms), timers, late-row count and Spark timer.

    Attributes:
        windows: window end (ms) → the window's kept rows in rank order (at most ``rank_end``).
        timers: the key's timers (one per window, at its end − 1 ms) and the latest watermark it saw.
        late_dropped: rows dropped because their window had fired.
        spark_timer: the Spark timer standing for :attr:`timers` (Spark operator only).
    """

    windows: dict[int, list[tuple]] = field(default_factory=dict)
    timers: TimerService = field(default_factory=TimerService)
    late_dropped: int = 0
    spark_timer: int | None = None


class WindowRankFunction:
    """The window Top-N of one partition key (module docstring).

    Args:
        keys: the ORDER BY fields.
        rank_start: the first rank emitted (1-based).
        rank_end: the last rank emitted.
        newest_first_on_ties: a row ranks before the kept rows it ties with (window deduplication keeping the last
            row), not after them.
    """

    def __init__(
        self, keys: Sequence[SortKey], rank_start: int, rank_end: int, newest_first_on_ties: bool = False
    ) -> None:
        self.cmp = sort_comparator(keys)
        self.rank_start, self.rank_end = rank_start, rank_end
        self.after = 0 if newest_first_on_ties else 1

    def process_element(self, state: WindowRankState, row: tuple, end_ms: int) -> list[Change]:
        """Keep ``row`` in its window ending at ``end_ms`` (epoch ms) if it can rank; emits nothing."""
        if end_ms - 1 <= state.timers.time:
            state.late_dropped += 1
            return []
        rows = state.windows.get(end_ms)
        if rows is None:
            rows = state.windows[end_ms] = []
            state.timers.register(end_ms - 1)
        at = len(rows)
        while at > 0 and self.cmp(rows[at - 1], row) >= self.after:
            at -= 1
        if at < self.rank_end:
            rows.insert(at, row)
            del rows[self.rank_end :]
        return []

    def on_timer(self, state: WindowRankState, timestamp: int) -> list[Change]:
        """The window ending at ``timestamp`` + 1 ms fires: ``+I[row…, rank]`` per rank in range."""
        rows: list[Any] = state.windows.pop(timestamp + 1, [])
        return [
            (RowKind.INSERT, (*row, rank))
            for rank, row in enumerate(rows, start=1)
            if self.rank_start <= rank <= self.rank_end
        ]
