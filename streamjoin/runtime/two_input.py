"""The shared two-input mechanism of the join operators (docs/architecture.md).

Spark's stateful-processing API takes one grouped input, so a two-input
operator (regular, interval, temporal join) runs on the **union of both
inputs, each row tagged with its side, grouped by join key**. The union frame
built by :func:`union_inputs` has these columns:

==================  =====================================  =============================================
column              type                                   content
==================  =====================================  =============================================
``_key0`` …         common type of each pair of key cols   the equi-join key; without an equi condition a
                                                           single constant ``_key0 = 0``: every row goes
                                                           to one group, i.e. one task (Flink's singleton
                                                           distribution, parallelism 1)
``_side``           INT                                    :data:`LEFT` (0) or :data:`RIGHT` (1)
``_left``           STRUCT<left columns>                   the left row, null on right rows
``_right``          STRUCT<right columns>                  the right row, null on left rows
``_rowkind``        STRING                                 the change's RowKind (``+I`` …)
``_seq``            BINARY                                 the change's ``_seq`` in its own input (a path)
==================  =====================================  =============================================

Each pair of key columns is cast to the type Spark's ``coalesce`` finds for
them (the usual widening, e.g. INT and BIGINT → BIGINT), so equal keys land
in the same group; a key containing a null is a group of its own whose rows
never match (SQL semantics; the operator decides what to do with them).

**Processing order.** Spark hands a stateful processor all rows of one group
of one micro-batch at once, in no particular order; :func:`ordered_changes`
sorts them by ``(_seq, _side)``. Callers that number both inputs from one
arrival counter (e.g. ``changelog_file_stream(first_seq=...)``) get the global
arrival order; otherwise each input keeps its own order, and changes with
equal ``_seq`` are taken left first. The operator's changes carry their cause's
``_seq`` path (:func:`~streamjoin.runtime.processor.child_seq`), so the next
operator takes changes of several of these groups in the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import overload

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind, with_seq_path
from streamjoin.contract import KEY_COLUMN_PREFIX, LEFT_ROW_COLUMN, RIGHT_ROW_COLUMN, SIDE_COLUMN
from streamjoin.errors import ValidationError
from streamjoin.runtime.processor import Element

__all__ = [
    "KEY_COLUMN_PREFIX",
    "LEFT",
    "LEFT_ROW_COLUMN",
    "RIGHT",
    "RIGHT_ROW_COLUMN",
    "SIDE_COLUMN",
    "TwoInput",
    "data_schema",
    "has_null",
    "ordered_changes",
    "row_of",
    "union_inputs",
]

#: Side tag of the left input.
LEFT = 0
#: Side tag of the right input.
RIGHT = 1


@dataclass(frozen=True)
class TwoInput:
    """Both inputs of a two-input operator as one frame (see the module docstring).

    Attributes:
        frame: the union frame.
        key_columns: its grouping-key columns, ``("_key0", ...)``.
        left_schema: the left input's columns without ``_rowkind``/``_seq``.
        right_schema: the right input's columns without ``_rowkind``/``_seq``.
    """

    frame: DataFrame
    key_columns: tuple[str, ...]
    left_schema: StructType
    right_schema: StructType


def data_schema(changelog: DataFrame, name: str) -> StructType:
    """The columns of a changelog DataFrame other than ``_rowkind`` and ``_seq``.

    Raises:
        ValidationError: when ``changelog`` lacks ``_rowkind`` or ``_seq``; ``name`` names it.
    """
    missing = [c for c in (ROWKIND_COLUMN, SEQ_COLUMN) if c not in changelog.columns]
    if missing:
        raise ValidationError(f"{name} input is not a changelog: it lacks the column(s) {missing}")
    return StructType([f for f in changelog.schema.fields if f.name not in (ROWKIND_COLUMN, SEQ_COLUMN)])


def _common_type(left: DataFrame, left_column: str, right: DataFrame, right_column: str) -> DataType:
    left_type = left.schema[left_column].dataType
    right_type = right.schema[right_column].dataType
    try:
        probe = left.sparkSession.range(0).select(
            F.coalesce(F.lit(None).cast(left_type), F.lit(None).cast(right_type)).alias("k")
        )
        return probe.schema["k"].dataType
    except AnalysisException as error:
        raise ValidationError(
            f"join key {left_column} ({left_type.simpleString()}) and {right_column} "
            f"({right_type.simpleString()}) have no common type"
        ) from error


def union_inputs(left: DataFrame, right: DataFrame, left_keys: Sequence[str], right_keys: Sequence[str]) -> TwoInput:
    """Tag both changelogs with their side and union them, keyed by the equi-join key.

    Args:
        left: the left changelog (columns + ``_rowkind`` + ``_seq``).
        right: the right changelog.
        left_keys: left equi-join columns, pairwise equal to ``right_keys``; may be empty.
        right_keys: right equi-join columns.

    Returns:
        The :class:`TwoInput` frame described in the module docstring.

    Raises:
        ValidationError: when an input is not a changelog, the key lists differ in
            length, a key column does not exist, or a key pair has no common type.

    Example:
        >>> both = union_inputs(orders, lineitem, ["o_orderkey"], ["l_orderkey"])  # doctest: +SKIP
        >>> both.grouped().transformWithState(...)  # doctest: +SKIP
    """
    left_schema = data_schema(left, "left")
    right_schema = data_schema(right, "right")
    if len(left_keys) != len(right_keys):
        raise ValidationError(f"left keys {list(left_keys)} and right keys {list(right_keys)} differ in length")
    for name, keys, schema in (("left", left_keys, left_schema), ("right", right_keys, right_schema)):
        unknown = [k for k in keys if k not in schema.names]
        if unknown:
            raise ValidationError(f"{name} key column(s) {unknown} not in the {name} columns {schema.names}")

    left, right = with_seq_path(left), with_seq_path(right)
    if left_keys:
        types = [_common_type(left, lk, right, rk) for lk, rk in zip(left_keys, right_keys)]
        key_columns = tuple(f"{KEY_COLUMN_PREFIX}{i}" for i in range(len(types)))
        left_key_exprs = [left[k].cast(t).alias(n) for k, t, n in zip(left_keys, types, key_columns)]
        right_key_exprs = [right[k].cast(t).alias(n) for k, t, n in zip(right_keys, types, key_columns)]
    else:
        key_columns = (f"{KEY_COLUMN_PREFIX}0",)
        left_key_exprs = right_key_exprs = [F.lit(0).alias(key_columns[0])]

    def tagged(frame: DataFrame, side: int, key_exprs: list, schema: StructType) -> DataFrame:
        row = F.struct(*[frame[c] for c in schema.names])
        null_left = F.lit(None).cast(left_schema)
        null_right = F.lit(None).cast(right_schema)
        return frame.select(
            *key_exprs,
            F.lit(side).alias(SIDE_COLUMN),
            (row if side == LEFT else null_left).alias(LEFT_ROW_COLUMN),
            (row if side == RIGHT else null_right).alias(RIGHT_ROW_COLUMN),
            frame[ROWKIND_COLUMN],
            frame[SEQ_COLUMN],
        )

    frame = tagged(left, LEFT, left_key_exprs, left_schema).unionByName(
        tagged(right, RIGHT, right_key_exprs, right_schema)
    )
    return TwoInput(frame, key_columns, left_schema, right_schema)


@overload
def row_of(struct: dict | Row) -> tuple: ...
@overload
def row_of(struct: None) -> None: ...
def row_of(struct: dict | Row | None) -> tuple | None:
    """A struct value as a processor receives it (a dict in field order, or a Row) as a tuple."""
    if struct is None:
        return None
    return tuple(struct.values()) if isinstance(struct, dict) else tuple(struct)


def ordered_changes(rows: Iterable[Row]) -> list[Element]:
    """The rows of one group of one micro-batch as changes, in processing order ``(_seq, _side)``.

    Args:
        rows: rows of the union frame (or of a frame with the same side, row,
            ``_rowkind`` and ``_seq`` columns).

    Returns:
        One :class:`~streamjoin.runtime.processor.Element` per row (``seq``, ``kind``,
        ``row``, ``side``), sorted by ``(seq, side)``.
    """
    changes = []
    for r in rows:
        side = r[SIDE_COLUMN]
        row = row_of(r[LEFT_ROW_COLUMN] if side == LEFT else r[RIGHT_ROW_COLUMN])
        changes.append(Element(r[SEQ_COLUMN], RowKind.from_short(r[ROWKIND_COLUMN]), row, side=side))
    changes.sort(key=lambda c: (c.seq, c.side))
    return changes


def has_null(key: Sequence) -> bool:
    """Whether a grouping key holds a null, i.e. its rows can never match (SQL ``=``)."""
    return any(v is None for v in key)
