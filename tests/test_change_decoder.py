"""The jvm engine's fast decoder (``ChangeDecoder.scala``) gives what the Spark SQL decoder gives, record by record.

The Spark SQL decoder of :mod:`streamjoin.connectors.formats` is the definition; on the jvm engine the fast
decoder reads a record first and leaves to it every record it is not sure of. Property: over random
(seeded) ``json``, ``debezium-json`` and upsert-kafka records — plain good ones, and every kind of value near the edges
of what a type
takes (ranges, scales, exponents, date and time forms, time zones with DST gaps, duplicates, bad UTF-8,
trailing text) — ``decode``'s changes and error of every record are the same on both engines, and the fast
decoder did read a good share of them.
"""

from __future__ import annotations

import datetime as dt
import json
import random

import pytest
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from streamjoin.connectors.formats import CHANGES, ERROR, _jvm_changes, decode
from streamjoin.connectors.kafka import KafkaSource
from streamjoin.jvm import ENGINE_CONF

COLUMNS = StructType(
    [
        StructField("id", IntegerType()),
        StructField("big", LongType()),
        StructField("small", ShortType()),
        StructField("tiny", ByteType()),
        StructField("price", DecimalType(15, 2)),
        StructField("d", DateType()),
        StructField("ts", TimestampType()),
        StructField("ntz", TimestampNTZType()),
        StructField("s", StringType()),
        StructField("flag", BooleanType()),
    ]
)
UPSERT_COLUMNS = StructType(
    [StructField("k_id", IntegerType()), StructField("k_region", StringType()), *COLUMNS.fields[1:]]
)
SOURCES = {
    "json": KafkaSource("t", "t", COLUMNS, format="json", primary_key=("id",)),
    "debezium-json": KafkaSource("t", "t", COLUMNS, format="debezium-json", primary_key=("id",)),
    "upsert ALL": KafkaSource("t", "t", COLUMNS, format="json", primary_key=("id",), rowkind_field=None, upsert=True),
    "upsert EXCEPT_KEY": KafkaSource(
        "t",
        "t",
        UPSERT_COLUMNS,
        format="json",
        primary_key=("k_id", "k_region"),
        rowkind_field=None,
        upsert=True,
        key_fields_prefix="k_",
        value_fields_include="EXCEPT_KEY",
    ),
}
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


# JSON texts of a value, each near an edge of what some type takes.
def _integer(r: random.Random) -> str:
    return (
        str(
            r.choice(
                [
                    r.randint(-(2**70), 2**70),
                    r.randint(-200, 200),
                    2**31 - 1,
                    2**31,
                    -(2**31) - 1,
                    2**15 - 1,
                    2**15,
                    -(2**15) - 1,
                    127,
                    128,
                    -129,
                    2**63 - 1,
                    2**63,
                    -(2**63),
                    -(2**63) - 1,
                ]
            )
        )
        if r.random() < 0.95
        else "-0"
    )


def _decimal(r: random.Random) -> str:
    if r.random() < 0.2:
        return r.choice(
            ["1.005", "-0.0", "0.10", "1e2", "12345678901234.99", "1234567890123456.5", "9999999999999.995", "-0.00"]
        )
    digits = "".join(r.choice("0123456789") for _ in range(r.randint(1, 4)))
    return f"{r.randint(-(10**16), 10**16)}.{digits}{r.choice(['', '', '', 'e1', 'E-2', 'e+0'])}"


def _date(r: random.Random) -> str:
    return f"{r.choice([r.randint(0, 10000), 2020, 2021])}-{r.randint(0, 13):02d}-{r.randint(0, 32):02d}"


