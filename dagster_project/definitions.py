"""The code location: assets, checks, jobs and the resources of the embedded default.

Every resource reads its deployment values from the environment, so the same
definitions run on a cluster: ``SPARK_MASTER`` (unset under spark-submit
keeps the cluster's), ``KAFKA_BOOTSTRAP_SERVERS``, ``STREAMJOIN_LAKEHOUSE``
(e.g. ``s3a://bucket/lakehouse``), ``TPCH_SCALE_FACTOR``.
"""

import os

from dagster import Definitions

from assets.kafka_topics import TOPIC_SPECS
from assets.lineitem_with_order import lineitem_with_order
from assets.orders_current import orders_current
from checks.lineitem_with_order import lineitem_with_order_checks
from checks.orders_current import orders_current_check
from dagster_project.resources import KafkaResource, LakehouseResource, SparkResource, TpchResource
from jobs import (
    lakehouse_job, load_tpch_topics_job, orders_current_hourly, orders_current_job, orders_current_streaming_job,
)

defs = Definitions(
    assets=[*TOPIC_SPECS, orders_current, lineitem_with_order],
    asset_checks=[orders_current_check, *lineitem_with_order_checks],
    jobs=[orders_current_job, orders_current_streaming_job, lakehouse_job, load_tpch_topics_job],
    schedules=[orders_current_hourly],
    resources={
        "spark": SparkResource(master=os.environ.get("SPARK_MASTER", "local[2]")),
        "kafka": KafkaResource(bootstrap_servers=os.environ.get("KAFKA_BOOTSTRAP_SERVERS")),
        "lakehouse": LakehouseResource(root=os.environ.get("STREAMJOIN_LAKEHOUSE", "")),
        "tpch": TpchResource(scale_factor=float(os.environ.get("TPCH_SCALE_FACTOR", "0.01"))),
    },
)
