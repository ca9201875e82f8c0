"""Value formats of the Kafka source: one record's JSON → its changes, or the reason it is a dead letter.

Formats (Flink's names; each mirrors Flink's ``flink-json`` deserialization schema):

- ``json``: one JSON object per record, one field per declared column, and an
  optional RowKind field (``rowkind_field``, default ``"op"``) holding
  ``"+I"``/``"-U"``/``"+U"``/``"-D"``; a record without it is an INSERT.
- ``debezium-json``: a Debezium change event ``{"before", "after", "op"}``,
  optionally wrapped in ``{"schema", "payload"}``: ``c``/``r`` → ``+I(after)``,
  ``u`` → ``-U(before)``, ``+U(after)``, ``d`` → ``-D(before)``.
- ``canal-json`` (``CanalJsonDeserializationSchema``): ``{"data": [rows], "old":
  [rows], "type", "database", "table"}``; one record gives a change per row of
  ``data``: ``INSERT`` → ``+I(data[i])``, ``DELETE`` → ``-D(data[i])``,
  ``UPDATE`` → ``-U(before)``, ``+U(data[i])`` where ``before`` is ``data[i]``
  with the fields that ``old`` holds taken from ``old[i]``; ``CREATE`` (a DDL
  event) is skipped. ``database_include`` / ``table_include`` are regular
  expressions the whole ``database`` / ``table`` value must match, else the
  record is skipped.
- ``maxwell-json`` (``MaxwellJsonDeserializationSchema``): ``{"data": row, "old":
  row, "type"}``: ``insert`` → ``+I(data)``, ``delete`` → ``-D(data)``,
  ``update`` → ``-U(before)``, ``+U(data)``, ``before`` built as canal's.

- ``upsert-kafka`` (``DynamicKafkaDeserializationSchema`` in upsert mode, value format ``json``, key format
  ``json``): the record key is a JSON object of the primary-key columns (named without ``key_fields_prefix``),
  the value a JSON object of every column (``ALL``, whose key columns win over the key's) or of the others
  (``EXCEPT_KEY``); a record is ``+I``, one with a null value (a tombstone) ``-D`` of its key's row, the other
  columns null. An empty value gives nothing, as in Flink (its JSON format returns no row).

A field counts as held by ``old`` when it is present there, even as ``null``;
for canal, present in *any* element of ``old`` (Flink's ``findValue`` over the
whole array), the value then being ``old[i]``'s.

A record whose key and value together are larger than the source's ``max_record_bytes`` (default
:data:`DEFAULT_MAX_RECORD_BYTES`, Kafka's default ``message.max.bytes``) is a dead letter before anything
else is checked, and is not parsed: a topic whose ``max.message.bytes`` is raised can hold records far
larger than a pipeline is sized for (Flink has no such bound; its consumer's fetch sizes only batch reads).

Flink fails the job on a record it cannot read (without ``ignore-parse-errors``);
here such a record is a **dead letter** with a reason: not valid JSON, not an
object, an unknown RowKind / op / type, a missing row or ``type``, ``data`` /
``old`` of the wrong JSON kind, fewer ``old`` rows than ``data`` rows in a
canal ``UPDATE``, a value that does not cast to its column's type (canal and
maxwell: anywhere in ``data`` or ``old``, as Flink converts both whole), a null
primary-key column (this project's addition), a canal record missing
``database`` / ``table`` while a filter on it is set, or an upsert record whose key is null, empty,
not a JSON object or holds a value that does not cast (Flink drops a record with a null or empty key
without a trace; here it is a dead letter), or bytes that are not UTF-8 (Spark would
read them as U+FFFD). What Flink skips is skipped without a dead letter: a record
with a null or empty value (a tombstone; upsert-kafka: an empty value), a canal
``CREATE``, a canal record that a filter excludes, a canal message whose ``data``
is an empty array.

Decoding is Spark SQL over VARIANT (``try_parse_json`` / ``try_variant_get``),
so values are cast by Spark's rules, narrowed to Flink's JSON converters where Spark
would give another value (``_typed``). That is the definition. On the ``jvm`` engine a ``json`` (upsert-kafka's too) or
``debezium-json`` record goes first through the jar's ``streamjoin.connectors.ChangeDecoder``: one pass of
Jackson's streaming parser that gives the changes of a plain good record and declines every other one, which
the Spark SQL decoder then reads (:func:`_jvm_changes`); the two give the same rows
(``tests/test_change_decoder.py``), the fast one at a fraction of the cost.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from streamjoin.contract import ChangeDecoderSpec, encode
from streamjoin.jvm import engine, jvm_class

if TYPE_CHECKING:
    from streamjoin.connectors.kafka import KafkaSource

__all__ = [
    "CDC_FORMATS",
    "DEFAULT_MAX_RECORD_BYTES",
    "FORMATS",
    "changes_per_record",
    "decode",
    "pattern_error",
    "sql_string",
]

#: Value formats the Kafka source reads.
FORMATS = ("json", "debezium-json", "canal-json", "maxwell-json")
#: Formats whose records are change events: the table is a full changelog (I, UB, UA, D).
CDC_FORMATS = ("debezium-json", "canal-json", "maxwell-json")

#: Kafka's default ``message.max.bytes`` (broker) / ``max.message.bytes`` (topic): 1 MiB + 12 bytes of batch overhead.
DEFAULT_MAX_RECORD_BYTES = 1048588

ERROR = "_error"
CHANGES = "_changes"
# A canal record gives two changes per updated row; 2^16 leaves room for 32768 rows while
# ``offset * stride`` (the root of every later change's ``_seq`` path) stays far inside a LONG.
_CANAL_STRIDE = 1 << 16
_NO_OLD = "CAST(NULL AS VARIANT)"


def changes_per_record(format: str) -> int:
    """The most changes one record of ``format`` gives: a change's ``_seq`` is ``offset * this + i``."""
    return _CANAL_STRIDE if format == "canal-json" else 2


