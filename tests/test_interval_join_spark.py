"""The interval join on Spark: Flink's reference cases replayed through real streaming queries
(exact micro-batches from Parquet files), and flat state (docs/semantics.md §3).

Also holds the replay helpers the temporal-join Spark tests share.
"""

from __future__ import annotations

import datetime as dt
import logging
import pickle
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from conftest import jvm_only
from flink_cases import Case, Table, load_case
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType, TimestampNTZType
from test_interval_join import (
    CASES,
    KEY,
    LEFT,
    LEFT_TIME,
    MINUTE,
    RIGHT,
    RIGHT_TIME,
    ResidualPipeline,
    millis,
    tag_differs,
    typed,
)

from streamjoin.changelog import RowKind, materialize
from streamjoin.connectors.changelog_files import changelog_file_stream
from streamjoin.errors import ValidationError
from streamjoin.runtime.interval_join import IntervalBounds, IntervalJoinLogic, RowTimeIntervalJoin, interval_join
from streamjoin.runtime.keyed_two_input import STATE_NAME, LocalKeyedDriver
from streamjoin.sink.collect import collect_changelog

# Case column types -> Spark types of the Parquet files. TIMESTAMP columns are written as
# TIMESTAMP_NTZ and cast to TIMESTAMP after reading (the file writer cannot take TIMESTAMP).
SPARK_TYPES = {"INT": IntegerType(), "STRING": StringType(), "TIMESTAMP(3)": TimestampNTZType()}
#: Rowtime of the sentinel row each input gets after its last row: it moves the watermark past
#: every timer, as Flink's end-of-input watermark does, and is filtered out before the operator.
END_OF_INPUT = dt.datetime(2999, 1, 1)
#: The per-row watermark column of the replays that provide Flink's per-record watermark.
ROW_WATERMARK = "_flink_watermark_ms"
#: Prefix given to the right input's columns: the SQL's own aliases (b.order_id AS ...) rename them.
RIGHT_PREFIX = "r_"


def flink_watermarks(case, rowtimes: dict[str, str]) -> list[int | None]:
    """The combined watermark Flink's operator had when each arrival came (None: none yet)."""
    max_time: dict[str, int] = {}
    out = []
    for name, _, values in case.arrivals():
        table = case.tables[name]
        have = len(max_time) == len(case.tables)
        out.append(min(t - case.tables[n].watermark_delay_ms for n, t in max_time.items()) if have else None)
        t = millis(typed(table.columns, values)[[c for c, _ in table.columns].index(rowtimes[name])])
        max_time[name] = max(max_time.get(name, t), t)
    return out


def replay_streams(
    spark, tmp_path, case, rowtimes: dict[str, str], rows_per_batch: int, *, row_watermarks: bool = False
) -> tuple[dict[str, DataFrame], int]:
    """One changelog file stream per table of ``case``, ``rows_per_batch`` arrivals per micro-batch.

    Every table gets the same number of micro-batches; after the data comes one with a sentinel
    row per table (the end-of-input watermark) and one empty micro-batch, in which the timers
    it makes due fire. Columns of the second table are prefixed with :data:`RIGHT_PREFIX`.

    Returns:
        The streams by table name (watermarked on their rowtime, sentinel filtered out) and the
        number of data micro-batches.
    """
    arrivals = list(case.arrivals())
    watermarks = flink_watermarks(case, rowtimes)
    chunks = [range(i, min(i + rows_per_batch, len(arrivals))) for i in range(0, len(arrivals), rows_per_batch)]
    streams = {}
    for index, (name, table) in enumerate(case.tables.items()):
        prefix = RIGHT_PREFIX if index == 1 else ""
        names = [prefix + c for c, _ in table.columns] + ([ROW_WATERMARK] if row_watermarks else [])
        schema = StructType(
            [StructField(prefix + c, SPARK_TYPES[t]) for c, t in table.columns]
            + ([StructField(ROW_WATERMARK, LongType())] if row_watermarks else [])
        )

        def row(i, table=table):
            values = typed(table.columns, arrivals[i][2])
            return values + ((watermarks[i],) if row_watermarks else ())

        sentinel = tuple(END_OF_INPUT if c == rowtimes[name] else None for c, _ in table.columns)
        batches = [[(arrivals[i][1], row(i)) for i in chunk if arrivals[i][0] == name] for chunk in chunks]
        batches += [[("+I", sentinel + ((None,) if row_watermarks else ()))], []]
        stream = changelog_file_stream(spark, tmp_path / name, schema, batches, first_seq=index * 1_000_000)
        for c, t in table.columns:
            if t.startswith("TIMESTAMP"):
                stream = stream.withColumn(prefix + c, F.col(prefix + c).cast("timestamp"))
        time = prefix + rowtimes[name]
        delay = table.watermark_delay_ms
        stream = stream.withWatermark(time, f"{delay} milliseconds").filter(F.col(time) < F.lit(END_OF_INPUT))
        streams[name] = stream.select(*names, "_rowkind", "_seq")
    return streams, len(chunks)


