"""Connectors of declared tables: the ``WITH`` options each accepts, their checks, and what a table reads as a source.

| connector | options |
| --- | --- |
| ``kafka`` | ``topic`` (required), ``format`` = ``json`` / ``debezium-json`` / ``canal-json`` / ``maxwell-json`` (required), ``properties.bootstrap.servers``, ``properties.<kafka setting>``, ``scan.startup.mode`` = ``earliest-offset`` / ``latest-offset``, ``json.rowkind-field`` (streamjoin: a JSON field carrying ``+I``/``-U``/``+U``/``-D``), ``canal-json.database.include`` / ``canal-json.table.include`` (a regular expression the whole ``database`` / ``table`` must match) |
| ``upsert-kafka`` | ``topic``, ``key.format`` = ``json``, ``value.format`` = ``json`` (all required), ``properties.bootstrap.servers``, ``properties.<kafka setting>``, ``key.fields-prefix``, ``value.fields-include`` = ``ALL`` (default) / ``EXCEPT_KEY``; a ``PRIMARY KEY`` is required |
| ``delta`` | ``path`` (default: ``<lakehouse>/<table>``), ``backfill.start-date`` (``YYYY-MM-DD``: the first day of a day-partitioned sink's Dagster daily partitions) |
| ``values`` | ``changelog-mode`` = e.g. ``I`` or ``I,UB,UA,D`` (default ``I``) |

``upsert-kafka`` is Flink's ``UpsertKafkaDynamicTableFactory``: the primary key is read from the record key,
a record is an INSERT and a tombstone (null value) a DELETE of its key; the table declares Flink's upsert
changelog mode ``[UA, D]`` (its ``DecodingFormatWrapper``; the rows come as INSERTs), which the planner normalizes where a consumer needs full rows (docs/semantics.md §1.8); it
always reads the topic from the earliest offset, as Flink does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from sqlglot import exp

from streamjoin.changelog import RowKind
from streamjoin.connectors.formats import CDC_FORMATS, FORMATS, pattern_error
from streamjoin.connectors.kafka import KafkaSource
from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner.diagnostics import SqlSource, error

if TYPE_CHECKING:
    from streamjoin.planner.catalog import TableDef

__all__ = ["CONNECTORS", "KAFKA_CONNECTORS", "check_options", "source_kinds", "kafka_source"]

#: Options each connector accepts (a ``properties.`` prefix passes Kafka client settings through).
CONNECTORS = {
    "kafka": ("connector", "topic", "format", "properties.bootstrap.servers", "scan.startup.mode", "json.rowkind-field",
              "canal-json.database.include", "canal-json.table.include"),
    "upsert-kafka": ("connector", "topic", "key.format", "value.format", "properties.bootstrap.servers", "key.fields-prefix",
                     "value.fields-include"),
    "delta": ("connector", "path", "backfill.start-date"),
    "values": ("connector", "changelog-mode"),
}
#: Connectors that read a Kafka topic (:meth:`TableDef.kafka_source`).
KAFKA_CONNECTORS = ("kafka", "upsert-kafka")
_STARTUP_MODES = {"earliest-offset": "earliest", "latest-offset": "latest"}
_MODE_KINDS = {"I": RowKind.INSERT, "UB": RowKind.UPDATE_BEFORE, "UA": RowKind.UPDATE_AFTER, "D": RowKind.DELETE}
_UPSERT_FORMATS = ("json",)
_VALUE_FIELDS = ("ALL", "EXCEPT_KEY")


def check_options(options: dict[str, str], primary_key: tuple[str, ...], table: str, source: SqlSource, at: exp.Expr) -> None:
    """Check a table's ``WITH`` options against its connector (and, for ``upsert-kafka``, its primary key).

    Args:
        options: the table's options; primary_key: its ``PRIMARY KEY`` columns.
        table / source / at: the table's name, the SQL text and the node errors point at.

    Raises:
        ValidationError: an unknown connector, an option the connector does not take, a missing required
            option, an unsupported format, a format option of another format, an ``upsert-kafka`` table
            without a primary key, with a non-insert-only format or a key prefix that does not fit
            (messages after Flink's ``UpsertKafkaDynamicTableFactory`` and ``KafkaConnectorOptionsUtil``).
        UnsupportedPlanError: a ``scan.startup.mode`` other than ``earliest-offset`` / ``latest-offset``.
    """
    def fail(message: str, rule: str = "table-options", kind: type[Exception] = ValidationError) -> NoReturn:
        raise error(kind, source, at, f"table '{table}': {message}", rule)

    connector = options.get("connector")
    if connector not in CONNECTORS:
        fail(f"'connector' must be one of {', '.join(CONNECTORS)}; got {connector!r}", "table-connector")
    allowed = CONNECTORS[connector]
    for key in options:
        if key not in allowed and not (connector in KAFKA_CONNECTORS and key.startswith("properties.")):
            fail(f"unsupported option '{key}' for connector '{connector}'; supported: {', '.join(allowed)}")
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
        fail(f"scan.startup.mode {mode!r} is not supported; supported: {', '.join(_STARTUP_MODES)}", kind=UnsupportedPlanError)
    for key in options:
        prefix = key.split(".")[0]
        if prefix in ("json", "canal-json") and options["format"] != prefix:
            fail(f"{key} applies to format '{prefix}' only")
        if prefix == "canal-json" and (problem := pattern_error(options[key])):
            fail(f"{key} {problem}")


def _check_upsert_kafka(options: dict[str, str], primary_key: tuple[str, ...], fail) -> None:
    for required in ("topic", "key.format", "value.format"):
        if required not in options:
            fail(f"connector 'upsert-kafka' needs option '{required}'")
    for which in ("key", "value"):
        fmt = options[f"{which}.format"]
        if fmt in CDC_FORMATS:
            fail(f"'upsert-kafka' connector doesn't support '{fmt}' as {which} format, because '{fmt}' is not in insert-only mode",
                 "table-format")
        if fmt not in _UPSERT_FORMATS:
            fail(f"{which}.format {fmt!r} is not supported; supported: {', '.join(_UPSERT_FORMATS)}", "table-format")
    include = options.get("value.fields-include", "ALL")
    if include not in _VALUE_FIELDS:
        fail(f"value.fields-include {include!r} must be one of {', '.join(_VALUE_FIELDS)}")
    if not primary_key:
        fail("'upsert-kafka' tables require to define a PRIMARY KEY constraint: it names the columns read from the "
             "Kafka record key, and the key each record updates or deletes", "primary-key-columns")
    prefix = options.get("key.fields-prefix", "")
    if prefix and include == "ALL":
        fail("a key prefix is not allowed when option 'value.fields-include' is set to 'ALL'; "
             "set it to 'EXCEPT_KEY' instead to avoid field overlaps")
    for column in primary_key:
        if not column.startswith(prefix):
            fail(f"all PRIMARY KEY columns must be prefixed with '{prefix}' when option 'key.fields-prefix' is set, "
                 f"but column '{column}' is not prefixed", "primary-key-columns")


def source_kinds(options: dict[str, str]) -> frozenset[RowKind]:
    """The RowKinds a table with these options produces as a source (its ``changelogMode``).

    ``kafka``: ``json`` is insert-only unless ``json.rowkind-field`` names a RowKind field; ``debezium-json``,
    ``canal-json`` and ``maxwell-json`` are full changelogs. ``upsert-kafka``: ``[UA, D]``, as Flink's
    ``UpsertKafkaDynamicTableFactory`` declares it (its records are INSERTs, read as upserts). ``values`` follows ``changelog-mode``; ``delta`` is insert-only.
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
    """
    options = table.options
    spark_options = {f"kafka.{k[len('properties.'):]}": v for k, v in options.items()
                     if k.startswith("properties.") and k != "properties.bootstrap.servers"}
    mode = options.get("scan.startup.mode", "earliest-offset")
    if mode != "earliest-offset":
        spark_options["startingOffsets"] = _STARTUP_MODES[mode]
    physical_rowtime = table.rowtime if table.rowtime and table.column(table.rowtime).computed is None else None
    if table.connector == "upsert-kafka":
        format_options = {"format": "json", "rowkind_field": None, "upsert": True,
                          "key_fields_prefix": options.get("key.fields-prefix", ""),
                          "value_fields_include": options.get("value.fields-include", "ALL")}
    else:
        format_options = {"format": options["format"],
                          "database_include": options.get("canal-json.database.include"),
                          "table_include": options.get("canal-json.table.include")}
        if options["format"] == "json":
            format_options["rowkind_field"] = options.get("json.rowkind-field")
    return KafkaSource(
        name=table.name,
        topic=options["topic"],
        schema=table.physical_schema,
        primary_key=table.primary_key,
        rowtime=physical_rowtime,
        watermark_delay_ms=table.watermark.delay_ms if physical_rowtime else 0,
        options=spark_options,
        **format_options,
    )
