"""Deduplication → group aggregate on Spark: Flink's changelog cases (docs/semantics.md §1.6) and a seeded property.

The three ``changelog_*`` cases share their input, so they run in one query:

- ``changelog_dedup_only_proctime``: ``deduplicate(key=order_id, order_by=None, keep="last")``
- ``changelog_group_proctime``: that, then ``group_aggregate(tms_company, COUNT_DISTINCT(order_id))``
- ``changelog_group_arrival_col``: ``deduplicate(order_by="arrival", keep="last")`` (ORDER BY the BIGINT
  arrival column; Flink plans a Top-1, same changelog), then the same group aggregate.

Processing time is arrival order: micro-batch, then ``_seq``. Dedup and group
aggregate number their output ``_seq`` from the input's (its path, then the
change's index: docs/semantics.md §1.1), so the global arrival order survives both operators and the whole changelog —
not just each key's — equals Flink's, at any batch size.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from decimal import Decimal

import pytest
from conftest import jvm_only
from flink_cases import load_case
from operator_replay import (
    collect_packed,
    pack,
    small_queries,  # noqa: F401  (fixture)
)
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, IntegerType, LongType, StringType, StructField, StructType

from streamjoin.changelog import RowKind, materialize
from streamjoin.connectors.changelog_files import changelog_file_stream
from streamjoin.errors import ValidationError
from streamjoin.runtime.deduplicate import deduplicate
from streamjoin.runtime.group_aggregate import group_aggregate

pytestmark = pytest.mark.usefixtures("small_queries")

CASES = ["changelog_dedup_only_proctime", "changelog_group_proctime", "changelog_group_arrival_col"]
ORDERS = StructType(
    [
        StructField("order_id", StringType()),
        StructField("tms_company", StringType()),
        StructField("arrival", LongType()),
    ]
)


def shared_rows():
    """The cases' common input, with the arrival index as the BIGINT ``arrival`` column."""
    inputs = [[(kind, values) for _, kind, values in load_case(n).arrivals()] for n in CASES]
    assert all(rows == inputs[0] for rows in inputs)
    return [(kind, (*values, i)) for i, (kind, values) in enumerate(inputs[0])]


@jvm_only
@pytest.mark.parametrize("rows_per_batch", [1, 7])
def test_flink_changelog_cases(spark, engine, tmp_path, rows_per_batch):
    rows = shared_rows()
    batches = [rows[i : i + rows_per_batch] for i in range(0, len(rows), rows_per_batch)]
    source = changelog_file_stream(spark, tmp_path / "in", ORDERS, batches)
    count = [("order_cnt", "COUNT_DISTINCT", "order_id")]
    latest = deduplicate(source, key=["order_id"], order_by=None, keep="last")
    latest_by_arrival = deduplicate(source, key=["order_id"], order_by="arrival", keep="last")
    results = collect_packed(
        [
            pack(latest, CASES[0], ["order_id", "tms_company"]),
            pack(
                group_aggregate(latest, group_by=["tms_company"], aggregates=count),
                CASES[1],
                ["tms_company", "order_cnt"],
            ),
            pack(
                group_aggregate(latest_by_arrival, group_by=["tms_company"], aggregates=count),
                CASES[2],
                ["tms_company", "order_cnt"],
            ),
        ],
        tmp_path / "checkpoint",
    )
    for name in CASES:
        case = load_case(name)
        got = [(kind.short, row) for _, kind, row in results[name]]
        assert got == case.expected_changelog, name
        assert sorted(materialize((kind, row) for _, kind, row in results[name]).elements()) == sorted(
            case.expected_final
        )


def test_arguments_are_checked_before_anything_runs(spark):
    df = spark.createDataFrame([], "k STRING, t TIMESTAMP, v INT, _rowkind STRING, _seq BIGINT")
    with pytest.raises(ValidationError, match="does not support \\['FIRST_VALUE'\\]"):
        group_aggregate(df, group_by=["k"], aggregates=[("f", "FIRST_VALUE", "v")])
    with pytest.raises(ValidationError, match="clash"):
        group_aggregate(df, group_by=["k"], aggregates=[("k", "COUNT", None)])
    with pytest.raises(ValidationError, match="numeric"):
        group_aggregate(df, group_by=["k"], aggregates=[("s", "SUM", "k")])
    with pytest.raises(ValidationError, match="'first' or 'last'"):
        deduplicate(df, key=["k"], order_by=None, keep="any")
    with pytest.raises(ValidationError, match="needs a TIMESTAMP rowtime"):
        deduplicate(df, key=["k"], order_by="v", keep="first")
    with pytest.raises(ValidationError, match="at least one key"):
        deduplicate(df, key=[], order_by=None, keep="last")


