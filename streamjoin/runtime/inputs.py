"""Input checks and preparation shared by the single-input operators (OVER, group aggregate, deduplication).

The operators run on :class:`~streamjoin.runtime.processor.KeyedProcessor`;
this module holds what they do to their input DataFrame before it: check its
columns, switch off Spark's late-row filter, keep its shuffle its own, order a
key's rows, check RowKinds and order values.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, ChangelogError, RowKind
from streamjoin.errors import ValidationError

__all__ = [
    "changelog_columns",
    "check_insert",
    "check_upsert",
    "output_schema",
    "require_columns",
    "require_order_value",
    "rows_in_order",
    "unshared_exchange",
    "without_watermark_columns",
]

#: Metadata key Spark puts on the column given to ``withWatermark``.
_WATERMARK_METADATA = "spark.watermarkDelayMs"


def require_columns(df: DataFrame, columns: Iterable[str], what: str) -> None:
    """Raise ValidationError naming ``what`` when ``df`` lacks one of ``columns``."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValidationError(f"{what}: no column {missing} in {df.columns}")


def check_state_ttl(state_ttl_ms, what: str) -> None:
    """Raise ValidationError naming ``what`` unless ``state_ttl_ms`` is ``None`` or a positive int (ms)."""
    if state_ttl_ms is not None and (not isinstance(state_ttl_ms, int) or state_ttl_ms <= 0):
        raise ValidationError(
            f"{what}: state_ttl_ms must be a positive number of milliseconds or None, got {state_ttl_ms!r}"
        )


def changelog_columns(df: DataFrame, what: str) -> list[str]:
    """The data columns of a changelog DataFrame (all but ``_rowkind`` and ``_seq``).

    Raises:
        ValidationError: when ``df`` is not a changelog DataFrame.
    """
    require_columns(df, (ROWKIND_COLUMN, SEQ_COLUMN), f"{what} takes a changelog DataFrame")
    return [c for c in df.columns if c not in (ROWKIND_COLUMN, SEQ_COLUMN)]


def without_watermark_columns(df: DataFrame) -> DataFrame:
    """``df`` with no column marked as Spark's event-time watermark column.

    Before an ``EventTime`` ``transformWithState`` Spark drops every row whose
    watermark column is at or before the previous micro-batch's watermark.
    Our operators apply Flink's own late rule instead, so they must see every
    row; without the marker Spark filters nothing, while the query's watermark
    (a property of the plan, not of the column) still advances and still drives
    the operator's timers.
    """
    columns = [
        F.col(f"`{f.name}`").alias(f.name, metadata={}) if _WATERMARK_METADATA in f.metadata else F.col(f"`{f.name}`")
        for f in df.schema.fields
    ]
    return df.select(*columns)


_operator_instances = itertools.count()


def unshared_exchange(df: DataFrame) -> DataFrame:
    """``df`` with a column holding a number unique to this call, so its shuffle is not shared.

    Spark reuses identical shuffles (``ReusedExchange``) — e.g. two OVER
    windows over one input in one query — and its watermark propagation then
    finds no watermark under the second event-time operator: that operator
    runs with watermark 0 and its timers never fire (Spark 4.2). A literal that
    differs per operator keeps each shuffle its own; the processors ignore it.
    """
    return df.withColumn("_operator_instance", F.lit(next(_operator_instances)))


def output_schema(fields: Sequence[StructField]) -> StructType:
    """``fields`` plus ``_rowkind`` (STRING) and ``_seq`` (BINARY).

    ``_seq`` is a path: :func:`~streamjoin.runtime.processor.child_seq`.
    """
    return StructType(
        list(fields) + [StructField(ROWKIND_COLUMN, StringType(), False), StructField(SEQ_COLUMN, BinaryType(), False)]
    )


def rows_in_order(rows: Iterable[Row]) -> list[Row]:
    """A key's input rows of one micro-batch in changelog order (by ``_seq``); Spark gives no order."""
    return sorted(rows, key=lambda r: r[SEQ_COLUMN])


def check_insert(row: Row, operator: str) -> None:
    """Raise ChangelogError unless ``row`` is an INSERT (``+I``)."""
    if row[ROWKIND_COLUMN] != RowKind.INSERT.short:
        raise ChangelogError(
            f"{operator} consumes an insert-only changelog; got {row[ROWKIND_COLUMN]} at {SEQ_COLUMN}={row[SEQ_COLUMN]}"
        )


def check_upsert(row: Row, operator: str) -> None:
    """Raise ChangelogError unless ``row`` is an INSERT or UPDATE_AFTER (an upsert stream without retractions)."""
    if row[ROWKIND_COLUMN] not in (RowKind.INSERT.short, RowKind.UPDATE_AFTER.short):
        raise ChangelogError(
            f"{operator} consumes +I and +U only here (an upsert stream); got {row[ROWKIND_COLUMN]} at "
            f"{SEQ_COLUMN}={row[SEQ_COLUMN]}"
        )


def require_order_value(value, row: Row, operator: str, column: str):
    """``value`` (a row's rowtime / ORDER BY value), or ChangelogError when it is null.

    Flink refuses a null rowtime too ("RowTime field should not be null").
    """
    if value is None:
        raise ChangelogError(f"{operator}: {column} is null at {SEQ_COLUMN}={row[SEQ_COLUMN]}; it must not be")
    return value
