"""ChangelogNormalize on Spark: :func:`changelog_normalize`, the logic of :mod:`.logic` run per key by the processor
shell (docs/semantics.md §1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql.types import StructField, StructType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind
from streamjoin.contract import ChangelogNormalizeSpec
from streamjoin.errors import ValidationError
from streamjoin.runtime.changelog_normalize.logic import normalize_change
from streamjoin.runtime.engine import JvmLogic
from streamjoin.runtime.inputs import changelog_columns, check_state_ttl, output_schema, require_columns, rows_in_order
from streamjoin.runtime.processor import Change, Element, KeyedLogic, KeyedProcessor

__all__ = ["changelog_normalize"]


@dataclass
class _KeyRow:
    """One key's visit: its stored row (changed in place) and what the state held before."""

    row: tuple | None
    before: tuple | None


class _ChangelogNormalizeLogic(KeyedLogic):
    """:func:`normalize_change` as the shell's per-key logic; the row in a ``ValueState`` (with TTL)."""

    output_keyed_by_key = True

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
            "changelog_normalize.ChangelogNormalizeLogic",
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
    logic = _ChangelogNormalizeLogic(schema, update_before, state_ttl_ms is not None)
    processor = KeyedProcessor(logic, output.names, state_ttl_ms=state_ttl_ms)
    return processor.apply(changelog.select(*columns, ROWKIND_COLUMN, SEQ_COLUMN), key, output)
