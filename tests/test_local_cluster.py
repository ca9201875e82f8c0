"""A stateful pipeline of ``sql/`` on ``local-cluster[2,1,1024]``: Spark's standalone cluster on this machine.

``streamjoin run`` drives it with ``SPARK_MASTER`` set as the README says for a cluster; the driver is
the CLI's process, the two executors are JVMs of their own that fetch the jars the session passes as
``spark.jars`` (Delta, the Kafka connector, the jvm engine's operators) and run every task. The sink
must equal the batch query over the same topics, as in ``test_sql_pipelines_e2e.py``.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest
from processes import descendants

from assets.sql_pipelines import SQL_DIR
from checks import DEMO_EXPECTED
from checks.expectations import table_difference
from streamjoin.session import _is_local

STREAMJOIN = Path(sys.executable).with_name("streamjoin")  # the console script, as a user runs it
PIPELINE = "orders_by_status"  # the cheapest stateful one: a rowtime deduplication, then a group aggregate
EXECUTOR_MAIN = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


@pytest.mark.parametrize(
    "master, local",
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("local[2,3]", True),
        ("local-cluster[2,1,1024]", False),
        ("spark://head:7077", False),
        ("yarn", False),
    ],
)
def test_only_local_masters_get_the_local_settings(master, local):
    assert _is_local(master) is local


@pytest.mark.e2e
def test_a_stateful_pipeline_on_separate_executor_jvms(spark, kafka_bootstrap, demo_topics, tpch_inputs, tmp_path):
    # The Spark home `make setup` links in .local/spark-home, here with its own work/ folder, where each
    # executor's folder (its stdout, stderr and fetched jars) goes, and the cluster's settings file: Delta's
    # 50 tasks per snapshot rebuild are too many for 2 cores.
    spark_home = tmp_path / "spark-home"
    (spark_home / "conf").mkdir(parents=True)
    for part in ("bin", "jars"):
        (spark_home / part).symlink_to(Path(pyspark.__file__).parent / part)
    (spark_home / "conf" / "spark-defaults.conf").write_text("spark.databricks.delta.snapshotPartitions 2\n")
    lake = tmp_path / "lake"
    env = {
        **os.environ,
        "SPARK_MASTER": "local-cluster[2,1,1024]",
        "SPARK_HOME": str(spark_home),
        "SPARK_SHUFFLE_PARTITIONS": "2",
    }
    started = time.monotonic()
    run = subprocess.Popen(
        [
            str(STREAMJOIN),
            "run",
            str(SQL_DIR / f"{PIPELINE}.sql"),
            "--available-now",
            "--bootstrap-servers",
            kafka_bootstrap,
            "--lakehouse",
            str(lake),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    # The CLI's process tree while it runs: pid -> (parent pid, command line) as first seen (when the driver
    # exits, its executors outlive it for a moment, adopted by another parent).
    seen: dict[int, tuple[int, str]] = {}
    while run.poll() is None and time.monotonic() - started < 600:
        seen = descendants(run.pid) | seen
        time.sleep(0.5)
    if run.poll() is None:
        run.kill()
    output = run.communicate()[0]
    assert run.returncode == 0, output[-5000:]

    # Two executor JVMs below the CLI's process (the standalone workers live in the driver's JVM and start them).
    executors = {_executor_id(args): pid for pid, (_, args) in seen.items() if EXECUTOR_MAIN in args}
    assert set(executors) == {"0", "1"}, seen
    drivers = {pid for pid, (_, args) in seen.items() if "org.apache.spark.deploy.SparkSubmit" in args}
    assert drivers and not drivers & set(executors.values())
    # Each executor fetched the operators jar from the driver and ran tasks of the query.
    [app] = (spark_home / "work").iterdir()
    for executor in ("0", "1"):
        log = (app / executor / "stderr").read_text()
        assert "streamjoin-operators.jar" in log and "Running task" in log, log[-3000:]

    actual = spark.read.format("delta").load(str(lake / PIPELINE))
    expected = DEMO_EXPECTED[PIPELINE](tpch_inputs)
    assert expected.count() > 0
    assert table_difference(actual, expected).count() == 0


def _executor_id(args: str) -> str:
    return args.split("--executor-id ", 1)[1].split()[0]
