"""Shared fixtures: one Spark session and one Kafka broker per test session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from streamjoin.session import spark_session

    session = spark_session("streamjoin-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory):
    """Bootstrap servers of a real Kafka broker: ``$KAFKA_BOOTSTRAP_SERVERS``, else an embedded one."""
    from streamjoin.connectors.embedded_kafka import kafka_cluster

    with kafka_cluster(tmp_path_factory.mktemp("kafka")) as bootstrap:
        yield bootstrap
