"""A pipeline's Kafka lag: the topics' end offsets minus the offsets its streaming checkpoint has processed.

No consumer group exists (Spark's Kafka source assigns partitions itself and keeps its offsets in
the query's checkpoint), so the processed offsets come from Spark's offset log of the last batch with a
commit (:class:`streamjoin.checkpoint.Checkpoint`: Spark's layout, read on any Hadoop file system).

Example:
    >>> kafka_lag("127.0.0.1:9092", ["orders"], ".local/lakehouse/_checkpoints/orders_current/main")  # doctest: +SKIP
    {'orders': {0: 0, 1: 12}}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from streamjoin.checkpoint import Checkpoint, HadoopFiles
from streamjoin.connectors.kafka_admin import topic_offsets
from streamjoin.connectors.kafka_client import Cluster

__all__ = ["checkpoint_offsets", "end_offsets", "kafka_lag"]


def checkpoint_offsets(checkpoint: str | Path, conf: Mapping[str, str] | None = None) -> dict[str, dict[int, int]]:
    """``{topic: {partition: next offset to read}}`` as of the last committed batch of a streaming checkpoint.

    Args:
        checkpoint: the checkpoint folder (``Lakehouse.checkpoint(pipeline, "main")``): a local path or any Hadoop
            URI (``s3a://…``), read by :mod:`streamjoin.checkpoint`.
        conf: the Spark settings the pipelines run with; their ``spark.hadoop.*`` configure the file system
            (:meth:`streamjoin.checkpoint.HadoopFiles.standalone`).

    Returns:
        Empty when the query never committed a batch (or the folder does not exist). A topic read by
        two sources of one query keeps the lower offset per partition (the one further behind).
    """
    return Checkpoint(str(checkpoint), HadoopFiles.standalone(conf)).kafka_offsets()


def end_offsets(cluster: Cluster, topics: Iterable[str]) -> dict[str, dict[int, tuple[int, int]]]:
    """``{topic: {partition: (earliest, end offset)}}`` of ``topics``.

    See :func:`~streamjoin.connectors.kafka_admin.topic_offsets`.
    """
    return {topic: topic_offsets(cluster, topic) for topic in topics}


def kafka_lag(
    cluster: Cluster,
    topics: Sequence[str],
    checkpoint: str | Path,
    ends: dict[str, dict[int, tuple[int, int]]] | None = None,
    conf: Mapping[str, str] | None = None,
) -> dict[str, dict[int, int]]:
    """Records per topic partition that the query of ``checkpoint`` has not processed yet.

    A partition the checkpoint does not know yet counts from its earliest retained offset (the
    pipelines read from the earliest offset); retention may have deleted what a lagging checkpoint
    would read next, so the lag never counts records the topic no longer holds, and a topic
    recreated below the checkpoint's offsets counts 0.

    Args:
        cluster: the Kafka cluster (a :class:`~streamjoin.connectors.kafka_client.KafkaConnection` or bootstrap
            servers).
        topics: the topics the query reads.
        checkpoint: its checkpoint folder (:func:`checkpoint_offsets`).
        ends: the topics' offsets if already read (:func:`end_offsets`), else read here.
        conf: the Spark settings of the pipelines, for the checkpoint's file system (:func:`checkpoint_offsets`).

    Returns:
        ``{topic: {partition: lag in records}}``.

    Raises:
        KafkaException: a topic does not exist (as ``topic_offsets``).
    """
    ends = ends if ends is not None else end_offsets(cluster, topics)
    processed = checkpoint_offsets(checkpoint, conf)
    return {
        topic: {
            p: max(0, high - max(low, processed.get(topic, {}).get(p, low))) for p, (low, high) in ends[topic].items()
        }
        for topic in topics
    }
