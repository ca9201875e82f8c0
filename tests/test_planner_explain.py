"""EXPLAIN CHANGELOG_MODE: Flink's plan tree with changelog modes, keys, state layouts, distribution and TTL."""

import pytest

from streamjoin.errors import UnsupportedPlanError
from streamjoin.planner import plan_script

DDL = """
CREATE TABLE A (a1 INT, a2 INT, PRIMARY KEY (a1) NOT ENFORCED) WITH ('connector' = 'values', 'changelog-mode' = 'I,UB,UA,D');
CREATE TABLE B (b1 INT, b2 INT) WITH ('connector' = 'values');
CREATE TABLE s (a1 INT, n BIGINT, PRIMARY KEY (a1) NOT ENFORCED) WITH ('connector' = 'delta');
CREATE TABLE by_count (a1 INT, n BIGINT, PRIMARY KEY (n) NOT ENFORCED) WITH ('connector' = 'delta');
"""  # noqa: E501


def test_explain_statement_prints_the_tree_with_changelog_modes():
    script = plan_script(
        DDL + "EXPLAIN CHANGELOG_MODE INSERT INTO s SELECT a1, COUNT(*) FROM A JOIN B ON a1 = b1 GROUP BY a1;"
    )
    # Written from Flink's rules: the inner join forwards A's updates and deletes; grouped by the sink's
    # key, the aggregate needs no UPDATE_BEFORE; A's key is inside the join key, B has none.
    assert script.explains == [
        """== Optimized Physical Plan ==
Sink(table=[default_catalog.default_database.s], fields=[a1, n], changelogMode=[NONE])
+- Calc(select=[a1, EXPR$1 AS n], changelogMode=[I,UA,D], upsertKeys=[[a1]])
   +- GroupAggregate(groupBy=[a1], select=[a1, COUNT(*) AS EXPR$1], changelogMode=[I,UA,D], upsertKeys=[[a1]])
      +- Exchange(distribution=[hash[a1]], changelogMode=[I,UB,UA,D])
         +- Join(joinType=[InnerJoin], where=[a1 = b1], select=[a1, a2, b1, b2], leftInputSpec=[JoinKeyContainsUniqueKey(a1)], rightInputSpec=[InputSideHasNoUniqueKey], changelogMode=[I,UB,UA,D])
            :- Exchange(distribution=[hash[a1]], changelogMode=[I,UB,UA,D])
            :  +- TableSourceScan(table=[[default_catalog, default_database, A]], fields=[a1, a2], changelogMode=[I,UB,UA,D], upsertKeys=[[a1]])
            +- Exchange(distribution=[hash[b1]], changelogMode=[I])
               +- TableSourceScan(table=[[default_catalog, default_database, B]], fields=[b1, b2], changelogMode=[I])"""  # noqa: E501
    ]
    assert script.statements == []  # EXPLAIN plans, it does not run


def test_explain_shows_the_materializer_single_distribution_and_state_ttl():
    script = plan_script(
        DDL + "SET 'table.exec.state.ttl' = '1 h';\n"
        "INSERT INTO by_count SELECT a1, CAST(a2 AS BIGINT) FROM A WHERE a1 IN (SELECT b1 FROM B WHERE b2 > a2);"
    )
    lines = script.statements[0].explain.splitlines()
    assert lines[2].startswith("+- SinkUpsertMaterializer(pk=[n], stateTtl=[3600000 ms], changelogMode=[I,UA,D]")
    assert lines[3] == "   +- Exchange(distribution=[hash[n]], changelogMode=[I,UB,UA,D])"
    join = next(l for l in lines if "Join(" in l)
    assert "joinType=[LeftSemiJoin]" in join and "where=[a1 = b1 AND b2 > a2]" in join
    assert "stateTtl=[3600000 ms]" in join
    assert script.state_ttl_ms == 3_600_000


def test_explain_says_when_one_task_does_all_the_work():
    explain = plan_script(DDL + "SELECT * FROM A JOIN B ON a2 > b2;").statements[0].explain
    assert explain.count("Exchange(distribution=[single]") == 2


