"""Dagster resources: the Spark session, the Kafka cluster, the lakehouse and the demo's TPC-H input.

The layer between the engine and the Dagster definitions: ``assets``, ``checks`` and ``jobs``
import these; they import only ``streamjoin``.

Each is a ``ConfigurableResource`` so a deployment swaps values, not code:
the embedded default (Spark ``local[2]``, the local broker service of ``make kafka``,
Delta tables under ``.local/lakehouse``) or a cluster (``master`` unset under
spark-submit, ``bootstrap_servers`` of a real Kafka, an object-store ``root``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field
from pyspark.sql import SparkSession

from streamjoin.config import local_dir
from streamjoin.connectors.kafka_client import KafkaConnection, jaas_config
from streamjoin.connectors.kafka_service import resolve_bootstrap_servers
from streamjoin.datagen.tpch import TpchChangelog, generate_tpch
from streamjoin.pipeline import Lakehouse
from streamjoin.session import spark_session

__all__ = ["KafkaResource", "LakehouseResource", "SparkResource", "TpchResource", "concurrency_pool"]


def concurrency_pool(name: str) -> str:
    """The Dagster concurrency pool ``pipeline/<name>`` of the steps of ``name`` (a pipeline or a loader).

    Runs share one Kafka cluster (the local service or ``KAFKA_BOOTSTRAP_SERVERS``), so only runs
    of the same pipeline collide: on its checkpoint and its sink tables. With the instance's
    ``concurrency.pools`` at ``granularity: run`` and ``default_limit: 1`` (``dagster.yaml``), a
    launched run waits in the queue while another run holding one of its pools is in progress;
    runs of different pipelines proceed side by side.
    """
    return f"pipeline/{name}"


class SparkResource(ConfigurableResource):
    """The Spark session (``streamjoin.session.spark_session``).

    Attributes:
        master: Spark master; ``None`` or ``""`` keeps the one spark-submit / the cluster set.
        conf: extra Spark settings.
        packages: ``spark.jars.packages``, Maven coordinates ``group:artifact:version``, comma-separated
            (dependencies of the pipelines beyond the jars of ``.local/jars/spark``); ``""``: none.
        shuffle_partitions: ``spark.sql.shuffle.partitions`` of new queries (a checkpoint keeps the number it
            started with); ``""``: the session's (2 in local mode, Spark's 200 otherwise).
    """

    master: str | None = "local[2]"
    conf: dict[str, str] = {}  # noqa: RUF012 - a pydantic field: each resource gets its own copy
    packages: str = ""
    shuffle_partitions: str = ""

    def session(self) -> SparkSession:
        settings = {"spark.jars.packages": self.packages, "spark.sql.shuffle.partitions": self.shuffle_partitions}
        conf = {**{k: v for k, v in settings.items() if v}, **self.conf}
        return spark_session("streamjoin-dagster", master=self.master or None, conf=conf)


class KafkaResource(ConfigurableResource):
    """The Kafka cluster: ``bootstrap_servers`` if set, else ``$KAFKA_BOOTSTRAP_SERVERS``, else the local service;
    and how to log in to it.

    A run never starts a broker: the local service is started by ``make kafka`` (``streamjoin kafka
    start``); see :func:`streamjoin.connectors.kafka_service.resolve_bootstrap_servers`.

    The security settings are Kafka's Java client properties (:mod:`streamjoin.connectors.kafka_client`),
    for the project's own clients (the topic loader, the lag sensors) and Spark's reader alike. Set secrets
    from the environment, ``sasl_password=dg.EnvVar("KAFKA_PASSWORD")``: Dagster then shows and stores the
    variable's name, never its value.

    Attributes:
        security_protocol: ``PLAINTEXT`` / ``SSL`` / ``SASL_PLAINTEXT`` / ``SASL_SSL``;
            ``""``: Kafka's default (``PLAINTEXT``).
        sasl_mechanism: ``PLAIN`` / ``SCRAM-SHA-256`` / ``SCRAM-SHA-512``; ``""`` with a username: ``PLAIN``.
        sasl_username, sasl_password: the login (``sasl.jaas.config`` of the mechanism's login module).
        ssl_truststore_location: a PEM file of the CA certificates the brokers' certificates are checked against.
        properties: further Java client properties (``ssl.keystore.location``,
            ``ssl.endpoint.identification.algorithm``, ...).
    """

    bootstrap_servers: str | None = None
    security_protocol: str = ""
    sasl_mechanism: str = ""
    sasl_username: str = ""
    # Left out of the resource's repr (run logs, errors), as KafkaConnection's repr leaves them out: once a run
    # resolves an EnvVar the field holds the value, and property values hold keystore passwords.
    sasl_password: str = Field(default="", repr=False)
    ssl_truststore_location: str = ""
    properties: dict[str, str] = Field(default={}, repr=False)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        # Fails the run at its start, with what to do, when there is no cluster.
        servers = self.servers
        if context.log is not None:
            context.log.info(f"Kafka at {servers}")

    @property
    def servers(self) -> str:
        """Bootstrap servers, ``"host:port[,...]"``.

        Raises:
            EmbeddedKafkaError: no setting, no ``KAFKA_BOOTSTRAP_SERVERS`` and no running local service.
        """
        return resolve_bootstrap_servers(self.bootstrap_servers)

    def connection(self, declared: Mapping[str, str] | None = None) -> KafkaConnection:
        """The cluster with this resource's security settings, then ``declared`` over them: the Kafka client
        properties a pipeline's tables declare (:func:`streamjoin.connectors.kafka_client.declared_properties`).

        Raises:
            EmbeddedKafkaError: no cluster (as :attr:`servers`).
            ValidationError: a username without a mechanism that takes one
                (:func:`~streamjoin.connectors.kafka_client.jaas_config`).
        """
        mechanism = self.sasl_mechanism or ("PLAIN" if self.sasl_username else "")
        settings = {"security.protocol": self.security_protocol, "sasl.mechanism": mechanism}
        if self.ssl_truststore_location:
            settings |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": self.ssl_truststore_location}
        if self.sasl_username:
            settings["sasl.jaas.config"] = jaas_config(mechanism, self.sasl_username, self.sasl_password)
        own = {**{k: v for k, v in settings.items() if v}, **self.properties}
        return KafkaConnection(self.servers, own).with_properties(declared or {})


class LakehouseResource(ConfigurableResource):
    """Where Delta tables and checkpoints live (any Spark-supported URI); ``.local/lakehouse`` by default."""

    root: str = ""

    def lakehouse(self) -> Lakehouse:
        return Lakehouse(self.root or str(local_dir("lakehouse")))


class TpchResource(ConfigurableResource):
    """The generated TPC-H input (``streamjoin.datagen.tpch``): scale factor, seed and days of the changelogs
    (``days``: the orders placed over that many days; unset, TPC-H's seven years)."""

    scale_factor: float = 0.01
    seed: int = 42
    days: int | None = None

    def changelog(self) -> TpchChangelog:
        return _tpch_changelog(self.scale_factor, self.seed, self.days)


@functools.lru_cache(maxsize=2)
def _tpch_changelog(scale_factor: float, seed: int, days: int | None) -> TpchChangelog:
    # The loader and every check of a run read the same generated input: parse it once per process.
    return TpchChangelog(generate_tpch(Path(local_dir("tpch")), scale_factor), seed=seed, days=days)
