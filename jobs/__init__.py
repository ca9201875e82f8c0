"""Dagster jobs: load the demo topics, and run pipelines as backfills (``availableNow``).

Jobs run in one process (``in_process_executor``) so that the asset and its
checks share one Spark session instead of starting a JVM per step.
"""

from dagster import AssetSelection, OpExecutionContext, define_asset_job, in_process_executor, job, op

from assets.kafka_topics import TOPIC_SPECS
from dagster_project.resources import KafkaResource, TpchResource
from streamjoin.datagen.topics import load_topics

__all__ = ["orders_current_job", "load_tpch_topics_job"]

orders_current_job = define_asset_job(
    "orders_current_job",
    selection=AssetSelection.assets("orders_current", "orders_current_changelog"),
    executor_def=in_process_executor,
    description="Upsert the `orders` changelog into `orders_current` (availableNow) and run its checks.",
)


@op(description="Generate TPC-H with tpchgen-cli and produce the orders/lineitem changelogs and the ECB rates to Kafka.")
def load_tpch_topics(context: OpExecutionContext, kafka: KafkaResource, tpch: TpchResource) -> dict:
    counts = load_topics(kafka.servers, tpch.changelog())
    for spec in TOPIC_SPECS:
        context.log.info(f"{spec.key.to_user_string()}: {counts.get(spec.key.path[-1], 0)} records produced")
    return counts


@job(executor_def=in_process_executor, description="Fill the demo's Kafka topics (orders, lineitem, rates).")
def load_tpch_topics_job():
    load_tpch_topics()
