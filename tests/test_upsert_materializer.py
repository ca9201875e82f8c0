"""SinkUpsertMaterializer: the sink key ends with the right row whatever order its changes arrive in.

Seed 003: ``s2`` holds ``(10,a1)``, ``(20,b1)``; ``s1`` (primary key ``id``) sends
``+I(1,10)``, ``-U(1,10)``, ``+U(1,20)``; ``INSERT INTO t1 SELECT s1.*, s2.attr FROM
s1 JOIN s2 ON s1.level = s2.id`` with ``t1`` keyed by ``id``. The join emits
``+I(1,10,a1)``, ``-U(1,10,a1)`` from the task of level 10 and ``+U(1,20,b1)`` from
the task of level 20; the sink may see any interleaving that keeps the first two
in order. The table must end with ``(1,20,b1)``.
"""

from __future__ import annotations

import pytest
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from streamjoin.changelog import RowKind, materialize_upsert
from streamjoin.connectors.changelog_files import changelog_file_stream
from streamjoin.errors import ValidationError
from streamjoin.runtime.regular_join import regular_join
from streamjoin.runtime.upsert_materializer import SinkUpsertMaterializer, sink_upsert_materialize
from streamjoin.sink.collect import collect_changelog

I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE
LEVEL_10 = [(I, (1, 10, "a1")), (UB, (1, 10, "a1"))]  # from the join task of level 10, in this order
LEVEL_20 = [(UA, (1, 20, "b1"))]  # from the join task of level 20


def interleavings() -> list[list[tuple[RowKind, tuple]]]:
    """The three arrival orders at the sink that keep the level-10 task's own order."""
    return [LEVEL_10[:at] + LEVEL_20 + LEVEL_10[at:] for at in range(3)]


@pytest.mark.parametrize("order", interleavings(), ids=lambda o: "-".join(k.short for k, _ in o))
def test_every_arrival_order_ends_with_the_new_row(order):
    materializer = SinkUpsertMaterializer(sink_key=[0])
    out = [change for kind, row in order for change in materializer.process(kind, row)]
    assert materialize_upsert(out, key=[0]) == {(1,): (1, 20, "b1")}


def test_without_the_materializer_two_orders_lose_the_row():
    # Why the step exists: applied as upserts in arrival order, the late -U deletes key 1.
    finals = [materialize_upsert(order, key=[0]) for order in interleavings()]
    assert sorted(len(f) for f in finals) == [0, 0, 1]


def test_emitted_changes_follow_flink():
    m = SinkUpsertMaterializer(sink_key=[0])
    assert m.process(I, (1, "a")) == [(I, (1, "a"))]
    assert m.process(UA, (1, "b")) == [(UA, (1, "b"))]
    assert m.process(I, (1, "a")) == [(UA, (1, "a"))]  # history: a, b, a
    # Retracting "a" removes the first "a"; the newest is still "a": nothing to send.
    assert m.process(UB, (1, "a")) == []
    # Retracting the newest row sends the one before it.
    assert m.process(D, (1, "a")) == [(UA, (1, "b"))]
    assert m.process(D, (1, "zzz")) == []  # not held (e.g. expired): ignored
    assert m.process(D, (1, "b")) == [(D, (1, "b"))]
    assert m.process(I, (1, "c")) == [(I, (1, "c"))]  # the key starts over


def test_upsert_key_replaces_the_row_with_the_same_upsert_key():
    # Input upsert key (id, level); sink key id: a new version of (1, 10) replaces it in place.
    m = SinkUpsertMaterializer(sink_key=[0], upsert_key=[0, 1])
    assert m.process(I, (1, 10, "a1")) == [(I, (1, 10, "a1"))]
    assert m.process(I, (1, 20, "b1")) == [(UA, (1, 20, "b1"))]
    assert m.process(UA, (1, 10, "a2")) == [(UA, (1, 10, "a2"))]
    # Retraction compares on the upsert key only; (1,10,·) is not the newest: nothing sent.
    assert m.process(UB, (1, 10, "a1")) == []
    assert m.process(D, (1, 20, "b1")) == [(D, (1, 20, "b1"))]


