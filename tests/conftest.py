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
    """Bootstrap servers of a real Kafka broker: ``$KAFKA_BOOTSTRAP_SERVERS``, else an embedded one for the session.

    The embedded broker is not the local service: it dies with the test process, however that ends.
    """
    import os

    from streamjoin.connectors.embedded_kafka import BOOTSTRAP_ENV, EmbeddedKafka

    if os.environ.get(BOOTSTRAP_ENV):
        yield os.environ[BOOTSTRAP_ENV]
        return
    with EmbeddedKafka(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker.bootstrap_servers


#: Scale factor of the TPC-H input of the end-to-end tests (1,500 orders, 6,000 line items).
SCALE_FACTOR = 0.001


@pytest.fixture(scope="session")
def tpch():
    """The generated TPC-H changelogs (``streamjoin.datagen.tpch``) at :data:`SCALE_FACTOR`."""
    from streamjoin.config import local_dir
    from streamjoin.datagen.tpch import TpchChangelog, generate_tpch

    return TpchChangelog(generate_tpch(local_dir("tpch"), SCALE_FACTOR))


@pytest.fixture(scope="session")
def tpch_inputs(spark, tpch):
    """:data:`tpch` as batch DataFrames (``checks.batch_inputs.BatchInputs``), for the batch expectations of ``checks``."""
    from checks.batch_inputs import BatchInputs

    return BatchInputs(spark, tpch)


@pytest.fixture(scope="session")
def demo_topics(kafka_bootstrap, tpch):
    """The demo topics (orders, lineitem, order_events, shipments, rates) loaded once into the test broker; records per topic."""
    from streamjoin.datagen.topics import load_topics

    return load_topics(kafka_bootstrap, tpch)


@pytest.fixture(params=["jvm", "python"])
def engine(request, spark):
    """Run the test once per operator engine (``spark.streamjoin.engine``); yields the engine's name."""
    from streamjoin.runtime.engine import ENGINE_CONF

    before = spark.conf.get(ENGINE_CONF)
    spark.conf.set(ENGINE_CONF, request.param)
    yield request.param
    spark.conf.set(ENGINE_CONF, before)


#: For an operator-level replay of cases that ``test_replay.py`` / ``test_flink_diff.py`` already run on
#: both engines through the planner: the ``engine`` fixture on the default (jvm) engine only, which keeps
#: the suite within its time.
jvm_only = pytest.mark.parametrize("engine", ["jvm"], indirect=True)
