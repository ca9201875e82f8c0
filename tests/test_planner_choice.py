"""Operator choice and changelog-mode inference per construct, as Flink's planner decides them (no Spark needed)."""

import pytest

from streamjoin.changelog import ChangelogMode, RowKind
from streamjoin.errors import SinkError, ValidationError
from streamjoin.planner import Flink, plan_script
from streamjoin.planner.plan import (
    Deduplicate,
    DropUpdateBefore,
    GroupAggregate,
    IntervalJoin,
    LookupJoin,
    OverAggregate,
    Rank,
    RegularJoin,
    SinkUpsertMaterializer,
    TableScan,
    TemporalJoin,
    walk,
)

DDL = """
CREATE TABLE A (a1 INT, a2 INT, a3 STRING) WITH ('connector' = 'values');
CREATE TABLE B (b1 INT, b2 INT, b3 STRING) WITH ('connector' = 'values');
CREATE TABLE CA (a1 INT, a2 INT, a3 STRING) WITH ('connector' = 'values', 'changelog-mode' = 'I,UB,UA,D');
CREATE TABLE CB (b1 INT, b2 INT, b3 STRING) WITH ('connector' = 'values', 'changelog-mode' = 'I,UB,UA,D');
CREATE TABLE PA (a1 INT, a2 INT, a3 STRING, PRIMARY KEY (a1) NOT ENFORCED) WITH ('connector' = 'values', 'changelog-mode' = 'I,UB,UA,D');
CREATE TABLE PB (b1 INT, b2 INT, b3 STRING, PRIMARY KEY (b1) NOT ENFORCED) WITH ('connector' = 'values', 'changelog-mode' = 'I,UB,UA,D');
CREATE TABLE NN (k INT NOT NULL, v INT) WITH ('connector' = 'values');
CREATE TABLE Orders (order_id INT, currency STRING, amount INT, ts TIMESTAMP(3), pt AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'values');
CREATE TABLE Ships (ship_id INT, order_id INT, ship_ts TIMESTAMP(3), pt AS PROCTIME(),
  WATERMARK FOR ship_ts AS ship_ts) WITH ('connector' = 'values');
CREATE TABLE Rates (currency STRING, rate INT, update_time TIMESTAMP(3),
  WATERMARK FOR update_time AS update_time, PRIMARY KEY (currency) NOT ENFORCED)
  WITH ('connector' = 'values', 'changelog-mode' = 'I,UB,UA,D');
CREATE TABLE RatesLog (currency STRING, rate INT, update_time TIMESTAMP(3), WATERMARK FOR update_time AS update_time)
  WITH ('connector' = 'values');
CREATE TEMPORARY VIEW VersionedRates AS SELECT currency, rate, update_time FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY update_time DESC) AS rn FROM RatesLog) WHERE rn = 1;
CREATE TABLE Customers (id INT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'delta', 'path' = '/tmp/c');
CREATE TABLE Items (id STRING, kind STRING, ts TIMESTAMP(3), price INT, seq BIGINT, pt AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL '0.001' SECOND) WITH ('connector' = 'values');
CREATE TABLE Debezium (id BIGINT, v STRING, PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'debezium-json');
CREATE TABLE JsonLog (id BIGINT, v STRING) WITH ('connector' = 'kafka', 'topic' = 'j', 'format' = 'json');
"""  # noqa: E501


def plan(query: str, ddl: str = DDL):
    """The finished plan (its Sink) of the last statement of ``ddl + query``."""
    return plan_script(ddl + query + ";", "test.sql").statements[-1].sink


def only(sink, cls):
    found = [n for n in walk(sink) if isinstance(n, cls)]
    assert len(found) == 1, found
    return found[0]


def mode(*shorts):
    return ChangelogMode(frozenset(RowKind.from_short(s) for s in shorts))


ALL = mode("+I", "-U", "+U", "-D")
INSERT = ChangelogMode.insert_only()


# ---------------------------------------------------------------- regular joins


@pytest.mark.parametrize(
    "how, kind", [("JOIN", "inner"), ("LEFT JOIN", "left"), ("RIGHT JOIN", "right"), ("FULL OUTER JOIN", "full")]
)
def test_equi_join_without_time_bounds_is_a_regular_join(how, kind):
    join = only(plan(f"SELECT * FROM A {how} B ON a1 = b1 AND a2 > b2"), RegularJoin)
    assert join.kind == kind
    assert (join.left_keys, join.right_keys) == (["a1"], ["b1"])
    assert join.residual.sql(Flink) == "`a2` > `b2`"


