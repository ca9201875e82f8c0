"""OVER aggregation on Spark: Flink's reference cases through real streaming queries, and a seeded property.

Operator parameters per case come from :data:`test_over_aggregate.OVER_CASES`.

Watermarks. Spark's watermark is computed at the end of a micro-batch
(``max rowtime of the batches so far − delay``) and holds for the whole next
micro-batch; Flink's moves after every row. With one row per micro-batch they
coincide: a row sees ``max(earlier rows) − delay`` in both, and timers at or
before it fire before the row is taken (the operator advances first), so the
changelog equals Flink's. With seven rows per micro-batch every row of a batch
sees the watermark of the batches before it, so a row that Flink drops because
an earlier row *of the same batch* raised the watermark is kept:
``over_range_bounded_strict_wm`` keeps ITEM004 (Flink drops it behind ITEM003's
timer) and ``over_range_late_row`` keeps ITEM003 (behind ITEM005's). Those
results equal the batch window query over the rows that are not late under
Spark's watermark, which the tests check. Giving the operator the watermark
each row arrived with (``watermark_column``, here Flink's per-row watermark)
restores Flink's result at any batch size, which the tests check too.

Cases sharing the same input (same rows, order and watermark delay) share one
query: one source, one operator per case, outputs packed and unioned.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from conftest import jvm_only
from flink_cases import load_case
from operator_replay import (
    ROW_WATERMARK,
    SENTINEL,
    SENTINEL_MS,
    batch_watermarks,
    changelog_stream,
    collect_packed,
    epoch_ms,
    flink_watermarks,
    pack,
    small_queries,  # noqa: F401  (fixture)
    spark_type,
    ts_text,
)
from over_window_oracle import batch_over, flink_late_rows
from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType, StructField, StructType
from test_over_aggregate import DERIVED, OVER_CASES

from streamjoin.changelog import RowKind, materialize
from streamjoin.connectors.changelog_files import changelog_file_stream
from streamjoin.errors import ValidationError
from streamjoin.runtime.over_aggregate import over_aggregate
from streamjoin.runtime.processor import LATE_STATE

pytestmark = pytest.mark.usefixtures("small_queries")

#: Cases run at one row per micro-batch: a late row, and out-of-order rows behind a 1-minute delay.
ONE_ROW_CASES = ["over_range_late_row", "over_rows_bounded_outoforder"]
#: Queries at seven rows per micro-batch: cases in one query share their input (see :func:`shared_input`).
QUERIES = {
    "delay_1ms": ["over_rows_bounded", "over_range_bounded", "over_unbounded_range", "over_unbounded_rows"],
    "strict_wm": ["over_range_bounded_strict_wm"],
    "late_row": ["over_range_late_row"],
    "outoforder": ["over_rows_bounded_outoforder"],
}
#: Cases with a row that Flink drops as late.
FLINK_LATE = {"over_range_bounded_strict_wm", "over_range_late_row"}
OUTPUT_KEY = 1  # itemType, the PARTITION BY column, in the output rows
ROW_WM = "+row_watermarks"  # suffix of the runs given Flink's per-row watermark


def shared_input(names):
    """The common table of ``names`` (rows in arrival order, delay); fails if they differ."""
    tables = [load_case(n).tables["tmall_item"] for n in names]
    orders = [[v for _, _, v in load_case(n).arrivals()] for n in names]
    assert all(t.rows == tables[0].rows and t.watermark_delay_ms == tables[0].watermark_delay_ms for t in tables)
    assert all(o == orders[0] for o in orders)
    table = tables[0]
    columns = [(c, spark_type(t)) for c, t in table.columns]
    rows = [("+I", (v[0], v[1], epoch_ms(v[2]), v[3])) for v in orders[0]]
    return columns, rows, table.watermark_delay_ms


def over_query(spark, folder, names, rows_per_batch, *, row_watermarks: bool = False):
    """Run the cases ``names`` (one shared input) in one query; per case, ``(batch, RowKind, row)``.

    With ``row_watermarks`` each case runs a second time (as ``name + ROW_WM``)
    with ``watermark_column`` = Flink's per-row watermark. Spark's watermark,
    with the same delay, is the per-row watermark at the batch's first row, so
    it never leads it.
    """
    columns, rows, delay = shared_input(names)
    times = [values[2] for _, values in rows]
    stream = changelog_stream(
        spark,
        folder / "in",
        columns,
        rows,
        rows_per_batch,
        rowtime="onSellTime",
        watermark_delay_ms=delay,
        row_watermarks=flink_watermarks(times, delay) if row_watermarks else None,
        sentinel=("end", SENTINEL, SENTINEL_MS, 0),
    )
    stream = stream.withColumn(DERIVED[0], F.col("price").cast(DoubleType()))
    packed = []
    for name in names:
        frame, preceding, aggregates = OVER_CASES[name]
        bound = {"preceding": preceding} if frame == "rows" else {"preceding_ms": preceding}
        runs = {name: None} | ({name + ROW_WM: ROW_WATERMARK} if row_watermarks else {})
        for run, watermark_column in runs.items():
            out = over_aggregate(
                stream,
                partition_by=["itemType"],
                order_by="onSellTime",
                frame=frame,
                aggregates=aggregates,
                watermark_column=watermark_column,
                **bound,
            )
            out = out.where(F.col("itemType") != SENTINEL)
            packed.append(pack(out, run, ["itemID", "itemType", "onSellTime", "price"] + [a[0] for a in aggregates]))
    return collect_packed(packed, folder / "checkpoint")


def by_key(changelog):
    keys = dict.fromkeys(row[OUTPUT_KEY] for _, row in changelog)
    return {k: [(kind, row) for kind, row in changelog if row[OUTPUT_KEY] == k] for k in keys}


def changelog_of(results, run):
    return [(kind.short, row) for _, kind, row in results.get(run, [])]


def final(changelog):
    return sorted(materialize([(RowKind.from_short(k), row) for k, row in changelog]).elements())


@jvm_only
@pytest.mark.parametrize("name", ONE_ROW_CASES)
def test_one_row_per_micro_batch_gives_flinks_changelog(spark, engine, tmp_path, name):
    case = load_case(name)
    got = changelog_of(over_query(spark, tmp_path, [name], 1), name)
    # Keys are independent (their order across keys is not defined); within a key it is Flink's exactly.
    assert by_key(got) == by_key(case.expected_changelog)
    assert final(got) == sorted(case.expected_final)
    if name in FLINK_LATE:
        late = (
            spark.read.format("statestore")
            .option("path", str(tmp_path / "checkpoint"))
            .option("stateVarName", LATE_STATE)
            .load()
        )
        assert {(r.key[0], r.value[0]) for r in late.collect()} == {("Electronic", 1)}


def spark_watermark_oracle(name, rows_per_batch):
    """Final rows of ``name`` under Spark's per-batch watermark: the batch window over the rows not late."""
    frame, preceding, aggregates = OVER_CASES[name]
    columns, rows, delay = shared_input([name])
    marks = batch_watermarks([values[2] for _, values in rows], delay, rows_per_batch)
    late = flink_late_rows([(v[1], v[2]) for _, v in rows], marks, frame, preceding)
    positions = {c: i for i, c in enumerate([c for c, _ in columns] + [DERIVED[0]])}
    calls = [(f, None if c is None else positions[c]) for _, f, c in aggregates]
    kept = [(v[1], v[2], i, (*v, DERIVED[2](v))) for i, ((_, v), dropped) in enumerate(zip(rows, late)) if not dropped]
    # Output: the input columns without priceD, then the aggregates.
    return sorted((r[0], r[1], ts_text(r[2]), r[3], *r[5:]) for r in batch_over(kept, frame, preceding, calls)), late


