"""A python-engine query whose Python worker misses Spark's start-up deadline is restarted from its checkpoint.

Real broker, Spark, RocksDB state and Delta. The python engine's transformWithState starts a Python worker on the
driver when its query starts, and Spark gives it 10 s to connect back (hard-coded in ``PythonWorkerFactory``). The
chaos trials saw it missed on an overloaded machine; here the interpreter Spark starts for that worker is a script
that sleeps past the deadline for its first two starts, then runs this Python.
"""

import dataclasses
import sys
from collections import Counter

import pytest
from pyspark.errors import StreamingQueryException

from streamjoin import pipeline as pipeline_module
from streamjoin.connectors.kafka_admin import ensure_topics, produce
from streamjoin.datagen.topics import ORDERS, debezium_record
from streamjoin.pipeline import Lakehouse, Pipeline, run_pipeline
from streamjoin.runtime.group_aggregate import group_aggregate

SLOW_STARTS = 2
DRIVER_WORKER = "pyspark.sql.streaming.transform_with_state_driver_worker"


@pytest.fixture
def slow_driver_worker(spark, tmp_path, monkeypatch):
    """Spark's Python interpreter for this test: the first ``SLOW_STARTS`` starts of the driver worker sleep 12 s."""
    starts = tmp_path / "slow_starts"
    starts.mkdir()
    script = tmp_path / "python"
    script.write_text(
        "#!/bin/sh\n"
        f'n=$(ls "{starts}" | wc -l)\n'
        f'if [ "$2" = "{DRIVER_WORKER}" ] && [ "$n" -lt {SLOW_STARTS} ]; then touch "{starts}/$n"; sleep 12; fi\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    script.chmod(0o755)
    monkeypatch.setattr(spark.sparkContext, "pythonExec", str(script))
    return starts


@pytest.mark.parametrize("engine", ["python"], indirect=True)  # the python engine starts the driver worker
def test_a_missed_worker_start_restarts_the_query_and_loses_nothing(
    spark, engine, kafka_bootstrap, tpch, tmp_path, slow_driver_worker
):
    topic = "orders_for_worker_start"
    ensure_topics(kafka_bootstrap, {topic: 1})
    changes = list(tpch.orders_changes())
    produce(kafka_bootstrap, topic, [(None, debezium_record(c)) for c in changes])
    pipeline = Pipeline(
        "orders_per_status_slow_start",
        [dataclasses.replace(ORDERS, topic=topic)],
        lambda tables: group_aggregate(
            tables["orders"], group_by=["o_orderstatus"], aggregates=[("orders", "COUNT", None)]
        ),
        ("o_orderstatus",),
    )
    lakehouse = Lakehouse(str(tmp_path / "lake"))

    # Without restarts the missed deadline fails the run, with Spark's message.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline_module, "WORKER_START_RESTARTS", 0)
        with pytest.raises(StreamingQueryException, match="Python worker failed to connect back"):
            run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)
    assert len(list(slow_driver_worker.iterdir())) == 1

    # With them, the second slow start costs one restart from the checkpoint, and the table is exact.
    run = run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)
    assert len(list(slow_driver_worker.iterdir())) == SLOW_STARTS
    [warning] = run.warnings
    assert (
        warning.startswith("pipeline 'orders_per_status_slow_start': a Python worker did not connect back")
        and "restart 1 of 3" in warning
    )
    expected = Counter(o["o_orderstatus"] for o in tpch.final_orders().values())
    table = spark.read.format("delta").load(lakehouse.table_path(pipeline.name)).collect()
    assert {r["o_orderstatus"]: r["orders"] for r in table} == expected
    assert run.records_read == {topic: len(changes)}
