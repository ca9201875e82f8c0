"""Group aggregate over any changelog: ``SELECT key, agg(col), … FROM df GROUP BY key`` (docs/semantics.md §6).

Flink's ``operators/aggregate/GroupAggFunction``. Per group key, for each
input change:

- ``+I``/``+U`` accumulate the row, ``-U``/``-D`` retract it; a retraction
  for a group that has no state is ignored (Flink: it may follow a state
  clean-up);
- the group's row count (a hidden ``COUNT(*)``) decides what is emitted:

  ========================= =====================================================
  after the change          emitted
  ========================= =====================================================
  new group (count ≠ 0)     ``+I[key, new values]``
  count ≠ 0, values same    nothing
  count ≠ 0, values changed ``-U[key, old values]``, ``+U[key, new values]``
  count = 0                 ``-D[key, old values]``; the group's state is cleared
  ========================= =====================================================

In mini-batch mode (``SET 'table.exec.mini-batch.enabled' = 'true'``; Flink's
``MiniBatchGroupAggFunction``) a group's changes of one micro-batch are applied
together and decide one emission by the same table, compared with the values
before the micro-batch: a group updated by 10,000 rows of a micro-batch emits
one ``-U``/``+U`` pair, not 10,000. The final result is the same; the changelog
is shorter (Flink's own mini-batch changelog, with the micro-batch as the bundle).
A group without state drops the leading retractions of its bundle.

MIN and MAX keep every value's multiplicity (not just the extreme) so that a
retraction of the extreme finds the next one; COUNT(DISTINCT) keeps the same
multiplicities. Give ``insert_only_input=True`` when the input has no
retractions to keep only the extremes (Flink's planner does the same).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field

from streamjoin.changelog import RowKind
from streamjoin.runtime.aggregates import Aggregates

__all__ = ["GroupAggFunction", "GroupState"]

Change = tuple[RowKind, tuple]

#: Functions GROUP BY accepts (FIRST_VALUE / LAST_VALUE have no retractable form here).
GROUP_FUNCTIONS = ("COUNT", "COUNT_DISTINCT", "SUM", "AVG", "MIN", "MAX")


@dataclass
class GroupState:
    """One group's state: row count and accumulators (``accs`` is ``None`` when the group is empty).

    ``views`` (aggregate position → value → multiplicity) are in-memory dicts
    here; the Spark operator backs them by MapState instead.
    """

    count: int = 0
    accs: list | None = None
    views: dict[int, MutableMapping] = field(default_factory=dict)


class GroupAggFunction:
    """Per-group aggregation of a changelog, emitting the result's changelog.

    Args:
        aggregates: the aggregates (built with ``retractable`` unless the input is insert-only).
    """

    def __init__(self, aggregates: Aggregates) -> None:
        self.aggregates = aggregates

    def process_element(self, state: GroupState, key: tuple, kind: RowKind, row: tuple) -> list[Change]:
        """Apply one change of the input to the group ``key`` and return the output changes."""
        return self.process_bundle(state, key, [(kind, row)])

    def process_bundle(self, state: GroupState, key: tuple, changes: list[tuple[RowKind, tuple]]) -> list[Change]:
        """Apply the group's changes of one bundle at once and return the output changes for them all.

        One change is a bundle of one (Flink's ``GroupAggFunction``); in mini-batch mode a group's
        changes of one micro-batch are one bundle (Flink's ``MiniBatchGroupAggFunction.finishBundle``):
        for a group without state the leading retractions are dropped, the rest are accumulated or
        retracted in order, and the group's count at the end decides what is emitted (module docstring).
        """
        accs = state.accs
        first = accs is None
        if accs is None:
            while changes and changes[0][0].is_retract:
                changes = changes[1:]
            if not changes:
                return []
            accs, fresh_views = self.aggregates.create()
            state.accs = accs
            for i, view in fresh_views.items():
                state.views.setdefault(i, view)
        previous = self.aggregates.get_values(accs, state.views)
        for kind, row in changes:
            args = self.aggregates.args(row)
            if kind.is_accumulate:
                self.aggregates.accumulate(accs, state.views, args)
                state.count += 1
            else:
                self.aggregates.retract(accs, state.views, args)
                state.count -= 1
        if state.count == 0:
            state.accs = None
            for view in state.views.values():
                view.clear()
            return [] if first else [(RowKind.DELETE, key + previous)]
        current = self.aggregates.get_values(accs, state.views)
        if first:
            return [(RowKind.INSERT, key + current)]
        if current == previous:
            return []
        return [(RowKind.UPDATE_BEFORE, key + previous), (RowKind.UPDATE_AFTER, key + current)]
