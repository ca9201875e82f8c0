"""Flink's regular streaming join logic in plain Python: ``StreamingJoinOperator`` and
``StreamingSemiAntiJoinOperator`` (flink-table-runtime ``operators/join/stream``), docs/semantics.md §2.

* :class:`StreamingJoin` / :class:`StreamingSemiAntiJoin`: the decision tree for one change of
  one join key, over the state views of :mod:`streamjoin.runtime.regular_join.state_views` (association
  counts for outer sides): what is emitted, what is stored, what is retracted;
* :class:`LocalRegularJoin`: runs that logic over a whole changelog in Python, one change at a
  time as Flink does (the tests' reference execution).

:func:`streamjoin.runtime.regular_join.regular_join` runs the same logic on Spark.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence

from streamjoin.changelog import RowKind
from streamjoin.errors import ValidationError
from streamjoin.runtime.regular_join.state_views import (
    DictRecordStore,
    JoinRecordStateView,
    StateLayout,
    choose_layout,
    create_state_view,
)
from streamjoin.runtime.two_input import LEFT, RIGHT, has_null

__all__ = [
    "JoinSpec",
    "JoinType",
    "JoinedChange",
    "LocalRegularJoin",
    "StreamingJoin",
    "StreamingSemiAntiJoin",
    "join_logic",
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
    def parse(cls, how: str) -> JoinType:
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


class AbstractStreamingJoin:
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
                assert other is not None  # an outer side is stored: it keeps association counts
                return [(m, other.associations(m)) for m in given]
            return [(m, 0) for m in given]
        assert other is not None  # without given matches, they are looked up in the other side's state
        condition = self._condition
        if condition is None:
            return other.records()
        if side == LEFT:
            return [(m, n) for m, n in other.records() if condition(row, m)]
        return [(m, n) for m, n in other.records() if condition(m, row)]

    def _add(self, side: int, row: tuple, associations: int = 0) -> None:
        view = self._views[side]
        if view is not None:
            view.add_record(row, associations)

    def _retract(self, side: int, row: tuple) -> None:
        view = self._views[side]
        if view is not None:
            view.retract_record(row)

    def _update(self, side: int, row: tuple, associations: int) -> None:
        view = self._views[side]
        assert view is not None  # association counts are kept in the side's state
        view.update_associations(row, associations)


class StreamingJoin(AbstractStreamingJoin):
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
        left_view: see :class:`AbstractStreamingJoin`.
        right_view: see :class:`AbstractStreamingJoin`.
        condition: see :class:`AbstractStreamingJoin`.

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


class StreamingSemiAntiJoin(AbstractStreamingJoin):
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
        left_view: see :class:`AbstractStreamingJoin`.
        right_view: see :class:`AbstractStreamingJoin`.
        condition: see :class:`AbstractStreamingJoin`.
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
        layouts: the state layout of each side as the planner chose it (Flink's ``JoinInputSideSpec``);
            ``None`` picks them from the unique keys
            (:func:`~streamjoin.runtime.regular_join.state_views.choose_layout`).

    Raises:
        ValidationError: when the key lists differ in length, a position is out of range, or a
            given layout needs a unique key the side lacks.
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
        layouts: tuple[StateLayout, StateLayout] | None = None,
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
        if layouts is None:
            layouts = (
                choose_layout(self.keys[LEFT], self.unique_keys[LEFT]),
                choose_layout(self.keys[RIGHT], self.unique_keys[RIGHT]),
            )
        for side, name in ((LEFT, "left"), (RIGHT, "right")):
            if layouts[side] is not StateLayout.INPUT_SIDE_HAS_NO_UNIQUE_KEY and self.unique_keys[side] is None:
                raise ValidationError(f"the {name} state layout {layouts[side].value} needs the {name} unique key")
        self.layouts: tuple[StateLayout, StateLayout] = (layouts[LEFT], layouts[RIGHT])

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
