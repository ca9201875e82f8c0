"""State TTL expiry on both engines, on real queries (every property holds on both engines).

The in-process differential driver (``streamjoin.testing.engines``) cannot expire state TTL:
PySpark's ``TwsTester`` ignores it, and Spark 4.2.0's Scala in-memory states take a clock and a
``TTLConfig`` and use neither. So each operator with state TTL runs here as a streaming query on
each engine (the ``engine`` fixture), fed in phases a pause longer than the TTL apart as
``tests/test_regular_join_ttl.py`` feeds the one-step join, and must give the exact changelog Flink's
``table.exec.state.ttl`` gives (docs/semantics.md §2.7): the same on both engines.
"""

from __future__ import annotations

from pyspark.sql.types import IntegerType, StringType, StructField, StructType
from test_regular_join_ttl import LEFT_BATCHES, RIGHT_BATCHES, TTL_MS, A, B, run_in_phases, stage_sources

from streamjoin.changelog import RowKind
from streamjoin.connectors.changelog_files import read_changelog_files
from streamjoin.runtime.changelog_normalize import changelog_normalize
from streamjoin.runtime.deduplicate import deduplicate
from streamjoin.runtime.group_aggregate import group_aggregate
from streamjoin.runtime.regular_join import regular_join

I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE
PAUSE_S = 2 * TTL_MS / 1000


def test_a_join_with_a_residual_forgets_idle_rows_in_both_steps(spark, engine, tmp_path):
    """FULL join with ``a2 <> b2``: the candidate and associate steps, both with the TTL. Phase 0 joins
    (1,a) and (1,x). Phase 1's ``-D(1,x)`` finds both rows expired: no match, so its side being
    outer, it retracts its null-padded row, which was never emitted (Flink's
    ``StreamingJoinOperator``: a retraction without matches on an outer side sends
    ``-D[record+null]`` whatever its state holds); the joined row stays. Phase 2's ``+I(1,y)`` misses
    the expired left row, so it is padded. Without TTL the result is (1,a,1,y) only."""
    pairs = stage_sources(tmp_path, [("a", A, LEFT_BATCHES, 0), ("b", B, RIGHT_BATCHES, 100)])
    left, right = (read_changelog_files(spark, tmp_path / n, s) for n, s in (("a", A), ("b", B)))
    joined = regular_join(left, right, on=[("a1", "b1")], how="full", condition="a2 <> b2", state_ttl_ms=TTL_MS)
    seen = run_in_phases(joined, pairs, 3, tmp_path / "checkpoint", pause_s=PAUSE_S)
    assert seen == [
        [(I, (1, "a", None, None)), (D, (1, "a", None, None)), (I, (1, "a", 1, "x"))],
        [(D, (None, None, 1, "x"))],
        [(I, (None, None, 1, "y"))],
    ]


T = StructType([StructField("id", IntegerType()), StructField("v", StringType())])


def test_changelog_normalize_forgets_idle_keys(spark, engine, tmp_path):
    """Phase 0 stores keys 1 and 2; after the TTL, phase 1's ``+U(1,b)`` finds key 1 unknown (``+I``,
    no ``-U`` of the forgotten row) and ``-D(2,p)`` finds key 2 unknown (nothing), as Flink's
    ``DeduplicateFunctionHelper.processLastRowOnChangelog`` on a state cleared by TTL."""
    pairs = stage_sources(tmp_path, [("t", T, [[(UA, (1, "a")), (UA, (2, "p"))], [(UA, (1, "b")), (D, (2, "p"))]], 0)])
    stream = read_changelog_files(spark, tmp_path / "t", T)
    normalized = changelog_normalize(stream, key=["id"], state_ttl_ms=TTL_MS)
    seen = run_in_phases(normalized, pairs, 2, tmp_path / "checkpoint", pause_s=PAUSE_S)
    assert seen == [[(I, (1, "a")), (I, (2, "p"))], [(I, (1, "b"))]]


G = StructType([StructField("g", StringType()), StructField("x", IntegerType())])


def test_group_aggregate_forgets_idle_groups(spark, engine, tmp_path):
    """Phase 0 builds group ``a`` (COUNT(*), MAX over a changelog: a MapState of values). After the TTL,
    phase 1's ``-D(a,1)`` finds the group forgotten and is ignored, and ``+I(a,5)`` starts it again with
    ``+I``, as Flink's ``GroupAggFunction`` on a state cleared by TTL. Without TTL: ``-U(a,2,2)``,
    ``+U(a,1,2)``, ``-U(a,1,2)``, ``+U(a,2,5)``."""
    pairs = stage_sources(tmp_path, [("t", G, [[(I, ("a", 1)), (I, ("a", 2))], [(D, ("a", 1)), (I, ("a", 5))]], 0)])
    stream = read_changelog_files(spark, tmp_path / "t", G)
    counted = group_aggregate(
        stream, group_by=["g"], aggregates=[("n", "COUNT", None), ("m", "MAX", "x")], state_ttl_ms=TTL_MS
    )
    seen = run_in_phases(counted, pairs, 2, tmp_path / "checkpoint", pause_s=PAUSE_S)
    assert seen == [[(I, ("a", 1, 1)), (UB, ("a", 1, 1)), (UA, ("a", 2, 2))], [(I, ("a", 1, 5))]]


def test_deduplication_forgets_idle_keys(spark, engine, tmp_path):
    """Keep the last row per key (processing time): after the TTL, phase 1's ``(1,b)`` finds key 1 forgotten
    and is a first row (``+I``, no ``-U(1,a)``), as Flink's deduplication on a state cleared by TTL."""
    pairs = stage_sources(tmp_path, [("t", T, [[(I, (1, "a"))], [(I, (1, "b"))]], 0)])
    stream = read_changelog_files(spark, tmp_path / "t", T)
    latest = deduplicate(stream, key=["id"], order_by=None, keep="last", state_ttl_ms=TTL_MS)
    seen = run_in_phases(latest, pairs, 2, tmp_path / "checkpoint", pause_s=PAUSE_S)
    assert seen == [[(I, (1, "a"))], [(I, (1, "b"))]]
