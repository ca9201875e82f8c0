"""The regular streaming join with retraction: INNER, LEFT, RIGHT, FULL, SEMI, ANTI (SEMANTICS.md §2).

Spark's own stream-stream join takes append-only inputs and emits outer rows
only behind watermarks; this operator takes changelogs of any RowKind and
retracts, as Flink's ``StreamingJoinOperator`` / ``StreamingSemiAntiJoinOperator``.

Layers, one way:

* :class:`StreamingJoin` / :class:`StreamingSemiAntiJoin`: the decision tree
  for one change of one join key, over the state views of ``join_state``; plain
  Python (STYLE.md habit 7).
* :class:`LocalRegularJoin`: runs that logic over a whole changelog in Python
  (tests, reference results).
* :func:`regular_join`: the Spark operator: ``transformWithState`` on the union
  of both inputs grouped by join key (``two_input``), RocksDB state store.

The residual (non-equi) predicate is a Spark SQL expression and Spark evaluates
it; Python never does. INNER: the equi-join's changes are filtered by it.
Other types need the predicate's outcome before deciding on null padding, so
they run in two stateful steps: the first stores both sides and emits each
input change followed by its equi-matching *candidate pairs*; Spark filters
the pairs by the predicate; the second step receives each change with the
pairs that survived as its matches, and keeps only the outer sides' rows
with their association counts. Cost: one more shuffle, and outer rows are
stored twice.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind
from streamjoin.errors import ValidationError
from streamjoin.runtime.join_state import (
    DictRecordStore,
    JoinRecordStateView,
    StateLayout,
    TwsRecordStore,
    choose_layout,
    create_state_view,
    view_class,
)
from streamjoin.runtime.two_input import (
    LEFT,
    LEFT_ROW_COLUMN,
    RIGHT,
    RIGHT_ROW_COLUMN,
    SIDE_COLUMN,
    TwoInput,
    data_schema,
    has_null,
    ordered_changes,
    row_of,
    union_inputs,
)

__all__ = [
    "JoinType",
    "JoinResult",
    "regular_join",
    "derive_output_keys",
    "JoinedChange",
    "StreamingJoin",
    "StreamingSemiAntiJoin",
    "join_logic",
    "JoinSpec",
    "LocalRegularJoin",
]

#: One output change: RowKind, left row or None (null-padded), right row or None.
JoinedChange = tuple[RowKind, tuple | None, tuple | None]
#: A residual predicate in Python, ``(left_row, right_row) -> bool``; only for the plain-Python runs.
Condition = Callable[[tuple, tuple], bool]
#: A match: a row of the other side and its association count (0 when that side is not outer).
Match = tuple[tuple, int]


class JoinType(enum.Enum):
    """Join types; the value is the ``how`` string of :func:`regular_join`."""

    INNER = "inner"
    LEFT = "left"
    RIGHT = "right"
    FULL = "full"
    SEMI = "semi"
    ANTI = "anti"

    @classmethod
    def parse(cls, how: str) -> "JoinType":
        """Parse a ``how`` string.

        Raises:
            ValidationError: naming the bad value and the allowed ones.
        """
        try:
            return cls(how)
        except ValueError:
            raise ValidationError(f"unknown join type {how!r}; expected one of {[t.value for t in cls]}") from None

    @property
    def outer(self) -> tuple[bool, bool]:
        """Which sides keep association counts: the null-padded sides, and SEMI/ANTI's left side."""
        return {
            JoinType.INNER: (False, False),
            JoinType.LEFT: (True, False),
            JoinType.RIGHT: (False, True),
            JoinType.FULL: (True, True),
            JoinType.SEMI: (True, False),
            JoinType.ANTI: (True, False),
        }[self]

    @property
    def projects_right(self) -> bool:
        """False for SEMI/ANTI, whose output is the left row only."""
        return self not in (JoinType.SEMI, JoinType.ANTI)


class _JoinLogic:
    """What both decision trees share: the views, the matching, the outer flags.

    Args:
        left_view: the left side's state for the current join key; None when
            the side is not stored (inner side in the second step of a join
            with a residual predicate, where matches are given).
        right_view: the same for the right side.
        outer: per side, whether it keeps association counts.
        condition: residual predicate for the plain-Python runs; None = equi-join only.
    """

    def __init__(
        self,
        left_view: JoinRecordStateView | None,
        right_view: JoinRecordStateView | None,
        outer: tuple[bool, bool],
        condition: Condition | None,
    ) -> None:
        self._views = (left_view, right_view)
        self._outer = outer
        self._condition = condition

    def _matches(self, side: int, row: tuple, given: Sequence[tuple] | None) -> list[Match]:
        other = self._views[1 - side]
        if given is not None:
            # Look every count up before any is updated, as Flink's AssociatedRecords does.
            if self._outer[1 - side]:
                return [(m, other.associations(m)) for m in given]
            return [(m, 0) for m in given]
        condition = self._condition
        if condition is None:
            return other.records()
        if side == LEFT:
            return [(m, n) for m, n in other.records() if condition(row, m)]
        return [(m, n) for m, n in other.records() if condition(m, row)]

    def _add(self, side: int, row: tuple, associations: int = 0) -> None:
        if self._views[side] is not None:
            self._views[side].add_record(row, associations)

    def _retract(self, side: int, row: tuple) -> None:
        if self._views[side] is not None:
            self._views[side].retract_record(row)

    def _update(self, side: int, row: tuple, associations: int) -> None:
        self._views[side].update_associations(row, associations)


