"""Decoding Kafka records into changelog rows and dead letters (no broker needed: Spark batch DataFrames)."""

import datetime as dt
import json
from decimal import Decimal

import pytest
from pyspark.sql.types import (
    BinaryType,
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from streamjoin.connectors.kafka import KafkaSource, changelog_rows, dead_letters, decode
from streamjoin.errors import ValidationError

SCHEMA = StructType(
    [
        StructField("id", IntegerType()),
        StructField("price", DecimalType(15, 2)),
        StructField("ts", TimestampType()),
        StructField("note", StringType()),
    ]
)
KAFKA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
    ]
)


def records(spark, values):
    now = dt.datetime(2024, 1, 1)
    rows = [
        (None, v.encode() if isinstance(v, str) else json.dumps(v).encode(), "t", 0, i, now)
        for i, v in enumerate(values)
    ]
    return spark.createDataFrame(rows, KAFKA)


def run(spark, source, values):
    decoded = decode(records(spark, values), source)
    good = [
        (r["_rowkind"], r["_seq"], r["id"], r["price"], r["ts"], r["note"])
        for r in changelog_rows(decoded, source).collect()
    ]
    bad = [(r["offset"], r["reason"], r["value"].decode()) for r in dead_letters(decoded).collect()]
    return sorted(good, key=lambda g: g[1]), sorted(bad)


def test_json_with_rowkind_field_and_dead_letters(spark):
    source = KafkaSource("t", "t", SCHEMA, primary_key=("id",))
    good, bad = run(
        spark,
        source,
        [
            {"id": 1, "price": "10.50", "ts": "2002-01-03 10:00:00", "note": "a"},
            "{not json",
            {"id": 1, "price": 11, "ts": "2002-01-03 10:00:00", "op": "-D"},
            {"id": "x", "price": 1},
            {"price": 1},
            [1, 2],
            {"id": 2, "op": "??"},
            {"id": 3, "note": None, "op": "+U"},
        ],
    )
    assert good == [
        ("+I", 0, 1, Decimal("10.50"), dt.datetime(2002, 1, 3, 10), "a"),
        ("-D", 4, 1, Decimal("11.00"), dt.datetime(2002, 1, 3, 10), None),
        ("+U", 14, 3, None, None, None),
    ]
    assert [(o, r) for o, r, _ in bad] == [
        (1, "malformed JSON"),
        (3, 'column id: value "x" is not INT'),
        (4, "primary key column id is null"),
        (5, "not a JSON object"),
        (6, "unknown RowKind ?? in field op"),
    ]
    assert bad[0][2] == "{not json"  # raw bytes are kept


def test_debezium_envelopes(spark):
    source = KafkaSource("t", "t", SCHEMA, format="debezium-json", primary_key=("id",))
    row1, row1b = {"id": 1, "price": "1.00"}, {"id": 1, "price": "2.00"}
    good, bad = run(
        spark,
        source,
        [
            {"before": None, "after": row1, "op": "c"},
            {"schema": {}, "payload": {"before": row1, "after": row1b, "op": "u"}},
            {"before": row1b, "after": None, "op": "d"},
            {"before": None, "after": row1, "op": "u"},
            {"after": row1, "op": "x"},
            {"before": None, "after": {"id": 5}, "op": "r"},
        ],
    )
    assert [(k, s, i, p) for k, s, i, p, _, _ in good] == [
        ("+I", 0, 1, Decimal("1.00")),
        ("-U", 2, 1, Decimal("1.00")),
        ("+U", 3, 1, Decimal("2.00")),
        ("-D", 4, 1, Decimal("2.00")),
        ("+I", 10, 5, None),
    ]
    assert [(o, r) for o, r, _ in bad] == [(3, "field before is missing"), (4, "unknown Debezium op x")]


def test_changelog_rows_decode_each_record_once(spark):
    # A filter on the error would be pushed below the decoding and evaluate it a second time per record.
    source = KafkaSource("t", "t", SCHEMA, format="debezium-json", primary_key=("id",))
    rows = changelog_rows(decode(records(spark, [{"before": None, "after": {"id": 1}, "op": "c"}]), source), source)
    plan = rows._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count("parseJson") == 1, plan  # the JSON of a record is parsed once