def _time(r: random.Random) -> str:
    # 2021-03-14 02:xx and 2021-11-07 01:xx are in a DST gap / overlap of America/New_York.
    date = r.choice([_date(r), "2021-03-14", "2021-11-07", "2002-01-03"])
    fraction = r.choice(["", "", "." + "".join(r.choice("0123456789") for _ in range(r.randint(0, 9)))])
    return (
        f"{date}{r.choice([' ', 'T', '  '])}{r.randint(0, 25):02d}:{r.randint(0, 60):02d}:{r.randint(0, 60):02d}"
        f"{fraction}{r.choice(['', '', '', 'Z', '+01:00', ' UTC'])}"
    )


def _string(r: random.Random) -> str:
    text = r.choice(
        [
            lambda: "".join(r.choice('ab é"\\\n\u0000€😀') for _ in range(r.randint(0, 8))),
            lambda: _date(r),
            lambda: _time(r),
            lambda: r.choice(
                ["12", " 12", "1.5", "-3.25", "+1.5", " 7.5", "true", " True", "yes", "", "2020-01-01 ", "1e2"]
            ),
            lambda: _decimal(r),
        ]
    )()
    return json.dumps(text, ensure_ascii=r.random() < 0.5)


def _any_value(r: random.Random) -> str:
    return r.choice(
        [
            _integer,
            _decimal,
            _string,
            lambda r: r.choice(["true", "false", "null", "{}", '{"a": 1}', "[1, 2]", "[]", '[{"x": 1, "x": 2}]']),
        ]
    )(r)


def _good(r: random.Random, name: str) -> str:
    """A value column ``name``'s type takes as it is: what a producer of good records writes."""
    name = {"k_id": "id", "region": "s", "k_region": "s"}.get(name, name)
    if name in ("id", "big", "small", "tiny"):
        bits = {"id": 10, "big": 63, "small": 15, "tiny": 7}[name]
        return str(r.randint(-(2**bits), 2**bits - 1))
    if name == "price":
        text = f"{r.randint(-(10**12), 10**12)}.{r.randint(0, 99):02d}"
        return text if r.random() < 0.5 else json.dumps(text)  # Debezium writes a DECIMAL as a string
    if name == "d":
        return json.dumps((dt.date(1, 1, 1) + dt.timedelta(days=r.randint(0, 3_652_000))).isoformat())
    if name in ("ts", "ntz"):
        moment = dt.datetime(1900, 1, 1) + dt.timedelta(
            seconds=r.randint(0, 6_000_000_000), microseconds=r.choice([0, r.randint(0, 999_999)])
        )
        return json.dumps(moment.isoformat(r.choice([" ", "T"])))
    if name == "s":
        return json.dumps("".join(r.choice("abc é€") for _ in range(r.randint(0, 12))))
    return r.choice(["true", "false"])


def _row(
    r: random.Random, good: bool, names: tuple[str, ...] = tuple(COLUMNS.names), key: tuple[str, ...] = ("id",)
) -> str:
    """A JSON object's text with some of the columns ``names`` (in any order), maybe an extra field or a duplicate;
    a good one has the ``key`` columns."""
    fields = []
    for name in names:
        shape = r.choice(["good"] * (8 if good else 2) + ["absent", "null"] + ([] if good else ["any"] * 3))
        if shape == "good" or (name in key and good):
            fields.append((name, _good(r, name)))
        elif shape == "null":
            fields.append((name, "null"))
        elif shape == "any":
            fields.append((name, _any_value(r)))
    if r.random() < 0.5:
        fields.append(("extra", _any_value(r)))
    if not good and fields and r.random() < 0.1:
        fields.append(r.choice(fields))  # a duplicate field
    r.shuffle(fields)
    return "{" + ", ".join(f'"{k}": {v}' for k, v in fields) + "}"


def _json_record(r: random.Random, good: bool) -> str:
    row = _row(r, good)
    kind = r.choice([None, '"+I"', '"-U"', '"+U"', '"-D"'] + ([] if good else ['"x"', "1", "null", '"+i"']))
    return row if kind is None else row[:-1] + (", " if row != "{}" else "") + f'"op": {kind}' + "}"


