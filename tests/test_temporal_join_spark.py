"""The temporal joins on Spark: random streams through real streaming queries (Flink's event-time cases run
through the planner in ``test_replay.py``), flat state, and the lookup join against a Delta table that changes between
micro-batches (docs/semantics.md §4)."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import jvm_only
from flink_cases import Case, Table, load_case
from pyspark.sql import functions as F
from test_interval_join import generate as generate_interval
from test_interval_join_spark import (
    ROW_WATERMARK,
    Run,
    replay_streams,
    run_together,
    state_rows,
)
from test_temporal_join import CASES, KEY, PROBE, PROBE_TIME, VERSION_TIME, millis, typed
from test_temporal_join import generate as generate_temporal

from streamjoin.changelog import RowKind, materialize
from streamjoin.errors import ValidationError
from streamjoin.runtime.interval_join import IntervalBounds, IntervalJoinLogic, RowTimeIntervalJoin, interval_join
from streamjoin.runtime.keyed_two_input import LocalKeyedDriver
from streamjoin.runtime.temporal_join import (
    TemporalJoinLogic,
    TemporalProcessTimeJoin,
    TemporalRowTimeJoin,
    lookup_join,
    temporal_join,
)


def rowtimes(name):
    return {PROBE: PROBE_TIME, CASES[name]["versioned"]: VERSION_TIME}


# -- lookup join against a Delta table ----------------------------------------------------------------


def test_lookup_join_joins_each_micro_batch_with_the_current_delta_rows(spark, tmp_path):
    """EUR orders joined with a Delta rates table that is updated between micro-batches: each
    micro-batch sees the version committed before it started; emitted rows are never revised."""
    rates_path = str(tmp_path / "rates")
    orders_dir = tmp_path / "orders"
    orders_dir.mkdir()
    schema = pa.schema(
        [("order_id", pa.int32()), ("currency", pa.string()), ("_rowkind", pa.string()), ("_seq", pa.int64())]
    )

    def write_rates(rows):
        spark.createDataFrame(rows, "rate_currency STRING, rate INT").write.format("delta").mode("overwrite").save(
            rates_path
        )

    def write_orders(index, rows):
        table = pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)
        pq.write_table(table, orders_dir / f"batch-{index}.parquet")

    write_rates([("EUR", 114), ("USD", 102)])
    orders = spark.readStream.schema("order_id INT, currency STRING, _rowkind STRING, _seq LONG").parquet(
        str(orders_dir)
    )
    joined = lookup_join(orders, rates_path, on=[("currency", "rate_currency")], how="left")
    seen = []
    query = (
        joined.writeStream.foreachBatch(lambda df, batch: seen.extend((batch, tuple(r)) for r in df.collect()))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        write_orders(0, [(1, "EUR", "+I", 0), (2, "GBP", "+I", 1)])
        query.processAllAvailable()
        write_rates([("EUR", 116), ("USD", 102), ("GBP", 108)])
        write_orders(1, [(3, "EUR", "+I", 2), (4, "GBP", "+I", 3)])
        query.processAllAvailable()
    finally:
        query.stop()
    rows = sorted(row for _, row in seen)
    assert rows == [
        (1, "EUR", "EUR", 114, "+I", 0),
        (2, "GBP", None, None, "+I", 1),  # no GBP rate yet: padded, and never revised
        (3, "EUR", "EUR", 116, "+I", 2),
        (4, "GBP", "GBP", 108, "+I", 3),
    ]
    # The same rule in plain Python (Flink's TemporalProcessTimeJoinOperator): the current row at arrival.
    join = TemporalProcessTimeJoin("left", 2)
    assert join.process_probe(None, RowKind.INSERT, (2, "GBP")) == [(RowKind.INSERT, (2, "GBP", None, None))]


def test_temporal_api_checks_its_arguments(spark, tmp_path):
    case = load_case("temporal_join_inner")
    streams, _ = replay_streams(spark, tmp_path, case, rowtimes("temporal_join_inner"), 1)
    probe, rates = streams[PROBE], streams["RatesHistory"]
    args = {"on": [(KEY, "r_currency")], "probe_time": PROBE_TIME, "version_time": "r_update_time"}
    with pytest.raises(ValidationError, match="'right'"):
        temporal_join(probe, rates, **args, how="right")
    with pytest.raises(ValidationError, match=r"\['currency'\] are on both inputs"):
        temporal_join(probe, rates.withColumnRenamed("r_currency", "currency"), **{**args, "on": [KEY]})
    with pytest.raises(ValidationError, match="no watermark"):
        temporal_join(probe.withColumn(PROBE_TIME, F.col(PROBE_TIME) + F.expr("INTERVAL 0 SECONDS")), rates, **args)
    with pytest.raises(ValidationError, match="'full'"):
        lookup_join(probe, spark.range(1).withColumnRenamed("id", "r_currency"), on=[(KEY, "r_currency")], how="full")


# -- random streams and state size, both joins through Spark ------------------------------------------

BASE = dt.datetime(2024, 1, 1)
STREAM_COLUMNS = {
    "L": [("id", "STRING"), ("k", "INT"), ("t", "TIMESTAMP(3)")],
    "R": [("id", "STRING"), ("k", "INT"), ("t", "TIMESTAMP(3)")],
    "P": [("id", "STRING"), ("k", "INT"), ("t", "TIMESTAMP(3)")],
    "V": [("k", "INT"), ("v", "INT"), ("t", "TIMESTAMP(3)")],
}


def stamp(ms: int) -> str:
    return (BASE + dt.timedelta(milliseconds=ms)).isoformat(sep=" ", timespec="milliseconds")


def as_case(name: str, events: list[tuple[str, str, tuple]], delay_ms: int) -> Case:
    """Arrival-ordered ``(table, RowKind, values)`` as a case in the reference format, so the same
    replay drives it (rowtime = the last column of each table)."""
    names = [t for t in STREAM_COLUMNS if any(e[0] == t for e in events)]  # left/probe table first
    return Case(
        name=name,
        tables={
            t: Table(
                t,
                STREAM_COLUMNS[t],
                [(k, v) for tt, k, v in events if tt == t],
                rowtime="t",
                watermark_delay_ms=delay_ms,
            )
            for t in names
        },
        arrival=[t for t, _, _ in events],
        query="",
        setup=[],
        expected_columns=[],
        expected_changelog=[],
        expected_final=[],
    )


def reference(case: Case, logic) -> LocalKeyedDriver:
    """The case through the plain-Python operator (tables in order: side 0, side 1; key = column ``k``)."""
    tables = list(case.tables)
    driver = LocalKeyedDriver(logic, tuple(case.tables[t].watermark_delay_ms for t in tables))
    for table, kind, values in case.arrivals():
        columns = case.tables[table].columns
        row = typed(columns, values)
        names = [c for c, _ in columns]
        driver.process(tables.index(table), (row[names.index("k")],), RowKind.from_short(kind), row, millis(row[-1]))
    driver.finish()
    return driver


def random_interval_case(seed: int) -> Case:
    rows = generate_interval(random.Random(seed), 48, 3, 3, late_share=0.1)
    return as_case("random_interval", [("LR"[s], "+I", (i, k, stamp(t))) for s, k, t, i in rows], 3)


def random_temporal_case(seed: int) -> Case:
    events = generate_temporal(random.Random(seed), 12, 36, 3, 4, late_share=0.15)
    return as_case(
        "random_temporal",
        [
            ("P", k.short, (i, key, stamp(t))) if s == 0 else ("V", k.short, (key, v, stamp(t)))
            for s, k, key, t, i, v in events
        ],
        4,
    )


def interval_stream_run(label, case, bounds, how, row_watermarks) -> Run:
    extra = {"row_watermark_column": ROW_WATERMARK} if row_watermarks else {}
    build = lambda s: interval_join(
        s["L"],
        s["R"],
        on=[("k", "r_k")],
        left_time="t",
        right_time="r_t",
        lower_bound_ms=bounds.lower_ms,
        upper_bound_ms=bounds.upper_ms,
        how=how,
        **extra,
    )
    return Run(label, case, {"L": "t", "R": "t"}, build, row_watermarks)


def temporal_stream_run(label, case, how, row_watermarks) -> Run:
    extra = {"row_watermark_column": ROW_WATERMARK} if row_watermarks else {}
    build = lambda s: temporal_join(
        s["P"], s["V"], on=[("k", "r_k")], probe_time="t", version_time="r_t", how=how, **extra
    )
    return Run(label, case, {"P": "t", "V": "t"}, build, row_watermarks)


def test_random_streams_through_spark_give_the_reference_result(spark, engine, tmp_path):
    """Out-of-order and late rows, 6 rows per micro-batch with Flink's per-row watermark: the
    materialised output equals the plain-Python operator's (which the property tests hold against
    the batch joins)."""
    bounds = IntervalBounds(-5, 5)
    interval_case, temporal_case = random_interval_case(11), random_temporal_case(12)
    runs = [
        interval_stream_run("interval", interval_case, bounds, "full", True),
        temporal_stream_run("temporal", temporal_case, "left", True),
    ]
    results, _ = run_together(spark, tmp_path, runs, 6)
    interval_ref = reference(interval_case, IntervalJoinLogic(RowTimeIntervalJoin("full", bounds, 3, 3)))
    temporal_ref = reference(temporal_case, TemporalJoinLogic(TemporalRowTimeJoin("left", 3)))
    assert materialize((k, v) for _, k, v in results["interval"]) == materialize(interval_ref.changelog)
    assert materialize((k, v) for _, k, v in results["temporal"]) == materialize(temporal_ref.changelog)
    assert len(interval_ref.changelog) > 20 and len(temporal_ref.changelog) > 10


def steady_case(kind: str, batches: int, per_batch: int, key_of: Callable[[int], int] = lambda n: n % 5) -> Case:
    """``batches`` × ``per_batch`` rows in time order, 100 ms apart, row ``n`` of key ``key_of(n)`` (5 keys in turn)."""
    events = []
    for n in range(batches * per_batch):
        key, t = key_of(n), n * 100
        if kind == "interval":
            events.append(("LR"[n % 2], "+I", (f"x{n}", key, stamp(t))))
        elif n % 4 == 0:
            events.append(("V", "+I", (key, n, stamp(t))))
        else:
            events.append(("P", "+I", (f"p{n}", key, stamp(t))))
    return as_case(kind, events, 0)


@jvm_only
def test_state_stays_flat_while_the_stream_grows_ten_times(spark, engine, tmp_path):
    """20 micro-batches of 10 rows: the rows both joins hold (read back with Spark's state data
    source) after batch 2, 10 and 20 stay within one micro-batch's worth of rows of each other,
    bounded by rate × window, while the input grows from 20 to 200 rows."""
    batches, per_batch = 20, 10
    runs = [
        interval_stream_run(
            "interval", steady_case("interval", batches, per_batch), IntervalBounds(-1000, 1000), "full", False
        ),
        temporal_stream_run("temporal", steady_case("temporal", batches, per_batch), "left", False),
    ]
    results, _ = run_together(spark, tmp_path, runs, per_batch)
    assert results["interval"] and results["temporal"]
    for operator, join in enumerate(("interval", "temporal")):
        sizes = [
            state_rows(spark, tmp_path / "checkpoint", b, operator, engine=engine, join=join)
            for b in (1, 9, batches - 1)
        ]
        assert 0 < min(sizes) and max(sizes) - min(sizes) <= per_batch, (operator, sizes)
        assert max(sizes) <= 4 * per_batch, (operator, sizes)  # 200 rows went in


@jvm_only
def test_keys_that_do_not_come_back_leave_no_state_rows(spark, engine, tmp_path):
    """Each key gets 10 rows within one second of event time and never comes back, as order keys do: once the
    watermark has passed a key's window, the key holds no state row at all: no cached row, and no row of the
    shell's per-key time and timers with the join's clean-up timers (which stayed behind for every key ever seen:
    state grew with the keys)."""
    batches, per_batch = 20, 10
    case = steady_case("interval", batches, per_batch, key_of=lambda n: n // 10)
    results, _ = run_together(
        spark, tmp_path, [interval_stream_run("interval", case, IntervalBounds(-1000, 1000), "inner", False)], per_batch
    )
    assert results["interval"]

    def keys(name):
        reader = (
            spark.read.format("statestore").option("path", str(tmp_path / "checkpoint")).option("stateVarName", name)
        )
        return {tuple(r.key) for r in reader.option("batchId", batches - 1).load().collect()}

    live = keys("leftRows") | keys("rightRows")
    # 20 keys went in; the watermark of the last micro-batch (18.9 s) has passed every window but the last three keys'.
    assert 0 < len(live) <= 3 and keys("timers") <= live, (live, keys("timers"))
