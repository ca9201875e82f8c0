"""Property: for random changelogs, the materialised streaming join equals the batch join of the final inputs.

Random changelogs on both sides (inserts, updates as ``-U``/``+U``, deletes,
null keys, duplicate rows), interleaved at random and cut into random
micro-batches, for every join type, with and without a residual predicate,
with and without an equi key, with and without unique keys. ``materialize``
raises on a retraction of a row that is not present, so a passing run also
says the changelog is well-formed.

In plain Python (hypothesis) the batch join is nested loops; on Spark (a seeded
run of a few join variants in one streaming query) it is Spark's own batch join.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StructField, StructType

from streamjoin.changelog import RowKind, materialize
from streamjoin.connectors.changelog_files import changelog_file_stream
from streamjoin.runtime.regular_join import regular_join
from streamjoin.runtime.regular_join.streaming_join import JoinSpec, JoinType, LocalRegularJoin
from streamjoin.runtime.two_input import LEFT, RIGHT
from streamjoin.sink.collect import collect_changelog

KEYS = [1, 2, 3, None]
VALUES = [1, 2, 3, 4, None]
I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE


def random_changelog(rng: random.Random, length: int, unique: int | None = None) -> tuple[list, Counter]:
    """A well-formed changelog of ``(key, value)`` rows and the multiset it ends with.

    ``unique``: position of a column kept unique (and not null) among the live rows.
    """
    live: list[tuple] = []
    changes: list[tuple[RowKind, tuple]] = []

    def new_row(keep: tuple | None = None) -> tuple | None:
        for _ in range(20):
            row = (rng.choice(KEYS), rng.choice(VALUES))
            if unique is None:
                return row
            if keep is not None and rng.random() < 0.5:
                row = tuple(keep[i] if i == unique else v for i, v in enumerate(row))
            taken = {r[unique] for r in live}
            if row[unique] is not None and (row[unique] not in taken or (keep and row[unique] == keep[unique])):
                return row
        return None

    while len(changes) < length:
        choice = rng.random()
        if not live or choice < 0.5:
            row = new_row()
            if row is not None:
                changes.append((I, row))
                live.append(row)
        elif choice < 0.75:
            old = rng.choice(live)
            live.remove(old)
            new = new_row(keep=old)
            if new is None:
                live.append(old)
                continue
            changes += [(UB, old), (UA, new)]
            live.append(new)
        else:
            old = rng.choice(live)
            live.remove(old)
            changes.append((D, old))
    return changes, Counter(live)


def interleave(rng: random.Random, left: list, right: list) -> list[tuple[int, int, RowKind, tuple]]:
    """Both changelogs in one random arrival order: ``(side, index in its own changelog, kind, row)``."""
    sides = [LEFT] * len(left) + [RIGHT] * len(right)
    rng.shuffle(sides)
    cursor = [0, 0]
    arrivals = []
    for side in sides:
        kind, row = (left, right)[side][cursor[side]]
        arrivals.append((side, cursor[side], kind, row))
        cursor[side] += 1
    return arrivals


def greater(left: tuple, right: tuple) -> bool:
    """SQL ``lv > rv`` with null → false."""
    return left[1] is not None and right[1] is not None and left[1] > right[1]


def batch_join(how: JoinType, left: Counter, right: Counter, equi: bool, condition) -> Counter:
    """The join of two multisets by nested loops: the batch semantics the stream must end with."""
    lefts, rights = list(left.elements()), list(right.elements())

    def match(l, r):
        return (not equi or (l[0] is not None and l[0] == r[0])) and (condition is None or condition(l, r))

    out: Counter = Counter()
    if not how.projects_right:
        for l in lefts:
            if any(match(l, r) for r in rights) == (how is JoinType.SEMI):
                out[l] += 1
        return out
    right_matched = [False] * len(rights)
    for l in lefts:
        found = False
        for j, r in enumerate(rights):
            if match(l, r):
                out[l + r] += 1
                found = right_matched[j] = True
        if not found and how in (JoinType.LEFT, JoinType.FULL):
            out[l + (None, None)] += 1
    if how in (JoinType.RIGHT, JoinType.FULL):
        for r, matched in zip(rights, right_matched):
            if not matched:
                out[(None, None) + r] += 1
    return out


def run_in_micro_batches(join: LocalRegularJoin, arrivals, cuts: list[int], rng: random.Random, equi: bool) -> list:
    """Process like the Spark operator: per micro-batch, per join key (keys in any order), by ``(_seq, side)``."""
    output = []
    bounds = [0, *sorted(cuts), len(arrivals)]
    for start, end in itertools.pairwise(bounds):
        groups: dict = {}
        for seq, (side, _, kind, row) in enumerate(arrivals[start:end], start=start):
            groups.setdefault(row[0] if equi else (), []).append((seq, side, kind, row))
        keys = list(groups)
        rng.shuffle(keys)
        for key in keys:
            for _, side, kind, row in sorted(groups[key], key=lambda c: (c[0], c[1])):
                output.extend(join.process(side, kind, row))
    return output


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    how=st.sampled_from(list(JoinType)),
    with_condition=st.booleans(),
    equi=st.booleans(),
    unique_keys=st.booleans(),
    sizes=st.tuples(st.integers(0, 30), st.integers(0, 30)),
)
def test_streaming_join_ends_as_the_batch_join(seed, how, with_condition, equi, unique_keys, sizes):
    rng = random.Random(seed)
    # With unique keys: left unique on its join key (JoinKeyContainsUniqueKey when equi),
    # right unique on its value (InputSideHasUniqueKey).
    left, left_final = random_changelog(rng, sizes[0], unique=0 if unique_keys else None)
    right, right_final = random_changelog(rng, sizes[1], unique=1 if unique_keys else None)
    arrivals = interleave(rng, left, right)
    cuts = rng.sample(range(len(arrivals) + 1), k=min(3, len(arrivals) + 1))
    condition = greater if with_condition else None
    keys = [0] if equi else []
    spec = JoinSpec(how, keys, keys, 2, 2, [0] if unique_keys else None, [1] if unique_keys else None)
    output = run_in_micro_batches(LocalRegularJoin(spec, condition), arrivals, cuts, rng, equi)
    assert materialize(output) == batch_join(how, left_final, right_final, equi, condition)


# --- the same on Spark, seeded: a few join variants in one streaming query --------------------------------

LEFT_SCHEMA = StructType([StructField("lk", IntegerType()), StructField("lv", IntegerType())])
RIGHT_SCHEMA = StructType([StructField("rk", IntegerType()), StructField("rv", IntegerType())])
SPARK_HOW = {
    JoinType.INNER: "inner",
    JoinType.LEFT: "left_outer",
    JoinType.RIGHT: "right_outer",
    JoinType.FULL: "full_outer",
    JoinType.SEMI: "left_semi",
    JoinType.ANTI: "left_anti",
}
# (join type, residual predicate, equi key?): a few operators in one query keep this affordable
# (~1.5 s per operator per micro-batch here): one-step with -U/+U passthrough, one-step ANTI,
# two steps with both sides outer, two steps without equi key (one group).
SPARK_VARIANTS = [
    (JoinType.INNER, None, True),
    (JoinType.ANTI, None, True),
    (JoinType.FULL, "lv > rv", True),
    (JoinType.LEFT, "lv > rv", False),
]


@pytest.fixture
def one_shuffle_partition(spark):
    """Queries started in the test run their stateful operators in one task per micro-batch."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    yield
    spark.conf.set("spark.sql.shuffle.partitions", before)