class StreamingJoin(_JoinLogic):
    """INNER / LEFT / RIGHT / FULL join of one join key (Flink's ``StreamingJoinOperator``).

    :meth:`process` follows this tree (Flink's ``processElement``; "outer" = the
    side is null-padded; ``other`` = the matching rows of the other side after
    the residual predicate; ``assoc`` = a row's association count)::

        if input is accumulate (+I/+U)
        |  if input side is outer
        |  |  no matches: send +I[record+null], state.add(record, 0)
        |  |  matches:
        |  |  |  for each other: if other side is outer
        |  |  |  |  if other.assoc == 0, send -D[null+other]
        |  |  |  |  otherState.update(other, assoc + 1)
        |  |  |  |  send +I[record+other]
        |  |  |  state.add(record, other.size)
        |  else (input side not outer)
        |  |  state.add(record)
        |  |  matches, other side outer: as above (-D[null+other] when assoc == 0,
        |  |  |  assoc + 1, send +I[record+other])
        |  |  matches, other side not outer: send +I/+U[record+other]s (input RowKind)
        if input is retract (-U/-D)
        |  state.retract(record)
        |  no matches: if input side is outer, send -D[record+null]
        |  matches: for each other
        |  |  send -D[record+other] if input side is outer, else -D/-U (input RowKind)
        |  |  if other side is outer
        |  |  |  if other.assoc == 1, send +I[null+other]
        |  |  |  otherState.update(other, assoc - 1)

    So an inner join forwards ``-U``/``+U``; an outer join sends ``-D``/``+I``
    pairs (Flink FLINK-17337), except that a retraction from the inner side
    keeps its RowKind.

    Args:
        join_type: INNER, LEFT, RIGHT or FULL.
        left_view: see :class:`_JoinLogic`.
        right_view: see :class:`_JoinLogic`.
        condition: see :class:`_JoinLogic`.

    Raises:
        ValidationError: for SEMI/ANTI (use :class:`StreamingSemiAntiJoin`).
    """

    def __init__(
        self,
        join_type: JoinType,
        left_view: JoinRecordStateView | None,
        right_view: JoinRecordStateView | None,
        condition: Condition | None = None,
    ) -> None:
        if not join_type.projects_right:
                raise ValidationError(f"StreamingJoin runs inner/left/right/full joins, not {join_type.value}")
        super().__init__(left_view, right_view, join_type.outer, condition)

    def process(
        self, side: int, kind: RowKind, row: tuple, matches: Sequence[tuple] | None = None
    ) -> list[JoinedChange]:
        """Apply one change of one side; return the output changes in emission order.

        Args:
            side: ``LEFT`` or ``RIGHT``.
            kind: the change's RowKind.
            row: the input row.
            matches: the other side's matching rows when they were found
                elsewhere (the second step of a join with a residual
                predicate); None to find them in the other side's view.

        Returns:
            ``(RowKind, left_row | None, right_row | None)`` changes.
        """
        out: list[JoinedChange] = []

        def send(out_kind: RowKind, this: tuple | None, other: tuple | None) -> None:
            out.append((out_kind, this, other) if side == LEFT else (out_kind, other, this))

        input_outer, other_outer = self._outer[side], self._outer[1 - side]
        found = self._matches(side, row, matches)
        if kind.is_accumulate:
            if input_outer and not found:
                send(RowKind.INSERT, row, None)  # send +I[record+null]
                self._add(side, row, 0)  # state.add(record, 0)
                return out
            if not input_outer:
                self._add(side, row)  # state.add(record)
            for other, assoc in found:
                if other_outer:
                    if assoc == 0:
                        send(RowKind.DELETE, None, other)  # send -D[null+other]
                    self._update(1 - side, other, assoc + 1)  # otherState.update(other, old + 1)
                # Outer joins send +I; an inner join forwards the input's +I/+U.
                send(RowKind.INSERT if input_outer or other_outer else kind, row, other)
            if input_outer:
                self._add(side, row, len(found))  # state.add(record, other.size)
        else:
            self._retract(side, row)  # state.retract(record)
            if not found:
                if input_outer:
                    send(RowKind.DELETE, row, None)  # send -D[record+null]
                return out
            for other, assoc in found:
                send(RowKind.DELETE if input_outer else kind, row, other)  # send -D/-U[record+other]
                if other_outer:
                    if assoc == 1:
                        send(RowKind.INSERT, None, other)  # send +I[null+other]
                    self._update(1 - side, other, assoc - 1)  # otherState.update(other, old - 1)
        return out

    def process_null_key(self, side: int, kind: RowKind, row: tuple) -> list[JoinedChange]:
        """A row whose join key holds a null: it matches nothing and is not stored.

        An outer side still sends (and later retracts) its null-padded row.
        """
        if not self._outer[side]:
            return []
        padded_kind = RowKind.INSERT if kind.is_accumulate else RowKind.DELETE
        return [(padded_kind, row, None) if side == LEFT else (padded_kind, None, row)]