def collect(spark, stream, checkpoint):
    """``collect_changelog`` with one shuffle partition: the inputs are tiny, and each partition of
    a ``transformWithState`` costs Python workers in every micro-batch."""
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    try:
        return collect_changelog(stream, checkpoint)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)


def state_rows(spark, checkpoint, batch_id: int, operator_id: int = 0, *, engine: str, join: str = "interval") -> int:
    """Rows held in a join's state after micro-batch ``batch_id``, read with Spark's state data
    source: on the python engine each key's state is one pickled
    :class:`~streamjoin.runtime.keyed_two_input.KeyState`; on the jvm engine the ``interval`` join
    keeps per side a MapState entry per cached row (keyed by rowtime and arrival), the ``temporal`` join
    a MapState entry per probe row and per version (Flink's layout)."""

    def read(name):
        reader = spark.read.format("statestore").option("path", str(checkpoint)).option("operatorId", operator_id)
        return reader.option("stateVarName", name).option("batchId", batch_id).load().collect()

    if engine == "python":
        return sum(pickle.loads(r.value.blob).logic.row_count for r in read(STATE_NAME))
    names = ("leftRows", "rightRows") if join == "interval" else ("probeRows", "versions")
    return sum(len(read(name)) for name in names)


def by_batch(changes) -> dict[int, Counter]:
    grouped: dict[int, Counter] = defaultdict(Counter)
    for batch, kind, values in changes:
        grouped[batch][(kind, values)] += 1
    return dict(grouped)


def expected_by_batch(driver: LocalKeyedDriver, project, data_batches: int) -> dict[int, Counter]:
    """Flink's changes by the micro-batch they must come in when each arrival is its own micro-batch:
    what row i emits comes in batch i, what the watermark advance after it fires in batch i + 1
    (Spark's watermark moves at the end of a batch), and the end-of-input flush in the empty batch
    after the sentinel."""
    grouped: dict[int, Counter] = defaultdict(Counter)
    for step, (kind, values) in zip(driver.steps, driver.changelog):
        batch = data_batches + 1 if step > data_batches else step
        grouped[batch][(kind, project(values))] += 1
    return dict(grouped)


# -- interval join cases --------------------------------------------------------------------------

ROWTIMES = {LEFT: LEFT_TIME, RIGHT: RIGHT_TIME}
SAME_INPUT = ["interval_join_inner", "interval_join_left", "interval_join_right", "interval_join_full"]


def flink_reference(name):
    case = load_case(name)
    params = CASES[name]
    left, right = case.tables[LEFT], case.tables[RIGHT]
    join = RowTimeIntervalJoin(params["how"], params["bounds"], len(left.columns), len(right.columns))
    driver = LocalKeyedDriver(IntervalJoinLogic(join), (left.watermark_delay_ms, right.watermark_delay_ms))
    for table, kind, values in case.arrivals():
        row = typed(case.tables[table].columns, values)
        names = [c for c, _ in case.tables[table].columns]
        time = millis(row[names.index(ROWTIMES[table])])
        driver.process(0 if table == LEFT else 1, (row[names.index(KEY)],), RowKind.from_short(kind), row, time)
    driver.finish()
    return case, driver


