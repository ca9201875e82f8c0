"""Dagster jobs: load the demo topics; per SQL pipeline a backfill (``availableNow``) and a
continuous streaming job; every pipeline at once (``lakehouse_job``).

Every job runs its steps in one process (the code location's default executor,
``in_process_executor``) so that an asset and its checks share one Spark session.

Terminating a continuous run (the UI's **Terminate**) sends its run worker SIGINT; the pipeline asset
takes it as a request to stop its streaming queries between micro-batches
(:class:`streamjoin.progress.StopOnInterrupt`), reports its last figures and succeeds. Dagster has no
*canceled* step, and would go on to the asset's checks and end the run *Success*;
:func:`end_terminated_run`, a hook of the streaming jobs, ends it *Canceled* after that step instead,
without the interrupt's trace that Dagster otherwise records on the step (a failure) and on the run.
"""

from dagster import (
    AssetSelection,
    DagsterExecutionInterruptedError,
    DagsterRunStatus,
    HookContext,
    OpExecutionContext,
    ScheduleDefinition,
    define_asset_job,
    job,
    op,
    success_hook,
)

from resources import KafkaResource, TpchResource, concurrency_pool
from streamjoin.datagen.topics import load_topics

__all__ = [
    "TERMINATED_MESSAGE",
    "end_terminated_run",
    "hourly_schedule",
    "lakehouse_job",
    "load_tpch_topics_job",
    "pipeline_jobs",
]

#: The message of a terminated continuous run's ``RUN_CANCELED`` event.
TERMINATED_MESSAGE = (
    "Run terminated: step {step} stopped cleanly and reported its figures; the steps after it did not run."
)


@success_hook
def end_terminated_run(context: HookContext) -> None:
    """After a step that succeeds while its run is being terminated: end the run canceled, before any further step.

    Reported canceled first: Dagster then ends an interrupted run without another event (an interrupt while it is
    *canceling* puts the interrupt's trace on the run's ``RUN_CANCELED``); an interrupt raised here, between steps,
    fails no step.
    """
    run = context.instance.get_run_by_id(context.run_id)
    if run is None or run.status not in {DagsterRunStatus.CANCELING, DagsterRunStatus.CANCELED}:
        return
    if run.status == DagsterRunStatus.CANCELING:
        context.instance.report_run_canceled(run, message=TERMINATED_MESSAGE.format(step=context.step_key))
    raise DagsterExecutionInterruptedError(f"run terminated after step {context.step_key}")


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
        hooks={end_terminated_run},
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
