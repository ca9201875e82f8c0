"""Kafka security settings in one place (``streamjoin.connectors.kafka_client``): Java client properties (Spark's
``kafka.*``, a table's ``properties.*``) to librdkafka's names, the ``KafkaResource``'s fields from ``dg.EnvVar``."""

import pytest
from confluent_kafka.admin import AdminClient
from dagster import EnvVar

from resources import KafkaResource
from streamjoin.connectors.kafka_client import KafkaConnection, as_connection, declared_properties, jaas_config
from streamjoin.errors import ValidationError

SECRET = 'pw "quoted" \\ back'


def test_sasl_and_pem_ssl_settings_become_librdkafkas_and_stay_sparks():
    properties = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": jaas_config("SCRAM-SHA-512", "alice", SECRET),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/kafka/ca.pem",
        "ssl.truststore.password": "unused",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": "/etc/kafka/client.p12",
        "ssl.keystore.password": "kpw",
        "ssl.key.password": "keypw",
        "ssl.endpoint.identification.algorithm": "",
        "max.poll.records": "100",  # Spark's consumer's only
    }
    connection = KafkaConnection("b1:9093,b2:9093", properties)
    assert connection.client_config() == {
        "bootstrap.servers": "b1:9093,b2:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": SECRET,
        "ssl.ca.location": "/etc/kafka/ca.pem",
        "ssl.keystore.location": "/etc/kafka/client.p12",
        "ssl.keystore.password": "kpw",
        "ssl.key.password": "keypw",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert connection.spark_options() == {
        "kafka.bootstrap.servers": "b1:9093,b2:9093",
        **{f"kafka.{k}": v for k, v in properties.items()},
    }
    # librdkafka itself takes the names (it would open the files too, which do not exist here).
    AdminClient({k: v for k, v in connection.client_config().items() if not k.endswith(".location")})
    assert "jaas" in repr(connection) and SECRET not in repr(connection) and "kpw" not in repr(connection)


def test_a_pem_key_store_and_inline_certificates():
    connection = KafkaConnection(
        "b:9093",
        {
            "security.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/k/client.pem",
            "ssl.keystore.password": "ignored",
            "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----...",
        },
    )
    assert connection.client_config() == {
        "bootstrap.servers": "b:9093",
        "security.protocol": "SSL",
        "ssl.certificate.location": "/k/client.pem",
        "ssl.key.location": "/k/client.pem",
        "ssl.ca.pem": "-----BEGIN CERTIFICATE-----...",
    }


def test_the_login_module_line_round_trips_quotes_and_plain_takes_a_short_module_name():
    line = jaas_config("PLAIN", "u", SECRET)
    assert line.startswith("org.apache.kafka.common.security.plain.PlainLoginModule required ")
    assert KafkaConnection("b:1", {"sasl.jaas.config": line}).client_config()["sasl.password"] == SECRET
    short = 'PlainLoginModule required\n  username="u"   password=p2;'
    assert KafkaConnection("b:1", {"sasl.jaas.config": short}).client_config()["sasl.password"] == "p2"


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"ssl.truststore.location": "/t.jks"}, "librdkafka reads no Java trust store"),
        ({"ssl.keystore.location": "/k.jks", "ssl.keystore.password": "x"}, "librdkafka reads no JKS key store"),
        (
            {"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"},
            "names com.sun.security.auth.module.Krb5LoginModule",
        ),
        ({"sasl.jaas.config": 'PlainLoginModule required username="u";'}, "PlainLoginModule has no password"),
        (
            {"sasl.login.callback.handler.class": "x.Y"},
            "'sasl.login.callback.handler.class' has no librdkafka counterpart",
        ),
    ],
)
def test_settings_librdkafka_cannot_follow_are_refused_by_name(properties, message):
    with pytest.raises(ValidationError, match=message):
        KafkaConnection("b:1", properties).client_config()


def test_a_password_mechanism_only_and_no_servers_among_the_properties():
    with pytest.raises(ValidationError, match="'OAUTHBEARER' does not log in with a username and password"):
        jaas_config("OAUTHBEARER", "u", "p")
    with pytest.raises(ValidationError, match="as bootstrap_servers"):
        KafkaConnection("b:1", {"bootstrap.servers": "c:2"})
    assert (
        as_connection("b:1") == KafkaConnection("b:1")
        and as_connection(KafkaConnection("c:2")).bootstrap_servers == "c:2"
    )


def test_declared_properties_merge_the_sources_and_refuse_two_logins():
    one = {"kafka.security.protocol": "SASL_SSL", "startingOffsets": "latest"}
    assert declared_properties([one, {"kafka.sasl.mechanism": "PLAIN"}, one]) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
    }
    with pytest.raises(ValidationError, match="property 'security.protocol' different values"):
        declared_properties([one, {"kafka.security.protocol": "SSL"}])


def test_the_resource_takes_its_login_from_envvars_and_the_tables_properties_win(monkeypatch):
    monkeypatch.setenv("SJ_TEST_KAFKA_PASSWORD", SECRET)
    resource = KafkaResource(
        bootstrap_servers="b:9093",
        security_protocol="SASL_SSL",
        sasl_username="svc",
        sasl_password=EnvVar("SJ_TEST_KAFKA_PASSWORD"),
        ssl_truststore_location="/ca.pem",
        properties={"ssl.endpoint.identification.algorithm": "https"},
    )
    assert SECRET not in repr(resource)  # the variable's name until a run resolves it
    resolved = resource.process_config_and_initialize()
    assert SECRET not in repr(resolved) and SECRET not in str(resolved) and "svc" in repr(resolved)
    keystore = KafkaResource(properties={"ssl.keystore.password": SECRET})
    assert SECRET not in repr(keystore) and SECRET not in str(keystore)
    connection = resolved.connection()
    assert connection.properties == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.pem",
        "sasl.jaas.config": jaas_config("PLAIN", "svc", SECRET),
        "ssl.endpoint.identification.algorithm": "https",
    }
    assert connection.client_config()["sasl.password"] == SECRET
    declared = resource.process_config_and_initialize().connection({"sasl.mechanism": "SCRAM-SHA-256"})
    assert declared.properties["sasl.mechanism"] == "SCRAM-SHA-256"
    assert KafkaResource(bootstrap_servers="b:1").connection() == KafkaConnection("b:1")
