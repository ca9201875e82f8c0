"""Sensors and freshness checks of the SQL pipelines, on the default set-up (the local Kafka service) or a cluster.

- ``<pipeline>_kafka_lag`` (:func:`kafka_lag_sensor`): launches the pipeline's catch-up job
  ``<pipeline>_job`` (``availableNow``) when its Kafka lag reaches a threshold. The lag is the
  topics' end offsets minus the offsets of the pipeline's checkpoint
  (:mod:`streamjoin.connectors.kafka_lag`); no consumer group exists to ask.
- ``pipeline_run_failures`` (:data:`pipeline_run_failures`, Dagster's ``run_failure_sensor``):
  reports each failed run with the error of each failed step.
- a freshness check per sink table (:func:`freshness_checks`, Dagster's
  ``build_last_update_freshness_checks``) and the sensor that evaluates them.

The lag sensors and the freshness sensor start stopped (turn them on in the UI, Automation); the
run-failure sensor runs from the start.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence

from dagster import (
    AssetChecksDefinition,
    DefaultSensorStatus,
    RunFailureSensorContext,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    build_last_update_freshness_checks,
    build_sensor_for_freshness_checks,
    run_failure_sensor,
    sensor,
)

from resources import KafkaResource, LakehouseResource, SparkResource
from streamjoin.connectors.kafka_lag import end_offsets, kafka_lag

__all__ = [
    "DEFAULT_FRESHNESS",
    "DEFAULT_LAG_THRESHOLD",
    "failure_report",
    "freshness_checks",
    "kafka_lag_sensor",
    "pipeline_run_failures",
]

#: Records behind at which a lag sensor launches the catch-up job: one catch-up run per thousand records at most.
DEFAULT_LAG_THRESHOLD = 1000

#: How old a sink table's last materialization may be before its freshness check warns.
DEFAULT_FRESHNESS = datetime.timedelta(days=1)


def kafka_lag_sensor(
    name: str,
    topics: Sequence[str],
    job,
    *,
    threshold: int = DEFAULT_LAG_THRESHOLD,
    minimum_interval_seconds: int = 60,
    properties: Mapping[str, str] | None = None,
) -> SensorDefinition:
    """The sensor ``<name>_kafka_lag``: a run of ``job`` when pipeline ``name`` is ``threshold`` records behind.

    Each tick reads the topics' end offsets from the cluster of the ``kafka`` resource (the local
    service by default; logged in with the resource's security settings and ``properties`` over
    them) and the processed offsets from the pipeline's checkpoint under the ``lakehouse`` resource
    (``_checkpoints/<name>/main``, on any file system Hadoop reads: the ``spark`` resource's
    ``spark.hadoop.*`` settings configure it, as they do the pipelines' sessions; without a Spark driver in
    the process, one JVM is started for it once, :mod:`streamjoin.checkpoint`). The lag is their difference
    summed over every partition of ``topics``. A run is requested when the lag is at least ``threshold`` and
    the topics have grown since the last requested run: the cursor holds the end offsets at that
    request (``{topic: {partition: offset}}``, JSON) and moves only when a run is requested, so a
    run still queued or running is not requested again, and the run key (the offsets) keeps a
    repeated request from launching twice.

    Args:
        name: the pipeline (sink table) name.
        topics: the Kafka topics it reads.
        job: its catch-up job (:func:`jobs.pipeline_jobs`).
        threshold: records behind (>= 1) from which a run is requested.
        minimum_interval_seconds: how often Dagster evaluates it.
        properties: the Kafka client properties the pipeline's tables declare
            (:func:`streamjoin.connectors.kafka_client.declared_properties`).

    Raises:
        ValueError: ``threshold`` below 1.
    """
    if threshold < 1:
        raise ValueError(f"the lag threshold of {name} must be >= 1 record, got {threshold}")

    @sensor(
        name=f"{name}_kafka_lag",
        job=job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=DefaultSensorStatus.STOPPED,
        metadata={"lag_threshold": threshold},
        description=f"Run `{job.name}` when `{name}` is {threshold:,} or more records behind {', '.join(topics)}.",
    )
    def _sensor(
        context: SensorEvaluationContext, kafka: KafkaResource, lakehouse: LakehouseResource, spark: SparkResource
    ):
        cluster = kafka.connection(properties)
        ends = end_offsets(cluster, topics)
        lag = kafka_lag(cluster, topics, lakehouse.lakehouse().checkpoint(name, "main"), ends, spark.conf)
        behind = sum(sum(partitions.values()) for partitions in lag.values())
        if behind < threshold:
            return SkipReason(
                f"{name} is {behind:,} records behind {', '.join(topics)}: under the threshold {threshold:,}"
            )
        now = {topic: {str(p): high for p, (_, high) in partitions.items()} for topic, partitions in ends.items()}
        requested = json.loads(context.cursor) if context.cursor else {}
        if not any(
            end > requested.get(t, {}).get(p, -1) for t, partitions in now.items() for p, end in partitions.items()
        ):
            return SkipReason(
                f"{name} is {behind:,} records behind, as when its last run was requested: waiting for it"
            )
        cursor = json.dumps(now, sort_keys=True)
        context.update_cursor(cursor)
        return RunRequest(
            run_key=f"{name}:{cursor}",
            tags={"kafka_lag": str(behind), "kafka_lag_per_partition": json.dumps(lag, sort_keys=True)},
        )

    return _sensor


def _error_text(error) -> str:
    """A Dagster ``SerializableErrorInfo`` as its message and its causes' messages, without stack traces."""
    messages = []
    while error is not None:
        messages.append(error.message.strip())
        error = error.cause or error.context
    return "\n  caused by ".join(messages)


