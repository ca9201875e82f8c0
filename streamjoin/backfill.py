"""Per-day backfill: recompute days ``first``..``last`` of a day-partitioned pipeline and replace them in Delta.

The pipeline's sink is ``PARTITIONED BY (day)`` with ``day = CAST(<rowtime> AS DATE)``;
:func:`~streamjoin.planner.backfill_margins.backfill_plan` derives from its plan which rowtime window of
each source the days need (the operators' margins) and refuses a plan that needs a full rebuild. Then
:func:`backfill`

1. reads each source from Kafka starting at the record timestamp ``window start - watermark delay``
   (Spark's ``startingTimestamp``, the global form of ``startingOffsetsByTimestamp``; the versioned
   table of a temporal join from its first record) to the end of the topic, keeping the rows whose
   rowtime is in the window (before the watermark). Spark's streaming Kafka source has no ending
   timestamp (``endingOffsetsByTimestamp`` is batch-only), so records after the window are read and
   dropped by the rowtime filter;
2. runs the pipeline's own operators (the planner's translation, either engine) on that input as an
   ``availableNow`` run with end of input (:mod:`streamjoin.connectors.end_of_input`), so every buffered
   row is emitted, into a temporary sink under ``<lakehouse>/_backfill/`` with a fresh checkpoint;
3. replaces the days in the sink with the temporary sink's rows of those days: one Delta write with
   ``replaceWhere`` on the day column (atomic: readers see the old days or the new ones);
4. replaces the backfill changes of those days in ``<sink>_changelog``: the new run's changes of the days,
   tagged ``_batch_id = -1`` (no micro-batch of the stream has a negative id) and ``_source_offsets =
   {"backfill": [first, last], "offsets": …}``, written with ``replaceWhere`` on
   ``day in [first, last] AND _batch_id = -1``. The stream's own changes stay.

Re-running a backfill therefore changes nothing: both writes replace what the previous run of those days
wrote with the same rows (the changelog's ``_processing_time`` aside). A crash between steps 3 and 4 is
repaired by running the backfill again. The Kafka records' timestamps must follow their rowtimes within
the table's watermark delay (Flink's Kafka sink stamps records with their rowtime; so does the demo's
loader). A lookup join reads its Delta table as it is when the backfill runs.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamjoin.connectors.kafka_client import Cluster
from streamjoin.errors import ValidationError
from streamjoin.pipeline import Lakehouse, Pipeline, PipelineRun, run_pipeline
from streamjoin.planner.backfill_margins import BackfillPlan, backfill_plan
from streamjoin.planner.pipelines import SqlPipeline
from streamjoin.sink.delta import BATCH_ID_COLUMN, SOURCE_OFFSETS_COLUMN, DeltaSink, create_sink_tables

__all__ = ["BACKFILL_BATCH_ID", "BackfillResult", "backfill", "check_backfillable"]

#: ``_batch_id`` of the changes a backfill writes into the changelog table.
BACKFILL_BATCH_ID = -1


@dataclass(frozen=True)
class BackfillResult:
    """What a backfill did.

    Args:
        pipeline: the sink's name.
        first, last: the days replaced (inclusive).
        rows: sink rows of those days now.
        changes: changes of those days written to the changelog table.
        windows: source table → the rowtime window read, ``[start, end)`` as ISO strings (start ``None``: from
            the first record).
        run: the recomputation's micro-batches and Kafka records read per topic.
    """

    pipeline: str
    first: dt.date
    last: dt.date
    rows: int
    changes: int
    windows: dict[str, tuple[str | None, str]]
    run: PipelineRun


def check_backfillable(pipeline: SqlPipeline) -> BackfillPlan:
    """The pipeline's :class:`~streamjoin.planner.backfill_margins.BackfillPlan`; call it to refuse early.

    Raises:
        ValidationError / UnsupportedPlanError: as :func:`~streamjoin.planner.backfill_margins.backfill_plan`.
    """
    return backfill_plan(pipeline.statement)


@dataclass(frozen=True)
class _Recompute(Pipeline):
    """The pipeline over windowed sources, into a temporary sink; lookup tables still from the real lakehouse."""

    # Keyword-only, without defaults: after Pipeline's fields, which have them.
    inner: SqlPipeline = field(kw_only=True)
    lookups: Lakehouse = field(kw_only=True)

    def changelog(self, tables: Mapping[str, DataFrame], lakehouse: Lakehouse) -> DataFrame:
        return self.inner.changelog(tables, self.lookups)

    def sink(self, lakehouse: Lakehouse) -> DeltaSink:
        return replace(self.inner.sink(self.lookups), path=lakehouse.table_path(self.name), changelog_path="")


def backfill(
    pipeline: SqlPipeline,
    spark: SparkSession,
    lakehouse: Lakehouse,
    bootstrap_servers: Cluster,
    first: dt.date,
    last: dt.date,
) -> BackfillResult:
    """Recompute days ``first``..``last`` (inclusive, UTC) of ``pipeline`` and replace them in its Delta tables.

    Raises:
        ValidationError: ``last`` before ``first``; a sink not partitioned by one DATE column.
        UnsupportedPlanError: a plan that needs a full rebuild (docs/backfill.md), before anything runs.
        pyspark.errors.StreamingQueryException: when the recomputation fails.
    """
    if last < first:
        raise ValidationError(f"pipeline '{pipeline.name}': backfill range {first}..{last} ends before it starts")
    plan = check_backfillable(pipeline)
    sources = []
    windows: dict[str, tuple[str | None, str]] = {}
    for source in pipeline.sources:
        window = plan.windows[source.name]
        start, end = window.rowtimes(first, last)
        windows[source.name] = (start.isoformat() if start is not None else None, end.isoformat())
        options = dict(source.options)
        if start is not None:
            since = start - dt.timedelta(milliseconds=window.watermark_delay_ms)
            epoch_ms = int(since.replace(tzinfo=dt.UTC).timestamp() * 1000)
            # A partition with no record at or after the timestamp starts at its end, not with an error.
            options |= {"startingTimestamp": str(max(epoch_ms, 0)), "startingOffsetsByTimestampStrategy": "latest"}
        sources.append(replace(source, options=options, rowtime_range=(start, end)))
    work = Lakehouse(lakehouse.table_path(f"_backfill/{pipeline.name}-{uuid.uuid4().hex[:12]}"))
    recompute = _Recompute(
        pipeline.name, sources, pipeline.query, pipeline.primary_key, inner=pipeline, lookups=lakehouse
    )
    try:
        run = run_pipeline(recompute, spark, work, bootstrap_servers, available_now=True, end_of_input=True)
        rows, changes = _replace_days(
            spark, recompute.sink(work), pipeline.sink(lakehouse), plan.day_column, first, last
        )
    finally:
        _delete(spark, work.root)
    return BackfillResult(pipeline.name, first, last, rows, changes, windows, run)


def _replace_days(
    spark: SparkSession, fresh: DeltaSink, sink: DeltaSink, day: str, first: dt.date, last: dt.date
) -> tuple[int, int]:
    days = f"`{day}` >= DATE'{first.isoformat()}' AND `{day}` <= DATE'{last.isoformat()}'"
    rows = spark.read.format("delta").load(fresh.path).where(days)
    create_sink_tables(spark, sink, rows.schema)
    rows.write.format("delta").mode("overwrite").option("replaceWhere", days).save(sink.path)
    tag = json.dumps({"backfill": [first.isoformat(), last.isoformat()]})[:-1]
    changes = (
        spark.read.format("delta")
        .load(fresh.changelog_path)
        .where(days)
        .withColumns(
            {
                BATCH_ID_COLUMN: F.lit(BACKFILL_BATCH_ID).cast("long"),
                SOURCE_OFFSETS_COLUMN: F.concat(
                    F.lit(tag + ', "offsets": '), F.coalesce(F.col(SOURCE_OFFSETS_COLUMN), F.lit("null")), F.lit("}")
                ),
            }
        )
    )
    (
        changes.write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", f"{days} AND {BATCH_ID_COLUMN} = {BACKFILL_BATCH_ID}")
        .save(sink.changelog_path)
    )
    target = spark.read.format("delta")
    return target.load(sink.path).where(days).count(), target.load(sink.changelog_path).where(days).where(
        f"{BATCH_ID_COLUMN} = {BACKFILL_BATCH_ID}"
    ).count()


def _delete(spark: SparkSession, root: str) -> None:
    jvm = spark._jvm
    assert jvm is not None  # a running session's
    path = jvm.org.apache.hadoop.fs.Path(root)
    path.getFileSystem(spark._jsc.hadoopConfiguration()).delete(path, True)