def canal(kind, data, old=None, database="shop", table="orders", **extra):
    return {"data": data, "old": old, "type": kind, "database": database, "table": table, "isDdl": False, **extra}


def test_canal_rows_updates_and_skips(spark):
    source = KafkaSource("t", "t", SCHEMA, format="canal-json", primary_key=("id",))
    stride = 1 << 16
    good, bad = run(
        spark,
        source,
        [
            canal("INSERT", [{"id": 1, "price": "1.00", "note": "a"}, {"id": 2, "price": "2.00", "note": "b"}]),
            # old holds the changed fields; note is held by old[0] only, so row 2's before-image gets old[1]'s
            # missing note (null), as Flink's findValue over the whole old array does
            canal(
                "UPDATE",
                [{"id": 1, "price": "1.50", "note": "x"}, {"id": 2, "price": "2.50", "note": "b"}],
                [{"price": "1.00", "note": "a"}, {"price": "2.00"}],
            ),
            canal("DELETE", [{"id": 2, "price": "2.50", "note": "b"}]),
            {"data": None, "old": None, "type": "CREATE", "isDdl": True, "sql": "CREATE TABLE x (i INT)"},
            canal("INSERT", []),
            canal("UPDATE", [], None),  # no rows: Flink never reads old
            "",
            canal("UPDATE", [{"id": 1, "price": "1.50", "note": "x"}], [{"note": None}]),
        ],
    )
    assert good == [
        ("+I", 0, 1, Decimal("1.00"), None, "a"),
        ("+I", 1, 2, Decimal("2.00"), None, "b"),
        ("-U", stride, 1, Decimal("1.00"), None, "a"),
        ("+U", stride + 1, 1, Decimal("1.50"), None, "x"),
        ("-U", stride + 2, 2, Decimal("2.00"), None, None),
        ("+U", stride + 3, 2, Decimal("2.50"), None, "b"),
        ("-D", 2 * stride, 2, Decimal("2.50"), None, "b"),
        ("-U", 7 * stride, 1, Decimal("1.50"), None, None),  # an explicit null in old is the old value
        ("+U", 7 * stride + 1, 1, Decimal("1.50"), None, "x"),
    ]
    assert bad == []


def test_canal_dead_letters(spark):
    source = KafkaSource("t", "t", SCHEMA, format="canal-json", primary_key=("id",))
    row = {"id": 1, "price": "1.00"}
    _, bad = run(
        spark,
        source,
        [
            "{not json",
            [row],
            canal("QUERY", None, sql="BEGIN"),
            canal("ALTER", None, isDdl=True),
            {"data": [row], "type": None},
            canal("INSERT", None),
            canal("INSERT", row),
            canal("INSERT", [row], {"id": 1}),
            canal("INSERT", [row, 7]),
            canal("INSERT", [row, None]),
            canal("INSERT", [{"id": "x"}]),
            canal("CREATE", [row], [{"price": "cheap"}]),
            canal("UPDATE", [row, row], [{"price": "0"}]),
            canal("UPDATE", [row], None),
            canal("UPDATE", [row], [None]),
            canal("DELETE", [{"price": "1.00"}]),
        ],
    )
    assert [(o, r) for o, r, _ in bad] == [
        (0, "malformed JSON"),
        (1, "not a JSON object"),
        (2, "unknown Canal type QUERY"),
        (3, "unknown Canal type ALTER"),
        (4, "field type is missing"),
        (5, "field data is missing"),
        (6, "field data is not a JSON array"),
        (7, "field old is not a JSON array"),
        (8, "field data[1] is not a JSON object"),
        (9, "field data[1] is missing"),
        (10, 'field data[0]: column id: value "x" is not INT'),
        (11, 'field old[0]: column price: value "cheap" is not DECIMAL(15,2)'),
        (12, "field old has 1 rows, data has 2"),
        (13, "field old is missing"),
        (14, "field old[0] is missing"),
        (15, "primary key column id is null"),
    ]