def test_invalid_changelogs_as_flinks_materializer():
    # Flink 2.3.0's SinkUpsertMaterializer: a retraction of a row the key does not hold is logged ("The state is
    # cleared because of state ttl") and ignored; an accumulate is added whatever came before.
    m = SinkUpsertMaterializer(sink_key=[0])
    assert m.process(D, (1, "never")) == []  # -D of a key never inserted
    assert m.process(UA, (1, "a")) == [(I, (1, "a"))]  # +U before any insert
    assert m.process(I, (1, "a")) == [(UA, (1, "a"))]  # duplicate +I: a second equal row (no upsert key)
    assert m.process(UB, (1, "a")) == []  # -U without its +U: the first "a" goes, the newest is still "a"
    assert m.process(UB, (1, "a")) == [(D, (1, "a"))]
    assert m.process(UB, (1, "a")) == []  # nothing left to retract
    keyed = SinkUpsertMaterializer(sink_key=[0], upsert_key=[0, 1])
    assert keyed.process(I, (1, 10, "a")) == [(I, (1, 10, "a"))]
    assert keyed.process(I, (1, 10, "b")) == [(UA, (1, 10, "b"))]  # duplicate +I of an upsert key: replaced
    assert keyed.process(D, (1, 20, "x")) == []
    assert keyed.process(D, (1, 10, "zzz")) == [(D, (1, 10, "zzz"))]  # by upsert key; Flink sends the incoming row


def test_an_empty_sink_key_is_refused():
    with pytest.raises(ValidationError, match="non-empty sink key"):
        SinkUpsertMaterializer(sink_key=[])


T1 = StructType(
    [StructField("id", IntegerType()), StructField("level", IntegerType()), StructField("attr", StringType())]
)


def test_on_spark_any_order_within_and_across_micro_batches(spark, engine, tmp_path):
    # The worst order, +U(1,20,b1) first, once across three micro-batches, once inside one.
    worst = [LEVEL_20[0], *LEVEL_10]
    across = changelog_file_stream(spark, tmp_path / "across", T1, [[c] for c in worst])
    inside = changelog_file_stream(spark, tmp_path / "inside", T1, [worst, [], []], first_seq=100)
    upserts = sink_upsert_materialize(across.unionByName(inside.withColumn("id", inside.id + 1)), sink_key=["id"])
    out = collect_changelog(upserts, tmp_path / "checkpoint")
    assert materialize_upsert([(k, v) for _, k, v in out], key=[0]) == {(1,): (1, 20, "b1"), (2,): (2, 20, "b1")}


def test_on_spark_invalid_changelogs_as_flinks_materializer(spark, engine, tmp_path):
    # The anomalies of test_invalid_changelogs_as_flinks_materializer through the ListState, one per micro-batch.
    changes = [
        (D, (1, 10, "never")),
        (UA, (1, 10, "a")),
        (I, (1, 10, "a")),
        (UB, (1, 10, "a")),
        (UB, (1, 10, "a")),
        (UB, (1, 10, "a")),
        (D, (2, 5, "x")),
        (I, (2, 5, "y")),
    ]
    stream = changelog_file_stream(spark, tmp_path / "in", T1, [[c] for c in changes])
    out = collect_changelog(sink_upsert_materialize(stream, sink_key=["id"]), tmp_path / "checkpoint")
    assert [(k, v) for _, k, v in out] == [(I, (1, 10, "a")), (UA, (1, 10, "a")), (D, (1, 10, "a")), (I, (2, 5, "y"))]


S1 = StructType([StructField("id", IntegerType()), StructField("level", IntegerType())])
S2 = StructType([StructField("s2_id", IntegerType()), StructField("attr", StringType())])


def test_seed_003_join_then_materializer_on_spark(spark, engine, tmp_path):
    s2 = changelog_file_stream(spark, tmp_path / "s2", S2, [[(I, (10, "a1")), (I, (20, "b1"))], [], []])
    s1 = changelog_file_stream(
        spark, tmp_path / "s1", S1, [[(I, (1, 10))], [(UB, (1, 10)), (UA, (1, 20))], []], first_seq=10
    )
    joined = regular_join(s1, s2, on=[("level", "s2_id")], left_unique_key=["id"], right_unique_key=["s2_id"])
    # The sink key id identifies a row but is no upsert key: its changes come from two join keys.
    upserts = sink_upsert_materialize(joined.drop("s2_id"), sink_key=["id"])
    out = collect_changelog(upserts, tmp_path / "checkpoint")
    assert materialize_upsert([(k, v) for _, k, v in out], key=[0]) == {(1,): (1, 20, "b1")}


def test_spark_arguments_are_checked(spark, tmp_path):
    stream = changelog_file_stream(spark, tmp_path / "in", T1, [[]])
    with pytest.raises(ValidationError, match="sink_key"):
        sink_upsert_materialize(stream, sink_key=["nope"])
    with pytest.raises(ValidationError, match="state_ttl_ms"):
        sink_upsert_materialize(stream, sink_key=["id"], state_ttl_ms=0)
