"""Window table functions and window aggregates as the planner sees them: the plan (EXPLAIN), and what is refused
with which rule (docs/semantics.md §11)."""

import re

import pytest

from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner import plan_script

DDL = """CREATE TABLE T (k STRING, v INT, ts TIMESTAMP(3), plain_ts TIMESTAMP(3), pt AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'values');
CREATE TABLE C (k STRING, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'values', 'changelog-mode' = 'I,UB,UA,D');
"""  # noqa: E501


def explain(query: str) -> str:
    [text] = plan_script(DDL + f"EXPLAIN CHANGELOG_MODE {query};").explains
    return text


def refused(query: str, kind=ValidationError) -> str:
    with pytest.raises(kind) as info:
        plan_script(DDL + query + ";", "bad.sql")
    assert type(info.value) is kind, info.value
    assert re.match(r"^bad\.sql:\d+:\d+: ", str(info.value)), info.value
    return str(info.value)


def test_a_tumble_aggregate_is_a_window_aggregate_over_the_window_table_function():
    text = explain(
        "SELECT k, window_start, window_end, COUNT(*) AS cnt, SUM(v) AS total "
        "FROM TABLE(TUMBLE(TABLE T, DESCRIPTOR(ts), INTERVAL '10' MINUTES)) GROUP BY k, window_start, window_end"
    )
    calc = "Calc(select=[k, window_start, window_end, cnt, total], changelogMode=[I]"
    aggregate = (
        "WindowAggregate(groupBy=[k], window=[TUMBLE(time_col=[ts], size=[10 min])], select=[k, COUNT(*) AS cnt, "
        "SUM(v) AS total, start('w$) AS window_start, end('w$) AS window_end], changelogMode=[I], "
        "upsertKeys=[[k, window_end, window_start]])"
    )
    scan = "TableSourceScan(table=[[default_catalog, default_database, T]], fields=[k, v, ts, plain_ts, pt]"
    lines = text.splitlines()[2:]
    assert lines[0].startswith(f"+- {calc}") and lines[1] == f"   +- {aggregate}"
    assert lines[2:4] == [
        "      +- Exchange(distribution=[hash[k]], changelogMode=[I])",
        "         +- WindowTableFunction(window=[TUMBLE(time_col=[ts], size=[10 min])], changelogMode=[I])",
    ]
    assert lines[4].startswith(f"            +- {scan}") and len(lines) == 5


@pytest.mark.parametrize(
    "call, window",
    [
        (
            "HOP(DATA => TABLE T, TIMECOL => DESCRIPTOR(ts), SLIDE => INTERVAL '5' MINUTES, SIZE => INTERVAL '1' HOUR)",
            "HOP(time_col=[ts], size=[1 h], slide=[5 min])",
        ),
        (
            "CUMULATE(TABLE T, DESCRIPTOR(ts), INTERVAL '2' MINUTE, INTERVAL '10' MINUTE, INTERVAL '1' MINUTE)",
            "CUMULATE(time_col=[ts], max_size=[10 min], step=[2 min], offset=[1 min])",
        ),
        ("TUMBLE(TABLE T, DESCRIPTOR(ts), SIZE => INTERVAL '1' DAY, OFFSET => INTERVAL '-8' HOUR)", None),
    ],
)
def test_hop_cumulate_named_arguments_and_offsets(call, window):
    text = explain(
        f"SELECT window_start, window_time, COUNT(DISTINCT k) AS n FROM TABLE({call}) "
        "GROUP BY window_start, window_end, window_time"
    )
    aggregate = next(line for line in text.splitlines() if "WindowAggregate(" in line)
    assert (
        "select=[COUNT(DISTINCT k) AS n, start('w$) AS window_start, end('w$) AS window_end, rowtime('w$) AS "
        "window_time]" in aggregate
    )
    assert "Exchange(distribution=[single]" in text
    if window is not None:
        assert f"window=[{window}]" in aggregate
    else:
        assert "window=[TUMBLE(time_col=[ts], size=[1 d], offset=[-8 h])]" in aggregate