def test_insert_only_inner_join_is_insert_only_but_outer_joins_retract():
    assert only(plan("SELECT * FROM A JOIN B ON a1 = b1"), RegularJoin).changelog_mode == INSERT
    assert only(plan("SELECT * FROM A LEFT JOIN B ON a1 = b1"), RegularJoin).changelog_mode == ALL


def test_inner_join_forwards_the_changes_of_its_inputs():
    assert only(plan("SELECT * FROM CA JOIN B ON a1 = b1"), RegularJoin).changelog_mode == ALL


def test_state_layout_follows_the_inputs_unique_keys():
    with_pk = only(plan("SELECT * FROM PA JOIN PB ON a1 = b1"), RegularJoin)
    assert (with_pk.left_layout.value, with_pk.right_layout.value) == (
        "JoinKeyContainsUniqueKey",
        "JoinKeyContainsUniqueKey",
    )
    assert ("a1",) in with_pk.upsert_keys and ("b1",) in with_pk.upsert_keys
    other_key = only(plan("SELECT * FROM PA JOIN PB ON a2 = b2"), RegularJoin)
    assert other_key.left_layout.value == "InputSideHasUniqueKey" and other_key.left_unique_key == ("a1",)
    no_key = only(plan("SELECT * FROM CA JOIN CB ON a1 = b1"), RegularJoin)
    assert (no_key.left_layout.value, no_key.right_layout.value) == (
        "InputSideHasNoUniqueKey",
        "InputSideHasNoUniqueKey",
    )


def test_join_output_names_clashing_columns_as_calcite():
    sink = plan("SELECT o.a1, s.a1 AS sid FROM A o JOIN (SELECT b1 AS a1, b2 FROM B) s ON o.a1 = s.a1")
    join = only(sink, RegularJoin)
    assert join.field_names == ["a1", "a2", "a3", "a10", "b2"]
    assert (join.left_keys, join.right_keys) == (["a1"], ["a1"])
    assert sink.field_names == ["a1", "sid"]


def test_comma_join_takes_its_condition_from_where():
    join = only(plan("SELECT a1, b3 FROM A, B WHERE a1 = b1 AND a2 > 3"), RegularJoin)
    assert join.left_keys == ["a1"] and join.residual is None


def test_join_without_equality_runs_on_one_task():
    join = only(plan("SELECT * FROM A JOIN B ON a2 > b2"), RegularJoin)
    assert join.left_keys == [] and join.residual is not None


# ---------------------------------------------------------------- semi / anti


def test_in_and_exists_are_semi_joins():
    semi = only(plan("SELECT * FROM A WHERE a1 IN (SELECT b1 FROM B)"), RegularJoin)
    assert (semi.kind, semi.left_keys, semi.right_keys) == ("semi", ["a1"], ["b1"])
    correlated = only(
        plan("SELECT * FROM A WHERE EXISTS (SELECT 1 FROM B WHERE a1 = b1 AND a2 > b2 AND b3 = 'x')"), RegularJoin
    )
    assert (correlated.kind, correlated.left_keys) == ("semi", ["a1"])
    assert correlated.residual.sql(Flink) == "`a2` > `b2`"
    # The subquery's own predicate filters the right input before the join.
    assert "b3" in correlated.right.describe() and correlated.right.name == "Calc"
    assert semi.changelog_mode == INSERT


def test_not_exists_is_an_anti_join_and_retracts():
    anti = only(plan("SELECT * FROM A WHERE NOT EXISTS (SELECT 1 FROM B WHERE a1 = b1)"), RegularJoin)
    assert (anti.kind, anti.left_keys) == ("anti", ["a1"])
    assert anti.changelog_mode == ALL


def test_not_in_over_nullable_columns_is_null_aware():
    anti = only(plan("SELECT * FROM A WHERE a1 NOT IN (SELECT b1 FROM B)"), RegularJoin)
    assert anti.kind == "anti" and anti.left_keys == []
    assert anti.residual.sql(Flink) == "`a1` = `b1` OR `a1` IS NULL OR `b1` IS NULL"
    keyed = only(plan("SELECT * FROM NN WHERE k NOT IN (SELECT k FROM NN)"), RegularJoin)
    assert keyed.left_keys == ["k"] and keyed.residual is None


