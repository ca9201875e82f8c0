"""Where the planner puts ChangelogNormalize on an upsert source, as Flink 2.3's EXPLAIN shows it (no Spark needed).

Checked against PyFlink 2.3.0 (``fromChangelogStream`` in upsert mode with a primary key): Flink keeps
the node when the consumer needs ``-U`` (group aggregate, retract sink), full-row deletes (regular
joins, semi/anti joins, the collecting sink of a SELECT) or filters on a non-key column; an upsert
sink keyed by the same key and a temporal join's versioned side (a rowtime table) read it as it is.
"""

import pytest

from streamjoin.errors import UnsupportedPlanError
from streamjoin.planner import plan_script
from streamjoin.planner.normalize_projection import read_columns
from streamjoin.planner.plan import Calc, ChangelogNormalize, RegularJoin, TableScan, walk

DDL = """
CREATE TABLE U (k INT, v STRING, n INT, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'values', 'changelog-mode' = 'I,UA,D');
CREATE TABLE NK (k INT, v STRING) WITH ('connector' = 'values', 'changelog-mode' = 'I,UA,D');
CREATE TABLE A (id INT, x STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'values');
CREATE TABLE R (k INT, v STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts, PRIMARY KEY (k) NOT ENFORCED)
  WITH ('connector' = 'values', 'changelog-mode' = 'I,UA,D');
CREATE TABLE u_sink (k INT, v STRING, n INT, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'delta');
CREATE TABLE v_sink (v STRING, c BIGINT, PRIMARY KEY (v) NOT ENFORCED) WITH ('connector' = 'delta');
"""  # noqa: E501


def statement(sql: str):
    return plan_script(DDL + sql + ";").statements[0]


def normalizes(sql: str) -> list[ChangelogNormalize]:
    return [n for n in walk(statement(sql).sink) if isinstance(n, ChangelogNormalize)]


def test_an_upsert_sink_keyed_by_the_primary_key_reads_the_upserts_as_they_are():
    assert normalizes("INSERT INTO u_sink SELECT k, v, n FROM U") == []
    assert normalizes("INSERT INTO u_sink SELECT k, v, n FROM U WHERE k > 3") == []


def test_a_group_aggregate_gets_a_normalize_emitting_update_before():
    explain = statement("INSERT INTO v_sink SELECT v, COUNT(*) FROM U GROUP BY v").explain
    assert (
        "ChangelogNormalize(key=[k], changelogMode=[I,UB,UA,D], upsertKeys=[[k]])" in explain
        and "Exchange(distribution=[hash[k]], changelogMode=[I,UA,D])" in explain
    )


@pytest.mark.parametrize(
    "query",
    [
        "SELECT A.id, A.x, U.v FROM A LEFT JOIN U ON A.id = U.k",
        "SELECT * FROM A FULL JOIN U ON A.id = U.k",
        "SELECT id, x FROM A WHERE EXISTS (SELECT 1 FROM U WHERE U.k = A.id)",
        "SELECT id, x FROM A WHERE id NOT IN (SELECT k FROM U WHERE n < 40)",
        "SELECT * FROM U",
    ],
)
def test_joins_and_the_collecting_sink_need_full_rows(query):
    [normalize] = normalizes(query)
    assert normalize.key == ("k",) and isinstance(walk_to_scan(normalize), TableScan)


def walk_to_scan(node):
    return node if isinstance(node, TableScan) else walk_to_scan(node.inputs[0])


# As PyFlink 2.3.0's EXPLAIN shows them: Calc(select=[...]) between the source and ChangelogNormalize.
@pytest.mark.parametrize(
    "query, read",
    [
        ("SELECT id, x FROM A WHERE EXISTS (SELECT 1 FROM U WHERE U.k = A.id)", ["k"]),
        ("SELECT id, x FROM A WHERE EXISTS (SELECT 1 FROM U WHERE U.k = A.id AND U.n < A.id)", ["k", "n"]),
        ("SELECT id, x FROM A WHERE id NOT IN (SELECT k FROM U WHERE n < 40)", ["k", "n"]),
        ("SELECT A.id, A.x, U.v FROM A LEFT JOIN U ON A.id = U.k", ["k", "v"]),
        ("SELECT k, v FROM U", ["k", "v"]),
        ("SELECT v, COUNT(*) FROM U GROUP BY v", ["k", "v"]),
        ("SELECT * FROM A FULL JOIN U ON A.id = U.k", None),
    ],
)
def test_only_the_columns_read_after_a_normalize_reach_it(query, read):
    [normalize] = normalizes(query)
    below = normalize.inputs[0]
    if read is None:
        assert isinstance(below, TableScan)
    else:
        assert isinstance(below, Calc) and below.field_names == read and isinstance(below.inputs[0], TableScan)
        assert below.changelog_mode == below.inputs[0].changelog_mode
    assert normalize.field_names == ["k", "v", "n"]  # the pruned columns leave it NULL


def test_read_columns_of_a_semi_join_are_its_keys_and_residual():
    sink = statement("SELECT id, x FROM A WHERE EXISTS (SELECT 1 FROM U WHERE U.k = A.id AND U.v <> A.x)").sink
    [join] = [n for n in walk(sink) if isinstance(n, RegularJoin)]
    assert [sorted(c) for c in read_columns(join, {"id"})] == [["id", "x"], ["k", "v"]]


def test_a_filter_on_a_value_column_needs_the_retraction():
    [normalize] = normalizes("INSERT INTO u_sink SELECT k, v, n FROM U WHERE n > 3")
    assert normalize.changelog_mode.has_updates and "UB" in str(normalize.changelog_mode)


def test_a_versioned_table_with_a_watermark_is_read_as_upserts():
    assert normalizes("SELECT A.id, R.v FROM A JOIN R FOR SYSTEM_TIME AS OF A.ts ON A.id = R.k") == []


def test_an_upsert_source_without_primary_key_is_refused_where_it_needs_a_normalize():
    with pytest.raises(
        UnsupportedPlanError,
        match=r"table 'NK' is an upsert changelog .* without a PRIMARY KEY.*\[rule: changelog-normalize\]",
    ):
        statement("SELECT v, COUNT(*) FROM NK GROUP BY v")


def test_state_ttl_reaches_the_normalize():
    [normalize] = normalizes("SET 'table.exec.state.ttl' = '1 h';\nSELECT A.id, U.v FROM A LEFT JOIN U ON A.id = U.k")
    assert normalize.state_ttl_ms == 3_600_000
