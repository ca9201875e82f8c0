"""The code location: assets, checks, jobs and the resources of the embedded default.

Pipeline assets come from the SQL files in ``sql/`` (:mod:`assets.sql_pipelines`);
their Great Expectations checks are in ``checks/``.

Every resource reads its deployment values from the environment, as ``dagster.EnvVar`` when
set, so the same definitions run on a cluster: ``SPARK_MASTER`` (unset: ``local[2]``; an empty
value keeps the one spark-submit set), ``SPARK_PACKAGES``, ``SPARK_SHUFFLE_PARTITIONS``,
``KAFKA_BOOTSTRAP_SERVERS`` (unset: the local broker service of ``make kafka``), ``KAFKA_SECURITY_PROTOCOL``,
``KAFKA_SASL_MECHANISM``, ``KAFKA_SASL_USERNAME``, ``KAFKA_SASL_PASSWORD``, ``KAFKA_SSL_TRUSTSTORE_LOCATION``
(the ``KafkaResource``'s login, for its own clients and Spark's),
``STREAMJOIN_LAKEHOUSE`` (e.g. ``s3a://bucket/lakehouse``), ``TPCH_SCALE_FACTOR``, ``TPCH_DAYS``.
"""

import os

from dagster import Definitions, EnvVar, in_process_executor

from assets import customer_currencies, load_sql_pipelines, part, topic_specs
from assets.partitioned_pipelines import daily_schedule, sql_pipeline_assets
from checks import asset_checks
from jobs import hourly_schedule, lakehouse_job, load_tpch_topics_job, pipeline_jobs
from jobs.maintenance import delta_maintenance_job, delta_maintenance_schedule
from jobs.sensors import freshness_checks, kafka_lag_sensor, pipeline_run_failures
from resources import KafkaResource, LakehouseResource, SparkResource, TpchResource
from streamjoin.connectors.kafka_client import declared_properties

#: The ``KafkaResource`` fields set from ``KAFKA_<FIELD>`` variables.
KAFKA_SECURITY_FIELDS = (
    "security_protocol",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password",
    "ssl_truststore_location",
)


def _env(name: str, default: str | None) -> EnvVar | str | None:
    """``EnvVar(name)`` when the variable is set, else ``default``.

    An ``EnvVar`` is read when a run launches and shown in the UI as environment-backed, its value left
    out of the run config; it has no default (an unset one fails the run), so an optional setting
    chooses between the two when the code location loads.
    """
    return EnvVar(name) if name in os.environ else default


SQL_PIPELINES = load_sql_pipelines()
PIPELINE_JOBS = {job.name: job for p in SQL_PIPELINES for job in pipeline_jobs(p.pipeline.name)}
MAINTENANCE_JOB = delta_maintenance_job([p.pipeline for p in SQL_PIPELINES])
FRESHNESS_CHECKS, FRESHNESS_SENSOR = freshness_checks([p.pipeline.name for p in SQL_PIPELINES])

defs = Definitions(
    assets=[*topic_specs(SQL_PIPELINES), *(sql_pipeline_assets(p) for p in SQL_PIPELINES), customer_currencies, part],
    asset_checks=[*asset_checks([p.pipeline for p in SQL_PIPELINES]), *FRESHNESS_CHECKS],
    jobs=[*PIPELINE_JOBS.values(), lakehouse_job, load_tpch_topics_job, MAINTENANCE_JOB],
    schedules=[
        hourly_schedule(PIPELINE_JOBS["orders_current_job"]),
        *filter(None, map(daily_schedule, SQL_PIPELINES)),
        delta_maintenance_schedule(MAINTENANCE_JOB),
    ],
    sensors=[
        # A pipeline's own threshold: kafka_lag_sensor(..., threshold=N).
        *(
            kafka_lag_sensor(
                p.pipeline.name,
                sorted({s.topic for s in p.pipeline.sources}),
                PIPELINE_JOBS[f"{p.pipeline.name}_job"],
                properties=declared_properties(s.options for s in p.pipeline.sources),
            )
            for p in SQL_PIPELINES
        ),
        pipeline_run_failures,
        FRESHNESS_SENSOR,
    ],
    # One process per run, one Spark session for all its steps: the default multiprocess executor
    # would start a Spark driver per asset, also for the ad-hoc runs the UI's "Materialize" launches.
    executor=in_process_executor,
    resources={
        "spark": SparkResource(
            master=_env("SPARK_MASTER", "local[2]"),
            packages=_env("SPARK_PACKAGES", ""),
            shuffle_partitions=_env("SPARK_SHUFFLE_PARTITIONS", ""),
        ),
        # Unset: the local service (`make kafka`), looked up when a run or sensor needs it.
        "kafka": KafkaResource(
            bootstrap_servers=_env("KAFKA_BOOTSTRAP_SERVERS", None),
            **{field: _env(f"KAFKA_{field.upper()}", "") for field in KAFKA_SECURITY_FIELDS},
        ),
        "lakehouse": LakehouseResource(root=_env("STREAMJOIN_LAKEHOUSE", "")),
        "tpch": TpchResource(
            scale_factor=float(os.environ.get("TPCH_SCALE_FACTOR", "0.01")),
            days=int(os.environ["TPCH_DAYS"]) if os.environ.get("TPCH_DAYS") else None,
        ),
    },
)