def test_the_window_table_function_alone_adds_the_window_columns_and_keeps_a_rowtime():
    script = plan_script(DDL + "SELECT * FROM TABLE(TUMBLE(TABLE T, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) AS w;")
    sink = script.statements[-1].sink
    types = {f.name: str(f.type) for f in sink.inputs[0].fields}
    assert list(types)[-3:] == ["window_start", "window_end", "window_time"]
    assert types["ts"] == "TIMESTAMP(3)"  # the input's rowtime is a plain timestamp after the function
    assert types["window_start"] == types["window_end"] == "TIMESTAMP(3) NOT NULL"
    assert types["window_time"] == "TIMESTAMP(3) *ROWTIME* NOT NULL"


def test_a_legacy_group_window_is_the_window_aggregate_of_its_window_table_function():
    text = explain(
        "SELECT k, TUMBLE_START(ts, INTERVAL '10' MINUTE) AS ws, TUMBLE_END(ts, INTERVAL '10' MINUTE), "
        "TUMBLE_ROWTIME(ts, INTERVAL '10' MINUTE) AS wt, COUNT(*) AS cnt FROM T "
        "GROUP BY TUMBLE(ts, INTERVAL '10' MINUTE), k HAVING COUNT(*) > 1"
    )
    lines = text.splitlines()
    # Named as Flink names the calls: an alias, else EXPR$<i>.
    assert lines[2].startswith(
        "+- Calc(select=[k, window_start AS ws, window_end AS EXPR$2, window_time AS wt, cnt], where=[cnt > 1]"
    )
    assert lines[3].startswith(
        "   +- WindowAggregate(groupBy=[k], window=[TUMBLE(time_col=[ts], size=[10 min])], select=[k, COUNT(*) AS cnt, "
        "start('w$) AS window_start, end('w$) AS window_end, rowtime('w$) AS window_time]"
    )
    hop = explain(
        "SELECT HOP_END(ts, INTERVAL '5' MINUTE, INTERVAL '1' HOUR) AS e, SUM(v) AS s FROM T "
        "GROUP BY HOP(ts, INTERVAL '5' MINUTE, INTERVAL '1' HOUR)"
    )
    assert "window=[HOP(time_col=[ts], size=[1 h], slide=[5 min])]" in hop


def test_grouping_by_window_start_alone_is_a_group_aggregate():
    text = explain(
        "SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE T, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) "
        "GROUP BY window_start"
    )
    assert "GroupAggregate(groupBy=[window_start]" in text and "WindowAggregate" not in text


def test_a_changelog_input_is_windowed_and_aggregated_with_retractions():
    text = explain(
        "SELECT window_start, window_end, SUM(v) AS s FROM TABLE(TUMBLE(TABLE C, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) "
        "GROUP BY window_start, window_end"
    )
    assert "WindowTableFunction(window=[TUMBLE(time_col=[ts], size=[1 min])], changelogMode=[I,UB,UA,D])" in text
    assert "WindowAggregate(window=[TUMBLE(time_col=[ts], size=[1 min])]" in text


