"""The Delta upsert writer on static micro-batches: collapse per key, MERGE, idempotence, changelog table."""

import datetime as dt
import os
import shutil

import pytest
from delta.tables import DeltaTable
from pyspark.sql.types import DateType, IntegerType, LongType, StringType, StructField, StructType

from streamjoin.errors import SinkError
from streamjoin.sink.delta import DeltaAppendWriter, DeltaSink, DeltaUpsertWriter, create_sink_tables

SCHEMA = StructType([StructField("k", IntegerType()), StructField("v", StringType())])
BATCH = StructType(SCHEMA.fields + [StructField("_rowkind", StringType()), StructField("_seq", LongType())])


def table(spark, path):
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())


def test_collapse_merge_and_replay(spark, tmp_path):
    sink = DeltaSink("t", str(tmp_path / "t"), ("k",))
    create_sink_tables(spark, sink, SCHEMA)
    materialize = DeltaUpsertWriter(sink, str(tmp_path / "no-checkpoint"))
    # Rows deliberately out of _seq order: the writer must order by _seq, not by position.
    batch0 = spark.createDataFrame(
        [
            (2, "b", "+I", 1),
            (1, "a", "+I", 0),
            (3, "c", "+I", 2),
            (3, "c", "-D", 3),
            (4, "x", "-D", 5),
            (4, "d", "+I", 4),
        ],
        BATCH,
    )
    materialize(batch0, 0)
    assert table(spark, sink.path) == [(1, "a"), (2, "b")]

    batch1 = spark.createDataFrame(
        [(1, "a", "-U", 10), (1, "a2", "+U", 11), (2, "b", "-D", 12), (5, "e", "+U", 13)], BATCH
    )
    materialize(batch1, 1)
    after = table(spark, sink.path)
    assert after == [(1, "a2"), (5, "e")]

    # A replayed batch (same batch id, e.g. after a crash before the checkpoint commit) changes nothing.
    versions = DeltaTable.forPath(spark, sink.path).history().count()
    materialize(batch1, 1)
    assert table(spark, sink.path) == after
    assert DeltaTable.forPath(spark, sink.path).history().count() == versions
    changelog = spark.read.format("delta").load(sink.changelog_path)
    assert changelog.count() == 10
    # A source's LONG _seq is kept as the root of its path (docs/semantics.md §1.1): 8 bytes, big-endian.
    assert sorted((r._batch_id, bytes(r._seq), r._rowkind) for r in changelog.where("_batch_id = 1").collect()) == [
        (1, s.to_bytes(8, "big"), kind) for s, kind in ((10, "-U"), (11, "+U"), (12, "-D"), (13, "+U"))
    ]

    # A batch without changes (a micro-batch that only moved the watermark) commits to neither table.
    changelog_versions = DeltaTable.forPath(spark, sink.changelog_path).history().count()
    materialize(spark.createDataFrame([], BATCH), 2)
    assert DeltaTable.forPath(spark, sink.path).history().count() == versions
    assert DeltaTable.forPath(spark, sink.changelog_path).history().count() == changelog_versions
    materialize(spark.createDataFrame([(5, "e", "-D", 20)], BATCH), 3)
    assert table(spark, sink.path) == [(1, "a2")]


def test_a_changelog_table_written_with_a_long_seq_is_refused_naming_what_to_remove(spark, tmp_path):
    sink = DeltaSink("t", str(tmp_path / "t"), ("k",))
    old = StructType(SCHEMA.fields + [StructField("_rowkind", StringType()), StructField("_seq", LongType())])
    spark.createDataFrame([(1, "a", "+I", 0)], old).write.format("delta").save(sink.changelog_path)
    with pytest.raises(SinkError, match=r"sink t: its changelog table .*t_changelog has _seq bigint.*remove"):
        create_sink_tables(spark, sink, SCHEMA)


