"""What the operators over windowed rows share (docs/semantics.md §11): their prepared input and its elements.

The window aggregate and the window Top-N read rows that carry their window (a window table function's
``window_start``, ``window_end``); both run per key with one event-time timer per window at its end − 1 ms.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind
from streamjoin.runtime.group_aggregate.operator import _as_row_value
from streamjoin.runtime.inputs import (
    check_insert,
    require_order_value,
    rows_in_order,
    unshared_exchange,
    without_watermark_columns,
)
from streamjoin.runtime.processor import Element

__all__ = ["WINDOW_END_MS", "window_elements", "windowed_input"]

#: Hidden input column: the row's window end in epoch milliseconds (LONG).
WINDOW_END_MS = "_window_end_ms"
#: The constant key of an operator without grouping or partition columns: one key, as Flink runs it with
#: parallelism 1.
_ONE_KEY = "_window_key"


def windowed_input(
    df: DataFrame, columns: Sequence[str], window_end: str, watermark_column: str | None, keys: Sequence[str]
) -> tuple[DataFrame, list[str]]:
    """``df``'s ``columns`` (+ the watermark column, ``_rowkind``, ``_seq``, :data:`WINDOW_END_MS`) in its own
    shuffle, without Spark's late-row filter, and the keys to group it by (a constant one when ``keys`` is
    empty)."""
    hidden = [watermark_column] if watermark_column else []
    prepared = unshared_exchange(
        without_watermark_columns(df.select(*columns, *hidden, ROWKIND_COLUMN, SEQ_COLUMN))
    ).withColumn(WINDOW_END_MS, F.unix_millis(F.col(window_end)))
    if not keys:
        return prepared.withColumn(_ONE_KEY, F.lit(0)), [_ONE_KEY]
    return prepared, list(keys)


def window_elements(
    rows: Iterable[Row],
    columns: Sequence[str],
    timestamps: set[str],
    window_end: str,
    watermark_column: str | None,
    operator: str,
    *,
    insert_only: bool,
) -> Iterator[Element]:
    """A key's rows of one micro-batch as elements in changelog order: ``columns``' values (TIMESTAMPs as naive
    datetimes), the window end (ms) as the element's time, the row's watermark when it carries one.

    Raises:
        ChangelogError: a row without a window end, or, with ``insert_only``, a row that is not ``+I``.
    """
    for row in rows_in_order(rows):
        if insert_only:
            check_insert(row, operator)
        values = tuple(_as_row_value(row[c]) if c in timestamps else row[c] for c in columns)
        yield Element(
            seq=row[SEQ_COLUMN],
            kind=RowKind.from_short(row[ROWKIND_COLUMN]),
            row=values,
            time=require_order_value(row[WINDOW_END_MS], row, operator, window_end),
            watermark=None if watermark_column is None else row[watermark_column],
        )