@dataclass(frozen=True)
class Run:
    """One operator of a replay query: ``build(streams)`` joins the case's tables (by name).
    ``case`` is a reference case's name or a :class:`~flink_cases.Case` built by a test."""

    label: str
    case: str | Case
    rowtimes: dict[str, str]
    build: Callable[[dict[str, DataFrame]], DataFrame]
    row_watermarks: bool = False


def run_together(spark, tmp_path, runs: list[Run], rows_per_batch: int) -> tuple[dict[str, list], dict[str, int]]:
    """Run several operators as one streaming query; their changes and data micro-batches by label.

    The query's watermark is global (the minimum over all its inputs), so only cases whose
    watermarks move alike at this batch size may share a query. Runs of the same case share
    its input streams, as several operators over one source do in a pipeline.
    """
    outputs, data_batches, inputs = [], {}, {}
    for run in runs:
        case = load_case(run.case) if isinstance(run.case, str) else run.case
        source = (case.name, run.row_watermarks)
        if source not in inputs:
            inputs[source] = replay_streams(
                spark, tmp_path / run.label, case, run.rowtimes, rows_per_batch, row_watermarks=run.row_watermarks
            )
        streams, data_batches[run.label] = inputs[source]
        outputs.append(run.build(streams).withColumn("_run", F.lit(run.label)))
    union = outputs[0]
    for other in outputs[1:]:
        union = union.unionByName(other, allowMissingColumns=True)
    names = [c for c in union.columns if c not in ("_rowkind", "_seq")]
    own = {
        run.label: [names.index(c) for c in o.columns if c not in ("_rowkind", "_seq", "_run")]
        for run, o in zip(runs, outputs)
    }
    result: dict[str, list] = {run.label: [] for run in runs}
    for batch, kind, values in collect(spark, union, tmp_path / "checkpoint"):
        label = values[names.index("_run")]
        result[label].append((batch, kind, tuple(values[i] for i in own[label])))
    return result, data_batches


def interval_run(name, label=None, row_watermarks=False, data=None) -> Run:
    """The interval join of case ``name`` (over the input of case ``data``, default its own)."""
    params = CASES[name]
    extra = {"row_watermark_column": ROW_WATERMARK} if row_watermarks else {}

    def build(streams):
        return interval_join(
            streams[LEFT],
            streams[RIGHT],
            on=[(KEY, RIGHT_PREFIX + KEY)],
            left_time=LEFT_TIME,
            right_time=RIGHT_PREFIX + RIGHT_TIME,
            lower_bound_ms=params["bounds"].lower_ms,
            upper_bound_ms=params["bounds"].upper_ms,
            how=params["how"],
            **extra,
        )

    return Run(label or name, data or name, ROWTIMES, build, row_watermarks)


@jvm_only
def test_interval_cases_seven_rows_per_micro_batch_give_flinks_final_result(spark, engine, tmp_path):
    # Every case fits in one micro-batch (watermark 0 for all), so they can share one query.
    runs = [interval_run(n) for n in sorted(CASES)] + [interval_run("interval_join_left_late", "exact", True)]
    results, _ = run_together(spark, tmp_path, runs, 7)
    final = {label: materialize((k, v) for _, k, v in changes) for label, changes in results.items()}
    for name in SAME_INPUT:
        assert final[name] == materialize(flink_reference(name)[1].changelog), name

    # interval_join_left_late in one micro-batch: Flink's watermark moves after each row, so when
    # shipment 1@10:02 arrives (4th row) the watermark is 10:30 and order 1@10:00 has expired
    # (null-padded): the shipment is late. Spark's watermark is the same for the whole batch (0):
    # the shipment meets order 1 and they join. That is the one difference a batch-boundary
    # watermark makes here.
    flink_final = materialize(flink_reference("interval_join_left_late")[1].changelog)
    order1 = (1, dt.datetime(2022, 10, 10, 10, 0))
    assert final["interval_join_left_late"] - flink_final == Counter(
        {order1 + (1, dt.datetime(2022, 10, 10, 10, 2)): 1}
    )
    assert flink_final - final["interval_join_left_late"] == Counter({order1 + (None, None): 1})
    # Given Flink's per-row watermark (row_watermark_column), the same batch gives Flink's result.
    assert final["exact"] == flink_final


