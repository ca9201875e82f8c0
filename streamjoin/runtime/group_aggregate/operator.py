"""The group aggregate on Spark: :func:`group_aggregate`, Flink's ``GroupAggFunction`` (:mod:`.function`) run per group
key by the processor shell (docs/semantics.md §6).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, MutableMapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, LongType, StructField, StructType, TimestampType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind
from streamjoin.contract import GroupAggregateSpec
from streamjoin.errors import ValidationError
from streamjoin.runtime.aggregates import AggregateCall, Aggregates, parse_calls
from streamjoin.runtime.engine import JvmLogic
from streamjoin.runtime.group_aggregate.function import GROUP_FUNCTIONS, GroupAggFunction, GroupState
from streamjoin.runtime.inputs import changelog_columns, check_state_ttl, output_schema, require_columns, rows_in_order
from streamjoin.runtime.processor import Element, KeyedLogic, KeyedProcessor

__all__ = ["group_aggregate"]


# --------------------------------------------------------------------------- Spark operator

GROUP_STATE = "groupAggState"


def _as_row_value(value):
    """A value as the logic compares it: a TIMESTAMP as a naive local datetime. PySpark hands some
    TIMESTAMP values (map-state keys among them) over as time-zone-aware datetimes, which do not
    compare with naive ones."""
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone().replace(tzinfo=None)
    return value


class _MapStateView(MutableMapping):
    """A ``MapState`` value → multiplicity seen as a dict (Flink's ``MapView`` on RocksDB)."""

    def __init__(self, state) -> None:
        self._state = state

    def __getitem__(self, value):
        found = self._state.getValue((value,))
        if found is None:
            raise KeyError(value)
        return found[0]

    def get(self, value, default=None):
        found = self._state.getValue((value,))
        return default if found is None else found[0]

    def __setitem__(self, value, count) -> None:
        self._state.updateValue((value,), (count,))

    def __delitem__(self, value) -> None:
        self._state.removeKey((value,))

    def __iter__(self) -> Iterator:
        return (_as_row_value(k[0]) for k in self._state.keys())  # noqa: SIM118 - a MapState, not iterable itself

    def __len__(self) -> int:
        return sum(1 for _ in self._state.keys())  # noqa: SIM118 - a MapState, not iterable itself

    def items(self):
        return [(_as_row_value(k[0]), v[0]) for k, v in self._state.iterator()]

    def clear(self) -> None:
        self._state.clear()


class _GroupAggregateLogic(KeyedLogic):
    """:class:`GroupAggFunction` as the shell's per-key logic; see :func:`group_aggregate`."""

    state_name = GROUP_STATE
    output_keyed_by_key = True

    def __init__(
        self,
        calls,
        group_by: list[str],
        columns: list[str],
        types: dict[str, DataType],
        retractable: bool,
        mini_batch: bool = False,
    ):
        self.calls = calls
        self.mini_batch = mini_batch
        self._bundle: list[tuple[RowKind, tuple]] = []  # mini-batch: the visited group's changes so far
        self.group_by = group_by
        self.group_positions = [columns.index(c) for c in group_by]
        self.columns = columns
        self.types = types
        self.retractable = retractable
        self.timestamps = {c for c in columns if isinstance(types[c], TimestampType)}

    def open(self, handle, state_ttl_ms) -> None:
        super().open(handle, state_ttl_ms)
        aggregates = Aggregates(self.calls, self.types, self.columns, retractable=self.retractable)
        self.fn = GroupAggFunction(aggregates)
        self.views: dict[int, MutableMapping] = {}
        for i in aggregates.view_indexes:
            call = self.calls[i]
            key_schema = StructType([StructField("value", self.types[call.column])])
            value_schema = StructType([StructField("count", LongType(), False)])
            self.views[i] = _MapStateView(
                handle.getMapState(f"{call.function.lower()}_{i}", key_schema, value_schema, state_ttl_ms)
            )

    def load(self, key: tuple) -> GroupState:
        # The count and accumulators are one value; the views are MapStates of their own.
        count, accs = self._blob.load(lambda: (0, None))
        return GroupState(count=count, accs=accs, views=self.views)

    def store(self, state: GroupState) -> None:
        if state.accs is None:
            self._blob.clear()
        else:
            self._blob.save((state.count, state.accs))

    def elements(self, rows):
        for row in rows_in_order(rows):
            values = tuple(_as_row_value(row[c]) if c in self.timestamps else row[c] for c in self.columns)
            yield Element(row[SEQ_COLUMN], RowKind.from_short(row[ROWKIND_COLUMN]), values)

    def on_element(self, state, element, now):
        if self.mini_batch:
            self._bundle.append((element.kind, element.row))
            return []
        group = tuple(element.row[i] for i in self.group_positions)
        return self.fn.process_element(state, group, element.kind, element.row)

    def finish_bundle(self, state):
        if not self._bundle:
            return []
        bundle, self._bundle = self._bundle, []
        group = tuple(bundle[0][1][i] for i in self.group_positions)
        return self.fn.process_bundle(state, group, bundle)

    def jvm_logic(self) -> JvmLogic:
        return JvmLogic(
            "group_aggregate.GroupAggregateLogic",
            GroupAggregateSpec(
                columns=tuple(self.columns),
                group_by=tuple(self.group_by),
                aggregates=Aggregates(self.calls, self.types, self.columns, retractable=self.retractable).specs(),
                retractable=self.retractable,
                mini_batch=self.mini_batch,
            ),
        )


def group_aggregate(
    df: DataFrame,
    *,
    group_by: Sequence[str],
    aggregates: Sequence[AggregateCall | tuple[str, str, str | None]],
    insert_only_input: bool = False,
    state_ttl_ms: int | None = None,
    mini_batch: bool = False,
) -> DataFrame:
    """GROUP BY aggregation of a changelog stream, emitting a retract changelog (docs/semantics.md §6).

    See the module docstring for what is emitted. Runs as a row-based
    ``transformWithState`` without timers; a key's rows of one micro-batch are
    applied in ``_seq`` order. State per group: the row count and the
    accumulators in one value, plus one MapState per COUNT(DISTINCT) and, for
    a changelog input, per MIN/MAX (value → multiplicity).

    Args:
        df: a changelog DataFrame (columns + ``_rowkind`` + ``_seq``), any RowKinds.
        group_by: GROUP BY columns (may be empty: one global group).
        aggregates: ``(output_name, function, column)`` with function one of
            COUNT (column ``None`` = ``COUNT(*)``), COUNT_DISTINCT, SUM, AVG, MIN, MAX.
        insert_only_input: the input holds only ``+I``; MIN/MAX then keep only the extreme.
        state_ttl_ms: idle state retention in ms (``table.exec.state.ttl``), or ``None``: a group not
            written for that long is forgotten, and so is each MIN/MAX/COUNT(DISTINCT) value not
            written for that long (Flink's TTL on the accumulator state and on each MapView entry,
            docs/semantics.md §6.3). A retraction into a forgotten group is ignored; its next row
            starts the group again with ``+I``.
        mini_batch: emit once per group and micro-batch (``table.exec.mini-batch.enabled``, Flink's
            ``MiniBatchGroupAggFunction``; module docstring), not once per input change.

    Returns:
        A changelog DataFrame: the ``group_by`` columns, one column per
        aggregate (Flink's result types, see
        :mod:`streamjoin.runtime.aggregates`), ``_rowkind`` and ``_seq`` (the
        i-th change caused by an input row gets that row's ``_seq`` followed by
        ``i``, :func:`~streamjoin.runtime.processor.child_seq`, so a key's
        changes are in emission order and the input's order carries over
        across keys; in mini-batch mode a group's changes count as caused by
        its last input row of the micro-batch).

    Raises:
        ValidationError: for unknown columns, an unsupported function,
            aggregate names clashing with ``group_by``, or ``state_ttl_ms`` <= 0.
        pyspark.errors.StreamingQueryException: at run time, wrapping
            :class:`~streamjoin.errors.StateError` when ``insert_only_input`` is
            set and a retraction arrives.

    Example:
        >>> counts = group_aggregate(latest, group_by=["tms_company"],
        ...                          aggregates=[("order_cnt", "COUNT_DISTINCT", "order_id")])  # doctest: +SKIP
    """
    columns = changelog_columns(df, "group_aggregate")
    calls = parse_calls(aggregates)
    unsupported = [c.function for c in calls if c.function not in GROUP_FUNCTIONS]
    if unsupported:
        raise ValidationError(f"group_aggregate does not support {unsupported}; allowed: {list(GROUP_FUNCTIONS)}")
    check_state_ttl(state_ttl_ms, "group_aggregate")
    require_columns(df, list(group_by), "group_aggregate group_by")
    clash = sorted({c.output for c in calls} & set(group_by))
    if clash:
        raise ValidationError(f"group_aggregate output names {clash} clash with group_by columns")
    types = {f.name: f.dataType for f in df.schema.fields}
    result_types = Aggregates(calls, types, columns, retractable=not insert_only_input).result_types

    # Only the GROUP BY and argument columns reach the operator: the others would be shuffled, sorted
    # and decoded per row for nothing (Spark does not prune columns through transformWithState).
    columns = list(dict.fromkeys([*group_by, *(c.column for c in calls if c.column is not None)]))
    keys = list(group_by)
    prepared = df.select(*columns, ROWKIND_COLUMN, SEQ_COLUMN)
    if not keys:
        prepared = prepared.withColumn("_group", F.lit(0))
        keys = ["_group"]
    fields = [StructField(c, types[c]) for c in group_by]
    fields += [StructField(c.output, t) for c, t in zip(calls, result_types)]
    schema = output_schema(fields)
    logic = _GroupAggregateLogic(calls, list(group_by), columns, types, not insert_only_input, mini_batch)
    return KeyedProcessor(logic, schema.names, state_ttl_ms=state_ttl_ms).apply(prepared, keys, schema)
