"""Invalid and unsupported SQL is refused before anything runs, naming file, line, column, table/column and rule."""

import re

import pytest

from streamjoin.errors import SinkError, UnsupportedPlanError, ValidationError
from streamjoin.planner import plan_script

DDL = """CREATE TABLE Orders (
  order_id INT,
  currency STRING,
  amount INT,
  ts TIMESTAMP(3),
  plain_ts TIMESTAMP(3),
  pt AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'values');
CREATE TABLE Ships (order_id INT, ship_ts TIMESTAMP(3), WATERMARK FOR ship_ts AS ship_ts) WITH ('connector' = 'values');
CREATE TABLE Rates (currency STRING, rate INT, update_time TIMESTAMP(3), WATERMARK FOR update_time AS update_time,
  PRIMARY KEY (currency) NOT ENFORCED) WITH ('connector' = 'values', 'changelog-mode' = 'I,UB,UA,D');
CREATE TABLE RatesNoKey (currency STRING, rate INT, update_time TIMESTAMP(3), WATERMARK FOR update_time AS update_time)
  WITH ('connector' = 'values');
CREATE TABLE RatesNoTime (currency STRING, rate INT, PRIMARY KEY (currency) NOT ENFORCED) WITH ('connector' = 'values');
CREATE TABLE Changes (id INT, v INT) WITH ('connector' = 'values', 'changelog-mode' = 'I,UB,UA,D');
CREATE TABLE TimedChanges (id INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'values', 'changelog-mode' = 'I,UB,UA,D');
CREATE TABLE counts (currency STRING, n BIGINT) WITH ('connector' = 'delta');
CREATE TABLE sink2 (currency STRING, n BIGINT, PRIMARY KEY (currency) NOT ENFORCED) WITH ('connector' = 'delta');
"""  # noqa: E501
DDL_LINES = DDL.count("\n")


def refused(sql: str, kind=ValidationError) -> str:
    """The message of the error planning ``DDL + sql`` raises; checks its class and its ``file:line:col:`` prefix."""
    with pytest.raises(kind) as info:
        plan_script(DDL + sql, "pipelines/bad.sql")
    message = str(info.value)
    assert type(info.value) is kind, message
    assert re.match(r"^pipelines/bad\.sql:\d+:\d+: ", message), message
    return message


def where(message: str) -> tuple[int, int]:
    line, col = re.match(r"^pipelines/bad\.sql:(\d+):(\d+): ", message).groups()
    return int(line) - DDL_LINES, int(col)


def test_unknown_table():
    message = refused("SELECT * FROM Order_s;")
    assert "unknown table or view 'Order_s'" in message and "declared: Orders, Ships" in message
    assert message.endswith("[rule: table-exists]") and where(message) == (1, 15)


def test_unknown_column_lists_the_columns_in_scope():
    message = refused("SELECT order_id,\n  amont FROM Orders;")
    assert "unknown column 'amont' in the FROM clause; columns: order_id, currency, amount" in message
    assert message.endswith("[rule: column-exists]") and where(message) == (2, 3)


def test_unknown_qualified_column_and_alias():
    message = refused("SELECT o.order_id, s.shipped FROM Orders o JOIN Ships s ON o.order_id = s.order_id;")
    assert "unknown column 'shipped' in table 's'; columns: order_id, ship_ts" in message and where(message) == (1, 20)
    message = refused("SELECT x.order_id FROM Orders o;")
    assert "unknown table or alias 'x'" in message and message.endswith("[rule: table-exists]")


def test_ambiguous_column():
    message = refused("SELECT order_id FROM Orders o JOIN Ships s ON o.order_id = s.order_id;")
    assert "column 'order_id' is ambiguous: it is in o, s" in message and message.endswith("[rule: column-unambiguous]")


def test_type_mismatch_in_a_comparison():
    message = refused("SELECT order_id FROM Orders WHERE currency = amount;")
    assert "type mismatch" in message and "cannot compare STRING with INT" in message
    assert message.endswith("[rule: type-mismatch]") and where(message) == (1, 35)


def test_where_must_be_boolean():
    message = refused("SELECT order_id FROM Orders WHERE amount + 1;")
    assert "WHERE condition '`amount` + 1' is INT, not BOOLEAN" in message and message.endswith("[rule: type-mismatch]")


