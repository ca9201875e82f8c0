"""Decoding Kafka records into changelog rows and dead letters (no broker needed: Spark batch DataFrames)."""

import datetime as dt
import json
from decimal import Decimal

import pytest
from pyspark.sql.types import (
    BinaryType, DecimalType, IntegerType, LongType, StringType, StructField, StructType, TimestampType,
)

from streamjoin.connectors.kafka import KafkaSource, changelog_rows, dead_letters, decode
from streamjoin.errors import ValidationError

SCHEMA = StructType([
    StructField("id", IntegerType()),
    StructField("price", DecimalType(15, 2)),
    StructField("ts", TimestampType()),
    StructField("note", StringType()),
])
KAFKA = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
    StructField("partition", IntegerType()), StructField("offset", LongType()), StructField("timestamp", TimestampType()),
])


def records(spark, values):
    now = dt.datetime(2024, 1, 1)
    rows = [(None, v.encode() if isinstance(v, str) else json.dumps(v).encode(), "t", 0, i, now) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, KAFKA)


def run(spark, source, values):
    decoded = decode(records(spark, values), source)
    good = [(r["_rowkind"], r["_seq"], r["id"], r["price"], r["ts"], r["note"]) for r in changelog_rows(decoded, source).collect()]
    bad = [(r["offset"], r["reason"], r["value"].decode()) for r in dead_letters(decoded).collect()]
    return sorted(good, key=lambda g: g[1]), sorted(bad)


def test_json_with_rowkind_field_and_dead_letters(spark):
    source = KafkaSource("t", "t", SCHEMA, primary_key=("id",))
    good, bad = run(spark, source, [
        {"id": 1, "price": "10.50", "ts": "2002-01-03 10:00:00", "note": "a"},
        "{not json",
        {"id": 1, "price": 11, "ts": "2002-01-03 10:00:00", "op": "-D"},
        {"id": "x", "price": 1},
        {"price": 1},
        [1, 2],
        {"id": 2, "op": "??"},
        {"id": 3, "note": None, "op": "+U"},
    ])
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
    good, bad = run(spark, source, [
        {"before": None, "after": row1, "op": "c"},
        {"schema": {}, "payload": {"before": row1, "after": row1b, "op": "u"}},
        {"before": row1b, "after": None, "op": "d"},
        {"before": None, "after": row1, "op": "u"},
        {"after": row1, "op": "x"},
        {"before": None, "after": {"id": 5}, "op": "r"},
    ])
    assert [(k, s, i, p) for k, s, i, p, _, _ in good] == [
        ("+I", 0, 1, Decimal("1.00")),
        ("-U", 2, 1, Decimal("1.00")),
        ("+U", 3, 1, Decimal("2.00")),
        ("-D", 4, 1, Decimal("2.00")),
        ("+I", 10, 5, None),
    ]
    assert [(o, r) for o, r, _ in bad] == [(3, "field before is missing"), (4, "unknown Debezium op x")]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"format": "avro"}, "unknown format 'avro'"),
        ({"primary_key": ("nope",)}, "column 'nope' is not declared"),
        ({"rowtime": "missing"}, "column 'missing' is not declared"),
        ({"watermark_delay_ms": -1}, "watermark delay must be >= 0 ms"),
    ],
)
def test_source_validation(kwargs, message):
    with pytest.raises(ValidationError, match=message):
        KafkaSource("t", "t", SCHEMA, **kwargs)
