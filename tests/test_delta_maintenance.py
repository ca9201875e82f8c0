"""The ``delta_maintenance`` job on small real Delta tables: compaction to one file, VACUUM of the rest, rows
unchanged."""

from dagster import DefaultScheduleStatus

from assets.sql_pipelines import load_sql_pipelines
from jobs.maintenance import delta_maintenance_job, delta_maintenance_schedule
from resources import LakehouseResource, SparkResource
from streamjoin.pipeline import Lakehouse


def _parquet_files(path) -> int:
    return sum(1 for _ in path.glob("*.parquet"))


def test_the_job_compacts_and_vacuums_each_pipelines_tables(spark, tmp_path):
    [pipeline] = [d.pipeline for d in load_sql_pipelines() if d.pipeline.name == "orders_current"]
    home = Lakehouse(str(tmp_path))
    sink = pipeline.sink(home)
    for path in (sink.path, sink.changelog_path):  # five small files each, in one commit; no dead-letter table
        spark.range(50).repartition(5).write.format("delta").save(path)
    assert _parquet_files(tmp_path / "orders_current") == 5
    job = delta_maintenance_job([pipeline])
    resources = {"spark": SparkResource(), "lakehouse": LakehouseResource(root=str(tmp_path))}

    kept = job.execute_in_process(resources=resources)  # Delta's 7-day retention: the compacted files stay
    assert kept.success
    done = kept.output_for_node("orders_current_maintenance")
    assert done == {
        sink.path: {"files_added": 1, "files_removed": 5},
        sink.changelog_path: {"files_added": 1, "files_removed": 5},
        pipeline.dead_letter_path(home): None,
    }
    assert _parquet_files(tmp_path / "orders_current") == 6
    assert len(spark.read.format("delta").load(sink.path).inputFiles()) == 1

    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        vacuumed = job.execute_in_process(
            resources=resources, run_config={"ops": {"orders_current_maintenance": {"config": {"retention_hours": 0}}}}
        )
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert vacuumed.success
    assert (
        _parquet_files(tmp_path / "orders_current") == 1 and _parquet_files(tmp_path / "orders_current_changelog") == 1
    )
    assert sorted(r.id for r in spark.read.format("delta").load(sink.path).collect()) == list(range(50))


def test_the_schedule_is_daily_and_stopped_by_default():
    from dagster_project.definitions import defs

    schedule = defs.get_schedule_def("delta_maintenance_daily")
    assert schedule.default_status == DefaultScheduleStatus.STOPPED and schedule.cron_schedule == "0 3 * * *"
    assert schedule.job_name == "delta_maintenance"
    assert {n.name for n in defs.get_job_def("delta_maintenance").nodes} == {
        f"{d.pipeline.name}_maintenance" for d in load_sql_pipelines()
    }
    assert delta_maintenance_schedule(defs.get_job_def("delta_maintenance")).name == "delta_maintenance_daily"
