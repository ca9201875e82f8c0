"""Benchmark: TPC-H ``lineitem ⋈ orders`` — our regular join (inner, left) against Spark's native stream-stream inner join.

Insert-only input (no updates or deletes), so Spark's native join can run the
same micro-batches. All three queries run in one Spark session, one after the
other, on the same Parquet micro-batches (``bench/tpch_streams.py``), into the
``noop`` sink; figures are Spark's own progress reports.

    .venv/bin/python -m bench.regular_join --scale-factor 0.05 --batches 10
"""

from __future__ import annotations


from bench.harness import bench_setup, run_all
from bench.tpch_streams import tpch_streams
from streamjoin.datagen.topics import LINEITEM, ORDERS
from streamjoin.runtime.regular_join import regular_join


def main() -> None:
    args, spark, workdir = bench_setup("regular_join", __doc__.splitlines()[0])
    streams = tpch_streams(spark, args.scale_factor, args.batches, workdir / "input")

    def native_inner():
        lineitem = streams["lineitem"]().drop("_rowkind", "_seq")
        orders = streams["orders"]().drop("_rowkind", "_seq")
        return lineitem.join(orders, lineitem.l_orderkey == orders.o_orderkey)

    def ours(how):
        return lambda: regular_join(
            streams["lineitem"](), streams["orders"](), on=[("l_orderkey", "o_orderkey")], how=how,
            left_unique_key=LINEITEM.primary_key, right_unique_key=ORDERS.primary_key,
        )

    results = run_all(
        [("spark native inner join", native_inner), ("streamjoin inner join", ours("inner")), ("streamjoin left join", ours("left"))],
        workdir / "checkpoints",
    )
    native = results[0].rows_per_second
    for r in results[1:]:
        print(f"{r.name}: {r.rows_per_second / native:.2f}x the native join's rows/s")


if __name__ == "__main__":
    main()
