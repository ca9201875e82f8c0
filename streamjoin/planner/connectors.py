"""Connectors of declared tables: the ``WITH`` options each accepts, their checks, and what a table reads as a source.

The options of each connector:

- ``kafka``: ``topic`` (required), ``format`` = ``json`` / ``debezium-json`` / ``canal-json`` / ``maxwell-json``
  (required), ``properties.bootstrap.servers``, ``properties.<kafka setting>``, ``scan.startup.mode`` =
  ``earliest-offset`` / ``latest-offset``, ``json.rowkind-field`` (streamjoin: a JSON field carrying
  ``+I``/``-U``/``+U``/``-D``), ``canal-json.database.include`` / ``canal-json.table.include`` (a regular
  expression the whole ``database`` / ``table`` must match), ``scan.record.max-size``;
- ``upsert-kafka``: ``topic``, ``key.format`` = ``json``, ``value.format`` = ``json`` (all required),
  ``properties.bootstrap.servers``, ``properties.<kafka setting>``, ``key.fields-prefix``, ``value.fields-include``
  = ``ALL`` (default) / ``EXCEPT_KEY``, ``scan.record.max-size``; a ``PRIMARY KEY`` is required;
- ``delta``: ``path`` (default: ``<lakehouse>/<table>``), ``backfill.start-date`` (``YYYY-MM-DD``: the first day
  of a day-partitioned sink's Dagster daily partitions);
- ``values``: ``changelog-mode`` = e.g. ``I`` or ``I,UB,UA,D`` (default ``I``).

``scan.record.max-size`` (streamjoin; a size in Flink's ``MemorySize`` syntax: ``'8mb'``, ``'512 kb'``, ``'1048588'``
bytes; default 1048588 bytes, Kafka's default ``message.max.bytes``): a larger record (key + value) is a dead letter
(:mod:`streamjoin.connectors.formats`).

``upsert-kafka`` is Flink's ``UpsertKafkaDynamicTableFactory``: the primary key is read from the record key,
a record is an INSERT and a tombstone (null value) a DELETE of its key; the table declares Flink's upsert
changelog mode ``[UA, D]`` (its ``DecodingFormatWrapper``; the rows come as INSERTs), which the planner
normalizes where a consumer needs full rows (docs/semantics.md §1.8); it always reads the topic from the
earliest offset, as Flink does.

Deployment values: a ``properties.*`` option may name environment variables, ``${VAR}``
(``'properties.sasl.jaas.config' = '${KAFKA_JAAS}'``), substituted when the table's Kafka source is
built (:func:`kafka_source`, i.e. when a pipeline is planned to run; ``explain`` needs none), so a secret
stays out of the SQL files. The table's ``options`` keep the text as written; only the Spark reader's
options hold the value. An option whose name is sensitive (:func:`is_sensitive`, Flink's
``GlobalConfiguration.isSensitive``) is shown as ``******`` (:func:`redact`) wherever options are shown.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, NoReturn

from sqlglot import exp

from streamjoin.changelog import RowKind
from streamjoin.connectors.formats import CDC_FORMATS, FORMATS, pattern_error
from streamjoin.connectors.kafka import KafkaSource
from streamjoin.errors import StreamJoinError, UnsupportedPlanError, ValidationError
from streamjoin.planner.diagnostics import SqlSource, error

if TYPE_CHECKING:
    from streamjoin.planner.catalog import TableDef

__all__ = [
    "CONNECTORS",
    "HIDDEN_CONTENT",
    "KAFKA_CONNECTORS",
    "SENSITIVE_KEYS",
    "check_options",
    "is_sensitive",
    "kafka_source",
    "option_value",
    "parse_memory_size",
    "redact",
    "source_kinds",
]

#: Options each connector accepts (a ``properties.`` prefix passes Kafka client settings through).
CONNECTORS = {
    "kafka": (
        "connector",
        "topic",
        "format",
        "properties.bootstrap.servers",
        "scan.startup.mode",
        "json.rowkind-field",
        "canal-json.database.include",
        "canal-json.table.include",
        "scan.record.max-size",
    ),
    "upsert-kafka": (
        "connector",
        "topic",
        "key.format",
        "value.format",
        "properties.bootstrap.servers",
        "key.fields-prefix",
        "value.fields-include",
        "scan.record.max-size",
    ),
    "delta": ("connector", "path", "backfill.start-date"),
    "values": ("connector", "changelog-mode"),
}
#: Connectors that read a Kafka topic (:meth:`TableDef.kafka_source`).
KAFKA_CONNECTORS = ("kafka", "upsert-kafka")
_STARTUP_MODES = {"earliest-offset": "earliest", "latest-offset": "latest"}
_MODE_KINDS = {"I": RowKind.INSERT, "UB": RowKind.UPDATE_BEFORE, "UA": RowKind.UPDATE_AFTER, "D": RowKind.DELETE}
_UPSERT_FORMATS = ("json",)
_VALUE_FIELDS = ("ALL", "EXCEPT_KEY")
#: Parts of an option name that make its value a secret: Flink's ``GlobalConfiguration.SENSITIVE_KEYS``.
SENSITIVE_KEYS = (
    "password",
    "secret",
    "fs.azure.account.key",
    "apikey",
    "api-key",
    "auth-params",
    "service-key",
    "token",
    "basic-auth",
    "jaas.config",
    "http-headers",
)
#: What a sensitive value is shown as (Flink's ``GlobalConfiguration.HIDDEN_CONTENT``).
HIDDEN_CONTENT = "******"
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: Units of Flink's ``MemorySize`` (``MemorySize.MemoryUnit``: powers of 1024).
_MEMORY_UNITS = {
    **dict.fromkeys(("", "b", "bytes"), 1),
    **dict.fromkeys(("k", "kb", "kibibytes"), 1 << 10),
    **dict.fromkeys(("m", "mb", "mebibytes"), 1 << 20),
    **dict.fromkeys(("g", "gb", "gibibytes"), 1 << 30),
    **dict.fromkeys(("t", "tb", "tebibytes"), 1 << 40),
}


def parse_memory_size(text: str) -> int:
    """Flink's ``MemorySize`` text in bytes.

    The text is a number and an optional unit, 1 kb = 1024 bytes: ``'8mb'``, ``'512 kb'``, ``'1048588'``.

    Raises:
        ValueError: anything else, naming the units (``MemorySize.parse``'s rule).
    """
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _MEMORY_UNITS:
        raise ValueError(f"{text!r} is not a memory size '<number> [unit]' with unit one of b, kb, mb, gb, tb")
    return int(match.group(1)) * _MEMORY_UNITS[match.group(2).lower()]


def is_sensitive(key: str) -> bool:
    """Whether option ``key``'s value is a secret: its lower-cased name contains one of :data:`SENSITIVE_KEYS`
    (Flink's ``GlobalConfiguration.isSensitive``; ``properties.sasl.jaas.config``, ``properties.ssl.key.password``)."""
    name = key.lower()
    return any(part in name for part in SENSITIVE_KEYS)


def redact(options: dict[str, str]) -> dict[str, str]:
    """``options`` with every sensitive value (:func:`is_sensitive`) replaced by :data:`HIDDEN_CONTENT`, for display."""
    return {k: HIDDEN_CONTENT if is_sensitive(k) else v for k, v in options.items()}


def option_value(table: TableDef, key: str) -> str | None:
    """Option ``key`` of ``table``, each ``${VAR}`` replaced by the environment variable ``VAR``; ``None`` when unset.

    Only ``properties.*`` options are substituted (the Kafka client settings a deployment supplies).

    Raises:
        ValidationError: ``FILE:LINE:COL: table 't': option 'k' names environment variable 'VAR', which is not set``,
            pointing at the option (rule ``option-environment``); the message never holds the option's value.
    """
    value = table.options.get(key)
    return None if value is None else _substituted(table, key, value)


def _substituted(table: TableDef, key: str, value: str) -> str:
    """``value`` of option ``key``, each ``${VAR}`` replaced in a ``properties.*`` option (:func:`option_value`)."""
    if not key.startswith("properties."):
        return value

    def substitute(match: re.Match) -> str:
        if match[1] not in os.environ:
            raise error(
                ValidationError,
                table.source,
                _option_node(table, key),
                f"table '{table.name}': option '{key}' names environment variable '{match[1]}', which is not set",
                "option-environment",
            )
        return os.environ[match[1]]

    return _ENV_REFERENCE.sub(substitute, value)


def _option_node(table: TableDef, key: str) -> exp.Expr | None:
    # The option's own 'key' = 'value' where the table declares it; the CREATE TABLE when a LIKE table does.
    properties = table.node.args.get("properties") if table.node is not None else None
    for prop in properties.expressions if properties else []:
        if type(prop) is exp.Property and isinstance(prop.this, exp.Literal) and prop.this.name == key:
            return prop
    return table.node


def check_options(
    options: dict[str, str], primary_key: tuple[str, ...], table: str, source: SqlSource, at: exp.Expr
) -> None:
    """Check a table's ``WITH`` options against its connector (and, for ``upsert-kafka``, its primary key).

    Args:
        options: the table's options; primary_key: its ``PRIMARY KEY`` columns.
        table / source / at: the table's name, the SQL text and the node errors point at.

    Raises:
        ValidationError: an unknown connector, an option the connector does not take, a missing required
            option, an unsupported format, a format option of another format, an ``upsert-kafka`` table
            without a primary key, with a non-insert-only format or a key prefix that does not fit
            (messages after Flink's ``UpsertKafkaDynamicTableFactory`` and ``KafkaConnectorOptionsUtil``), a ``${VAR}``
            outside ``properties.*``, a ``scan.record.max-size`` that is not a memory size of at least 1 byte.
        UnsupportedPlanError: a ``scan.startup.mode`` other than ``earliest-offset`` / ``latest-offset``.
    """

    def fail(message: str, rule: str = "table-options", kind: type[StreamJoinError] = ValidationError) -> NoReturn:
        raise error(kind, source, at, f"table '{table}': {message}", rule)

    connector = options.get("connector")
    if connector not in CONNECTORS:
        fail(f"'connector' must be one of {', '.join(CONNECTORS)}; got {connector!r}", "table-connector")
    allowed = CONNECTORS[connector]
    for key, value in options.items():
        if key not in allowed and not (connector in KAFKA_CONNECTORS and key.startswith("properties.")):
            fail(f"unsupported option '{key}' for connector '{connector}'; supported: {', '.join(allowed)}")
        if _ENV_REFERENCE.search(value) and not key.startswith("properties."):
            fail(
                f"option '{key}' names an environment variable; only 'properties.*' options are substituted",
                "option-environment",
            )
    if "scan.record.max-size" in options:
        try:
            size = parse_memory_size(options["scan.record.max-size"])
        except ValueError as e:
            fail(f"scan.record.max-size {e}")
        if size < 1:
            fail("scan.record.max-size must be at least 1 byte")
    if connector == "kafka":
        _check_kafka(options, fail)
    elif connector == "upsert-kafka":
        _check_upsert_kafka(options, primary_key, fail)
    elif connector == "values":
        kinds = [k.strip() for k in options.get("changelog-mode", "I").split(",")]
        if not kinds or any(k not in _MODE_KINDS for k in kinds) or "I" not in kinds:
            fail(f"changelog-mode {options['changelog-mode']!r} must list I and any of UB, UA, D")


def _check_kafka(options: dict[str, str], fail) -> None:
    for required in ("topic", "format"):
        if required not in options:
            fail(f"connector 'kafka' needs option '{required}'")
    if options["format"] not in FORMATS:
        fail(f"format {options['format']!r} is not supported; supported: {', '.join(FORMATS)}", "table-format")
    mode = options.get("scan.startup.mode", "earliest-offset")
    if mode not in _STARTUP_MODES:
        fail(
            f"scan.startup.mode {mode!r} is not supported; supported: {', '.join(_STARTUP_MODES)}",
            kind=UnsupportedPlanError,
        )
    for key, value in options.items():
        prefix = key.split(".")[0]
        if prefix in ("json", "canal-json") and options["format"] != prefix:
            fail(f"{key} applies to format '{prefix}' only")
        if prefix == "canal-json" and (problem := pattern_error(value)):
            fail(f"{key} {problem}")


def _check_upsert_kafka(options: dict[str, str], primary_key: tuple[str, ...], fail) -> None:
    for required in ("topic", "key.format", "value.format"):
        if required not in options:
            fail(f"connector 'upsert-kafka' needs option '{required}'")
    for which in ("key", "value"):
        fmt = options[f"{which}.format"]
        if fmt in CDC_FORMATS:
            fail(
                f"'upsert-kafka' connector doesn't support '{fmt}' as {which} format, "
                f"because '{fmt}' is not in insert-only mode",
                "table-format",
            )
        if fmt not in _UPSERT_FORMATS:
            fail(f"{which}.format {fmt!r} is not supported; supported: {', '.join(_UPSERT_FORMATS)}", "table-format")
    include = options.get("value.fields-include", "ALL")
    if include not in _VALUE_FIELDS:
        fail(f"value.fields-include {include!r} must be one of {', '.join(_VALUE_FIELDS)}")
    if not primary_key:
        fail(
            "'upsert-kafka' tables require to define a PRIMARY KEY constraint: it names the columns read from the "
            "Kafka record key, and the key each record updates or deletes",
            "primary-key-columns",
        )
    prefix = options.get("key.fields-prefix", "")
    if prefix and include == "ALL":
        fail(
            "a key prefix is not allowed when option 'value.fields-include' is set to 'ALL'; "
            "set it to 'EXCEPT_KEY' instead to avoid field overlaps"
        )
    for column in primary_key:
        if not column.startswith(prefix):
            fail(
                f"all PRIMARY KEY columns must be prefixed with '{prefix}' when option 'key.fields-prefix' is set, "
                f"but column '{column}' is not prefixed",
                "primary-key-columns",
            )


def source_kinds(options: dict[str, str]) -> frozenset[RowKind]:
    """The RowKinds a table with these options produces as a source (its ``changelogMode``).

    ``kafka``: ``json`` is insert-only unless ``json.rowkind-field`` names a RowKind field; ``debezium-json``,
    ``canal-json`` and ``maxwell-json`` are full changelogs. ``upsert-kafka``: ``[UA, D]``, as Flink's
    ``UpsertKafkaDynamicTableFactory`` declares it (its records are INSERTs, read as upserts). ``values`` follows
    ``changelog-mode``; ``delta`` is insert-only.
    """
    connector = options["connector"]
    if connector == "kafka":
        if options["format"] in CDC_FORMATS or "json.rowkind-field" in options:
            return frozenset(RowKind)
        return frozenset({RowKind.INSERT})
    if connector == "upsert-kafka":
        return frozenset({RowKind.UPDATE_AFTER, RowKind.DELETE})
    if connector == "values":
        return frozenset(_MODE_KINDS[k.strip()] for k in options.get("changelog-mode", "I").split(","))
    return frozenset({RowKind.INSERT})


def kafka_source(table: TableDef) -> KafkaSource:
    """The :class:`~streamjoin.connectors.kafka.KafkaSource` of a ``kafka`` or ``upsert-kafka`` table.

    A rowtime that is a physical column gets its watermark from the source; a computed rowtime gets it
    after the computed columns (the planner's scan). ``upsert-kafka`` reads from the earliest offset.
    ``properties.<setting>`` (SASL/SSL included) becomes Spark's ``kafka.<setting>``, its ``${VAR}`` substituted.

    Raises:
        ValidationError: a ``${VAR}`` that is not set (:func:`option_value`).
    """
    options = table.options
    spark_options = {
        f"kafka.{k[len('properties.') :]}": _substituted(table, k, v)
        for k, v in options.items()
        if k.startswith("properties.") and k != "properties.bootstrap.servers"
    }
    mode = options.get("scan.startup.mode", "earliest-offset")
    if mode != "earliest-offset":
        spark_options["startingOffsets"] = _STARTUP_MODES[mode]
    rowtime_column = table.column(table.rowtime) if table.rowtime else None
    physical_rowtime = table.rowtime if rowtime_column is not None and rowtime_column.computed is None else None
    format_options: dict[str, Any]
    if table.connector == "upsert-kafka":
        format_options = {
            "format": "json",
            "rowkind_field": None,
            "upsert": True,
            "key_fields_prefix": options.get("key.fields-prefix", ""),
            "value_fields_include": options.get("value.fields-include", "ALL"),
        }
    else:
        format_options = {
            "format": options["format"],
            "database_include": options.get("canal-json.database.include"),
            "table_include": options.get("canal-json.table.include"),
        }
        if options["format"] == "json":
            format_options["rowkind_field"] = options.get("json.rowkind-field")
    if "scan.record.max-size" in options:
        format_options["max_record_bytes"] = parse_memory_size(options["scan.record.max-size"])
    return KafkaSource(
        name=table.name,
        topic=options["topic"],
        schema=table.physical_schema,
        primary_key=table.primary_key,
        rowtime=physical_rowtime,
        watermark_delay_ms=table.watermark.delay_ms if physical_rowtime and table.watermark else 0,
        options=spark_options,
        **format_options,
    )