def pattern_error(pattern: str) -> str | None:
    """Why ``pattern`` (a canal ``database`` / ``table`` filter) is not a regular expression, or None.

    Checked with Python's ``re``, whose syntax is close to Java's that Spark matches with.
    """
    try:
        re.compile(pattern)
    except re.error as e:
        return f"{pattern!r} is not a regular expression: {e}"
    return None


def sql_string(text: str) -> str:
    """``text`` as a Spark SQL string literal (quoted, backslashes and quotes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _absent(variant: str) -> str:
    return f"({variant} IS NULL OR is_variant_null({variant}))"


def _typed(source: KafkaSource, row: str, name: str, path: str | None = None) -> str:
    """SQL: column ``name`` read from the variant object ``row``'s field ``path`` (default ``name``), cast to its type,
    NULL where Flink's ``JsonParserToRowDataConverters`` would fail.

    Spark's variant casts are wider than Flink's converters; they are narrowed to Flink's where Spark would
    give another value: a BOOLEAN is true only for ``true`` or the text ``"true"`` in any case (Flink's
    ``Boolean.parseBoolean``; Spark would read ``"yes"`` and ``1`` as true); a number column does not take
    a JSON boolean (Spark would read ``true`` as 1); a TIMESTAMP / DATE is read from a string only (Spark would
    read a number as epoch seconds), with a year from 0 to 9999 (Flink's ``yyyy`` pattern; Spark accepts
    ``+99999-…``).
    """
    kind = source.schema[name].dataType.simpleString()
    field = f"'$.{path or name}'"
    value, json_kind = (
        f"try_variant_get({row}, {field}, {sql_string(kind)})",
        f"schema_of_variant(variant_get({row}, {field}))",
    )
    if kind == "boolean":
        return f"lower(trim(try_variant_get({row}, {field}, 'string'))) = 'true'"
    if kind in ("timestamp", "timestamp_ntz", "date"):
        return f"CASE WHEN {json_kind} = 'STRING' AND year({value}) BETWEEN 0 AND 9999 THEN {value} END"
    if kind == "string":
        return value
    return f"CASE WHEN {json_kind} <> 'BOOLEAN' THEN {value} END"


def _fields(source: KafkaSource, *, key: bool = False) -> list[tuple[str, str]]:
    """(column, JSON field) pairs a record's value holds, or with ``key`` an upsert record's key.

    The key holds the primary key, its JSON fields named without ``key_fields_prefix``; the value holds every
    column, or with ``EXCEPT_KEY`` the others (Flink's ``createKeyFormatProjection`` / ``createValueFormatProjection``).
    """
    if key:
        return [(k, k[len(source.key_fields_prefix) :]) for k in source.primary_key]
    names = source.schema.names
    if source.upsert and source.value_fields_include == "EXCEPT_KEY":
        names = [n for n in names if n not in source.primary_key]
    return [(n, n) for n in names]


def _change(kind: str, i: str, field: str, row: str, old: str = _NO_OLD) -> str:
    return f"named_struct('kind', {kind}, 'i', {i}, 'field', {field}, 'row', {row}, 'old', {old})"


def _first(errors: str) -> str:
    """SQL: the first non-null string of the array ``errors``."""
    return f"try_element_at(filter({errors}, e -> e IS NOT NULL), 1)"


def _is_object(variant: str) -> str:
    """SQL: whether the variant ``variant`` is a JSON object. A cast to the empty struct succeeds for any object and
    only for one, without reading its fields (``schema_of_variant`` would render the type of every field)."""
    return f"(try_variant_get({variant}, '$', 'struct<>') IS NOT NULL)"


def _cast_error(source: KafkaSource, row: str, *, key: bool = False, typed: str | None = None) -> str:
    """SQL: the first column of the variant object ``row`` (a value, or with ``key`` an upsert key) whose value
    does not cast to its type, or NULL.

    ``typed``: a struct that already holds the row's columns cast (a change's ``values``); a column's value then
    failed its cast where the struct holds NULL and the field is present, and is not cast a second time.
    """
    checks = ["WHEN false THEN NULL"]
    for name, path in _fields(source, key=key):
        value = f"variant_get({row}, '$.{path}')"
        present = f"NOT {_absent(value)}"
        failed = (
            f"{present} AND {_typed(source, row, name, path)} IS NULL"
            if typed is None
            else f"{typed}.`{name}` IS NULL AND {present}"
        )
        checks.append(
            f"WHEN {failed} "
            f"THEN concat('column {name}: value ', to_json({value}), "
            f"' is not {source.schema[name].dataType.simpleString().upper()}')"
        )
    return "CASE " + " ".join(checks) + " END"


def _object_error(
    source: KafkaSource, name: str, variant: str, *, labelled: bool = True, typed: str | None = None
) -> str:
    """SQL: why the variant ``variant`` (JSON field named by the SQL string ``name``) is not a row of the
    schema, NULL if it is one or is absent; ``labelled``: a cast error names the field; ``typed``: as in
    :func:`_cast_error`."""
    cast = _cast_error(source, variant, typed=typed)
    if labelled:
        cast = f"concat('field ', {name}, ': ', {cast})"
    return (
        f"CASE WHEN {_absent(variant)} THEN NULL "
        f"WHEN NOT {_is_object(variant)} THEN concat('field ', {name}, ' is not a JSON object') "
        f"ELSE {cast} END"
    )


def _rows_error(source: KafkaSource, field: str, rows: str) -> str:
    """SQL: why an element of the variant array ``rows`` (JSON field ``field``) is not a row, or NULL."""
    name = f"concat('{field}[', i, ']')"
    return _first(f"transform({rows}, (r, i) -> {_object_error(source, name, 'r')})")


def _json(source: KafkaSource) -> tuple[str, str]:
    if source.rowkind_field is None:
        kind = "'+I'"
    else:
        kind = f"coalesce(try_variant_get(_v, '$.{source.rowkind_field}', 'string'), '+I')"
    changes = f"array({_change(kind, '0', sql_string('value'), '_v')})"
    error = (
        f"CASE WHEN {kind} NOT IN ('+I', '-U', '+U', '-D') "
        f"THEN concat('unknown RowKind ', {kind}, ' in field {source.rowkind_field}') END"
    )
    return changes, error


def _debezium(source: KafkaSource) -> tuple[str, str]:
    payload = "variant_get(_v, '$.payload')"
    env = f"(CASE WHEN NOT {_absent(payload)} THEN {payload} ELSE _v END)"
    op = f"try_variant_get({env}, '$.op', 'string')"
    before, after = f"variant_get({env}, '$.before')", f"variant_get({env}, '$.after')"

    def one(kind: str, i: int, field: str) -> str:
        return _change(sql_string(kind), str(i), sql_string(field), before if field == "before" else after)

    changes = (
        f"CASE {op} WHEN 'c' THEN array({one('+I', 0, 'after')}) WHEN 'r' THEN array({one('+I', 0, 'after')}) "
        f"WHEN 'u' THEN array({one('-U', 0, 'before')}, {one('+U', 1, 'after')}) "
        f"WHEN 'd' THEN array({one('-D', 0, 'before')}) END"
    )
    error = (
        f"CASE WHEN {op} IS NULL OR {op} NOT IN ('c', 'r', 'u', 'd') "
        f"THEN concat('unknown Debezium op ', coalesce({op}, 'null')) END"
    )
    return changes, error


def _include_filter(field: str, pattern: str | None) -> tuple[str, str]:
    """SQL (error, excluded) for canal's ``<field>.include``: Flink's ``Pattern.matcher(asText()).matches()``."""
    if pattern is None:
        return "CAST(NULL AS STRING)", "false"
    value = f"variant_get(_v, '$.{field}')"
    text = (
        f"CASE WHEN is_variant_null({value}) THEN 'null' ELSE coalesce(try_variant_get({value}, '$', 'string'), '') END"
    )
    # \A…\z: the whole value must match, as Java's matches(); Spark's regexp_like finds a match anywhere.
    whole = sql_string("\\A(?:" + pattern + ")\\z")
    return f"CASE WHEN {value} IS NULL THEN 'field {field} is missing' END", f"NOT regexp_like({text}, {whole})"


def _canal(source: KafkaSource) -> tuple[str, str]:
    kind = "try_variant_get(_v, '$.type', 'string')"
    data, old = "variant_get(_v, '$.data')", "variant_get(_v, '$.old')"
    rows, olds = "try_variant_get(_v, '$.data', 'array<variant>')", "try_variant_get(_v, '$.old', 'array<variant>')"
    (database_error, database_out), (table_error, table_out) = (
        _include_filter("database", source.database_include),
        _include_filter("table", source.table_include),
    )
    excluded = f"({database_out}) OR ({table_out})"
    element = "concat('data[', i, ']')"

    def each(kind: str) -> str:
        return f"transform({rows}, (r, i) -> {_change(sql_string(kind), 'i', element, 'r')})"

    before = _change("'-U'", "2 * i", element, "r", f"get({olds}, i)")
    update = (
        f"flatten(transform({rows}, (r, i) -> array({before}, {_change(sql_string('+U'), '2 * i + 1', element, 'r')})))"
    )
    changes = (
        f"CASE WHEN {excluded} THEN NULL ELSE CASE {kind} WHEN 'INSERT' THEN {each('+I')} "
        f"WHEN 'UPDATE' THEN {update} WHEN 'DELETE' THEN {each('-D')} END END"
    )
    missing_old = _first(
        f"transform({rows}, (r, i) -> CASE WHEN {_absent(f'get({olds}, i)')} "
        "THEN concat('field old[', i, '] is missing') END)"
    )
    error = (
        f"CASE WHEN {database_error} IS NOT NULL THEN {database_error} "
        f"WHEN {table_error} IS NOT NULL THEN {table_error} "
        f"WHEN {excluded} THEN NULL "
        f"WHEN NOT {_absent(data)} AND {rows} IS NULL THEN 'field data is not a JSON array' "
        f"WHEN NOT {_absent(old)} AND {olds} IS NULL THEN 'field old is not a JSON array' "
        f"ELSE coalesce({_rows_error(source, 'data', rows)}, {_rows_error(source, 'old', olds)}, CASE "
        f"WHEN {kind} IS NULL THEN 'field type is missing' "
        f"WHEN {kind} = 'CREATE' THEN NULL "
        f"WHEN {kind} NOT IN ('INSERT', 'UPDATE', 'DELETE') THEN concat('unknown Canal type ', {kind}) "
        f"WHEN {rows} IS NULL THEN 'field data is missing' "
        f"WHEN {kind} = 'UPDATE' AND size({rows}) > 0 AND {olds} IS NULL THEN 'field old is missing' "
        f"WHEN {kind} = 'UPDATE' AND size({rows}) > size({olds}) "
        f"THEN concat('field old has ', size({olds}), ' rows, data has ', size({rows})) "
        f"WHEN {kind} = 'UPDATE' THEN {missing_old} END) END"
    )
    return changes, error


def _maxwell(source: KafkaSource) -> tuple[str, str]:
    kind = "try_variant_get(_v, '$.type', 'string')"
    data, old = "variant_get(_v, '$.data')", "variant_get(_v, '$.old')"

    def one(kind: str, i: int, before: bool = False) -> str:
        return _change(sql_string(kind), str(i), sql_string("data"), data, old if before else _NO_OLD)

    changes = (
        f"CASE {kind} WHEN 'insert' THEN array({one('+I', 0)}) "
        f"WHEN 'update' THEN array({one('-U', 0, before=True)}, {one('+U', 1)}) "
        f"WHEN 'delete' THEN array({one('-D', 0)}) END"
    )
    error = (
        f"coalesce({_object_error(source, sql_string('data'), data)}, "
        f"{_object_error(source, sql_string('old'), old)}, CASE "
        f"WHEN {kind} IS NULL THEN 'field type is missing' "
        f"WHEN {kind} NOT IN ('insert', 'update', 'delete') THEN concat('unknown Maxwell type ', {kind}) "
        f"WHEN {kind} = 'update' AND {_absent(old)} THEN 'field old is missing' END)"
    )
    return changes, error


def _upsert(source: KafkaSource) -> tuple[str, str]:
    """upsert-kafka (``DynamicKafkaDeserializationSchema`` in upsert mode): a null value (a tombstone) is ``-D``
    of its key, any other value ``+I``; an empty value gives nothing, as Flink's JSON format returns no row."""
    changes = (
        f"CASE WHEN value IS NULL THEN array({_change(sql_string('-D'), '0', sql_string('value'), '_v')}) "
        f"WHEN length(value) > 0 THEN array({_change(sql_string('+I'), '0', sql_string('value'), '_v')}) END"
    )
    return changes, "CAST(NULL AS STRING)"


