"""The per-day backfill's margins, derived per operator from the plan; plans that need a full rebuild are refused."""

import datetime as dt
import re

import pytest

from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner import plan_script
from streamjoin.planner.backfill_margins import SourceWindow, backfill_plan

DAY = 86_400_000

DDL = """CREATE TABLE Orders (id INT, cur STRING, amount INT, ts TIMESTAMP(3), other_ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' HOUR) WITH ('connector' = 'values');
CREATE TABLE Ships (id INT, n INT, ship_ts TIMESTAMP(3), WATERMARK FOR ship_ts AS ship_ts) WITH ('connector' = 'values');
CREATE TABLE Rates (cur STRING, rate INT, rt TIMESTAMP(3), WATERMARK FOR rt AS rt,
  PRIMARY KEY (cur) NOT ENFORCED) WITH ('connector' = 'values', 'changelog-mode' = 'I,UB,UA,D');
"""  # noqa: E501


def plan(sink_columns: str, query: str, partition: str = "PARTITIONED BY (d) "):
    """The backfill plan of ``INSERT INTO out query``; ``out`` has ``sink_columns`` then ``d DATE`` (its day column)."""
    columns, _, key = sink_columns.partition(", PRIMARY KEY")
    key = f", PRIMARY KEY{key}" if key else ""
    sql = (
        DDL + f"CREATE TABLE out ({columns}, d DATE{key}) {partition}WITH ('connector' = 'delta');\n"
        f"INSERT INTO out {query};"
    )
    return backfill_plan(plan_script(sql, "pipelines/day.sql").inserts[0])


def windows(result) -> dict[str, tuple]:
    return {name: (w.before_ms, w.after_ms) for name, w in result.windows.items()}


def refused(sink_columns: str, query: str, kind=UnsupportedPlanError, partition: str = "PARTITIONED BY (d) ") -> str:
    with pytest.raises(kind) as info:
        plan(sink_columns, query, partition)
    message = str(info.value)
    assert type(info.value) is kind, message
    assert re.match(r"^pipelines/day\.sql:\d+:\d+: .*pipeline 'out' cannot be backfilled per day", message), message
    return message


def test_a_projection_of_the_rowtime_reads_just_the_days():
    result = plan("id INT, amount INT", "SELECT id, amount, CAST(ts AS DATE) FROM Orders WHERE amount > 0")
    assert result.day_column == "d"
    assert result.windows == {"Orders": SourceWindow("Orders", "ts", 0, 0, 3_600_000)}


def test_interval_join_partitioned_by_the_left_time_reads_the_right_side_shifted_by_the_bounds():
    result = plan(
        "id INT, n INT",
        "SELECT o.id, s.n, CAST(o.ts AS DATE) FROM Orders o LEFT JOIN Ships s ON o.id = s.id "
        "AND s.ship_ts BETWEEN o.ts - INTERVAL '1' HOUR AND o.ts + INTERVAL '2' DAY",
    )
    assert windows(result) == {"Orders": (0, 0), "Ships": (3_600_000, 2 * DAY)}


def test_interval_join_partitioned_by_the_right_time_reads_the_left_side_shifted_back():
    result = plan(
        "id INT, n INT",
        "SELECT o.id, s.n, CAST(s.ship_ts AS DATE) FROM Orders o JOIN Ships s ON o.id = s.id "
        "AND s.ship_ts BETWEEN o.ts - INTERVAL '1' HOUR AND o.ts + INTERVAL '2' DAY",
    )
    assert windows(result) == {"Orders": (2 * DAY, 3_600_000), "Ships": (0, 0)}


def test_outer_interval_join_partitioned_by_its_padded_side_is_refused():
    message = refused(
        "id INT, n INT",
        "SELECT o.id, s.n, CAST(s.ship_ts AS DATE) FROM Orders o LEFT JOIN Ships s "
        "ON o.id = s.id AND s.ship_ts BETWEEN o.ts AND o.ts + INTERVAL '2' DAY",
    )
    assert "IntervalJoin" in message and "null-pads" in message and "[rule: backfill-bounded-time]" in message


def test_temporal_join_reads_the_versioned_table_from_its_first_record():
    result = plan(
        "id INT, rate INT",
        "SELECT o.id, r.rate, CAST(o.ts AS DATE) FROM Orders o "
        "LEFT JOIN Rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur",
    )
    assert windows(result) == {"Orders": (0, 0), "Rates": (None, 0)}
    start, end = result.windows["Rates"].rowtimes(dt.date(2024, 3, 1), dt.date(2024, 3, 3))
    assert (start, end) == (None, dt.datetime(2024, 3, 4))