@pytest.mark.parametrize("seed", [7])
def test_streaming_join_ends_as_spark_batch_join(spark, engine, tmp_path, one_shuffle_partition, seed):
    rng = random.Random(seed)
    left, left_final = random_changelog(rng, 24)
    right, right_final = random_changelog(rng, 24)
    arrivals = interleave(rng, left, right)
    cuts = sorted(rng.sample(range(1, len(arrivals)), k=2))
    bounds = [0, *cuts, len(arrivals)]
    batches = [arrivals[a:b] for a, b in itertools.pairwise(bounds)]
    left_stream = changelog_file_stream(
        spark, tmp_path / "left", LEFT_SCHEMA, [[(k, r) for s, _, k, r in b if s == LEFT] for b in batches]
    )
    right_stream = changelog_file_stream(
        spark,
        tmp_path / "right",
        RIGHT_SCHEMA,
        [[(k, r) for s, _, k, r in b if s == RIGHT] for b in batches],
        first_seq=len(left),
    )
    outputs = []
    for number, (how, condition, equi) in enumerate(SPARK_VARIANTS):
        joined = regular_join(
            left_stream, right_stream, on=[("lk", "rk")] if equi else [], how=how.value, condition=condition
        )
        if not how.projects_right:
            padding = [F.lit(None).cast("int").alias(c) for c in ("rk", "rv")]
            joined = joined.select("lk", "lv", *padding, "_rowkind", "_seq")
        outputs.append(joined.withColumn("variant", F.lit(number)))
    union = outputs[0]
    for other in outputs[1:]:
        union = union.unionByName(other)
    changes = collect_changelog(union, tmp_path / "checkpoint")

    left_batch = spark.createDataFrame(list(left_final.elements()), LEFT_SCHEMA)
    right_batch = spark.createDataFrame(list(right_final.elements()), RIGHT_SCHEMA)
    for number, (how, condition, equi) in enumerate(SPARK_VARIANTS):
        ours = materialize((kind, values[:-1]) for _, kind, values in changes if values[-1] == number)
        predicate = [F.col("lk") == F.col("rk")] if equi else []
        if condition:
            predicate.append(F.expr(condition))
        on = predicate[0] if len(predicate) == 1 else predicate[0] & predicate[1]
        expected_rows = left_batch.join(right_batch, on=on, how=SPARK_HOW[how]).collect()
        width = 4 if how.projects_right else 2
        expected = Counter(tuple(r)[:width] + (None, None) * (width == 2) for r in expected_rows)
        assert ours == expected, f"{how.value} condition={condition} equi={equi}"
