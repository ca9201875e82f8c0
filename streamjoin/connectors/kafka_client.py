"""A Kafka cluster as every client of the project reaches it: bootstrap servers and security settings, in one place.

The settings are Kafka's Java client properties: the names Spark's Kafka source takes after ``kafka.``
and a table takes after ``properties.`` (Flink's Kafka connector), e.g. ``security.protocol``,
``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.truststore.location``. Spark gets them as they are
(:meth:`KafkaConnection.spark_options`); the project's own clients (confluent_kafka over librdkafka:
:mod:`~streamjoin.connectors.kafka_admin`, the TPC-H loader, the lag sensor) get librdkafka's names
(:meth:`KafkaConnection.client_config`), so one setting serves both (Java client property → librdkafka setting):

- ``security.protocol``, ``sasl.mechanism``, ``ssl.key.password``, ``ssl.cipher.suites``,
  ``sasl.kerberos.service.name`` → the same;
- ``sasl.jaas.config`` (``PlainLoginModule`` / ``ScramLoginModule``) → ``sasl.username``, ``sasl.password``;
- ``ssl.truststore.location`` (``ssl.truststore.type`` = ``PEM``) / ``ssl.truststore.certificates`` →
  ``ssl.ca.location`` / ``ssl.ca.pem``;
- ``ssl.keystore.location`` (``PKCS12``), ``ssl.keystore.password`` → ``ssl.keystore.location``,
  ``ssl.keystore.password``;
- ``ssl.keystore.location`` (``ssl.keystore.type`` = ``PEM``: key and certificate chain in one file) →
  ``ssl.certificate.location``, ``ssl.key.location``;
- ``ssl.keystore.certificate.chain`` / ``ssl.keystore.key`` → ``ssl.certificate.pem`` / ``ssl.key.pem``;
- ``ssl.endpoint.identification.algorithm`` = ``https`` / ``""`` → ``https`` / ``none``.

Other ``security.``, ``sasl.`` and ``ssl.`` properties have no librdkafka counterpart and are refused
(a client that silently dropped one might connect with less security than asked for); the rest
(consumer tuning such as ``max.poll.records``) concern Spark's consumer only and are left out.

Example:
    >>> c = KafkaConnection("broker:9092", {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
    ...     "sasl.jaas.config": jaas_config("PLAIN", "alice", "pw")})
    >>> c.client_config()["sasl.username"]
    'alice'
    >>> c
    KafkaConnection('broker:9092', properties=['sasl.jaas.config', 'sasl.mechanism', 'security.protocol'])
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from streamjoin.errors import ValidationError

__all__ = ["Cluster", "KafkaConnection", "as_connection", "declared_properties", "jaas_config"]

#: Java client properties librdkafka takes under the same name.
_SAME_NAME = (
    "security.protocol",
    "sasl.mechanism",
    "ssl.key.password",
    "ssl.cipher.suites",
    "sasl.kerberos.service.name",
)
#: Java client properties read together with another one (the store types) or that PEM files do not use.
_CONSUMED = ("ssl.truststore.type", "ssl.keystore.type", "ssl.truststore.password")
_SECURITY_PREFIXES = ("security.", "sasl.", "ssl.")
_LOGIN_MODULES = {
    "PlainLoginModule": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "ScramLoginModule": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_JAAS = re.compile(
    r"\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)(?P<options>.*?);?\s*$", re.DOTALL
)
_JAAS_OPTION = re.compile(r'\s*([\w.]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+))')


def jaas_config(mechanism: str, username: str, password: str) -> str:
    """The ``sasl.jaas.config`` of a user and password: Kafka's ``PlainLoginModule`` for ``PLAIN``, its
    ``ScramLoginModule`` for ``SCRAM-SHA-256`` / ``SCRAM-SHA-512``.

    Raises:
        ValidationError: another mechanism (``GSSAPI`` and ``OAUTHBEARER`` log in without a password).
    """
    name = mechanism.upper()
    if name != "PLAIN" and not name.startswith("SCRAM-"):
        raise ValidationError(
            f"sasl mechanism {mechanism!r} does not log in with a username and password: "
            "give its sasl.jaas.config in the properties instead"
        )
    module = _LOGIN_MODULES["PlainLoginModule" if name == "PLAIN" else "ScramLoginModule"]

    def quoted(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return f"{module} required username={quoted(username)} password={quoted(password)};"


def _jaas_credentials(text: str) -> dict[str, str]:
    """``sasl.username`` / ``sasl.password`` of a Plain or SCRAM ``sasl.jaas.config``."""
    match = _JAAS.fullmatch(text)
    module = match and match["module"].rsplit(".", 1)[-1]
    if module not in _LOGIN_MODULES:
        shown = match["module"] if match else "text that is not 'LoginModule required key=\"value\" ...;'"
        raise ValidationError(
            f"sasl.jaas.config names {shown}: the project's own Kafka clients (librdkafka) log in "
            "with PlainLoginModule or ScramLoginModule only"
        )
    assert match is not None  # no match has no module: refused above
    options = {
        m[1]: re.sub(r"\\(.)", r"\1", m[2]) if m[2] is not None else m[3]
        for m in _JAAS_OPTION.finditer(match["options"])
    }
    missing = [k for k in ("username", "password") if k not in options]
    if missing:
        raise ValidationError(f"sasl.jaas.config of {module} has no {' and no '.join(missing)}")
    return {"sasl.username": options["username"], "sasl.password": options["password"]}


def _store_type(properties: Mapping[str, str], key: str, default: str) -> str:
    return properties.get(key, default).strip().upper()


@dataclass(frozen=True)
class KafkaConnection:
    """A Kafka cluster: its bootstrap servers and the Java client properties to reach it (security settings).

    The repr names the properties, never their values (they hold passwords).

    Attributes:
        bootstrap_servers: ``"host:port[,...]"``.
        properties: Java client properties without prefix (``{"security.protocol": "SASL_SSL", ...}``);
            ``bootstrap.servers`` never among them.
    """

    bootstrap_servers: str
    properties: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if "bootstrap.servers" in self.properties:
            raise ValidationError("KafkaConnection: give the servers as bootstrap_servers, not as a property")
        object.__setattr__(self, "properties", dict(self.properties))

    def __repr__(self) -> str:
        return f"KafkaConnection({self.bootstrap_servers!r}, properties={sorted(self.properties)})"

    def with_properties(self, properties: Mapping[str, str]) -> KafkaConnection:
        """This cluster with ``properties`` added; they win over this connection's own (a table's over a resource's)."""
        return KafkaConnection(self.bootstrap_servers, {**self.properties, **properties})

    def spark_options(self) -> dict[str, str]:
        """Options of Spark's Kafka source and sink: ``kafka.bootstrap.servers`` and ``kafka.<property>``."""
        return {
            "kafka.bootstrap.servers": self.bootstrap_servers,
            **{f"kafka.{k}": v for k, v in self.properties.items()},
        }

    def client_config(self) -> dict[str, str]:
        """The confluent_kafka (librdkafka) configuration of a client of this cluster (the table of the module).

        Raises:
            ValidationError: a security property librdkafka has no counterpart for (a Java key store
                or trust store, a login module other than Plain / SCRAM, another ``ssl.*``), named.
        """
        properties = self.properties
        config = {"bootstrap.servers": self.bootstrap_servers}
        for key, value in properties.items():
            if key in _SAME_NAME:
                config[key] = value
            elif key == "sasl.jaas.config":
                config.update(_jaas_credentials(value))
            elif key == "ssl.truststore.location":
                if _store_type(properties, "ssl.truststore.type", "JKS") != "PEM":
                    raise ValidationError(
                        "ssl.truststore.location: librdkafka reads no Java trust store; give a PEM file of the CA "
                        "certificates with ssl.truststore.type = PEM (Spark's Kafka client reads it too)"
                    )
                config["ssl.ca.location"] = value
            elif key == "ssl.truststore.certificates":
                config["ssl.ca.pem"] = value
            elif key == "ssl.keystore.location":
                kind = _store_type(properties, "ssl.keystore.type", "JKS")
                if kind == "PEM":
                    config["ssl.certificate.location"] = config["ssl.key.location"] = value
                elif kind == "PKCS12":
                    config["ssl.keystore.location"] = value
                else:
                    raise ValidationError(
                        f"ssl.keystore.location: librdkafka reads no {kind} key store; give a PKCS12 "
                        "or PEM one (ssl.keystore.type)"
                    )
            elif key == "ssl.keystore.password":
                if _store_type(properties, "ssl.keystore.type", "JKS") != "PEM":
                    config[key] = value
            elif key == "ssl.keystore.certificate.chain":
                config["ssl.certificate.pem"] = value
            elif key == "ssl.keystore.key":
                config["ssl.key.pem"] = value
            elif key == "ssl.endpoint.identification.algorithm":
                config[key] = value.strip().lower() or "none"
            elif key.startswith(_SECURITY_PREFIXES) and key not in _CONSUMED:
                raise ValidationError(
                    f"Kafka client property {key!r} has no librdkafka counterpart for the project's own "
                    "clients (see streamjoin.connectors.kafka_client)"
                )
        return config


#: A cluster as the helpers of :mod:`~streamjoin.connectors.kafka_admin` take it: a connection, or bootstrap
#: servers alone (a cluster without security settings).
Cluster = KafkaConnection | str


def as_connection(cluster: Cluster) -> KafkaConnection:
    """``cluster`` as a :class:`KafkaConnection` (bootstrap servers alone: no properties)."""
    return cluster if isinstance(cluster, KafkaConnection) else KafkaConnection(cluster)


def declared_properties(spark_options: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """The Java client properties that Kafka sources declare, from their Spark options (``kafka.<property>``,
    :attr:`streamjoin.connectors.kafka.KafkaSource.options`: a table's ``properties.*``, ``${VAR}`` substituted).

    Raises:
        ValidationError: two sources that give one property different values (one client cannot log in twice).
    """
    merged: dict[str, str] = {}
    for options in spark_options:
        for key, value in options.items():
            if not key.startswith("kafka."):
                continue
            name = key.removeprefix("kafka.")
            if merged.setdefault(name, value) != value:
                raise ValidationError(f"the Kafka tables of one pipeline give property {name!r} different values")
    return merged
