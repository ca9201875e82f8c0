"""Daily partitions of the day-partitioned SQL pipelines in Dagster: a partition's materialisation runs the
day's backfill (a real Dagster run on the test broker, Spark and Delta), the daily schedule asks for the previous
day."""

import datetime as dt

import pytest
from dagster import AssetKey, DailyPartitionsDefinition, DefaultScheduleStatus, build_schedule_context, materialize
from pyspark.sql import functions as F

from assets.partitioned_pipelines import daily_schedule, sql_pipeline_assets
from assets.sql_pipelines import load_sql_pipelines
from resources import KafkaResource, LakehouseResource, SparkResource

PIPELINE = "orders_shipped_fast"


def _definition(name):
    return next(d for d in load_sql_pipelines() if d.pipeline.name == name)


def test_only_day_partitioned_pipelines_get_daily_partitions_from_their_start_date():
    from dagster_project.definitions import defs

    graph = defs.resolve_asset_graph()
    partitions = graph.get(AssetKey(PIPELINE)).partitions_def
    assert isinstance(partitions, DailyPartitionsDefinition) and partitions.start.date() == dt.date(2002, 1, 1)
    assert graph.get(AssetKey(f"{PIPELINE}_changelog")).partitions_def == partitions
    assert graph.get(AssetKey("orders_in_eur")).partitions_def is None  # not partitioned: unchanged
    assert defs.resolve_job_def(f"{PIPELINE}_daily_job").partitions_def == partitions


def test_the_daily_schedule_is_stopped_by_default_and_asks_for_the_previous_day():
    schedule = daily_schedule(_definition(PIPELINE))
    assert daily_schedule(_definition("orders_in_eur")) is None
    assert schedule.name == f"{PIPELINE}_daily" and schedule.default_status == DefaultScheduleStatus.STOPPED
    tick = dt.datetime(2024, 3, 5, 0, 5, tzinfo=dt.UTC)
    [request] = schedule.evaluate_tick(build_schedule_context(scheduled_execution_time=tick)).run_requests
    assert request.partition_key == "2024-03-04"


@pytest.mark.e2e
def test_materialising_a_partition_replaces_that_day(spark, kafka_bootstrap, demo_topics, tpch, tmp_path):
    placed = sorted(e["event_time"].date() for e in tpch.order_events if e["op"] == "c")
    day = placed[len(placed) // 2]
    lake = tmp_path / "lake"
    result = materialize(
        [sql_pipeline_assets(_definition(PIPELINE))],
        partition_key=day.isoformat(),
        resources={
            "spark": SparkResource(master=None),
            "kafka": KafkaResource(bootstrap_servers=kafka_bootstrap),
            "lakehouse": LakehouseResource(root=str(lake)),
        },
    )
    assert result.success
    table = spark.read.format("delta").load(str(lake / PIPELINE))
    assert table.count() == table.where(F.col("o_orderday") == F.lit(day)).count() > 0
    [materialization] = [
        m for m in result.asset_materializations_for_node(PIPELINE) if m.asset_key == AssetKey(PIPELINE)
    ]
    assert materialization.partition == day.isoformat() and materialization.metadata["rows"].value == table.count()
