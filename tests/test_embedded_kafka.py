"""The embedded KRaft broker, the local broker service and the Kafka admin helpers, against real brokers (no mocks)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from streamjoin.cli import main
from streamjoin.connectors.embedded_kafka import BOOTSTRAP_ENV, EmbeddedKafka, EmbeddedKafkaError
from streamjoin.connectors.kafka_admin import delete_topics, ensure_topics, produce, topic_offsets
from streamjoin.connectors.kafka_service import (
    STATE_FILE,
    ServiceStatus,
    read_state,
    resolve_bootstrap_servers,
    service_status,
    start_service,
    stop_service,
)
from streamjoin.errors import ValidationError


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _consume_all(bootstrap: str, topic: str, expected: int, timeout_s: float = 20.0) -> list[tuple[int, str, str]]:
    """Every record of ``topic`` from the beginning as (partition, key, value), in partition order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": _topic("test"), "enable.auto.commit": False})
    try:
        partitions = (
            AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10).topics[topic].partitions
        )
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        records: list[tuple[int, str, str]] = []
        deadline = time.monotonic() + timeout_s
        while len(records) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            key = message.key().decode() if message.key() is not None else None
            records.append((message.partition(), key, message.value().decode()))
        return records
    finally:
        consumer.close()


def _process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie waiting for a reaper that is not us)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def _wait_gone(pid: int, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not _process_gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_produce_and_consume_back_in_key_order(kafka_bootstrap):
    topic = _topic("roundtrip")
    ensure_topics(kafka_bootstrap, {topic: 2})
    ensure_topics(kafka_bootstrap, {topic: 2})  # idempotent: already there
    sent = [(f"k{i % 5}", f"v{i}") for i in range(500)]

    assert produce(kafka_bootstrap, topic, sent) == 500

    got = _consume_all(kafka_bootstrap, topic, expected=500)
    assert sorted((k, v) for _, k, v in got) == sorted(sent)
    # One key lives in one partition, in the order it was produced.
    for key in {k for k, _ in sent}:
        assert len({p for p, k, _ in got if k == key}) == 1
        assert [v for _, k, v in got if k == key] == [v for k, v in sent if k == key]
    offsets = topic_offsets(kafka_bootstrap, topic)
    assert set(offsets) == {0, 1}
    assert all(low == 0 for low, _ in offsets.values())
    assert sum(high for _, high in offsets.values()) == 500
    assert {p: high for p, (_, high) in offsets.items()} == {p: sum(1 for q, _, _ in got if q == p) for p in (0, 1)}


def test_produce_accepts_bytes_and_null_keys(kafka_bootstrap):
    topic = _topic("bytes")
    ensure_topics(kafka_bootstrap, {topic: 1})
    assert produce(kafka_bootstrap, topic, [(None, b"\x00raw"), (b"k", "text")]) == 2
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": _topic("test")})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        messages = [consumer.poll(10) for _ in range(2)]
    finally:
        consumer.close()
    assert [(m.key(), m.value()) for m in messages] == [(None, b"\x00raw"), (b"k", b"text")]


def test_delete_topics_waits_until_gone(kafka_bootstrap):
    keep, drop = _topic("keep"), _topic("drop")
    ensure_topics(kafka_bootstrap, {keep: 1, drop: 3})
    assert len(topic_offsets(kafka_bootstrap, drop)) == 3

    delete_topics(kafka_bootstrap, [drop, _topic("never-existed")])

    listed = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
    assert drop not in listed and keep in listed
    # Looking a deleted topic up must not bring it back (no auto-creation).
    with pytest.raises(KafkaException, match="ensure_topics"):
        topic_offsets(kafka_bootstrap, drop)
    with pytest.raises(KafkaException, match="ensure_topics"):
        produce(kafka_bootstrap, drop, [("k", "v")])


def test_ensure_topics_rejects_bad_partition_count(kafka_bootstrap):
    with pytest.raises(ValidationError, match=r"'t'.*>= 1, got 0"):
        ensure_topics(kafka_bootstrap, {"t": 0})


def test_spark_kafka_source_reads_the_topic(spark, kafka_bootstrap):
    topic = _topic("spark")
    ensure_topics(kafka_bootstrap, {topic: 2})
    sent = [(f"order-{i}", f'{{"id": {i}}}') for i in range(20)]
    produce(kafka_bootstrap, topic, sent)

    rows = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition", "offset")
        .collect()
    )

    assert sorted((r.key, r.value) for r in rows) == sorted(sent)
    for partition, (low, high) in topic_offsets(kafka_bootstrap, topic).items():
        assert sorted(r.offset for r in rows if r.partition == partition) == list(range(low, high))


