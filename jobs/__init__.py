"""Dagster jobs: load the demo topics, and run pipelines as backfills (``availableNow``).

Jobs run in one process (``in_process_executor``) so that the asset and its
checks share one Spark session instead of starting a JVM per step.
"""

from dagster import (
    AssetSelection, OpExecutionContext, RunConfig, ScheduleDefinition, define_asset_job, in_process_executor, job, op,
)

from dagster_project.resources import KafkaResource, TpchResource
from streamjoin.datagen.topics import load_topics

from assets.sql_pipelines import StreamingRunConfig

__all__ = ["lakehouse_job", "orders_current_job", "orders_current_streaming_job", "orders_current_hourly", "load_tpch_topics_job"]

_ORDERS_CURRENT = AssetSelection.assets("orders_current", "orders_current_changelog")

orders_current_job = define_asset_job(
    "orders_current_job",
    selection=_ORDERS_CURRENT,
    executor_def=in_process_executor,
    description="Upsert the `orders` changelog into `orders_current` (availableNow) and run its checks.",
)

lakehouse_job = define_asset_job(
    "lakehouse_job",
    selection=AssetSelection.groups("lakehouse"),
    executor_def=in_process_executor,
    description="Every pipeline of the lakehouse (availableNow), upstream first, with all checks.",
)

orders_current_streaming_job = define_asset_job(
    "orders_current_streaming_job",
    selection=_ORDERS_CURRENT,
    executor_def=in_process_executor,
    config=RunConfig(ops={"orders_current": StreamingRunConfig(available_now=False)}),
    description="Continuous streaming run of `orders_current`; terminate the run to stop the query.",
)

orders_current_hourly = ScheduleDefinition(
    job=orders_current_job,
    cron_schedule="0 * * * *",
    description="Every hour, catch `orders_current` up with the topic (availableNow) and check it.",
)


@op(description="Generate TPC-H with tpchgen-cli and produce the orders/lineitem changelogs, the order and shipment events and the ECB rates to Kafka.")
def load_tpch_topics(context: OpExecutionContext, kafka: KafkaResource, tpch: TpchResource) -> dict:
    counts = load_topics(kafka.servers, tpch.changelog())
    for topic, count in counts.items():
        context.log.info(f"kafka/{topic}: {count} records produced")
    return counts


@job(executor_def=in_process_executor, description="Fill the demo's Kafka topics (orders, lineitem, order_events, shipments, rates).")
def load_tpch_topics_job():
    load_tpch_topics()
