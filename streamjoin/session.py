"""The Spark session the engine runs in: Delta, the Kafka connector, RocksDB state.

On a cluster, pass ``master=None`` and let spark-submit / the cluster's session
supply the master; the same settings apply.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from streamjoin.cds import driver_java_options
from streamjoin.config import local_dir, spark_package_jars
from streamjoin.errors import StreamJoinError
from streamjoin.jvm import DEFAULT_ENGINE, ENGINE_CONF, operators_jar

__all__ = ["SESSION_CONF", "spark_session"]

_DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
_DRIVER_CLASS_PATH = "spark.driver.extraClassPath"

#: Settings every streamjoin session needs, whatever the deployment.
SESSION_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # transformWithState requires the RocksDB state store.
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    # A micro-batch commits its state changes as a changelog file, not a RocksDB checkpoint
    # (less fixed cost per micro-batch); snapshots are taken in the background.
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    # Python workers (transformWithState runs one per stateful task) start slowly on a busy
    # machine; the default 15 s to connect back to the JVM fails them.
    "spark.python.authenticate.socketTimeout": "120s",
    "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true",
    # Spark's cache of generated classes holds 100 (SPARK-24727: "too small for streaming"). One micro-batch
    # of a pipeline (operators, the dead-letter query, the Delta MERGE and append) uses more than that,
    # so every batch compiled its classes again, most of them identical.
    "spark.sql.codegen.cache.maxEntries": "1000",
}


def spark_session(
    app_name: str = "streamjoin", *, master: str | None = "local[2]", conf: dict | None = None
) -> SparkSession:
    """Get or create the Spark session with Delta, Kafka and RocksDB configured.

    The JVM packages (Delta, Spark's Kafka connector) come from
    ``.local/jars/spark``, filled by ``make setup`` from ``jvm/spark-packages/pom.xml``.

    Args:
        app_name: Spark application name.
        master: Spark master; ``local[2]`` by default (``SPARK_MASTER`` overrides),
            ``None`` to keep what spark-submit set. Only a ``local``/``local[N]`` master gets the
            small-machine settings (loopback driver, 2 shuffle partitions, 2 file-listing tasks, no UI, the driver's
            class-data-sharing archive of ``make setup``: :mod:`streamjoin.cds`; with the jvm engine's jar, its
            local file system without a ``chmod`` process per file: ``fs.file.impl``); any other,
            ``local-cluster[N,C,M]`` (executors in their own JVMs) included, is treated as a cluster.
            ``SPARK_SHUFFLE_PARTITIONS`` sets the shuffle partitions on any master. The jars go
            to ``spark.jars`` on every master, so executors fetch them from the driver.
        conf: extra Spark settings, applied last.

    Returns:
        The active ``SparkSession``.

    Raises:
        StreamJoinError: when ``.local/jars/spark`` holds no jars (``make setup`` was not run).
    """
    # Python workers (UDFs, transformWithState) must run this interpreter, whose environment
    # has pyarrow, pandas and protobuf; Spark's default is whatever `python3` is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    master = os.environ.get("SPARK_MASTER", master)
    if master:
        builder = builder.master(master)
    if master and _is_local(master):
        # Local mode on a small machine: the default 200 shuffle partitions make every stateful
        # micro-batch schedule 200 tasks. A checkpoint keeps the number it started with.
        builder = builder.config("spark.sql.shuffle.partitions", os.environ.get("SPARK_SHUFFLE_PARTITIONS", "2"))
        builder = builder.config("spark.ui.enabled", "false")
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        # Local mode talks to itself only: keep the driver on loopback.
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1")
        # Delta rebuilds table snapshots with 50 tasks by default: too many for local mode.
        builder = builder.config("spark.databricks.delta.snapshotPartitions", "2")
        # Delta's VACUUM lists a table's files in this many tasks (Spark's default 10,000): far too many for
        # local mode, where a table has a few files.
        builder = builder.config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "2")
        builder = builder.config("spark.driver.memory", os.environ.get("SPARK_DRIVER_MEMORY", "4g"))
        # The driver maps the classes `make setup` archived instead of loading them again (streamjoin.cds).
        conf = dict(conf or {})
        own_options = conf.get(_DRIVER_JAVA_OPTIONS, "")
        if archive_options := driver_java_options(own_options):
            conf[_DRIVER_JAVA_OPTIONS] = f"{archive_options} {own_options}".strip()
        if operators_jar().exists():
            # Hadoop's local file system without a `chmod` process per file created (the jar's streamjoin.hadoop).
            # Hadoop looks its class up from spark-submit's start on (spark.jars' paths), before spark.jars are
            # loaded: the jar goes on the driver's own class path. Local masters only: a cluster's executors
            # start without it.
            own_class_path = conf.get(_DRIVER_CLASS_PATH)
            conf[_DRIVER_CLASS_PATH] = os.pathsep.join(p for p in (str(operators_jar()), own_class_path) if p)
            builder = builder.config("spark.hadoop.fs.file.impl", "streamjoin.hadoop.LocalFileSystem")
            builder = builder.config("spark.hadoop.fs.AbstractFileSystem.file.impl", "streamjoin.hadoop.LocalFs")
    elif "SPARK_SHUFFLE_PARTITIONS" in os.environ:
        builder = builder.config("spark.sql.shuffle.partitions", os.environ["SPARK_SHUFFLE_PARTITIONS"])
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    jars = spark_package_jars()
    if not jars:
        raise StreamJoinError(
            f"no jars in {local_dir('jars', 'spark')}: run `make setup` to fetch Delta and the Kafka connector"
        )
    # The jvm engine's operators (jvm/operators, built by `make setup`); without the jar only the
    # python engine runs, and the first jvm operator says how to get it (streamjoin.jvm).
    if operators_jar().exists():
        jars.append(operators_jar())
    builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    builder = builder.config(ENGINE_CONF, os.environ.get("STREAMJOIN_ENGINE", DEFAULT_ENGINE))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    _quiet_state_server(spark)
    return spark


def _is_local(master: str) -> bool:
    """Whether ``master`` runs every task in the driver's JVM (``local``, ``local[N]``, ``local[N,F]``, ``local[*]``).

    ``local-cluster[N,C,M]`` is not: it starts N executor JVMs, as a cluster does (Spark's ``SparkMasterRegex``).
    """
    return master == "local" or master.startswith("local[")


#: Logs a WARN for every ValueState get() of a key without a value, i.e. for every new key of
#: every operator (tens of thousands of lines per run), though an empty state is normal.
_STATE_SERVER_LOGGER = "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkStateServer"


def _quiet_state_server(spark: SparkSession) -> None:
    # Set in the driver JVM, which hosts the state servers in local mode; on a cluster, set it in
    # the executors' log4j2 configuration.
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # a running session's
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        _STATE_SERVER_LOGGER, jvm.org.apache.logging.log4j.Level.ERROR
    )
