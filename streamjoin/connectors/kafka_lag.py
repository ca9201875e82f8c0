"""A pipeline's Kafka lag: the topics' end offsets minus the offsets its streaming checkpoint has processed.

No consumer group exists (Spark's Kafka source assigns partitions itself and keeps its offsets in
the query's checkpoint), so the processed offsets come from Spark's offset log,
``<checkpoint>/offsets/<batch id>``, of the last batch with a ``commits/<batch id>`` entry. Its
text is ``v1``, a JSON line of batch metadata, then one line per source in the query's source
order: a Kafka source's ``{"<topic>": {"<partition>": <next offset>}}``, ``-`` for a source with
no offset yet, or another source's own JSON (a file source's ``{"logOffset": n}``).

Example:
    >>> kafka_lag("127.0.0.1:9092", ["orders"], ".local/lakehouse/_checkpoints/orders_current/main")  # doctest: +SKIP
    {'orders': {0: 0, 1: 12}}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from streamjoin.connectors.kafka_admin import topic_offsets
from streamjoin.connectors.kafka_client import Cluster
from streamjoin.errors import ValidationError

__all__ = ["checkpoint_offsets", "end_offsets", "kafka_lag"]


def _batches(folder: Path) -> list[int]:
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else []


def checkpoint_offsets(checkpoint: str | Path) -> dict[str, dict[int, int]]:
    """``{topic: {partition: next offset to read}}`` as of the last committed batch of a streaming checkpoint.

    Args:
        checkpoint: a local checkpoint folder (``Lakehouse.checkpoint(pipeline, "main")``).

    Returns:
        Empty when the query never committed a batch (or the folder does not exist). A topic read by
        two sources of one query keeps the lower offset per partition (the one further behind).

    Raises:
        ValidationError: ``checkpoint`` is a URI of another file system than the local one.
    """
    text = str(checkpoint)
    if "://" in text and not text.startswith("file:"):
        raise ValidationError(f"reading the offsets of {text}: only a local checkpoint can be read, not a URI")
    folder = Path(text.removeprefix("file://").removeprefix("file:"))
    committed = _batches(folder / "commits")
    if not committed:
        return {}
    lines = (folder / "offsets" / str(committed[-1])).read_text().splitlines()
    offsets: dict[str, dict[int, int]] = {}
    for line in lines[2:]:  # after the version and the batch metadata
        source = json.loads(line) if line.startswith("{") else {}
        for topic, partitions in source.items():
            if not isinstance(partitions, dict):
                continue  # not a Kafka source
            seen = offsets.setdefault(topic, {})
            for partition, offset in partitions.items():
                seen[int(partition)] = min(offset, seen.get(int(partition), offset))
    return offsets


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

    Returns:
        ``{topic: {partition: lag in records}}``.

    Raises:
        KafkaException: a topic does not exist (as ``topic_offsets``).
    """
    ends = ends if ends is not None else end_offsets(cluster, topics)
    processed = checkpoint_offsets(checkpoint)
    return {
        topic: {
            p: max(0, high - max(low, processed.get(topic, {}).get(p, low))) for p, (low, high) in ends[topic].items()
        }
        for topic in topics
    }
