"""The residual predicate of an outer interval join on the python engine (docs/semantics.md §3).

Spark evaluates it between two stateful steps.

Flink's ``TimeIntervalJoin`` evaluates the non-equi rest of the join condition
with each pair of rows in the window (its generated ``IntervalJoinFunction``):
a pair for which it is false or NULL is no match (not emitted, and it does
not mark either row as joined); an outer row that no pair matched is emitted
null-padded once, when it leaves the cache. Residual predicates are Spark SQL
expressions here, never evaluated by Python. The jvm engine's join evaluates
them itself, as Flink does (``TimeIntervalJoin.scala`` with a ``JoinCondition``);
on the python engine Spark evaluates them, so an outer join with one runs as:

1. the interval join in candidate mode (:class:`~streamjoin.runtime.interval_join.TimeIntervalJoin`,
   ``candidates=True``): every pair in the window, with both rows' ids
   (``_left_id``, ``_right_id``), and every outer row's *expiry* (its
   null-padded row with its id) when it leaves the cache, after its pairs;
2. a Spark filter: the pairs for which the predicate is true, and every expiry;
3. :class:`ResidualPaddingLogic`, grouped by the join key: a kept pair is emitted and
   marks its outer rows as matched; an expiry of a row that nothing matched is
   emitted (the null-padded row), any other is dropped, and the row is forgotten.

Step 1 numbers a key's output of a micro-batch in emission order (``_seq``) and
step 3 takes it in that order, so a row's expiry comes after its pairs also
within one micro-batch. Step 3 holds only the ids of outer rows that matched
and have not expired yet, so its state is bounded like the join's. Cost: one
more shuffle, and every outer row passes the filter once more as its expiry.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind
from streamjoin.contract import ResidualPaddingSpec
from streamjoin.runtime.engine import JvmLogic
from streamjoin.runtime.inputs import output_schema, rows_in_order
from streamjoin.runtime.processor import Change, Element, KeyedLogic, KeyedProcessor

__all__ = ["ID_FIELDS", "LEFT_ID_COLUMN", "RIGHT_ID_COLUMN", "ResidualPaddingLogic", "pad_after_residual"]

#: Columns step 1 appends: the ids (per join key, LONG) of a pair's rows; an expiry has one of them.
LEFT_ID_COLUMN = "_left_id"
RIGHT_ID_COLUMN = "_right_id"
ID_FIELDS = (StructField(LEFT_ID_COLUMN, LongType(), True), StructField(RIGHT_ID_COLUMN, LongType(), True))
_GROUP_PREFIX = "_residual_key"


class ResidualPaddingLogic(KeyedLogic):
    """Step 3: kept pairs and expiries of one join key in, the join's ``+I`` rows out.

    Elements' rows are ``output values + (left id, right id)``. The state is
    ``(left ids, right ids)`` of the outer rows a kept pair matched and whose
    expiry has not come yet.

    Args:
        data_columns: the output columns (left data columns, then right).
        outer: whether the left / right side is outer (only those rows are remembered).
    """

    state_name = "intervalJoinMatchedRows"

    def __init__(self, data_columns: Sequence[str], outer: tuple[bool, bool]) -> None:
        self._columns = (*data_columns, LEFT_ID_COLUMN, RIGHT_ID_COLUMN)
        self._outer = outer

    def new_state(self, key: tuple) -> tuple[set, set]:
        return set(), set()

    def is_done(self, state: tuple[set, set]) -> bool:
        return not state[0] and not state[1]

    def elements(self, rows: Iterable[Row]) -> list[Element]:
        return [Element(r[SEQ_COLUMN], RowKind.INSERT, tuple(r[c] for c in self._columns)) for r in rows_in_order(rows)]

    def on_element(self, state: tuple[set, set], element: Element, now) -> list[Change]:
        """A kept pair: emit it, mark its outer rows matched. An expiry: emit the padded row
        unless the row matched (Flink's ``!tuple.f1`` test at clean-up); forget the row."""
        *values, left_id, right_id = element.row
        if left_id is not None and right_id is not None:
            for side, row_id in enumerate((left_id, right_id)):
                if self._outer[side]:
                    state[side].add(row_id)
            return [(RowKind.INSERT, tuple(values))]
        side, row_id = (0, left_id) if right_id is None else (1, right_id)
        if row_id in state[side]:
            state[side].remove(row_id)
            return []
        return [(RowKind.INSERT, tuple(values))]

    def jvm_logic(self) -> JvmLogic:
        """Its Scala twin, ``ResidualPaddingLogic.scala`` (per outer side a MapState of matched row ids)."""
        outer = (bool(self._outer[0]), bool(self._outer[1]))
        return JvmLogic(
            "interval_join.ResidualPaddingLogic", ResidualPaddingSpec(columns=tuple(self._columns[:-2]), outer=outer)
        )


def _col(name: str):
    return F.col("`" + name.replace("`", "``") + "`")


def pad_after_residual(
    candidates: DataFrame, *, condition: str, on: Sequence[tuple[str, str]], outer: tuple[bool, bool]
) -> DataFrame:
    """Steps 2 and 3 over step 1's output (see the module docstring).

    Args:
        candidates: step 1's changelog: left data columns, right data columns,
            ``_left_id``, ``_right_id``, ``_rowkind``, ``_seq``.
        condition: the residual predicate, a Spark SQL boolean expression over the
            data columns; NULL counts as false (Flink's generated condition).
        on: the ``(left, right)`` join-key columns; a row's group is the key's value
            (the left column, or the right one where the left is null).
        outer: whether the left / right side is outer.

    Returns:
        The join's changelog: the data columns, ``_rowkind`` (``+I``) and ``_seq``.

    Raises:
        pyspark.errors.AnalysisException: when Spark cannot analyse ``condition``.
    """
    internal = (LEFT_ID_COLUMN, RIGHT_ID_COLUMN, ROWKIND_COLUMN, SEQ_COLUMN)
    data = [f for f in candidates.schema.fields if f.name not in internal]
    is_pair = _col(LEFT_ID_COLUMN).isNotNull() & _col(RIGHT_ID_COLUMN).isNotNull()
    kept = candidates.filter(~is_pair | F.coalesce(F.expr(condition), F.lit(False)))
    groups = [F.coalesce(_col(l), _col(r)).alias(f"{_GROUP_PREFIX}{i}") for i, (l, r) in enumerate(on)]
    schema = output_schema(data)
    processor = KeyedProcessor(ResidualPaddingLogic([f.name for f in data], outer), schema.names)
    return processor.apply(kept.select("*", *groups), [f"{_GROUP_PREFIX}{i}" for i in range(len(on))], schema)
