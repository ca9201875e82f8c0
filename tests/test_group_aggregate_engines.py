"""Group aggregate on both engines: the jvm engine's changelog equals the Python engine's, change for change.

The Python logic is the executable specification (docs/architecture.md, "Operator engines"); this
runs one random changelog through both in one query, over every type the functions take, with
values at the integral types' limits so that SUM and AVG overflow (Java's wrap-around).
"""

from __future__ import annotations

import datetime
import random
from decimal import Decimal

import pytest
from operator_replay import (
    collect_packed,
    pack,
    small_queries,  # noqa: F401  (fixture)
)
from pyspark.sql.types import (
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from test_group_aggregate_spark import random_changelog

from streamjoin.changelog import RowKind
from streamjoin.connectors.changelog_files import changelog_file_stream
from streamjoin.jvm import ENGINE_CONF, ENGINES
from streamjoin.runtime.group_aggregate import group_aggregate

pytestmark = pytest.mark.usefixtures("small_queries")

SCHEMA = StructType(
    [
        StructField("k", StringType()),
        StructField("b", ByteType()),
        StructField("sh", ShortType()),
        StructField("i", IntegerType()),
        StructField("l", LongType()),
        StructField("f", FloatType()),
        StructField("d", DoubleType()),
        StructField("p", DecimalType(10, 3)),
        StructField("s", StringType()),
        StructField("dt", DateType()),
        StructField("ts", TimestampType()),
    ]
)
NUMERIC = ["b", "sh", "i", "l", "f", "d", "p"]
VALUES = {
    "b": [127, -128, 100, 3],
    "sh": [32767, -32768, 30000, 7],
    "i": [2**31 - 1, -(2**31), 2**30, -5],
    "l": [2**63 - 1, -(2**63), 2**62, 11],
    "f": [0.1, 1.5, -2.25, 3.4e38],
    "d": [0.1, 1e308, -7.5, 2.0],
    "p": [Decimal("1.005"), Decimal("-9999999.999"), Decimal("0.001"), Decimal("2.500")],
    "s": ["a", "b", "zz", ""],
    "dt": [datetime.date(2024, 1, n) for n in (1, 2, 30, 9)],
    "ts": [datetime.datetime(2024, 1, n, 12, 30) for n in (1, 2, 30, 9)],
}


@pytest.mark.parametrize("mini_batch", [False, True], ids=["per-change", "mini-batch"])
def test_the_engines_give_the_same_changelog(spark, tmp_path, mini_batch):
    rng = random.Random(14)
    changes = random_changelog(
        rng, 80, lambda: (rng.choice("xy"), *(rng.choice([None, *VALUES[f.name]]) for f in SCHEMA.fields[1:]))
    )
    batches = [changes[i : i + 9] for i in range(0, len(changes), 9)]
    source = changelog_file_stream(spark, tmp_path / "in", SCHEMA, batches)
    aggregates = [("n", "COUNT", None)]
    for c in [f.name for f in SCHEMA.fields[1:]]:
        aggregates += [
            (f"{c}_n", "COUNT", c),
            (f"{c}_d", "COUNT_DISTINCT", c),
            (f"{c}_lo", "MIN", c),
            (f"{c}_hi", "MAX", c),
        ]
        if c in NUMERIC:
            aggregates += [(f"{c}_s", "SUM", c), (f"{c}_a", "AVG", c)]
    columns = ["k"] + [a[0] for a in aggregates]
    before = spark.conf.get(ENGINE_CONF)
    packed = []
    try:
        for engine in ENGINES:
            spark.conf.set(ENGINE_CONF, engine)
            out = group_aggregate(source, group_by=["k"], aggregates=aggregates, mini_batch=mini_batch)
            packed.append(pack(out, engine, columns))
    finally:
        spark.conf.set(ENGINE_CONF, before)
    results = collect_packed(packed, tmp_path / "checkpoint")
    assert results["jvm"] == results["python"]
    # A group empties only where a micro-batch ends with it empty: mini-batch output may hold no -D.
    assert {kind for _, kind, _ in results["python"]} >= set(RowKind) - ({RowKind.DELETE} if mini_batch else set())