class StreamingSemiAntiJoin(_JoinLogic):
    """SEMI / ANTI join of one join key (Flink's ``StreamingSemiAntiJoinOperator``).

    The output is the left row. The left side keeps association counts::

        left input
        |  no matches: if anti, send the record (its own RowKind)
        |  matches: if semi, send the record (its own RowKind)
        |  accumulate: state.add(record, matched size); retract: state.retract(record)
        right input, accumulate
        |  state.add(record)
        |  for each matched left row:
        |  |  if assoc == 0: anti: send -D[left]; semi: send +I/+U[left] (right's RowKind)
        |  |  leftState.update(left, assoc + 1)
        right input, retract
        |  state.retract(record)
        |  for each matched left row:
        |  |  if assoc == 1: semi: send -U/-D[left] (right's RowKind); anti: send +I[left]
        |  |  leftState.update(left, assoc - 1)

    Args:
        anti: True for ANTI, False for SEMI.
        left_view: see :class:`_JoinLogic`.
        right_view: see :class:`_JoinLogic`.
        condition: see :class:`_JoinLogic`.
    """

    def __init__(
        self,
        anti: bool,
        left_view: JoinRecordStateView | None,
        right_view: JoinRecordStateView | None,
        condition: Condition | None = None,
    ) -> None:
        super().__init__(left_view, right_view, (True, False), condition)
        self._anti = anti

    def process(
        self, side: int, kind: RowKind, row: tuple, matches: Sequence[tuple] | None = None
    ) -> list[JoinedChange]:
        """Apply one change of one side; see :meth:`StreamingJoin.process` for the arguments."""
        found = self._matches(side, row, matches)
        out: list[JoinedChange] = []
        if side == LEFT:
            if bool(found) != self._anti:
                out.append((kind, row, None))
            if kind.is_accumulate:
                self._add(LEFT, row, len(found))
            else:
                self._retract(LEFT, row)
            return out
        if kind.is_accumulate:
            self._add(RIGHT, row)
            for left, assoc in found:
                if assoc == 0:
                    out.append((RowKind.DELETE if self._anti else kind, left, None))
                self._update(LEFT, left, assoc + 1)
        else:
            self._retract(RIGHT, row)
            for left, assoc in found:
                if assoc == 1:
                    out.append((RowKind.INSERT if self._anti else kind, left, None))
                self._update(LEFT, left, assoc - 1)
        return out

    def process_null_key(self, side: int, kind: RowKind, row: tuple) -> list[JoinedChange]:
        """A row whose join key holds a null: an anti join passes a left row through, nothing else."""
        return [(kind, row, None)] if self._anti and side == LEFT else []


def join_logic(
    join_type: JoinType,
    left_view: JoinRecordStateView | None,
    right_view: JoinRecordStateView | None,
    condition: Condition | None = None,
) -> StreamingJoin | StreamingSemiAntiJoin:
    """The decision tree for ``join_type`` over the given views (Flink's ``StreamExecJoin`` choice)."""
    if join_type.projects_right:
        return StreamingJoin(join_type, left_view, right_view, condition)
    return StreamingSemiAntiJoin(join_type is JoinType.ANTI, left_view, right_view, condition)