def test_restart_on_same_data_dir_keeps_topics_and_records(tmp_path):
    topic = _topic("durable")
    broker = EmbeddedKafka(tmp_path / "kafka")
    first = broker.start()
    cluster_id = (tmp_path / "kafka" / "logs" / "meta.properties").read_text()
    ensure_topics(first, {topic: 1})
    produce(first, topic, [("a", "1"), ("b", "2"), ("a", "3")])
    pid = broker.pid

    broker.stop()
    assert _wait_gone(pid, timeout_s=1.0)
    assert not broker.is_running()
    broker.stop()  # idempotent
    with pytest.raises(EmbeddedKafkaError, match="not running"):
        _ = broker.bootstrap_servers

    with socket.socket() as probe:  # a port other than the first run's
        probe.bind(("127.0.0.1", 0))
        other_port = probe.getsockname()[1]
    with EmbeddedKafka(tmp_path / "kafka", port=other_port) as again:
        second = again.bootstrap_servers
        assert second == f"127.0.0.1:{other_port}" != first
        assert topic_offsets(second, topic) == {0: (0, 3)}
        assert [(k, v) for _, k, v in _consume_all(second, topic, expected=3)] == [("a", "1"), ("b", "2"), ("a", "3")]
    # Not formatted again: same cluster id.
    assert (tmp_path / "kafka" / "logs" / "meta.properties").read_text() == cluster_id
    assert not again.is_running()


def test_stop_before_start_is_a_no_op(tmp_path):
    broker = EmbeddedKafka(tmp_path)
    broker.stop()
    broker.stop()
    assert broker.pid is None and not broker.is_running()


@pytest.mark.parametrize("ending", ["exit", "sigkill"])
def test_broker_does_not_outlive_its_python_process(tmp_path, ending):
    # The child starts a broker and then either returns without stop() (atexit must
    # act) or is SIGKILLed (only the kernel's parent-death signal can act).
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        from pathlib import Path
        from streamjoin.connectors.embedded_kafka import EmbeddedKafka
        broker = EmbeddedKafka(Path({str(tmp_path / "kafka")!r}))
        broker.start()
        print(broker.pid, flush=True)
        if {ending!r} == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != BOOTSTRAP_ENV}
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=90, env=env)
    assert child.stdout.strip(), child.stderr
    jvm_pid = int(child.stdout.split()[0])
    assert _wait_gone(jvm_pid), f"broker JVM {jvm_pid} outlived its parent ({ending})"


def test_error_when_broker_cannot_start_shows_log_tail(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = EmbeddedKafka(tmp_path / "kafka", port=port)
        with pytest.raises(
            EmbeddedKafkaError, match=r"(?s)exited with code.*broker\.log\nfirst error logged:.*Address already in use"
        ):
            broker.start()
    assert not broker.is_running()


def test_empty_jars_folder_says_run_make_setup(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMJOIN_LOCAL_DIR", str(tmp_path / "empty-local"))
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    with pytest.raises(
        EmbeddedKafkaError, match=r"no Kafka broker jars in .*empty-local/jars/kafka-broker.*make setup"
    ):
        EmbeddedKafka(tmp_path / "kafka").start()
    with pytest.raises(EmbeddedKafkaError, match="make setup"):
        start_service(tmp_path / "kafka")
    assert read_state(tmp_path / "kafka") is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"port": 0}, r"port must be .* 1\.\.65535, got 0"),
        ({"port": "9092"}, r"got '9092'"),
        ({"heap": "lots"}, r"heap must be a JVM size like '512m'.*got 'lots'"),
    ],
)
def test_constructor_rejects_bad_arguments(tmp_path, kwargs, message):
    with pytest.raises(ValidationError, match=message):
        EmbeddedKafka(tmp_path, **kwargs)


