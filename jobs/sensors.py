"""Sensors: launch a pipeline's backfill job when its Kafka topics hold records it has not seen.

A sensor's cursor is, per topic, the sum of the partitions' high watermark offsets at its last
launch (JSON ``{topic: offset}``). When a topic has grown past it, the sensor requests one run of
``<pipeline>_job`` (``availableNow``: the query reads from its checkpoint to the current end, then
stops, and the checks run). Sensors need a running Kafka cluster between runs, so they read
``KAFKA_BOOTSTRAP_SERVERS`` and skip, saying so, when it is not set (the embedded broker only runs
during a run). They start stopped; turn them on in the Dagster UI.
"""

import json
import os
from collections.abc import Sequence

from dagster import DefaultSensorStatus, RunRequest, SensorEvaluationContext, SkipReason, sensor

from streamjoin.connectors.embedded_kafka import BOOTSTRAP_ENV
from streamjoin.connectors.kafka_admin import topic_offsets

__all__ = ["new_records_sensor"]


def new_records_sensor(name: str, topics: Sequence[str], job, *, bootstrap_servers: str | None = None,
                       minimum_interval_seconds: int = 60):
    """The sensor ``<name>_new_records``: a run of ``job`` whenever one of ``topics`` has new records.

    Args:
        name: the pipeline (sink table) name.
        topics: the Kafka topics it reads.
        job: its backfill job (:func:`jobs.pipeline_jobs`).
        bootstrap_servers: the Kafka cluster; default ``$KAFKA_BOOTSTRAP_SERVERS`` at evaluation time.
        minimum_interval_seconds: how often Dagster evaluates it.
    """

    @sensor(name=f"{name}_new_records", job=job, minimum_interval_seconds=minimum_interval_seconds,
            default_status=DefaultSensorStatus.STOPPED,
            description=f"Run `{job.name}` when a topic of `{name}` ({', '.join(topics)}) has new records.")
    def _sensor(context: SensorEvaluationContext):
        servers = bootstrap_servers or os.environ.get(BOOTSTRAP_ENV)
        if not servers:
            return SkipReason(f"set {BOOTSTRAP_ENV}: the sensor reads the topics' offsets from a running Kafka cluster")
        seen = json.loads(context.cursor) if context.cursor else {}
        ends = {t: sum(high for _, high in topic_offsets(servers, t).values()) for t in topics}
        grown = {t: end - seen.get(t, 0) for t, end in ends.items() if end > seen.get(t, 0)}
        if not grown:
            return SkipReason(f"no new records in {', '.join(topics)}")
        context.update_cursor(json.dumps(ends, sort_keys=True))
        return RunRequest(
            run_key=f"{name}-{json.dumps(ends, sort_keys=True)}",
            tags={"new_records": json.dumps(grown, sort_keys=True)},
        )

    return _sensor
