"""Every operator's hypothesis properties on both engines: differential properties.

Each property draws its input with the strategy of the operator's own property tests, prepares it
with the operator function itself (``streamjoin.testing.engines.capture``) and runs it, one row per
micro-batch, through both shells in process (``run_engines``: PySpark's and Spark's ``TwsTester``).
The jvm engine's changelog must equal the python engine's change for change (RowKind, values,
``_seq``, step by step), and the python shell's result must equal the plain-Python driver's that the
operator's own properties check against their oracles — so each of those properties holds for the
Scala twin on the same inputs.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from contextlib import contextmanager

from hypothesis import given, settings
from hypothesis import strategies as st
from operator_replay import flink_watermarks, replay_keyed, replay_over
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType, TimestampType
from test_deduplicate import streams as dedup_streams
from test_group_aggregate import ALL, KV, changelogs, group_function
from test_interval_join import STREAM_PARAMETERS as INTERVAL_PARAMETERS
from test_interval_join import ResidualPipeline, id_residual
from test_interval_join import generate as interval_rows
from test_over_aggregate import AGGREGATES as OVER_AGGREGATES
from test_over_aggregate import KV as OVER_KV
from test_over_aggregate import KVI, event_time_streams, instants, over_function, replay_instants
from test_regular_join_property import LEFT_SCHEMA, RIGHT_SCHEMA, greater, interleave, random_changelog
from test_temporal_join import generate as temporal_events

from streamjoin.changelog import RowKind
from streamjoin.jvm import ENGINE_CONF
from streamjoin.runtime.changelog_normalize import ChangelogNormalize, changelog_normalize
from streamjoin.runtime.deduplicate import DedupState, deduplicate, deduplicate_function
from streamjoin.runtime.group_aggregate import GroupState, group_aggregate
from streamjoin.runtime.interval_join import IntervalBounds, IntervalJoinLogic, RowTimeIntervalJoin, interval_join
from streamjoin.runtime.keyed_two_input import LocalKeyedDriver
from streamjoin.runtime.over_aggregate import over_aggregate
from streamjoin.runtime.rank import RankState, TopNFunction, rank
from streamjoin.runtime.regular_join import regular_join
from streamjoin.runtime.regular_join.streaming_join import JoinSpec, JoinType, LocalRegularJoin
from streamjoin.runtime.temporal_join import TemporalJoinLogic, TemporalRowTimeJoin, temporal_join
from streamjoin.runtime.timers import MIN_TIME
from streamjoin.runtime.upsert_materializer import SinkUpsertMaterializer, sink_upsert_materialize
from streamjoin.runtime.window_rank import SortKey
from streamjoin.testing.engines import ProcessingTime, Visit, Watermark, capture, run_engines, run_two_steps, visits

#: Rowtimes are drawn as small ints; on Spark they are ms after this (Spark's watermark starts at 0).
BASE_MS = 1_000_000
#: A watermark past every rowtime: the end of the input.
END_MS = 10**12
EXAMPLES = settings(max_examples=6, deadline=None)


def timestamp(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000)


def changelog(spark, schema: StructType, changes):
    """A static changelog DataFrame: ``(RowKind, values)`` changes, ``_seq`` their position."""
    fields = [*schema.fields, StructField("_rowkind", StringType(), False), StructField("_seq", LongType(), False)]
    rows = [(*values, kind.short, seq) for seq, (kind, values) in enumerate(changes)]
    return spark.createDataFrame(rows, StructType(fields))


def two_inputs(spark, schemas, rowtimes, keys, arrivals, driver, delay):
    """The two static inputs of a two-input operator from arrival-ordered ``(side, kind, values)``
    (rowtimes as small ints): ``_seq`` the arrival position, rowtimes as TIMESTAMPs ``BASE_MS`` on
    with a watermark, and a row-watermark column ``_wm``: the operator watermark ``driver`` (a
    :class:`LocalKeyedDriver`, fed the same rows, keyed by the columns at ``keys``) had when the row
    arrived. Returns the two DataFrames and the watermarks (ms, None before the first)."""
    rows, marks = ([], []), []
    for seq, (side, kind, values) in enumerate(arrivals):
        mark = None if driver.watermark == MIN_TIME else BASE_MS + driver.watermark
        marks.append(mark)
        position = schemas[side].names.index(rowtimes[side])
        time = values[position]
        typed = tuple(timestamp(BASE_MS + v) if i == position else v for i, v in enumerate(values))
        rows[side].append((*typed, kind.short, seq, mark))
        driver.process(side, (values[keys[side]],), kind, values, time)
    frames = []
    for side, schema in enumerate(schemas):
        fields = [
            *schema.fields,
            StructField("_rowkind", StringType(), False),
            StructField("_seq", LongType(), False),
            StructField("_wm", LongType()),
        ]
        df = spark.createDataFrame(rows[side], StructType(fields))
        watermarked = F.col(rowtimes[side]).alias(rowtimes[side], metadata={"spark.watermarkDelayMs": delay})
        frames.append(df.select(*[watermarked if c == rowtimes[side] else c for c in df.columns]))
    return frames, marks


@contextmanager
def planned_for(spark, engine: str):
    """Operator functions called inside build the plan of ``engine``: a join's residual predicate is
    evaluated inside the join on jvm, by Spark around the join on python (docs/semantics.md §2.6)."""
    before = spark.conf.get(ENGINE_CONF)
    spark.conf.set(ENGINE_CONF, engine)
    try:
        yield
    finally:
        spark.conf.set(ENGINE_CONF, before)


def kinds(changes):
    return [(RowKind.from_short(kind), values) for kind, values, _ in changes]


# --------------------------------------------------------------------------- deduplicate

DEDUP_SCHEMA = StructType(
    [StructField("k", StringType()), StructField("t", TimestampType()), StructField("v", IntegerType())]
)


@EXAMPLES
@given(
    dedup_streams,
    st.sampled_from([("first", None), ("last", None), ("last", "t"), ("first", "t")]),
    st.sampled_from([0, 1, 3]),
)
def test_deduplicate(spark, rows, variant, delay):
    keep, order_by = variant
    event_time = keep == "first" and order_by is not None
    source = changelog(spark, DEDUP_SCHEMA, [(RowKind.INSERT, (k, timestamp(BASE_MS + t), v)) for k, t, v in rows])
    [op] = capture(lambda: deduplicate(source, key=["k"], order_by=order_by, keep=keep))
    marks = flink_watermarks([BASE_MS + t for _, t, _ in rows], delay) if event_time else None
    steps = visits(op.rows(), marks) + ([Watermark(END_MS)] if event_time else [])
    run = run_engines(op, steps)
    run.assert_equal()
    ours = [(kind, (k, t // 1000 - BASE_MS, v)) for kind, (k, t, v) in kinds(run.changes())]
    fn = deduplicate_function(keep, rowtime=order_by is not None)
    if not event_time:
        expected = replay_keyed(lambda s, r: fn.process_element(s, r, r[1]), DedupState, [(r[0], r) for r in rows])
        assert ours == expected
        return
    # Flink's driver: per-row watermarks, every key's due timers fire when it rises, +inf at the end.
    states: dict = {}
    expected, watermark = [], MIN_TIME
    for (key, time, value), mark in zip(rows, [m - BASE_MS if m > MIN_TIME else m for m in marks]):
        if mark > watermark:
            watermark = mark
            for s in states.values():
                expected += s.timers.advance(watermark, lambda t, s=s: fn.on_timer(s, t))
        state = states.setdefault(key, DedupState())
        state.timers.advance(watermark, lambda t: [])
        expected += fn.process_element(state, (key, time, value), time)
    for s in states.values():
        expected += s.timers.advance(END_MS, lambda t, s=s: fn.on_timer(s, t))
    assert Counter(ours) == Counter(expected)


# --------------------------------------------------------------------------- group aggregate


@EXAMPLES
@given(changelogs(), st.booleans())
def test_group_aggregate(spark, changes, insert_only):
    if insert_only:
        changes = [(kind, row) for kind, row in changes if kind == RowKind.INSERT]
    source = changelog(spark, StructType([StructField(c, t) for c, t in KV.items()]), changes)
    aggregates = ALL if not insert_only else [a for a in ALL if a[1] != "COUNT_DISTINCT"]
    [op] = capture(
        lambda: group_aggregate(source, group_by=["k"], aggregates=aggregates, insert_only_input=insert_only)
    )
    run = run_engines(op, visits(op.rows()))
    run.assert_equal()
    fn = group_function(aggregates, KV, ["k", "v"], retractable=not insert_only)
    expected = replay_keyed(
        lambda s, c: fn.process_element(s, (c[1][0],), *c), GroupState, [(c[1][0], c) for c in changes]
    )
    assert kinds(run.changes()) == expected


# --------------------------------------------------------------------------- Top-N (rank)

RANK_VARIANTS = [
    # (strategy, rank range, output the rank, ORDER BY as (column, ascending, nulls first))
    ("retract", (1, 2), True, [("v", False, False)]),
    ("retract", (1, 2), False, [("v", True, True)]),
    ("retract", (2, 3), False, [("v", False, True)]),
    ("append", (1, 3), True, [("v", False, False)]),
    ("append", (1, 2), False, [("v", True, False)]),
    ("append", (2, 3), True, [("v", True, True)]),
    ("top1", (1, 1), False, [("v", True, True)]),
    ("first", (1, 2), True, [("v", True, True)]),
]


@EXAMPLES
@given(changelogs(), st.sampled_from(RANK_VARIANTS))
def test_rank(spark, changes, variant):
    strategy, (start, end), output_rank, order_by = variant
    if strategy != "retract":
        changes = [(kind, row) for kind, row in changes if kind == RowKind.INSERT]
    source = changelog(spark, StructType([StructField(c, t) for c, t in KV.items()]), changes)
    [op] = capture(
        lambda: rank(
            source,
            partition_by=["k"],
            order_by=order_by,
            rank_start=start,
            rank_end=end,
            rank_column="rn" if output_rank else None,
            strategy=strategy,
        )
    )
    run = run_engines(op, visits(op.rows()))
    run.assert_equal()
    keys = [SortKey(1, ascending, nulls_first) for _, ascending, nulls_first in order_by]
    fn = TopNFunction(keys, start, end, output_rank, strategy)
    expected = replay_keyed(lambda s, c: fn.process_element(s, *c), RankState, [(c[1][0], c) for c in changes])
    assert kinds(run.changes()) == expected


@st.composite
def monotonic_upserts(draw):
    """Upserts of rows (k, id, c) keyed by (k, id) whose count c only grows: ``+I`` first, then ``+U`` (what an
    aggregate's COUNT emits without ``-U``, the input of Flink's UpdateFastStrategy)."""
    counts: dict = {}
    changes = []
    for _ in range(draw(st.integers(0, 30))):
        key = (draw(st.sampled_from("ab")), draw(st.integers(0, 4)))
        grown = counts.get(key, 0) + draw(st.integers(0, 2))
        changes.append((RowKind.UPDATE_AFTER if key in counts else RowKind.INSERT, (*key, grown)))
        counts[key] = grown
    return changes


KIC = StructType([StructField("k", StringType()), StructField("id", IntegerType()), StructField("c", IntegerType())])


@EXAMPLES
@given(monotonic_upserts(), st.sampled_from([(1, 2, True), (1, 3, False), (2, 3, False), (1, 1, False)]))
def test_rank_over_monotonic_upserts(spark, changes, variant):
    start, end, output_rank = variant
    strategy = "top1" if (start, end) == (1, 1) else "update"
    source = changelog(spark, KIC, changes)
    [op] = capture(
        lambda: rank(
            source,
            partition_by=["k"],
            order_by=[("c", False, False)],
            rank_start=start,
            rank_end=end,
            rank_column="rn" if output_rank else None,
            strategy=strategy,
            row_key=["k", "id"] if strategy == "update" else [],
        )
    )
    run = run_engines(op, visits(op.rows()))
    run.assert_equal()
    fn = TopNFunction([SortKey(2, False, False)], start, end, output_rank, strategy, row_key=[0, 1])
    expected = replay_keyed(lambda s, c: fn.process_element(s, *c), RankState, [(c[1][0], c) for c in changes])
    assert kinds(run.changes()) == expected


# --------------------------------------------------------------------------- ChangelogNormalize, SinkUpsertMaterializer

#: Any changelog over rows (k, u, v): every RowKind in any order, so invalid changelogs too.
ANY_CHANGES = st.lists(
    st.tuples(
        st.sampled_from(list(RowKind)),
        st.tuples(st.integers(0, 2), st.integers(0, 1), st.sampled_from([None, "x", "y"])),
    ),
    max_size=25,
)
#: A valid changelog over rows (k, u, v): the group aggregate's, ``(k, v)`` as ``(k, u)``.
VALID_CHANGES = changelogs().map(lambda cs: [(kind, (ord(k) - ord("a"), v, "x")) for kind, (k, v) in cs])
KUV = StructType([StructField("k", IntegerType()), StructField("u", IntegerType()), StructField("v", StringType())])


@EXAMPLES
@given(st.one_of(ANY_CHANGES, VALID_CHANGES), st.booleans(), st.booleans())
def test_changelog_normalize(spark, changes, update_before, ttl):
    source = changelog(spark, KUV, changes)
    state_ttl_ms = 60_000 if ttl else None
    [op] = capture(
        lambda: changelog_normalize(source, key=["k"], update_before=update_before, state_ttl_ms=state_ttl_ms)
    )
    run = run_engines(op, visits(op.rows()))
    run.assert_equal()
    normalize = ChangelogNormalize(key=[0], update_before=update_before, state_ttl=ttl)
    assert kinds(run.changes()) == [out for kind, row in changes for out in normalize.process(kind, row)]


@EXAMPLES
@given(st.one_of(ANY_CHANGES, VALID_CHANGES), st.booleans())
def test_sink_upsert_materializer(spark, changes, with_upsert_key):
    source = changelog(spark, KUV, changes)
    upsert_key = ["k", "u"] if with_upsert_key else None
    [op] = capture(lambda: sink_upsert_materialize(source, sink_key=["k"], upsert_key=upsert_key))
    run = run_engines(op, visits(op.rows()))
    run.assert_equal()
    materializer = SinkUpsertMaterializer(sink_key=[0], upsert_key=[0, 1] if with_upsert_key else None)
    assert kinds(run.changes()) == [out for kind, row in changes for out in materializer.process(kind, row)]


# --------------------------------------------------------------------------- interval join, temporal join

ID_KEY_TIME = [("id", StringType()), ("k", IntegerType()), ("t", TimestampType())]


def back_to_ints(changes, rowtimes):
    """Output changes with the TIMESTAMP columns at ``rowtimes`` as the small ints they were drawn as."""
    return [
        (kind, tuple(v if i not in rowtimes or v is None else v // 1000 - BASE_MS for i, v in enumerate(values)))
        for kind, values in kinds(changes)
    ]


@EXAMPLES
@given(**INTERVAL_PARAMETERS)
def test_interval_join(spark, seed, how, lower, width, delay):
    bounds = IntervalBounds(lower, lower + width)
    driver = LocalKeyedDriver(IntervalJoinLogic(RowTimeIntervalJoin(how, bounds, 3, 3)), (delay, delay))
    schemas = [StructType([StructField(f"{p}{c}", t) for c, t in ID_KEY_TIME]) for p in "lr"]
    arrivals = [
        (side, RowKind.INSERT, (ident, key, t))
        for side, key, t, ident in interval_rows(random.Random(seed), 25, 3, delay, 0.1)
    ]
    (left, right), marks = two_inputs(spark, schemas, ("lt", "rt"), (1, 1), arrivals, driver, delay)
    [op] = capture(
        lambda: interval_join(
            left,
            right,
            on=[("lk", "rk")],
            left_time="lt",
            right_time="rt",
            lower_bound_ms=lower,
            upper_bound_ms=lower + width,
            how=how,
            row_watermark_column="_wm",
        )
    )
    run = run_engines(op, visits(op.rows(), marks) + [Watermark(END_MS)])
    run.assert_equal()
    driver.finish()
    assert Counter(back_to_ints(run.changes(), {2, 5})) == Counter(driver.changelog)


#: :func:`test_interval_join.id_residual` as the Spark SQL predicate: over ids ``L<n>`` / ``R<m>``,
#: NULL when ``n + m`` is a multiple of 5, else whether it is not a multiple of 3.
ID_RESIDUAL = (
    "CASE WHEN (int(substring(lid, 2)) + int(substring(rid, 2))) % 5 = 0 THEN NULL "
    "ELSE (int(substring(lid, 2)) + int(substring(rid, 2))) % 3 <> 0 END"
)


def interval_residual_run(spark, run, seed, how, lower, width, delay, plan):
    """A random interval join with :data:`ID_RESIDUAL` as planned for the ``plan`` engine (``run(build,
    steps)``: the engines' run of the operator function ``build``); the ``plan`` engine's changes, as a
    multiset, equal :class:`test_interval_join.ResidualPipeline`'s (the Spark plan of the python
    engine in plain Python, ``id_residual`` in place of Spark's filter)."""
    pipeline = ResidualPipeline(how, IntervalBounds(lower, lower + width), (3, 3), id_residual, (delay, delay))
    schemas = [StructType([StructField(f"{p}{c}", t) for c, t in ID_KEY_TIME]) for p in "lr"]
    arrivals = [
        (side, RowKind.INSERT, (ident, key, t))
        for side, key, t, ident in interval_rows(random.Random(seed), 25, 3, delay, 0.1)
    ]
    (left, right), marks = two_inputs(spark, schemas, ("lt", "rt"), (1, 1), arrivals, pipeline.driver, delay)
    with planned_for(spark, plan):
        result = run(
            lambda: interval_join(
                left,
                right,
                on=[("lk", "rk")],
                left_time="lt",
                right_time="rt",
                lower_bound_ms=lower,
                upper_bound_ms=lower + width,
                how=how,
                row_watermark_column="_wm",
                condition=ID_RESIDUAL,
            ),
            lambda first: visits(first.rows(), marks) + [Watermark(END_MS)],
        )
    pipeline.finish()
    assert result.jvm_error is None
    assert Counter(back_to_ints(result.changes(plan), {2, 5})) == Counter(pipeline.changelog)
    return result


@EXAMPLES
@given(**{**INTERVAL_PARAMETERS, "how": st.sampled_from(["left", "right", "full"])})
def test_interval_join_with_a_residual(spark, seed, how, lower, width, delay):
    """Outer interval join with a residual as the python engine plans it: the candidate step and
    ResidualPaddingLogic chained on each engine."""
    interval_residual_run(spark, run_two_steps, seed, how, lower, width, delay, "python").assert_equal()


@EXAMPLES
@given(**{**INTERVAL_PARAMETERS, "how": st.sampled_from(["inner", "left", "right", "full"])})
def test_interval_join_with_a_residual_inside_the_jvm_join(spark, seed, how, lower, width, delay):
    """An interval join with a residual as the jvm engine plans it: one step, the join evaluating the
    predicate on each pair in the window, its Python twin unable to."""
    jvm_alone = lambda build, steps: one_step(build, steps, with_python=False)
    interval_residual_run(spark, jvm_alone, seed, how, lower, width, delay, "jvm")


@EXAMPLES
@given(seed=st.integers(0, 2**32 - 1), how=st.sampled_from(["inner", "left"]), delay=st.integers(0, 8))
def test_temporal_join(spark, seed, how, delay):
    driver = LocalKeyedDriver(TemporalJoinLogic(TemporalRowTimeJoin(how, 3)), (delay, delay))
    schemas = [
        StructType([StructField(f"p{c}", t) for c, t in ID_KEY_TIME]),
        StructType(
            [StructField("vk", IntegerType()), StructField("vt", TimestampType()), StructField("vv", IntegerType())]
        ),
    ]
    arrivals = [
        (side, kind, (ident, key, t) if side == 0 else (key, t, value))
        for side, kind, key, t, ident, value in temporal_events(random.Random(seed), 8, 20, 3, delay, 0.1)
    ]
    (probe, versioned), marks = two_inputs(spark, schemas, ("pt", "vt"), (1, 0), arrivals, driver, delay)
    [op] = capture(
        lambda: temporal_join(
            probe, versioned, on=[("pk", "vk")], probe_time="pt", version_time="vt", how=how, row_watermark_column="_wm"
        )
    )
    run = run_engines(op, visits(op.rows(), marks) + [Watermark(END_MS)])
    run.assert_equal()
    driver.finish()
    assert Counter(back_to_ints(run.changes(), {2, 4})) == Counter(driver.changelog)


# --------------------------------------------------------------------------- regular join

#: The drawn parameters of a regular join but its type: inputs (``random_changelog``), keys, TTL.
JOIN_PARAMETERS = {
    "seed": st.integers(0, 2**32 - 1),
    "equi": st.booleans(),
    "unique_keys": st.booleans(),
    "ttl": st.booleans(),
    "sizes": st.tuples(st.integers(0, 15), st.integers(0, 15)),
}


def regular_join_run(spark, run, seed, how, equi, unique_keys, ttl, sizes, condition=None, plan="python"):
    """Both random changelogs of :mod:`test_regular_join_property` joined by ``regular_join`` as planned
    for the ``plan`` engine (``run(build, steps)``: the engines' run of the operator function ``build``
    with ``steps`` from its first shell). A python plan runs on both engines, which must agree, and
    the python engine's changes equal ``LocalRegularJoin``'s (with the Python ``condition``) per
    arrival, as multisets (one arrival's matches come in state order); a jvm plan's jvm changes must."""
    rng = random.Random(seed)
    left, _ = random_changelog(rng, sizes[0], unique=0 if unique_keys else None)
    right, _ = random_changelog(rng, sizes[1], unique=1 if unique_keys else None)
    arrivals = interleave(rng, left, right)
    sides = [
        changelog(spark, schema, [(kind, row) for s, _, kind, row in arrivals if s == side])
        for side, schema in enumerate((LEFT_SCHEMA, RIGHT_SCHEMA))
    ]
    positions = [[seq for seq, a in enumerate(arrivals) if a[0] == side] for side in (0, 1)]
    # _seq is the arrival position on both sides.
    left_df, right_df = (
        df.withColumn("_seq", F.element_at(F.array(*[F.lit(p) for p in [-1, *pos]]), F.col("_seq").cast("int") + 2))
        for df, pos in zip(sides, positions)
    )
    with planned_for(spark, plan):
        result = run(
            lambda: regular_join(
                left_df,
                right_df,
                on=[("lk", "rk")] if equi else [],
                how=how.value,
                condition=None if condition is None else "lv > rv",
                left_unique_key=["lk"] if unique_keys else None,
                right_unique_key=["rv"] if unique_keys else None,
                state_ttl_ms=60_000 if ttl else None,
            ),
            lambda first: visits(first.rows()),
        )
    if plan == "python":
        result.assert_equal(ordered=False)
    keys = [0] if equi else []
    join = LocalRegularJoin(
        JoinSpec(how, keys, keys, 2, 2, [0] if unique_keys else None, [1] if unique_keys else None), condition
    )
    expected = [Counter(join.process(side, kind, row)) for side, _, kind, row in arrivals]
    assert result.jvm_error is None
    assert [Counter(kinds(step)) for step in getattr(result, plan)] == expected


def one_step(build, steps, *, with_python=True):
    [op] = capture(build)
    return run_engines(op, steps(op), with_python=with_python)


@EXAMPLES
@given(how=st.sampled_from(list(JoinType)), **JOIN_PARAMETERS)
def test_regular_join(spark, seed, how, equi, unique_keys, ttl, sizes):
    regular_join_run(spark, one_step, seed, how, equi, unique_keys, ttl, sizes)


@EXAMPLES
@given(how=st.sampled_from([t for t in JoinType if t is not JoinType.INNER]), **JOIN_PARAMETERS)
def test_regular_join_with_a_residual(spark, seed, how, equi, unique_keys, ttl, sizes):
    """``lv > rv`` (``test_regular_join_property.greater``) as the python engine plans it: the candidate
    and associate steps chained on each engine."""
    # Candidate pairs come in each engine's state order: the first steps compared as multisets.
    chained = lambda build, steps: run_two_steps(build, steps, ordered=False)
    regular_join_run(spark, chained, seed, how, equi, unique_keys, ttl, sizes, condition=greater)


@EXAMPLES
@given(how=st.sampled_from(list(JoinType)), **JOIN_PARAMETERS)
def test_regular_join_with_a_residual_inside_the_jvm_join(spark, seed, how, equi, unique_keys, ttl, sizes):
    """``lv > rv`` as the jvm engine plans it: one step, the join evaluating the predicate on each
    equi-matching pair (Flink's JoinCondition), its Python twin unable to; checked against the
    plain-Python join with the Python predicate."""
    jvm_alone = lambda build, steps: one_step(build, steps, with_python=False)
    regular_join_run(spark, jvm_alone, seed, how, equi, unique_keys, ttl, sizes, condition=greater, plan="jvm")


# --------------------------------------------------------------------------- OVER (event time)

OVER_SCHEMA = StructType(
    [
        StructField("k", StringType()),
        StructField("v", IntegerType()),
        StructField("i", IntegerType()),
        StructField("t", TimestampType()),
    ]
)


@EXAMPLES
@given(event_time_streams())
def test_over_aggregate(spark, stream):
    frame, preceding, delay, rows = stream
    marks = flink_watermarks([t for *_, t in rows], delay)
    source = changelog(
        spark, OVER_SCHEMA, [(RowKind.INSERT, (k, v, i, timestamp(BASE_MS + t))) for i, (k, v, t) in enumerate(rows)]
    )
    # Flink's per-row watermark as the row-watermark column, and the rowtime's watermark delay.
    source = source.withColumn(
        "_wm",
        F.lit(None).cast(LongType())
        if not rows
        else F.element_at(
            F.array(*[F.lit(None if m == MIN_TIME else BASE_MS + m).cast(LongType()) for m in marks]),
            F.col("_seq").cast("int") + 1,
        ),
    )
    source = source.select(
        *[F.col("t").alias("t", metadata={"spark.watermarkDelayMs": delay}) if c == "t" else c for c in source.columns]
    )
    bound = {"preceding": preceding} if frame == "rows" else {"preceding_ms": preceding}
    [op] = capture(
        lambda: over_aggregate(
            source,
            partition_by=["k"],
            order_by="t",
            frame=frame,
            **bound,
            aggregates=OVER_AGGREGATES,
            watermark_column="_wm",
        )
    )
    spark_marks = [None if m == MIN_TIME else BASE_MS + m for m in marks]
    run = run_engines(op, visits(op.rows(), spark_marks) + [Watermark(END_MS)])
    run.assert_equal()
    fn = over_function(frame, preceding, OVER_AGGREGATES, KVI, ["k", "v", "i"], order_by="t")
    expected = replay_over(fn, [(k, (k, v, i), t) for i, (k, v, t) in enumerate(rows)], marks).outputs
    # Output: the input columns (t as µs in Spark's internal form) then the aggregates.
    ours = [values[:3] + values[4:] for _, values in kinds(run.changes())]
    assert all(kind == RowKind.INSERT for kind, _ in kinds(run.changes()))
    assert Counter(ours) == Counter(expected)


# --------------------------------------------------------------------------- OVER (processing time)


@EXAMPLES
@given(instants())
def test_over_aggregate_processing_time(spark, stream):
    """Each instant a micro-batch at that wall-clock time: one visit per key of its rows."""
    frame, preceding, batches = stream
    schema = StructType([StructField(c, t) for c, t in OVER_KV.items()])
    source = changelog(spark, schema, [(RowKind.INSERT, row) for _, batch in batches for row in batch])
    bound = {"preceding": preceding} if frame == "rows" else {"preceding_ms": preceding}
    [op] = capture(
        lambda: over_aggregate(
            source, partition_by=["k"], order_by=None, frame=frame, **bound, aggregates=OVER_AGGREGATES
        )
    )
    rows, steps = iter(op.rows()), []
    for now, batch in batches:
        steps.append(ProcessingTime(BASE_MS + now))
        taken = [next(rows) for _ in batch]
        for key in dict.fromkeys(tuple(r[c] for c in op.key) for r in taken):
            steps.append(Visit(tuple(r for r in taken if tuple(r[c] for c in op.key) == key)))
    run = run_engines(op, steps)
    run.assert_equal()
    fn = over_function(frame, preceding, OVER_AGGREGATES, OVER_KV, ["k", "v"], order_by=None)
    assert all(kind == RowKind.INSERT for kind, _ in kinds(run.changes()))
    assert Counter(values for _, values in kinds(run.changes())) == Counter(replay_instants(fn, batches))
