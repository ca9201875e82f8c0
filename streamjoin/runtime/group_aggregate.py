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

import datetime
from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, LongType, StructField, StructType, TimestampType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind
from streamjoin.contract import GroupAggregateSpec
from streamjoin.errors import ValidationError
from streamjoin.runtime.aggregates import AggregateCall, Aggregates, call_specs, parse_calls
from streamjoin.runtime.engine import JvmLogic
from streamjoin.runtime.processor import Element, KeyedLogic, KeyedProcessor
from streamjoin.runtime.tws import changelog_columns, check_state_ttl, output_schema, require_columns, rows_in_order

__all__ = ["GroupAggFunction", "GroupState", "group_aggregate"]

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


class _GroupAggLogic(KeyedLogic):
    """:class:`GroupAggFunction` as the shell's per-key logic; see :func:`group_aggregate`."""

    state_name = GROUP_STATE

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
            "GroupAggregateLogic",
            GroupAggregateSpec(
                columns=tuple(self.columns),
                group_by=tuple(self.group_by),
                aggregates=call_specs(self.calls),
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
    logic = _GroupAggLogic(calls, list(group_by), columns, types, not insert_only_input, mini_batch)
    return KeyedProcessor(logic, schema.names, state_ttl_ms=state_ttl_ms).apply(prepared, keys, schema)
