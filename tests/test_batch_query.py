"""``streamjoin.batch`` on small in-memory inputs: the changelog-to-final-table step, each rewrite of the
batch query (temporal join, lookup join, the final watermark), and what it refuses before anything runs.

The changelogs are DataFrames as :mod:`streamjoin.batch.sources` reads them from Kafka; the plans come
from SQL declaring Kafka and Delta tables (nothing is read from a broker here).
"""

import datetime as dt
from decimal import Decimal

import pytest
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from streamjoin.batch import plan_batch, run_batch
from streamjoin.batch.sources import PARTITION_COLUMN, final_table, versions
from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN
from streamjoin.errors import UnsupportedPlanError
from streamjoin.planner import plan_script

KAFKA = "'connector' = 'kafka', 'properties.bootstrap.servers' = 'unused:9092'"

TABLES = f"""
CREATE TABLE orders (
  id BIGINT, currency STRING, amount DECIMAL(10, 2), cust BIGINT, ts TIMESTAMP(3),
  pt AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE
) WITH ({KAFKA}, 'topic' = 'orders', 'format' = 'json');
CREATE TABLE rates (
  currency STRING, rate DECIMAL(10, 4), rate_time TIMESTAMP(3),
  WATERMARK FOR rate_time AS rate_time,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH ({KAFKA}, 'topic' = 'rates', 'format' = 'debezium-json');
CREATE TABLE customers (cust BIGINT, name STRING, PRIMARY KEY (cust) NOT ENFORCED) WITH ('connector' = 'delta', 'path' = '/unused');
CREATE TABLE accounts (id BIGINT, owner STRING, PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'accounts', 'key.format' = 'json', 'value.format' = 'json',
        'properties.bootstrap.servers' = 'unused:9092');
CREATE TABLE events (k STRING, v INT) WITH ({KAFKA}, 'topic' = 'events', 'format' = 'json', 'json.rowkind-field' = 'op');
"""  # noqa: E501


def t(minute: int) -> dt.datetime:
    return dt.datetime(2024, 1, 1, 10, minute)


def with_order(schema):
    """``schema`` + the changelog's ``_rowkind``, ``_partition``, ``_seq``."""
    return StructType(
        [
            *schema.fields,
            StructField(ROWKIND_COLUMN, StringType()),
            StructField(PARTITION_COLUMN, IntegerType()),
            StructField(SEQ_COLUMN, LongType()),
        ]
    )


def changelog(spark, script, table, changes):
    """A changelog DataFrame of ``table``: ``changes`` are (RowKind, values) in partition 0, in order."""
    rows = [(*values, kind, 0, i) for i, (kind, values) in enumerate(changes)]
    return spark.createDataFrame(rows, with_order(script.catalog.tables[table].physical_schema))


def pipeline(sink_sql, query):
    script = plan_script(TABLES + sink_sql + query)
    return script, script.inserts[0]


def run(spark, script, statement, changelogs, lookups=None, *, ended=False):
    plan = plan_batch(statement, script.catalog, statement.sink_table.name, ended=ended)
    frames = {name: changelog(spark, script, name, changelogs.get(name, [])) for name in plan.sources}
    return run_batch(spark, plan, frames, lookups or {})


def rows(df):
    return sorted(tuple(r) for r in df.collect())


# --- changelog → final table -------------------------------------------------------------------------


def test_final_table_applies_updates_and_deletes_per_primary_key_in_offset_order(spark):
    script = plan_script(TABLES)
    changes = [
        ("+I", ("EUR", Decimal(1), t(0))),
        ("+I", ("USD", Decimal("1.1"), t(0))),
        ("-U", ("USD", Decimal("1.1"), t(0))),
        ("+U", ("USD", Decimal("1.2"), t(5))),  # an update: the after-image stays
        ("+I", ("GBP", Decimal("0.9"), t(1))),
        ("-D", ("GBP", Decimal("0.9"), t(1))),  # a delete: the key is gone
        ("+I", ("JPY", Decimal(150), t(2))),
        ("-D", ("JPY", Decimal(150), t(2))),
        ("+I", ("JPY", Decimal(151), t(3))),  # inserted again after its delete
    ]
    table = final_table(changelog(spark, script, "rates", changes), script.catalog.tables["rates"])
    assert table.columns == ["currency", "rate", "rate_time"]
    assert rows(table) == [
        ("EUR", Decimal("1.0000"), t(0)),
        ("JPY", Decimal("151.0000"), t(3)),
        ("USD", Decimal("1.2000"), t(5)),
    ]


