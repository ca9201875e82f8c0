"""Top-N over a changelog, per partition key: Flink's ``operators/rank`` functions (docs/semantics.md §6.4).

``ROW_NUMBER() OVER (PARTITION BY k ORDER BY s) AS rn … WHERE rn BETWEEN rank_start AND rank_end``. Flink picks
the function by the input's changelog mode (``StreamExecRank``, ``RankProcessStrategy``):

==================== ================================ ==========================================================
strategy             Flink's function                 input, state
==================== ================================ ==========================================================
``"first"``          ``AppendOnlyFirstNFunction``     insert-only, ordered by processing time ascending: a count
                                                      of the rows seen; the first ``rank_end`` are emitted
``"top1"``           ``FastTop1Function``             insert-only (or updates monotonic in the sort key), a
                                                      Top-1: the best row; a later one replaces it only when
                                                      it sorts strictly before it (``-U`` old, ``+U`` new)
``"append"``         ``AppendOnlyTopNFunction``       insert-only: the rows whose sort key can still rank
                                                      within ``rank_end`` (a ``TopNBuffer``)
``"retract"``        ``RetractableTopNFunction``      any changelog (``+I``/``+U`` add a row, ``-U``/``-D``
                                                      remove it): every row of the key, by sort key
==================== ================================ ==========================================================

The state is one list of groups in sort order; a group holds the rows of one sort key in arrival order (Flink's
``TreeMap`` of sort keys, each to the list of its rows). Rows that tie rank in arrival order.

What a change emits follows Flink's algorithms statement by statement (the functions below name theirs). With the
rank number in the output (``output_rank``) or a rank range that starts above 1, every row whose rank shifts is
updated in place: ``-U[old row, r]`` ``+U[new row, r]`` per shifted rank ``r``, ``+I`` / ``-D`` at the rank that
appears or disappears, only for ranks in ``[rank_start, rank_end]``. Without it, ``+I`` for a row that enters
the Top-N and ``-D`` for the one it pushes out (or the reverse on a retraction). A retraction whose row is not in
the state (a key whose state expired) emits nothing, as Flink's lenient mode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from streamjoin.changelog import RowKind
from streamjoin.runtime.window_rank.function import SortKey, sort_comparator

__all__ = ["RankState", "Strategy", "TopNFunction"]

Change = tuple[RowKind, tuple]
Strategy = Literal["first", "top1", "append", "update", "retract"]


@dataclass
class RankState:
    """One partition key's state.

    Attributes:
        groups: the rows by sort key, in sort order: one list per sort key, its rows in arrival order.
        count: rows seen so far (strategy ``"first"`` only).
    """

    groups: list[list[tuple]] = field(default_factory=list)
    count: int = 0


class TopNFunction:
    """The Top-N of one partition key (module docstring).

    Args:
        keys: the ORDER BY fields over the row's positions.
        rank_start: the first rank emitted (1-based).
        rank_end: the last rank emitted.
        output_rank: whether the output row ends with its rank (BIGINT).
        strategy: which of Flink's functions (module docstring).
        row_key: the positions of the row key (strategy ``"update"``).
    """

    def __init__(
        self,
        keys: Sequence[SortKey],
        rank_start: int,
        rank_end: int,
        output_rank: bool,
        strategy: Strategy,
        row_key: Sequence[int] = (),
    ) -> None:
        self.cmp: Callable[[tuple, tuple], int] = sort_comparator(keys)
        self.row_key = tuple(row_key)
        self.rank_start, self.rank_end = rank_start, rank_end
        self.output_rank = output_rank
        self.strategy = strategy
        # Flink's without-number algorithms cannot skip ranks below the start; an offset takes the numbered ones.
        self.numbered = output_rank or rank_start > 1

    def process_element(self, state: RankState, kind: RowKind, row: tuple) -> list[Change]:
        """The changes one input change causes; updates ``state``."""
        out: list[Change] = []
        if self.strategy == "first":
            self._first_n(state, row, out)
        elif self.strategy == "top1":
            self._top1(state, row, out)
        elif self.strategy == "append":
            self._append_only(state, row, out)
        elif self.strategy == "update":
            self._updatable(state, row, out)
        elif kind.is_accumulate:
            self._accumulate(state, row, out)
        else:
            self._retract(state, row, out)
        return out

    # ------------------------------------------------------------------ output (AbstractTopNFunction.collect*)

    def _emit(self, out: list[Change], kind: RowKind, row: tuple, rank: int | None = None) -> None:
        """``collectX(out, row, rank)`` when ``rank`` is given (only ranks in range), else ``collectX(out, row)``."""
        if rank is not None and not self.rank_start <= rank <= self.rank_end:
            return
        out.append((kind, (*row, rank) if self.output_rank else row))

    # ------------------------------------------------------------------ sort keys

    def _locate(self, groups: list[list[tuple]], row: tuple) -> tuple[int, bool]:
        """Where ``row``'s sort key is in ``groups`` (binary search): its index and whether it is there."""
        lo, hi = 0, len(groups)
        while lo < hi:
            mid = (lo + hi) // 2
            c = self.cmp(groups[mid][0], row)
            if c == 0:
                return mid, True
            if c < 0:
                lo = mid + 1
            else:
                hi = mid
        return lo, False

    def _add(self, groups: list[list[tuple]], row: tuple) -> int:
        """Append ``row`` to its sort key's rows (a new group where it has none); returns the group's index."""
        at, found = self._locate(groups, row)
        if found:
            groups[at].append(row)
        else:
            groups.insert(at, [row])
        return at

    # ------------------------------------------------------------------ AppendOnlyFirstNFunction

    def _first_n(self, state: RankState, row: tuple, out: list[Change]) -> None:
        if state.count >= self.rank_end:
            return
        state.count += 1
        self._emit(out, RowKind.INSERT, row, state.count if self.numbered else None)

    # ------------------------------------------------------------------ FastTop1Function

    def _top1(self, state: RankState, row: tuple, out: list[Change]) -> None:
        rank = 1 if self.output_rank else None
        if not state.groups:
            state.groups.append([row])
            self._emit(out, RowKind.INSERT, row, rank)
        elif self.cmp(row, state.groups[0][0]) < 0:
            prev, state.groups[0][0] = state.groups[0][0], row
            self._emit(out, RowKind.UPDATE_BEFORE, prev, rank)
            self._emit(out, RowKind.UPDATE_AFTER, row, rank)

    # ------------------------------------------------------------------ AppendOnlyTopNFunction

    def _append_only(self, state: RankState, row: tuple, out: list[Change]) -> None:
        groups = state.groups
        # TopNBuffer.checkSortKeyInBufferRange: room left, or a sort key before the last one
        if sum(map(len, groups)) >= self.rank_end and self.cmp(row, groups[-1][0]) >= 0:
            return
        at = self._add(groups, row)
        if self.numbered:
            stop = self._shift_in(groups, at, row, out)
            del groups[stop:]  # sort keys the ranks no longer reach
        else:
            self._push_out(groups, row, out)

    def _shift_in(self, groups: list[list[tuple]], at: int, row: tuple, out: list[Change]) -> int:
        """``processElementWithRowNumber`` / ``emitRecordsWithRowNumber``: ``row`` (just added to group ``at``) takes
        its rank, every row after it moves one rank down; returns the index of the first group not visited."""
        rank, current = 0, row
        g = 0
        while g < len(groups) and rank <= self.rank_end:
            rows = groups[g]
            if g <= at:
                rank += len(rows)
            else:
                for prev in rows:
                    if rank > self.rank_end:
                        break
                    self._emit(out, RowKind.UPDATE_BEFORE, prev, rank)
                    self._emit(out, RowKind.UPDATE_AFTER, current, rank)
                    current, rank = prev, rank + 1
            g += 1
        if rank <= self.rank_end:
            self._emit(out, RowKind.INSERT, current, rank)
        return g

    def _push_out(self, groups: list[list[tuple]], row: tuple, out: list[Change]) -> None:
        """``processElementWithoutRowNumber``: over ``rank_end`` rows, the last one leaves (``-D``) unless it is
        ``row`` itself; ``row`` enters (``+I``)."""
        if sum(map(len, groups)) > self.rank_end:
            last = groups[-1].pop()
            if not groups[-1]:
                groups.pop()
            if last == row:
                return
            self._emit(out, RowKind.DELETE, last)
        self._emit(out, RowKind.INSERT, row)

    # ------------------------------------------------------------------ UpdatableTopNFunction

    def _key_of(self, row: tuple) -> tuple:
        return tuple(row[i] for i in self.row_key)

    def _find(self, groups: list[list[tuple]], key: tuple) -> tuple[int, int] | None:
        """The group and position of the row whose row key is ``key`` (Flink's ``rowKeyMap``), or None."""
        for g, rows in enumerate(groups):
            for j, row in enumerate(rows):
                if self._key_of(row) == key:
                    return g, j
        return None

    def _rank_of(self, groups: list[list[tuple]], g: int, j: int) -> int:
        return sum(len(rows) for rows in groups[:g]) + j + 1

    def _updatable(self, state: RankState, row: tuple, out: list[Change]) -> None:
        groups = state.groups
        found = self._find(groups, self._key_of(row))
        if found is not None:
            g, j = found
            old = groups[g][j]
            compare = self.cmp(row, old)
            if not self.numbered:  # processElementWithoutRowNumber
                if compare == 0:
                    groups[g][j] = row
                else:
                    self._move(groups, g, j, row)
                self._emit(out, RowKind.UPDATE_BEFORE, old)
                self._emit(out, RowKind.UPDATE_AFTER, row)
                return
            old_rank = self._rank_of(groups, g, j)
            if compare == 0:  # the same rank: the row only changes
                groups[g][j] = row
                self._emit(out, RowKind.UPDATE_BEFORE, old, old_rank)
                self._emit(out, RowKind.UPDATE_AFTER, row, old_rank)
                return
            self._move(groups, g, j, row)
            if compare < 0:
                self._shift_updated(groups, row, out, old, old_rank)
            else:  # the sort key got worse, against the monotony the planner relied on (emitted as Flink does)
                g, j = self._find(groups, self._key_of(row))  # type: ignore[misc]
                self._shift_back(groups, row, self._rank_of(groups, g, j), old, old_rank, out)
            return
        if sum(map(len, groups)) >= self.rank_end and self.cmp(row, groups[-1][0]) >= 0:
            return  # TopNBuffer.checkSortKeyInBufferRange
        self._add(groups, row)
        if self.numbered:
            self._shift_updated(groups, row, out, None, -1)
            return
        if sum(map(len, groups)) > self.rank_end:
            last = groups[-1].pop()  # TopNBuffer.removeLast
            if not groups[-1]:
                groups.pop()
            self._emit(out, RowKind.DELETE, last)
        self._emit(out, RowKind.INSERT, row)

    def _move(self, groups: list[list[tuple]], g: int, j: int, row: tuple) -> None:
        """The row at ``groups[g][j]`` leaves its sort key; ``row`` joins the end of its own."""
        del groups[g][j]
        if not groups[g]:
            del groups[g]
        self._add(groups, row)

    def _shift_updated(
        self, groups: list[list[tuple]], row: tuple, out: list[Change], old: tuple | None, old_rank: int
    ) -> None:
        """``emitRecordsWithRowNumber`` of ``UpdatableTopNFunction``: ``row`` (a new row, or ``old`` moved up from
        ``old_rank``) takes its rank, the rows between move one rank down."""
        rank, current, found, old_retracted = 0, row, False, False
        g = 0
        while g < len(groups) and rank <= self.rank_end:
            rows = groups[g]
            if not found and self.cmp(rows[0], row) == 0:
                rank += len(rows)
                found = True
            elif found:
                if old is not None and self.cmp(rows[0], old) > 0:
                    g += 1  # below the old sort key nothing moves
                    break
                for prev in rows:
                    if rank > self.rank_end if old is None else rank >= old_rank:
                        break
                    self._emit(out, RowKind.UPDATE_BEFORE, prev, rank)
                    if current is row and old is not None and not old_retracted:
                        self._emit(out, RowKind.UPDATE_BEFORE, old, old_rank)  # a row key retracts first
                        old_retracted = True
                    self._emit(out, RowKind.UPDATE_AFTER, current, rank)
                    current, rank = prev, rank + 1
            else:
                rank += len(rows)
            g += 1
        if rank <= self.rank_end:
            if old is None:
                self._emit(out, RowKind.INSERT, current, rank)
            else:
                if not old_retracted:
                    self._emit(out, RowKind.UPDATE_BEFORE, old, old_rank)
                self._emit(out, RowKind.UPDATE_AFTER, current, rank)
            return
        del groups[g:]  # sort keys the ranks no longer reach

    def _shift_back(
        self, groups: list[list[tuple]], row: tuple, new_rank: int, old: tuple, old_rank: int, out: list[Change]
    ) -> None:
        """``emitRecordsWithRowNumberIgnoreStateError``: ``row`` fell from ``old_rank`` to ``new_rank``; the rows
        between move one rank up."""
        self._emit(out, RowKind.UPDATE_BEFORE, old, old_rank)
        rank = 0
        for rows in groups:
            for current in rows:
                rank += 1
                if rank == new_rank:
                    self._emit(out, RowKind.UPDATE_AFTER, row, new_rank)
                    return
                if old_rank <= rank:
                    self._emit(out, RowKind.UPDATE_BEFORE, current, rank + 1)
                    self._emit(out, RowKind.UPDATE_AFTER, current, rank)
        self._emit(out, RowKind.UPDATE_AFTER, row, new_rank)

    # ------------------------------------------------------------------ RetractableTopNFunction

    def _accumulate(self, state: RankState, row: tuple, out: list[Change]) -> None:
        groups = state.groups
        at = self._add(groups, row)
        if self.numbered:
            self._shift_in(groups, at, row, out)
            return
        # emitRecordsWithoutRowNumber
        rank, enters, leaves = 0, False, None
        for g, rows in enumerate(groups):
            if rank > self.rank_end:
                break
            if g < at:
                rank += len(rows)
            elif g == at:
                rank += len(rows)
                enters = self.rank_start <= rank <= self.rank_end
            elif rank + len(rows) <= self.rank_end:
                rank += len(rows)
            else:
                leaves = rows[self.rank_end - rank]
                break
        if leaves is not None:
            self._emit(out, RowKind.DELETE, leaves)
        if enters:
            self._emit(out, RowKind.INSERT, row)

    def _retract(self, state: RankState, row: tuple, out: list[Change]) -> None:
        groups = state.groups
        at, found = self._locate(groups, row)
        if not found:
            return  # nothing of that sort key: stale state (Flink warns and skips)
        if self.numbered:
            removed = self._shift_out_numbered(groups, at, row, out)
        else:
            removed = self._shift_out(groups, at, row, out)
        if not removed and row in groups[at]:
            groups[at].remove(row)  # beyond the ranks the search reached
        if not groups[at]:
            del groups[at]

    def _shift_out_numbered(self, groups: list[list[tuple]], at: int, row: tuple, out: list[Change]) -> bool:
        """``retractRecordWithRowNumber``: every row after ``row`` moves one rank up, the last rank reached is
        deleted; returns whether ``row`` was found (and removed) within the ranks searched."""
        rank, found = 0, False
        prev: tuple = ()
        for g, rows in enumerate(groups):
            if rank > self.rank_end:
                break
            if g < at:
                rank += len(rows)
            elif g == at:
                j = 0
                while j < len(rows) and rank <= self.rank_end:
                    current = rows[j]
                    if not found and current == row:
                        prev, found = current, True
                        del rows[j]
                    else:
                        if found:
                            self._emit(out, RowKind.UPDATE_BEFORE, prev, rank)
                            self._emit(out, RowKind.UPDATE_AFTER, current, rank)
                            prev = current
                        j += 1
                    rank += 1
            elif found:
                for current in rows:
                    if rank > self.rank_end:
                        break
                    self._emit(out, RowKind.UPDATE_BEFORE, prev, rank)
                    self._emit(out, RowKind.UPDATE_AFTER, current, rank)
                    prev, rank = current, rank + 1
            else:
                rank += len(rows)
        if rank <= self.rank_end and found:
            self._emit(out, RowKind.DELETE, prev, rank)
        return found

    def _shift_out(self, groups: list[list[tuple]], at: int, row: tuple, out: list[Change]) -> bool:
        """``retractRecordWithoutRowNumber``: ``row`` leaves (``-D``), the row at rank ``rank_end + 1`` enters
        (``+I``); returns whether ``row`` was found (and removed) within the ranks searched."""
        rank, found = 1, False
        for g, rows in enumerate(groups):
            if rank > self.rank_end:
                break
            if g < at:
                rank += len(rows)
            elif g == at:
                j = 0
                while j < len(rows) and rank <= self.rank_end:
                    current = rows[j]
                    if not found and current == row:
                        self._emit(out, RowKind.DELETE, current, rank)
                        rank -= 1
                        found = True
                        del rows[j]
                    else:
                        if found and rank == self.rank_end:
                            self._emit(out, RowKind.INSERT, current, rank)
                        j += 1
                    rank += 1
            elif found:
                last = rank + len(rows) - 1
                if last < self.rank_end:
                    rank = last + 1
                else:
                    self._emit(out, RowKind.INSERT, rows[self.rank_end - rank])
                    break
            else:
                rank += len(rows)
        return found
