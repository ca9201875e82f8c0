"""TPC-H ``orders`` and ``lineitem`` as insert-only changelog streams of equal micro-batches, for benchmarks.

Each table is cut, in event-time order, into ``batches`` equal slices; slice
*i* of both tables forms micro-batch *i*. The same files feed our operators
and Spark's native ones, so the figures of one run compare like with like.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from streamjoin.config import local_dir
from streamjoin.connectors.changelog_files import read_changelog_files, write_changelog_batches
from streamjoin.datagen.topics import LINEITEM, ORDERS
from streamjoin.datagen.tpch import TpchChangelog, generate_tpch


def _slices(rows: list[tuple], batches: int) -> list[list[tuple[str, tuple]]]:
    size = -(-len(rows) // batches)
    return [[("+I", r) for r in rows[i * size : (i + 1) * size]] for i in range(batches)]


def tpch_streams(spark: SparkSession, scale_factor: float, batches: int, workdir: Path) -> dict[str, Callable[[], DataFrame]]:
    """Write the slices of ``orders`` and ``lineitem`` once; return a builder of fresh streams per table.

    Returns:
        ``{"orders": build, "lineitem": build}``; each ``build()`` returns a new stream with the
        table's columns + ``_rowkind`` + ``_seq``, and the table's rowtime watermark.
    """
    tpch = TpchChangelog(generate_tpch(local_dir("tpch"), scale_factor), update_fraction=0, delete_fraction=0)
    builders = {}
    for source, rows in ((ORDERS, tpch.orders), (LINEITEM, tpch.lineitems)):
        folder = workdir / source.name
        values = [tuple(r[c] for c in source.schema.names) for r in rows]
        write_changelog_batches(folder, source.schema, _slices(values, batches))
        builders[source.name] = lambda s=source, f=folder: read_changelog_files(
            spark, f, s.schema, rowtime=s.rowtime, watermark_delay_ms=s.watermark_delay_ms
        )
    return builders