# ---------------------------------------------------------------- interval joins


@pytest.mark.parametrize(
    "condition, lower, upper",
    [
        ("s.ship_ts BETWEEN o.ts - INTERVAL '10' MINUTE AND o.ts + INTERVAL '5' MINUTE", -600_000, 300_000),
        ("s.ship_ts >= o.ts AND s.ship_ts < o.ts + INTERVAL '1' HOUR", 0, 3_599_999),
        ("o.ts > s.ship_ts - INTERVAL '2' SECOND AND o.ts <= s.ship_ts", 0, 1_999),
        (
            "s.ship_ts > o.ts AND s.ship_ts <= o.ts + INTERVAL '1' HOUR AND s.ship_ts <= o.ts + INTERVAL '30' MINUTE",
            1,
            1_800_000,
        ),
    ],
)
def test_bounded_rowtimes_make_an_interval_join(condition, lower, upper):
    join = only(
        plan(f"SELECT o.order_id, s.ship_id FROM Orders o JOIN Ships s ON o.order_id = s.order_id AND {condition}"),
        IntervalJoin,
    )
    assert (join.lower_ms, join.upper_ms) == (lower, upper)
    assert join.rowtime and (join.left_time, join.right_time) == ("ts", "ship_ts")
    assert join.changelog_mode == INSERT


def test_outer_interval_join_is_insert_only_and_proctime_bounds_work_too():
    outer = only(
        plan(
            "SELECT * FROM Orders o LEFT JOIN Ships s ON o.order_id = s.order_id "
            "AND s.ship_ts BETWEEN o.ts AND o.ts + INTERVAL '1' HOUR"
        ),
        IntervalJoin,
    )
    assert outer.kind == "left" and outer.changelog_mode == INSERT
    proc = only(
        plan(
            "SELECT o.order_id FROM Orders o JOIN Ships s ON o.order_id = s.order_id "
            "AND s.pt BETWEEN o.pt - INTERVAL '1' SECOND AND o.pt"
        ),
        IntervalJoin,
    )
    assert not proc.rowtime and (proc.lower_ms, proc.upper_ms) == (-1000, 0)


def test_inner_interval_join_applies_the_rest_of_the_condition_after_joining():
    join = only(
        plan(
            "SELECT o.order_id FROM Orders o JOIN Ships s ON o.order_id = s.order_id "
            "AND s.ship_ts BETWEEN o.ts AND o.ts + INTERVAL '1' HOUR AND s.ship_id > o.amount"
        ),
        IntervalJoin,
    )
    assert join.post_filter.sql(Flink) == "`ship_id` > `amount`"


# ---------------------------------------------------------------- temporal and lookup joins


def test_for_system_time_as_of_a_rowtime_is_an_event_time_temporal_join():
    sink = plan(
        "SELECT o.order_id, r.rate FROM Orders o LEFT JOIN Rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency"  # noqa: E501
    )
    join = only(sink, TemporalJoin)
    assert (join.kind, join.left_time, join.right_time, join.primary_key) == (
        "left",
        "ts",
        "update_time",
        ("currency",),
    )
    assert not join.append_only_versions
    assert join.changelog_mode == INSERT  # the probe side's mode
    # The versioned side is read as upserts: Flink drops its -U before the join.
    assert isinstance(join.right, DropUpdateBefore) and join.right.changelog_mode == mode("+I", "+U", "-D")


def test_temporal_join_against_a_versioned_view_reads_the_append_only_log():
    join = only(
        plan(
            "SELECT o.order_id, r.rate FROM Orders o JOIN VersionedRates FOR SYSTEM_TIME AS OF o.ts AS r "
            "ON o.currency = r.currency"
        ),
        TemporalJoin,
    )
    assert join.append_only_versions and isinstance(join.right, TableScan) and join.right.table.name == "RatesLog"
    assert join.primary_key == ("currency",) and join.right_time == "update_time"


def test_delta_table_or_proctime_makes_a_lookup_join():
    join = only(
        plan(
            "SELECT o.order_id, c.name FROM Orders o JOIN Customers FOR SYSTEM_TIME AS OF o.pt AS c ON o.order_id = c.id"  # noqa: E501
        ),
        LookupJoin,
    )
    assert (join.left_keys, join.right_keys, join.kind) == (["order_id"], ["id"], "inner")
    rowtime = only(
        plan(
            "SELECT o.order_id, c.name FROM Orders o LEFT JOIN Customers FOR SYSTEM_TIME AS OF o.ts AS c ON o.order_id = c.id"  # noqa: E501
        ),
        LookupJoin,
    )
    assert rowtime.kind == "left"