@pytest.mark.parametrize(
    "query, kind, text",
    [
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE T, DESCRIPTOR(plain_ts), INTERVAL '1' MINUTE))",
            ValidationError,
            "The window function requires the timecol is a time attribute type, but is TIMESTAMP(3)",
        ),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE T, DESCRIPTOR(pt), INTERVAL '1' MINUTE))",
            UnsupportedPlanError,
            "TUMBLE windows on processing time are not supported",
        ),
        (
            "SELECT * FROM TABLE(SESSION(TABLE T PARTITION BY k, DESCRIPTOR(ts), INTERVAL '1' MINUTE))",
            UnsupportedPlanError,
            "a SESSION window table function is supported under a window aggregate",
        ),
        (
            (
                "SELECT k, window_start, window_end, COUNT(*) AS n FROM TABLE(SESSION(TABLE T, DESCRIPTOR(ts), "
                "INTERVAL '1' MINUTE)) GROUP BY k, window_start, window_end"
            ),
            UnsupportedPlanError,
            (
                "a session window aggregate must group by window_start, window_end and exactly the SESSION's "
                "PARTITION BY keys: its partition keys are [], its grouping keys [k, window_start, window_end]"
            ),
        ),
        (
            (
                "SELECT * FROM (SELECT k, window_start, window_end, ROW_NUMBER() OVER (PARTITION BY window_start, "
                "window_end, k ORDER BY v) AS rn FROM TABLE(SESSION(TABLE T PARTITION BY k, DESCRIPTOR(ts), "
                "INTERVAL '1' MINUTE))) WHERE rn <= 2"
            ),
            UnsupportedPlanError,
            "a window Top-N over a SESSION window table function is not supported",
        ),
        (
            "SELECT * FROM TABLE(SESSION(TABLE T, DESCRIPTOR(ts), GAP => INTERVAL '0' MINUTE))",
            ValidationError,
            "SESSION GAP must be positive",
        ),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE T, DESCRIPTOR(ts)))",
            ValidationError,
            "TUMBLE needs SIZE (TUMBLE(DATA, TIMECOL, SIZE, OFFSET))",
        ),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE T, DESCRIPTOR(ts), WIDTH => INTERVAL '1' MINUTE))",
            ValidationError,
            "TUMBLE has no parameter WIDTH; its parameters: DATA, TIMECOL, SIZE, OFFSET",
        ),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE T, DESCRIPTOR(ts), INTERVAL '0' MINUTE))",
            ValidationError,
            "TUMBLE SIZE must be positive",
        ),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE T, DESCRIPTOR(ts), INTERVAL '1' MONTH))",
            ValidationError,
            "only day-time intervals",
        ),
        (
            (
                "SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(HOP(TABLE T, DESCRIPTOR(ts), "
                "INTERVAL '4' MINUTE, INTERVAL '10' MINUTE)) GROUP BY window_start, window_end"
            ),
            ValidationError,
            "HOP table function based aggregate requires size must be an integral multiple of slide",
        ),
        (
            (
                "SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(CUMULATE(TABLE T, DESCRIPTOR(ts), "
                "INTERVAL '3' MINUTE, INTERVAL '10' MINUTE)) GROUP BY window_start, window_end"
            ),
            ValidationError,
            "CUMULATE table function based aggregate requires maxSize must be an integral multiple of step",
        ),
        (
            "SELECT COUNT(*) AS n FROM T GROUP BY UPPER(k), SESSION(ts, INTERVAL '1' HOUR)",
            UnsupportedPlanError,
            "a SESSION group window groups by columns only",
        ),
        (
            "SELECT TUMBLE_END(ts, INTERVAL '2' HOUR) AS e, COUNT(*) FROM T GROUP BY TUMBLE(ts, INTERVAL '1' HOUR)",
            ValidationError,
            "TUMBLE_END(ts, INTERVAL '2' HOUR) does not match the group window TUMBLE(ts, INTERVAL '1' HOUR)",
        ),
        (
            "SELECT TUMBLE_START(ts, INTERVAL '1' HOUR) AS s FROM T",
            ValidationError,
            "TUMBLE_START needs a GROUP BY TUMBLE(…)",
        ),
        (
            "SELECT COUNT(*) AS n FROM T GROUP BY TUMBLE(plain_ts, INTERVAL '1' HOUR)",
            ValidationError,
            "The window function requires the timecol is a time attribute type, but is TIMESTAMP(3)",
        ),
    ],
)
def test_refused_with_the_window_functions_rule(query, kind, text):
    message = refused(query, kind)
    assert text in message, message


_TOPN = (
    "SELECT {select} FROM (SELECT k, v, ts, window_start, window_end, ROW_NUMBER() OVER "
    "(PARTITION BY window_start, window_end{keys} ORDER BY {order}) AS rn "
    "FROM TABLE({tvf}(TABLE {table}, DESCRIPTOR(ts), INTERVAL '10' MINUTES))) WHERE {where}"
)


def _topn(select="*", keys=", k", order="v DESC", tvf="TUMBLE", table="T", where="rn <= 3") -> str:
    return _TOPN.format(select=select, keys=keys, order=order, tvf=tvf, table=table, where=where)