def _debezium_record(r: random.Random, good: bool) -> str:
    def image() -> str:
        return _row(r, good) if good or r.random() < 0.8 else r.choice(["null", "1", "[]"])

    fields = [
        ("op", r.choice(['"c"', '"r"', '"u"', '"d"'] + ([] if good else ['"x"', "null", "1"]))),
        ("before", image()),
        ("after", image()),
    ]
    if not good and r.random() < 0.5:
        fields = r.sample(fields, r.randint(0, 3))
    envelope = "{" + ", ".join(f'"{k}": {v}' for k, v in fields) + "}"
    wrapper = r.choice(["plain", "plain", "payload"] + ([] if good else ["null payload", "odd payload"]))
    if wrapper == "payload":
        return '{"schema": {"type": "struct"}, "payload": ' + envelope + "}"
    if wrapper == "null payload":
        return envelope[:-1] + (", " if fields else "") + '"payload": null}'
    if wrapper == "odd payload":
        return '{"payload": [' + envelope + "]}"
    return envelope


def _upsert_record(r: random.Random, good: bool, except_key: bool) -> tuple[bytes | None, bytes | None]:
    """An upsert-kafka record: a JSON key of the primary key, and a JSON value, a tombstone (null) or an empty value."""
    key_names = ("id", "region") if except_key else ("id",)
    key = _row(r, good, key_names, key_names)
    if not good:
        key = r.choice([key] * 6 + ["", "[1]", "{", '{"id": 1, "id": 2}', "null"])
    value = r.choice(["row"] * 6 + ["tombstone"] + ([] if good else ["empty", "tombstone"]))
    names = tuple(UPSERT_COLUMNS.names) if except_key else tuple(COLUMNS.names)
    text = {
        "row": lambda: _row(r, good, names, () if except_key else ("id",)),
        "tombstone": lambda: None,
        "empty": lambda: "",
    }[value]()
    raw_key = None if not good and r.random() < 0.05 else key.encode()
    return raw_key, None if text is None else _mangled(
        text, "none" if good else r.choice(["none"] * 8 + ["cut", "bad utf-8"])
    )


def _mangled(text: str, how: str) -> bytes:
    raw = text.encode()
    return {
        "none": raw,
        "trailing": raw + b" x",
        "second": raw + b" {}",
        "cut": raw[: len(raw) // 2],
        "bad utf-8": raw.replace(b'"', b'"\xc3', 1),
        "bom": b"\xef\xbb\xbf" + raw,
        "root": b"[" + raw + b"]",
    }[how]


def _records(seed: int, source: str, n: int) -> list[tuple[bytes | None, bytes | None]]:
    """``n`` random (key, value) records of ``source`` (a key of :data:`SOURCES`): about half plain good ones, the
    others anything near an edge."""
    r = random.Random(seed)
    records = []
    for _ in range(n):
        good = r.random() < 0.5
        if source.startswith("upsert"):
            records.append(_upsert_record(r, good, except_key=source == "upsert EXCEPT_KEY"))
            continue
        text = _json_record(r, good) if source == "json" else _debezium_record(r, good)
        how = "none" if good else r.choice(["none"] * 6 + ["trailing", "second", "cut", "bad utf-8", "bom", "root"])
        records.append((None, _mangled(text, how)))
    return records


def _decoded(spark, source: KafkaSource, frame, engine: str) -> dict[int, tuple]:
    previous = spark.conf.get(ENGINE_CONF)
    spark.conf.set(ENGINE_CONF, engine)
    try:
        rows = decode(frame, source).select("offset", ERROR, CHANGES).collect()
    finally:
        spark.conf.set(ENGINE_CONF, previous)
    return {
        r["offset"]: (r[ERROR], None if r[CHANGES] is None else [c.asDict(recursive=True) for c in r[CHANGES]])
        for r in rows
    }


@pytest.mark.parametrize(
    "kind, time_zone, seed",
    [
        ("json", "UTC", 1),
        ("debezium-json", "UTC", 2),
        ("json", "America/New_York", 3),
        ("debezium-json", "Asia/Kolkata", 4),
        ("upsert ALL", "UTC", 5),
        ("upsert EXCEPT_KEY", "UTC", 6),
    ],
)
def test_the_fast_decoder_gives_the_spark_sql_decoders_rows(spark, kind, time_zone, seed):
    source = SOURCES[kind]
    records = _records(seed, kind, 3000)
    now = dt.datetime(2024, 1, 1)
    frame = spark.createDataFrame([(k, v, "t", 0, i, now) for i, (k, v) in enumerate(records)], KAFKA).cache()
    previous_zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", time_zone)
    try:
        read_fast = frame.select(_jvm_changes(spark, source).alias("f")).where("f IS NOT NULL").count()
        fast, specification = _decoded(spark, source, frame, "jvm"), _decoded(spark, source, frame, "python")
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous_zone)
        frame.unpersist()
    differences = [(records[o], fast[o], expected) for o, expected in specification.items() if fast[o] != expected]
    assert not differences, f"{len(differences)} records differ, the first: {differences[0]}"
    good = sum(1 for error, _ in specification.values() if error is None)
    # About half the records are plain good ones: the fast decoder must have read them (and nothing else).
    assert len(records) // 3 < read_fast <= good, (read_fast, good, len(records))
    if source.upsert:
        # Tombstones too: the fast decoder's -D of the key's row.
        assert any(records[o][1] is None and error is None and changes for o, (error, changes) in specification.items())