def test_explain_of_interval_temporal_over_and_dedup_nodes():
    ddl = """
    CREATE TABLE O (id INT, cur STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'values');
    CREATE TABLE S (id INT, ts2 TIMESTAMP(3), WATERMARK FOR ts2 AS ts2) WITH ('connector' = 'values');
    CREATE TABLE R (cur STRING, rate INT, ut TIMESTAMP(3), WATERMARK FOR ut AS ut, PRIMARY KEY (cur) NOT ENFORCED)
      WITH ('connector' = 'values', 'changelog-mode' = 'I,UA,D');
    """
    interval = plan_script(
        ddl + "SELECT O.id FROM O JOIN S ON O.id = S.id AND S.ts2 BETWEEN O.ts AND O.ts + INTERVAL '1' MINUTE;"
    )
    assert (
        "IntervalJoin(joinType=[InnerJoin], windowBounds=[isRowTime=true, leftLowerBound=-60000, leftUpperBound=0, "
        "leftTimeIndex=2, rightTimeIndex=1], where=[id = id0]"
    ) in interval.statements[0].explain
    temporal = plan_script(ddl + "SELECT O.id, r.rate FROM O JOIN R FOR SYSTEM_TIME AS OF O.ts AS r ON O.cur = r.cur;")
    assert (
        "TemporalJoin(joinType=[InnerJoin], where=[cur = cur0 AND __TEMPORAL_JOIN_CONDITION(ts, ut, "
        "__TEMPORAL_JOIN_CONDITION_PRIMARY_KEY(cur0))]" in temporal.statements[0].explain
    )
    over = plan_script(
        ddl
        + "SELECT id, COUNT(*) OVER (PARTITION BY cur ORDER BY ts RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW) FROM O;"  # noqa: E501
    )
    assert (
        "OverAggregate(partitionBy=[cur], orderBy=[ts ASC], window=[RANG BETWEEN 3600000 PRECEDING AND CURRENT ROW], "
        "select=[id, cur, ts, COUNT(*) AS w0$o0], changelogMode=[I])" in over.statements[0].explain
    )
    dedup = plan_script(
        ddl + "SELECT id FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY ts) AS rn FROM O) WHERE rn = 1;"
    )
    assert (
        "Deduplicate(keep=[FirstRow], key=[id], order=[ROWTIME], changelogMode=[I], upsertKeys=[[id]])"
        in dedup.statements[0].explain
    )


def test_state_ttl_reaches_the_group_aggregate_and_the_deduplication():
    script = plan_script(
        "CREATE TABLE e (k INT, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'values');\n"
        + DDL
        + "SET 'table.exec.state.ttl' = '2 min';\n"
        "INSERT INTO s SELECT k, COUNT(*) FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn "
        "FROM e) WHERE rn = 1 GROUP BY k;"
    )
    explain = script.statements[0].explain
    aggregate = next(l for l in explain.splitlines() if "GroupAggregate(" in l)
    dedup = next(l for l in explain.splitlines() if "Deduplicate(" in l)
    assert "stateTtl=[120000 ms]" in aggregate and "keep=[LastRow]" in dedup and "stateTtl=[120000 ms]" in dedup


def test_state_ttl_is_refused_for_an_event_time_deduplication_keeping_the_first_row():
    with pytest.raises(UnsupportedPlanError) as info:
        plan_script(
            "CREATE TABLE e (k INT, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'values');\n"
            "SET 'table.exec.state.ttl' = '2 min';\n"
            "SELECT k, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts ASC) AS rn FROM e) WHERE rn = 1;"
        )
    assert "keeping the first row on event time" in str(info.value) and str(info.value).endswith("[rule: state-ttl]")


SPLIT_DDL = """
CREATE TABLE orders (oid INT, cid INT, amount INT, PRIMARY KEY (oid) NOT ENFORCED)
  WITH ('connector' = 'values', 'changelog-mode' = 'I,UA,D');
CREATE TABLE customers (cid INT, region STRING, PRIMARY KEY (cid) NOT ENFORCED)
  WITH ('connector' = 'values', 'changelog-mode' = 'I,UA,D');
"""


def test_an_aggregate_over_a_join_with_a_side_unique_on_its_join_key_is_split_around_it():
    query = "SELECT c.region, COUNT(*) AS n, SUM(o.amount) AS s, MAX(o.amount) AS m, MIN(c.region) AS r FROM orders o "
    explain = plan_script(SPLIT_DDL + query + "JOIN customers c ON o.cid = c.cid GROUP BY c.region;")
    lines = explain.statements[0].explain.splitlines()
    # Flink 2.3.0's plan of the chain_orders_region cases: the orders aggregated per customer below the join.
    above = (
        "GroupAggregate(groupBy=[region], select=[region, SUM(f2) AS n, SUM(f3) AS s, MAX(f4) AS m, MIN(region) AS r]"
    )
    assert lines[2].startswith(f"+- {above}"), lines[2]
    assert "Join(joinType=[InnerJoin], where=[cid = cid0], select=[cid, f2, f3, f4, cid0, region]" in lines[4]
    below = "GroupAggregate(groupBy=[cid], select=[cid, COUNT(*) AS f2, SUM(amount) AS f3, MAX(amount) AS f4]"
    assert below in lines[6], lines[6]
    assert "ChangelogNormalize(key=[oid]" in lines[8]


@pytest.mark.parametrize(
    "query",
    [
        # COUNT(DISTINCT) does not split; nor a LEFT join; nor SUM of the unique side's column (Calcite multiplies
        # it by the other side's count); nor grouping by the join column.
        "SELECT c.region, COUNT(DISTINCT o.amount) FROM orders o JOIN customers c ON o.cid = c.cid GROUP BY c.region",
        "SELECT c.region, COUNT(*) FROM orders o LEFT JOIN customers c ON o.cid = c.cid GROUP BY c.region",
        "SELECT o.amount, SUM(c.cid) FROM orders o JOIN customers c ON o.cid = c.cid GROUP BY o.amount",
        "SELECT o.cid, COUNT(*) FROM orders o JOIN customers c ON o.cid = c.cid GROUP BY o.cid",
    ],
)
def test_other_aggregates_over_a_join_stay_above_it(query):
    explain = plan_script(SPLIT_DDL + query + ";").statements[0].explain
    assert explain.count("GroupAggregate(") == 1, explain
