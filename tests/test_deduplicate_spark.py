"""Deduplication variants on Spark against the batch query, on a seeded random stream.

One query runs three deduplications of the same input (the processing-time
keep-last one runs in ``test_group_aggregate_spark`` on Flink's case):

- keep-first on event time: insert-only, each key's row emitted once Spark's
  watermark (one value per micro-batch: the batches before, minus the delay)
  passes it; rows with a rowtime before that watermark are late;
- keep-last on the rowtime column: ``+I`` / ``-U`` ``+U``;
- keep-first on processing time (arrival order): insert-only.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import pytest
from operator_replay import (
    SENTINEL,
    SENTINEL_MS,
    collect_packed,
    pack,
    small_queries,  # noqa: F401  (fixture)
)
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from streamjoin.changelog import RowKind, materialize
from streamjoin.connectors.changelog_files import changelog_file_stream
from streamjoin.runtime.deduplicate import deduplicate
from streamjoin.runtime.processor import LATE_STATE

pytestmark = pytest.mark.usefixtures("small_queries")


def batch_dedup(rows, keep, by_time, late=()):
    """Per key, the first / last row by arrival or by time (ties: arrival order), skipping late rows."""
    chosen = {}
    for i, (key, time, value) in enumerate(rows):
        if i in late:
            continue
        kept = chosen.get(key)
        if by_time:
            better = kept is None or (time < kept[1] if keep == "first" else time >= kept[1])
        else:
            better = kept is None or keep == "last"
        if better:
            chosen[key] = (key, time, value)
    return Counter(chosen.values())


def test_seeded_random_stream_materialises_to_the_batch_query(spark, engine, tmp_path):
    rng = random.Random(11)
    delay = 2000
    rows, highest = [], 100_000
    for _ in range(40):
        time = highest + rng.choice([-6000, -4000, -2000, -1000, 0, 1000, 1000, 2000])
        highest = max(highest, time)
        rows.append((rng.choice("abcde"), time, rng.randint(0, 99)))
    batches, start = [], 0
    while start < len(rows):
        batches.append(rows[start : start + rng.randint(4, 12)])
        start += len(batches[-1])
    files = [[("+I", r) for r in b] for b in batches]
    files[-1].append(("+I", (SENTINEL, SENTINEL_MS, 0)))
    schema = StructType([StructField("k", StringType()), StructField("t", LongType()), StructField("v", IntegerType())])
    source = changelog_file_stream(spark, tmp_path / "in", schema, files)
    source = source.withColumn("t", F.timestamp_millis("t")).withWatermark("t", f"{delay} milliseconds")
    runs = {
        "first_rowtime": deduplicate(source, key=["k"], order_by="t", keep="first"),
        "last_rowtime": deduplicate(source, key=["k"], order_by="t", keep="last"),
        "first_proctime": deduplicate(source, key=["k"], order_by=None, keep="first"),
    }
    results = collect_packed(
        [pack(df.where(F.col("k") != SENTINEL), name, ["k", "t", "v"]) for name, df in runs.items()],
        tmp_path / "checkpoint",
    )

    def as_ms(text):
        return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp() * 1000)

    got = {name: [(kind, (k, as_ms(t), v)) for _, kind, (k, t, v) in changes] for name, changes in results.items()}
    # Spark's watermark in a micro-batch: the batches before, minus the delay; keep-first drops t < it.
    late, watermark, position = set(), None, 0
    for batch in batches:
        late |= {position + i for i, (_, t, _) in enumerate(batch) if watermark is not None and t < watermark}
        watermark = max([t - delay for _, t, _ in batch] + ([] if watermark is None else [watermark]))
        position += len(batch)
    assert late, "the seed should give some late rows"
    assert materialize(got["first_rowtime"]) == batch_dedup(rows, "first", True, late)
    assert materialize(got["last_rowtime"]) == batch_dedup(rows, "last", True)
    assert materialize(got["first_proctime"]) == batch_dedup(rows, "first", False)
    assert {kind for kind, _ in got["first_rowtime"] + got["first_proctime"]} == {RowKind.INSERT}
    dropped = (
        spark.read.format("statestore")
        .option("path", str(tmp_path / "checkpoint"))
        .option("stateVarName", LATE_STATE)
        .option("operatorId", 0)
        .load()
    )
    assert sum(r.value[0] for r in dropped.collect()) == len(late)
    if engine == "jvm":
        # A key whose row was emitted has no timer pending: it keeps its deduplication row and no timer row
        # (the watermark it reached is the clock's, read again on its next visit). Only the sentinel waits.
        timers = (
            spark.read.format("statestore")
            .option("path", str(tmp_path / "checkpoint"))
            .option("stateVarName", "timers")
            .option("operatorId", 0)
            .load()
        )
        assert {r.key[0] for r in timers.collect()} <= {SENTINEL}