@jvm_only
@pytest.mark.parametrize("query", sorted(QUERIES))
def test_seven_rows_per_micro_batch(spark, engine, tmp_path, query):
    names = QUERIES[query]
    results = over_query(spark, tmp_path, names, 7, row_watermarks=bool(FLINK_LATE & set(names)))
    for name in names:
        case = load_case(name)
        got = changelog_of(results, name)
        expected, late = spark_watermark_oracle(name, 7)
        assert final(got) == expected, name
        if name in FLINK_LATE:
            # Flink's late row came in the same micro-batch as the row that made it late: kept here.
            assert not any(late) and len(got) == len(case.expected_changelog) + 1, name
            # Given Flink's per-row watermark, the operator reproduces Flink's changelog.
            got = changelog_of(results, name + ROW_WM)
        assert by_key(got) == by_key(case.expected_changelog), name
        assert final(got) == sorted(case.expected_final), name


def test_processing_time_frames(spark, engine, tmp_path):
    batches = [[("a", 1), ("a", 5)], [("a", 3)], [("b", 2), ("a", 4)]]
    schema = StructType([StructField("k", StringType()), StructField("v", IntegerType())])
    source = changelog_file_stream(spark, tmp_path / "in", schema, [[("+I", r) for r in b] for b in batches])
    aggregates = [("m", "MAX", "v"), ("n", "COUNT", None)]
    rows = over_aggregate(source, partition_by=["k"], order_by=None, frame="rows", preceding=1, aggregates=aggregates)
    # An hour-long interval holds every row; a key's rows of one micro-batch are one instant: peers.
    peers = over_aggregate(
        source, partition_by=["k"], order_by=None, frame="range", preceding_ms=3_600_000, aggregates=aggregates
    )
    results = collect_packed(
        [pack(rows, "rows", ["k", "v", "m", "n"]), pack(peers, "range", ["k", "v", "m", "n"])], tmp_path / "checkpoint"
    )
    assert sorted((b, row) for b, _, row in results["rows"]) == [
        (0, ("a", 1, 1, 1)),
        (0, ("a", 5, 5, 2)),
        (1, ("a", 3, 5, 2)),
        (2, ("a", 4, 4, 2)),
        (2, ("b", 2, 2, 1)),
    ]
    assert sorted((b, row) for b, _, row in results["range"]) == [
        (0, ("a", 1, 5, 2)),
        (0, ("a", 5, 5, 2)),
        (1, ("a", 3, 5, 3)),
        (2, ("a", 4, 5, 4)),
        (2, ("b", 2, 2, 1)),
    ]


