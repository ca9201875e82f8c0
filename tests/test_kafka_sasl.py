"""A secured cluster end to end: the embedded broker with a SASL_PLAINTEXT listener (SASL/PLAIN).

The project's own clients log in with the ``KafkaResource``'s settings, the password from ``dg.EnvVar``: the
TPC-H loader as the Dagster job ``load_tpch_topics_job`` and the Kafka-lag sensor. Spark reads through
``streamjoin run`` with the login in the SQL as ``${VAR}``, and the lag sensor then takes it from the SQL
alone. Wrong credentials fail at once, naming the authentication failure.
"""

import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from dagster import DagsterInstance, EnvVar, RunRequest, SkipReason, build_sensor_context

from assets.sql_pipelines import load_sql_pipelines
from jobs import load_tpch_topics_job
from jobs.sensors import kafka_lag_sensor
from resources import KafkaResource, LakehouseResource, SparkResource, TpchResource
from streamjoin.cli import main
from streamjoin.connectors.embedded_kafka import EmbeddedKafka
from streamjoin.connectors.kafka_admin import ensure_topics, produce, topic_offsets
from streamjoin.connectors.kafka_client import KafkaConnection, declared_properties, jaas_config
from tests.conftest import DAYS, SCALE_FACTOR
from tests.sql_folders import orders_current_with_orders_options

USER, PASSWORD = "streamjoin", "sasl-pw-5b1e07"
WRONG = "not-the-password"


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    with EmbeddedKafka(tmp_path_factory.mktemp("sasl-kafka"), sasl_users={USER: PASSWORD}) as broker:
        yield broker


def _resource(broker) -> KafkaResource:
    return KafkaResource(
        bootstrap_servers=broker.bootstrap_servers,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_username=USER,
        sasl_password=EnvVar("SJ_TEST_KAFKA_PASSWORD"),
    )


def _sql(tmp_path):
    """``sql/orders_current.sql`` over a catalog whose ``orders`` table logs in with ``${SJ_TEST_KAFKA_JAAS}``."""
    return orders_current_with_orders_options(
        tmp_path,
        (
            "  'properties.security.protocol' = 'SASL_PLAINTEXT',\n  'properties.sasl.mechanism' = 'PLAIN',\n"
            "  'properties.sasl.jaas.config' = '${SJ_TEST_KAFKA_JAAS}',\n"
        ),
    )


def _lag_sensor(properties=None):
    from dagster_project.definitions import PIPELINE_JOBS

    return kafka_lag_sensor(
        "orders_current", ["orders"], PIPELINE_JOBS["orders_current_job"], threshold=1, properties=properties
    )


def _causes(error: BaseException) -> str:
    text = []
    while error is not None:
        text.append(str(error))
        error = error.__cause__
    return "\n".join(text)


@pytest.mark.e2e
def test_loader_sensor_and_spark_log_in_to_a_sasl_cluster(spark, sasl_broker, tpch, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SJ_TEST_KAFKA_PASSWORD", PASSWORD)
    monkeypatch.setenv("SJ_TEST_KAFKA_JAAS", jaas_config("PLAIN", USER, PASSWORD))
    servers = sasl_broker.bootstrap_servers
    instance = DagsterInstance.ephemeral()
    loaded = load_tpch_topics_job.execute_in_process(
        instance=instance,
        resources={"kafka": _resource(sasl_broker), "tpch": TpchResource(scale_factor=SCALE_FACTOR, days=DAYS)},
    )
    assert loaded.success
    counts = loaded.output_for_node("load_tpch_topics")
    assert counts["orders"] > 1000
    assert {t: sum(h - lo for lo, h in topic_offsets(sasl_broker.connection, t).values()) for t in counts} == counts
    assert not [e for e in instance.all_logs(loaded.run_id) if PASSWORD in repr(e)]

    lake = tmp_path / "lake"
    behind, _ = _evaluate(_lag_sensor(), _resource(sasl_broker), lake)
    assert isinstance(behind, RunRequest) and behind.tags["kafka_lag"] == str(counts["orders"])

    pipeline_file = _sql(tmp_path) / "orders_current.sql"
    assert (
        main(["run", str(pipeline_file), "--available-now", "--bootstrap-servers", servers, "--lakehouse", str(lake)])
        == 0
    )
    assert f"records read {{'orders': {counts['orders']}}}" in capsys.readouterr().out
    assert spark.read.format("delta").load(str(lake / "orders_current")).count() == len(tpch.final_orders())

    # The pipeline's own tables declare the login: a resource with the servers alone is enough for its sensor.
    [definition] = load_sql_pipelines(pipeline_file.parent)
    declared = declared_properties(s.options for s in definition.pipeline.sources)
    caught_up, _ = _evaluate(_lag_sensor(declared), KafkaResource(bootstrap_servers=servers), lake)
    assert isinstance(caught_up, SkipReason) and caught_up.skip_message.startswith("orders_current is 0 records behind")


def _evaluate(sensor, kafka: KafkaResource, lake):
    context = build_sensor_context(
        resources={"kafka": kafka, "lakehouse": LakehouseResource(root=str(lake)), "spark": SparkResource()}
    )
    return sensor(context), context.cursor


def test_wrong_credentials_fail_at_once_naming_the_authentication_failure(sasl_broker, monkeypatch):
    wrong = KafkaConnection(
        sasl_broker.bootstrap_servers,
        {**sasl_broker.connection.properties, "sasl.jaas.config": jaas_config("PLAIN", USER, WRONG)},
    )
    for attempt in (lambda: ensure_topics(wrong, {"never": 1}), lambda: produce(wrong, "never", [("k", "v")])):
        started = time.monotonic()
        with pytest.raises(KafkaException) as refused:
            attempt()
        assert time.monotonic() - started < 10  # not the 30 s / 60 s timeouts
        error = refused.value.args[0]
        assert error.code() == KafkaError._AUTHENTICATION and not error.retriable()
        assert "Kafka authentication failed" in error.str() and "Invalid username or password" in error.str()

    monkeypatch.setenv("SJ_TEST_KAFKA_PASSWORD", WRONG)
    with pytest.raises(Exception) as failed:  # the tick fails; Dagster wraps the client's error
        _evaluate(_lag_sensor(), _resource(sasl_broker), "/nonexistent")
    assert "Kafka authentication failed" in _causes(failed.value) and WRONG not in _causes(failed.value)


@pytest.mark.e2e
def test_spark_with_wrong_credentials_fails_naming_the_authentication_failure(
    spark, sasl_broker, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("SJ_TEST_KAFKA_JAAS", jaas_config("PLAIN", USER, WRONG))
    ensure_topics(sasl_broker.connection, {"orders": 2})
    started = time.monotonic()
    code = main(
        [
            "run",
            str(_sql(tmp_path) / "orders_current.sql"),
            "--available-now",
            "--bootstrap-servers",
            sasl_broker.bootstrap_servers,
            "--lakehouse",
            str(tmp_path / "lake"),
        ]
    )
    printed = capsys.readouterr()
    assert code != 0 and "Authentication failed" in printed.err, printed.err
    assert WRONG not in printed.out + printed.err
    assert time.monotonic() - started < 60