class JoinSpec:
    """Positions and keys of a regular join, shared by the Python and the Spark runs.

    Args:
        join_type: the join type.
        left_key: positions of the left equi-join columns (empty: no equi condition).
        right_key: positions of the right equi-join columns, pairwise with ``left_key``.
        left_arity: number of left columns.
        right_arity: number of right columns.
        left_unique_key: positions of a unique key of the left input, or None.
        right_unique_key: positions of a unique key of the right input, or None.

    Raises:
        ValidationError: when the key lists differ in length or a position is out of range.
    """

    def __init__(
        self,
        join_type: JoinType,
        left_key: Sequence[int],
        right_key: Sequence[int],
        left_arity: int,
        right_arity: int,
        left_unique_key: Sequence[int] | None = None,
        right_unique_key: Sequence[int] | None = None,
    ) -> None:
        if len(left_key) != len(right_key):
            raise ValidationError(f"left key {list(left_key)} and right key {list(right_key)} differ in length")
        for name, positions, arity in (
            ("left key", left_key, left_arity),
            ("right key", right_key, right_arity),
            ("left unique key", left_unique_key or (), left_arity),
            ("right unique key", right_unique_key or (), right_arity),
        ):
            bad = [p for p in positions if not 0 <= p < arity]
            if bad:
                raise ValidationError(f"{name} positions {bad} out of range for {arity} columns")
        self.join_type = join_type
        self.keys = (tuple(left_key), tuple(right_key))
        self.arity = (left_arity, right_arity)
        self.unique_keys = (
            tuple(left_unique_key) if left_unique_key else None,
            tuple(right_unique_key) if right_unique_key else None,
        )
        self.layouts: tuple[StateLayout, StateLayout] = (
            choose_layout(self.keys[LEFT], self.unique_keys[LEFT]),
            choose_layout(self.keys[RIGHT], self.unique_keys[RIGHT]),
        )

    def view(self, side: int, store) -> JoinRecordStateView:
        """The state view of ``side`` over ``store``."""
        return create_state_view(store, self.layouts[side], self.unique_keys[side])

    def output_row(self, change: JoinedChange) -> tuple[RowKind, tuple]:
        """A change as one output row: left columns then right columns, nulls where padded.

        SEMI/ANTI output the left columns only.
        """
        kind, left, right = change
        left = left if left is not None else (None,) * self.arity[LEFT]
        if not self.join_type.projects_right:
            return kind, left
        return kind, left + (right if right is not None else (None,) * self.arity[RIGHT])


class LocalRegularJoin:
    """The regular join run in plain Python, one change at a time, state in dicts.

    The reference the Spark operator is tested against; it is the same logic
    (:func:`join_logic` over the same state layouts) without Spark.

    Args:
        spec: the join.
        condition: residual predicate as a Python function ``(left_row, right_row) -> bool``.
            Only here: the Spark operator takes the predicate as Spark SQL.

    Example:
        >>> spec = JoinSpec(JoinType.LEFT, [0], [0], 2, 2)
        >>> join = LocalRegularJoin(spec)
        >>> join.process(LEFT, RowKind.INSERT, (1, "a"))
        [(<RowKind.INSERT: '+I'>, (1, 'a', None, None))]
        >>> join.process(RIGHT, RowKind.INSERT, (1, "x"))
        [(<RowKind.DELETE: '-D'>, (1, 'a', None, None)), (<RowKind.INSERT: '+I'>, (1, 'a', 1, 'x'))]
    """

    def __init__(self, spec: JoinSpec, condition: Condition | None = None) -> None:
        self._spec = spec
        self._condition = condition
        self._stores: dict[tuple, tuple[DictRecordStore, DictRecordStore]] = {}

    def process(self, side: int, kind: RowKind, row: tuple) -> list[tuple[RowKind, tuple]]:
        """Apply one change of ``side``; return the output rows ``(RowKind, values)`` in emission order."""
        spec = self._spec
        key = tuple(row[i] for i in spec.keys[side])
        if has_null(key):
            changes = join_logic(spec.join_type, None, None).process_null_key(side, kind, row)
        else:
            stores = self._stores.setdefault(key, (DictRecordStore(), DictRecordStore()))
            views = spec.view(LEFT, stores[LEFT]), spec.view(RIGHT, stores[RIGHT])
            changes = join_logic(spec.join_type, *views, self._condition).process(side, kind, row)
        return [spec.output_row(c) for c in changes]

    def state_entries(self) -> int:
        """Number of state entries held, both sides, all join keys."""
        return sum(len(left) + len(right) for left, right in self._stores.values())


# --- Spark: transformWithState processors and the public operator -----------------------------

#: Column of the candidate frame numbering a change's candidate pairs (0 = the change itself).
PAIR_COLUMN = "_pair"
_STATE_NAMES = ("left_records", "right_records")
_FLINK_TYPE_NAMES = {
    JoinType.INNER: "InnerJoin",
    JoinType.LEFT: "LeftOuterJoin",
    JoinType.RIGHT: "RightOuterJoin",
    JoinType.FULL: "FullOuterJoin",
    JoinType.SEMI: "LeftSemiJoin",
    JoinType.ANTI: "LeftAntiJoin",
}


