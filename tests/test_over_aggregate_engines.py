"""OVER aggregation on both engines: the jvm engine's output equals the Python engine's, key by key, row by row.

The Python logic is the executable specification (docs/architecture.md, "Operator engines"); this
runs one random stream (out of order, with late rows) through both in one query: every event-time
frame and the processing-time ROWS frames, with every function over INT, DOUBLE, DECIMAL and STRING.
"""

from __future__ import annotations

import random
from decimal import Decimal

import pytest
from operator_replay import (
    SENTINEL,
    SENTINEL_MS,
    collect_packed,
    pack,
    small_queries,  # noqa: F401  (fixture)
)
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, DoubleType, IntegerType, LongType, StringType, StructField, StructType

from streamjoin.connectors.changelog_files import changelog_file_stream
from streamjoin.jvm import ENGINE_CONF, ENGINES
from streamjoin.runtime.over_aggregate import over_aggregate

pytestmark = pytest.mark.usefixtures("small_queries")

SCHEMA = StructType(
    [
        StructField("k", StringType()),
        StructField("t", LongType()),
        StructField("v", IntegerType()),
        StructField("x", DoubleType()),
        StructField("p", DecimalType(8, 2)),
        StructField("s", StringType()),
        StructField("i", LongType()),
    ]
)
AGGREGATES = [
    ("n", "COUNT", None),
    ("nv", "COUNT", "v"),
    ("dv", "COUNT_DISTINCT", "v"),
    ("sv", "SUM", "v"),
    ("av", "AVG", "v"),
    ("lo", "MIN", "v"),
    ("hi", "MAX", "v"),
    ("fv", "FIRST_VALUE", "v"),
    ("lv", "LAST_VALUE", "v"),
    ("sx", "SUM", "x"),
    ("ax", "AVG", "x"),
    ("sp", "SUM", "p"),
    ("ap", "AVG", "p"),
    ("ls", "MIN", "s"),
    ("hs", "MAX", "s"),
    ("fs", "FIRST_VALUE", "s"),
    ("ds", "COUNT_DISTINCT", "s"),
]
#: Run name → over_aggregate arguments.
RUNS = {
    "rows_bounded": {"order_by": "t", "frame": "rows", "preceding": 2},
    "range_bounded": {"order_by": "t", "frame": "range", "preceding_ms": 3000},
    "rows_unbounded": {"order_by": "t", "frame": "rows", "preceding": None},
    "range_unbounded": {"order_by": "t", "frame": "range", "preceding_ms": None},
    "proc_rows_bounded": {"order_by": None, "frame": "rows", "preceding": 1},
    "proc_unbounded": {"order_by": None, "frame": "rows", "preceding": None},
}


def by_key(changes):
    """Per partition key (the output's first column), its ``(batch, RowKind, row)`` in emission order."""
    keys = {}
    for batch, kind, row in changes:
        keys.setdefault(row[0], []).append((batch, kind, row))
    return keys


#: The jvm engine's system property bounding the MIN/MAX view entries a key visit caches
#: (``CachedMapState.completeLimit``); 1 takes the path of a view too large to cache: every look reads the state store.
KEYS_LIMIT = "streamjoin.cachedMapState.keysLimit"


@pytest.mark.parametrize("keys_limit", [None, "1"], ids=["views-cached", "views-too-large-to-cache"])
def test_the_engines_give_the_same_output(spark, tmp_path, keys_limit):
    system = spark.sparkContext._jvm.java.lang.System
    if keys_limit:
        system.setProperty(KEYS_LIMIT, keys_limit)
    try:
        _the_engines_give_the_same_output(spark, tmp_path)
    finally:
        system.clearProperty(KEYS_LIMIT)


def _the_engines_give_the_same_output(spark, tmp_path):
    rng = random.Random(2026)
    rows, highest = [], 10_000
    for i in range(40):
        time = max(highest - 4000, highest + rng.choice([-3000, -1000, 0, 0, 1000, 2000]))
        highest = max(highest, time)
        rows.append(
            (
                rng.choice("abc"),
                time,
                rng.choice([None, -3, 0, 4, 4, 9]),
                rng.choice([None, 0.5, -1.25, 2.0]),
                rng.choice([None, Decimal("1.10"), Decimal("-0.05")]),
                rng.choice([None, "p", "q", "r"]),
                i,
            )
        )
    files = [[("+I", r) for r in rows[start : start + 6]] for start in range(0, len(rows), 6)]
    files.append([("+I", (SENTINEL, SENTINEL_MS, 0, 0.0, Decimal(0), "", -1))])
    source = changelog_file_stream(spark, tmp_path / "in", SCHEMA, files)
    source = source.withColumn("t", F.timestamp_millis("t")).withWatermark("t", "1000 milliseconds")
    before = spark.conf.get(ENGINE_CONF)
    packed = []
    try:
        for engine in ENGINES:
            spark.conf.set(ENGINE_CONF, engine)
            for run, window in RUNS.items():
                out = over_aggregate(source, partition_by=["k"], aggregates=AGGREGATES, **window)
                columns = ["k", "i"] + [a[0] for a in AGGREGATES]
                packed.append(pack(out.where(F.col("k") != SENTINEL), f"{engine}:{run}", columns))
    finally:
        spark.conf.set(ENGINE_CONF, before)
    results = collect_packed(packed, tmp_path / "checkpoint")
    for run in RUNS:
        python = results.get(f"python:{run}", [])
        assert len(python) > 20, run
        assert by_key(results.get(f"jvm:{run}", [])) == by_key(python), run
