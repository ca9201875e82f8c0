"""Which Kafka topics a checkpoint's offsets belong to: a topic deleted and recreated under a pipeline is refused.

Spark's Kafka source keeps offsets per topic *name*. When a topic is deleted and created again, the
new topic's offsets start at 0 again:

- if the new topic holds fewer records than the checkpoint's offset, Spark notices that offsets went
  back (``failOnDataLoss``, on by default) and fails the query;
- if it already holds more, Spark reads on from the old offset and silently skips the new topic's
  first records — rows lost, without an error.

Kafka gives every topic a unique id when it is created (KIP-516, Kafka 2.8+). A pipeline records the
ids of its topics beside its checkpoint (``<checkpoint>/streamjoin/topic_ids.json``) and compares them
before it starts and before each micro-batch is written: a changed id is a
:class:`~streamjoin.errors.TopicRecreatedError` naming the topic, both ids and how to go on, and no
row of that micro-batch reaches Delta. (Flink's Kafka source has the same blind spot: its offsets are
per topic name too.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from streamjoin.checkpoint import Checkpoint, HadoopFiles
from streamjoin.connectors.kafka_admin import admin_client, topic_ids
from streamjoin.connectors.kafka_client import Cluster
from streamjoin.errors import TopicRecreatedError

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

__all__ = ["TOPIC_IDS_FILE", "TopicIdentity"]

#: Where, under a query's checkpoint folder, the topic ids are kept (Spark owns the rest of the folder).
TOPIC_IDS_FILE = "streamjoin/topic_ids.json"


class TopicIdentity:
    """The topic ids recorded for one streaming query's checkpoint, and the check against the cluster's.

    Args:
        spark: reads and writes the record through Hadoop's file system API (checkpoints may be remote).
        checkpoint: the query's checkpoint folder.
        cluster: the cluster the query reads; one admin client of it serves every check.
        topics: the topics the query reads.
    """

    def __init__(self, spark: SparkSession, checkpoint: str, cluster: Cluster, topics: Iterable[str]) -> None:
        self.checkpoint = checkpoint
        self._checkpoint = Checkpoint(checkpoint, HadoopFiles.of_session(spark))
        self.cluster = cluster
        self.topics = sorted(set(topics))
        self._recorded: dict[str, str] | None = None
        self._admin: AdminClient | None = None  # made at the first check: a check runs before every micro-batch

    def check(self) -> None:
        """Compare the cluster's topic ids with the recorded ones; record the ids of topics seen for the first time.

        Raises:
            TopicRecreatedError: a topic's id differs from the one recorded (it was deleted and created again).
            KafkaException: the cluster cannot be asked (``KafkaError._AUTHENTICATION`` for a refused login).
        """
        if self._admin is None:
            self._admin = admin_client(self.cluster)
        current = topic_ids(self._admin, self.topics)
        recorded = self._read() if self._recorded is None else self._recorded
        for topic, old in sorted(recorded.items()):
            new = current.get(topic)
            if new is not None and new != old:
                raise TopicRecreatedError(
                    f"Kafka topic '{topic}' was deleted and created again (topic id {old} -> {new}): the offsets in "
                    f"the checkpoint {self.checkpoint} belong to the deleted topic, so reading on would skip or "
                    "re-read records. To read the new topic from its earliest offset, remove the pipeline's "
                    "checkpoints (the folder holding this one); the sink table keeps its rows and the new "
                    "topic's changes are applied over them."
                )
        if any(topic not in recorded for topic in current):
            self._write({**current, **recorded})
        self._recorded = {**current, **recorded}

    def close(self) -> None:
        """Free the admin client (a later :meth:`check` makes a new one).

        Call it when the query has stopped: the query's ``foreachBatch`` function holds this object, and py4j's
        callback server keeps that function after the query ends, so the client would live, and librdkafka would
        keep connecting to the cluster (logging ``Connection refused`` once it is gone), until the process exits.
        """
        self._admin = None

    def _read(self) -> dict[str, str]:
        text = self._checkpoint.read(TOPIC_IDS_FILE)
        return json.loads(text) if text else {}

    def _write(self, ids: dict[str, str]) -> None:
        self._checkpoint.write(TOPIC_IDS_FILE, json.dumps(ids, sort_keys=True))  # one small file, rewritten whole