class _JoinProcessorBase(StatefulProcessor):
    """State variables and output rows shared by the three processors of :func:`regular_join`.

    Args:
        spec: the join.
        schemas: left and right columns.
        stored: per side, whether this step keeps the side's rows.
        ttl_ms: state TTL in milliseconds, or None.
        output_names: the output columns, in order.
    """

    def __init__(
        self,
        spec: JoinSpec,
        schemas: tuple[StructType, StructType],
        stored: tuple[bool, bool],
        ttl_ms: int | None,
        output_names: Sequence[str],
    ) -> None:
        self._spec = spec
        self._schemas = schemas
        self._stored = stored
        self._ttl_ms = ttl_ms
        self._output_names = tuple(output_names)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._variables = [None, None]
        for side in (LEFT, RIGHT):
            if not self._stored[side]:
                continue
            key_schema, value_schema = view_class(self._spec.layouts[side]).state_schema(
                self._schemas[side], self._spec.unique_keys[side] or ()
            )
            name = _STATE_NAMES[side]
            if key_schema is None:
                self._variables[side] = handle.getValueState(name, value_schema, self._ttl_ms)
            else:
                self._variables[side] = handle.getMapState(name, key_schema, value_schema, self._ttl_ms)
        self._row = Row(*self._output_names)

    def _open(self) -> tuple[list, JoinRecordStateView | None, JoinRecordStateView | None]:
        """Fresh stores and views over the state variables, for the current grouping key."""
        single = StateLayout.JOIN_KEY_CONTAINS_UNIQUE_KEY
        stores = [
            None if variable is None else TwsRecordStore(variable, is_map=self._spec.layouts[side] is not single)
            for side, variable in enumerate(self._variables)
        ]
        views = [None if store is None else self._spec.view(side, store) for side, store in enumerate(stores)]
        return stores, views[LEFT], views[RIGHT]

    def _join(self, key: tuple, events: Sequence[tuple[int, RowKind, tuple, list[tuple] | None]]) -> Iterator[Row]:
        """Run ``events`` ``(side, kind, row, matches or None)`` of one key through the join; output rows."""
        stores, left_view, right_view = self._open()
        logic = join_logic(self._spec.join_type, left_view, right_view)
        null_key = has_null(key)
        out = []
        for side, kind, row, matches in events:
            produced = logic.process_null_key(side, kind, row) if null_key else logic.process(side, kind, row, matches)
            for joined in produced:
                out_kind, values = self._spec.output_row(joined)
                out.append(self._row(*values, out_kind.short, len(out)))
        for store in stores:
            if store is not None:
                store.flush()
        return iter(out)

    def close(self) -> None:
        pass


class _JoinProcessor(_JoinProcessorBase):
    """One-step join: both sides stored, output rows ``columns + _rowkind + _seq``."""

    def handleInputRows(self, key, rows, timerValues):
        return self._join(key, [(c.side, c.kind, c.row, None) for c in ordered_changes(rows)])


class _CandidateProcessor(_JoinProcessorBase):
    """First step of a join with a residual predicate: each change, then its equi-matching pairs.

    Output: the grouping key, ``_side``, ``_left``, ``_right``, ``_rowkind`` (the
    change's), ``_seq`` (the change's position in this key's processing order of the
    micro-batch: input ``_seq`` may tie across upstream keys) and ``_pair`` (0 for
    the change, 1… for its candidate pairs).
    """

    def init(self, handle: StatefulProcessorHandle) -> None:
        super().init(handle)
        self._structs = (Row(*self._schemas[LEFT].names), Row(*self._schemas[RIGHT].names))

    def handleInputRows(self, key, rows, timerValues):
        stores, left_view, right_view = self._open()
        inner = StreamingJoin(JoinType.INNER, left_view, right_view)
        null_key = has_null(key)
        left_struct, right_struct = self._structs
        out = []
        for position, change in enumerate(ordered_changes(rows)):
            event = (left_struct(*change.row), None) if change.side == LEFT else (None, right_struct(*change.row))
            out.append(self._row(*key, change.side, *event, change.kind.short, position, 0))
            if null_key:
                continue
            for number, (_, left, right) in enumerate(inner.process(change.side, change.kind, change.row), 1):
                pair = (left_struct(*left), right_struct(*right))
                out.append(self._row(*key, change.side, *pair, change.kind.short, position, number))
        for store in stores:
            store.flush()
        return iter(out)


class _AssociateProcessor(_JoinProcessorBase):
    """Second step of a join with a residual predicate: each change comes with its matches; outer sides stored."""

    def handleInputRows(self, key, rows, timerValues):
        events: list[tuple[int, RowKind, tuple, list[tuple]]] = []
        for r in sorted(rows, key=lambda r: (r[SEQ_COLUMN], r[PAIR_COLUMN])):
            side = r[SIDE_COLUMN]
            this, other = (LEFT_ROW_COLUMN, RIGHT_ROW_COLUMN) if side == LEFT else (RIGHT_ROW_COLUMN, LEFT_ROW_COLUMN)
            if r[PAIR_COLUMN] == 0:
                events.append((side, RowKind.from_short(r[ROWKIND_COLUMN]), row_of(r[this]), []))
            else:
                events[-1][3].append(row_of(r[other]))
        return self._join(key, events)


