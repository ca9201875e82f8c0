"""A topic deleted and created again under a pipeline's checkpoint is refused with a clear error, never skipped.

Through the real path (embedded broker, Spark, Delta): the new topic holds more records than the
checkpoint's offset, the case Spark's Kafka source reads on from the old offset without an error.
"""

import json
import shutil
import threading
import time

import pytest

from streamjoin.connectors.kafka_admin import admin_client, delete_topics, ensure_topics, produce, topic_ids
from streamjoin.connectors.topic_identity import TOPIC_IDS_FILE
from streamjoin.errors import TopicRecreatedError
from streamjoin.pipeline import Lakehouse, run_pipeline
from streamjoin.planner import plan_script, sql_pipelines


def _pipeline(bootstrap, topic: str, tmp_path):
    """A pipeline copying ``topic`` (three records ``old0``..``old2``) into the Delta table ``copied``, and its
    lakehouse."""
    ensure_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, _records(range(3), "old"))
    [pipeline] = sql_pipelines(
        plan_script(f"""
        CREATE TABLE src (id INT, v STRING) WITH ('connector' = 'kafka', 'topic' = '{topic}', 'format' = 'json');
        CREATE TABLE copied (id INT, v STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'delta');
        INSERT INTO copied SELECT id, v FROM src;
    """)
    )
    return pipeline, Lakehouse(str(tmp_path / "lake"))


def _records(ids, tag):
    return [(None, json.dumps({"id": i, "v": f"{tag}{i}"})) for i in ids]


def _recreate(bootstrap, topic, records):
    delete_topics(bootstrap, [topic])
    ensure_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, records)


def _rows(spark, lakehouse):
    return {tuple(r) for r in spark.read.format("delta").load(lakehouse.table_path("copied")).collect()}


@pytest.mark.e2e
def test_a_topic_recreated_between_runs_is_refused_before_anything_is_read(spark, kafka_bootstrap, tmp_path):
    topic = "recreated_between_runs"
    pipeline, lakehouse = _pipeline(kafka_bootstrap, topic, tmp_path)
    run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)
    assert _rows(spark, lakehouse) == {(i, f"old{i}") for i in range(3)}
    checkpoint = lakehouse.checkpoint(pipeline.name, "main")
    old_id = topic_ids(admin_client(kafka_bootstrap), [topic])[topic]
    assert json.loads((tmp_path / "lake" / "_checkpoints" / "copied" / "main" / TOPIC_IDS_FILE).read_text()) == {
        topic: old_id
    }

    # Five records: offset 3, where the checkpoint stands, exists in the new topic too.
    _recreate(kafka_bootstrap, topic, _records(range(10, 15), "new"))
    new_id = topic_ids(admin_client(kafka_bootstrap), [topic])[topic]
    with pytest.raises(TopicRecreatedError) as refused:
        run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)
    assert f"Kafka topic '{topic}' was deleted and created again (topic id {old_id} -> {new_id})" in str(refused.value)
    assert checkpoint in str(refused.value)
    assert _rows(spark, lakehouse) == {(i, f"old{i}") for i in range(3)}  # nothing of the new topic was read

    # What the error says to do: without the checkpoints, the new topic is read from its earliest offset.
    shutil.rmtree(tmp_path / "lake" / "_checkpoints" / "copied")
    run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)
    assert _rows(spark, lakehouse) == {(i, f"old{i}") for i in range(3)} | {(i, f"new{i}") for i in range(10, 15)}


@pytest.mark.e2e
def test_a_topic_recreated_under_a_running_pipeline_stops_it_before_the_batch_is_written(
    spark, kafka_bootstrap, tmp_path
):
    topic = "recreated_while_running"
    pipeline, lakehouse = _pipeline(kafka_bootstrap, topic, tmp_path)
    batches = []
    outcome = {}

    def run():
        try:
            run_pipeline(
                pipeline,
                spark,
                lakehouse,
                kafka_bootstrap,
                available_now=False,
                on_progress=lambda p: batches.append(p.numInputRows),
            )
        except Exception as e:  # noqa: BLE001 - the test asserts on it
            outcome["error"] = e

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    deadline = time.monotonic() + 300
    while sum(batches) < 3:
        assert runner.is_alive(), outcome
        assert time.monotonic() < deadline, "the first records were not read"
        time.sleep(0.2)
    _recreate(kafka_bootstrap, topic, _records(range(10, 15), "new"))
    runner.join(timeout=300)
    assert not runner.is_alive(), "the run kept going on a recreated topic"
    assert isinstance(outcome.get("error"), TopicRecreatedError), outcome
    assert _rows(spark, lakehouse) == {(i, f"old{i}") for i in range(3)}


class _FlakyAdmin:
    """An admin client whose ``describe_topics`` fails each topic with ``errors[topic]`` (popped per call) before
    answering."""

    def __init__(self, errors):
        self.errors = errors
        self.calls = []

    def describe_topics(self, topics, request_timeout):
        from concurrent.futures import Future
        from types import SimpleNamespace

        from confluent_kafka import KafkaException

        self.calls.append(sorted(topics.topic_names))
        futures = {}
        for name in topics.topic_names:
            future = Future()
            failures = self.errors.get(name, [])
            if failures:
                future.set_exception(KafkaException(failures.pop(0)))
            else:
                future.set_result(SimpleNamespace(topic_id=f"id-{name}"))
            futures[name] = future
        return futures


def test_a_transient_error_asking_for_topic_ids_is_retried_and_a_lasting_one_raised():
    from confluent_kafka import KafkaError, KafkaException

    timed_out = KafkaError(KafkaError.REQUEST_TIMED_OUT, "busy", retriable=True)
    admin = _FlakyAdmin({"a": [timed_out, timed_out], "gone": [KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)]})
    assert topic_ids(admin, ["b", "a", "gone"]) == {"a": "id-a", "b": "id-b"}
    assert admin.calls == [["a", "b", "gone"], ["a"], ["a"]]  # only what failed is asked again

    refused = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied")
    with pytest.raises(KafkaException, match="denied"):
        topic_ids(_FlakyAdmin({"a": [refused]}), ["a"])
    with pytest.raises(KafkaException, match="busy"):
        topic_ids(_FlakyAdmin({"a": [timed_out] * 1000}), ["a"], timeout_s=0.3)
