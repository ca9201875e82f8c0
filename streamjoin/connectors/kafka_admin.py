"""Small Kafka chores over confluent_kafka, for any cluster: topics, bulk produce, offsets.

Used by set-up code, demos, the lag sensor and tests (the streaming queries themselves read
through Spark's Kafka source). A cluster is a :class:`~streamjoin.connectors.kafka_client.KafkaConnection`
(bootstrap servers and security settings) or its bootstrap servers alone. Errors the cluster reports come
through as ``confluent_kafka.KafkaException``; a failed login as one with code ``KafkaError._AUTHENTICATION``
as soon as the broker refuses it; waits that run out raise
:class:`~streamjoin.errors.ConnectorTimeoutError` (a ``TimeoutError``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec, TopicMetadata

from streamjoin.connectors.kafka_client import Cluster, as_connection
from streamjoin.errors import ConnectorTimeoutError, ValidationError

__all__ = ["admin_client", "delete_topics", "ensure_topics", "produce", "topic_ids", "topic_offsets"]

_POLL_INTERVAL_S = 0.1
#: Seconds of each metadata request while a client waits to reach its cluster (a refused login shows between two).
_LOGIN_CHECK_S = 1.0
_LEADERSHIP_ERRORS = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)


def _transient(error: KafkaError) -> bool:
    """Whether a request that failed with ``error`` may succeed if asked again: librdkafka says it is retriable,
    or a leader is moving (just after a topic is created a broker may answer "not leader" for a moment, though
    the metadata already names it)."""
    return error.retriable() or error.code() in _LEADERSHIP_ERRORS


def admin_client(cluster: Cluster, timeout_s: float = 30.0) -> AdminClient:
    """An admin client of ``cluster`` once the cluster has answered it, so that a refused login fails at once.

    librdkafka retries a refused login until the request's timeout and then reports only a transport
    failure; the refusal itself goes to the client's ``error_cb``, served by ``poll``.
    """
    refusals: list[KafkaError] = []
    admin = AdminClient(
        {
            **as_connection(cluster).client_config(),
            # librdkafka's admin handle asks brokers to auto-create topics it looks up by
            # default: a lookup must never create what it looks for.
            "allow.auto.create.topics": False,
            # confluent_kafka's stubs allow no callback in the configuration, librdkafka takes them there.
            "error_cb": (  # type: ignore[dict-item]
                lambda error: refusals.append(error) if error.code() == KafkaError._AUTHENTICATION else None
            ),
        }
    )
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.list_topics(timeout=min(_LOGIN_CHECK_S, max(deadline - time.monotonic(), 0.001)))
            return admin
        except KafkaException:
            admin.poll(0)
            if refusals:
                raise KafkaException(
                    KafkaError(
                        KafkaError._AUTHENTICATION, f"Kafka authentication failed: {refusals[0].str()}", fatal=True
                    )
                ) from None
            if time.monotonic() > deadline:
                raise


def _topic_metadata(admin: AdminClient, topic: str, timeout_s: float) -> TopicMetadata:
    metadata = admin.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if metadata is None or metadata.error is not None:
        error = metadata.error if metadata is not None else None
        raise KafkaException(
            KafkaError(
                error.code() if error is not None else KafkaError.UNKNOWN_TOPIC_OR_PART,
                f"topic {topic!r} is not available ({error.str() if error is not None else 'unknown topic'}); "
                "create it with ensure_topics",
            )
        )
    return metadata


def _wait_until(predicate: Callable[[], bool], *, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise ConnectorTimeoutError(f"{what} within {timeout_s:g} s")
        time.sleep(_POLL_INTERVAL_S)


def ensure_topics(
    cluster: Cluster, topics: dict[str, int], *, timeout_s: float = 30.0, config: Mapping[str, str] | None = None
) -> None:
    """Create the topics that do not exist yet and wait until every partition has a leader.

    Existing topics are left as they are, whatever their partition count. New topics
    get the cluster's default replication factor (``default.replication.factor``).

    Args:
        cluster: a :class:`~streamjoin.connectors.kafka_client.KafkaConnection`, or bootstrap servers
            ``"host:port[,...]"``.
        topics: topic name → number of partitions (≥ 1) for topics created here.
        timeout_s: seconds to wait for creation and leaders.
        config: topic settings of the topics created here (e.g. ``{"max.message.bytes": "8388608"}``).

    Raises:
        ValidationError: a partition count below 1.
        KafkaException: the cluster refused the login or a creation (other than "already exists").
        ConnectorTimeoutError: the topics had no leaders within ``timeout_s``.

    Example:
        >>> ensure_topics("127.0.0.1:9092", {"orders": 1, "lineitem": 2})   # doctest: +SKIP
    """
    for name, partitions in topics.items():
        if not isinstance(partitions, int) or partitions < 1:
            raise ValidationError(f"topic {name!r}: partition count must be an int >= 1, got {partitions!r}")
    admin = admin_client(cluster, timeout_s)
    existing = admin.list_topics(timeout=timeout_s).topics
    missing = [
        NewTopic(name, num_partitions=n, config=dict(config or {}))
        for name, n in topics.items()
        if name not in existing
    ]
    if missing:
        for future in admin.create_topics(missing, request_timeout=timeout_s).values():
            try:
                future.result()
            except KafkaException as exc:
                # Another client created it in between: that is what we wanted.
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise

    def all_led() -> bool:
        metadata = admin.list_topics(timeout=timeout_s).topics
        return all(
            name in metadata
            and metadata[name].error is None
            and metadata[name].partitions
            and all(p.leader >= 0 for p in metadata[name].partitions.values())
            for name in topics
        )

    _wait_until(all_led, timeout_s=timeout_s, what=f"topics {sorted(topics)} did not get partition leaders")


def delete_topics(cluster: Cluster, names: Iterable[str], *, timeout_s: float = 30.0) -> None:
    """Delete the named topics that exist and wait until the cluster no longer lists them.

    Args:
        cluster: a :class:`~streamjoin.connectors.kafka_client.KafkaConnection`, or bootstrap servers
            ``"host:port[,...]"``.
        names: topic names; absent ones are ignored.
        timeout_s: seconds to wait for the deletion to show in metadata.

    Raises:
        KafkaException: the cluster refused the login or a deletion.
        ConnectorTimeoutError: a topic was still listed after ``timeout_s``.
    """
    names = set(names)
    admin = admin_client(cluster, timeout_s)
    present = names & set(admin.list_topics(timeout=timeout_s).topics)
    if not present:
        return
    for future in admin.delete_topics(sorted(present), request_timeout=timeout_s).values():
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
    _wait_until(
        lambda: not present & set(admin.list_topics(timeout=timeout_s).topics),
        timeout_s=timeout_s,
        what=f"topics {sorted(present)} were still listed",
    )


def produce(
    cluster: Cluster,
    topic: str,
    records: Iterable[tuple[bytes | str | None, bytes | str] | tuple[bytes | str | None, bytes | str, int]],
    *,
    timeout_s: float = 60.0,
    settings: Mapping[str, object] | None = None,
) -> int:
    """Write (key, value) records to a topic, in order, and wait until all are acknowledged.

    Batched (``linger.ms=20``), idempotent with ``acks=all``, so records of one key
    keep their order in their partition even across retries. ``str`` is encoded as
    UTF-8; a ``None`` key lets the producer's partitioner spread records.

    Args:
        cluster: a :class:`~streamjoin.connectors.kafka_client.KafkaConnection`, or bootstrap servers
            ``"host:port[,...]"``.
        topic: an existing topic (see :func:`ensure_topics`).
        records: ``(key, value)`` pairs, or ``(key, value, timestamp)`` with the record's timestamp in ms since
            the epoch (else the producer stamps the time of sending).
        timeout_s: seconds for the final flush.
        settings: producer settings over these (e.g. ``{"message.max.bytes": 8388608}`` for records over 1 MB).

    Returns:
        The number of records written.

    Raises:
        KafkaException: the topic does not exist, the cluster refused the login, or a record was not
            delivered (the first delivery error).
        ConnectorTimeoutError: records were still unacknowledged after ``timeout_s``.

    Example:
        >>> produce("127.0.0.1:9092", "orders", [("1", '{"id": 1}'), ("2", '{"id": 2}')])   # doctest: +SKIP
        2
    """
    _topic_metadata(admin_client(cluster, timeout_s), topic, timeout_s)
    producer = Producer(
        {
            **as_connection(cluster).client_config(),
            "allow.auto.create.topics": False,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 20,
            "compression.type": "lz4",
            **(settings or {}),
        }
    )
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(err)

    count = 0
    for key, value, *timestamp in records:
        while True:
            try:
                producer.produce(
                    topic, value=value, key=key, on_delivery=on_delivery, timestamp=timestamp[0] if timestamp else 0
                )
                break
            except BufferError:
                # The local queue is full: serve delivery reports to make room.
                producer.poll(_POLL_INTERVAL_S)
        count += 1
        if errors:
            break
        producer.poll(0)
    remaining = producer.flush(timeout_s)
    if errors:
        raise KafkaException(errors[0])
    if remaining:
        raise ConnectorTimeoutError(
            f"{remaining} of {count} records to topic {topic!r} were not acknowledged within {timeout_s:g} s"
        )
    return count


def topic_offsets(cluster: Cluster, topic: str, *, timeout_s: float = 30.0) -> dict[int, tuple[int, int]]:
    """The low and high watermark offsets of every partition of a topic.

    The high watermark is the offset the next record will get, so ``high - low`` is
    the number of records currently kept (for a topic without transactions or
    compaction).

    Args:
        cluster: a :class:`~streamjoin.connectors.kafka_client.KafkaConnection`, or bootstrap servers
            ``"host:port[,...]"``.
        topic: the topic.
        timeout_s: seconds for the metadata and offset requests.

    Returns:
        partition → ``(low, high)``.

    Raises:
        KafkaException: the topic does not exist, or the cluster refused the login or the request.
    """
    admin = admin_client(cluster, timeout_s)
    partitions = sorted(_topic_metadata(admin, topic, timeout_s).partitions)
    deadline = time.monotonic() + timeout_s

    def offsets(spec: OffsetSpec) -> dict[int, int]:
        request = {TopicPartition(topic, p): spec for p in partitions}
        while True:
            try:
                futures = admin.list_offsets(request, request_timeout=timeout_s)
                return {tp.partition: future.result().offset for tp, future in futures.items()}
            except KafkaException as exc:
                if not _transient(exc.args[0]) or time.monotonic() > deadline:
                    raise
                time.sleep(_POLL_INTERVAL_S)

    low, high = offsets(OffsetSpec.earliest()), offsets(OffsetSpec.latest())
    return {p: (low[p], high[p]) for p in partitions}


def topic_ids(admin: AdminClient, topics: Iterable[str], *, timeout_s: float = 30.0) -> dict[str, str]:
    """Each topic's id (Kafka's ``Uuid`` as text, KIP-516), e.g. ``{"orders": "lT0S3s…"}``; a topic that does
    not exist is left out. ``admin``: an :func:`admin_client`, kept by a caller that asks repeatedly.

    A transient error (retriable, or a leader moving) is retried until ``timeout_s`` has passed: a pipeline asks
    before every micro-batch, and a busy or restarting broker must not fail the query where Spark's Kafka
    source itself would wait.

    Raises:
        KafkaException: the cluster refused the request, or still failed it after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    pending = sorted(set(topics))
    ids = {}
    while pending:
        futures = admin.describe_topics(TopicCollection(pending), request_timeout=timeout_s)
        pending = []
        for name, future in futures.items():
            try:
                ids[name] = str(future.result().topic_id)
            except KafkaException as e:
                error = e.args[0]
                if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                if not _transient(error) or time.monotonic() > deadline:
                    raise
                pending.append(name)
        if pending:
            time.sleep(_POLL_INTERVAL_S)
    return ids
