"""Connectors: Kafka in (decode ``json`` / ``debezium-json`` / ``canal-json`` / ``maxwell-json`` into changelog
rows, dead letters; the decoders are in :mod:`~streamjoin.connectors.formats`),
Kafka cluster chores, the embedded broker, and changelog files for tests and case replay.

Public API (each name is imported from its module on first use):

- :class:`KafkaSource`, :func:`read_kafka`, :func:`decode`, :func:`changelog_rows`, :func:`dead_letters`,
  :data:`DEAD_LETTER_COLUMNS` (:mod:`~streamjoin.connectors.kafka`);
- :class:`KafkaConnection`, :func:`declared_properties`, :func:`jaas_config`
  (:mod:`~streamjoin.connectors.kafka_client`: a cluster's servers and security settings, for Spark's reader and
  the project's own clients);
- :func:`ensure_topics`, :func:`delete_topics`, :func:`produce`, :func:`topic_offsets`
  (:mod:`~streamjoin.connectors.kafka_admin`);
- :class:`EmbeddedKafka`, :data:`BOOTSTRAP_ENV` (:mod:`~streamjoin.connectors.embedded_kafka`);
- :func:`start_service`, :func:`service_status`, :func:`stop_service`, :func:`resolve_bootstrap_servers`
  (:mod:`~streamjoin.connectors.kafka_service`, the local broker the CLI, Dagster and tests share);
- :func:`changelog_file_stream`, :func:`changelog_schema`, :func:`write_changelog_batches`,
  :func:`read_changelog_files` (:mod:`~streamjoin.connectors.changelog_files`).

Their errors are in :mod:`streamjoin.errors` (``ConnectorError`` and its subclasses).
"""

from streamjoin._lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(
        ["KafkaSource", "read_kafka", "decode", "changelog_rows", "dead_letters", "DEAD_LETTER_COLUMNS"],
        "streamjoin.connectors.kafka",
    ),
    **dict.fromkeys(["KafkaConnection", "declared_properties", "jaas_config"], "streamjoin.connectors.kafka_client"),
    **dict.fromkeys(
        ["ensure_topics", "delete_topics", "produce", "topic_offsets"], "streamjoin.connectors.kafka_admin"
    ),
    **dict.fromkeys(["EmbeddedKafka", "BOOTSTRAP_ENV"], "streamjoin.connectors.embedded_kafka"),
    **dict.fromkeys(
        ["start_service", "service_status", "stop_service", "resolve_bootstrap_servers"],
        "streamjoin.connectors.kafka_service",
    ),
    **dict.fromkeys(
        ["changelog_file_stream", "changelog_schema", "write_changelog_batches", "read_changelog_files"],
        "streamjoin.connectors.changelog_files",
    ),
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