def test_over_range_reads_its_frame_before_the_days():
    result = plan(
        "id INT, m INT",
        "SELECT id, MAX(amount) OVER (PARTITION BY cur ORDER BY ts RANGE BETWEEN "
        "INTERVAL '7' DAY PRECEDING AND CURRENT ROW), CAST(ts AS DATE) FROM Orders",
    )
    assert windows(result) == {"Orders": (7 * DAY, 0)}
    assert result.windows["Orders"].rowtimes(dt.date(2024, 3, 8), dt.date(2024, 3, 8)) == (
        dt.datetime(2024, 3, 1),
        dt.datetime(2024, 3, 9),
    )


def test_union_all_of_one_table_reads_the_widest_window_once():
    result = plan(
        "id INT, m INT",
        "SELECT id, m, CAST(ts AS DATE) FROM ("
        "SELECT id, MAX(amount) OVER (PARTITION BY cur ORDER BY ts RANGE BETWEEN INTERVAL '1' DAY PRECEDING "
        "AND CURRENT ROW) AS m, ts FROM Orders UNION ALL SELECT id, amount AS m, ts FROM Orders)",
    )
    assert windows(result) == {"Orders": (DAY, 0)}


@pytest.mark.parametrize(
    "query, operator, why",
    [
        ("SELECT o.id, s.n, CAST(o.ts AS DATE) FROM Orders o JOIN Ships s ON o.id = s.id", "Join", "regular join"),
        (
            (
                "SELECT id, MAX(amount) OVER (PARTITION BY cur ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW), "
                "CAST(ts AS DATE) FROM Orders"
            ),
            "OverAggregate",
            "ROWS",
        ),
        (
            (
                "SELECT id, MAX(amount) OVER (PARTITION BY cur ORDER BY ts RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW), "  # noqa: E501
                "CAST(ts AS DATE) FROM Orders"
            ),
            "OverAggregate",
            "UNBOUNDED",
        ),
        (
            (
                "SELECT id, amount, CAST(ts AS DATE) FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY ts DESC) AS rn "  # noqa: E501
                "FROM Orders) WHERE rn = 1"
            ),
            "Deduplicate",
            "deduplication",
        ),
    ],
)
def test_operators_over_unbounded_time_are_refused(query, operator, why):
    message = refused("id INT, m INT, PRIMARY KEY (id, d) NOT ENFORCED", query)
    assert f"operator {operator}(" in message and why in message and "[rule: backfill-bounded-time]" in message, message


def test_a_group_aggregate_is_refused():
    message = refused(
        "cur STRING, n BIGINT, PRIMARY KEY (cur, d) NOT ENFORCED",
        "SELECT cur, COUNT(*), CAST(MAX(ts) AS DATE) FROM Orders GROUP BY cur",
    )
    assert "GroupAggregate" in message and "[rule: backfill-bounded-time]" in message, message


def test_the_day_column_must_be_the_day_of_a_source_rowtime():
    assert "[rule: backfill-day-column]" in refused(
        "id INT, amount INT", "SELECT id, amount, CAST(other_ts AS DATE) FROM Orders"
    )
    assert "CAST(<rowtime> AS DATE)" in refused("id INT, amount INT", "SELECT id, amount, CURRENT_DATE FROM Orders")


def test_the_sink_must_be_partitioned_by_one_date_column():
    message = refused(
        "id INT, amount INT", "SELECT id, amount, CAST(ts AS DATE) FROM Orders", ValidationError, partition=""
    )
    assert "PARTITIONED BY one DATE column" in message and "[rule: backfill-day-column]" in message
    with pytest.raises(
        ValidationError, match=r"PARTITIONED BY column 'x' is not a physical column .*\[rule: partition-columns\]"
    ):
        plan("id INT", "SELECT id, CAST(ts AS DATE) FROM Orders", partition="PARTITIONED BY (x) ")


def test_the_shipped_fast_pipeline_reads_thirty_days_of_shipments_after_the_days():
    from streamjoin.config import PROJECT_ROOT
    from streamjoin.planner import load_script

    result = backfill_plan(load_script(PROJECT_ROOT / "sql" / "orders_shipped_fast.sql").inserts[0])
    assert result.day_column == "o_orderday"
    assert windows(result) == {"order_events": (0, 0), "shipments": (0, 30 * DAY)}