@dataclass(frozen=True)
class JoinResult:
    """What :func:`regular_join` returns.

    Attributes:
        changelog: the streaming output: the left columns, then the right columns
            (not for SEMI/ANTI), then ``_rowkind`` (STRING) and ``_seq`` (LONG, the
            emission order of the change among the changes of its join key in its
            micro-batch).
        unique_keys: column-name sets that identify an output row (Flink's
            ``FlinkRelMdUniqueKeys`` rules for joins), each in output column order.
        upsert_keys: those unique keys whose changes all come from one join key,
            hence in order (Flink's ``FlinkRelMdUpsertKeys``). A sink whose primary
            key is one of them can apply the changelog as upserts directly; any
            other sink key needs the SinkUpsertMaterializer
            (``streamjoin.runtime.upsert_materializer``).
        explain: one line describing the physical operator, Flink-style.
    """

    changelog: DataFrame
    unique_keys: tuple[tuple[str, ...], ...]
    upsert_keys: tuple[tuple[str, ...], ...]
    explain: str


def derive_output_keys(
    join_type: JoinType,
    left_columns: Sequence[str],
    right_columns: Sequence[str],
    on: Sequence[tuple[str, str]],
    left_unique_key: Sequence[str] | None,
    right_unique_key: Sequence[str] | None,
) -> tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]]:
    """Unique keys and upsert keys of the join output, as Flink derives them.

    A declared input unique key is taken as the input's upsert key too (a source
    primary key is both). Rules (Flink ``FlinkRelMdUniqueKeys.getJoinUniqueKeys``):
    every union of a left and a right key; plus the left keys when the right join
    columns contain a right key (each left row meets at most one right row) and the
    join does not pad the left side; symmetrically for the right; SEMI/ANTI keep the
    left keys. For upsert keys only input keys that contain their side's join
    columns take part (Flink ``FlinkRelMdUpsertKeys``).

    Returns:
        ``(unique_keys, upsert_keys)``, each a tuple of column-name tuples in output order.

    Example:
        >>> derive_output_keys(JoinType.LEFT, ["l_ok", "l_ln"], ["o_ok"], [("l_ok", "o_ok")],
        ...                    ["l_ok", "l_ln"], ["o_ok"])
        ((('l_ok', 'l_ln'), ('l_ok', 'l_ln', 'o_ok')), (('l_ok', 'l_ln'), ('l_ok', 'l_ln', 'o_ok')))
    """
    order = {c: i for i, c in enumerate([*left_columns, *right_columns])}
    left_on = frozenset(l for l, _ in on)
    right_on = frozenset(r for _, r in on)

    def combine(left_keys: list[frozenset], right_keys: list[frozenset], left_unique: bool, right_unique: bool) -> set:
        if not join_type.projects_right:
            return set(left_keys)
        keys = {lk | rk for lk in left_keys for rk in right_keys}
        if right_unique and join_type not in (JoinType.RIGHT, JoinType.FULL):
            keys |= set(left_keys)
        if left_unique and join_type not in (JoinType.LEFT, JoinType.FULL):
            keys |= set(right_keys)
        return keys

    left_keys = [frozenset(left_unique_key)] if left_unique_key else []
    right_keys = [frozenset(right_unique_key)] if right_unique_key else []
    left_unique = any(k <= left_on for k in left_keys)
    right_unique = any(k <= right_on for k in right_keys)
    unique = combine(left_keys, right_keys, left_unique, right_unique)
    upsert = combine(
        [k for k in left_keys if left_on <= k], [k for k in right_keys if right_on <= k], left_unique, right_unique
    )

    def ordered(keys: set) -> tuple[tuple[str, ...], ...]:
        return tuple(sorted((tuple(sorted(k, key=order.__getitem__)) for k in keys), key=lambda k: (len(k), k)))

    return ordered(unique), ordered(upsert)


def _positions(names: Sequence[str] | None, schema: StructType, what: str) -> tuple[int, ...] | None:
    if names is None:
        return None
    if isinstance(names, str) or not names:
        raise ValidationError(f"{what} must be a non-empty list of column names, got {names!r}")
    unknown = [n for n in names if n not in schema.names]
    if unknown:
        raise ValidationError(f"{what} column(s) {unknown} not in {schema.names}")
    return tuple(schema.names.index(n) for n in names)


def _check_columns(left: StructType, right: StructType) -> None:
    reserved = [c for c in [*left.names, *right.names] if c.startswith("_")]
    if reserved:
        raise ValidationError(f"column names starting with '_' are reserved for the engine: {reserved}")
    shared = sorted(set(left.names) & set(right.names))
    if shared:
        raise ValidationError(f"left and right share the column name(s) {shared}; rename them before the join")


