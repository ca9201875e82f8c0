"""The Spark session the engine runs in: Delta, the Kafka connector, RocksDB state.

On a cluster, pass ``master=None`` and let spark-submit / the cluster's session
supply the master; the same settings apply.
"""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from streamjoin.config import DELTA_PACKAGE, KAFKA_CONNECTOR_PACKAGE, local_dir

__all__ = ["spark_session", "SESSION_CONF"]

#: Settings every streamjoin session needs, whatever the deployment.
SESSION_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # transformWithState requires the RocksDB state store.
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.session.timeZone": "UTC",
    "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true",
}


def spark_session(app_name: str = "streamjoin", *, master: str | None = "local[2]", conf: dict | None = None) -> SparkSession:
    """Get or create the Spark session with Delta, Kafka and RocksDB configured.

    JVM packages (``DELTA_PACKAGE``, ``KAFKA_CONNECTOR_PACKAGE``) are resolved
    by Spark's Ivy into ``.local/ivy`` on first use and reused after.

    Args:
        app_name: Spark application name.
        master: Spark master; ``local[2]`` by default (``SPARK_MASTER`` overrides),
            ``None`` to keep what spark-submit set.
        conf: extra Spark settings, applied last.

    Returns:
        The active ``SparkSession``.
    """
    builder = SparkSession.builder.appName(app_name)
    master = os.environ.get("SPARK_MASTER", master)
    if master:
        builder = builder.master(master)
        # Local mode on a small machine: the default 200 shuffle partitions
        # make every stateful micro-batch schedule 200 tasks.
        builder = builder.config("spark.sql.shuffle.partitions", "2")
        builder = builder.config("spark.ui.enabled", "false")
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        # Delta rebuilds table snapshots with 50 tasks by default: too many for local mode.
        builder = builder.config("spark.databricks.delta.snapshotPartitions", "2")
        builder = builder.config("spark.driver.memory", os.environ.get("SPARK_DRIVER_MEMORY", "4g"))
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    builder = builder.config("spark.jars.packages", f"{DELTA_PACKAGE},{KAFKA_CONNECTOR_PACKAGE}")
    builder = builder.config("spark.jars.ivy", str(local_dir("ivy")))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
