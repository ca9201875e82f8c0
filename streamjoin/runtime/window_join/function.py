"""Window join, per join key: Flink's ``WindowJoinOperator`` (docs/semantics.md §11.4).

Rows of both inputs reach the operator with their window already assigned (a window table function's
``window_start``, ``window_end``, the same windows on both sides). Per join key the state holds, per window not yet
fired, the rows of each side in arrival order (Flink's ``left-records`` / ``right-records`` list states, namespaced by
the window's end). For each input row:

- the window is **late** when its end − 1 ms is at or before the current watermark (the minimum of both inputs'
  watermarks; Flink's ``isWindowFired``): the row is dropped (Flink also counts it, in
  ``leftNumLateRecordsDropped`` / ``rightNumLateRecordsDropped``; not counted here);
- else it is appended to its side's rows of the window, and an event-time timer is registered at the window's
  end − 1 ms.

When the timer fires the window's rows are joined and freed, as Flink's ``WindowJoinHelper`` processors join them:

- INNER: per left row in arrival order, ``+I[left, right]`` for each right row (arrival order) that matches;
- LEFT: the same, and a left row that matched nothing ``+I[left, NULL…]`` right after its pairs; RIGHT: per right
  row, its pairs and then, if none, ``+I[NULL…, right]``; FULL: LEFT's output, then every right row that matched
  nothing, padded;
- SEMI / ANTI: each left row once if some right row matches it / if none does (as ``+I[left, NULL…]``: the Spark
  operator keeps the left columns).

A pair matches when the join key has no NULL (SQL's ``=`` never holds for NULL; Flink's ``filterNullKeys``) and the
residual predicate holds. The python logic never evaluates a residual (Spark SQL) itself: in *candidate mode* it
emits every equi-matching pair with both rows' ids and, for each outer row, its *expiry* (the null-padded row with
its id) right after that row's pairs, for ``streamjoin.runtime.interval_join.residual.pad_after_residual`` to filter
and pad (Flink's order kept). Input must be insert-only (Flink: "Window join could not handle retraction input
stream"); the output is insert-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from streamjoin.changelog import RowKind

__all__ = ["WindowJoinFunction", "WindowJoinHow", "WindowJoinState"]

WindowJoinHow = Literal["inner", "left", "right", "full", "semi", "anti"]
Change = tuple[RowKind, tuple]


@dataclass
class WindowJoinState:
    """One join key's state.

    Attributes:
        windows: window end (epoch ms) → the window's rows per side (left, right), each in arrival order.
        joinable: whether the key has no NULL column (else no pair matches; outer rows are still padded).
    """

    windows: dict[int, tuple[list[tuple], list[tuple]]] = field(default_factory=dict)
    joinable: bool = True

    @property
    def row_count(self) -> int:
        """Rows held over both sides and all windows."""
        return sum(len(left) + len(right) for left, right in self.windows.values())

    @property
    def is_empty(self) -> bool:
        return not self.windows


class WindowJoinFunction:
    """The window join of one join key (module docstring).

    Args:
        how: the join type.
        arities: the number of data columns of the left and the right rows (for null padding).
        candidates: candidate mode (module docstring): rows out are ``output values + (left id, right id)``, an id
            being the row's position in its side's rows of the window (``None`` on a padded side).
    """

    def __init__(self, how: WindowJoinHow, arities: tuple[int, int], *, candidates: bool = False) -> None:
        self.how = how
        self.nulls = ((None,) * arities[0], (None,) * arities[1])
        self.candidates = candidates

    def new_state(self, key: tuple) -> WindowJoinState:
        return WindowJoinState(joinable=all(k is not None for k in key))

    def process_element(self, state: WindowJoinState, side: int, row: tuple, end_ms: int, watermark: int, timers):
        """Keep ``row`` of input ``side`` (0 left, 1 right) in its window ending at ``end_ms``, unless the window has
        fired by ``watermark`` (both epoch ms); registers the window's timer with ``timers``. Emits nothing."""
        if end_ms - 1 <= watermark:
            return
        state.windows.setdefault(end_ms, ([], []))[side].append(row)
        timers.register(end_ms - 1)

    def on_timer(self, state: WindowJoinState, timestamp: int) -> list[Change]:
        """The window ending at ``timestamp`` + 1 ms fires: its joined rows, in Flink's order. Without a residual
        every row of one side matches every row of the other, unless the key has a NULL."""
        left, right = state.windows.pop(timestamp + 1, ([], []))
        match = state.joinable and bool(left) and bool(right)
        how = self.how
        if how in ("semi", "anti"):
            return [self._pair(row, None, None, None) for row in left] if match == (how == "semi") else []
        out: list[Change] = []
        if how == "right":
            # Flink's RightOuterWindowJoinProcessor walks the right rows, each with its pairs, then its padding.
            for j, row in enumerate(right):
                if match:
                    out += [self._pair(other, row, i, j) for i, other in enumerate(left)]
                if self.candidates or not match:
                    out.append(self._pair(None, row, None, j))
            return out
        for i, row in enumerate(left):
            if match:
                out += [self._pair(row, other, i, j) for j, other in enumerate(right)]
            if how in ("left", "full") and (self.candidates or not match):
                out.append(self._pair(row, None, i, None))
        if how == "full" and (self.candidates or not match):
            out += [self._pair(None, row, None, j) for j, row in enumerate(right)]
        return out

    def _pair(self, left: tuple | None, right: tuple | None, i: int | None, j: int | None) -> Change:
        """``+I[left, right]``, a missing side padded with NULLs (in candidate mode, then the rows' ids)."""
        ids = (i, j) if self.candidates else ()
        left = self.nulls[0] if left is None else left
        right = self.nulls[1] if right is None else right
        return RowKind.INSERT, (*left, *right, *ids)
