"""Delta table maintenance: ``delta_maintenance``, OPTIMIZE and VACUUM of every pipeline's tables.

A streaming sink commits a few small files per micro-batch, and the upsert writer's MERGE leaves the
files it rewrote behind; readers slow down and storage grows. Each pipeline's sink, ``<sink>_changelog``
and ``<sink>_dead_letters`` tables get Delta's bin-packing compaction
(``DeltaTable.optimize().executeCompaction()``) and then ``vacuum(retention_hours)``, which deletes the
files no version younger than the retention references (default 168 h, Delta's 7 days).

A scheduled job rather than the ``delta.autoOptimize.autoCompact`` table property: Delta OSS 4.x has
auto compaction but no automatic VACUUM, so a job is needed anyway; and auto compaction runs inside the
writing micro-batch, adding its time to every batch's latency, where the job runs when nobody waits.
Each pipeline's op holds the pipeline's concurrency pool (:func:`resources.concurrency_pool`): OPTIMIZE
conflicts with a concurrent MERGE, so it never overlaps a run of that pipeline.
"""

from dagster import (
    Config,
    DefaultScheduleStatus,
    JobDefinition,
    OpDefinition,
    OpExecutionContext,
    ScheduleDefinition,
    job,
    op,
)
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from resources import LakehouseResource, SparkResource, concurrency_pool
from streamjoin.pipeline import Pipeline

__all__ = ["DELTA_RETENTION_HOURS", "delta_maintenance_job", "delta_maintenance_schedule", "maintain_table"]

#: Delta's default ``delta.deletedFileRetentionDuration``: 7 days, in hours.
DELTA_RETENTION_HOURS = 168


class MaintenanceConfig(Config):
    """``retention_hours``: VACUUM keeps files a version of the last N hours references (below 168 Delta refuses
    unless ``spark.databricks.delta.retentionDurationCheck.enabled`` is false)."""

    retention_hours: int = DELTA_RETENTION_HOURS


def maintain_table(
    spark: SparkSession, path: str, retention_hours: int = DELTA_RETENTION_HOURS
) -> dict[str, int] | None:
    """OPTIMIZE (compaction) then VACUUM of the Delta table at ``path``.

    Returns:
        ``{"files_added", "files_removed"}`` of the compaction (counts of data files), or ``None`` when there
        is no Delta table at ``path`` (a pipeline that has not run, no dead letters yet).
    """
    if not DeltaTable.isDeltaTable(spark, path):
        return None
    table = DeltaTable.forPath(spark, path)
    metrics = table.optimize().executeCompaction().collect()[0]["metrics"]
    table.vacuum(retention_hours)
    return {"files_added": metrics["numFilesAdded"], "files_removed": metrics["numFilesRemoved"]}


def _maintenance_op(pipeline: Pipeline) -> OpDefinition:
    @op(
        name=f"{pipeline.name}_maintenance",
        pool=concurrency_pool(pipeline.name),
        description=(
            f"OPTIMIZE and VACUUM `{pipeline.name}`, `{pipeline.name}_changelog` and `{pipeline.name}_dead_letters`."
        ),
    )
    def _op(
        context: OpExecutionContext, config: MaintenanceConfig, spark: SparkResource, lakehouse: LakehouseResource
    ) -> dict:
        home, session = lakehouse.lakehouse(), spark.session()
        sink = pipeline.sink(home)
        done = {}
        for path in (sink.path, sink.changelog_path, pipeline.dead_letter_path(home)):
            done[path] = maintain_table(session, path, config.retention_hours)
            context.log.info(f"{path}: {done[path] or 'no Delta table'}")
        return done

    return _op


def delta_maintenance_job(pipelines: list[Pipeline]) -> JobDefinition:
    """The ``delta_maintenance`` job: one op per pipeline (:func:`maintain_table` on its three tables)."""
    ops = [_maintenance_op(p) for p in pipelines]

    @job(
        name="delta_maintenance",
        description="OPTIMIZE and VACUUM every pipeline's sink, changelog and dead-letter tables.",
    )
    def _job():
        for maintenance in ops:
            maintenance()

    return _job


def delta_maintenance_schedule(maintenance_job: JobDefinition) -> ScheduleDefinition:
    """Daily at 03:00 UTC; stopped by default (start it in the UI's Automation tab)."""
    return ScheduleDefinition(
        name="delta_maintenance_daily",
        job=maintenance_job,
        cron_schedule="0 3 * * *",
        default_status=DefaultScheduleStatus.STOPPED,
        description="Every day, OPTIMIZE and VACUUM the pipelines' Delta tables.",
    )
