"""ChangelogNormalize (streamjoin.runtime.changelog_normalize): Flink's processLastRowOnChangelog, in Python and on
Spark."""

from __future__ import annotations

import pytest
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from streamjoin.changelog import RowKind, materialize
from streamjoin.connectors.changelog_files import changelog_file_stream
from streamjoin.errors import ValidationError
from streamjoin.runtime.changelog_normalize import ChangelogNormalize, changelog_normalize, normalize_change
from streamjoin.sink.collect import collect_changelog

I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE

#: An upsert changelog: upserts by key, an identical upsert, a tombstone carrying only the key,
#: a delete of a key never seen, and a key coming back after its delete.
UPSERTS = [
    (UA, (1, "a")),
    (I, (2, "x")),
    (UA, (1, "b")),
    (UA, (1, "b")),
    (D, (2, None)),
    (D, (3, None)),
    (UA, (2, "y")),
    (UB, (1, None)),
]
#: What Flink's ChangelogNormalize emits for it with UPDATE_BEFORE.
FULL = [
    (I, (1, "a")),
    (I, (2, "x")),
    (UB, (1, "a")),
    (UA, (1, "b")),
    (D, (2, "x")),
    (I, (2, "y")),
    (D, (1, "b")),
]


def run(changes, **options):
    normalize = ChangelogNormalize(key=[0], **options)
    return [out for kind, row in changes for out in normalize.process(kind, row)]


def test_upserts_become_a_full_changelog():
    out = run(UPSERTS)
    assert out == FULL
    assert materialize(out) == {(2, "y"): 1}


def test_without_update_before_updates_are_upserts():
    assert run(UPSERTS, update_before=False) == [c for c in FULL if c[0] is not UB]


def test_an_identical_row_is_emitted_again_with_state_ttl():
    assert run([(UA, (1, "a")), (UA, (1, "a"))], state_ttl=True) == [(I, (1, "a")), (UB, (1, "a")), (UA, (1, "a"))]


def test_a_delete_emits_the_stored_row_not_the_incoming_one():
    stored, changes = normalize_change((7, "full", 3), D, (7, None, None))
    assert (stored, changes) == (None, [(D, (7, "full", 3))])


def test_a_retract_changelog_passes_through_unchanged():
    # A Debezium changelog with duplicated events (cdc-events-duplicate): -U/+U pairs are kept, the duplicate dropped.
    retract = [(I, (1, "a")), (UB, (1, "a")), (UA, (1, "b")), (UA, (1, "b"))]
    assert run(retract) == [(I, (1, "a")), (D, (1, "a")), (I, (1, "b"))]


def test_invalid_changelogs_as_flinks_process_last_row_on_changelog():
    # Flink 2.3.0's output of invalid_changelog_normalize_upsert (tests/data/flink-diff/cases), plus a -U without
    # its +U: it deletes the stored row, as Flink does ("there may be no UPDATE_AFTER after it").
    upserts = [(I, (1, "a")), (I, (1, "a")), (I, (1, "b")), (D, (2, None)), (UA, (3, "c")), (D, (1, None))]
    assert run(upserts) == [(I, (1, "a")), (UB, (1, "a")), (UA, (1, "b")), (I, (3, "c")), (D, (1, "b"))]
    assert run([(I, (1, "a")), (UB, (1, "a")), (UB, (1, "a")), (D, (1, "a"))]) == [(I, (1, "a")), (D, (1, "a"))]


def test_an_empty_key_is_refused():
    with pytest.raises(ValidationError, match="primary key"):
        ChangelogNormalize(key=[])


T = StructType([StructField("id", IntegerType()), StructField("v", StringType())])


def test_on_spark_within_and_across_micro_batches(spark, engine, tmp_path):
    across = changelog_file_stream(spark, tmp_path / "across", T, [[c] for c in UPSERTS])
    inside = changelog_file_stream(spark, tmp_path / "inside", T, [UPSERTS, [], []], first_seq=100)
    both = across.unionByName(inside.withColumn("id", inside.id + 10))
    out = collect_changelog(changelog_normalize(both, key=["id"]), tmp_path / "checkpoint")
    changes = [(kind, values) for _, kind, values in out]
    assert [c for c in changes if c[1][0] < 10] == FULL
    assert [(k, (v[0] - 10, v[1])) for k, v in changes if v[0] >= 10] == FULL


def test_on_spark_without_update_before_and_with_ttl(spark, engine, tmp_path):
    stream = changelog_file_stream(spark, tmp_path / "in", T, [[(UA, (1, "a"))], [(UA, (1, "a")), (UA, (1, "b"))]])
    # State TTL puts the operator in processing-time mode, which an availableNow query never leaves.
    out = collect_changelog(
        changelog_normalize(stream, key=["id"], update_before=False, state_ttl_ms=3_600_000),
        tmp_path / "checkpoint",
        batches=2,
    )
    assert [(kind, values) for _, kind, values in out] == [(I, (1, "a")), (UA, (1, "a")), (UA, (1, "b"))]


def test_spark_arguments_are_checked(spark, tmp_path):
    stream = changelog_file_stream(spark, tmp_path / "in", T, [[]])
    with pytest.raises(ValidationError, match="key"):
        changelog_normalize(stream, key=["nope"])
    with pytest.raises(ValidationError, match="key columns"):
        changelog_normalize(stream, key=[])
    with pytest.raises(ValidationError, match="state_ttl_ms"):
        changelog_normalize(stream, key=["id"], state_ttl_ms=0)