def test_change_data_feed_is_on(spark, tmp_path):
    sink = DeltaSink("t", str(tmp_path / "t"), ("k",))
    create_sink_tables(spark, sink, SCHEMA)
    DeltaUpsertWriter(sink, str(tmp_path / "cp"))(spark.createDataFrame([(1, "a", "+I", 0)], BATCH), 0)
    DeltaUpsertWriter(sink, str(tmp_path / "cp"))(spark.createDataFrame([(1, "b", "+U", 0)], BATCH), 1)
    feed = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0).load(sink.path)
    assert sorted((r.k, r.v, r._change_type) for r in feed.collect()) == [
        (1, "a", "insert"),
        (1, "a", "update_preimage"),
        (1, "b", "update_postimage"),
    ]


def test_a_failed_changelog_append_fails_the_batch_and_its_replay_completes_it(spark, tmp_path):
    # The two writes run at once; an error of the changelog append (here: its table is not there yet, a Delta
    # table of another schema is) must fail the micro-batch, and the replayed batch must then write the
    # changelog without applying the MERGE a second time.
    sink = DeltaSink("t", str(tmp_path / "t"), ("k",))
    create_sink_tables(spark, sink, SCHEMA)
    shutil.rmtree(sink.changelog_path)
    spark.createDataFrame([(1,)], "other INT").write.format("delta").save(sink.changelog_path)
    writer = DeltaUpsertWriter(sink, str(tmp_path / "cp"))
    batch = spark.createDataFrame([(1, "a", "+I", 0), (2, "b", "+I", 1)], BATCH)
    try:
        writer(batch, 0)
    except Exception as e:  # noqa: BLE001 - Delta's schema mismatch, raised from the append's thread
        assert "schema" in str(e).lower(), e
    else:
        raise AssertionError("the batch did not fail")
    assert table(spark, sink.path) == [(1, "a"), (2, "b")]  # the MERGE ran
    merges = DeltaTable.forPath(spark, sink.path).history().count()

    shutil.rmtree(sink.changelog_path)
    create_sink_tables(spark, sink, SCHEMA)
    writer(batch, 0)
    assert table(spark, sink.path) == [(1, "a"), (2, "b")]
    assert DeltaTable.forPath(spark, sink.path).history().count() == merges
    assert sorted((r.k, r._batch_id) for r in spark.read.format("delta").load(sink.changelog_path).collect()) == [
        (1, 0),
        (2, 0),
    ]


def test_the_append_writer_commits_only_batches_with_rows_and_each_once(spark, tmp_path):
    writer = DeltaAppendWriter("t_dead_letters", str(tmp_path / "dead"), str(tmp_path / "cp"))
    writer.create(spark, SCHEMA)
    assert table(spark, writer.path) == []  # exists, empty, before any row
    created = DeltaTable.forPath(spark, writer.path).history().count()

    writer(spark.createDataFrame([], SCHEMA), 0)  # the usual dead-letter batch: nothing, and no commit
    assert DeltaTable.forPath(spark, writer.path).history().count() == created
    rows = spark.createDataFrame([(1, "bad")], SCHEMA)
    writer(rows, 1)
    writer(rows, 1)  # replayed after a crash before the checkpoint commit: skipped
    assert table(spark, writer.path) == [(1, "bad")]
    assert DeltaTable.forPath(spark, writer.path).history().count() == created + 1


def test_a_partitioned_sink_writes_one_file_per_partition_value_of_a_batch(spark, tmp_path):
    # A batch spread over several tasks, each holding rows of every day: each table gets one file per day, not
    # one per day and task (a backlog batch spanning years wrote thousands of files per table).
    schema = StructType(SCHEMA.fields + [StructField("day", IntegerType())])
    sink = DeltaSink("t", str(tmp_path / "t"), ("k",), partition_by=("day",))
    create_sink_tables(spark, sink, schema)
    rows = [(k, f"v{k}", k % 3, "+I", k) for k in range(60)]
    batch = spark.createDataFrame(rows, StructType(schema.fields + BATCH.fields[-2:])).repartition(4)
    assert batch.rdd.getNumPartitions() == 4
    DeltaUpsertWriter(sink, str(tmp_path / "cp"))(batch, 0)
    for path in (sink.path, sink.changelog_path):
        files = spark.read.format("delta").load(path).selectExpr("day", "_metadata.file_path AS file").distinct()
        assert sorted(tuple(r) for r in files.groupBy("day").count().collect()) == [(0, 1), (1, 1), (2, 1)], path
    assert table(spark, sink.path) == sorted((k, f"v{k}", k % 3) for k in range(60))


