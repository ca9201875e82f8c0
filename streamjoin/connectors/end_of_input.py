"""End of input for a bounded run: Flink's final +∞ watermark, on Spark.

A Flink job over bounded sources ends every input with a ``Long.MAX_VALUE`` watermark, which fires every
event-time timer: an interval join pads its unmatched rows, a temporal join emits its buffered probe rows,
an OVER aggregate emits its last rows. Spark has no such signal: its watermark is ``max(rowtime) − delay``
over the rows seen, so a run that reads a finished range stops with those rows still buffered in state.

Here, every source with a rowtime reads, beside its topic, a *control stream*: a folder of Parquet files
under the pipeline's checkpoint (``_checkpoints/<pipeline>/end_of_input/<table>``), empty in a normal
run. :func:`end_input` writes into each folder one row whose rowtime is 9000-01-01 (flagged by
:data:`END_OF_INPUT_COLUMN`) and then an empty file; the row raises Spark's watermark to +∞ (it is dropped
right after ``withWatermark``, before any operator), the empty file makes the micro-batch in which the
operators' timers fire. Costs: one more (file) source per rowtime table in every micro-batch — a listing
of an empty folder — and two micro-batches at the end of an ended run. Afterwards every row is late:
the pipeline's input has ended, and a later run on that checkpoint is refused (:func:`check_not_ended`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StructField, StructType

from streamjoin.errors import ValidationError

__all__ = [
    "END_OF_INPUT_COLUMN",
    "END_OF_INPUT_ROWTIME",
    "check_not_ended",
    "control_stream",
    "drop_control_rows",
    "end_input",
    "has_ended",
]

#: BOOLEAN column, true on the control row that ends an input.
END_OF_INPUT_COLUMN = "_end_of_input"
#: The control row's rowtime: past any real event time, so the watermark it makes fires every timer.
END_OF_INPUT_ROWTIME = dt.datetime(9000, 1, 1)


def _filesystem(spark: SparkSession, folder: str) -> tuple[Any, Any]:
    jvm = spark._jvm
    assert jvm is not None  # a running session's
    path = jvm.org.apache.hadoop.fs.Path(folder)
    return path.getFileSystem(spark._jsc.hadoopConfiguration()), path


def control_stream(spark: SparkSession, folder: str, schema: StructType) -> DataFrame:
    """The control stream of one source: rows of ``schema`` + :data:`END_OF_INPUT_COLUMN`, one file per micro-batch.

    Creates ``folder`` (any Hadoop file system URI) when missing: Spark's file source needs it to exist.
    """
    fs, path = _filesystem(spark, folder)
    fs.mkdirs(path)
    return spark.readStream.schema(_control_schema(schema)).option("maxFilesPerTrigger", 1).parquet(folder)


def _control_schema(schema: StructType) -> StructType:
    """``schema`` + :data:`END_OF_INPUT_COLUMN`, every column nullable (the control row leaves all but the
    rowtime null; Spark's streaming file source reads every column as nullable anyway)."""
    return StructType(
        [StructField(f.name, f.dataType, True) for f in schema.fields]
        + [StructField(END_OF_INPUT_COLUMN, BooleanType(), True)]
    )


def has_ended(spark: SparkSession, folder: str) -> bool:
    """Whether :func:`end_input` wrote into ``folder`` (the input of that source has ended)."""
    fs, path = _filesystem(spark, folder)
    return fs.exists(path) and any(not s.getPath().getName().startswith(("_", ".")) for s in fs.listStatus(path))


def check_not_ended(spark: SparkSession, pipeline: str, folders: dict[str, str]) -> None:
    """Refuse to run a pipeline whose input ended.

    Raises:
        ValidationError: when a source's control folder holds the end-of-input row; the message names the
            pipeline, the table and what to do.
    """
    for table, folder in folders.items():
        if has_ended(spark, folder):
            raise ValidationError(
                f"pipeline '{pipeline}': the input of table '{table}' has ended (a run with end of input, {folder}); "
                "its watermark is +inf and every new row would be late. Reprocess from a new checkpoint "
                "(delete the pipeline's checkpoint and sink) to read it again"
            )


def end_input(spark: SparkSession, folder: str, schema: StructType, rowtime: str) -> None:
    """Write the end-of-input row (``rowtime`` = :data:`END_OF_INPUT_ROWTIME`, other columns null) and an empty batch.

    ``schema`` is the source's changelog schema (as :func:`control_stream` reads it); the two files are
    written one after the other, so the file source reads them in two micro-batches.

    Raises:
        ValidationError: when ``rowtime`` is not a column of ``schema``.
    """
    if rowtime not in schema.names:
        raise ValidationError(f"end of input: rowtime {rowtime!r} is not a column of {schema.names}")
    full = _control_schema(schema)
    row = tuple(
        END_OF_INPUT_ROWTIME if n == rowtime else True if n == END_OF_INPUT_COLUMN else None for n in full.names
    )
    for rows in ([row], []):
        spark.createDataFrame(rows, full).coalesce(1).write.mode("append").parquet(folder)


def drop_control_rows(rows: DataFrame, rowtime: str) -> DataFrame:
    """``rows`` without control rows and without :data:`END_OF_INPUT_COLUMN`; call after ``withWatermark``.

    The filter names the rowtime so that Spark does not push it below the watermark (which must see the row).
    """
    keep = ~F.col(END_OF_INPUT_COLUMN) | F.col(f"`{rowtime}`").isNull()
    return rows.where(keep).drop(END_OF_INPUT_COLUMN)
