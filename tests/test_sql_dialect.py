"""The Flink dialect: round-trip identities (as sqlglot's own dialect tests), intervals, statements of a file."""

import pytest
import sqlglot
from sqlglot import exp

from streamjoin.errors import ValidationError
from streamjoin.planner.dialect import Explain, Flink, interval_ms
from streamjoin.planner.script import SqlSource, parse_sql


def validate_identity(sql: str, write_sql: str | None = None) -> exp.Expr:
    """Parse ``sql`` with the Flink dialect and check it prints back as ``write_sql`` (default: itself)."""
    expression = sqlglot.parse_one(sql, read=Flink)
    assert expression.sql(dialect=Flink) == (write_sql or sql)
    return expression


@pytest.mark.parametrize(
    "sql",
    [
        (
            "CREATE TABLE orders (o_orderkey BIGINT, o_totalprice DECIMAL(15, 2), o_ordertime TIMESTAMP(3), "
            "WATERMARK FOR o_ordertime AS o_ordertime - INTERVAL '1' DAY, PRIMARY KEY (o_orderkey) NOT ENFORCED) "
            "WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', "
            "'format' = 'debezium-json', 'scan.startup.mode' = 'earliest-offset')"
        ),
        (
            "CREATE TABLE t (s STRING, v VARCHAR(20), l TIMESTAMP_LTZ(3), pt AS PROCTIME(), "
            "WATERMARK FOR l AS l) WITH ('connector' = 'values')"
        ),
        "CREATE TABLE t (a INT NOT NULL, b BOOLEAN, c DATE, d DOUBLE, e BYTES) WITH ('connector' = 'delta', 'path' = '/x')",  # noqa: E501
        "CREATE TEMPORARY VIEW v AS SELECT a, b FROM t WHERE a > 1",
        "CREATE VIEW v AS SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM t) WHERE rn = 1",  # noqa: E501
        "INSERT INTO sink SELECT a, COUNT(*) AS n FROM t GROUP BY a",
        "SELECT o.id, r.rate FROM Orders AS o JOIN Rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency",  # noqa: E501
        "SELECT * FROM A AS a LEFT JOIN B AS b ON a.id = b.id AND b.ts BETWEEN a.ts - INTERVAL '10' MINUTE AND a.ts + INTERVAL '5' MINUTE",  # noqa: E501
        "SELECT MAX(price) OVER (PARTITION BY t ORDER BY ts RANGE BETWEEN INTERVAL '2' MINUTE PRECEDING AND CURRENT ROW) FROM i",  # noqa: E501
        "SELECT SUM(p) OVER w FROM i WINDOW w AS (PARTITION BY t ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)",
        "SELECT a FROM A WHERE a NOT IN (SELECT b FROM B)",
        "SELECT a FROM A WHERE NOT EXISTS(SELECT 1 FROM B WHERE a = b)",
        "SELECT `select`, `Mixed Case` FROM `T`",
        "SELECT 'it''s', INTERVAL '1 02:30' DAY TO MINUTE, INTERVAL '0.001' SECOND",
        "EXPLAIN CHANGELOG_MODE SELECT a FROM t",
        "EXPLAIN CHANGELOG_MODE, ESTIMATED_COST INSERT INTO s SELECT a FROM t",
    ],
)
def test_round_trip_identity(sql):
    validate_identity(sql)


def test_round_trip_normalises_spellings():
    validate_identity("EXPLAIN SELECT 1", "EXPLAIN PLAN FOR SELECT 1")
    validate_identity("SELECT TIMESTAMP '2020-01-01 00:00:00'", "SELECT CAST('2020-01-01 00:00:00' AS TIMESTAMP)")


def test_parsed_shapes():
    create = sqlglot.parse_one(
        "CREATE TABLE t (ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND, "
        "PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'kafka')",
        read=Flink,
    )
    items = create.this.expressions
    assert isinstance(items[1].constraints[0].kind, exp.ComputedColumnConstraint)
    assert isinstance(items[2], exp.WatermarkColumnConstraint) and items[2].this.name == "ts"
    assert isinstance(items[3], exp.PrimaryKey)
    version = (
        sqlglot.parse_one("SELECT * FROM o JOIN r FOR SYSTEM_TIME AS OF o.t AS x ON o.k = x.k", read=Flink)
        .args["joins"][0]
        .this
    )
    assert version.args["version"].expression.sql(Flink) == "o.t" and version.alias == "x"
    explain = sqlglot.parse_one("EXPLAIN CHANGELOG_MODE INSERT INTO s SELECT 1", read=Flink)
    assert isinstance(explain, Explain) and isinstance(explain.this, exp.Insert)
    assert [d.name for d in explain.expressions] == ["CHANGELOG_MODE"]


def test_identifiers_are_case_sensitive():
    select = sqlglot.parse_one("SELECT Price, price FROM Items", read=Flink)
    assert [c.name for c in select.expressions] == ["Price", "price"]


@pytest.mark.parametrize(
    "literal, ms",
    [
        ("INTERVAL '10' MINUTE", 600_000),
        ("INTERVAL '2' HOUR", 7_200_000),
        ("INTERVAL '1' DAY", 86_400_000),
        ("INTERVAL '0.001' SECOND", 1),
        ("INTERVAL '-5' SECOND(3)", -5_000),
        ("INTERVAL '1 02:30' DAY TO MINUTE", 95_400_000),
        ("INTERVAL '01:30' HOUR TO MINUTE", 5_400_000),
        ("INTERVAL '1:02.5' MINUTE TO SECOND", 62_500),
    ],
)
def test_interval_literals_in_milliseconds(literal, ms):
    assert interval_ms(sqlglot.parse_one(literal, read=Flink)) == ms


@pytest.mark.parametrize(
    "literal", ["INTERVAL '1' MONTH", "INTERVAL '1.5' MINUTE TO SECOND", "INTERVAL '0.0001' SECOND"]
)
def test_interval_without_millisecond_length_is_refused(literal):
    with pytest.raises(ValidationError):
        interval_ms(sqlglot.parse_one(literal, read=Flink))


def test_a_file_is_several_statements_with_comments():
    text = """-- the source
CREATE TABLE a (x INT) WITH ('connector' = 'values');  -- trailing comment
-- the query
INSERT INTO b SELECT x FROM a;

SELECT x FROM a
"""
    statements = parse_sql(text, SqlSource("f.sql", text))
    assert [type(s).__name__ for s in statements] == ["Create", "Insert", "Select"]


def test_syntax_error_names_file_line_and_column():
    text = "SELECT a FROM t;\nSELECT FROM WHERE"
    with pytest.raises(ValidationError, match=r"^f\.sql:2:13: syntax error: .* near 'WHERE' \[rule: syntax\]$"):
        parse_sql(text, SqlSource("f.sql", text))
