"""The bad-input corpus (tests/data/bad_records/) through the real path: a real Kafka broker, the SQL pipelines'
streaming queries, Delta. Every record is accounted for: a dead letter with its reason, a good record whose
changes reach the sink, or a record Flink's format skips (docs/semantics.md §7.5).

Changelog anomalies that decode pass to the sink as in Flink: the sinks are keyed by the sources' primary key,
so the planner puts DropUpdateBefore in front (§7.1): a ``-U`` with no ``+U`` is dropped, an update of a key
never seen is an upsert, a delete of a key never seen deletes nothing (Flink's upsert sinks; the
SinkUpsertMaterializer, §7.2, also ignores a retraction of a row it does not hold).
"""

from __future__ import annotations

import base64
import datetime as dt
import itertools
import json
from decimal import Decimal
from pathlib import Path

import pytest
from bad_records.generate import COLUMNS, PAD, generate
from confluent_kafka import KafkaError, KafkaException
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from streamjoin.connectors.formats import changes_per_record
from streamjoin.connectors.kafka import KafkaSource, changelog_rows, dead_letters, decode
from streamjoin.connectors.kafka_admin import ensure_topics, produce
from streamjoin.pipeline import Lakehouse, run_pipeline
from streamjoin.planner import plan_script, sql_pipelines

CORPUS = Path(__file__).parent / "data" / "bad_records" / "corpus.jsonl"
TYPES = (
    "id INT, name STRING, amount DECIMAL(10, 2), qty INT, ts TIMESTAMP(3), flag BOOLEAN, PRIMARY KEY (id) NOT ENFORCED"
)
SQL = f"""
CREATE TABLE json_src ({TYPES}) WITH ('connector' = 'kafka', 'topic' = 'bad_json', 'format' = 'json', 'json.rowkind-field' = 'op');
CREATE TABLE debezium_src ({TYPES}) WITH ('connector' = 'kafka', 'topic' = 'bad_debezium', 'format' = 'debezium-json');
CREATE TABLE upsert_src ({TYPES}) WITH ('connector' = 'upsert-kafka', 'topic' = 'bad_upsert', 'key.format' = 'json', 'value.format' = 'json');
CREATE TABLE json_copy ({TYPES}) WITH ('connector' = 'delta');
CREATE TABLE debezium_copy ({TYPES}) WITH ('connector' = 'delta');
CREATE TABLE upsert_copy ({TYPES}) WITH ('connector' = 'delta');
INSERT INTO json_copy SELECT * FROM json_src;
INSERT INTO debezium_copy SELECT * FROM debezium_src;
INSERT INTO upsert_copy SELECT * FROM upsert_src;
"""  # noqa: E501
SINKS = {"bad_json": "json_copy", "bad_debezium": "debezium_copy", "bad_upsert": "upsert_copy"}
FORMATS = {"bad_json": "json", "bad_debezium": "debezium-json", "bad_upsert": "json"}
#: Kinds every format's topic must hold many times.
REQUIRED = (
    "malformed-json",
    "wrong-type",
    "int-overflow",
    "decimal-precision",
    "timestamp-range",
    "null-primary-key",
    "missing-primary-key",
    "invalid-utf8",
    "empty-value",
    "tombstone",
    "large-record",
    "lenient-value",
)


def _bytes(line: dict, field: str) -> bytes | None:
    if f"{field}_b64" in line:
        return base64.b64decode(line[f"{field}_b64"])
    text = line.get(field)
    return None if text is None else text.replace(PAD, "x" * line.get("pad", 0)).encode()


def load_corpus() -> dict[str, list[dict]]:
    """Topic → its lines in order, each with ``key`` / ``value`` as the bytes to produce (None: null)."""
    topics: dict[str, list[dict]] = {}
    for text in CORPUS.read_text().splitlines():
        line = json.loads(text)
        topics.setdefault(line["topic"], []).append(line | {"key": _bytes(line, "key"), "value": _bytes(line, "value")})
    return topics


