"""The regular streaming join with retraction: INNER, LEFT, RIGHT, FULL, SEMI, ANTI (docs/semantics.md §2).

Spark's own stream-stream join takes append-only inputs and emits outer rows
only behind watermarks; this operator takes changelogs of any RowKind and
retracts, as Flink's ``StreamingJoinOperator`` / ``StreamingSemiAntiJoinOperator``.

Layers, one way:

* :mod:`streamjoin.runtime.regular_join.streaming_join`: the decision tree for one change
  of one join key, over the state views of ``join_state``, and its plain-Python
  runner; no Spark (docs/architecture.md, "Where to add things").
* :func:`regular_join` (here): the Spark operator: the processor shell (``processor``) on the
  union of both inputs grouped by join key (``two_input``), RocksDB state store. On the jvm
  engine each step's logic runs as its Scala twin (``jvm/operators``: ``RegularJoinLogic``,
  ``RegularJoinCandidateLogic``, ``RegularJoinAssociateLogic``) on the same prepared input,
  with the same state layouts.

The residual (non-equi) predicate is a Spark SQL expression; Python never
evaluates it. On the jvm engine the join evaluates it on each equi-matching
pair, as Flink's ``StreamingJoinOperator`` does with its ``JoinCondition``:
one step for every join type (``RegularJoinLogic`` binds the predicate on the
driver). On the python engine Spark evaluates it: INNER filters the
equi-join's changes; the other types need the predicate's outcome before
deciding on null padding, so they run in two stateful steps: the first stores
both sides and emits each input change followed by its equi-matching
*candidate pairs*; Spark filters the pairs by the predicate; the second step
receives each change with the pairs that survived as its matches, and keeps
only the outer sides' rows with their association counts. Cost: one more
shuffle, and outer rows are stored twice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessorHandle
from pyspark.sql.types import BinaryType, BooleanType, IntegerType, StringType, StructField, StructType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind
from streamjoin.contract import PAIR_COLUMN, Position, RegularJoinSpec
from streamjoin.errors import EngineError, ValidationError
from streamjoin.runtime.engine import RESIDUAL_IN_JOIN_ONLY, JvmLogic, residual_in_join
from streamjoin.runtime.inputs import check_state_ttl
from streamjoin.runtime.processor import Change, Element, KeyedLogic, KeyedProcessor
from streamjoin.runtime.regular_join.state_views import StateLayout, TwsRecordStore, view_class
from streamjoin.runtime.regular_join.streaming_join import (
    JoinSpec,
    JoinType,
    StreamingJoin,
    StreamingSemiAntiJoin,
    join_logic,
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

__all__ = ["PAIR_COLUMN", "regular_join"]

_log = logging.getLogger(__name__)

_STATE_NAMES = ("left_records", "right_records")


@dataclass
class _KeyJoin:
    """One join key's visit: its record stores (written back after it) and the decision tree over their views."""

    key: tuple
    stores: list
    logic: StreamingJoin | StreamingSemiAntiJoin
    null_key: bool


class _RegularJoinLogic(KeyedLogic):
    """A regular join step as the shell's per-key logic; one of the three steps of :func:`regular_join`.

    Args:
        spec: the join.
        schemas: left and right columns.
        stored: per side, whether this step keeps the side's rows.
        condition: the residual predicate (Spark SQL) for the Scala twin to evaluate inside the join
            (jvm engine only: this Python logic never evaluates Spark SQL, and runs without one).
    """

    #: The Scala twin (``jvm/operators``: ``RegularJoinLogic.scala``).
    jvm_class = "regular_join.RegularJoinLogic"

    def __init__(
        self,
        spec: JoinSpec,
        schemas: tuple[StructType, StructType],
        stored: tuple[bool, bool],
        condition: str | None = None,
    ) -> None:
        self._spec = spec
        self._schemas = schemas
        self._stored = stored
        self._condition = condition

    def open(self, handle: StatefulProcessorHandle, state_ttl_ms: int | None) -> None:
        self._variables: list[Any] = [None, None]  # per side: its ValueState or MapState, None when not stored
        for side in (LEFT, RIGHT):
            if not self._stored[side]:
                continue
            key_schema, value_schema = view_class(self._spec.layouts[side]).state_schema(
                self._schemas[side], self._spec.unique_keys[side] or ()
            )
            name = _STATE_NAMES[side]
            if key_schema is None:
                self._variables[side] = handle.getValueState(name, value_schema, state_ttl_ms)
            else:
                self._variables[side] = handle.getMapState(name, key_schema, value_schema, state_ttl_ms)

    def load(self, key: tuple) -> _KeyJoin:
        """Fresh stores and views over the state variables, for the current grouping key."""
        single = StateLayout.JOIN_KEY_CONTAINS_UNIQUE_KEY
        stores = [
            None if variable is None else TwsRecordStore(variable, is_map=self._spec.layouts[side] is not single)
            for side, variable in enumerate(self._variables)
        ]
        views = [None if store is None else self._spec.view(side, store) for side, store in enumerate(stores)]
        return _KeyJoin(key, stores, self._decision_tree(*views), has_null(key))

    def _decision_tree(self, left_view, right_view) -> StreamingJoin | StreamingSemiAntiJoin:
        return join_logic(self._spec.join_type, left_view, right_view)

    def store(self, state: _KeyJoin) -> None:
        for store in state.stores:
            if store is not None:
                store.flush()

    def elements(self, rows):
        return ordered_changes(rows)

    def on_element(self, state: _KeyJoin, element: Element, now) -> list[Change]:
        if self._condition is not None:
            raise EngineError(RESIDUAL_IN_JOIN_ONLY)
        logic, side, kind, row = state.logic, element.side, element.kind, element.row
        produced = (
            logic.process_null_key(side, kind, row)
            if state.null_key
            else logic.process(side, kind, row, element.matches)
        )
        return [self._spec.output_row(joined) for joined in produced]

    def jvm_logic(self) -> JvmLogic:
        spec = self._spec

        def unique_key(side: int) -> tuple[Position, ...] | None:
            key = spec.unique_keys[side]
            return tuple(Position(p) for p in key) if key else None

        return JvmLogic(
            self.jvm_class,
            RegularJoinSpec(
                join_type=spec.join_type.value,
                layouts=(spec.layouts[LEFT].value, spec.layouts[RIGHT].value),
                unique_keys=(unique_key(LEFT), unique_key(RIGHT)),
                stored=(bool(self._stored[LEFT]), bool(self._stored[RIGHT])),
                condition=self._condition,
            ),
        )