def test_canal_database_and_table_filters(spark):
    source = KafkaSource("t", "t", SCHEMA, format="canal-json", database_include="shop|crm", table_include="ord.*")
    good, bad = run(
        spark,
        source,
        [
            canal("INSERT", [{"id": 1}]),
            canal("INSERT", [{"id": 2}], database="shop2"),  # the whole name must match
            canal("INSERT", [{"id": 3}], table="my_orders"),
            canal("INSERT", [{"id": "x"}], database="other"),  # excluded before its rows are read
            canal("UNKNOWN", None, table="users"),
            canal("INSERT", [{"id": 6}], database="crm", table="orders_2024"),
            {"data": [{"id": 7}], "type": "INSERT", "table": "orders"},
        ],
    )
    assert [(k, i) for k, _, i, *_ in good] == [("+I", 1), ("+I", 6)]
    assert [(o, r) for o, r, _ in bad] == [(6, "field database is missing")]


def test_maxwell(spark):
    source = KafkaSource("t", "t", SCHEMA, format="maxwell-json", primary_key=("id",))
    row = {"id": 1, "price": "1.00", "note": "a"}
    good, bad = run(
        spark,
        source,
        [
            {"database": "shop", "table": "orders", "type": "insert", "ts": 1, "data": row},
            {"type": "update", "data": {"id": 1, "price": "2.00", "note": "a"}, "old": {"price": "1.00"}},
            {"type": "update", "data": {"id": 1, "price": "2.00", "note": "b"}, "old": {"note": None}},
            {"type": "delete", "data": {"id": 1, "price": "2.00", "note": "b"}},
            "",
            {"type": "table-create", "def": {}},
            {"type": "insert"},
            {"type": "insert", "data": [row]},
            {"type": "update", "data": row},
            {"type": "insert", "data": row, "old": {"price": "cheap"}},
            {"data": row},
            {"type": "delete", "data": {"price": 1}},
        ],
    )
    assert [(k, s, i, p, n) for k, s, i, p, _, n in good] == [
        ("+I", 0, 1, Decimal("1.00"), "a"),
        ("-U", 2, 1, Decimal("1.00"), "a"),
        ("+U", 3, 1, Decimal("2.00"), "a"),
        ("-U", 4, 1, Decimal("2.00"), None),
        ("+U", 5, 1, Decimal("2.00"), "b"),
        ("-D", 6, 1, Decimal("2.00"), "b"),
    ]
    assert [(o, r) for o, r, _ in bad] == [
        (5, "unknown Maxwell type table-create"),
        (6, "field data is missing"),
        (7, "field data is not a JSON object"),
        (8, "field old is missing"),
        (9, 'field old: column price: value "cheap" is not DECIMAL(15,2)'),
        (10, "field type is missing"),
        (11, "primary key column id is null"),
    ]


def keyed(spark, source, pairs):
    """Decode (key, value) records; a dict is sent as JSON, a str as it is, None as null."""

    def raw(x):
        return None if x is None else (x if isinstance(x, str) else json.dumps(x)).encode()

    now = dt.datetime(2024, 1, 1)
    rows = [(raw(k), raw(v), "t", 0, i, now) for i, (k, v) in enumerate(pairs)]
    decoded = decode(spark.createDataFrame(rows, KAFKA), source)
    good = [
        (r["_rowkind"], r["_seq"], *(r[n] for n in source.schema.names))
        for r in changelog_rows(decoded, source).collect()
    ]
    bad = [(r["offset"], r["reason"]) for r in dead_letters(decoded).collect()]
    return sorted(good, key=lambda g: g[1]), sorted(bad)


UPSERT = {"format": "json", "primary_key": ("id",), "rowkind_field": None, "upsert": True}


def test_upsert_all_takes_key_columns_from_the_value_and_tombstones_from_the_key(spark):
    source = KafkaSource("t", "t", SCHEMA, **UPSERT)
    good, bad = keyed(
        spark,
        source,
        [
            ({"id": 1}, {"id": 1, "price": "1.00", "note": "a"}),
            ({"id": 1}, {"id": 1, "price": "2.00", "note": "b", "op": "-D"}),  # no RowKind field: an upsert value is +I
            ({"id": 2}, {"id": 7, "price": "3.00"}),  # ALL: the value's key column wins, as Flink projects it last
            ({"id": 1}, None),  # a tombstone: -D with the key, the other columns null
            ({"id": 3}, ""),  # an empty value: Flink's JSON format gives no row
            ({"id": 4}, {"price": "4.00"}),  # ALL: the value lacks the key column
        ],
    )
    assert [(k, s, i, p, n) for k, s, i, p, _, n in good] == [
        ("+I", 0, 1, Decimal("1.00"), "a"),
        ("+I", 2, 1, Decimal("2.00"), "b"),
        ("+I", 4, 7, Decimal("3.00"), None),
        ("-D", 6, 1, None, None),
    ]
    assert bad == [(5, "primary key column id is null")]