def _key_error(source: KafkaSource) -> str:
    """SQL: why an upsert record's key is not a JSON object of the primary key (``key.format`` json), or NULL.

    Flink drops a record whose key is null or empty (its JSON format returns no key row, so no row is
    emitted); here it is a dead letter, since the record cannot be told apart from data loss.
    """
    return (
        "CASE WHEN key IS NULL THEN 'null key' WHEN length(key) = 0 THEN 'empty key' "
        "WHEN NOT is_valid_utf8(key) THEN 'invalid UTF-8 in key' "
        f"WHEN _k IS NULL THEN 'malformed JSON key' WHEN NOT {_is_object('_k')} THEN 'key is not a JSON object' "
        f"ELSE concat('key: ', {_cast_error(source, '_k', key=True)}) END"
    )


_DECODERS = {"json": _json, "debezium-json": _debezium, "canal-json": _canal, "maxwell-json": _maxwell}


def _old_keys(source: KafkaSource) -> str:
    """SQL: the declared columns that ``old`` holds (canal: any of its elements), as ARRAY<STRING>."""
    if source.format == "canal-json":
        held = "exists(try_variant_get(_v, '$.old', 'array<variant>'), o -> variant_get(o, '$.{name}') IS NOT NULL)"
    elif source.format == "maxwell-json":
        held = "variant_get(_v, '$.old.{name}') IS NOT NULL"
    else:
        return "CAST(array() AS ARRAY<STRING>)"
    return (
        "array_compact(array("
        + ", ".join(f"CASE WHEN {held.format(name=n)} THEN '{n}' END" for n in source.schema.names)
        + "))"
    )