def test_api_checks_its_arguments(spark, tmp_path):
    case = load_case("interval_join_inner")
    streams, _ = replay_streams(spark, tmp_path, case, ROWTIMES, 1)
    left, right = streams[LEFT], streams[RIGHT]
    args = {
        "on": [(KEY, "r_order_id")],
        "left_time": "ts",
        "right_time": "r_ship_ts",
        "lower_bound_ms": 0,
        "upper_bound_ms": 1,
    }
    with pytest.raises(ValidationError, match=r"\['order_id'\] are on both inputs"):
        interval_join(left, right.withColumnRenamed("r_order_id", "order_id"), **{**args, "on": [KEY]})
    with pytest.raises(ValidationError, match="'nope'"):
        interval_join(left, right, **{**args, "how": "nope"})
    with pytest.raises(ValidationError, match="no watermark"):
        interval_join(left.withColumn("ts", F.col("ts") + F.expr("INTERVAL 0 SECONDS")), right, **args)
    with pytest.raises(ValidationError, match="give both rowtimes"):
        interval_join(left, right, **{**args, "right_time": None})
    with pytest.raises(ValidationError, match=r"key column\(s\) \[.missing.\] not in the left columns"):
        interval_join(left, right, **{**args, "on": [("missing", "r_order_id")]})


def test_processing_time_interval_join_on_spark(spark, engine, tmp_path):
    """Rows of micro-batches 0 and 1 are a few seconds apart in processing time: within ±1 h.
    Spark's processing-time mode runs a micro-batch on every trigger, so an ``availableNow``
    query ends only with no-data micro-batches switched off."""
    left = changelog_file_stream(
        spark,
        tmp_path / "l",
        StructType([StructField("k", IntegerType()), StructField("a", StringType())]),
        [[("+I", (1, "a"))], [], []],
    )
    right = changelog_file_stream(
        spark,
        tmp_path / "r",
        StructType([StructField("r_k", IntegerType()), StructField("b", StringType())]),
        [[], [("+I", (1, "b"))], [("+I", (2, "c"))]],
        first_seq=100,
    )
    joined = interval_join(
        left,
        right,
        on=[("k", "r_k")],
        left_time=None,
        right_time=None,
        lower_bound_ms=-3_600_000,
        upper_bound_ms=3_600_000,
        how="right",
    )
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    try:
        changes = collect(spark, joined, tmp_path / "checkpoint")
    finally:
        spark.conf.unset("spark.sql.streaming.noDataMicroBatches.enabled")
    # Key 2's right row waits an hour for its null-padded row: not within this test.
    assert changes == [(1, RowKind.INSERT, (1, "a", 1, "b"))]


# -- residual conditions of outer joins (docs/semantics.md §3) ------------------------------------

RESIDUAL_TABLES = {
    LEFT: [("order_id", "INT"), ("ts", "TIMESTAMP(3)"), ("note", "STRING")],
    RIGHT: [("order_id", "INT"), ("ship_ts", "TIMESTAMP(3)"), ("tag", "STRING")],
}
RESIDUAL_ARRIVALS = [
    (LEFT, (1, "2024-01-01 10:00:00", "a")),
    (LEFT, (2, "2024-01-01 10:00:00", "a")),
    (RIGHT, (1, "2024-01-01 10:01:00", "a")),  # fails with order 1 (a <> a)
    (LEFT, (3, "2024-01-01 10:00:00", None)),
    (RIGHT, (2, "2024-01-01 10:03:00", "a")),  # fails with order 2: both padded
    (RIGHT, (3, "2024-01-01 10:04:00", "x")),  # NULL with order 3: both padded
    (RIGHT, (4, "2024-01-01 10:30:00", "z")),
    (LEFT, (6, "2024-01-01 10:00:00", "m")),
    (RIGHT, (1, "2024-01-01 10:02:00", "b")),  # passes: order 1 matches after a failing pair
    (LEFT, (5, "2024-01-01 10:40:00", "q")),  # the watermark moves to 10:30
    (RIGHT, (1, "2024-01-01 10:35:00", "c")),  # key 1 advances to 10:30 first: order 1 expires, matched
]
RESIDUAL_BOUNDS = IntervalBounds.between(-10 * MINUTE, 10 * MINUTE)