@pytest.mark.parametrize(
    "where, rank_range",
    [
        ("rn <= 3", "rankStart=1, rankEnd=3"),
        ("rn < 3", "rankStart=1, rankEnd=2"),
        ("rn BETWEEN 2 AND 4", "rankStart=2, rankEnd=4"),
        ("rn > 1 AND rn <= 3", "rankStart=2, rankEnd=3"),
        ("rn = 2", "rankStart=2, rankEnd=2"),
    ],
)
def test_a_row_number_partitioned_by_the_window_is_a_window_rank(where, rank_range):
    lines = explain(_topn(where=where)).splitlines()[2:]
    rank = (
        f"WindowRank(window=[TUMBLE(time_col=[ts], size=[10 min])], rankType=[ROW_NUMBER], rankRange=[{rank_range}], "
        "partitionBy=[k], orderBy=[v DESC], select=["
    )
    assert lines[1].startswith(f"   +- {rank}"), lines[1]
    assert lines[1].endswith("window_time, rn], changelogMode=[I], upsertKeys=[[k, rn, window_end, window_start]])")
    assert lines[2] == "      +- Exchange(distribution=[hash[k]], changelogMode=[I])"


def test_order_directions_and_nulls_as_written_and_a_global_window_rank():
    text = explain(_topn(keys="", order="v ASC NULLS LAST, k DESC NULLS FIRST, ts", where="rn <= 1"))
    assert "partitionBy=[], orderBy=[v ASC NULLS LAST, k DESC NULLS FIRST, ts ASC]" in text, text
    assert "Exchange(distribution=[single]" in text


@pytest.mark.parametrize("order, keep", [("ts DESC", "LastRow"), ("ts", "FirstRow"), ("window_time DESC", "LastRow")])
def test_one_rank_ordered_by_the_window_time_attribute_is_a_window_deduplication(order, keep):
    query = (
        "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, k ORDER BY "
        f"{order}) AS rn FROM TABLE(TUMBLE(TABLE T, DESCRIPTOR(ts), INTERVAL '10' MINUTES))) WHERE rn = 1"
    )
    text = explain(query)
    order_key = order.split()[0]
    dedup = (
        f"WindowDeduplicate(window=[TUMBLE(time_col=[ts], size=[10 min])], keep=[{keep}], partitionKeys=[k], "
        f"orderKey=[{order_key}], order=[ROWTIME]"
    )
    assert dedup in text, text
    assert "WindowDeduplicate" not in explain(query.replace("rn = 1", "rn <= 2"))


@pytest.mark.parametrize(
    "query, text",
    [
        (_topn(table="C"), "StreamPhysicalWindowRank doesn't support consuming update and delete changes"),
        (_topn(where="rn > 2"), "Rank end is not specified. Currently rank only accepts finite rank end"),
        (_topn(where="rn > 3 AND rn <= 2"), "leaves no rank: rankStart=4 > rankEnd=2"),
        (_topn(order="v + 1"), "ROW_NUMBER() ORDER BY takes columns"),
    ],
)
def test_window_ranks_refused_with_their_rule(query, text):
    message = refused(query, UnsupportedPlanError)
    assert text in message, message


# -- window joins (docs/semantics.md §11.4) ------------------------------------------------------------------------

JOIN_DDL = """CREATE TABLE U (k STRING, w INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'values');
"""


def _tvf(table: str, kind: str = "TUMBLE(TABLE {t}, DESCRIPTOR(ts), INTERVAL '5' MINUTES)") -> str:
    return f"(SELECT * FROM TABLE({kind.format(t=table)})) {table.lower()}"


WINDOWS = "t.window_start = u.window_start AND t.window_end = u.window_end"


def join_plan(query: str) -> list[str]:
    [text] = plan_script(DDL + JOIN_DDL + f"EXPLAIN CHANGELOG_MODE {query};").explains
    return text.splitlines()[2:]


