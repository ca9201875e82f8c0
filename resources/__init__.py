"""Dagster resources: the Spark session, the Kafka cluster, the lakehouse and the demo's TPC-H input.

The layer between the engine and the Dagster definitions: ``assets``, ``checks`` and ``jobs``
import these; they import only ``streamjoin``.

Each is a ``ConfigurableResource`` so a deployment swaps values, not code:
the embedded default (Spark ``local[2]``, a broker started by the project,
Delta tables under ``.local/lakehouse``) or a cluster (``master`` unset under
spark-submit, ``bootstrap_servers`` of a real Kafka, an object-store ``root``).
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr
from pyspark.sql import SparkSession

from streamjoin.config import local_dir
from streamjoin.connectors.embedded_kafka import BOOTSTRAP_ENV, kafka_cluster
from streamjoin.datagen.tpch import TpchChangelog, generate_tpch
from streamjoin.pipeline import Lakehouse
from streamjoin.session import spark_session

__all__ = ["SparkResource", "KafkaResource", "LakehouseResource", "TpchResource", "concurrency_pool", "EMBEDDED_KAFKA_POOL"]

#: The Dagster concurrency pool of every run that starts the embedded broker on ``.local/kafka``.
EMBEDDED_KAFKA_POOL = "embedded_kafka"


def concurrency_pool(name: str) -> str:
    """The Dagster concurrency pool of a step that reads or writes Kafka for ``name`` (a pipeline or a loader).

    With the instance's ``concurrency.pools`` at ``granularity: run`` and ``default_limit: 1``
    (``dagster.yaml``), a launched run waits in the queue while another run holding its pool is
    in progress. Without ``KAFKA_BOOTSTRAP_SERVERS`` every run starts the embedded broker on the
    one ``.local/kafka`` folder, and two brokers on one folder corrupt its metadata log, so all
    such runs share :data:`EMBEDDED_KAFKA_POOL`. With an external cluster only runs of the same
    pipeline collide (its checkpoint and sink tables): the pool is ``pipeline/<name>``.
    """
    return f"pipeline/{name}" if os.environ.get(BOOTSTRAP_ENV) else EMBEDDED_KAFKA_POOL


class SparkResource(ConfigurableResource):
    """The Spark session (``streamjoin.session.spark_session``).

    Attributes:
        master: Spark master; ``None`` keeps the one spark-submit / the cluster set.
        conf: extra Spark settings.
    """

    master: str | None = "local[2]"
    conf: dict[str, str] = {}

    def session(self) -> SparkSession:
        return spark_session("streamjoin-dagster", master=self.master, conf=self.conf)


class KafkaResource(ConfigurableResource):
    """The Kafka cluster.

    ``bootstrap_servers`` if set; else ``$KAFKA_BOOTSTRAP_SERVERS``; else the
    embedded broker on ``.local/kafka`` is started for the run and stopped after it.
    """

    bootstrap_servers: str | None = None
    _stack: contextlib.ExitStack | None = PrivateAttr(default=None)
    _servers: str | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        if self.bootstrap_servers:
            self._servers = self.bootstrap_servers
            return
        self._stack = contextlib.ExitStack()
        self._servers = self._stack.enter_context(kafka_cluster())
        if not os.environ.get(BOOTSTRAP_ENV):
            context.log.info(f"started the embedded Kafka broker at {self._servers}")

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._stack is not None:
            self._stack.close()

    @property
    def servers(self) -> str:
        if self._servers is None:
            raise RuntimeError("KafkaResource is used outside a Dagster run")
        return self._servers


class LakehouseResource(ConfigurableResource):
    """Where Delta tables and checkpoints live (any Spark-supported URI); ``.local/lakehouse`` by default."""

    root: str = ""

    def lakehouse(self) -> Lakehouse:
        return Lakehouse(self.root or str(local_dir("lakehouse")))


class TpchResource(ConfigurableResource):
    """The generated TPC-H input (``streamjoin.datagen.tpch``): scale factor and seed of the changelogs."""

    scale_factor: float = 0.01
    seed: int = 42

    def changelog(self) -> TpchChangelog:
        return _tpch_changelog(self.scale_factor, self.seed)


@functools.lru_cache(maxsize=2)
def _tpch_changelog(scale_factor: float, seed: int) -> TpchChangelog:
    # The loader and every check of a run read the same generated input: parse it once per process.
    return TpchChangelog(generate_tpch(Path(local_dir("tpch")), scale_factor), seed=seed)