def residual_case() -> Case:
    tables = {
        name: Table(
            name,
            columns,
            [("+I", v) for t, v in RESIDUAL_ARRIVALS if t == name],
            rowtime=ROWTIMES[name],
            watermark_delay_ms=0,
        )
        for name, columns in RESIDUAL_TABLES.items()
    }
    return Case("interval_residual", tables, [t for t, _ in RESIDUAL_ARRIVALS], "", [], [], [], [])


def residual_reference(how: str) -> ResidualPipeline:
    """The case through the plain-Python steps, the residual ``note <> tag`` as :func:`tag_differs`."""
    pipeline = ResidualPipeline(how, RESIDUAL_BOUNDS, (3, 3), tag_differs, key_index=0)
    for table, values in RESIDUAL_ARRIVALS:
        row = typed(RESIDUAL_TABLES[table], values)
        pipeline.process(0 if table == LEFT else 1, (row[0],), RowKind.INSERT, row, millis(row[1]))
    pipeline.finish()
    return pipeline


def residual_run(how: str, row_watermarks: bool = False) -> Run:
    extra = {"row_watermark_column": ROW_WATERMARK} if row_watermarks else {}

    def build(streams):
        return interval_join(
            streams[LEFT],
            streams[RIGHT],
            on=[(KEY, RIGHT_PREFIX + KEY)],
            left_time=LEFT_TIME,
            right_time=RIGHT_PREFIX + RIGHT_TIME,
            lower_bound_ms=RESIDUAL_BOUNDS.lower_ms,
            upper_bound_ms=RESIDUAL_BOUNDS.upper_ms,
            how=how,
            condition="note <> r_tag",
            **extra,
        )

    return Run(how, residual_case(), ROWTIMES, build, row_watermarks)


@jvm_only
def test_outer_residual_one_row_per_micro_batch_emits_the_reference_changes_in_the_same_step(spark, engine, tmp_path):
    hows = ["left", "right", "full"]
    results, data_batches = run_together(spark, tmp_path, [residual_run(h) for h in hows], 1)
    for how in hows:
        expected = expected_by_batch(residual_reference(how), lambda v: v, data_batches[how])
        assert by_batch(results[how]) == expected, how
    at = lambda hhmm: dt.datetime.fromisoformat(f"2024-01-01 {hhmm}")
    pads = [(2, at("10:00"), "a"), (3, at("10:00"), None), (6, at("10:00"), "m"), (5, at("10:40"), "q")]
    ship_pads = [
        (1, at("10:01"), "a"),
        (2, at("10:03"), "a"),
        (3, at("10:04"), "x"),
        (4, at("10:30"), "z"),
        (1, at("10:35"), "c"),
    ]
    full = Counter(
        [(1, at("10:00"), "a", 1, at("10:02"), "b")]
        + [p + (None,) * 3 for p in pads]
        + [(None,) * 3 + s for s in ship_pads]
    )
    assert materialize((k, v) for _, k, v in results["full"]) == full


def test_outer_residual_four_rows_per_micro_batch_with_flinks_watermarks_give_the_reference_result(
    spark, engine, tmp_path, caplog
):
    # python: micro-batch 2 holds the passing pair of order 1 (row 8) and its expiry (row 10, per-row
    # watermark 10:30): step 3 must take them in that order, else order 1 would also be padded.
    # jvm: one step, the join evaluating the residual on each pair in the window.
    caplog.set_level(logging.INFO, logger="streamjoin.runtime.interval_join")
    results, _ = run_together(spark, tmp_path, [residual_run("full", row_watermarks=True)], 4)
    assert materialize((k, v) for _, k, v in results["full"]) == materialize(residual_reference("full").changelog)
    residual = {
        "jvm": "in the join, on each pair in the window",
        "python": "Spark filter on candidate pairs between two stateful steps; outer rows padded at expiry",
    }[engine]
    assert caplog.messages[-1] == f"interval join residual predicate 'note <> r_tag': {residual}"