def test_interval_join_bound_on_a_timestamp_without_watermark():
    message = refused(
        "SELECT o.order_id FROM Orders o JOIN Ships s ON o.order_id = s.order_id\n"
        "  AND s.ship_ts BETWEEN o.plain_ts AND o.plain_ts + INTERVAL '1' HOUR;"
    )
    assert "'plain_ts' has no watermark: declare WATERMARK FOR it" in message
    assert message.endswith("[rule: interval-join-watermark]") and where(message) == (2, 7)


def test_regular_join_condition_on_a_time_attribute():
    message = refused("SELECT o.order_id FROM Orders o JOIN Ships s ON o.order_id = s.order_id AND s.ship_ts > o.ts;")
    assert "uses time attribute" in message and "bound both sides' rowtimes" in message
    assert message.endswith("[rule: regular-join-time-attributes]")


def test_temporal_join_needs_a_primary_key():
    message = refused(
        "SELECT o.order_id FROM Orders o JOIN RatesNoKey FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency;"
    )
    assert "versioned table 'RatesNoKey'" in message and "needs a PRIMARY KEY" in message
    assert message.endswith("[rule: temporal-join-primary-key]") and where(message) == (1, 38)


def test_temporal_join_needs_a_rowtime_on_the_versioned_table():
    message = refused(
        "SELECT o.order_id FROM Orders o JOIN RatesNoTime FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency;"
    )
    assert "versioned table 'RatesNoTime'" in message and "declare WATERMARK FOR" in message
    assert message.endswith("[rule: temporal-join-watermark]")


def test_temporal_join_as_of_a_column_without_watermark():
    message = refused(
        "SELECT o.order_id FROM Orders o JOIN Rates FOR SYSTEM_TIME AS OF o.plain_ts AS r ON o.currency = r.currency;"
    )
    assert "FOR SYSTEM_TIME AS OF 'o.plain_ts'" in message and "not a time attribute" in message
    assert message.endswith("[rule: temporal-join-watermark]") and where(message) == (1, 66)


def test_temporal_join_must_equate_the_primary_key():
    message = refused(
        "SELECT o.order_id FROM Orders o JOIN Rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.amount = r.rate;"
    )
    assert "primary key [currency] of 'Rates'" in message and "it equates [rate]" in message
    assert message.endswith("[rule: temporal-join-primary-key]")


def test_over_ordered_by_a_non_time_column():
    message = refused(
        "SELECT order_id, SUM(amount) OVER (PARTITION BY currency ORDER BY amount\n"
        "  ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s FROM Orders;"
    )
    assert "OVER window ORDER BY 'amount' (INT)" in message and "must be ordered by a time attribute" in message
    assert message.endswith("[rule: over-order-by-time]") and where(message) == (1, 67)


def test_over_windows_must_be_the_same():
    message = refused(
        "SELECT SUM(amount) OVER (ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW),\n"
        "  MAX(amount) OVER (ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) FROM Orders;",
        UnsupportedPlanError,
    )
    assert "the same window" in message and message.endswith("[rule: over-same-window]") and where(message) == (2, 3)


def test_over_with_following_rows_is_unsupported():
    message = refused(
        "SELECT SUM(amount) OVER (ORDER BY ts ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING) FROM Orders;",
        UnsupportedPlanError,
    )
    assert "only … PRECEDING AND CURRENT ROW" in message and message.endswith("[rule: over-frame]")


def test_row_number_needs_a_rank_end_and_rank_functions_other_than_row_number_are_refused():
    for where_clause in ("", "\nWHERE rn > 2"):
        message = refused(
            "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY ts DESC) AS rn FROM Orders)"
            f"{where_clause};",
            UnsupportedPlanError,
        )
        assert "Rank end is not specified" in message and message.endswith("[rule: rank-filter]")
        assert where(message) == (1, 26)
    message = refused(
        "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY ts DESC) AS rn FROM Orders)\n"
        "WHERE rn > 3 AND rn <= 2;",
        UnsupportedPlanError,
    )
    assert "leaves no rank: rankStart=4 > rankEnd=2" in message and where(message) == (2, 18)
    for function in ("RANK", "DENSE_RANK"):
        message = refused(
            f"SELECT * FROM (SELECT *, {function}() OVER (PARTITION BY currency ORDER BY amount) AS r FROM Orders)\n"
            "WHERE r <= 3;",
            UnsupportedPlanError,
        )
        assert f"{function}() on streaming table is not supported currently" in message
        assert message.endswith("[rule: rank-function]") and where(message) == (1, 26)


