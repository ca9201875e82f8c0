"""Daily-partitioned Dagster assets for the SQL pipelines whose sink is ``PARTITIONED BY`` a day (docs/backfill.md).

A pipeline that :func:`streamjoin.backfill.check_backfillable` accepts gets, instead of the plain assets of
:func:`assets.sql_pipelines.pipeline_assets`, the same multi-asset (``<sink>``, ``<sink>_changelog``) with a
``DailyPartitionsDefinition`` (UTC days). Its first day is the sink's ``'backfill.start-date'`` option;
without it, 7 days before the code location loads (Kafka's default retention: older records are
usually gone). Materialising a partition, or a range of them (a Dagster backfill runs a range as one run,
``BackfillPolicy.single_run``), runs :func:`streamjoin.backfill.backfill` over those days; a run without a
partition (``<sink>_job``, ``<sink>_streaming_job``, ``lakehouse_job``, the sensors) runs the plain asset's
body: catch-up or continuous. Every other pipeline keeps its plain assets.

Per partitioned pipeline, the job ``<sink>_daily_job`` and the schedule ``<sink>_daily`` (Dagster's
``build_schedule_from_partitioned_job``, stopped by default) materialise the previous day, shortly after
midnight UTC.
"""

import datetime as dt

from dagster import (
    AssetExecutionContext,
    BackfillPolicy,
    DailyPartitionsDefinition,
    DefaultScheduleStatus,
    MaterializeResult,
    MetadataValue,
    ScheduleDefinition,
    build_schedule_from_partitioned_job,
    define_asset_job,
    multi_asset,
)

from assets.sql_pipelines import SqlPipelineDef, StreamingRunConfig, materialize_pipeline, pipeline_assets
from resources import KafkaResource, LakehouseResource, SparkResource, concurrency_pool
from streamjoin.backfill import backfill, check_backfillable
from streamjoin.errors import StreamJoinError, ValidationError

__all__ = ["START_DATE_OPTION", "daily_partitions", "daily_schedule", "sql_pipeline_assets"]

#: The sink option naming the first daily partition (``YYYY-MM-DD``).
START_DATE_OPTION = "backfill.start-date"
_DEFAULT_HISTORY = dt.timedelta(days=7)


def daily_partitions(definition: SqlPipelineDef) -> DailyPartitionsDefinition | None:
    """The pipeline's daily partitions, or ``None`` when it cannot be backfilled per day.

    Raises:
        ValidationError: a ``'backfill.start-date'`` that is not ``YYYY-MM-DD``.
    """
    pipeline = definition.pipeline
    if not pipeline.sink_table.partition_keys:
        return None
    try:
        check_backfillable(pipeline)
    except StreamJoinError:
        return None  # partitioned, but only a full rebuild is exact: plain assets
    start = pipeline.sink_table.options.get(START_DATE_OPTION)
    try:
        first = dt.date.fromisoformat(start) if start else dt.datetime.now(dt.UTC).date() - _DEFAULT_HISTORY
    except ValueError:
        raise ValidationError(
            f"{definition.path}: sink '{pipeline.name}': '{START_DATE_OPTION}' must be YYYY-MM-DD, got {start!r}"
        ) from None
    return DailyPartitionsDefinition(start_date=first.isoformat(), timezone="UTC")


def sql_pipeline_assets(definition: SqlPipelineDef):
    """The pipeline's multi-asset: daily-partitioned when the pipeline can be backfilled per day, else
    :func:`~assets.sql_pipelines.pipeline_assets`'."""
    plain = pipeline_assets(definition)
    partitions = daily_partitions(definition)
    if partitions is None:
        return plain
    pipeline = definition.pipeline
    specs = [spec.replace_attributes(partitions_def=partitions) for spec in plain.specs]

    @multi_asset(
        name=pipeline.name,
        specs=specs,
        pool=concurrency_pool(pipeline.name),
        backfill_policy=BackfillPolicy.single_run(),
    )
    def _assets(
        context: AssetExecutionContext,
        config: StreamingRunConfig,
        spark: SparkResource,
        kafka: KafkaResource,
        lakehouse: LakehouseResource,
    ):
        if not (context.has_partition_key or context.has_partition_key_range):
            # Dagster gives a partitioned job's config (PartitionedConfig) to partition runs only: the streaming
            # job's `available_now: false` does not reach a run without a partition, so its name says it.
            if context.job_name == f"{pipeline.name}_streaming_job":
                config = StreamingRunConfig(available_now=False)
            yield from materialize_pipeline(pipeline, context, config, spark, kafka, lakehouse)
            return
        keys = context.partition_key_range
        first, last = dt.date.fromisoformat(keys.start), dt.date.fromisoformat(keys.end)
        home = lakehouse.lakehouse()
        result = backfill(pipeline, spark.session(), home, kafka.connection(), first, last)
        context.log.info(
            f"days {first}..{last} replaced: {result.rows} rows, {result.changes} changes, "
            f"records read {result.run.records_read}, rowtime windows {result.windows}"
        )
        sink = pipeline.sink(home)
        yield MaterializeResult(
            asset_key=pipeline.name,
            metadata={
                "path": MetadataValue.path(sink.path),
                "days": f"{first}..{last}",
                "rows": result.rows,
                "records_read": MetadataValue.json(result.run.records_read),
                "rowtime_windows": MetadataValue.json(result.windows),
            },
        )
        yield MaterializeResult(
            asset_key=f"{pipeline.name}_changelog",
            metadata={"path": MetadataValue.path(sink.changelog_path), "changes": result.changes},
        )

    return _assets


def daily_schedule(
    definition: SqlPipelineDef, *, hour_of_day: int = 0, minute_of_hour: int = 0
) -> ScheduleDefinition | None:
    """``<sink>_daily``: materialise the previous day's partition of a partitioned pipeline (its job
    ``<sink>_daily_job``) at ``hour_of_day:minute_of_hour`` UTC (00:00 by default), stopped by default;
    ``None`` for a pipeline without daily partitions."""
    partitions = daily_partitions(definition)
    if partitions is None:
        return None
    name = definition.pipeline.name
    job = define_asset_job(
        f"{name}_daily_job",
        selection=[name, f"{name}_changelog"],
        partitions_def=partitions,
        description=f"Recompute one day (a partition) of `{name}` and replace it in Delta.",
    )
    return build_schedule_from_partitioned_job(
        job,
        name=f"{name}_daily",
        default_status=DefaultScheduleStatus.STOPPED,
        hour_of_day=hour_of_day,
        minute_of_hour=minute_of_hour,
        description=f"Every day at {hour_of_day:02d}:{minute_of_hour:02d} UTC, backfill the previous day of `{name}`.",
    )
