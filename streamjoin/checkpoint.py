"""A streaming query's checkpoint folder, read and written through Hadoop's file system API (any URI).

One reader for everything that looks into a checkpoint: the Delta sink (a batch's end offsets, the query id,
the shuffle partitions a restart keeps), the topic-identity record, and the Kafka-lag sensor. Paths are Hadoop
URIs, so a checkpoint on an object store (``s3a://``, ``abfss://``, ``gs://``) or any file system Hadoop is
configured for reads as a local one does.

Spark's layout of a micro-batch query's checkpoint (``MicroBatchExecution``, ``OffsetSeqLog``):

- ``metadata``: one JSON line, ``{"id": "<query id>"}``, written when the checkpoint is created;
- ``offsets/<batch id>``: written before the batch runs: ``v1``, a JSON line of batch metadata
  (``{"batchWatermarkMs": …, "conf": {"spark.sql.shuffle.partitions": "2", …}}``), then one line per source in
  the query's source order: a Kafka source's ``{"<topic>": {"<partition>": <next offset>}}``, ``-`` for a source
  with no offset yet, or another source's own JSON (a file source's ``{"logOffset": n}``);
- ``commits/<batch id>``: written when the batch has committed.

Inside a Spark driver the files are read with the session's Hadoop configuration; in a process without one (a
Dagster sensor) :meth:`HadoopFiles.standalone` starts one JVM per process for Hadoop's file systems, configured
by the ``spark.hadoop.*`` settings it is given, as a Spark session would be.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any, ClassVar

__all__ = ["Checkpoint", "HadoopFiles", "committed_kafka_offsets"]


class HadoopFiles:
    """Small text files on any Hadoop file system, through a JVM's ``org.apache.hadoop.fs`` API.

    Args:
        jvm: a py4j JVM view (``SparkContext._jvm``, or a gateway's ``jvm``).
        hadoop_conf: the ``org.apache.hadoop.conf.Configuration`` the file systems are made with.
    """

    #: One per process and distinct Hadoop settings: a JVM's start costs seconds, a sensor ticks every minute.
    _standalone: ClassVar[dict[tuple[tuple[str, str], ...], HadoopFiles]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, jvm: Any, hadoop_conf: Any) -> None:
        self._jvm = jvm
        self._conf = hadoop_conf

    @classmethod
    def of_session(cls, spark: Any) -> HadoopFiles:
        """The files as the Spark session ``spark`` sees them (its Hadoop configuration)."""
        context = spark.sparkContext
        return cls(context._jvm, context._jsc.hadoopConfiguration())

    @classmethod
    def standalone(cls, conf: Mapping[str, str] | None = None) -> HadoopFiles:
        """The files as a Spark session with the settings ``conf`` would see them, without starting Spark.

        In a process with a running Spark driver its JVM and Hadoop configuration serve (with ``conf``'s
        ``spark.hadoop.*`` settings over it); otherwise one JVM per distinct ``conf`` is started, once per
        process (spark-submit's class path and ``.local/jars/spark``: the file systems Spark's drivers have), and
        ``spark.hadoop.<key>`` becomes Hadoop's ``<key>`` as in Spark (``SparkHadoopUtil``).

        Args:
            conf: Spark settings (the pipelines' ``SparkResource.conf``); only ``spark.hadoop.*`` matter here.
        """
        from pyspark import SparkContext

        hadoop = {k: v for k, v in (conf or {}).items() if k.startswith("spark.hadoop.")}
        active = SparkContext._active_spark_context
        if active is not None:
            jvm: Any = active._jvm
            hadoop_conf = jvm.org.apache.hadoop.conf.Configuration(active._jsc.hadoopConfiguration())
            for name, value in hadoop.items():
                hadoop_conf.set(name.removeprefix("spark.hadoop."), value)
            return cls(jvm, hadoop_conf)
        settings = tuple(sorted(hadoop.items()))
        with cls._lock:
            if settings not in cls._standalone:
                cls._standalone[settings] = cls._launch(hadoop)
            return cls._standalone[settings]

    @classmethod
    def _launch(cls, hadoop: Mapping[str, str]) -> HadoopFiles:
        import os

        from pyspark import SparkConf
        from pyspark.java_gateway import launch_gateway

        from streamjoin.config import spark_package_jars

        spark_conf = SparkConf(loadDefaults=False).setAll(list(hadoop.items()))
        jars = [str(j) for j in spark_package_jars()]
        if jars:
            spark_conf = spark_conf.set("spark.driver.extraClassPath", os.pathsep.join(jars))
        gateway = launch_gateway(spark_conf)
        jvm = gateway.jvm
        jconf = jvm.org.apache.spark.SparkConf(False)
        for key, value in hadoop.items():
            jconf.set(key, value)
        return cls(jvm, jvm.org.apache.spark.deploy.SparkHadoopUtil.get().newConfiguration(jconf))

    def _path(self, path: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(path)

    def read(self, path: str) -> str | None:
        """The UTF-8 text of file ``path``, or None when it does not exist."""
        hpath = self._path(path)
        fs = hpath.getFileSystem(self._conf)
        if not fs.exists(hpath):
            return None
        stream = fs.open(hpath)
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def write(self, path: str, text: str) -> None:
        """Write ``text`` (UTF-8) to file ``path``, replacing it whole (one small file)."""
        hpath = self._path(path)
        stream = hpath.getFileSystem(self._conf).create(hpath, True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()

    def names(self, folder: str) -> list[str]:
        """The names of the entries of ``folder``; empty when it does not exist."""
        hpath = self._path(folder)
        fs = hpath.getFileSystem(self._conf)
        if not fs.exists(hpath):
            return []
        return [str(s.getPath().getName()) for s in fs.listStatus(hpath)]


def committed_kafka_offsets(offsets_text: str) -> dict[str, dict[int, int]]:
    """``{topic: {partition: next offset}}`` of an ``offsets/<batch id>`` file's text (its Kafka sources).

    A topic read by two sources of one query keeps the lower offset per partition (the one further behind).
    """
    offsets: dict[str, dict[int, int]] = {}
    for line in offsets_text.splitlines()[2:]:  # after the version and the batch metadata
        source = json.loads(line) if line.startswith("{") else {}
        for topic, partitions in source.items():
            if not isinstance(partitions, dict):
                continue  # not a Kafka source
            seen = offsets.setdefault(topic, {})
            for partition, offset in partitions.items():
                seen[int(partition)] = min(offset, seen.get(int(partition), offset))
    return offsets


class Checkpoint:
    """One streaming query's checkpoint folder (module docstring: Spark's layout).

    Args:
        path: the folder, a Hadoop URI or a local path (``Lakehouse.checkpoint(pipeline, "main")``).
        files: how its files are reached (:meth:`HadoopFiles.of_session` or :meth:`HadoopFiles.standalone`).
    """

    def __init__(self, path: str, files: HadoopFiles) -> None:
        self.path = str(path).rstrip("/")
        self.files = files

    def read(self, name: str) -> str | None:
        """The text of ``<checkpoint>/<name>``, or None when it does not exist."""
        return self.files.read(f"{self.path}/{name}")

    def write(self, name: str, text: str) -> None:
        """Replace ``<checkpoint>/<name>`` with ``text`` (a file of streamjoin's own, never one of Spark's)."""
        self.files.write(f"{self.path}/{name}", text)

    def batches(self, log: str) -> list[int]:
        """The batch ids in the ``offsets`` or ``commits`` log, ascending."""
        return sorted(int(name) for name in self.files.names(f"{self.path}/{log}") if name.isdigit())

    def batch_offsets(self, batch_id: int) -> list[Any] | None:
        """The end offsets of micro-batch ``batch_id``, one JSON value per source (None for ``-``); None when the
        batch has no offsets entry."""
        text = self.read(f"offsets/{batch_id}")
        if text is None:
            return None
        return [json.loads(line) if line != "-" else None for line in text.splitlines()[2:]]

    def query_id(self) -> str | None:
        """The streaming query id of ``metadata``, or None for a checkpoint not created yet."""
        text = self.read("metadata")
        return str(json.loads(text.splitlines()[0])["id"]) if text else None

    def shuffle_partitions(self) -> int | None:
        """The shuffle partitions the query started with (its state partitions; Spark applies them on every
        restart), from the newest ``offsets`` entry's metadata; None for a checkpoint without a micro-batch."""
        batches = self.batches("offsets")
        text = self.read(f"offsets/{batches[-1]}") if batches else None
        partitions = (
            json.loads(text.splitlines()[1]).get("conf", {}).get("spark.sql.shuffle.partitions") if text else None
        )
        return int(partitions) if partitions else None

    def kafka_offsets(self) -> dict[str, dict[int, int]]:
        """``{topic: {partition: next offset to read}}`` as of the last committed batch; empty when the query
        never committed one (or the folder does not exist)."""
        committed = self.batches("commits")
        text = self.read(f"offsets/{committed[-1]}") if committed else None
        return committed_kafka_offsets(text) if text else {}