def test_final_table_of_an_upsert_source_keeps_the_last_upsert_and_drops_tombstoned_keys(spark):
    script = plan_script(TABLES)
    changes = [
        ("+I", (1, "ann")),
        ("+I", (2, "bob")),
        ("+I", (1, "ann")),  # a duplicate upsert
        ("+I", (3, "cy")),
        ("-D", (3, None)),  # a tombstone: only the key is known
        ("+I", (2, "bea")),
        ("-D", (4, None)),  # a tombstone of a key never there
    ]
    table = final_table(changelog(spark, script, "accounts", changes), script.catalog.tables["accounts"])
    assert rows(table) == [(1, "ann"), (2, "bea")]


def test_final_table_orders_by_partition_then_sequence_not_by_arrival_in_the_frame(spark):
    script = plan_script(TABLES)
    schema = with_order(script.catalog.tables["accounts"].physical_schema)
    frame = spark.createDataFrame([(1, "late", "+I", 0, 7), (1, "early", "+I", 0, 3)], schema)
    assert rows(final_table(frame, script.catalog.tables["accounts"])) == [(1, "late")]


def test_final_table_without_a_primary_key_is_a_multiset(spark):
    script = plan_script(TABLES)
    changes = [
        ("+I", ("a", 1)),
        ("+I", ("a", 1)),
        ("+I", ("b", 2)),
        ("-D", ("a", 1)),
        ("-U", ("b", 2)),
        ("+U", ("b", 3)),
        ("-D", ("c", 9)),
    ]
    table = final_table(changelog(spark, script, "events", changes), script.catalog.tables["events"])
    assert rows(table) == [("a", 1), ("b", 3)]


def test_final_table_of_an_insert_only_source_keeps_every_row(spark):
    script = plan_script(TABLES)
    changes = [("+I", (1, "EUR", Decimal(5), 7, t(0)))] * 2
    assert final_table(changelog(spark, script, "orders", changes), script.catalog.tables["orders"]).count() == 2


def test_versions_drop_update_before_and_mark_deletes_with_their_validity(spark):
    script = plan_script(TABLES)
    changes = [
        ("+I", ("USD", Decimal("1.1"), t(0))),
        ("-U", ("USD", Decimal("1.1"), t(0))),
        ("+U", ("USD", Decimal("1.2"), t(5))),
        ("-D", ("USD", Decimal("1.2"), t(8))),
    ]
    table = versions(changelog(spark, script, "rates", changes), script.catalog.tables["rates"])
    assert rows(table) == [
        ("USD", Decimal("1.1000"), t(0), t(5), False),
        ("USD", Decimal("1.2000"), t(5), t(8), False),
        ("USD", Decimal("1.2000"), t(8), None, True),
    ]


# --- rewrites ------------------------------------------------------------------------------------------