class _RegularJoinCandidateLogic(_RegularJoinLogic):
    """First step of a join with a residual predicate: each change, then its equi-matching pairs.

    Output: the grouping key, ``_side``, ``_left``, ``_right``, ``_pair`` (0 for the
    change, 1… for its candidate pairs), ``_rowkind`` (the change's) and ``_seq``
    (the change's ``_seq`` followed by the row's index among what the change caused,
    so the second step takes each change followed by its pairs).
    """

    jvm_class = "regular_join.RegularJoinCandidateLogic"

    def __init__(self, spec: JoinSpec, schemas: tuple[StructType, StructType], stored: tuple[bool, bool]) -> None:
        super().__init__(spec, schemas, stored)
        self._structs = (Row(*schemas[LEFT].names), Row(*schemas[RIGHT].names))

    def _decision_tree(self, left_view, right_view) -> StreamingJoin:
        return StreamingJoin(JoinType.INNER, left_view, right_view)

    def on_element(self, state: _KeyJoin, element: Element, now) -> list[Change]:
        left_struct, right_struct = self._structs
        side, kind, row = element.side, element.kind, element.row
        event = (left_struct(*row), None) if side == LEFT else (None, right_struct(*row))
        out = [(kind, (*state.key, side, *event, 0))]
        if not state.null_key:
            for number, (_, left, right) in enumerate(state.logic.process(side, kind, row), 1):
                assert left is not None and right is not None  # an inner join's pair
                out.append((kind, (*state.key, side, left_struct(*left), right_struct(*right), number)))
        return out


class _RegularJoinAssociateLogic(_RegularJoinLogic):
    """Second step of a join with a residual predicate: each change comes with its matches; outer sides stored."""

    jvm_class = "regular_join.RegularJoinAssociateLogic"

    def elements(self, rows):
        events: list[Element] = []
        for r in sorted(rows, key=lambda r: r[SEQ_COLUMN]):
            side = r[SIDE_COLUMN]
            this, other = (LEFT_ROW_COLUMN, RIGHT_ROW_COLUMN) if side == LEFT else (RIGHT_ROW_COLUMN, LEFT_ROW_COLUMN)
            if r[PAIR_COLUMN] == 0:
                kind = RowKind.from_short(r[ROWKIND_COLUMN])
                events.append(Element(r[SEQ_COLUMN], kind, row_of(r[this]), side=side, matches=[]))
            else:
                matches = events[-1].matches
                assert matches is not None  # its change came first, with matches=[]
                matches.append(row_of(r[other]))
        return events


@overload
def _positions(names: Sequence[str], schema: StructType, what: str) -> tuple[int, ...]: ...
@overload
def _positions(names: None, schema: StructType, what: str) -> None: ...
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
        + [StructField(ROWKIND_COLUMN, StringType(), False), StructField(SEQ_COLUMN, BinaryType(), False)]
    )


def _candidate_schema(both: TwoInput) -> StructType:
    return StructType(
        [both.frame.schema[k] for k in both.key_columns]
        + [
            StructField(SIDE_COLUMN, IntegerType(), False),
            StructField(LEFT_ROW_COLUMN, both.left_schema, True),
            StructField(RIGHT_ROW_COLUMN, both.right_schema, True),
            StructField(PAIR_COLUMN, IntegerType(), False),
            StructField(ROWKIND_COLUMN, StringType(), False),
            StructField(SEQ_COLUMN, BinaryType(), False),
        ]
    )


