"""Benchmark: TPC-H ``lineitem ⋈ orders`` — our regular join (inner, left) against Spark's native stream-stream inner join.

Insert-only input (no updates or deletes), so Spark's native join can run the
same micro-batches. All three queries run in one Spark session, one after the
other, on the same Parquet micro-batches (``bench/tpch_streams.py``), into the
``noop`` sink; figures are Spark's own progress reports.

    .venv/bin/python -m bench.regular_join --scale-factor 0.05 --batches 10
"""

from __future__ import annotations

import argparse
import shutil

from bench.harness import run_all
from bench.tpch_streams import tpch_streams
from streamjoin.config import local_dir
from streamjoin.datagen.topics import LINEITEM, ORDERS
from streamjoin.runtime.regular_join import regular_join
from streamjoin.session import spark_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale-factor", type=float, default=0.05)
    parser.add_argument("--batches", type=int, default=10)
    args = parser.parse_args()
    workdir = local_dir("bench", "regular_join")
    shutil.rmtree(workdir)
    spark = spark_session("bench-regular-join", conf={"spark.sql.streaming.numRecentProgressUpdates": "1000"})
    streams = tpch_streams(spark, args.scale_factor, args.batches, workdir / "input")

    def native_inner():
        lineitem = streams["lineitem"]().drop("_rowkind", "_seq")
        orders = streams["orders"]().drop("_rowkind", "_seq")
        return lineitem.join(orders, lineitem.l_orderkey == orders.o_orderkey)

    def ours(how):
        return lambda: regular_join(
            streams["lineitem"](), streams["orders"](), on=[("l_orderkey", "o_orderkey")], how=how,
            left_unique_key=LINEITEM.primary_key, right_unique_key=ORDERS.primary_key,
        ).changelog

    print(f"TPC-H sf {args.scale_factor:g}, {args.batches} micro-batches, Spark {spark.version}, shuffle partitions "
          f"{spark.conf.get('spark.sql.shuffle.partitions')}")
    results = run_all(
        [("spark native inner join", native_inner), ("streamjoin inner join", ours("inner")), ("streamjoin left join", ours("left"))],
        workdir / "checkpoints",
    )
    native = results[0].rows_per_second
    for r in results[1:]:
        print(f"{r.name}: {r.rows_per_second / native:.2f}x the native join's rows/s")


if __name__ == "__main__":
    main()