def _row(line: dict, row: dict) -> tuple:
    """A corpus row as Spark reads it back: DECIMAL as Decimal, TIMESTAMP as datetime, a large name padded."""
    return (
        row["id"],
        row["name"].replace(PAD, "x" * line.get("pad", 0)) if row["name"] else row["name"],
        Decimal(row["amount"]) if row["amount"] is not None else None,
        row["qty"],
        dt.datetime.strptime(row["ts"], "%Y-%m-%d %H:%M:%S.%f") if row["ts"] else None,
        row["flag"],
    )


def expected_table(lines: list[dict]) -> set[tuple]:
    """The upsert sink after the good records' changes, applied in order (DropUpdateBefore: ``-U`` changes nothing)."""
    table = {}
    for line in lines:
        for kind, row in line["expect"].get("changes", []):
            if kind in ("+I", "+U"):
                table[row["id"]] = _row(line, row)
            elif kind == "-D":
                table.pop(row["id"], None)
    return set(table.values())


def test_the_corpus_file_is_what_the_seeded_generator_makes():
    assert [json.loads(t) for t in CORPUS.read_text().splitlines()] == json.loads(json.dumps(generate()))


def test_the_corpus_holds_every_kind_many_times_interleaved():
    topics = load_corpus()
    assert sum(map(len, topics.values())) >= 1000
    for topic, lines in topics.items():
        kinds = [line["kind"] for line in lines]
        for kind in REQUIRED:
            assert kinds.count(kind) >= 3 or (kind in ("tombstone", "large-record") and kinds.count(kind) >= 1), (
                topic,
                kind,
            )
        outcomes = ["dead" if "dead" in line["expect"] else "good" for line in lines]
        assert sum(a != b for a, b in itertools.pairwise(outcomes)) > len(lines) / 4, (
            topic
        )  # interleaved, not in blocks
    assert {"unknown-rowkind", "update-before-alone", "delete-unseen-key", "update-unseen-key"} <= {
        line["kind"] for line in topics["bad_json"]
    }
    assert {"unknown-debezium-op", "update-without-after", "delete-without-before", "update-unseen-key"} <= {
        line["kind"] for line in topics["bad_debezium"]
    }
    assert {"null-key", "malformed-key", "invalid-utf8-key", "tombstone-unseen-key"} <= {
        line["kind"] for line in topics["bad_upsert"]
    }


