"""TPC-H ``orders`` and ``lineitem`` as insert-only changelog streams of equal micro-batches, for benchmarks.

Each table is cut, in event-time order, into ``batches`` equal slices; slice
*i* of both tables forms micro-batch *i*. The same files feed our operators
and Spark's native ones, so the figures of one run compare like with like.

:func:`slice_stream` writes any rows cut into slices (one Parquet file per
micro-batch) for streams the TPC-H tables do not give as such (orders with a
currency column, the ECB rates aligned with the orders' slices).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from streamjoin.config import local_dir
from streamjoin.connectors.changelog_files import read_changelog_files, write_changelog_batches
from streamjoin.datagen.topics import LINEITEM, ORDERS
from streamjoin.datagen.tpch import TpchChangelog, generate_tpch


def tpch_changelog(scale_factor: float) -> TpchChangelog:
    """The insert-only TPC-H changelog (no updates, no deletes) of ``scale_factor``, generated once under ``.local/tpch``.

    ``.orders`` / ``.lineitems`` are the rows (dicts) in event-time order; ``.data_dir`` holds the tables' Parquet files.
    """
    return TpchChangelog(generate_tpch(local_dir("tpch"), scale_factor), update_fraction=0, delete_fraction=0)


def equal_slices(rows: Sequence, batches: int) -> list[list]:
    """``rows`` cut, in their order, into ``batches`` slices of equal size (the last may be shorter or empty)."""
    size = -(-len(rows) // batches)
    return [list(rows[i * size : (i + 1) * size]) for i in range(batches)]


def slice_stream(
    spark: SparkSession,
    folder: Path,
    schema: StructType,
    slices: Sequence[Sequence[dict]],
    *,
    rowtime: str | None,
    watermark_delay_ms: int,
    first_seq: int = 0,
) -> Callable[[], DataFrame]:
    """Write ``slices`` (rows as dicts with ``schema``'s columns) as ``+I`` changes, one file per micro-batch.

    Returns:
        A builder of fresh streams over the files: ``schema`` + ``_rowkind`` + ``_seq``, watermarked on ``rowtime``.
    """
    batches = [[("+I", tuple(r[c] for c in schema.names)) for r in rows] for rows in slices]
    write_changelog_batches(folder, schema, batches, first_seq=first_seq)
    return lambda: read_changelog_files(spark, folder, schema, rowtime=rowtime, watermark_delay_ms=watermark_delay_ms)


def tpch_streams(
    spark: SparkSession, scale_factor: float, batches: int, workdir: Path, *, tpch: TpchChangelog | None = None
) -> dict[str, Callable[[], DataFrame]]:
    """Write the slices of ``orders`` and ``lineitem`` once; return a builder of fresh streams per table.

    Args:
        tpch: the changelog of :func:`tpch_changelog`, when the caller already has it.

    Returns:
        ``{"orders": build, "lineitem": build}``; each ``build()`` returns a new stream with the
        table's columns + ``_rowkind`` + ``_seq``, and the table's rowtime watermark.
    """
    tpch = tpch or tpch_changelog(scale_factor)
    builders = {}
    for source, rows in ((ORDERS, tpch.orders), (LINEITEM, tpch.lineitems)):
        builders[source.name] = slice_stream(
            spark, workdir / source.name, source.schema, equal_slices(rows, batches),
            rowtime=source.rowtime, watermark_delay_ms=source.watermark_delay_ms,
        )
    return builders