def _residual_placement(in_join: bool, two_steps: bool) -> str:
    """Where the engine evaluates a residual predicate (the planner's EXPLAIN shows the predicate itself)."""
    if in_join:
        return "in the join, on each equi-matching pair"
    if two_steps:
        return "Spark filter on candidate pairs between two stateful steps"
    return "Spark filter on the joined rows"


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
    layouts: tuple[StateLayout, StateLayout] | None = None,
) -> DataFrame:
    """Join two changelog streams with Flink's regular-join semantics (docs/semantics.md §2).

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
            the left and right column names (``"a2 > b2"``); a pair of rows matches when
            their equi-join key matches and this is true (a null result counts as false), as in
            Flink. Evaluated inside the join on the jvm engine, as a Spark filter on the python
            engine (module docstring).
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
        layouts: the ``(left, right)`` state layouts as the planner chose them (Flink's
            ``JoinInputSideSpec``); ``None`` picks them here from the unique keys. A layout other
            than InputSideHasNoUniqueKey needs that side's unique key.

    Returns:
        The output changelog DataFrame: the left columns, then the right columns (not
        for SEMI/ANTI), all nullable, then ``_rowkind`` (STRING) and ``_seq`` (BINARY: the
        input change's ``_seq`` followed by the index of this change among those it
        caused, :func:`~streamjoin.runtime.processor.child_seq`). Where a residual predicate is
        evaluated is logged at INFO by ``streamjoin.runtime.regular_join`` (``streamjoin explain`` renders the
        operator from the plan). The output's unique and upsert keys are
        the planner's (:func:`streamjoin.planner.metadata.derive_output_keys`): a sink whose primary key is not an
        upsert key needs the SinkUpsertMaterializer
        (:func:`~streamjoin.runtime.upsert_materializer.sink_upsert_materialize`).

    Raises:
        ValidationError: for an unknown ``how``, an input that is not a changelog,
            unknown, shared or reserved column names, a malformed ``on`` or unique key,
            a condition Spark cannot analyse as boolean, or a non-positive TTL.

    Example:
        >>> joined = regular_join(lineitem, orders, on=[("l_orderkey", "o_orderkey")], how="left",
        ...                       left_unique_key=["l_orderkey", "l_linenumber"],
        ...                       right_unique_key=["o_orderkey"])  # doctest: +SKIP
    """
    join_type = JoinType.parse(how)
    left_schema = data_schema(left, "left")
    right_schema = data_schema(right, "right")
    _check_columns(left_schema, right_schema)
    if isinstance(on, (str, bytes)) or any(not (isinstance(p, (tuple, list)) and len(p) == 2) for p in on):
        raise ValidationError(f"on must be a list of (left_column, right_column) pairs, got {on!r}")
    check_state_ttl(state_ttl_ms, "regular_join")
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
        layouts,
    )
    joined_fields = [*left_schema.fields, *right_schema.fields]
    if condition is not None:
        _check_condition(left, StructType(joined_fields), condition)

    both = union_inputs(left, right, left_on, right_on)
    schemas = (left_schema, right_schema)
    output_fields = joined_fields if join_type.projects_right else list(left_schema.fields)
    output = _output_schema(output_fields)
    in_join = residual_in_join(left.sparkSession, condition, left_schema, right_schema)
    two_steps = condition is not None and not in_join and join_type is not JoinType.INNER
    if not two_steps:
        processor = KeyedProcessor(
            _RegularJoinLogic(spec, schemas, (True, True), condition if in_join else None),
            output.names,
            state_ttl_ms=state_ttl_ms,
        )
        changelog = processor.apply(both.frame, both.key_columns, output)
        if condition is not None and not in_join:
            changelog = changelog.filter(F.coalesce(F.expr(condition), F.lit(False)))
    else:
        assert condition is not None  # two_steps
        candidates_schema = _candidate_schema(both)
        candidate_step = KeyedProcessor(
            _RegularJoinCandidateLogic(spec, schemas, (True, True)), candidates_schema.names, state_ttl_ms=state_ttl_ms
        )
        candidates = candidate_step.apply(both.frame, both.key_columns, candidates_schema)
        flat = candidates.select(
            "*",
            *[F.col(LEFT_ROW_COLUMN).getField(c).alias(c) for c in left_schema.names],
            *[F.col(RIGHT_ROW_COLUMN).getField(c).alias(c) for c in right_schema.names],
        )
        kept = flat.filter((F.col(PAIR_COLUMN) == 0) | F.coalesce(F.expr(condition), F.lit(False))).select(
            *candidates_schema.names
        )
        associate_step = KeyedProcessor(
            _RegularJoinAssociateLogic(spec, schemas, join_type.outer), output.names, state_ttl_ms=state_ttl_ms
        )
        changelog = associate_step.apply(kept, both.key_columns, output)

    if condition is not None:
        _log.info("regular join residual predicate %r: %s", condition, _residual_placement(in_join, two_steps))
    return changelog