@pytest.mark.e2e
def test_every_record_of_the_corpus_is_accounted_for(spark, kafka_bootstrap, tmp_path):
    topics = load_corpus()
    ensure_topics(kafka_bootstrap, {topic: 1 for topic in topics})
    for topic, lines in topics.items():
        assert produce(kafka_bootstrap, topic, [(line["key"], line["value"]) for line in lines]) == len(lines)
    lakehouse = Lakehouse(str(tmp_path / "lake"))
    pipelines = {p.name: p for p in sql_pipelines(plan_script(SQL))}

    total = accounted = 0
    for topic, lines in topics.items():
        pipeline = pipelines[SINKS[topic]]
        run = run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)  # one run: no record stops the query
        assert run.records_read == {topic: len(lines)}

        dead = spark.read.format("delta").load(pipeline.dead_letter_path(lakehouse)).collect()
        assert {(r.topic, r.partition) for r in dead} == {(topic, 0)}
        got = sorted((r.offset, r.reason, r.key, r.value) for r in dead)
        want = sorted(
            (i, line["expect"]["dead"], line["key"], line["value"])
            for i, line in enumerate(lines)
            if "dead" in line["expect"]
        )
        assert [g[:2] for g in got] == [w[:2] for w in want], topic
        assert [(bytes(k) if k is not None else None, bytes(v) if v is not None else None) for *_, k, v in got] == [
            w[2:] for w in want
        ]

        table = spark.read.format("delta").load(lakehouse.table_path(pipeline.name)).select(*COLUMNS).collect()
        assert {tuple(r) for r in table} == expected_table(lines), topic

        # The good records' changes reach the writer, a -U excepted (DropUpdateBefore); skipped records give none.
        stride = changes_per_record(FORMATS[topic])
        changelog = spark.read.format("delta").load(lakehouse.table_path(f"{pipeline.name}_changelog")).collect()
        reached = sorted(
            (int.from_bytes(r["_seq"][:8], "big") // stride, r["_rowkind"]) for r in changelog
        )  # the path's root
        assert reached == sorted(
            (i, kind) for i, line in enumerate(lines) for kind, _ in line["expect"].get("changes", []) if kind != "-U"
        )

        good = sum("changes" in line["expect"] for line in lines)
        skipped = sum("skip" in line["expect"] for line in lines)
        counted = len(dead) + good + skipped
        print(f"{topic}: {len(dead)} dead letters + {good} good + {skipped} skipped", end=" ")
        print(f"= {counted}/{len(lines)} accounted for")
        total, accounted = total + len(lines), accounted + len(dead) + good + skipped
    print(f"{accounted}/{total} accounted for")
    assert accounted == total >= 1000


def test_a_record_over_the_producer_and_broker_limit_is_refused_at_produce_time(kafka_bootstrap):
    """Kafka itself bounds a record: the producer's and the broker's ``message.max.bytes`` (1 MB by default)."""
    ensure_topics(kafka_bootstrap, {"bad_oversized": 1})
    with pytest.raises(KafkaException) as refused:
        produce(kafka_bootstrap, "bad_oversized", [(None, json.dumps({"id": 1, "name": "x" * 1_200_000}))])
    assert refused.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE


SCHEMA = StructType(
    [
        StructField("id", IntegerType()),
        StructField("amount", DecimalType(10, 2)),
        StructField("ts", TimestampType()),
        StructField("name", StringType()),
        StructField("flag", BooleanType()),
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


@pytest.mark.parametrize(
    "value, expected",
    [
        # What flink-json 2.3.0's JsonParserRowDataDeserializationSchema gives for each value (run on its jar).
        (b'{"id": true}', "column id: value true is not INT"),
        (b'{"id": 1.7}', {"id": 1}),
        (b'{"id": "12"}', {"id": 12}),
        (b'{"id": 1, "amount": 1.005}', {"amount": Decimal("1.01")}),
        (b'{"id": 1, "ts": "99999-01-01 00:00:00"}', 'column ts: value "99999-01-01 00:00:00" is not TIMESTAMP'),
        (b'{"id": 1, "ts": 1700000000}', "column ts: value 1700000000 is not TIMESTAMP"),
        (b'{"id": 1, "name": {"a": 1}}', {"name": '{"a":1}'}),
        (b'{"id": 1, "flag": "yes"}', {"flag": False}),
        (b'{"id": 1, "flag": 1}', {"flag": False}),
        (b'{"id": 1, "flag": " True"}', {"flag": True}),
        (b'{"id": 1, "name": "\xc3"}', "invalid UTF-8"),
        (b"", None),
        (None, None),
    ],
)
def test_values_decode_as_flink_json_converters(spark, value, expected):
    source = KafkaSource("t", "t", SCHEMA, primary_key=("id",))
    decoded = decode(spark.createDataFrame([(None, value, "t", 0, 0, dt.datetime(2024, 1, 1))], KAFKA), source)
    rows = [r.asDict() for r in changelog_rows(decoded, source).collect()]
    reasons = [r.reason for r in dead_letters(decoded).collect()]
    if expected is None:  # skipped, as Flink's "return null when there is no token"
        assert (rows, reasons) == ([], [])
    elif isinstance(expected, str):
        assert (rows, reasons) == ([], [expected])
    else:
        assert reasons == [] and len(rows) == 1 and {c: rows[0][c] for c in expected} == expected