def random_changelog(rng: random.Random, steps: int, new_row: Callable[[], tuple]) -> list[tuple[str, tuple]]:
    """A valid changelog of ``steps`` random inserts, deletes and updates of rows made by ``new_row()``."""
    present, changes = [], []
    for _ in range(steps):
        op = rng.choice(["insert", "insert", "delete", "update"]) if present else "insert"
        new = new_row()
        if op == "insert":
            present.append(new)
            changes.append(("+I", new))
        else:
            old = present.pop(rng.randrange(len(present)))
            changes += [("-D", old)] if op == "delete" else [("-U", old), ("+U", new)]
            if op == "update":
                present.append(new)
    return changes


@pytest.mark.parametrize("mini_batch", [False, True], ids=["per-change", "mini-batch"])
def test_seeded_random_changelog_materialises_to_the_batch_aggregate(spark, engine, tmp_path, mini_batch):
    rng = random.Random(5)
    prices = [None, Decimal("0.10"), Decimal("19.99"), Decimal("7.25"), Decimal("-3.30")]
    changes = random_changelog(
        rng, 60, lambda: (rng.choice("abc"), rng.choice([None, *range(-4, 12)]), rng.choice(prices))
    )
    batches, start = [], 0
    while start < len(changes):
        size = rng.randint(5, 30)
        batches.append(changes[start : start + size])
        start += size
    schema = StructType(
        [StructField("k", StringType()), StructField("v", IntegerType()), StructField("p", DecimalType(15, 2))]
    )
    source = changelog_file_stream(spark, tmp_path / "in", schema, batches)
    aggregates = [
        ("n", "COUNT", None),
        ("nv", "COUNT", "v"),
        ("d", "COUNT_DISTINCT", "v"),
        ("s", "SUM", "v"),
        ("a", "AVG", "v"),
        ("lo", "MIN", "v"),
        ("hi", "MAX", "v"),
        ("dp", "COUNT_DISTINCT", "p"),
        ("sp", "SUM", "p"),
        ("ap", "AVG", "p"),
        ("lp", "MIN", "p"),
        ("hp", "MAX", "p"),
    ]
    out = group_aggregate(source, group_by=["k"], aggregates=aggregates, mini_batch=mini_batch)
    results = collect_packed([pack(out, "agg", ["k"] + [a[0] for a in aggregates])], tmp_path / "checkpoint")
    if mini_batch:  # at most one -U/+U pair per group and micro-batch
        assert len(results["agg"]) <= 2 * 3 * len(batches) < len(changes)

    final_input = spark.createDataFrame(
        list(materialize((RowKind.from_short(k), r) for k, r in changes).elements()),
        "k STRING, v INT, p DECIMAL(15, 2)",
    )
    # Spark's batch aggregate with Flink's result types: SUM and AVG of INT are INT (AVG truncated);
    # AVG of DECIMAL(15, 2) has scale 6, rounded half up, in both. DECIMALs are compared as strings.
    expected = final_input.groupBy("k").agg(
        F.count("*"),
        F.count("v"),
        F.countDistinct("v"),
        F.sum("v").cast("int"),
        F.avg("v").cast("int"),
        F.min("v"),
        F.max("v"),
        F.countDistinct("p"),
        F.sum("p").cast("string"),
        F.avg("p").cast("string"),
        F.min("p").cast("string"),
        F.max("p").cast("string"),
    )
    assert materialize((kind, row) for _, kind, row in results["agg"]) == Counter(tuple(r) for r in expected.collect())
    # A group empties only where a micro-batch ends with it empty: mini-batch output may hold no -D.
    assert {kind for _, kind, _ in results["agg"]} >= set(RowKind) - ({RowKind.DELETE} if mini_batch else set())