DAYS = StructType(SCHEMA.fields + [StructField("day", DateType())])
DAY0 = dt.date(2026, 1, 1)


def _day_partitioned(spark, tmp_path, primary_key):
    """A sink partitioned by ``day`` (DATE) holding keys 0–29 over days 0–2 (``k % 3``), one file per day."""
    sink = DeltaSink("t", str(tmp_path / "t"), primary_key, partition_by=("day",))
    create_sink_tables(spark, sink, DAYS)
    writer = DeltaUpsertWriter(sink, str(tmp_path / "cp"))
    writer(
        spark.createDataFrame(
            [(k, "a", DAY0 + dt.timedelta(k % 3), "+I", k) for k in range(30)],
            StructType(DAYS.fields + BATCH.fields[-2:]),
        ),
        0,
    )
    return sink, writer


def test_a_merge_reads_only_the_partitions_of_its_batch_when_the_key_holds_the_partition_columns(spark, tmp_path):
    sink, writer = _day_partitioned(spark, tmp_path, ("k", "day"))
    # Day 0's file goes missing behind Delta's back: a MERGE that opened it would fail.
    files = spark.read.format("delta").load(sink.path).selectExpr("day", "_metadata.file_path AS file").distinct()
    [day0] = [r.file for r in files.collect() if r.day == DAY0]
    os.remove(day0.removeprefix("file:"))
    batch = [
        (4, "b", DAY0 + dt.timedelta(1), "+U", 0),
        (5, "b", DAY0 + dt.timedelta(2), "-D", 1),
        (31, "c", DAY0 + dt.timedelta(1), "+I", 2),
        (32, "n", None, "+I", 3),
    ]
    writer(spark.createDataFrame(batch, StructType(DAYS.fields + BATCH.fields[-2:])), 1)
    rows = {
        r.k: (r.v, r.day)
        for r in spark.read.format("delta").load(sink.path).where("day IS NULL OR day > '2026-01-01'").collect()
    }
    assert rows[4] == ("b", DAY0 + dt.timedelta(1)) and 5 not in rows and rows[31] == ("c", DAY0 + dt.timedelta(1))
    assert rows[32] == ("n", None) and len(rows) == 20 - 1 + 2


def test_a_merge_reads_every_partition_when_a_key_can_move_between_them(spark, tmp_path):
    # Key 3 moves from day 0 to day 2 in an upsert changelog (no -U with the old day): the MERGE must find its
    # row in day 0, outside the batch's partitions.
    sink, writer = _day_partitioned(spark, tmp_path, ("k",))
    writer(
        spark.createDataFrame(
            [(3, "moved", DAY0 + dt.timedelta(2), "+U", 0)], StructType(DAYS.fields + BATCH.fields[-2:])
        ),
        1,
    )
    assert [tuple(r) for r in spark.read.format("delta").load(sink.path).where("k = 3").collect()] == [
        (3, "moved", DAY0 + dt.timedelta(2))
    ]


def test_a_partitioned_sink_whose_key_does_not_hold_the_partition_columns_gets_a_warning():
    assert DeltaSink("t", "/lake/t", ("k", "day"), partition_by=("day",)).merge_warning() is None
    assert DeltaSink("t", "/lake/t", ("k",)).merge_warning() is None
    warning = DeltaSink("t", "/lake/t", ("k",), partition_by=("day",)).merge_warning()
    assert (
        warning.startswith("sink t: PARTITIONED BY (day) but its PRIMARY KEY (k) does not hold day: ")
        and "§7.3" in warning
    )