def test_arguments_are_checked_before_anything_runs(spark):
    df = spark.createDataFrame([], "k STRING, t TIMESTAMP, v INT, n BIGINT, _rowkind STRING, _seq BIGINT")
    common = {"partition_by": ["k"], "order_by": "t", "aggregates": [("m", "MAX", "v")]}
    with pytest.raises(ValidationError, match="ROWS frame takes preceding"):
        over_aggregate(df, frame="rows", preceding_ms=10, **common)
    with pytest.raises(ValidationError, match="RANGE frame takes preceding_ms"):
        over_aggregate(df, frame="range", preceding=1, **common)
    with pytest.raises(ValidationError, match="must be a TIMESTAMP rowtime"):
        over_aggregate(df, frame="rows", **common | {"order_by": "v"})
    with pytest.raises(ValidationError, match=r"no column \['x'\]"):
        over_aggregate(df, frame="rows", **common | {"partition_by": ["x"]})
    with pytest.raises(ValidationError, match="clash"):
        over_aggregate(df, frame="rows", **common | {"aggregates": [("v", "MAX", "v")]})
    with pytest.raises(ValidationError, match="LONG epoch ms"):
        over_aggregate(df, frame="rows", watermark_column="v", **common)
    with pytest.raises(ValidationError, match="changelog DataFrame"):
        over_aggregate(df.drop("_seq"), frame="rows", **common)
    # No PARTITION BY: one partition; the output keeps the input's columns and adds the aggregates.
    out = over_aggregate(df, frame="range", preceding_ms=None, **common | {"partition_by": []})
    assert out.columns == ["k", "t", "v", "n", "m", "_rowkind", "_seq"]
    assert out.schema["m"].dataType == IntegerType()


def test_seeded_random_stream_equals_the_batch_window_query_over_rows_not_late(spark, engine, tmp_path):
    rng = random.Random(20261123)
    delay, interval = 1000, 4000
    rows, highest = [], 10_000
    for i in range(30):
        # At most delay + interval/2 behind the latest row (see test_over_aggregate's generator).
        time = max(highest - 3000, highest + rng.choice([-3000, -2000, -1000, 0, 0, 1000, 1000, 2000]))
        highest = max(highest, time)
        rows.append((rng.choice("abc"), time, rng.choice([None, *range(-5, 20)]), i))
    batches = []
    while sum(map(len, batches)) < len(rows):
        start = sum(map(len, batches))
        batches.append(rows[start : start + rng.randint(3, 10)])
    schema = StructType(
        [
            StructField("k", StringType()),
            StructField("t", LongType()),
            StructField("v", IntegerType()),
            StructField("i", LongType()),
        ]
    )
    files = [[("+I", r) for r in b] for b in batches]
    files[-1].append(("+I", (SENTINEL, SENTINEL_MS, 0, -1)))
    source = changelog_file_stream(spark, tmp_path / "in", schema, files)
    source = source.withColumn("t", F.timestamp_millis("t")).withWatermark("t", f"{delay} milliseconds")
    # RANGE (peers, interval, clean-up timers) through Spark; ROWS frames have the pure-Python property.
    # FIRST/LAST_VALUE are left out: peers have no order in Spark's batch window.
    aggregates = [("lo", "MIN", "v"), ("hi", "MAX", "v"), ("s", "SUM", "v"), ("n", "COUNT", None), ("a", "AVG", "v")]
    out = over_aggregate(
        source, partition_by=["k"], order_by="t", frame="range", preceding_ms=interval, aggregates=aggregates
    )
    results = collect_packed(
        [pack(out.where(F.col("k") != SENTINEL), "range", ["i"] + [a[0] for a in aggregates])], tmp_path / "checkpoint"
    )

    marks, seen = [], None
    for batch in batches:
        # Spark's watermark: the batches before, minus the delay.
        marks += [-(2**63) if seen is None else seen - delay] * len(batch)
        seen = max([r[1] for r in batch] + ([] if seen is None else [seen]))
    late = flink_late_rows([(k, t) for k, t, _, _ in rows], marks, "range", interval)
    assert 0 < sum(late) < len(rows), "the seed should give some late rows"
    kept = spark.createDataFrame(
        [r for r, dropped in zip(rows, late) if not dropped], "k STRING, t LONG, v INT, i LONG"
    )
    window = Window.partitionBy("k").orderBy("t").rangeBetween(-interval, 0)
    # Spark's batch window functions, with Flink's result types (SUM and AVG of INT are INT).
    expected = kept.select(
        "i",
        F.min("v").over(window),
        F.max("v").over(window),
        F.sum("v").over(window).cast("int"),
        F.count("*").over(window),
        F.avg("v").over(window).cast("int"),
    )
    assert Counter(row for _, _, row in results["range"]) == Counter(tuple(r) for r in expected.collect())