@pytest.mark.parametrize(
    "join, flink", [("JOIN", "InnerJoin"), ("LEFT JOIN", "LeftOuterJoin"), ("FULL JOIN", "FullOuterJoin")]
)
def test_two_window_table_functions_joined_on_their_windows_are_a_window_join(join, flink):
    lines = join_plan(f"SELECT t.k, u.w FROM {_tvf('T')} {join} {_tvf('U')} ON t.k = u.k AND {WINDOWS} AND t.v < u.w")
    window = "TUMBLE(win_start=[window_start], win_end=[window_end], size=[5 min])"
    assert lines[1].startswith(
        f"   +- WindowJoin(leftWindow=[{window}], rightWindow=[{window}], joinType=[{flink}], where=[window_start = "
        "window_start0 AND window_end = window_end0 AND k = k0 AND v < w], select=[k, v, ts, plain_ts, pt, "
        "window_start, window_end, window_time, k0, w, ts0, window_start0, window_end0, window_time0], "
        "changelogMode=[I]"
    )
    assert lines[2] == "      :- Exchange(distribution=[hash[k]], changelogMode=[I])"


@pytest.mark.parametrize(
    "where, flink",
    [
        (f"t.k IN (SELECT k FROM {_tvf('U')} WHERE {WINDOWS})", "LeftSemiJoin"),
        (f"EXISTS (SELECT * FROM {_tvf('U')} WHERE t.k = u.k AND {WINDOWS})", "LeftSemiJoin"),
        (f"NOT EXISTS (SELECT * FROM {_tvf('U')} WHERE t.k = u.k AND {WINDOWS})", "LeftAntiJoin"),
    ],
)
def test_in_and_exists_on_the_window_columns_are_a_semi_or_anti_window_join(where, flink):
    lines = join_plan(f"SELECT t.k FROM {_tvf('T')} WHERE {where}")
    assert "WindowJoin(leftWindow=[TUMBLE(win_start=[window_start]" in lines[1] and f"[{flink}]" in lines[1]
    assert "where=[window_start = window_start0 AND window_end = window_end0 AND k = k0]" in lines[1]


def test_a_null_aware_not_in_is_an_anti_window_join_with_the_null_test_as_its_residual():
    lines = join_plan(f"SELECT t.k FROM {_tvf('T')} WHERE t.k NOT IN (SELECT k FROM {_tvf('U')} WHERE {WINDOWS})")
    assert "WindowJoin(" in lines[1] and "joinType=[LeftAntiJoin]" in lines[1]
    assert (
        "where=[window_start = window_start0 AND window_end = window_end0 AND (k = k0 OR k IS NULL OR k0 IS NULL)]"
        in lines[1]
    )
    assert "Exchange(distribution=[single]" in lines[2]


@pytest.mark.parametrize(
    "right, on",
    [
        # Other windows on the two sides, or only one of the two equalities: Flink plans a regular join.
        (_tvf("U", "TUMBLE(TABLE {t}, DESCRIPTOR(ts), INTERVAL '10' MINUTES)"), WINDOWS),
        (_tvf("U", "HOP(TABLE {t}, DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)"), WINDOWS),
        (_tvf("U"), "t.window_start = u.window_start"),
    ],
)
def test_a_join_that_is_not_on_the_same_windows_of_both_sides_is_a_regular_join(right, on):
    lines = join_plan(
        f"SELECT t.k, u.w FROM (SELECT k, window_start, window_end FROM {_tvf('T')}) t "
        f"JOIN (SELECT w, window_start, window_end FROM {right}) u ON {on}"
    )
    assert not any("WindowJoin" in line for line in lines)
    assert any(line.lstrip(" +-:").startswith("Join(") for line in lines)


def test_a_window_join_over_updates_is_refused_as_flink_refuses_it():
    message = refused(
        f"SELECT t.k FROM {_tvf('C').replace(' c', ' t')} JOIN {_tvf('T').replace(' t', ' u')} ON {WINDOWS}",
        UnsupportedPlanError,
    )
    assert "StreamPhysicalWindowJoin doesn't support consuming update and delete changes" in message
    assert "[rule: window-join]" in message


# -- session windows (docs/semantics.md §11.2) ---------------------------------------------------------------------


