"""SinkUpsertMaterializer: an upsert view of a changelog whose order per sink key is not guaranteed.

docs/semantics.md §1, Flink's ``SinkUpsertMaterializer``. When a sink's primary key
is not an upsert key of the query (e.g. ``s1 JOIN s2 ON s1.level = s2.id`` into a
sink keyed by ``s1.id``: the changes of one ``s1.id`` come from different join
keys), the changes of one sink key reach the sink out of order across those
upstream keys, and applying them as upserts in arrival order can end with the
wrong row, or none. The materializer keeps, per sink key, the rows currently
added (in arrival order) and emits what the sink should hold:

* ``+I``/``+U`` row: append it (or, with an upsert key, replace the row with the
  same upsert key in place) and emit it: ``+I`` if the key held no row, else ``+U``.
* ``-U``/``-D`` row: remove the first equal row (equal on the upsert key when
  given, else on all columns). If none is left emit ``-D`` row; if the removed
  row was the newest emit ``+U`` of the new newest; otherwise emit nothing (the
  sink already shows a row that is still present). A retraction of a row the
  key does not hold (state expired) is ignored.

Seed 003's example: ``s2`` holds ``(10,a1)`` and ``(20,b1)``; ``s1`` sends ``+I(1,10)``,
``-U(1,10)``, ``+U(1,20)``; the join's ``+U(1,20,b1)`` may reach the sink before
``-U(1,10,a1)`` (or even before ``+I(1,10,a1)``). Through the materializer every
order ends with ``(1,20,b1)``.

The output is an upsert changelog keyed by the sink key (``+I``, ``+U``, ``-D``).
"""

from __future__ import annotations

from collections.abc import Sequence

from streamjoin.changelog import RowKind
from streamjoin.errors import ValidationError

__all__ = ["SinkUpsertMaterializer"]


class SinkUpsertMaterializer:
    """The materializer's logic for one sink key at a time, plus a plain-Python runner.

    Args:
        sink_key: positions of the sink's primary-key columns in a row.
        upsert_key: positions of the input's upsert key, or None to compare whole rows.

    Example:
        >>> m = SinkUpsertMaterializer(sink_key=[0])
        >>> m.process(RowKind.UPDATE_AFTER, (1, 20, "b1"))
        [(<RowKind.INSERT: '+I'>, (1, 20, 'b1'))]
        >>> m.process(RowKind.INSERT, (1, 10, "a1"))
        [(<RowKind.UPDATE_AFTER: '+U'>, (1, 10, 'a1'))]
        >>> m.process(RowKind.UPDATE_BEFORE, (1, 10, "a1"))
        [(<RowKind.UPDATE_AFTER: '+U'>, (1, 20, 'b1'))]
    """

    def __init__(self, sink_key: Sequence[int], upsert_key: Sequence[int] | None = None) -> None:
        if not sink_key:
            raise ValidationError("a SinkUpsertMaterializer needs a non-empty sink key")
        self._sink_key = tuple(sink_key)
        self.upsert_key = tuple(upsert_key) if upsert_key else None
        self._history: dict[tuple, list[tuple]] = {}

    def _same(self, a: tuple, b: tuple) -> bool:
        if self.upsert_key is None:
            return a == b
        return all(a[i] == b[i] for i in self.upsert_key)

    def _find(self, rows: list[tuple], row: tuple) -> int:
        return next((i for i, r in enumerate(rows) if self._same(r, row)), -1)

    def apply(self, rows: list[tuple], kind: RowKind, row: tuple) -> list[tuple[RowKind, tuple]]:
        """Apply one change to ``rows`` (the sink key's rows, oldest first; changed in place).

        Returns:
            The upsert changes to send, in order (zero or one).
        """
        if kind.is_accumulate:
            out_kind = RowKind.INSERT if not rows else RowKind.UPDATE_AFTER
            index = self._find(rows, row) if self.upsert_key is not None else -1
            if index == -1:
                rows.append(row)
            else:
                rows[index] = row
            return [(out_kind, row)]
        index = self._find(rows, row)
        if index == -1:
            return []
        newest = index == len(rows) - 1
        del rows[index]
        if not rows:
            return [(RowKind.DELETE, row)]
        if newest:
            return [(RowKind.UPDATE_AFTER, rows[-1])]
        return []

    def process(self, kind: RowKind, row: tuple) -> list[tuple[RowKind, tuple]]:
        """Apply one change, keeping every sink key's rows in this object (the plain-Python run)."""
        key = tuple(row[i] for i in self._sink_key)
        rows = self._history.setdefault(key, [])
        out = self.apply(rows, kind, row)
        if not rows:
            del self._history[key]
        return out
