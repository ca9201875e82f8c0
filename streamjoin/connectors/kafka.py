"""Kafka source: Spark's Kafka connector, records decoded into changelog rows.

Value formats (``json``, ``debezium-json``, ``canal-json``, ``maxwell-json``) are
decoded by :mod:`streamjoin.connectors.formats`, in Spark SQL over VARIANT; an
``upsert-kafka`` source (``KafkaSource(upsert=True)``) also reads the primary key from
the record key and takes a null value (a tombstone) as a delete. A
record Flink would fail on is a **dead letter**: it is left out of the changelog
and reported by :func:`dead_letters` with its raw bytes, topic, partition, offset
and the reason; so is a record larger than the source's ``max_record_bytes``.
Nothing is dropped silently and the query keeps running; what Flink's format skips (a canal DDL event, a record
a canal filter excludes, a tombstone: a null or empty value) is skipped.

Order: ``_seq = offset * n + i`` where ``i`` is the change's index inside its
record and ``n`` the most changes a record of the format gives
(:func:`~streamjoin.connectors.formats.changes_per_record`: 2, canal 65536),
so changes of one partition are ordered; a producer that keys records by
primary key keeps each key's changes in one partition and therefore in order
(docs/semantics.md §1, upsert key).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN
from streamjoin.connectors.end_of_input import END_OF_INPUT_COLUMN, drop_control_rows
from streamjoin.connectors.formats import (
    CHANGES,
    DEFAULT_MAX_RECORD_BYTES,
    ERROR,
    FORMATS,
    changes_per_record,
    decode,
    pattern_error,
)
from streamjoin.connectors.kafka_client import Cluster, as_connection
from streamjoin.connectors.watermark import with_source_watermark
from streamjoin.errors import ValidationError

__all__ = ["DEAD_LETTER_COLUMNS", "KafkaSource", "changelog_rows", "dead_letters", "decode", "read_kafka"]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: Columns of a dead-letter table (and of :func:`dead_letters`' DataFrame).
DEAD_LETTER_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "reason")


@dataclass(frozen=True)
class KafkaSource:
    """A Kafka topic declared as a changelog table (Flink's ``'connector' = 'kafka'``).

    Args:
        name: table name.
        topic: Kafka topic.
        schema: the declared columns; JSON fields are looked up by these names.
        format: ``"json"``, ``"debezium-json"``, ``"canal-json"`` or ``"maxwell-json"``
            (:mod:`streamjoin.connectors.formats`).
        primary_key: columns that identify a row; a record with a null one is a dead letter.
        rowtime: event-time column (TIMESTAMP); with it the stream carries a watermark.
        watermark_delay_ms: the watermark is ``max(rowtime) - watermark_delay_ms`` (milliseconds).
        rowkind_field: ``json`` only: the field holding the RowKind, ``None`` for insert-only topics
            (and for an upsert source, whose values are insert-only as Flink's upsert-kafka requires).
        database_include, table_include: ``canal-json`` only: a regular expression (Java syntax) the
            record's whole ``database`` / ``table`` must match, else the record is skipped
            (Flink's ``canal-json.database.include`` / ``canal-json.table.include``).
        upsert: Flink's ``'connector' = 'upsert-kafka'``: the primary key is read from the record key (a JSON
            object), a record is ``+I`` and a null value ``-D`` of its key; the table is an upsert changelog
            (docs/semantics.md §1.8). Needs format ``json``, ``rowkind_field=None`` and a primary key.
        key_fields_prefix: upsert only (Flink's ``key.fields-prefix``): the primary-key columns' names start with it,
            their key JSON fields are named without it; needs ``value_fields_include="EXCEPT_KEY"``.
        value_fields_include: upsert only (Flink's ``value.fields-include``): ``"ALL"`` (the value holds every
            column) or ``"EXCEPT_KEY"`` (the value holds the non-key columns).
        options: extra options for Spark's Kafka source (e.g. ``maxOffsetsPerTrigger``; ``kafka.<setting>`` for the
            Kafka consumer: ``kafka.security.protocol``, ``kafka.sasl.*``, ``kafka.ssl.*``). They may hold secrets, so
            they are left out of the source's ``repr`` (and so of logs and error messages).
        max_record_bytes: the largest record read (key + value, bytes; headers and Kafka's framing not counted); a
            larger one is a dead letter saying its size and the limit, and is not parsed. Default
            :data:`~streamjoin.connectors.formats.DEFAULT_MAX_RECORD_BYTES`, Kafka's default ``message.max.bytes``
            (a topic whose ``max.message.bytes`` is raised can hold larger ones). The SQL option
            ``scan.record.max-size``.
        rowtime_range: ``(start, end)``: keep only the changes whose rowtime is in ``[start, end)`` (naive UTC
            datetimes; ``start`` None: no lower bound), filtered before the watermark; a backfill's window
            (:mod:`streamjoin.backfill`). ``None``: every change.

    Raises:
        ValidationError: for an unknown format, a column name that is not an identifier,
            a primary key / rowtime column that is not declared, a ``max_record_bytes`` below 1, a canal filter on
            another format or that does not compile, or upsert options that do not fit (messages as Flink's
            ``UpsertKafkaDynamicTableFactory`` / ``KafkaConnectorOptionsUtil``).
    """

    name: str
    topic: str
    schema: StructType
    format: Literal["json", "debezium-json", "canal-json", "maxwell-json"] = "json"
    primary_key: tuple[str, ...] = ()
    rowtime: str | None = None
    watermark_delay_ms: int = 0
    rowkind_field: str | None = "op"
    database_include: str | None = None
    table_include: str | None = None
    upsert: bool = False
    key_fields_prefix: str = ""
    value_fields_include: Literal["ALL", "EXCEPT_KEY"] = "ALL"
    options: dict[str, str] = field(default_factory=dict, repr=False)
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    rowtime_range: tuple[dt.datetime | None, dt.datetime] | None = None

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValidationError(f"table {self.name}: unknown format {self.format!r}; supported: {', '.join(FORMATS)}")
        for option, pattern in (("database_include", self.database_include), ("table_include", self.table_include)):
            if pattern is None:
                continue
            if self.format != "canal-json":
                raise ValidationError(f"table {self.name}: {option} applies to format 'canal-json' only")
            if problem := pattern_error(pattern):
                raise ValidationError(f"table {self.name}: {option} {problem}")
        names = self.schema.names
        for column in names:
            if not _IDENTIFIER.match(column):
                raise ValidationError(f"table {self.name}: column name {column!r} must be a plain identifier")
        for column in (*self.primary_key, *([self.rowtime] if self.rowtime else [])):
            if column not in names:
                raise ValidationError(
                    f"table {self.name}: column {column!r} is not declared; columns: {', '.join(names)}"
                )
        if self.watermark_delay_ms < 0:
            raise ValidationError(f"table {self.name}: watermark delay must be >= 0 ms, got {self.watermark_delay_ms}")
        if self.max_record_bytes < 1:
            raise ValidationError(
                f"table {self.name}: the record size limit must be >= 1 byte, got {self.max_record_bytes}"
            )
        if problem := self._upsert_error():
            raise ValidationError(f"table {self.name}: {problem}")

    def _upsert_error(self) -> str | None:
        if not self.upsert:
            return (
                "key_fields_prefix and value_fields_include apply to upsert sources only"
                if self.key_fields_prefix or self.value_fields_include != "ALL"
                else None
            )
        if not self.primary_key:
            return "an upsert source needs a primary key: it names the columns read from the record key"
        if self.format != "json" or self.rowkind_field is not None:
            return "an upsert source reads format 'json' without rowkind_field: its values must be insert-only"
        if self.value_fields_include not in ("ALL", "EXCEPT_KEY"):
            return f"value_fields_include must be 'ALL' or 'EXCEPT_KEY', got {self.value_fields_include!r}"
        if self.key_fields_prefix and self.value_fields_include == "ALL":
            return (
                "a key prefix is not allowed with value_fields_include 'ALL': "
                "set it to 'EXCEPT_KEY' to avoid field overlaps"
            )
        unprefixed = [k for k in self.primary_key if not k.startswith(self.key_fields_prefix)]
        if unprefixed:
            return (
                f"primary key column {unprefixed[0]!r} is not prefixed with "
                f"key_fields_prefix {self.key_fields_prefix!r}"
            )
        return None


def read_kafka(
    spark: SparkSession, source: KafkaSource, cluster: Cluster, *, starting_offsets: str = "earliest"
) -> DataFrame:
    """The raw streaming DataFrame of Spark's Kafka source for ``source.topic``.

    ``cluster``'s security settings (:meth:`~streamjoin.connectors.kafka_client.KafkaConnection.spark_options`)
    come first, the table's ``source.options`` over them.

    Returns:
        Spark's Kafka columns: key, value (BINARY), topic, partition, offset, timestamp, timestampType.
    """
    reader = (
        spark.readStream.format("kafka")
        .options(**as_connection(cluster).spark_options())
        .option("subscribe", source.topic)
        .option("startingOffsets", starting_offsets)
    )
    for key, value in source.options.items():
        reader = reader.option(key, value)
    return reader.load()


def changelog_rows(decoded: DataFrame, source: KafkaSource, *, end_of_input: DataFrame | None = None) -> DataFrame:
    """The good records' changes as a changelog DataFrame.

    Args:
        end_of_input: the source's control stream (:func:`streamjoin.connectors.end_of_input.control_stream`),
            read beside the topic when ``source.rowtime`` is declared; its end-of-input row moves the
            watermark and is dropped right after it.

    Returns:
        The declared columns + ``_rowkind`` + ``_seq``, with a watermark on
        ``source.rowtime`` when declared.
    """
    rows = (
        # Not a filter on the error and then the changes: Spark pushes such a filter below the decoding, and
        # a record would be decoded twice (once for its error, once for its changes).
        decoded.select("offset", F.explode(F.when(F.col(ERROR).isNull(), F.col(CHANGES))).alias("c")).select(
            *[F.col(f"c.values.{name}").alias(name) for name in source.schema.names],
            F.col("c.kind").alias(ROWKIND_COLUMN),
            (F.col("offset") * changes_per_record(source.format) + F.col("c.i")).alias(SEQ_COLUMN),
        )
    )
    if source.rowtime:
        if source.rowtime_range:
            start, end = source.rowtime_range
            rows = rows.where(
                (F.col(source.rowtime) < F.lit(end)) & (F.col(source.rowtime) >= F.lit(start) if start else F.lit(True))
            )
        if end_of_input is not None:
            rows = rows.withColumn(END_OF_INPUT_COLUMN, F.lit(False)).unionByName(end_of_input)
        rows = with_source_watermark(rows, source.rowtime, source.watermark_delay_ms)
        if end_of_input is not None:
            rows = drop_control_rows(rows, source.rowtime)
    return rows


def dead_letters(decoded: DataFrame) -> DataFrame:
    """The records that could not be decoded, with the reason (columns :data:`DEAD_LETTER_COLUMNS`)."""
    # Not a filter on the error and then a projection of it: Spark inlines the error into both, and every
    # record's error (the costliest part of decoding) would be computed twice.
    return decoded.select(
        "topic",
        "partition",
        "offset",
        "timestamp",
        "key",
        "value",
        F.explode(F.filter(F.array(F.col(ERROR)), lambda reason: reason.isNotNull())).alias("reason"),
    )
