"""ChangelogNormalize: an upsert changelog made a full changelog, keyed by the source's primary key.

docs/semantics.md §1 (ChangelogNormalize). An upsert source (``[I,UA,D]``, e.g. ``upsert-kafka``)
says for each key only "this is the row now" or "the key is gone", and a delete may carry only the
key (a Kafka tombstone). An operator that retracts by value (a regular join, a group aggregate, a
retract sink) needs the row being replaced. Flink's planner then puts
``StreamPhysicalChangelogNormalize`` after the source; its runtime is
``ProcTimeDeduplicateKeepLastRowFunction`` on a changelog input, i.e.
``DeduplicateFunctionHelper.processLastRowOnChangelog`` (the mini-batch variant,
``ProcTimeMiniBatchDeduplicateKeepLastRowFunction``, gives the same changes). State: the last full
row per key. Per input change:

============================ ===================================================================
input                        output
============================ ===================================================================
``+I``/``+U``, unknown key   ``+I`` row
``+I``/``+U``, known key     ``-U`` stored row (only when UPDATE_BEFORE is generated), ``+U`` row;
                             nothing when the row equals the stored one (compared on content,
                             not RowKind) and no state TTL is set (with TTL Flink emits it, so
                             downstream state is refreshed)
``-U``/``-D``, known key     ``-D`` with the *stored* row (the incoming one may hold only the key)
``-U``/``-D``, unknown key   nothing
============================ ===================================================================
"""

from __future__ import annotations

from collections.abc import Sequence

from streamjoin.changelog import RowKind
from streamjoin.errors import ValidationError
from streamjoin.runtime.processor import Change

__all__ = ["ChangelogNormalize", "normalize_change"]


def normalize_change(
    stored: tuple | None, kind: RowKind, row: tuple, *, update_before: bool = True, state_ttl: bool = False
) -> tuple[tuple | None, list[Change]]:
    """One change of a key through ``processLastRowOnChangelog``.

    Args:
        stored: the key's last full row, or None.
        kind / row: the incoming change.
        update_before: emit ``-U`` before ``+U`` (the consumer's changelog mode has UB).
        state_ttl: state TTL is on (an identical row is then emitted again).

    Returns:
        The key's new stored row (None when the key is gone) and the changes to emit.
    """
    if kind.is_accumulate:
        if stored is None:
            return row, [(RowKind.INSERT, row)]
        if stored == row and not state_ttl:
            return stored, []
        before = [(RowKind.UPDATE_BEFORE, stored)] if update_before else []
        return row, before + [(RowKind.UPDATE_AFTER, row)]
    if stored is None:
        return None, []
    return None, [(RowKind.DELETE, stored)]


class ChangelogNormalize:
    """The operator in plain Python: every key's last row in a dict.

    Args:
        key: positions of the primary-key columns in a row.
        update_before / state_ttl: as in :func:`normalize_change`.

    Example:
        >>> n = ChangelogNormalize(key=[0])
        >>> n.process(RowKind.UPDATE_AFTER, (1, "a"))
        [(<RowKind.INSERT: '+I'>, (1, 'a'))]
        >>> n.process(RowKind.UPDATE_AFTER, (1, "b"))
        [(<RowKind.UPDATE_BEFORE: '-U'>, (1, 'a')), (<RowKind.UPDATE_AFTER: '+U'>, (1, 'b'))]
        >>> n.process(RowKind.DELETE, (1, None))
        [(<RowKind.DELETE: '-D'>, (1, 'b'))]
    """

    def __init__(self, key: Sequence[int], *, update_before: bool = True, state_ttl: bool = False) -> None:
        if not key:
            raise ValidationError("ChangelogNormalize needs a non-empty primary key")
        self._key = tuple(key)
        self._options = {"update_before": update_before, "state_ttl": state_ttl}
        self.rows: dict[tuple, tuple] = {}

    def process(self, kind: RowKind, row: tuple) -> list[Change]:
        """Apply one change; returns what the operator emits for it."""
        key = tuple(row[i] for i in self._key)
        stored, changes = normalize_change(self.rows.get(key), kind, row, **self._options)
        if stored is None:
            self.rows.pop(key, None)
        else:
            self.rows[key] = stored
        return changes