def _values(source: KafkaSource) -> str:
    """SQL: the change ``c``'s row as a struct of the declared columns; a before-image takes ``old``'s held fields."""
    parts = []
    for name in source.schema.names:
        value = _typed(source, "c.row", name)
        if source.format in ("canal-json", "maxwell-json"):
            value = (
                f"CASE WHEN c.old IS NOT NULL AND array_contains(_old_keys, '{name}') "
                f"THEN {_typed(source, 'c.old', name)} ELSE {value} END"
            )
        parts.append(f"{sql_string(name)}, {value}")
    for name, path in _fields(source, key=True) if source.upsert else []:
        # The key's value; with ALL the value's overrides it unless this is a tombstone (Flink projects the value last).
        key = _typed(source, "_k", name, path)
        i = source.schema.names.index(name)
        parts[i] = f"{sql_string(name)}, " + (
            key
            if source.value_fields_include == "EXCEPT_KEY"
            else f"CASE WHEN c.row IS NULL THEN {key} ELSE {_typed(source, 'c.row', name)} END"
        )
    return "named_struct(" + ", ".join(parts) + ")"


def _change_error(source: KafkaSource) -> str:
    """SQL: why the change ``c`` (with its ``values``) cannot be emitted, or NULL."""
    keys = " ".join(f"WHEN c.values.`{k}` IS NULL THEN 'primary key column {k} is null'" for k in source.primary_key)
    # An upsert tombstone has no row: only its key is checked.
    missing = "CAST(NULL AS STRING)" if source.upsert else "concat('field ', c.field, ' is missing')"
    if source.format in ("canal-json", "maxwell-json"):
        # The format's error has checked every data (and old) row already; a before-image's values take old's fields.
        row = "CAST(NULL AS STRING)"
    else:
        row = _object_error(source, "c.field", "c.row", labelled=False, typed="c.values")
    return (
        f"coalesce(CASE WHEN {_absent('c.row')} THEN {missing} ELSE {row} END, "
        f"CASE {keys or 'WHEN false THEN NULL'} END)"
    )