def _check_condition(left: DataFrame, joined: StructType, condition: str) -> None:
    try:
        probe = left.sparkSession.createDataFrame([], joined).select(F.expr(condition).alias("c"))
        result_type = probe.schema["c"].dataType
    except AnalysisException as error:
        raise ValidationError(
            f"condition {condition!r} is not a valid Spark SQL predicate over {joined.names}"
        ) from error
    if not isinstance(result_type, BooleanType):
        raise ValidationError(f"condition {condition!r} is {result_type.simpleString()}, not boolean")


def _output_schema(fields: Sequence[StructField]) -> StructType:
    return StructType(
        [StructField(f.name, f.dataType, True) for f in fields]
        + [StructField(ROWKIND_COLUMN, StringType(), False), StructField(SEQ_COLUMN, LongType(), False)]
    )


def _candidate_schema(both: TwoInput) -> StructType:
    return StructType(
        [both.frame.schema[k] for k in both.key_columns]
        + [
            StructField(SIDE_COLUMN, IntegerType(), False),
            StructField(LEFT_ROW_COLUMN, both.left_schema, True),
            StructField(RIGHT_ROW_COLUMN, both.right_schema, True),
            StructField(ROWKIND_COLUMN, StringType(), False),
            StructField(SEQ_COLUMN, LongType(), False),
            StructField(PAIR_COLUMN, IntegerType(), False),
        ]
    )


def _explain(
    spec: JoinSpec,
    on: Sequence[tuple[str, str]],
    condition: str | None,
    two_steps: bool,
    state_ttl_ms: int | None,
    upsert_keys: tuple[tuple[str, ...], ...],
) -> str:
    where = " AND ".join(f"{l} = {r}" for l, r in on) or "true"
    if condition is not None:
        where += f" AND ({condition})"
    distribution = f"hash[{', '.join(l for l, _ in on)}]" if on else "singleton: no equi-join key, one task"
    if condition is None:
        residual = "none"
    elif two_steps:
        residual = "Spark filter on candidate pairs between two stateful steps"
    else:
        residual = "Spark filter on the joined rows"
    ttl = f"{state_ttl_ms} ms" if state_ttl_ms else "none"
    keys = "; ".join(", ".join(k) for k in upsert_keys) or "none"
    return (
        f"RegularJoin(joinType=[{_FLINK_TYPE_NAMES[spec.join_type]}], where=[{where}], "
        f"leftInputSpec=[{spec.layouts[LEFT].value}], rightInputSpec=[{spec.layouts[RIGHT].value}], "
        f"distribution=[{distribution}], residual=[{residual}], stateTtl=[{ttl}], upsertKeys=[{keys}])"
    )