TEMPORAL_SINK = """
CREATE TABLE out (id BIGINT, currency STRING, rate DECIMAL(10, 4), amount_eur DECIMAL(12, 2), PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'delta');
"""  # noqa: E501
TEMPORAL = """
INSERT INTO out
SELECT o.id, o.currency, r.rate, CAST(o.amount / r.rate AS DECIMAL(12, 2))
FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency;
"""
RATES = [
    ("+I", ("USD", Decimal(2), t(0))),
    ("-U", ("USD", Decimal(2), t(0))),
    ("+U", ("USD", Decimal(4), t(10))),
    ("+I", ("GBP", Decimal(1), t(0))),
    ("-D", ("GBP", Decimal(1), t(6))),
    ("+I", ("CHF", Decimal(1), t(30))),
]
ORDERS = [
    ("+I", (1, "USD", Decimal(8), 7, t(5))),  # the version of 10:00
    ("+I", (2, "USD", Decimal(8), 7, t(10))),  # at the version time: that version
    ("+I", (3, "USD", Decimal(8), 7, t(20))),  # the newest version
    ("+I", (4, "GBP", Decimal(8), 7, t(5))),  # before the delete
    ("+I", (5, "GBP", Decimal(8), 7, t(7))),  # after the delete: no version
    ("+I", (6, "JPY", Decimal(8), 7, t(5))),  # no version at all
    ("+I", (7, "CHF", Decimal(8), 7, t(29))),  # before the first version
    ("+I", (8, "USD", Decimal(8), 7, t(50))),  # beyond the final watermark (orders' 10:59 - 1 min)
    ("+I", (9, "USD", Decimal(8), 7, t(59))),
]


def test_temporal_join_takes_the_version_valid_at_the_probe_time(spark):
    script, statement = pipeline(TEMPORAL_SINK, TEMPORAL)
    result = run(spark, script, statement, {"orders": ORDERS, "rates": RATES}, ended=True)
    assert result.columns == ["id", "currency", "rate", "amount_eur"]
    assert rows(result) == [
        (1, "USD", Decimal("2.0000"), Decimal("4.00")),
        (2, "USD", Decimal("4.0000"), Decimal("2.00")),
        (3, "USD", Decimal("4.0000"), Decimal("2.00")),
        (4, "GBP", Decimal("1.0000"), Decimal("8.00")),
        (5, "GBP", None, None),
        (6, "JPY", None, None),
        (7, "CHF", None, None),
        (8, "USD", Decimal("4.0000"), Decimal("2.00")),
        (9, "USD", Decimal("4.0000"), Decimal("2.00")),
    ]


def test_temporal_join_emits_only_probe_rows_the_final_watermark_reached(spark):
    # Watermarks: orders 10:59 - 1 min = 10:58, rates 10:30 (delay 0): the query's is the smaller, 10:30.
    script, statement = pipeline(TEMPORAL_SINK, TEMPORAL)
    result = run(spark, script, statement, {"orders": ORDERS, "rates": RATES})
    assert [r[0] for r in rows(result)] == [1, 2, 3, 4, 5, 6, 7]


def test_lookup_join_reads_the_delta_tables_current_rows(spark):
    script, statement = pipeline(
        "CREATE TABLE named (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'delta');",
        "INSERT INTO named SELECT o.id, c.name FROM orders AS o JOIN customers FOR SYSTEM_TIME AS OF o.pt AS c ON o.cust = c.cust;",  # noqa: E501
    )
    customers = spark.createDataFrame([(7, "ann"), (8, "bob")], "cust BIGINT, name STRING")
    orders = [
        ("+I", (1, "USD", Decimal(8), 7, t(5))),
        ("+I", (2, "USD", Decimal(8), 9, t(6))),
        ("+I", (3, "USD", Decimal(8), 8, t(7))),
    ]
    plan = plan_batch(statement, script.catalog, "named")
    assert set(plan.lookups) == {"customers"} and set(plan.sources) == {"orders"}
    assert rows(run(spark, script, statement, {"orders": orders}, {"customers": customers})) == [(1, "ann"), (3, "bob")]