def test_primary_key_must_be_not_enforced():
    message = refused("CREATE TABLE t (id INT, PRIMARY KEY (id)) WITH ('connector' = 'values');")
    assert "PRIMARY KEY of table 't' must be declared NOT ENFORCED" in message
    assert message.endswith("[rule: primary-key-not-enforced]") and where(message) == (1, 38)  # the key column


def test_watermark_on_an_unknown_or_non_timestamp_column():
    message = refused("CREATE TABLE t (id INT, ts TIMESTAMP(3), WATERMARK FOR tz AS tz) WITH ('connector' = 'values');")
    assert "WATERMARK FOR 'tz': table 't' has no such column; columns: id, ts" in message and where(message) == (1, 56)
    message = refused("CREATE TABLE t (id INT, WATERMARK FOR id AS id) WITH ('connector' = 'values');")
    assert "the rowtime must be TIMESTAMP(p) or TIMESTAMP_LTZ(p) with p <= 3, but it is INT" in message
    assert message.endswith("[rule: watermark-type]")


def test_connector_and_its_options_are_checked():
    message = refused("CREATE TABLE t (id INT) WITH ('connector' = 'filesystem');")
    assert (
        "'connector' must be one of kafka, upsert-kafka, delta, values; got 'filesystem'" in message
        and message.endswith("[rule: table-connector]")
    )
    message = refused("CREATE TABLE t (id INT) WITH ('connector' = 'kafka', 'format' = 'json');")
    assert "connector 'kafka' needs option 'topic'" in message
    message = refused("CREATE TABLE t (id INT) WITH ('connector' = 'kafka', 'topic' = 'x', 'format' = 'avro');")
    assert "format 'avro' is not supported; supported: json, debezium-json" in message and message.endswith(
        "[rule: table-format]"
    )


def test_insert_must_match_the_sink_columns():
    message = refused("INSERT INTO counts SELECT currency FROM Orders;")
    assert "the query has 1 columns (currency), the sink has 2 (currency, n)" in message and message.endswith(
        "[rule: sink-columns]"
    )
    message = refused("INSERT INTO counts SELECT currency, ts FROM Orders;")
    assert "column 'ts' of the query is TIMESTAMP(3) *ROWTIME*, but sink column 'n' is BIGINT" in message
    assert message.endswith("[rule: sink-types]")


def test_updates_into_a_sink_without_primary_key():
    message = refused("INSERT INTO counts\nSELECT currency, COUNT(*) FROM Orders GROUP BY currency;", SinkError)
    assert "table sink 'counts' doesn't support consuming update changes" in message
    assert "GroupAggregate(groupBy=[currency]" in message and where(message) == (1, 13)


def test_ungrouped_column():
    message = refused("SELECT currency, amount FROM Orders GROUP BY currency;")
    assert (
        "column 'amount' is not being grouped" in message
        and message.endswith("[rule: group-by-columns]")
        and where(message) == (1, 18)
    )


@pytest.mark.parametrize(
    "query, name, at",
    [
        ("SELECT CONVERT_TZ(currency, 'UTC', 'Asia/Tokyo') FROM Orders;", "CONVERT_TZ", (1, 8)),
        ("SELECT order_id FROM Orders\nWHERE ts > CURRENT_WATERMARK(ts);", "CURRENT_WATERMARK", (2, 12)),
        ("SELECT STR_TO_MAP(currency) FROM Orders;", "STR_TO_MAP", (1, 8)),
        ("SELECT order_id FROM Orders WHERE currency SIMILAR TO 'E%';", "SIMILAR TO", (1, 35)),
    ],
)
def test_a_flink_built_in_without_a_spark_counterpart_is_refused_before_anything_runs(query, name, at):
    message = refused(query, UnsupportedPlanError)
    assert f"Flink's built-in {name} is not supported" in message and message.endswith("[rule: supported-functions]")
    assert where(message) == at


