"""Dagster jobs: load the demo topics; per SQL pipeline a backfill (``availableNow``) and a
continuous streaming job; every pipeline at once (``lakehouse_job``).

Every job runs its steps in one process (the code location's default executor,
``in_process_executor``) so that an asset and its checks share one Spark session.
"""

from dagster import (
    AssetSelection,
    OpExecutionContext,
    ScheduleDefinition,
    define_asset_job,
    job,
    op,
)

from resources import KafkaResource, TpchResource, concurrency_pool
from streamjoin.datagen.topics import load_topics

__all__ = ["hourly_schedule", "lakehouse_job", "load_tpch_topics_job", "pipeline_jobs"]

lakehouse_job = define_asset_job(
    "lakehouse_job",
    selection=AssetSelection.groups("lakehouse"),
    description="Every pipeline of the lakehouse (availableNow), upstream first, with all checks.",
)


def pipeline_jobs(name: str) -> tuple:
    """The two jobs of the SQL pipeline ``name`` (its assets ``name`` and ``name_changelog``, with checks).

    ``<name>_job``: a backfill (``availableNow``): process what the topics hold, then stop.
    ``<name>_streaming_job``: a continuous streaming run, reporting asset observations every ``report_every``
    micro-batches; terminate the Dagster run to stop the query.

    Returns:
        ``(backfill job, streaming job)``, as ``define_asset_job`` gives them.
    """
    selection = AssetSelection.assets(name, f"{name}_changelog")
    backfill = define_asset_job(
        f"{name}_job",
        selection=selection,
        description=f"Catch `{name}` up with its topics (availableNow) and run its checks.",
    )
    streaming = define_asset_job(
        f"{name}_streaming_job",
        selection=selection,
        # The asset's run config (assets.sql_pipelines.StreamingRunConfig), as plain run config.
        config={"ops": {name: {"config": {"available_now": False}}}},
        description=f"Continuous streaming run of `{name}`: its figures are asset observations every `report_every` "
        "micro-batches (run config); terminate the run to stop the query.",
    )
    return backfill, streaming


def hourly_schedule(job) -> ScheduleDefinition:
    """Run a pipeline's backfill job (from :func:`pipeline_jobs`) every hour: catch up with the topics, then check."""
    return ScheduleDefinition(
        name=f"{job.name.removesuffix('_job')}_hourly",
        job=job,
        cron_schedule="0 * * * *",
        description=f"Every hour, run `{job.name}`: catch the table up with its topics (availableNow) and check it.",
    )


@op(
    pool=concurrency_pool("load_tpch_topics"),
    description=(
        "Generate TPC-H with tpchgen-cli and produce the orders/lineitem changelogs, "
        "the order and shipment events and the ECB rates to Kafka."
    ),
)
def load_tpch_topics(context: OpExecutionContext, kafka: KafkaResource, tpch: TpchResource) -> dict:
    counts = load_topics(kafka.connection(), tpch.changelog())
    for topic, count in counts.items():
        context.log.info(f"kafka/{topic}: {count} records produced")
    return counts


@job(description="Fill the demo's Kafka topics (orders, lineitem, order_events, shipments, rates).")
def load_tpch_topics_job():
    load_tpch_topics()