def failure_report(context: RunFailureSensorContext) -> str:
    """The failed run, its job and each failed step with its error; the run's own error (e.g. a resource
    that could not start, such as no Kafka cluster) when no step failed. Errors come with their causes."""
    run = context.dagster_run
    steps = [
        f"step {event.step_key}: {_error_text(event.step_failure_data.error)}"
        for event in context.get_step_failure_events()
    ]
    run_error = context.failure_event.event_specific_data.error if context.failure_event.event_specific_data else None
    return f"run {run.run_id} of {run.job_name} failed:\n" + "\n".join(
        steps or [_error_text(run_error) if run_error else context.failure_event.message or "no error message"]
    )


@run_failure_sensor(
    name="pipeline_run_failures",
    default_status=DefaultSensorStatus.RUNNING,
    description="Report every failed run of this code location with the error of each failed step, "
    "in the sensor's tick log and on the failed run.",
)
def pipeline_run_failures(context: RunFailureSensorContext) -> None:
    """Logs :func:`failure_report` as an error in the tick's log (Automation → the sensor → its tick); returning
    nothing lets Dagster record on the failed run that the sensor handled it."""
    context.log.error(failure_report(context))


def freshness_checks(
    assets: Sequence[str],
    *,
    lower_bound_delta: datetime.timedelta = DEFAULT_FRESHNESS,
) -> tuple[Sequence[AssetChecksDefinition], SensorDefinition]:
    """Freshness checks (``freshness_check``, severity WARN) on the sink tables ``assets``, and their sensor.

    A table passes while its last materialization is at most ``lower_bound_delta`` old. The checks
    run with every job that materializes their table, and ``freshness_checks_sensor`` (stopped by
    default) evaluates them in between, as Dagster's ``build_sensor_for_freshness_checks`` does.

    Returns:
        ``(checks, sensor)`` for ``Definitions(asset_checks=..., sensors=...)``.
    """
    checks = build_last_update_freshness_checks(assets=list(assets), lower_bound_delta=lower_bound_delta)
    return checks, build_sensor_for_freshness_checks(freshness_checks=checks)
