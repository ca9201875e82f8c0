"""A record over the source's size limit (``'scan.record.max-size'``, default Kafka's ``message.max.bytes``) is a
dead letter with its size and the limit, not a failed batch (docs/semantics.md §7.5).

A topic whose ``max.message.bytes`` is raised holds records larger than Kafka's default; the source reads them,
counts key + value bytes and sends a larger record to ``<sink>_dead_letters`` unparsed, the query going on.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

from streamjoin.connectors.formats import DEFAULT_MAX_RECORD_BYTES
from streamjoin.connectors.kafka import KafkaSource, changelog_rows, dead_letters, decode
from streamjoin.connectors.kafka_admin import ensure_topics, produce
from streamjoin.errors import ValidationError
from streamjoin.pipeline import Lakehouse, run_pipeline
from streamjoin.planner import plan_script, sql_pipelines
from streamjoin.planner.connectors import parse_memory_size

SCHEMA = StructType([StructField("id", IntegerType()), StructField("name", StringType())])
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
TABLE = "CREATE TABLE src (id INT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'json'{})"  # noqa: E501


@pytest.mark.parametrize(
    "text, size",
    [
        ("1048588", 1048588),
        ("8mb", 8 << 20),
        ("512 kb", 512 << 10),
        ("2 MB", 2 << 20),
        ("1g", 1 << 30),
        ("100 bytes", 100),
    ],
)
def test_memory_sizes_read_as_flink_memory_size(text, size):
    assert parse_memory_size(text) == size


def test_the_option_sets_the_source_limit_and_defaults_to_kafkas_message_max_bytes():
    def source(option: str) -> KafkaSource:
        return plan_script(TABLE.format(option)).catalog.tables["src"].kafka_source()

    assert source("").max_record_bytes == DEFAULT_MAX_RECORD_BYTES == 1048588
    assert source(", 'scan.record.max-size' = '8mb'").max_record_bytes == 8 << 20
    for bad, message in (("8 pb", "is not a memory size"), ("0", "at least 1 byte"), ("-1", "is not a memory size")):
        with pytest.raises(ValidationError, match=message):
            source(f", 'scan.record.max-size' = '{bad}'")


def _decoded(spark, source: KafkaSource, records: list[tuple[bytes | None, bytes | None]]):
    rows = [(k, v, "t", 0, i, dt.datetime(2024, 1, 1)) for i, (k, v) in enumerate(records)]
    return decode(spark.createDataFrame(rows, KAFKA), source)


def test_a_record_over_the_limit_is_a_dead_letter_and_one_at_the_limit_is_read(spark):
    source = KafkaSource("t", "t", SCHEMA, primary_key=("id",), max_record_bytes=30)
    at_limit = b'{"id": 1, "name": "' + b"a" * 9 + b'"}'  # 30 bytes
    records = [(None, at_limit), (b"k", at_limit), (b"kk", b'{"id": 3'), (None, b"x" * 31), (b"k" * 31, None)]
    decoded = _decoded(spark, source, records)
    assert [(r.id, r.name) for r in changelog_rows(decoded, source).collect()] == [(1, "a" * 9)]
    reasons = {r.offset: r.reason for r in dead_letters(decoded).collect()}
    over = "record of {} bytes (key + value) is over the limit of 30 bytes (scan.record.max-size)"
    # Over the limit before anything else: not malformed JSON, and a tombstone with an oversized key is no tombstone.
    assert reasons == {1: over.format(31), 2: "malformed JSON", 3: over.format(31), 4: over.format(31)}


def test_an_oversized_upsert_record_is_a_dead_letter(spark):
    source = KafkaSource("t", "t", SCHEMA, primary_key=("id",), upsert=True, rowkind_field=None, max_record_bytes=35)
    decoded = _decoded(
        spark,
        source,
        [(b'{"id": 1}', b'{"id": 1, "name": "b"}'), (b'{"id": 2}', b'{"id": 2, "name": "' + b"b" * 10 + b'"}')],
    )
    assert [(r.id, r.name) for r in changelog_rows(decoded, source).collect()] == [(1, "b")]
    assert [r.reason for r in dead_letters(decoded).collect()] == [
        "record of 40 bytes (key + value) is over the limit of 35 bytes (scan.record.max-size)"
    ]


BIG = 8 << 20
SQL = """
CREATE TABLE big (id INT, name STRING, PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'kafka', 'topic' = 'oversized_records', 'format' = 'json');
CREATE TABLE big_8mb WITH ('scan.record.max-size' = '8mb') LIKE big;
CREATE TABLE default_limit (id INT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'delta');
CREATE TABLE raised_limit (id INT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'delta');
INSERT INTO default_limit SELECT * FROM big;
INSERT INTO raised_limit SELECT * FROM big_8mb;
"""


@pytest.mark.e2e
def test_a_record_over_the_limit_on_a_topic_that_holds_it_is_a_dead_letter_and_the_query_goes_on(
    spark, kafka_bootstrap, tmp_path
):
    topic = "oversized_records"
    ensure_topics(kafka_bootstrap, {topic: 1}, config={"max.message.bytes": str(BIG)})
    records = [
        ("1", json.dumps({"id": 1, "name": "a"})),
        ("2", json.dumps({"id": 2, "name": "x" * 2_000_000})),
        ("3", json.dumps({"id": 3, "name": "c"})),
    ]
    assert produce(kafka_bootstrap, topic, records, settings={"message.max.bytes": BIG}) == 3
    lakehouse = Lakehouse(str(tmp_path / "lake"))
    pipelines = {p.name: p for p in sql_pipelines(plan_script(SQL))}

    run = run_pipeline(pipelines["default_limit"], spark, lakehouse, kafka_bootstrap)
    assert run.records_read == {topic: 3} and run.figures.dead_letters == 1
    table = spark.read.format("delta").load(lakehouse.table_path("default_limit"))
    assert sorted(tuple(r) for r in table.collect()) == [(1, "a"), (3, "c")]
    [dead] = spark.read.format("delta").load(pipelines["default_limit"].dead_letter_path(lakehouse)).collect()
    size = 1 + len(records[1][1])
    assert (dead.topic, dead.partition, dead.offset, bytes(dead.key), len(dead.value)) == (topic, 0, 1, b"2", size - 1)
    assert (
        dead.reason == f"record of {size} bytes (key + value) is over the limit of 1048588 bytes (scan.record.max-size)"
    )

    # The same topic read with the limit raised: the record is a row.
    run = run_pipeline(pipelines["raised_limit"], spark, lakehouse, kafka_bootstrap)
    assert run.records_read == {topic: 3} and run.figures.dead_letters == 0
    table = spark.read.format("delta").load(lakehouse.table_path("raised_limit"))
    assert sorted((r.id, len(r.name)) for r in table.collect()) == [(1, 1), (2, 2_000_000), (3, 1)]
