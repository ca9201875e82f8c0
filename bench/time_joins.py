"""Benchmark: time-bounded joins on TPC-H — our interval join against Spark's native stream-stream join
with a time-range condition, and our event-time temporal join against Spark's stream-static join.

Interval join: ``orders ⋈ lineitem ON o_orderkey = l_orderkey AND l_shiptime BETWEEN o_ordertime AND
o_ordertime + INTERVAL 30 DAYS``, INNER and LEFT OUTER, insert-only input with 1-day watermark delays
(``bench/tpch_streams.py``); Spark's native join runs the same condition with the same watermarks.

Temporal join: ``orders ⋈ rates FOR SYSTEM_TIME AS OF o_ordertime ON o_currency = currency``, INNER
and LEFT. ``o_currency`` is each order's customer currency (``customer_currencies``), added when the
slices are written; the rates are the ECB rates (``rate_rows()``, watermark delay 0) cut into
micro-batches aligned in time with the orders' slices: batch *i* holds the rates up to the latest
``o_ordertime`` of orders slice *i*, the last batch also every later rate, so the combined watermark
moves with the orders. Spark has no event-time temporal join: the reference is Spark's stream-static
join of the same orders stream with the current rates (the latest rate per currency, a Delta table),
i.e. our processing-time lookup join (``lookup_join``), which reads no rates stream and keeps no state.
Its input rows are the orders only, ours the orders plus the rates: the ratio is given per order.

All queries run in one Spark session, one after the other, on the same Parquet micro-batches, into
the ``noop`` sink; figures are Spark's own progress reports.

    .venv/bin/python -m bench.time_joins --scale-factor 0.01 --batches 5
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from bench.harness import Measurement, bench_setup, run_all
from bench.tpch_streams import equal_slices, slice_stream, tpch_changelog, tpch_streams
from streamjoin.datagen.topics import ORDERS, RATES, rate_rows
from streamjoin.datagen.tpch import TpchChangelog, customer_currencies
from streamjoin.runtime.interval_join import interval_join
from streamjoin.runtime.temporal_join import lookup_join, temporal_join

_DAY_MS = 86_400_000
#: ``l_shiptime BETWEEN o_ordertime + LOWER AND o_ordertime + UPPER``.
LOWER_MS, UPPER_MS = 0, 30 * _DAY_MS
#: The orders' schema with the customer's currency.
ORDERS_WITH_CURRENCY = StructType([*ORDERS.schema.fields, StructField("o_currency", StringType())])


def interval_queries(streams: dict) -> list[tuple]:
    """Spark's native stream-stream join (inner, left outer) and ours (inner, left) with the 30-day condition."""

    def native(how: str):
        def build() -> DataFrame:
            orders = streams["orders"]().drop("_rowkind", "_seq")
            lineitem = streams["lineitem"]().drop("_rowkind", "_seq")
            condition = (
                (orders.o_orderkey == lineitem.l_orderkey)
                & (lineitem.l_shiptime >= orders.o_ordertime + F.expr(f"INTERVAL {LOWER_MS // _DAY_MS} DAYS"))
                & (lineitem.l_shiptime <= orders.o_ordertime + F.expr(f"INTERVAL {UPPER_MS // _DAY_MS} DAYS"))
            )
            return orders.join(lineitem, condition, how)

        return build

    def ours(how: str):
        return lambda: interval_join(
            streams["orders"](), streams["lineitem"](), on=[("o_orderkey", "l_orderkey")],
            left_time="o_ordertime", right_time="l_shiptime", lower_bound_ms=LOWER_MS, upper_bound_ms=UPPER_MS, how=how,
        )

    return [
        ("spark native interval inner join", native("inner")),
        ("streamjoin interval inner join", ours("inner")),
        ("spark native interval left outer join", native("left_outer")),
        ("streamjoin interval left join", ours("left")),
    ]


