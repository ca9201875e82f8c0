"""A source's watermark as Flink computes it: over every row the source reads.

Flink generates a table's watermark in its source (``WATERMARK FOR rowtime AS rowtime - INTERVAL …``), from
every row, before any filter of the query. Spark's ``withWatermark`` is a plan node, and Spark's optimizer
pushes a filter that does not name the rowtime below it (``PushPredicateThroughNonJoin``): the watermark
would then follow only the rows that pass the filter — later than Flink's, and never reached by a control
row that fails the filter (the end-of-input row of :mod:`streamjoin.connectors.end_of_input`, the replay's
sentinels). :func:`with_source_watermark` puts a projection above the watermark in which every other
column is ``CASE WHEN rowtime < 0001-01-01 THEN NULL ELSE column END``: the identity on every row (no
timestamp is earlier; a NULL rowtime takes the ELSE branch), but a filter pushed through it names the
rowtime, so Spark keeps it above the watermark. The cost is one CASE per column and row.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

__all__ = ["with_source_watermark"]

_BEFORE_ANY_TIMESTAMP = dt.datetime(1, 1, 1)


def with_source_watermark(df: DataFrame, rowtime: str, delay_ms: int) -> DataFrame:
    """``df`` with Spark's watermark ``max(rowtime) − delay_ms`` over all its rows, filters above kept above it.

    Args:
        df: a streaming DataFrame with the TIMESTAMP column ``rowtime``.
        rowtime: the event-time column.
        delay_ms: the watermark delay in milliseconds (>= 0).

    Returns:
        ``df``'s columns, in order (other columns become nullable).
    """
    watermarked = df.withWatermark(rowtime, f"{delay_ms} milliseconds")
    rt = F.col(f"`{rowtime}`")
    opaque = rt < F.lit(_BEFORE_ANY_TIMESTAMP)
    return watermarked.select(
        *[
            rt if c == rowtime else F.when(opaque, F.lit(None)).otherwise(F.col(f"`{c}`")).alias(c)
            for c in watermarked.columns
        ]
    )