def _jvm_changes(spark: SparkSession, source: KafkaSource) -> Column | None:
    """The jvm engine's fast decoder of ``source``'s records (``ChangeDecoder.scala``) as a column of their changes
    (the type of :func:`decode`'s ``_changes``), NULL for a record it leaves to the Spark SQL decoder; None on the
    python engine, for canal and maxwell sources, and for columns of a type it does not read (FLOAT, DOUBLE,
    BINARY, nested types).

    Raises:
        EngineError: on the jvm engine, when the jar is missing or built for another Spark version.
    """
    if source.format not in ("json", "debezium-json") or engine(spark) != "jvm":
        return None
    decoder = jvm_class(spark, "streamjoin.connectors.ChangeDecoder")
    if not decoder.supports(source.format, source.schema.json()):
        return None
    description = encode(
        ChangeDecoderSpec(
            format=source.format,
            rowkind_field=source.rowkind_field,
            columns=source.schema,
            primary_key=tuple(source.primary_key),
            time_zone=str(spark.conf.get("spark.sql.session.timeZone")),
            upsert=source.upsert,
            key_fields=tuple(path for _, path in _fields(source, key=True)) if source.upsert else (),
            except_key=source.upsert and source.value_fields_include == "EXCEPT_KEY",
        )
    )
    return Column(decoder.column(F.col("key")._jc, F.col("value")._jc, description))