def test_upsert_except_key_with_prefix(spark):
    schema = StructType(
        [StructField("k_id", IntegerType()), StructField("k_region", StringType()), StructField("id", StringType())]
    )
    source = KafkaSource(
        "t",
        "t",
        schema,
        format="json",
        primary_key=("k_id", "k_region"),
        rowkind_field=None,
        upsert=True,
        key_fields_prefix="k_",
        value_fields_include="EXCEPT_KEY",
    )
    good, bad = keyed(
        spark,
        source,
        [
            (
                {"id": 1, "region": "eu"},
                {"id": "value's own id", "k_id": 99},
            ),  # the value's fields are read by column name
            ({"id": 1, "region": "eu"}, None),
            ({"id": 2}, {"id": "x"}),
            ({"id": "two", "region": "us"}, {"id": "y"}),
        ],
    )
    assert good == [("+I", 0, 1, "eu", "value's own id"), ("-D", 2, 1, "eu", None)]
    assert bad == [(2, "primary key column k_region is null"), (3, 'key: column k_id: value "two" is not INT')]


def test_upsert_dead_letters(spark):
    source = KafkaSource("t", "t", SCHEMA, **UPSERT)
    _, bad = keyed(
        spark,
        source,
        [
            (None, {"id": 1}),
            (None, None),
            ("", {"id": 1}),
            ("{not json", {"id": 1}),
            ("[1]", {"id": 1}),
            ({"id": 1}, "{not json"),
            ({"id": 1}, "null"),
            ({"id": 1}, {"id": 1, "price": "cheap"}),
            ({"id": None}, None),
            ({"id": 1}, {"id": 1, "ts": "yesterday"}),
        ],
    )
    assert bad == [
        (0, "null key"),
        (1, "null key"),
        (2, "empty key"),
        (3, "malformed JSON key"),
        (4, "key is not a JSON object"),
        (5, "malformed JSON"),
        (6, "not a JSON object"),
        (7, 'column price: value "cheap" is not DECIMAL(15,2)'),
        (8, "primary key column id is null"),
        (9, 'column ts: value "yesterday" is not TIMESTAMP'),
    ]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"format": "avro"}, "unknown format 'avro'"),
        ({"primary_key": ("nope",)}, "column 'nope' is not declared"),
        ({"rowtime": "missing"}, "column 'missing' is not declared"),
        ({"watermark_delay_ms": -1}, "watermark delay must be >= 0 ms"),
        ({"database_include": "shop"}, "database_include applies to format 'canal-json' only"),
        ({"format": "canal-json", "table_include": "ord("}, "table_include 'ord\\(' is not a regular expression"),
        ({"upsert": True, "rowkind_field": None}, "an upsert source needs a primary key"),
        (UPSERT | {"format": "debezium-json"}, "reads format 'json' without rowkind_field"),
        (UPSERT | {"rowkind_field": "op"}, "reads format 'json' without rowkind_field"),
        (UPSERT | {"key_fields_prefix": "i"}, "a key prefix is not allowed with value_fields_include 'ALL'"),
        (
            UPSERT | {"key_fields_prefix": "k_", "value_fields_include": "EXCEPT_KEY"},
            "primary key column 'id' is not prefixed",
        ),
        (UPSERT | {"value_fields_include": "NONE"}, "value_fields_include must be 'ALL' or 'EXCEPT_KEY'"),
        ({"value_fields_include": "EXCEPT_KEY"}, "apply to upsert sources only"),
    ],
)
def test_source_validation(kwargs, message):
    with pytest.raises(ValidationError, match=message):
        KafkaSource("t", "t", SCHEMA, **kwargs)