def test_over_aggregation_and_keep_first_deduplication_wait_for_the_final_watermark(spark):
    script, statement = pipeline(
        "CREATE TABLE maxes (id BIGINT, m DECIMAL(10, 2), PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'delta');",
        "INSERT INTO maxes SELECT id, MAX(amount) OVER (PARTITION BY currency ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM orders;",  # noqa: E501
    )
    orders = [
        ("+I", (i, "USD", Decimal(a), 7, t(m))) for i, a, m in [(1, "5", 0), (2, "3", 1), (3, "1", 2), (4, "9", 9)]
    ]
    # The watermark is 10:09 - 1 min: the row at 10:09 is still waiting.
    assert rows(run(spark, script, statement, {"orders": orders})) == [
        (1, Decimal("5.00")),
        (2, Decimal("5.00")),
        (3, Decimal("3.00")),
    ]
    assert len(rows(run(spark, script, statement, {"orders": orders}, ended=True))) == 4

    script, statement = pipeline(
        "CREATE TABLE firsts (currency STRING, id BIGINT, PRIMARY KEY (currency) NOT ENFORCED) WITH ('connector' = 'delta');",  # noqa: E501
        "INSERT INTO firsts SELECT currency, id FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY ts) AS rn "  # noqa: E501
        "FROM orders) WHERE rn = 1;",
    )
    orders = [
        ("+I", (1, "USD", Decimal(1), 7, t(3))),
        ("+I", (2, "USD", Decimal(1), 7, t(1))),
        ("+I", (3, "EUR", Decimal(1), 7, t(20))),
        ("+I", (4, "GBP", Decimal(1), 7, t(30))),
    ]
    assert rows(run(spark, script, statement, {"orders": orders})) == [("EUR", 3), ("USD", 2)]


def test_left_interval_join_pads_only_rows_whose_window_the_watermark_passed(spark):
    script, statement = pipeline(
        "CREATE TABLE pairs (id BIGINT, other BIGINT, PRIMARY KEY (id, other) NOT ENFORCED) WITH ('connector' = 'delta');"  # noqa: E501
        "CREATE TABLE later (id BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) "
        f"WITH ({KAFKA}, 'topic' = 'later', 'format' = 'json');",
        "INSERT INTO pairs SELECT o.id, COALESCE(l.id, 0) FROM orders AS o LEFT JOIN later AS l "
        "ON o.id = l.id AND l.ts BETWEEN o.ts AND o.ts + INTERVAL '10' MINUTE;",
    )
    orders = [("+I", (i, "USD", Decimal(1), 7, t(m))) for i, m in [(1, 0), (2, 0), (3, 30), (4, 50)]]
    later = [("+I", (1, t(5))), ("+I", (3, t(45))), ("+I", (9, t(59)))]
    # Watermark min(10:50 - 1 min, 10:59) = 10:49: order 2's window (to 10:10) is behind it, order 3's (to 10:40)
    # too, order 4's (to 11:00) not.
    assert rows(run(spark, script, statement, {"orders": orders, "later": later})) == [(1, 1), (2, 0), (3, 0)]
    assert rows(run(spark, script, statement, {"orders": orders, "later": later}, ended=True)) == [
        (1, 1),
        (2, 0),
        (3, 0),
        (4, 0),
    ]


def test_integer_division_is_flinks(spark):
    script, statement = pipeline(
        "CREATE TABLE halves (k STRING, h INT, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'delta');",
        "INSERT INTO halves SELECT k, v / 2 FROM events;",
    )
    assert rows(run(spark, script, statement, {"events": [("+I", ("a", 7)), ("+I", ("b", -7))]})) == [
        ("a", 3),
        ("b", -3),
    ]


def test_timestampdiff_is_flinks(spark):
    # Flink counts months on the dates, one less when the time of day is earlier (also backwards: from
    # 02-01 12:00 to 01-01 00:00 is -2 months), and seconds from the milliseconds, truncated toward zero.
    script, statement = pipeline(
        "CREATE TABLE ages (id BIGINT, months INT, secs INT, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'delta');",  # noqa: E501
        "INSERT INTO ages SELECT id, TIMESTAMPDIFF(MONTH, ts, CAST('2024-01-01 00:00:00' AS TIMESTAMP(3))), "
        "TIMESTAMPDIFF(SECOND, ts, CAST('2024-01-01 00:00:00' AS TIMESTAMP(3))) FROM orders;",
    )
    orders = [
        ("+I", (1, "EUR", Decimal("1.00"), 1, dt.datetime(2024, 2, 1, 12))),
        ("+I", (2, "EUR", Decimal("1.00"), 1, dt.datetime(2023, 12, 31, 23, 59, 58, 500000))),
    ]
    assert rows(run(spark, script, statement, {"orders": orders})) == [(1, -2, -2721600), (2, 0, 1)]