def regular_join(
    left: DataFrame,
    right: DataFrame,
    *,
    on: Sequence[tuple[str, str]],
    how: Literal["inner", "left", "right", "full", "semi", "anti"] = "inner",
    condition: str | None = None,
    left_unique_key: Sequence[str] | None = None,
    right_unique_key: Sequence[str] | None = None,
    state_ttl_ms: int | None = None,
) -> JoinResult:
    """Join two changelog streams with Flink's regular-join semantics (SEMANTICS.md §2).

    Every row of either side meets all past and future rows of the other side;
    retractions on either side retract the joined rows; outer sides send a
    null-padded row while unmatched and retract it when a match arrives (and back).
    Output RowKinds are Flink's: INNER forwards ``-U``/``+U``; outer joins send
    ``-D``/``+I`` pairs; SEMI sends the left row with the right change's RowKind;
    ANTI sends ``+I`` when a left row becomes unmatched and ``-D`` when matched.

    The state of each side per join key is JoinKeyContainsUniqueKey,
    InputSideHasUniqueKey or InputSideHasNoUniqueKey, from the declared unique
    key, in Spark's RocksDB state store. Without an equi condition (``on=[]``)
    every row goes to one group: one task does all the work (Flink: parallelism 1);
    ``explain`` says so.

    Args:
        left: left changelog stream: its columns + ``_rowkind`` + ``_seq``. A
            retract changelog: each retraction (``-U``/``-D``) names a row added
            before, and an update comes as ``-U`` old then ``+U`` new (an upsert-only
            source needs normalizing first, as Flink's ChangelogNormalize does).
        right: right changelog stream. Column names must differ from the left's
            and must not start with ``_``.
        on: equi-join column pairs ``[(left_column, right_column), ...]``; keys with
            a null never match. Pairs are compared after widening to a common type.
        how: ``"inner"``, ``"left"``, ``"right"``, ``"full"``, ``"semi"`` or ``"anti"``.
        condition: residual non-equi predicate, a Spark SQL boolean expression over
            the left and right column names (``"a2 > b2"``); evaluated by Spark. A null
            result counts as false.
        left_unique_key: columns forming a unique key of the left input (e.g. its
            primary key), or None. Picks the state layout and the output's keys.
        right_unique_key: the same for the right input.
        state_ttl_ms: idle state retention in milliseconds (processing time), or None
            to keep state forever. A stored row that is not written for this long is
            dropped: later rows of the other side no longer match it, and a later
            retraction of it is ignored (the joined rows it produced are not
            retracted), like Flink's ``table.exec.state.ttl``: accuracy traded for
            bounded state. TTL needs transformWithState's processing-time mode, in
            which Spark keeps running empty micro-batches: with TTL use a
            processing-time trigger, or an ``availableNow`` trigger only with
            ``spark.sql.streaming.noDataMicroBatches.enabled=false``, else it never ends.

    Returns:
        A :class:`JoinResult` with the output changelog, its unique and upsert keys
        and an EXPLAIN line.

    Raises:
        ValidationError: for an unknown ``how``, an input that is not a changelog,
            unknown, shared or reserved column names, a malformed ``on`` or unique key,
            a condition Spark cannot analyse as boolean, or a non-positive TTL.

    Example:
        >>> result = regular_join(lineitem, orders, on=[("l_orderkey", "o_orderkey")], how="left",
        ...                       left_unique_key=["l_orderkey", "l_linenumber"],
        ...                       right_unique_key=["o_orderkey"])  # doctest: +SKIP
        >>> result.upsert_keys  # doctest: +SKIP
        (('l_orderkey', 'l_linenumber'), ...)
    """
    join_type = JoinType.parse(how)
    left_schema = data_schema(left, "left")
    right_schema = data_schema(right, "right")
    _check_columns(left_schema, right_schema)
    if isinstance(on, (str, bytes)) or any(not (isinstance(p, (tuple, list)) and len(p) == 2) for p in on):
        raise ValidationError(f"on must be a list of (left_column, right_column) pairs, got {on!r}")
    if state_ttl_ms is not None and (not isinstance(state_ttl_ms, int) or state_ttl_ms <= 0):
        raise ValidationError(f"state_ttl_ms must be a positive number of milliseconds or None, got {state_ttl_ms!r}")
    left_on = [l for l, _ in on]
    right_on = [r for _, r in on]
    spec = JoinSpec(
        join_type,
        _positions(left_on, left_schema, "left join key") if on else (),
        _positions(right_on, right_schema, "right join key") if on else (),
        len(left_schema.fields),
        len(right_schema.fields),
        _positions(left_unique_key, left_schema, "left_unique_key"),
        _positions(right_unique_key, right_schema, "right_unique_key"),
    )
    joined_fields = [*left_schema.fields, *right_schema.fields]
    if condition is not None:
        _check_condition(left, StructType(joined_fields), condition)

    both = union_inputs(left, right, left_on, right_on)
    schemas = (left_schema, right_schema)
    output_fields = joined_fields if join_type.projects_right else list(left_schema.fields)
    output = _output_schema(output_fields)
    time_mode = "ProcessingTime" if state_ttl_ms else "None"
    two_steps = condition is not None and join_type is not JoinType.INNER
    if not two_steps:
        processor = _JoinProcessor(spec, schemas, (True, True), state_ttl_ms, output.names)
        changelog = both.grouped().transformWithState(processor, output, "Append", time_mode)
        if condition is not None:
            changelog = changelog.filter(F.coalesce(F.expr(condition), F.lit(False)))
    else:
        candidates_schema = _candidate_schema(both)
        candidates = both.grouped().transformWithState(
            _CandidateProcessor(spec, schemas, (True, True), state_ttl_ms, candidates_schema.names),
            candidates_schema,
            "Append",
            time_mode,
        )
        flat = candidates.select(
            "*",
            *[F.col(LEFT_ROW_COLUMN).getField(c).alias(c) for c in left_schema.names],
            *[F.col(RIGHT_ROW_COLUMN).getField(c).alias(c) for c in right_schema.names],
        )
        kept = flat.filter((F.col(PAIR_COLUMN) == 0) | F.coalesce(F.expr(condition), F.lit(False))).select(
            *candidates_schema.names
        )
        changelog = kept.groupBy(*both.key_columns).transformWithState(
            _AssociateProcessor(spec, schemas, join_type.outer, state_ttl_ms, output.names),
            output,
            "Append",
            time_mode,
        )

    unique_keys, upsert_keys = derive_output_keys(
        join_type, left_schema.names, right_schema.names, list(on), left_unique_key, right_unique_key
    )
    explain = _explain(spec, list(on), condition, two_steps, state_ttl_ms, upsert_keys)
    return JoinResult(changelog, unique_keys, upsert_keys, explain)