def test_a_session_aggregate_is_a_window_aggregate_over_the_session_table_function():
    lines = explain(
        "SELECT k, window_start, window_end, COUNT(*) AS n FROM TABLE(SESSION(TABLE T PARTITION BY k, "
        "DESCRIPTOR(ts), INTERVAL '5' MINUTES)) GROUP BY k, window_start, window_end"
    ).splitlines()[2:]
    window = "SESSION(time_col=[ts], gap=[5 min], partition keys=[k])"
    assert lines[1].startswith(f"   +- WindowAggregate(groupBy=[k], window=[{window}], select=[k, COUNT(*) AS n")
    assert lines[3] == f"         +- WindowTableFunction(window=[{window}], changelogMode=[I])"


def test_a_legacy_session_group_window_is_the_session_aggregate_partitioned_by_its_keys():
    lines = explain(
        "SELECT k, SESSION_START(ts, INTERVAL '5' MINUTE) AS s, SESSION_ROWTIME(ts, INTERVAL '5' MINUTE) AS t, "
        "COUNT(*) AS n FROM T GROUP BY SESSION(ts, INTERVAL '5' MINUTE), k"
    ).splitlines()[2:]
    assert "window=[SESSION(time_col=[ts], gap=[5 min], partition keys=[k])]" in lines[1]
    assert "rowtime('w$) AS window_time" in lines[1]


def test_a_filter_on_the_rows_session_window_before_the_aggregate_is_refused():
    message = refused(
        "SELECT k, window_start, window_end, COUNT(*) AS n FROM TABLE(SESSION(TABLE T PARTITION BY k, "
        "DESCRIPTOR(ts), INTERVAL '5' MINUTES)) WHERE window_end > TIMESTAMP '2024-01-01 10:00:00' "
        "GROUP BY k, window_start, window_end",
        UnsupportedPlanError,
    )
    assert "reads the window columns of a SESSION window table function before its window aggregate" in message


def test_a_join_of_session_windows_is_refused():
    session = "(SELECT * FROM TABLE(SESSION(TABLE {t} PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' MINUTES))) {a}"
    message = refused(
        f"SELECT t.k FROM {session.format(t='T', a='t')} JOIN {session.format(t='T', a='u')} ON t.k = u.k AND "
        "t.window_start = u.window_start AND t.window_end = u.window_end",
        UnsupportedPlanError,
    )
    assert "a window join of SESSION window table functions is not supported" in message


# -- grouping sets (docs/semantics.md §6.1) -------------------------------------------------------------------------


def test_a_rollup_over_windows_is_a_union_of_one_window_aggregate_per_grouping_set():
    lines = explain(
        "SELECT window_start, window_end, k, GROUPING(k) AS g, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE T, "
        "DESCRIPTOR(ts), INTERVAL '10' MINUTES)) GROUP BY window_start, window_end, ROLLUP (k)"
    ).splitlines()[2:]
    assert lines[0].startswith("+- Union(all=[true], union=[window_start, window_end, k, g, n], changelogMode=[I])")
    assert sum("WindowAggregate(groupBy=[k]" in line for line in lines) == 1
    assert sum("WindowAggregate(window=[TUMBLE" in line for line in lines) == 1
    assert any("CAST(NULL AS STRING) AS k, CAST(1 AS BIGINT) AS g" in line for line in lines)


def test_grouping_sets_of_a_group_aggregate_and_a_cube_expand_in_flinks_order():
    from sqlglot import parse_one

    from streamjoin.planner.dialect import Flink
    from streamjoin.planner.rules.grouping_sets import grouping_sets

    def sets(group: str) -> list[list[str]]:
        select = parse_one(f"SELECT 1 FROM t GROUP BY {group}", read=Flink)
        return [[e.sql() for e in s] for s in grouping_sets(select.args["group"].expressions) or []]

    assert sets("ROLLUP (a, b)") == [["a", "b"], ["a"], []]
    assert sets("CUBE (a, b)") == [["a", "b"], ["a"], ["b"], []]
    assert sets("w, GROUPING SETS ((a), ())") == [["w", "a"], ["w"]]
    assert sets("a, b") == []
    message = refused("SELECT COUNT(*) AS n FROM T GROUP BY GROUPING SETS ((UPPER(k)), ())", UnsupportedPlanError)
    assert "GROUPING SETS, ROLLUP and CUBE take columns only" in message


