"""Run figures from Spark's progress events (streamjoin.progress) and the Delta commit metrics of a run.

The unit tests read progress events of a real query, saved as Spark's JSON: a catch-up run of
``sql/orders_by_status.sql`` (a deduplication and a group aggregate: two state operators) over the
demo topics at scale factor 0.001, with one undecodable record on ``order_events``
(``tests/data/progress/``). The other tests run pipelines for real (Kafka → Spark → Delta).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql.streaming.listener import StreamingQueryProgress

from streamjoin.config import PROJECT_ROOT
from streamjoin.connectors.kafka_admin import ensure_topics, produce, topic_offsets
from streamjoin.datagen.topics import ORDERS, debezium_record
from streamjoin.pipeline import Lakehouse, Pipeline, run_pipeline
from streamjoin.planner import load_script, sql_pipelines
from streamjoin.progress import Figures, StopOnInterrupt, batch_figures

EVENTS = Path(__file__).parent / "data" / "progress"


def _events(name: str) -> list[StreamingQueryProgress]:
    return [StreamingQueryProgress.fromJson(e) for e in json.loads((EVENTS / f"{name}.json").read_text())]


def test_a_batch_gives_its_input_changes_offsets_and_state():
    first, second = _events("orders_by_status_main")
    figures = batch_figures(first)
    assert figures.batches == 1 and figures.input_rows == 1681
    assert figures.records_read == {"order_events": 1681}  # the end-of-input control stream is not Kafka
    assert figures.duration_ms == first.durationMs["triggerExecution"] > 0
    assert figures.changes == {"+I": 3, "-U": 0, "+U": 1827, "-D": 0}
    assert figures.offsets == {"order_events/0": 835, "order_events/1": 846}
    assert figures.lag == {"order_events/0": 0, "order_events/1": 0}  # a catch-up batch reads up to the latest offsets
    assert figures.state_rows == 1473 + 1500 and figures.state_bytes == 11656 + 12600
    assert figures.dead_letters == 0
    # The no-data batch that follows (the watermark moved): no input, the same state.
    assert batch_figures(second).input_rows == 0 and batch_figures(second).state_rows == figures.state_rows


def test_lag_is_the_latest_offset_minus_the_batch_end_offset():
    event = json.loads((EVENTS / "orders_by_status_main.json").read_text())[0]
    event["sources"][0]["latestOffset"] = {"order_events": {"0": 900, "1": 846}}
    assert batch_figures(StreamingQueryProgress.fromJson(event)).lag == {"order_events/0": 65, "order_events/1": 0}


def test_a_dead_letter_batch_gives_only_its_dead_letters():
    [event] = _events("orders_by_status_dead_letters")
    assert event.numInputRows == 1681  # it reads the same records as the main query: not counted again
    assert batch_figures(event) == Figures(dead_letters=1)


def test_figures_add_up_over_batches_and_keep_the_latest_offsets_and_state():
    first, second = (batch_figures(e) for e in _events("orders_by_status_main"))
    dead = batch_figures(_events("orders_by_status_dead_letters")[0])
    total = first + dead + second
    assert total.batches == 2 and total.input_rows == 1681 and total.dead_letters == 1
    assert total.duration_ms == first.duration_ms + second.duration_ms
    assert total.changes == first.changes and total.offsets == second.offsets
    assert total.state_rows == second.state_rows  # a dead-letter batch has no state figures of the pipeline
    assert Figures() + first == first
    meta = total.metadata()
    assert meta["micro_batches"] == 2 and meta["input_rows"] == 1681 and meta["dead_letters"] == 1
    assert meta["rows_per_second"] == round(1681 * 1000 / total.duration_ms, 1)
    assert meta["batch_duration_ms"] == round(total.duration_ms / 2, 1)
    assert meta["changes[+U]"] == 1827 and meta["offset[order_events/1]"] == 846 and meta["lag"] == 0
    assert all(isinstance(v, int | float) for v in meta.values())  # numeric: Dagster plots them


@pytest.mark.e2e
def test_a_catch_up_run_reports_figures_and_delta_commit_metrics(spark, kafka_bootstrap, demo_topics, tmp_path):
    [pipeline] = sql_pipelines(load_script(PROJECT_ROOT / "sql" / "orders_current.sql"))
    lakehouse = Lakehouse(str(tmp_path / "lake"))
    seen: list[Figures] = []
    progress = []
    run = run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap, on_progress=progress.append, on_figures=seen.append)

    assert sum(seen, Figures()) == run.figures and run.batches == len(progress) >= 1
    assert run.records_read == {"orders": demo_topics["orders"]}
    ends = {f"orders/{p}": high for p, (_, high) in topic_offsets(kafka_bootstrap, "orders").items()}
    assert run.figures.offsets == ends and set(run.figures.lag.values()) == {0}
    changelog = spark.read.format("delta").load(lakehouse.table_path("orders_current_changelog"))
    kinds = {r["_rowkind"]: r["count"] for r in changelog.groupBy("_rowkind").count().collect()}
    assert {k: n for k, n in run.figures.changes.items() if n} == kinds
    assert run.commits["changelog"]["numOutputRows"] == changelog.count()
    table = spark.read.format("delta").load(lakehouse.table_path("orders_current"))
    merged = run.commits["sink"]
    # One batch: the writer collapses each key's changes to its last, so the new table only gets inserts.
    assert merged["numTargetRowsInserted"] == table.count() > 0 and merged["numTargetRowsDeleted"] == 0
    assert run.commits["dead_letters"].get("numOutputRows", 0) == run.figures.dead_letters == 0
    # The row count the Dagster asset reports is answered from the Delta log's file statistics.
    assert "LocalTableScan" in table.groupBy().count()._jdf.queryExecution().executedPlan().toString()

    # Nothing new on the topic: the next run commits nothing, and says so.
    again = run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)
    assert again.records_read == {"orders": 0}
    assert (
        again.commits["changelog"].get("numOutputRows", 0) == 0
        and again.commits["sink"].get("numTargetRowsInserted", 0) == 0
    )


class _Interrupt(BaseException):
    """Stands for Dagster's run termination, raised on the caller's thread (a KeyboardInterrupt)."""


@pytest.mark.e2e
def test_an_interrupted_continuous_run_stops_its_queries_and_the_next_run_resumes(
    spark, kafka_bootstrap, tpch, tmp_path
):
    topic = "orders_live"
    ensure_topics(kafka_bootstrap, {topic: 1})
    inserts = [c for c in tpch.orders_changes() if c.kind.short == "+I"][:20]
    produce(kafka_bootstrap, topic, [(None, debezium_record(c)) for c in inserts[:10]] + [(None, "{not json")])
    pipeline = Pipeline(
        "orders_live", [dataclasses.replace(ORDERS, topic=topic)], lambda t: t["orders"], ("o_orderkey",)
    )
    lakehouse = Lakehouse(str(tmp_path / "lake"))
    listeners = len(spark._jsparkSession.streams().listListeners())
    seen: list[Figures] = []

    def interrupt_after_a_batch(figures: Figures) -> None:
        seen.append(figures)
        if figures.input_rows:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        run_pipeline(
            pipeline, spark, lakehouse, kafka_bootstrap, available_now=False, on_figures=interrupt_after_a_batch
        )
    assert not [q for q in spark.streams.active if q.name.startswith("orders_live")]
    assert len(spark._jsparkSession.streams().listListeners()) == listeners

    produce(kafka_bootstrap, topic, [(None, debezium_record(c)) for c in inserts[10:]])
    run = run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)
    assert run.records_read == {topic: 10}  # from the checkpoint on, not from the topic's start
    changelog = spark.read.format("delta").load(lakehouse.table_path("orders_live_changelog"))
    assert changelog.count() == changelog.select("o_orderkey").distinct().count() == 20
    assert spark.read.format("delta").load(lakehouse.table_path("orders_live")).count() == 20
    assert sum(f.dead_letters for f in seen) + run.figures.dead_letters == 1


def test_an_interrupt_stops_the_queries_after_their_batch_in_progress_without_raising(spark, tmp_path):
    """SIGINT (Ctrl-C, or Dagster terminating a run) while a micro-batch runs: the query stops once the batch has
    ended, without an error, and the interrupted thread goes on; the previous handlers come back."""
    started, finished = threading.Event(), []

    def slow_first_batch(batch, batch_id: int) -> None:
        if batch_id == 0:
            started.set()
            time.sleep(3)
        batch.count()
        finished.append(batch_id)

    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    rows = spark.readStream.format("rate").option("rowsPerSecond", 5).load()
    query = rows.writeStream.foreachBatch(slow_first_batch).option("checkpointLocation", str(tmp_path)).start()
    try:
        with StopOnInterrupt(spark) as stop:
            assert started.wait(120), "the first batch did not start"
            os.kill(os.getpid(), signal.SIGINT)
            assert query.awaitTermination(60), "the query did not stop"
        assert stop.signal == signal.SIGINT and stop.requested
        assert query.exception() is None
        assert 0 in finished  # the batch in progress ran to its end
        assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == previous
    finally:
        query.stop()


def test_sigterm_stops_an_idle_query_and_a_second_signal_raises(spark, tmp_path):
    memory = spark.readStream.format("rate").option("rowsPerSecond", 1).load().where("false")
    query = memory.writeStream.format("noop").option("checkpointLocation", str(tmp_path)).start()
    try:
        with StopOnInterrupt(spark) as stop:
            os.kill(os.getpid(), signal.SIGTERM)
            assert query.awaitTermination(60), "the query did not stop"
            # A stop that hangs can still be broken off.
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)
        assert stop.signal == signal.SIGTERM and query.exception() is None
    finally:
        query.stop()
