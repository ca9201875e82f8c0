"""A day-partitioned sink in a live stream: the MERGE of each micro-batch with and without the day in the primary key.

    .venv/bin/python -m bench.partitioned_merge                      # 1,000 days, 10 live micro-batches
    .venv/bin/python -m bench.partitioned_merge --days 2400 --batches 20

Each variant lands the same changes through :class:`~streamjoin.sink.delta.DeltaUpsertWriter` into a fresh sink
partitioned by ``day`` (DATE): a backlog micro-batch of ``--days`` days (``--rows-per-day`` keys each, one Parquet
file per day), then ``--batches`` live micro-batches, each a new day: ``--batch-rows`` keys inserted on it and as
many earlier keys of the day before updated. With the day in the key the MERGE reads the batch's days only
(docs/semantics.md §7.3); without it, every micro-batch reads the whole table. Seconds are the writer's whole call
(the changelog append, the MERGE, their Delta commits); ``scan`` is the MERGE's own ``scanTimeMs`` (finding the
files its keys touch), read from the Delta log.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path

from pyspark.sql.types import DateType, LongType, StringType, StructField, StructType

from streamjoin.session import spark_session
from streamjoin.sink.delta import DeltaSink, DeltaUpsertWriter, create_sink_tables

SCHEMA = StructType(
    [StructField("k", LongType(), False), StructField("v", StringType()), StructField("day", DateType(), False)]
)
BATCH = StructType(
    SCHEMA.fields + [StructField("_rowkind", StringType(), False), StructField("_seq", LongType(), False)]
)
#: variant → the sink's primary key.
VARIANTS = {"key holds the day": ("k", "day"), "key without the day": ("k",)}
DAY0 = dt.date(2020, 1, 1)


def _batches(days: int, rows_per_day: int, batches: int, batch_rows: int) -> list[list[tuple]]:
    """The backlog micro-batch, then the live ones (rows of :data:`BATCH`)."""
    backlog = [
        (d * rows_per_day + i, "backlog", DAY0 + dt.timedelta(d), "+I", d * rows_per_day + i)
        for d in range(days)
        for i in range(rows_per_day)
    ]
    live = []
    for b in range(batches):
        day = days + b
        inserted = [(day * rows_per_day + i, "live", DAY0 + dt.timedelta(day), "+I", i) for i in range(batch_rows)]
        previous = day - 1
        updated = [
            (previous * rows_per_day + i, f"update {b}", DAY0 + dt.timedelta(previous), "+U", batch_rows + i)
            for i in range(min(batch_rows, rows_per_day))
        ]
        live.append(inserted + updated)
    return [backlog, *live]


def _run(spark, folder: Path, batches: list[list[tuple]]) -> dict[str, tuple[list[float], list[float]]]:
    """Per variant, the seconds of each live micro-batch's writer call and of its MERGE's scan. The variants take
    each micro-batch in turn, in alternating order, so that both see the same machine and the same JIT."""
    sinks = {
        label: DeltaSink("bench", str(folder / str(i)), key, partition_by=("day",))
        for i, (label, key) in enumerate(VARIANTS.items())
    }
    writers = {}
    for label, sink in sinks.items():
        create_sink_tables(spark, sink, SCHEMA)
        writers[label] = DeltaUpsertWriter(sink, str(folder / f"checkpoint-{label}"))
    seconds = {label: [] for label in sinks}
    for batch_id, rows in enumerate(batches):
        frame = spark.createDataFrame(rows, BATCH).repartition(2)
        for label in list(sinks) if batch_id % 2 else list(reversed(sinks)):
            started = time.perf_counter()
            writers[label](frame, batch_id)
            seconds[label].append(time.perf_counter() - started)
    result = {}
    for label, sink in sinks.items():
        history = (
            spark.sql(f"DESCRIBE HISTORY delta.`{sink.path}`").where("operation = 'MERGE'").orderBy("version").collect()
        )
        result[label] = (seconds[label][1:], [int(h.operationMetrics["scanTimeMs"]) / 1000 for h in history][1:])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=1000)
    parser.add_argument("--rows-per-day", type=int, default=20)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--batch-rows", type=int, default=200)
    args = parser.parse_args(argv)
    spark = spark_session("bench-partitioned-merge")
    batches = _batches(args.days, args.rows_per_day, args.batches, args.batch_rows)
    print(
        f"{args.days:,} days × {args.rows_per_day} keys, then {args.batches} live micro-batches of "
        f"{len(batches[1]):,} changes on 2 days each\n"
    )
    print("| sink key | live micro-batch p50 s | p95 s | MERGE scan p50 s |")
    print("| --- | ---: | ---: | ---: |")
    p50 = {}
    with tempfile.TemporaryDirectory(prefix="bench-merge-") as tmp:
        for label, (seconds, scans) in _run(spark, Path(tmp), batches).items():
            p50[label] = statistics.median(seconds)
            p95 = sorted(seconds)[max(0, round(0.95 * len(seconds)) - 1)]
            key = ", ".join(VARIANTS[label])
            print(f"| {label} `({key})` | {p50[label]:.2f} | {p95:.2f} | {statistics.median(scans):.2f} |")
    labels = list(VARIANTS)
    print(f"\n{labels[0]} / {labels[1]}, micro-batch p50: {p50[labels[1]] / p50[labels[0]]:.2f}× faster")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