# -- event-time operators that chain (docs/semantics.md §11.6) -----------------------------------------------------

_PER_K = (
    "SELECT k, window_start, window_end, window_time, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE T, DESCRIPTOR(ts), "
    "INTERVAL '10' MINUTES)) GROUP BY k, window_start, window_end, window_time"
)


_VIEWS = f"CREATE VIEW per_k AS {_PER_K};\n"


def _node_lines(text: str) -> list[str]:
    return [line.lstrip(" +-:") for line in text.splitlines()[2:]]


def _explain_over_views(views: str, query: str) -> str:
    [text] = plan_script(DDL + views + f"EXPLAIN CHANGELOG_MODE {query};").explains
    return text


def test_a_window_aggregates_window_time_stays_a_rowtime_a_window_table_function_may_window_again():
    lines = _node_lines(
        _explain_over_views(
            "CREATE VIEW per_k AS SELECT k, window_time AS rt, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE T, "
            "DESCRIPTOR(ts), INTERVAL '10' MINUTES)) GROUP BY k, window_start, window_end, window_time;\n",
            "SELECT window_start, window_end, SUM(n) AS total FROM TABLE(TUMBLE(TABLE per_k, DESCRIPTOR(rt), INTERVAL "
            "'1' HOUR)) GROUP BY window_start, window_end",
        )
    )
    aggregates = [line for line in lines if line.startswith("WindowAggregate(")]
    assert len(aggregates) == 2, lines
    assert aggregates[0].startswith("WindowAggregate(window=[TUMBLE(time_col=[rt], size=[1 h])]"), lines


def test_a_window_top_n_and_a_window_aggregate_over_a_window_aggregates_windows_keep_its_windows():
    top = _explain_over_views(
        _VIEWS,
        "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rn "
        "FROM per_k) WHERE rn <= 3",
    )
    assert any(line.startswith("WindowRank(window=[TUMBLE(time_col=[ts], size=[10 min])]") for line in _node_lines(top))
    cascaded = _explain_over_views(
        _VIEWS, "SELECT window_start, window_end, SUM(n) AS n FROM per_k GROUP BY window_start, window_end"
    )
    aggregate = next(line for line in _node_lines(cascaded) if "Aggregate(" in line)
    assert aggregate.startswith("WindowAggregate("), cascaded


def test_an_interval_joins_rowtimes_stay_rowtimes_and_it_holds_the_watermark_back():
    from streamjoin.planner.plan import IntervalJoin, WindowAggregate, walk

    script = plan_script(
        DDL + "CREATE VIEW j AS SELECT a.ts FROM T a JOIN T b ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '2' MINUTE "
        "AND a.ts + INTERVAL '5' MINUTE;\nSELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE j, "
        "DESCRIPTOR(ts), INTERVAL '10' MINUTES)) GROUP BY window_start, window_end;"
    )
    nodes = list(walk(script.statements[0].sink))
    join = next(n for n in nodes if isinstance(n, IntervalJoin))
    assert join.field(join.left_time).is_rowtime and join.field(join.right_name(join.right_time)).is_rowtime
    window = next(n for n in nodes if isinstance(n, WindowAggregate))
    # Flink's TimeIntervalJoin.getMaxOutputDelay: max(leftRelativeSize, rightRelativeSize) = max(5, 2) minutes.
    assert window.input_watermark_delay_ms == 5 * 60_000
    assert join.input_watermark_delay_ms == 0


def test_a_regular_joins_output_has_no_rowtime_for_a_window_table_function():
    message = refused(
        "CREATE VIEW j AS SELECT a.ts FROM T a JOIN T b ON a.k = b.k;\n"
        "SELECT * FROM TABLE(TUMBLE(TABLE j, DESCRIPTOR(ts), INTERVAL '10' MINUTES))"
    )
    assert "requires the timecol is a time attribute type" in message
