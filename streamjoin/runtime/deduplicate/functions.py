"""Deduplication: ``ROW_NUMBER() OVER (PARTITION BY key ORDER BY t {ASC|DESC}) = 1`` (docs/semantics.md §6).

Flink's ``operators/deduplicate/``; input is insert-only. Per key:

=================================== ============ ===========================================================
function                            output       behaviour
=================================== ============ ===========================================================
ProcTimeDeduplicateKeepFirstRow     insert-only  the first row to arrive is emitted (``+I``), later ones dropped
ProcTimeDeduplicateKeepLastRow      updates      ``+I`` for the first row; each later row ``-U`` old, ``+U`` new;
                                                 a row equal to the key's first row, while that row
                                                 is still the kept one, emits nothing (see below)
RowTimeDeduplicateKeepLastRow       updates      a row replaces the kept one when its time is ≥ the kept
                                                 one's (ties: the later arrival wins): ``+I`` / ``-U`` ``+U``;
                                                 an older row is ignored
RowTimeDeduplicateKeepFirstRow      insert-only  the row with the smallest time (ties: the earlier arrival)
                                                 is held until the watermark passes it, then emitted once;
                                                 a row whose time is < the watermark is late: dropped, counted
=================================== ============ ===========================================================

Processing time means arrival order: on Spark, micro-batch order then ``_seq``.

Keeping the last row on processing time, Flink 2.3 skips a row equal to the kept one
(``DeduplicateFunctionHelper.processLastRowOnProcTime``, without state TTL) with a record equaliser
that compares the RowKind too, and its heap state keeps the very object it then emits: once a key has
emitted an update its kept row is a ``+U`` and no ``+I`` row equals it. So a repeat is skipped only
while the key's first row is still the kept one; after the key's first update every row, equal or not,
emits ``-U`` ``+U``. A ``PROCTIME()`` column has no value in Flink's row (it is read from the clock
only where a query uses it) and takes no part in the comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from streamjoin.changelog import RowKind
from streamjoin.errors import ValidationError
from streamjoin.runtime.timers import TimerService

__all__ = [
    "DedupState",
    "DeduplicateFunction",
    "ProcTimeDeduplicateKeepFirstRowFunction",
    "ProcTimeDeduplicateKeepLastRowFunction",
    "RowTimeDeduplicateKeepFirstRowFunction",
    "RowTimeDeduplicateKeepLastRowFunction",
    "deduplicate_function",
]

Change = tuple[RowKind, tuple]


@dataclass
class DedupState:
    """One key's state.

    Attributes:
        row: the kept row (or, keeping the first row on event time, the row
            waiting for the watermark).
        time: its order value (rowtime in ms, or the ORDER BY value).
        seq: its input ``_seq`` (Spark operator: the ``_seq`` of a timer's output).
        emitted: keeping the first row, whether it was emitted (event-time keep-first); keeping the last
            row on processing time, whether the key emitted an update (its kept row went out as ``+U``).
        timers, late_dropped, spark_timer: as in :class:`~streamjoin.runtime.over_aggregate.functions.OverState`.
    """

    row: tuple | None = None
    time: object = None
    seq: bytes | None = None
    emitted: bool = False
    timers: TimerService = field(default_factory=TimerService)
    late_dropped: int = 0
    spark_timer: int | None = None


class DeduplicateFunction:
    """A per-key deduplication function; state passed in, changes returned."""

    def process_element(self, state: DedupState, row: tuple, time=None) -> list[Change]:
        """Take one input row; ``time`` is its ORDER BY value (unused on processing time)."""
        raise NotImplementedError

    def on_timer(self, state: DedupState, time: int) -> list[Change]:
        return []


def _replace(state: DedupState, row: tuple) -> list[Change]:
    """Flink's ``updateDeduplicateResult``: ``+I`` for a first row, else ``-U`` old, ``+U`` new."""
    previous, state.row = state.row, row
    if previous is None:
        return [(RowKind.INSERT, row)]
    return [(RowKind.UPDATE_BEFORE, previous), (RowKind.UPDATE_AFTER, row)]


class ProcTimeDeduplicateKeepFirstRowFunction(DeduplicateFunction):
    """Keep the first row to arrive; insert-only output."""

    def process_element(self, state, row, time=None):
        if state.emitted:
            return []
        state.emitted = True
        return [(RowKind.INSERT, row)]


class ProcTimeDeduplicateKeepLastRowFunction(DeduplicateFunction):
    """Keep the last row to arrive; a row equal to the key's first row emits nothing while that row is kept.

    Flink's rule without state TTL (module docstring): the repeat is skipped only until the key's first
    update; with state TTL nothing is skipped.

    Args:
        compared: the positions of the row's values that the comparison looks at (None: all); a
            ``PROCTIME()`` column's is left out.
        state_ttl: whether state TTL is on (Flink then emits every row).
    """

    def __init__(self, compared: Sequence[int] | None = None, state_ttl: bool = False):
        self.compared = None if compared is None else tuple(compared)
        self.state_ttl = state_ttl

    def _equal(self, kept: tuple, row: tuple) -> bool:
        if self.compared is None:
            return kept == row
        return all(kept[i] == row[i] for i in self.compared)

    def process_element(self, state, row, time=None):
        if not self.state_ttl and not state.emitted and state.row is not None and self._equal(state.row, row):
            return []  # the kept row stays the one emitted, so that a later -U retracts exactly it
        changes = _replace(state, row)
        state.emitted = len(changes) > 1
        return changes


class RowTimeDeduplicateKeepLastRowFunction(DeduplicateFunction):
    """Keep the row with the greatest order value; a row with an equal value replaces the kept one."""

    def process_element(self, state, row, time=None):
        if state.row is not None and time < state.time:
            return []
        state.time = time
        return _replace(state, row)


class RowTimeDeduplicateKeepFirstRowFunction(DeduplicateFunction):
    """Keep the row with the smallest rowtime, emitted once the watermark passes it; insert-only."""

    def process_element(self, state, row, time=None):
        if time < state.timers.time:
            state.late_dropped += 1
            return []
        if state.emitted:
            return []
        if state.row is None or time < state.time:
            if state.row is not None:
                state.timers.delete(state.time)
            state.timers.register(time)
            state.row, state.time = row, time
        return []

    def on_timer(self, state, time):
        row, state.row, state.time = state.row, None, None
        state.emitted = True
        return [(RowKind.INSERT, row)]


def deduplicate_function(
    keep: Literal["first", "last"], rowtime: bool, *, compared: Sequence[int] | None = None, state_ttl: bool = False
) -> DeduplicateFunction:
    """The Flink function for ``keep`` on event time (``rowtime``) or processing time.

    ``compared`` and ``state_ttl`` are those of :class:`ProcTimeDeduplicateKeepLastRowFunction` (the
    other variants compare no rows).

    Raises:
        ValidationError: for ``keep`` other than ``"first"``/``"last"``.
    """
    if keep not in ("first", "last"):
        raise ValidationError(f"keep must be 'first' or 'last'; got {keep!r}")
    if rowtime:
        return RowTimeDeduplicateKeepFirstRowFunction() if keep == "first" else RowTimeDeduplicateKeepLastRowFunction()
    if keep == "first":
        return ProcTimeDeduplicateKeepFirstRowFunction()
    return ProcTimeDeduplicateKeepLastRowFunction(compared, state_ttl)