def decode(raw: DataFrame, source: KafkaSource) -> DataFrame:
    """Decode Spark's Kafka records: one row per record, with its changes and its error.

    Args:
        raw: Spark's Kafka columns (``value`` BINARY, ``offset`` LONG, …).
        source: the table; its ``format`` picks the decoder.

    Returns:
        The Kafka columns plus ``_changes`` (ARRAY<STRUCT<kind STRING, i INT, values STRUCT<declared columns>>>,
        NULL or empty for a record that gives none) and ``_error`` (STRING, NULL for a good or skipped record);
        the same on both engines (on ``jvm`` the fast decoder reads what it can, :func:`_jvm_changes`).

    Raises:
        EngineError: on the jvm engine, when its jar is missing or built for another Spark version.
    """
    size = "coalesce(length(key), 0) + coalesce(length(value), 0)"
    oversized = f"{size} > {source.max_record_bytes}"
    changes, format_error = (_upsert if source.upsert else _DECODERS[source.format])(source)
    if source.upsert:
        skipped, key_error, tombstone = "length(value) = 0", _key_error(source), "value IS NULL"
    else:
        # Every format's Flink schema returns no row for a null or empty value (JsonParserRowDataDeserializationSchema,
        # DebeziumJsonDeserializationSchema, Canal…, Maxwell…: "skip tombstone messages").
        skipped = "value IS NULL OR length(value) = 0"
        key_error, tombstone = "CAST(NULL AS STRING)", "false"
    stride = changes_per_record(source.format)
    fast = _jvm_changes(raw.sparkSession, source)
    if fast is not None:
        # Up to Kafka's default size only: a larger value could be over VARIANT's size limit, where
        # try_parse_json fails.
        raw = raw.withColumn(
            "_fast",
            F.when(F.expr(f"coalesce(length(value), 0) <= {DEFAULT_MAX_RECORD_BYTES} AND NOT ({oversized})"), fast),
        )
    # A record the fast decoder read is not parsed again: CASE evaluates only the branch it takes.
    read = "_fast IS NOT NULL" if fast is not None else "false"
    parsed = (
        # An oversized record is not parsed either.
        raw.withColumn(
            "_v", F.expr(f"CASE WHEN {oversized} OR {read} THEN NULL ELSE try_parse_json(CAST(value AS STRING)) END")
        )
        .withColumn(
            "_k",
            F.expr(
                f"CASE WHEN {oversized} OR {read} THEN NULL ELSE try_parse_json(CAST(key AS STRING)) END"
                if source.upsert
                else "CAST(NULL AS VARIANT)"
            ),
        )
        .withColumn("_old_keys", F.expr(_old_keys(source)))
    )
    with_values = parsed.withColumn(
        "_raw_changes",
        F.expr(
            f"CASE WHEN NOT {read} THEN transform({changes}, c -> named_struct('kind', c.kind, 'i', c.i, "
            f"'field', c.field, 'row', c.row, 'values', {_values(source)})) END"
        ),
    )
    value_error = (
        # Spark would read invalid UTF-8 as U+FFFD; Flink's JSON parser fails on it.
        f"CASE WHEN {tombstone} THEN NULL WHEN NOT is_valid_utf8(value) THEN 'invalid UTF-8' "
        "WHEN _v IS NULL THEN 'malformed JSON' "
        f"WHEN NOT {_is_object('_v')} THEN 'not a JSON object' ELSE {format_error} END"
    )
    error = F.expr(
        f"CASE WHEN {read} THEN NULL "
        f"WHEN {oversized} THEN concat('record of ', {size}, ' bytes (key + value) is over the limit of "
        f"{source.max_record_bytes} bytes (scan.record.max-size)') "
        f"WHEN {skipped} THEN NULL ELSE coalesce({key_error}, {value_error}, "
        f"{_first(f'transform(_raw_changes, c -> {_change_error(source)})')}, "
        f"CASE WHEN size(_raw_changes) > {stride} THEN 'more than {stride} changes in one record' END) END"
    )
    return (
        with_values.withColumn(ERROR, error)
        .withColumn(
            CHANGES,
            F.expr(
                f"CASE {'WHEN _fast IS NOT NULL THEN _fast' if fast is not None else ''} "
                f"WHEN {skipped} OR {oversized} THEN NULL "
                f"ELSE transform(_raw_changes, c -> named_struct('kind', c.kind, 'i', c.i, 'values', c.values)) END"
            ),
        )
        .drop("_v", "_k", "_old_keys", "_raw_changes", "_fast")
    )