def test_the_service_outlives_its_starter_answers_status_and_stops_cleanly(tmp_path, monkeypatch, capsys):
    """``streamjoin kafka start`` in a process that then exits; status, idempotent start and stop from others."""
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    folder = tmp_path / "kafka"
    started = subprocess.run(
        [sys.executable, "-m", "streamjoin.cli", "kafka", "start", "--data-dir", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 0, started.stderr
    state = json.loads((folder / STATE_FILE).read_text())
    assert set(state) == {"pid", "bootstrap_servers", "data_dir", "log_path", "started_at"}
    assert started.stdout.startswith(f"Kafka started at {state['bootstrap_servers']} (pid {state['pid']}")
    assert state["data_dir"] == str(folder.resolve()) and state["log_path"] == str(folder.resolve() / "broker.log")
    try:
        # The starter has exited; the broker serves the folder's topics.
        ensure_topics(state["bootstrap_servers"], {"kept": 1})
        produce(state["bootstrap_servers"], "kept", [("k", "v")])
        assert main(["kafka", "status", "--data-dir", str(folder)]) == ServiceStatus.RUNNING == 0
        assert capsys.readouterr().out.startswith(f"Kafka running at {state['bootstrap_servers']} (pid {state['pid']}")
        assert resolve_bootstrap_servers(data_dir=folder) == state["bootstrap_servers"]

        assert main(["kafka", "start", "--data-dir", str(folder)]) == 0  # idempotent: the same broker
        assert capsys.readouterr().out.startswith(
            f"Kafka already running at {state['bootstrap_servers']} (pid {state['pid']}"
        )
        assert read_state(folder).pid == state["pid"]
    finally:
        assert main(["kafka", "stop", "--data-dir", str(folder)]) == 0
    assert "controlled shutdown" in capsys.readouterr().out
    assert _process_gone(state["pid"]) and not (folder / STATE_FILE).exists()
    assert "[BrokerServer id=1] shut down completed" in (folder / "broker.log").read_text()
    assert main(["kafka", "status", "--data-dir", str(folder)]) == ServiceStatus.STOPPED == 3
    assert main(["kafka", "stop", "--data-dir", str(folder)]) == 0  # stopping a stopped service: a no-op
    assert capsys.readouterr().out.endswith("Kafka is not running\n")
    with pytest.raises(EmbeddedKafkaError, match=r"no Kafka cluster to use: start the local broker with `make kafka`"):
        resolve_bootstrap_servers(data_dir=folder)


def test_a_stale_state_file_is_reported_and_replaced_on_start(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    folder = tmp_path / "kafka"
    first, started = start_service(folder)
    assert started
    os.kill(first.pid, signal.SIGKILL)  # dies without cleaning up: its state file stays
    os.waitpid(first.pid, 0)  # our child: reap it
    assert service_status(folder) == (ServiceStatus.DEAD, first)
    assert main(["kafka", "status", "--data-dir", str(folder)]) == ServiceStatus.DEAD == 1
    assert f"pid {first.pid} of {folder.resolve() / STATE_FILE} is gone" in capsys.readouterr().out
    with pytest.raises(EmbeddedKafkaError, match=rf"names pid {first.pid}, which is no longer running.*make kafka"):
        resolve_bootstrap_servers(data_dir=folder)

    second, started = start_service(folder)
    try:
        assert started and second.pid != first.pid and read_state(folder) == second
        assert service_status(folder) == (ServiceStatus.RUNNING, second)
    finally:
        stopped, clean = stop_service(folder)
    assert stopped == second and clean and read_state(folder) is None


def test_the_resolver_takes_the_setting_then_the_environment_then_the_declaration_then_the_service(
    tmp_path, monkeypatch
):
    """No broker is needed: the state file of a live broker process names the service (this process stands in).
    A loopback declaration (the demo catalog's) means the local service."""
    folder = tmp_path / "kafka"
    folder.mkdir()
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    with pytest.raises(
        EmbeddedKafkaError,
        match=r"^no Kafka cluster to use: start the local broker with `make kafka` "
        r"\(or `streamjoin kafka start`\), or set KAFKA_BOOTSTRAP_SERVERS",
    ):
        resolve_bootstrap_servers(data_dir=folder)
    with pytest.raises(EmbeddedKafkaError, match="start the local broker"):
        resolve_bootstrap_servers(declared="127.0.0.1:9092,localhost:9093", data_dir=folder)
    assert resolve_bootstrap_servers(declared="declared:9092", data_dir=folder) == "declared:9092"

    # A process whose command line is the broker's: `sleep` would not pass the identity check.
    config = EmbeddedKafka(folder).config_path
    stand_in = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)", "kafka.Kafka", str(config)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # Popen returns once execve has closed the parent's pipe, before the kernel has set the new command
        # line in /proc (it reads empty there for a moment): wait until the stand-in runs its own code.
        assert stand_in.stdout.readline() == "ready\n"
        (folder / STATE_FILE).write_text(
            json.dumps(
                {
                    "pid": stand_in.pid,
                    "bootstrap_servers": "127.0.0.1:1",
                    "data_dir": str(folder),
                    "log_path": str(folder / "broker.log"),
                    "started_at": "2026-01-01T00:00:00+00:00",
                }
            )
        )
        assert resolve_bootstrap_servers(declared="127.0.0.1:9092", data_dir=folder) == "127.0.0.1:1"
        assert resolve_bootstrap_servers(declared="declared:9092", data_dir=folder) == "declared:9092"
        monkeypatch.setenv(BOOTSTRAP_ENV, "env-1:9092,env-2:9092")
        assert resolve_bootstrap_servers(data_dir=folder) == "env-1:9092,env-2:9092"
        assert resolve_bootstrap_servers("setting:9092", data_dir=folder) == "setting:9092"
        monkeypatch.delenv(BOOTSTRAP_ENV)
        # Alive but its port answers nothing: status unknown (LSB 4).
        assert service_status(folder, timeout_s=1)[0] == ServiceStatus.NOT_ANSWERING == 4
    finally:
        stand_in.kill()
        stand_in.communicate()
    assert service_status(folder)[0] == ServiceStatus.DEAD
