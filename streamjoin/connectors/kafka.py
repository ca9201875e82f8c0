"""Kafka source: Spark's Kafka connector, records decoded into changelog rows.

Formats (Flink's names):

- ``json``: one JSON object per record, one field per declared column, and an
  optional RowKind field (``rowkind_field``, default ``"op"``) holding
  ``"+I"``/``"-U"``/``"+U"``/``"-D"``; a record without it is an INSERT.
- ``debezium-json``: a Debezium change event ``{"before", "after", "op"}``,
  optionally wrapped in ``{"schema", "payload"}``: ``c``/``r`` → ``+I(after)``,
  ``u`` → ``-U(before)``, ``+U(after)``, ``d`` → ``-D(before)``.

Decoding uses Spark's VARIANT functions (``try_parse_json`` /
``try_variant_get``), so values are cast by Spark's rules. A record that is not
valid JSON, not an object, has an unknown RowKind/op, misses the row a Debezium
op needs, holds a value that does not cast to its column's type, or has a null
primary-key column is a **dead letter**: it is left out of the changelog and
reported by :func:`dead_letters` with its raw bytes, topic, partition, offset
and the reason. Nothing is dropped silently and the query keeps running.

Order: ``_seq = offset * 2 + i`` where ``i`` is the change's index inside its
record (a Debezium update gives two changes), so changes of one partition are
ordered; a producer that keys records by primary key keeps each key's changes
in one partition and therefore in order (docs/semantics.md §1, upsert key).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN
from streamjoin.errors import ValidationError

__all__ = ["KafkaSource", "read_kafka", "decode", "changelog_rows", "dead_letters", "DEAD_LETTER_COLUMNS"]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FORMATS = ("json", "debezium-json")
_ERROR = "_error"
_CHANGES = "_changes"

#: Columns of a dead-letter table (and of :func:`dead_letters`' DataFrame).
DEAD_LETTER_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "reason")


@dataclass(frozen=True)
class KafkaSource:
    """A Kafka topic declared as a changelog table (Flink's ``'connector' = 'kafka'``).

    Args:
        name: table name.
        topic: Kafka topic.
        schema: the declared columns; JSON fields are looked up by these names.
        format: ``"json"`` or ``"debezium-json"``.
        primary_key: columns that identify a row; a record with a null one is a dead letter.
        rowtime: event-time column (TIMESTAMP); with it the stream carries a watermark.
        watermark_delay_ms: the watermark is ``max(rowtime) - watermark_delay_ms`` (milliseconds).
        rowkind_field: ``json`` only: the field holding the RowKind, ``None`` for insert-only topics.
        options: extra options for Spark's Kafka source (e.g. ``maxOffsetsPerTrigger``).

    Raises:
        ValidationError: for an unknown format, a column name that is not an identifier,
            or a primary key / rowtime column that is not declared.
    """

    name: str
    topic: str
    schema: StructType
    format: Literal["json", "debezium-json"] = "json"
    primary_key: tuple[str, ...] = ()
    rowtime: str | None = None
    watermark_delay_ms: int = 0
    rowkind_field: str | None = "op"
    options: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.format not in _FORMATS:
            raise ValidationError(f"table {self.name}: unknown format {self.format!r}; supported: {', '.join(_FORMATS)}")
        names = self.schema.names
        for column in names:
            if not _IDENTIFIER.match(column):
                raise ValidationError(f"table {self.name}: column name {column!r} must be a plain identifier")
        for column in (*self.primary_key, *([self.rowtime] if self.rowtime else [])):
            if column not in names:
                raise ValidationError(f"table {self.name}: column {column!r} is not declared; columns: {', '.join(names)}")
        if self.watermark_delay_ms < 0:
            raise ValidationError(f"table {self.name}: watermark delay must be >= 0 ms, got {self.watermark_delay_ms}")


def read_kafka(spark: SparkSession, source: KafkaSource, bootstrap_servers: str, *, starting_offsets: str = "earliest") -> DataFrame:
    """The raw streaming DataFrame of Spark's Kafka source for ``source.topic``.

    Returns:
        Spark's Kafka columns: key, value (BINARY), topic, partition, offset, timestamp, timestampType.
    """
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", source.topic)
        .option("startingOffsets", starting_offsets)
    )
    for key, value in source.options.items():
        reader = reader.option(key, value)
    return reader.load()


def _lit(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _row_struct(source: KafkaSource, row: str) -> str:
    """SQL for a struct of the declared columns read from the variant ``row``."""
    parts = []
    for f in source.schema.fields:
        parts.append(f"{_lit(f.name)}, try_variant_get({row}, '$.{f.name}', {_lit(f.dataType.simpleString())})")
    return "named_struct(" + ", ".join(parts) + ")"


def _row_error(source: KafkaSource, row: str) -> str:
    """SQL for the first reason why the variant ``row`` does not fit the schema, or NULL."""
    checks = [f"WHEN {row} IS NULL OR is_variant_null({row}) THEN concat('field ', c.field, ' is missing')"]
    for f in source.schema.fields:
        value = f"variant_get({row}, '$.{f.name}')"
        typed = f"try_variant_get({row}, '$.{f.name}', {_lit(f.dataType.simpleString())})"
        type_name = f.dataType.simpleString().upper()
        checks.append(
            f"WHEN {value} IS NOT NULL AND NOT is_variant_null({value}) AND {typed} IS NULL "
            f"THEN concat('column {f.name}: value ', to_json({value}), ' is not {type_name}')"
        )
        if f.name in source.primary_key:
            checks.append(f"WHEN {typed} IS NULL THEN 'primary key column {f.name} is null'")
    return "CASE " + " ".join(checks) + " END"


def _changes(source: KafkaSource) -> tuple[str, str]:
    """SQL for (array of (kind, index, row variant), record-level error) from the parsed value ``_v``."""
    if source.format == "json":
        if source.rowkind_field is None:
            kind = "'+I'"
        else:
            kind = f"coalesce(try_variant_get(_v, '$.{source.rowkind_field}', 'string'), '+I')"
        changes = f"array(named_struct('kind', {kind}, 'i', 0, 'field', 'value', 'row', _v))"
        error = (
            f"CASE WHEN {kind} NOT IN ('+I', '-U', '+U', '-D') "
            f"THEN concat('unknown RowKind ', {kind}, ' in field {source.rowkind_field}') END"
        )
        return changes, error
    env = "(CASE WHEN variant_get(_v, '$.payload') IS NOT NULL AND NOT is_variant_null(variant_get(_v, '$.payload')) THEN variant_get(_v, '$.payload') ELSE _v END)"
    op = f"try_variant_get({env}, '$.op', 'string')"
    before, after = f"variant_get({env}, '$.before')", f"variant_get({env}, '$.after')"
    changes = (
        f"CASE {op} "
        f"WHEN 'c' THEN array(named_struct('kind', '+I', 'i', 0, 'field', 'after', 'row', {after})) "
        f"WHEN 'r' THEN array(named_struct('kind', '+I', 'i', 0, 'field', 'after', 'row', {after})) "
        f"WHEN 'u' THEN array(named_struct('kind', '-U', 'i', 0, 'field', 'before', 'row', {before}), "
        f"named_struct('kind', '+U', 'i', 1, 'field', 'after', 'row', {after})) "
        f"WHEN 'd' THEN array(named_struct('kind', '-D', 'i', 0, 'field', 'before', 'row', {before})) END"
    )
    error = f"CASE WHEN {op} IS NULL OR {op} NOT IN ('c', 'r', 'u', 'd') THEN concat('unknown Debezium op ', coalesce({op}, 'null')) END"
    return changes, error


def decode(raw: DataFrame, source: KafkaSource) -> DataFrame:
    """Decode Spark's Kafka records: one row per record, with its changes and its error.

    Returns:
        The Kafka columns plus ``_changes`` (ARRAY<STRUCT<kind STRING, i INT, values STRUCT<declared columns>>>)
        and ``_error`` (STRING, NULL for a good record).
    """
    changes, kind_error = _changes(source)
    change_error = _row_error(source, "c.row")
    parsed = raw.withColumn("_v", F.expr("try_parse_json(CAST(value AS STRING))"))
    with_changes = parsed.withColumn(
        "_raw_changes",
        F.expr(f"transform({changes}, c -> named_struct('kind', c.kind, 'i', c.i, 'err', {change_error}, 'values', {_row_struct(source, 'c.row')}))"),
    )
    error = F.expr(
        "CASE WHEN _v IS NULL THEN 'malformed JSON' "
        "WHEN schema_of_variant(_v) NOT LIKE 'OBJECT%' THEN 'not a JSON object' "
        f"ELSE coalesce({kind_error}, try_element_at(filter(_raw_changes, c -> c.err IS NOT NULL), 1).err) END"
    )
    return (
        with_changes.withColumn(_ERROR, error)
        .withColumn(_CHANGES, F.expr("transform(_raw_changes, c -> named_struct('kind', c.kind, 'i', c.i, 'values', c.values))"))
        .drop("_v", "_raw_changes")
    )


def changelog_rows(decoded: DataFrame, source: KafkaSource) -> DataFrame:
    """The good records' changes as a changelog DataFrame.

    Returns:
        The declared columns + ``_rowkind`` + ``_seq``, with a watermark on
        ``source.rowtime`` when declared.
    """
    rows = (
        decoded.where(F.col(_ERROR).isNull())
        .select("offset", F.explode(_CHANGES).alias("c"))
        .select(
            *[F.col(f"c.values.{name}").alias(name) for name in source.schema.names],
            F.col("c.kind").alias(ROWKIND_COLUMN),
            (F.col("offset") * 2 + F.col("c.i")).alias(SEQ_COLUMN),
        )
    )
    if source.rowtime:
        rows = rows.withWatermark(source.rowtime, f"{source.watermark_delay_ms} milliseconds")
    return rows


def dead_letters(decoded: DataFrame) -> DataFrame:
    """The records that could not be decoded, with the reason (columns :data:`DEAD_LETTER_COLUMNS`)."""
    return decoded.where(F.col(_ERROR).isNotNull()).select(
        "topic", "partition", "offset", "timestamp", "key", "value", F.col(_ERROR).alias("reason")
    )
