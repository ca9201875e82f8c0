"""The SinkUpsertMaterializer on Spark: :func:`sink_upsert_materialize`, the logic of :mod:`.logic` run per sink key by
the processor shell (docs/semantics.md §1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StatefulProcessorHandle
from pyspark.sql.types import StructField, StructType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind
from streamjoin.contract import SinkUpsertMaterializerSpec
from streamjoin.errors import ValidationError
from streamjoin.runtime.engine import JvmLogic
from streamjoin.runtime.inputs import check_state_ttl, output_schema
from streamjoin.runtime.processor import Change, Element, KeyedLogic, KeyedProcessor
from streamjoin.runtime.two_input import data_schema
from streamjoin.runtime.upsert_materializer.logic import SinkUpsertMaterializer

__all__ = ["sink_upsert_materialize"]


@dataclass
class _KeyRows:
    """One sink key's visit: its rows (changed in place) and what the state held before."""

    rows: list[tuple]
    before: list[tuple]


class _SinkUpsertMaterializerLogic(KeyedLogic):
    """:class:`SinkUpsertMaterializer` as the shell's per-key logic: the sink key's rows in a
    ``ListState``, changes taken in ``_seq`` order."""

    output_keyed_by_key = True

    def __init__(self, logic: SinkUpsertMaterializer, schema: StructType) -> None:
        self._logic = logic
        self._schema = schema

    def open(self, handle: StatefulProcessorHandle, state_ttl_ms: int | None) -> None:
        self._rows = handle.getListState("rows", self._schema, state_ttl_ms)

    def load(self, key: tuple) -> _KeyRows:
        rows = [tuple(r) for r in self._rows.get()]
        return _KeyRows(rows, list(rows))

    def store(self, state: _KeyRows) -> None:
        if state.rows != state.before:
            if state.rows:
                self._rows.put(state.rows)
            else:
                self._rows.clear()

    def elements(self, rows):
        names = self._schema.names
        for r in sorted(rows, key=lambda r: r[SEQ_COLUMN]):
            yield Element(r[SEQ_COLUMN], RowKind.from_short(r[ROWKIND_COLUMN]), tuple(r[n] for n in names))

    def on_element(self, state: _KeyRows, element: Element, now) -> list[Change]:
        return self._logic.apply(state.rows, element.kind, element.row)

    def jvm_logic(self) -> JvmLogic:
        names = self._schema.names
        return JvmLogic(
            "upsert_materializer.SinkUpsertMaterializerLogic",
            SinkUpsertMaterializerSpec(
                columns=tuple(names), upsert_key=tuple(names[i] for i in self._logic.upsert_key or ())
            ),
        )


def sink_upsert_materialize(
    changelog: DataFrame,
    *,
    sink_key: Sequence[str],
    upsert_key: Sequence[str] | None = None,
    state_ttl_ms: int | None = None,
) -> DataFrame:
    """Put a SinkUpsertMaterializer in front of a sink keyed by ``sink_key`` (docs/semantics.md §1).

    Changes are grouped by ``sink_key`` and taken in ``_seq`` order inside a
    micro-batch: ``_seq`` keeps the order of the changes of each upstream key,
    which is all the materializer needs.

    Args:
        changelog: a changelog stream (columns + ``_rowkind`` + ``_seq``).
        sink_key: the sink's primary-key columns.
        upsert_key: the input's upsert key (compare rows on it), or None to
            compare whole rows, as Flink does for an input without one.
        state_ttl_ms: idle state retention in milliseconds, or None. A sink key
            whose rows were not written for this long forgets them: a later
            retraction of them is ignored. As for the join, TTL needs the
            processing-time mode (see ``regular_join``'s note on ``availableNow``).

    Returns:
        The upsert changelog (``+I``/``+U``/``-D``), same columns; ``_seq`` is the
        emission order per sink key in its micro-batch.

    Raises:
        ValidationError: when ``changelog`` is not a changelog, a key column is
            unknown, or the TTL is not a positive integer.

    Example:
        >>> upserts = sink_upsert_materialize(joined, sink_key=["id"])  # doctest: +SKIP
    """
    schema = data_schema(changelog, "materializer")
    for what, names in (("sink_key", sink_key), ("upsert_key", upsert_key or ())):
        unknown = [n for n in names if n not in schema.names]
        if unknown or isinstance(names, str):
            raise ValidationError(f"{what} {names!r}: column(s) {unknown or names} not in {schema.names}")
    check_state_ttl(state_ttl_ms, "sink_upsert_materialize")
    logic = SinkUpsertMaterializer(
        [schema.names.index(n) for n in sink_key],
        [schema.names.index(n) for n in upsert_key] if upsert_key else None,
    )
    state_schema = StructType([StructField(f.name, f.dataType, True) for f in schema.fields])
    output = output_schema(state_schema.fields)
    processor = KeyedProcessor(
        _SinkUpsertMaterializerLogic(logic, state_schema), output.names, state_ttl_ms=state_ttl_ms
    )
    return processor.apply(changelog, sink_key, output)
