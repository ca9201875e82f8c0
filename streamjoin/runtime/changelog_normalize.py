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
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql.types import StructField, StructType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind
from streamjoin.contract import ChangelogNormalizeSpec
from streamjoin.errors import ValidationError
from streamjoin.runtime.engine import JvmLogic
from streamjoin.runtime.processor import Change, Element, KeyedLogic, KeyedProcessor
from streamjoin.runtime.tws import changelog_columns, check_state_ttl, output_schema, require_columns, rows_in_order

__all__ = ["ChangelogNormalize", "changelog_normalize", "normalize_change"]


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


@dataclass
class _KeyRow:
    """One key's visit: its stored row (changed in place) and what the state held before."""

    row: tuple | None
    before: tuple | None


class _NormalizeLogic(KeyedLogic):
    """:func:`normalize_change` as the shell's per-key logic; the row in a ``ValueState`` (with TTL)."""

    def __init__(self, schema: StructType, update_before: bool, state_ttl: bool) -> None:
        self._schema = schema
        self._options = {"update_before": update_before, "state_ttl": state_ttl}

    def open(self, handle, state_ttl_ms: int | None) -> None:
        self._row = handle.getValueState("lastRow", self._schema, state_ttl_ms)

    def load(self, key: tuple) -> _KeyRow:
        stored = self._row.get()
        row = None if stored is None else tuple(stored)
        return _KeyRow(row, row)

    def store(self, state: _KeyRow) -> None:
        if state.row == state.before:
            return
        if state.row is None:
            self._row.clear()
        else:
            self._row.update(state.row)

    def elements(self, rows):
        names = self._schema.names
        for r in rows_in_order(rows):
            yield Element(r[SEQ_COLUMN], RowKind.from_short(r[ROWKIND_COLUMN]), tuple(r[n] for n in names))

    def on_element(self, state: _KeyRow, element: Element, now) -> list[Change]:
        state.row, changes = normalize_change(state.row, element.kind, element.row, **self._options)
        return changes

    def jvm_logic(self) -> JvmLogic:
        return JvmLogic(
            "ChangelogNormalizeLogic",
            ChangelogNormalizeSpec(
                columns=tuple(self._schema.names),
                update_before=self._options["update_before"],
                state_ttl=self._options["state_ttl"],
            ),
        )


def changelog_normalize(
    changelog: DataFrame,
    *,
    key: Sequence[str],
    update_before: bool = True,
    state_ttl_ms: int | None = None,
) -> DataFrame:
    """Turn an upsert changelog into a full changelog keyed by ``key`` (Flink's ChangelogNormalize).

    See the module docstring for what each change emits. Changes are grouped by
    ``key`` and taken in ``_seq`` order within a micro-batch (a Kafka partition's
    order, which holds one key's changes when the producer keys records).

    Args:
        changelog: a changelog DataFrame (columns + ``_rowkind`` + ``_seq``), any RowKinds;
            a delete may carry nulls outside ``key``.
        key: the primary-key columns (at least one).
        update_before: emit ``-U`` before each ``+U`` (``[I,UB,UA,D]``), else ``[I,UA,D]``.
        state_ttl_ms: idle state retention in ms, or None: a key not written for this long
            is forgotten (its next row is ``+I``, a delete of it emits nothing), and an
            identical row is emitted again, as Flink does with TTL.

    Returns:
        A changelog DataFrame with ``changelog``'s data columns, ``_rowkind`` and ``_seq``;
        the i-th change caused by an input row gets its ``_seq`` followed by ``i``
        (:func:`~streamjoin.runtime.processor.child_seq`).

    Raises:
        ValidationError: when ``changelog`` is not a changelog, ``key`` is empty or
            names unknown columns, or the TTL is not a positive integer.

    Example:
        >>> full = changelog_normalize(upserts, key=["id"])  # doctest: +SKIP
    """
    columns = changelog_columns(changelog, "changelog_normalize")
    if not key or isinstance(key, str):
        raise ValidationError(f"changelog_normalize needs a list of key columns; got {key!r}")
    require_columns(changelog, list(key), "changelog_normalize key")
    check_state_ttl(state_ttl_ms, "changelog_normalize")
    types = {f.name: f.dataType for f in changelog.schema.fields}
    schema = StructType([StructField(c, types[c], True) for c in columns])
    output = output_schema(schema.fields)
    logic = _NormalizeLogic(schema, update_before, state_ttl_ms is not None)
    processor = KeyedProcessor(logic, output.names, state_ttl_ms=state_ttl_ms)
    return processor.apply(changelog.select(*columns, ROWKIND_COLUMN, SEQ_COLUMN), key, output)
