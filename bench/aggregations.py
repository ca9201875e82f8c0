"""Benchmark: aggregations of TPC-H line items — our OVER aggregation (three frames), and our group
aggregate against Spark's native streaming aggregation.

Input: ``lineitem`` as an insert-only changelog stream (event time ``l_shiptime``, 1-day watermark
delay, ``bench/tpch_streams.py``).

OVER: ``SELECT l_orderkey, l_linenumber, l_partkey, l_extendedprice, l_shiptime, p_type,
MAX(l_extendedprice) OVER (PARTITION BY p_type ORDER BY l_shiptime <frame>)`` over the line items
joined (stream-static, in every micro-batch) with the ``part`` table for ``p_type`` (150 part types),
with the frames ROWS BETWEEN 2 PRECEDING AND CURRENT ROW, RANGE BETWEEN INTERVAL 7 DAYS PRECEDING AND
CURRENT ROW, and RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW. The projection keeps the rows
that cross into the Python operator small, as a SQL query selecting these columns would. Spark has
no streaming OVER aggregation (a window function over a stream is rejected), so there is no native
reference for these.

GROUP BY: ``SELECT l_returnflag, l_linestatus, COUNT(*), SUM(l_extendedprice), MAX(l_extendedprice)
FROM lineitem GROUP BY l_returnflag, l_linestatus`` (4 groups; no part join), ours
(``insert_only_input=True``, as Flink's planner does for an insert-only input) against Spark's native
streaming aggregation of the same stream in output mode ``update``.

All queries run in one Spark session, one after the other, on the same Parquet micro-batches, into
the ``noop`` sink; figures are Spark's own progress reports.

    .venv/bin/python -m bench.aggregations --scale-factor 0.01 --batches 5
"""

from __future__ import annotations


from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from bench.harness import bench_setup, run_all
from bench.tpch_streams import tpch_changelog, tpch_streams
from streamjoin.datagen.tpch import parts
from streamjoin.runtime.group_aggregate import group_aggregate
from streamjoin.runtime.over_aggregate import over_aggregate

_DAY_MS = 86_400_000
#: Line item columns the OVER queries keep (plus the part's type).
OVER_COLUMNS = ["l_orderkey", "l_linenumber", "l_partkey", "l_extendedprice", "l_shiptime"]
GROUP_BY = ["l_returnflag", "l_linestatus"]


def main() -> None:
    args, spark, workdir = bench_setup("aggregations", __doc__.splitlines()[0])
    tpch = tpch_changelog(args.scale_factor)
    streams = tpch_streams(spark, args.scale_factor, args.batches, workdir / "input", tpch=tpch)
    part_types = spark.createDataFrame([(p["p_partkey"], p["p_type"]) for p in parts(tpch.data_dir)],
                                       "p_partkey BIGINT, p_type STRING").cache()
    part_types.count()

    def items_with_type() -> DataFrame:
        items = streams["lineitem"]()
        joined = items.join(F.broadcast(part_types), items.l_partkey == part_types.p_partkey)
        return joined.select(*OVER_COLUMNS, "p_type", "_rowkind", "_seq")

    def over(frame: str, **bound):
        return lambda: over_aggregate(
            items_with_type(), partition_by=["p_type"], order_by="l_shiptime", frame=frame,
            aggregates=[("max_price", "MAX", "l_extendedprice")], **bound,
        )

    aggregates = [("cnt", "COUNT", None), ("sum_price", "SUM", "l_extendedprice"), ("max_price", "MAX", "l_extendedprice")]

    def native_group():
        return streams["lineitem"]().groupBy(*GROUP_BY).agg(
            F.count(F.lit(1)).alias("cnt"), F.sum("l_extendedprice").alias("sum_price"),
            F.max("l_extendedprice").alias("max_price"),
        )

    def ours_group():
        return group_aggregate(streams["lineitem"](), group_by=GROUP_BY, aggregates=aggregates, insert_only_input=True)

    print("\nOVER: MAX(l_extendedprice) OVER (PARTITION BY p_type ORDER BY l_shiptime ...), line items ⋈ part (static).")
    print("Spark has no streaming OVER aggregation: no native reference.\n")
    run_all(
        [
            ("streamjoin over ROWS 2 PRECEDING", over("rows", preceding=2)),
            ("streamjoin over RANGE 7 DAYS PRECEDING", over("range", preceding_ms=7 * _DAY_MS)),
            ("streamjoin over RANGE UNBOUNDED PRECEDING", over("range", preceding_ms=None)),
        ],
        workdir / "checkpoints" / "over",
    )
    print("\nGROUP BY l_returnflag, l_linestatus: COUNT(*), SUM(l_extendedprice), MAX(l_extendedprice).\n")
    group = run_all(
        [
            ("spark native streaming aggregation (update mode)", native_group, "update"),
            ("streamjoin group aggregate", ours_group),
        ],
        workdir / "checkpoints" / "group",
    )
    print(f"\n{group[1].name}: {group[1].rows_per_second / group[0].rows_per_second:.2f}x the native aggregation's rows/s")


if __name__ == "__main__":
    main()
