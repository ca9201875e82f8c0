"""A changelog source that feeds exact micro-batches from Parquet files.

Used to replay test cases (the ``flink-cases`` format) and property tests
through real Spark streaming queries: micro-batch *i* of every source holds
exactly the rows given for it, because each batch is one Parquet file and the
stream reads one file per trigger. Sources of one query must be given the same
number of batches (an empty batch is an empty file) so that they stay in step.

The stream is the operators jar's ``streamjoin.replay.ChangelogBatchSource``
(``jvm/operators``) where the session has the jar: it lists the folder only
when it has served every file it knows and reads one file per micro-batch on
the driver, where Spark's file source lists the folder, writes its metadata log
and plans a Parquet scan every trigger (bench/RESULTS.md, "Replay source").
Without the jar (Spark Connect, no ``make setup``) it is Spark's Parquet file
source with ``maxFilesPerTrigger`` 1: the same micro-batches, more slowly.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from py4j.java_gateway import JavaClass
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, StructType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind
from streamjoin.connectors.watermark import with_source_watermark
from streamjoin.errors import ValidationError

__all__ = [
    "BATCH_SOURCE",
    "changelog_file_stream",
    "changelog_schema",
    "has_batch_source",
    "read_changelog_files",
    "write_changelog_batches",
]

#: The operators jar's one-file-per-micro-batch source (``jvm/operators``, ``streamjoin.replay``).
BATCH_SOURCE = "streamjoin.replay.ChangelogBatchSource"


def changelog_schema(schema: StructType) -> StructType:
    """``schema`` plus the changelog columns ``_rowkind`` (STRING) and ``_seq`` (LONG)."""
    return StructType(
        list(schema.fields)
        + [StructField(ROWKIND_COLUMN, StringType(), False), StructField(SEQ_COLUMN, LongType(), False)]
    )


def write_changelog_batches(
    directory: Path,
    schema: StructType,
    batches: Sequence[Sequence[tuple[RowKind | str, tuple]]],
    *,
    first_seq: int = 0,
) -> None:
    """Write ``batches`` as one Parquet file per micro-batch into ``directory``.

    Args:
        directory: an empty or missing folder.
        schema: the table's columns (without changelog columns).
        batches: for each micro-batch, its ``(RowKind or short string, values)`` changes in order.
        first_seq: ``_seq`` of the first change; later changes count up across batches.

    Raises:
        ValidationError: when ``directory`` already holds files, or a row does not fit ``schema``.
        ChangelogError: for an unknown RowKind short string.
    """
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.iterdir()):
        raise ValidationError(f"{directory} is not empty; a changelog file stream needs a folder of its own")
    full = changelog_schema(schema)
    # Naive datetimes are UTC, the session time zone (streamjoin.session).
    arrow_schema = to_arrow_schema(full, timezone="UTC")
    seq = first_seq
    for index, batch in enumerate(batches):
        records = []
        for kind, values in batch:
            short = kind.short if isinstance(kind, RowKind) else RowKind.from_short(kind).short
            if len(values) != len(schema.fields):
                raise ValidationError(
                    f"row {values!r} has {len(values)} values; schema has {len(schema.fields)} columns"
                )
            records.append(dict(zip(full.names, (*values, short, seq))))
            seq += 1
        path = directory / f"batch-{index:06d}.parquet"
        pq.write_table(pa.Table.from_pylist(records, schema=arrow_schema), path)
        # The file source orders new files by modification time; make it the batch order.
        os.utime(path, (1_000_000 + index, 1_000_000 + index))


def read_changelog_files(
    spark: SparkSession, directory: Path, schema: StructType, *, rowtime: str | None = None, watermark_delay_ms: int = 0
) -> DataFrame:
    """A stream over the files of :func:`write_changelog_batches`, one file per micro-batch.

    Args:
        rowtime: event-time column; when given, the stream carries a watermark
            of ``max(rowtime) - watermark_delay_ms`` over all its rows
            (:func:`~streamjoin.connectors.watermark.with_source_watermark`).
        watermark_delay_ms: watermark delay in milliseconds.

    Files may be added to ``directory`` while the stream runs (each with one
    rename, in name order); a query restarted from its checkpoint goes on with
    the first file it had not read. The source is :data:`BATCH_SOURCE` when
    :func:`has_batch_source`, else Spark's Parquet file source.

    Returns:
        A streaming DataFrame with ``schema`` + ``_rowkind`` + ``_seq``.
    """
    reader = spark.readStream.schema(changelog_schema(schema))
    if has_batch_source(spark):
        stream = reader.format(BATCH_SOURCE).load(str(directory))
    else:
        stream = reader.option("maxFilesPerTrigger", 1).parquet(str(directory))
    if rowtime is not None:
        stream = with_source_watermark(stream, rowtime, watermark_delay_ms)
    return stream


def has_batch_source(spark: SparkSession) -> bool:
    """Whether ``spark`` can load :data:`BATCH_SOURCE`: a classic session with the operators jar on its classpath."""
    jvm = getattr(spark, "_jvm", None)  # a Spark Connect session has no JVM here
    # py4j names a class it cannot load a JavaPackage, not an error.
    return jvm is not None and isinstance(jvm.streamjoin.replay.ChangelogBatchSource, JavaClass)


def changelog_file_stream(
    spark: SparkSession,
    directory: Path,
    schema: StructType,
    batches: Sequence[Sequence[tuple[RowKind | str, tuple]]],
    *,
    rowtime: str | None = None,
    watermark_delay_ms: int = 0,
    first_seq: int = 0,
) -> DataFrame:
    """Write ``batches`` (:func:`write_changelog_batches`); the stream reading them (:func:`read_changelog_files`).

    ``_seq`` counts from ``first_seq`` across batches, so it is also a global
    arrival index when callers number several sources from one counter.
    """
    write_changelog_batches(directory, schema, batches, first_seq=first_seq)
    return read_changelog_files(spark, directory, schema, rowtime=rowtime, watermark_delay_ms=watermark_delay_ms)