def test_the_python_engine_and_other_formats_have_no_fast_decoder(spark):
    debezium = KafkaSource("t", "t", COLUMNS, format="debezium-json", primary_key=("id",))
    assert _jvm_changes(spark, debezium) is not None
    previous = spark.conf.get(ENGINE_CONF)
    spark.conf.set(ENGINE_CONF, "python")
    try:
        assert _jvm_changes(spark, debezium) is None
    finally:
        spark.conf.set(ENGINE_CONF, previous)
    assert _jvm_changes(spark, KafkaSource("t", "t", COLUMNS, format="maxwell-json", primary_key=("id",))) is None
    doubles = StructType([StructField("id", IntegerType()), StructField("x", DoubleType())])
    assert _jvm_changes(spark, KafkaSource("t", "t", doubles, primary_key=("id",))) is None


def test_a_date_or_time_that_does_not_exist_is_left_to_the_spark_sql_decoder(spark):
    # These match the fast decoder's patterns but are no date or time: it must decline them, not fail the query.
    source = SOURCES["json"]
    values = [
        '{"id": 1, "d": "2021-02-30"}',
        '{"id": 2, "d": "2021-02-00"}',
        '{"id": 3, "d": "2021-13-01"}',
        '{"id": 4, "ts": "2021-01-01 24:00:00"}',
        '{"id": 5, "ntz": "2021-02-29T10:00:00"}',
        '{"id": 6, "d": "2024-02-29"}',
    ]
    frame = spark.createDataFrame(
        [(None, v.encode(), "t", 0, i, dt.datetime(2024, 1, 1)) for i, v in enumerate(values)], KAFKA
    )
    fast, specification = _decoded(spark, source, frame, "jvm"), _decoded(spark, source, frame, "python")
    assert fast == specification
    assert [specification[o][0] for o in range(5)] == [
        'column d: value "2021-02-30" is not DATE',
        'column d: value "2021-02-00" is not DATE',
        'column d: value "2021-13-01" is not DATE',
        'column ts: value "2021-01-01 24:00:00" is not TIMESTAMP',
        'column ntz: value "2021-02-29T10:00:00" is not TIMESTAMP_NTZ',
    ]
    assert specification[5] == (
        None,
        [{"kind": "+I", "i": 0, "values": {**dict.fromkeys(COLUMNS.names), "id": 6, "d": dt.date(2024, 2, 29)}}],
    )