def rates_streams(spark: SparkSession, tpch: TpchChangelog, batches: int, workdir: Path) -> tuple[dict, int]:
    """The orders with ``o_currency`` and the rates, as aligned micro-batches; a Delta table of the latest rates.

    Returns:
        ``({"orders": build, "rates": build, "current_rates": delta path}, number of orders)``.
    """
    currency = {c["c_custkey"]: c["currency"] for c in customer_currencies(tpch.data_dir)}
    orders = [{**o, "o_currency": currency[o["o_custkey"]]} for o in tpch.orders]
    order_slices = equal_slices(orders, batches)
    rates = rate_rows()  # in rate_time order
    rate_slices, start = [], 0
    for index, rows in enumerate(order_slices):
        if index == len(order_slices) - 1:
            end = len(rates)
        else:
            until = max((o["o_ordertime"] for o in rows), default=None)
            end = start
            while until is not None and end < len(rates) and rates[end]["rate_time"] <= until:
                end += 1
        rate_slices.append(rates[start:end])
        start = end
    latest = {r["currency"]: r for r in rates}
    current = workdir / "current_rates"
    current_rows = [tuple(r[c] for c in RATES.schema.names) for r in latest.values()]
    spark.createDataFrame(current_rows, RATES.schema).write.format("delta").save(str(current))
    spark.read.format("delta").load(str(current)).count()  # Delta's first read out of the measured queries
    builders = {
        "orders": slice_stream(
            spark, workdir / "orders_with_currency", ORDERS_WITH_CURRENCY, order_slices,
            rowtime=ORDERS.rowtime, watermark_delay_ms=ORDERS.watermark_delay_ms,
        ),
        "rates": slice_stream(
            spark, workdir / "rates", RATES.schema, rate_slices, rowtime=RATES.rowtime,
            watermark_delay_ms=RATES.watermark_delay_ms,
        ),
        "current_rates": str(current),
    }
    print("rates per micro-batch: " + ", ".join(f"{len(s):,}" for s in rate_slices))
    return builders, len(orders)


def temporal_queries(streams: dict) -> list[tuple]:
    """Spark's stream-static (lookup) join with the current rates (inner, left) and our temporal join (inner, left)."""

    def lookup(how: str):
        return lambda: lookup_join(streams["orders"](), streams["current_rates"], on=[("o_currency", "currency")], how=how)

    def ours(how: str):
        return lambda: temporal_join(
            streams["orders"](), streams["rates"](), on=[("o_currency", "currency")],
            probe_time="o_ordertime", version_time="rate_time", how=how,
        )

    return [
        ("spark stream-static lookup inner join", lookup("inner")),
        ("streamjoin temporal inner join", ours("inner")),
        ("spark stream-static lookup left join", lookup("left")),
        ("streamjoin temporal left join", ours("left")),
    ]


def ratio(ours: Measurement, reference: Measurement, per: float | None = None) -> float:
    """Our throughput as a multiple of the reference's: input rows/s, or ``per`` rows (same for both) per second."""
    if per is None:
        return ours.rows_per_second / reference.rows_per_second
    return (per / ours.seconds) / (per / reference.seconds)


def main() -> None:
    args, spark, workdir = bench_setup("time_joins", __doc__.splitlines()[0])
    tpch = tpch_changelog(args.scale_factor)
    streams = tpch_streams(spark, args.scale_factor, args.batches, workdir / "input", tpch=tpch)
    rates, n_orders = rates_streams(spark, tpch, args.batches, workdir / "input")

    print("\nInterval join: orders ⋈ lineitem, l_shiptime BETWEEN o_ordertime AND o_ordertime + 30 days\n")
    interval = run_all(interval_queries(streams), workdir / "checkpoints" / "interval")
    print()
    for ours, native in ((interval[1], interval[0]), (interval[3], interval[2])):
        print(f"{ours.name}: {ratio(ours, native):.2f}x the native join's rows/s ({native.name})")

    print("\nTemporal join: orders ⋈ rates FOR SYSTEM_TIME AS OF o_ordertime. Spark has no event-time temporal join;")
    print("the reference is Spark's stream-static join of the orders with the current rates (processing-time lookup")
    print("join: no rates stream, no state, not the same result). Its input is the orders only; ours also reads the rates.\n")
    temporal = run_all(temporal_queries(rates), workdir / "checkpoints" / "temporal")
    print()
    for ours, reference in ((temporal[1], temporal[0]), (temporal[3], temporal[2])):
        print(f"{ours.name}: {n_orders / ours.seconds:,.0f} orders/s, {ratio(ours, reference, n_orders):.2f}x the "
              f"stream-static lookup join's orders/s ({reference.name}); {ratio(ours, reference):.2f}x its input rows/s")


if __name__ == "__main__":
    main()