# ---------------------------------------------------------------- OVER, dedup, group by


@pytest.mark.parametrize(
    "frame, kind, preceding",
    [
        ("ROWS BETWEEN 2 PRECEDING AND CURRENT ROW", "rows", 2),
        ("RANGE BETWEEN INTERVAL '2' MINUTE PRECEDING AND CURRENT ROW", "range", 120_000),
        ("ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", "rows", None),
        ("RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", "range", None),
    ],
)
def test_over_is_an_over_aggregate(frame, kind, preceding):
    sink = plan(
        f"SELECT id, MAX(price) OVER (PARTITION BY kind ORDER BY ts {frame}) AS m, "
        f"COUNT(*) OVER (PARTITION BY kind ORDER BY ts {frame}) AS c FROM Items"
    )
    over = only(sink, OverAggregate)
    assert (over.frame, over.preceding, over.partition_by, over.order_by, over.rowtime) == (
        kind,
        preceding,
        ["kind"],
        "ts",
        True,
    )
    assert [(a.function, a.arg) for a in over.aggregates] == [("MAX", "price"), ("COUNT", None)]
    assert over.changelog_mode == INSERT and sink.field_names == ["id", "m", "c"]


def test_over_argument_expressions_are_computed_before_the_operator():
    sink = plan(
        "SELECT id, AVG(CAST(price AS DOUBLE)) OVER w AS a FROM Items "
        "WINDOW w AS (PARTITION BY kind ORDER BY pt ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    )
    over = only(sink, OverAggregate)
    assert not over.rowtime and over.aggregates[0].arg == "f6"
    assert "CAST(price AS DOUBLE) AS f6" in over.inputs[0].describe()


@pytest.mark.parametrize(
    "order, name, keep, time, kinds",
    [
        ("pt DESC", "Deduplicate", "last", "PROCTIME", mode("+I", "-U", "+U")),
        ("pt ASC", "Deduplicate", "first", "PROCTIME", INSERT),
        ("ts DESC", "Deduplicate", "last", "ROWTIME", mode("+I", "-U", "+U")),
        ("ts", "Deduplicate", "first", "ROWTIME", INSERT),
    ],
)
def test_row_number_filtered_to_one_is_a_deduplication(order, name, keep, time, kinds):
    sink = plan(
        f"SELECT id, price FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY {order}) AS rn FROM Items) WHERE rn = 1"  # noqa: E501
    )
    dedup = only(sink, Deduplicate)
    assert (dedup.name, dedup.keep, dedup.time, dedup.keys) == (name, keep, time, ["id"])
    assert dedup.changelog_mode == kinds and dedup.upsert_keys == (("id",),)


@pytest.mark.parametrize(
    "source, order, bound, select_rank, function, rank_range, output_rank",
    [
        ("Items", "seq DESC", "rn = 1", False, "top1", (1, 1), False),  # Flink's FastTop1Function
        ("Items", "price ASC, seq", "rn <= 1", True, "top1", (1, 1), False),  # one rank: a constant 1
        ("Items", "price DESC", "rn <= 3", True, "append", (1, 3), True),
        ("Items", "price DESC", "rn < 4", False, "append", (1, 3), False),
        ("Items", "price DESC", "rn BETWEEN 2 AND 3", False, "append", (2, 3), False),
        ("Items", "pt", "rn <= 2", True, "first", (1, 2), True),  # processing time ascending: the first N
        ("CA", "a2 DESC", "rn <= 2", True, "retract", (1, 2), True),
        ("CA", "a2 DESC", "rn > 1 AND rn <= 2", True, "retract", (2, 2), False),
        ("CA", "a2 DESC", "rn = 1", True, "retract", (1, 1), False),
    ],
)
def test_row_number_filtered_to_a_rank_range_is_a_top_n(
    source, order, bound, select_rank, function, rank_range, output_rank
):
    part, columns = ("kind", "id, kind, price") if source == "Items" else ("a1", "a1, a2, a3")
    sink = plan(
        f"SELECT {columns}{', rn' if select_rank else ''} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY {part} "
        f"ORDER BY {order}) AS rn FROM {source}) WHERE {bound}"
    )
    rank = only(sink, Rank)
    assert (rank.function, (rank.rank_start, rank.rank_end), rank.output_rank) == (function, rank_range, output_rank)
    assert rank.strategy == ("RetractStrategy" if source == "CA" else "AppendFastStrategy")
    assert rank.upsert_keys == (((part,),) if rank_range == (1, 1) else ((part, rank.rank_field),))
    assert f"rankRange=[rankStart={rank_range[0]}, rankEnd={rank_range[1]}]" in rank.describe()
    assert rank.changelog_mode == ALL
    select = rank.describe().split("select=[")[1].split("]")[0].split(", ")
    assert (rank.rank_field in select) == output_rank  # Flink's outputRankNumber


def test_group_by_is_a_group_aggregate():
    insert_only = only(
        plan("SELECT kind, COUNT(DISTINCT id) AS n, SUM(price) AS s FROM Items GROUP BY kind HAVING COUNT(*) > 1"),
        GroupAggregate,
    )
    assert insert_only.group_by == ["kind"]
    assert [(a.function, a.arg) for a in insert_only.aggregates] == [
        ("COUNT_DISTINCT", "id"),
        ("SUM", "price"),
        ("COUNT", None),
    ]
    assert insert_only.changelog_mode == mode("+I", "-U", "+U")  # an insert-only input never empties a group
    assert only(plan("SELECT a1, MAX(a2) FROM CA GROUP BY a1"), GroupAggregate).changelog_mode == ALL


def test_dedup_then_count_distinct_as_seed_003():
    sink = plan(
        "SELECT kind, COUNT(DISTINCT id) AS n FROM (SELECT id, kind FROM (SELECT *, ROW_NUMBER() OVER "
        "(PARTITION BY id ORDER BY pt DESC) AS rn FROM Items) WHERE rn = 1) GROUP BY kind"
    )
    agg = only(sink, GroupAggregate)
    assert agg.changelog_mode == ALL and agg.upsert_keys == (("kind",),)
    assert only(sink, Deduplicate).changelog_mode == mode("+I", "-U", "+U")


# ---------------------------------------------------------------- sinks


SINKS = (
    DDL
    + """
CREATE TABLE counts (kind STRING, n BIGINT, PRIMARY KEY (kind) NOT ENFORCED) WITH ('connector' = 'delta');
CREATE TABLE by_value (kind STRING, n BIGINT, PRIMARY KEY (n) NOT ENFORCED) WITH ('connector' = 'delta');
CREATE TABLE append_only (kind STRING, n BIGINT) WITH ('connector' = 'delta');
CREATE TABLE current_rows (id BIGINT, v STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'delta');
"""
)


def test_sink_keyed_by_an_upsert_key_takes_only_update_after():
    sink = plan("INSERT INTO counts SELECT kind, COUNT(*) FROM Items GROUP BY kind", SINKS)
    agg = only(sink, GroupAggregate)
    assert agg.update_kind == "ONLY_UPDATE_AFTER" and agg.changelog_mode == mode("+I", "+U")
    assert not [n for n in walk(sink) if isinstance(n, SinkUpsertMaterializer)]


def test_sink_keyed_by_another_column_gets_a_sink_upsert_materializer():
    sink = plan("INSERT INTO by_value SELECT kind, COUNT(*) FROM Items GROUP BY kind", SINKS)
    materializer = only(sink, SinkUpsertMaterializer)
    assert materializer.primary_key == ("n",)
    assert only(sink, GroupAggregate).changelog_mode == mode("+I", "-U", "+U")  # the materializer needs -U


def test_changelog_source_into_a_sink_with_its_key_drops_update_before():
    sink = plan("INSERT INTO current_rows SELECT * FROM Debezium", SINKS)
    drop = only(sink, DropUpdateBefore)
    assert isinstance(drop.inputs[0], TableScan) and drop.inputs[0].changelog_mode == ALL
    assert drop.changelog_mode == mode("+I", "+U", "-D")


def test_append_only_sink_refuses_updates_naming_the_node():
    with pytest.raises(
        SinkError,
        match=r"test\.sql:\d+:13: table sink 'append_only' doesn't support consuming update changes "
        r"which are produced by node GroupAggregate\(groupBy=\[kind\].*\[rule: sink-changelog-mode\]",
    ):
        plan("INSERT INTO append_only SELECT kind, COUNT(*) FROM Items GROUP BY kind", SINKS)
    # Insert-only results are fine for an append-only sink.
    assert plan("INSERT INTO append_only SELECT v, id FROM JsonLog", SINKS).inputs[0].changelog_mode == INSERT


def test_insert_casts_to_the_sink_column_types():
    sink = plan("INSERT INTO counts SELECT kind, price FROM Items", SINKS)
    assert "CAST(price AS BIGINT) AS n" in sink.inputs[0].describe()


def test_upsert_source_is_consumed_by_key_or_normalized():
    ddl = (
        DDL
        + "CREATE TABLE U (k INT, v INT, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'values', 'changelog-mode' = 'I,UA,D');\n"  # noqa: E501
        "CREATE TABLE u_sink (k INT, v INT, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'delta');\n"
    )
    scan = only(plan("INSERT INTO u_sink SELECT * FROM U", ddl), TableScan)
    assert scan.changelog_mode == mode("+I", "+U", "-D")  # no DropUpdateBefore needed
    # A consumer retracting by value gets a ChangelogNormalize (tests/test_planner_changelog_normalize.py).
    assert (
        "ChangelogNormalize(key=[k]" in plan_script(ddl + "SELECT v, COUNT(*) FROM U GROUP BY v;").statements[0].explain
    )


def test_union_all_forwards_every_inputs_changes():
    from streamjoin.planner.plan import Union

    sink = plan("SELECT a1 AS k, a3 FROM A UNION ALL SELECT a1, a3 FROM CA UNION ALL SELECT b2, b3 FROM B")
    union = only(sink, Union)
    assert len(union.inputs) == 3 and union.field_names == ["k", "a3"]
    assert union.changelog_mode == ALL and sink.field_names == ["k", "a3"]
    with pytest.raises(ValidationError, match=r"UNION ALL of 2 and 1 columns \[rule: union-columns\]"):
        plan("SELECT a1, a2 FROM A UNION ALL SELECT b1 FROM B")


def test_group_by_expressions_are_computed_before_the_aggregate():
    sink = plan(
        "SELECT UPPER(kind) AS k, SUM(price * 2) AS s FROM Items GROUP BY UPPER(kind) HAVING SUM(price * 2) > 2"
    )
    agg = only(sink, GroupAggregate)
    assert agg.group_by == ["f6"] and [(a.function, a.arg) for a in agg.aggregates] == [("SUM", "f7")]
    assert agg.inputs[0].describe() == "Calc(select=[UPPER(kind) AS f6, price * 2 AS f7])"
    assert sink.field_names == ["k", "s"] and "where=[s > 2]" in sink.inputs[0].describe()


def test_an_alias_named_like_an_input_column_names_only_the_output_column():
    # Flink: a SELECT alias never shadows an input column (nor is it visible to GROUP BY or HAVING);
    # SUM(...) AS s over a table with a column s is the output column s, not a second input column.
    ddl = DDL + "CREATE TABLE S (k INT, v INT, s INT) WITH ('connector' = 'values');\n"
    sink = plan(
        "SELECT COALESCE(S.k, B.b1) AS kk, COUNT(*) AS c, SUM(COALESCE(S.v, 0) + COALESCE(B.b2, 0)) AS s "
        "FROM S FULL JOIN B ON S.k = B.b1 GROUP BY COALESCE(S.k, B.b1)",
        ddl,
    )
    agg = only(sink, GroupAggregate)
    assert [(a.output, a.function) for a in agg.aggregates] == [("c", "COUNT"), ("s", "SUM")]
    assert sink.field_names == ["kk", "c", "s"]
    agg = only(plan("SELECT k, SUM(v) AS s FROM S GROUP BY k HAVING SUM(s) > 1", ddl), GroupAggregate)
    assert [(a.output, a.arg) for a in agg.aggregates] == [("s", "v"), ("agg$1", "s")]
    # As in Flink, s in the select list or HAVING is the input column, neither grouped nor aggregated ...
    for query in (
        "SELECT k, s + 0 AS t, SUM(v) AS s FROM S GROUP BY k",
        "SELECT k, SUM(v) AS s FROM S GROUP BY k HAVING s > 1",
    ):
        with pytest.raises(ValidationError, match=r"column 's' is not being grouped"):
            plan(query, ddl)
    # ... and an alias is no column of the input.
    with pytest.raises(ValidationError, match=r"unknown column 'total'"):
        plan("SELECT k, SUM(v) AS total FROM S GROUP BY k HAVING total > 1", ddl)
