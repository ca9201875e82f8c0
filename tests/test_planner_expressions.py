"""Expressions are handed to Spark SQL with Flink's meaning; Flink's type rules are checked first."""

import pytest
import sqlglot

from streamjoin.errors import ValidationError
from streamjoin.planner.diagnostics import SqlSource
from streamjoin.planner.dialect import Flink
from streamjoin.planner.expressions import Typer, spark_sql
from streamjoin.planner.types import SqlType

TYPES = {
    "i": SqlType("INT"),
    "b": SqlType("BIGINT"),
    "d": SqlType("DECIMAL", 10, 2),
    "x": SqlType("DOUBLE"),
    "s": SqlType("VARCHAR", 2147483647),
    "t": SqlType("TIMESTAMP", 3, time_attribute="ROWTIME"),
    "ms": SqlType("BIGINT"),
    "t2": SqlType("TIMESTAMP", 3),
    "dt": SqlType("DATE", nullable=False),
}
TYPER = Typer(TYPES, SqlSource("e.sql", ""))


def spark(flink_sql: str) -> str:
    return spark_sql(sqlglot.parse_one(flink_sql, read=Flink), TYPER)


@pytest.mark.parametrize(
    "flink, expected",
    [
        ("i / 2", "CAST(i DIV 2 AS INT)"),  # Flink divides integers as integers
        ("b / i", "CAST(b DIV i AS BIGINT)"),
        ("x / i", "x / i"),
        ("d / 2", "d / 2"),
        ("PROCTIME()", "CURRENT_TIMESTAMP()"),
        ("TO_TIMESTAMP_LTZ(ms, 3)", "TIMESTAMP_MILLIS(ms)"),
        ("t - INTERVAL '10' MINUTE", "t - INTERVAL '10' MINUTE"),
        ("CAST(i AS STRING) || s", "CAST(i AS STRING) || s"),
        ("CASE WHEN i > 1 THEN 'a' ELSE 'b' END", "CASE WHEN i > 1 THEN 'a' ELSE 'b' END"),
        # operands are rewritten too: both divisions are Flink's integer divisions
        ("i / 2 / 3", "CAST(CAST(i DIV 2 AS INT) DIV 3 AS INT)"),
        ("TO_TIMESTAMP_LTZ(ms / 1000, 0)", "TIMESTAMP_SECONDS(CAST(ms DIV 1000 AS BIGINT))"),
        # whole seconds from the milliseconds, truncated toward zero, as Flink's INT (the low 32 bits)
        (
            "TIMESTAMPDIFF(SECOND, t, t2)",
            (
                "CAST(PMOD((UNIX_MILLIS(CAST(t2 AS TIMESTAMP)) - UNIX_MILLIS(CAST(t AS TIMESTAMP))) "
                "DIV 1000 + 2147483648, 4294967296) - 2147483648 AS INT)"
            ),
        ),
        # Flink's REGEXP_EXTRACT: group 0 by default, the group kept, NULL without a match or past the groups
        ("REGEXP_EXTRACT(s, '[0-9]+')", "CASE WHEN s RLIKE '[0-9]+' THEN REGEXP_EXTRACT(s, '[0-9]+', 0) END"),
        ("REGEXP_EXTRACT(s, '(a)(b)', 2)", "CASE WHEN s RLIKE '(a)(b)' THEN REGEXP_EXTRACT(s, '(a)(b)', 2) END"),
        ("REGEXP_EXTRACT(s, '(a)(b)', 3)", "CAST(NULL AS STRING)"),
        ("REGEXP_EXTRACT(s, '(a)', -1)", "CAST(NULL AS STRING)"),
    ],
)
def test_spark_sql_keeps_flinks_meaning(flink, expected):
    assert spark(flink) == expected


@pytest.mark.parametrize(
    "unit", ["SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR", "MILLISECOND", "SQL_TSI_DAY"]
)
def test_timestampdiff_reads_its_unit_as_a_unit(unit):
    e = sqlglot.parse_one(f"TIMESTAMPDIFF({unit.lower()}, t, t2)", read=Flink)
    assert [c.name for c in e.find_all(sqlglot.exp.Column)] == ["t2", "t"]  # the unit is no column
    assert e.sql(Flink) == f"TIMESTAMPDIFF({unit}, t, t2)"
    assert str(TYPER.type_of(e)) == "INT"  # nullable: its time points are
    text = spark(f"TIMESTAMPDIFF({unit}, t, t2)")
    assert text.startswith("CAST(") and text.endswith(" AS INT)") and "TIMESTAMPDIFF" not in text  # not Spark's own


@pytest.mark.parametrize(
    "flink, expected",
    [
        ("i + b", "BIGINT"),
        ("i * d", "DECIMAL(10, 2)"),
        ("d * d", "DECIMAL(20, 4)"),
        ("i + x", "DOUBLE"),
        ("t", "TIMESTAMP(3) *ROWTIME*"),
        ("t + INTERVAL '1' SECOND", "TIMESTAMP(3)"),
        ("CAST(t AS TIMESTAMP(3))", "TIMESTAMP(3)"),
        ("COALESCE(i, b)", "BIGINT"),
        ("i = b", "BOOLEAN"),
        ("1.50", "DECIMAL(3, 2) NOT NULL"),
        ("'x'", "STRING NOT NULL"),
        ("TIMESTAMPDIFF(DAY, t, t2)", "INT"),
        ("TIMESTAMPDIFF(DAY, dt, dt)", "INT NOT NULL"),
    ],
)
def test_types_follow_flinks_rules(flink, expected):
    assert str(TYPER.type_of(sqlglot.parse_one(flink, read=Flink))) == expected


@pytest.mark.parametrize(
    "flink",
    [
        "i = s",
        "s BETWEEN 1 AND 2",
        "i + s",
        "s LIKE i",
        "i IN (1, 'a')",
        "COALESCE(i, s)",
        "NOT i",
        "TIMESTAMPDIFF(DAY, s, t)",
    ],
)
def test_incompatible_types_are_refused(flink):
    with pytest.raises(ValidationError, match=r"\[rule: type-mismatch\]"):
        TYPER.type_of(sqlglot.parse_one(flink, read=Flink))