def test_a_tumble_window_aggregate_keeps_the_windows_the_final_watermark_fired(spark):
    script, statement = pipeline(
        "CREATE TABLE sums (currency STRING, ws TIMESTAMP(3), we TIMESTAMP(3), n BIGINT, total DECIMAL(38, 2), "
        "PRIMARY KEY (currency, ws, we) NOT ENFORCED) WITH ('connector' = 'delta');",
        "INSERT INTO sums SELECT currency, window_start, window_end, COUNT(*), SUM(amount) FROM TABLE(TUMBLE("
        "TABLE orders, DESCRIPTOR(ts), INTERVAL '10' MINUTES, INTERVAL '5' MINUTES)) GROUP BY currency, window_start, "
        "window_end;",
    )
    orders = [
        ("+I", (i, c, Decimal(a), 7, t(m))) for i, c, a, m in [(1, "USD", 1, 4), (2, "USD", 2, 5), (3, "EUR", 4, 14)]
    ]
    orders.append(("+I", (4, "USD", Decimal(8), 7, t(15))))
    # Windows [9:55, 10:05), [10:05, 10:15), [10:15, 10:25) (offset 5 minutes); the watermark 10:15 - 1 min fired the
    # first only: the second's end - 1 ms is 10:14:59.999.
    assert rows(run(spark, script, statement, {"orders": orders})) == [
        ("USD", t(0) - dt.timedelta(minutes=5), t(5), 1, Decimal("1.00"))
    ]
    assert len(rows(run(spark, script, statement, {"orders": orders}, ended=True))) == 4


# --- refused before anything runs -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql, construct",
    [
        (
            (
                "CREATE TABLE s (id BIGINT, m DECIMAL(10, 2), PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'delta');"  # noqa: E501
                "INSERT INTO s SELECT id, MAX(amount) OVER (PARTITION BY currency ORDER BY pt ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM orders;"  # noqa: E501
            ),
            "a processing-time OVER aggregation",
        ),
        (
            (
                "CREATE TABLE s (currency STRING, id BIGINT, PRIMARY KEY (currency) NOT ENFORCED) WITH ('connector' = 'delta');"  # noqa: E501
                "INSERT INTO s SELECT currency, id FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY pt DESC) AS rn FROM orders) WHERE rn = 1;"  # noqa: E501
            ),
            "a processing-time deduplication",
        ),
        (
            (
                "CREATE TABLE s (id BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'delta');"
                f"CREATE TABLE tail (id BIGINT) WITH ({KAFKA}, 'topic' = 'tail', 'format' = 'json', 'scan.startup.mode' = 'latest-offset');"  # noqa: E501
                "INSERT INTO s SELECT id FROM tail;"
            ),
            "table 'tail' with 'scan.startup.mode' = 'latest-offset'",
        ),
        (
            (
                "CREATE TABLE s (ws TIMESTAMP(3), we TIMESTAMP(3), n BIGINT) WITH ('connector' = 'delta');"
                "INSERT INTO s SELECT window_start, window_end, COUNT(*) FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), "
                "INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)) GROUP BY window_start, window_end;"
            ),
            "a HOP window table function",
        ),
    ],
)
def test_what_has_no_batch_meaning_is_refused_naming_the_pipeline_and_construct(sql, construct):
    script = plan_script(TABLES + sql)
    statement = script.inserts[0]
    with pytest.raises(UnsupportedPlanError) as raised:
        plan_batch(statement, script.catalog, "s")
    assert f"pipeline 's': the batch query cannot run {construct}" in str(raised.value)