def test_timestampdiff_takes_a_unit_and_two_time_points():
    message = refused("SELECT TIMESTAMPDIFF(FORTNIGHT, ts, plain_ts) FROM Orders;")
    assert "FORTNIGHT is not a time unit in TIMESTAMPDIFF(timepointunit, timepoint1, timepoint2)" in message
    assert message.endswith("[rule: function-arguments]") and where(message) == (1, 8)
    message = refused(
        "SELECT order_id FROM Orders WHERE TIMESTAMPDIFF(NANOSECOND, ts, plain_ts) > 1;", UnsupportedPlanError
    )
    assert "NANOSECOND is not supported" in message and message.endswith("[rule: supported-functions]")
    message = refused("SELECT TIMESTAMPDIFF('DAY', ts, plain_ts) FROM Orders;")
    assert "its first argument a time unit" in message and message.endswith("[rule: function-arguments]")
    message = refused("SELECT TIMESTAMPDIFF(DAY, currency, ts) FROM Orders;")
    assert "TIMESTAMPDIFF needs a DATE or TIMESTAMP; '`currency`' is STRING" in message and message.endswith(
        "[rule: type-mismatch]"
    )


def test_interval_join_over_an_updating_input_is_unsupported():
    message = refused(
        "SELECT c.id FROM TimedChanges c JOIN Ships s ON c.id = s.order_id "
        "AND s.ship_ts BETWEEN c.ts AND c.ts + INTERVAL '1' HOUR;",
        UnsupportedPlanError,
    )
    assert "IntervalJoin consumes insert-only input, but its left input 'TimedChanges' produces updates" in message
    assert message.endswith("[rule: interval-join-insert-only]")


def test_over_on_an_updating_input_is_unsupported():
    message = refused(
        "SELECT id, SUM(v) OVER (ORDER BY pt) FROM (SELECT id, v, PROCTIME() AS pt FROM Changes);", UnsupportedPlanError
    )
    assert "OverAggregate consumes insert-only input; 'Changes' produces updates" in message
    assert message.endswith("[rule: over-insert-only]")


def test_order_by_and_duplicate_tables():
    message = refused("SELECT * FROM Orders ORDER BY amount;", UnsupportedPlanError)
    assert "ORDER BY is not supported in a streaming query" in message and message.endswith("[rule: supported-clauses]")
    message = refused("CREATE TABLE Orders (x INT) WITH ('connector' = 'values');")
    assert "table or view 'Orders' is already declared" in message and message.endswith("[rule: unique-names]")


def test_unsupported_column_type():
    message = refused("CREATE TABLE t (tags ARRAY<STRING>) WITH ('connector' = 'values');")
    assert "column 'tags' of table 't': data type ARRAY<STRING> is not supported" in message
    assert message.endswith("[rule: column-type]") and where(message) == (1, 17)


def test_scalar_subquery_and_subquery_under_or_are_unsupported():
    message = refused("SELECT order_id FROM Orders WHERE amount > (SELECT MAX(v) FROM Changes);", UnsupportedPlanError)
    assert "subqueries are supported only as IN / EXISTS conditions" in message and where(message) == (1, 52)
    message = refused(
        "SELECT order_id FROM Orders WHERE amount > 1 OR order_id IN (SELECT id FROM Changes);", UnsupportedPlanError
    )
    assert message.endswith("[rule: supported-queries]")


def test_with_refuses_recursion_column_lists_and_names_taken():
    message = refused("WITH RECURSIVE r AS (SELECT order_id FROM Orders) SELECT * FROM r;", UnsupportedPlanError)
    assert "WITH RECURSIVE is not supported" in message and message.endswith("[rule: supported-clauses]")
    message = refused("WITH r (id) AS (SELECT order_id FROM Orders) SELECT * FROM r;", UnsupportedPlanError)
    assert "WITH r (columns) AS … is not supported" in message
    message = refused("WITH Ships AS (SELECT order_id FROM Orders) SELECT * FROM Ships;", UnsupportedPlanError)
    assert "'Ships' is a declared table or view" in message and message.endswith("[rule: unique-names]")
    message = refused("WITH r AS (SELECT order_id FROM Orders), r AS (SELECT order_id FROM Ships) SELECT * FROM r;")
    assert "WITH names 'r' twice" in message


def test_a_common_table_expression_sees_only_those_before_it_and_a_view_none():
    message = refused("WITH a AS (SELECT order_id FROM b), b AS (SELECT order_id FROM Orders) SELECT * FROM a;")
    assert "unknown table or view 'b'" in message and message.endswith("[rule: table-exists]")
    message = refused(
        "CREATE VIEW v AS SELECT order_id FROM c;\nWITH c AS (SELECT order_id FROM Orders) SELECT * FROM v;"
    )
    assert "unknown table or view 'c'" in message and message.endswith("[rule: table-exists]")
