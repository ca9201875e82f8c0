"""canal-json and maxwell-json tables: their SQL options, and a regular join and a group aggregate over them
through a real Kafka broker into Delta upsert tables, with their dead letters."""

import json
from decimal import Decimal

import pytest

from streamjoin.changelog import RowKind
from streamjoin.connectors.kafka_admin import ensure_topics, produce
from streamjoin.errors import ValidationError
from streamjoin.pipeline import Lakehouse, run_pipeline
from streamjoin.planner import plan_script, sql_pipelines

DDL = """
CREATE TABLE orders (
  order_id INT, customer_id INT, amount DECIMAL(10, 2),
  PRIMARY KEY (order_id) NOT ENFORCED
) WITH ('connector' = 'kafka', 'topic' = 'canal_orders', 'format' = 'canal-json',
        'canal-json.database.include' = 'shop', 'canal-json.table.include' = 'orders');
CREATE TABLE customers (
  id INT, name STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH ('connector' = 'kafka', 'topic' = 'maxwell_customers', 'format' = 'maxwell-json');
"""
SINKS = """
CREATE TABLE order_customer (order_id INT, name STRING, amount DECIMAL(10, 2), PRIMARY KEY (order_id) NOT ENFORCED)
  WITH ('connector' = 'delta');
CREATE TABLE customer_totals (customer_id INT, order_count BIGINT, total DECIMAL(38, 2), PRIMARY KEY (customer_id) NOT ENFORCED)
  WITH ('connector' = 'delta');
INSERT INTO order_customer SELECT o.order_id, c.name, o.amount FROM orders o JOIN customers c ON o.customer_id = c.id;
INSERT INTO customer_totals SELECT customer_id, COUNT(*), SUM(amount) FROM orders GROUP BY customer_id;
"""  # noqa: E501


def test_cdc_format_tables_are_changelogs_with_their_options():
    tables = plan_script(DDL).catalog.tables
    assert tables["orders"].source_kinds == tables["customers"].source_kinds == frozenset(RowKind)
    source = tables["orders"].kafka_source()
    assert (source.format, source.database_include, source.table_include) == ("canal-json", "shop", "orders")
    assert tables["customers"].kafka_source().format == "maxwell-json"


@pytest.mark.parametrize(
    "options, message",
    [
        (
            "'format' = 'maxwell-json', 'canal-json.table.include' = 'x'",
            "canal-json.table.include applies to format 'canal-json' only",
        ),
        (
            "'format' = 'json', 'canal-json.database.include' = 'x'",
            "canal-json.database.include applies to format 'canal-json' only",
        ),
        ("'format' = 'canal-json', 'json.rowkind-field' = 'op'", "json.rowkind-field applies to format 'json' only"),
        (
            "'format' = 'canal-json', 'canal-json.table.include' = 'a['",
            "canal-json.table.include 'a[' is not a regular expression",
        ),
        (
            "'format' = 'maxwell-json', 'maxwell-json.database.include' = 'x'",
            "unsupported option 'maxwell-json.database.include'",
        ),
        (
            "'format' = 'canal-json', 'canal-json.ignore-parse-errors' = 'true'",
            "unsupported option 'canal-json.ignore-parse-errors'",
        ),
    ],
)
def test_cdc_format_options_are_checked(options, message):
    with pytest.raises(ValidationError, match="rule: table-") as caught:
        plan_script(f"CREATE TABLE t (id INT) WITH ('connector' = 'kafka', 'topic' = 't', {options});")
    assert message in str(caught.value)


# The database's history: (statement, table, rows, changed columns' old values per row).
OPS = [
    ("INSERT", "orders", [(1, 10, "10.00"), (2, 10, "20.00"), (3, 20, "5.00")], None),
    ("UPDATE", "orders", [(1, 10, "15.00")], [{"amount": "10.00"}]),
    ("INSERT", "orders_archive", [(99, 10, "1.00")], None),  # another table on the topic: the filter skips it
    ("UPDATE", "orders", [(2, 20, "20.00"), (3, 10, "5.00")], [{"customer_id": 10}, {"customer_id": 20}]),
    ("INSERT", "orders", [(4, 30, "1.00"), (5, 20, "2.50")], None),
    ("DELETE", "orders", [(3, 10, "5.00")], None),
]
CUSTOMER_OPS = [
    ("insert", (10, "Ann"), None),
    ("insert", (20, "Bob"), None),
    ("update", (20, "Bobby"), {"name": "Bob"}),
    ("insert", (30, "Cid"), None),
    ("delete", (30, "Cid"), None),
    ("insert", (40, "Dee"), None),
]


def canal_record(kind, table, rows, old):
    data = [{"order_id": o, "customer_id": c, "amount": a} for o, c, a in rows]
    return json.dumps(
        {
            "data": data,
            "old": old,
            "database": "shop",
            "table": table,
            "type": kind,
            "isDdl": False,
            "es": 1700000000000,
            "ts": 1700000000001,
            "pkNames": ["order_id"],
        }
    )


def maxwell_record(kind, row, old):
    message = {
        "database": "shop",
        "table": "customers",
        "type": kind,
        "ts": 1700000000,
        "data": {"id": row[0], "name": row[1]},
    }
    return json.dumps(message | ({"old": old} if old else {}))


def final_tables():
    """The tables after the history, by applying the statements (not by decoding the records)."""
    orders, customers = {}, {}
    for kind, table, rows, _ in OPS:
        for order_id, customer_id, amount in rows if table == "orders" else []:
            if kind == "DELETE":
                del orders[order_id]
            else:
                orders[order_id] = (customer_id, Decimal(amount))
    for kind, (key, name), _ in CUSTOMER_OPS:
        if kind == "delete":
            del customers[key]
        else:
            customers[key] = name
    return orders, customers


def table_rows(spark, path):
    return {tuple(r) for r in spark.read.format("delta").load(path).collect()}


@pytest.mark.e2e
def test_canal_and_maxwell_topics_through_a_join_and_an_aggregate_into_delta(spark, kafka_bootstrap, tmp_path):
    ensure_topics(kafka_bootstrap, {"canal_orders": 1, "maxwell_customers": 1})
    canal = [canal_record(*op) for op in OPS]
    malformed = '{"data": [{"order_id": 6, '
    ddl = json.dumps(
        {
            "data": None,
            "old": None,
            "database": "shop",
            "table": "orders",
            "type": "CREATE",
            "isDdl": True,
            "sql": "CREATE TABLE orders (order_id INT PRIMARY KEY, customer_id INT, amount DECIMAL(10, 2))",
        }
    )
    alter = json.dumps(
        {
            "data": None,
            "old": None,
            "database": "shop",
            "table": "orders",
            "type": "ALTER",
            "isDdl": True,
            "sql": "ALTER TABLE orders ADD COLUMN note TEXT",
        }
    )
    orders_topic = [ddl, canal[0], malformed, *canal[1:4], alter, *canal[4:]]
    produce(kafka_bootstrap, "canal_orders", [(None, r) for r in orders_topic])
    maxwell = [maxwell_record(*op) for op in CUSTOMER_OPS]
    bootstrap = json.dumps(
        {"database": "shop", "table": "customers", "type": "bootstrap-start", "ts": 1700000000, "data": {}}
    )
    customers_topic = [*maxwell[:3], None, bootstrap, *maxwell[3:]]  # None: a tombstone, skipped as Flink does
    produce(kafka_bootstrap, "maxwell_customers", [(None, r) for r in customers_topic])

    lakehouse = Lakehouse(str(tmp_path / "lake"))
    pipelines = {p.name: p for p in sql_pipelines(plan_script(DDL + SINKS))}
    for name in sorted(pipelines):  # customer_totals (aggregate), then order_customer (join)
        run_pipeline(pipelines[name], spark, lakehouse, kafka_bootstrap)

    orders, customers = final_tables()
    expected_join = {(o, customers[c], a) for o, (c, a) in orders.items() if c in customers}
    totals = {}
    for customer_id, amount in orders.values():
        count, total = totals.get(customer_id, (0, Decimal(0)))
        totals[customer_id] = (count + 1, total + amount)
    expected_totals = {(c, n, t) for c, (n, t) in totals.items()}
    assert expected_join == {
        (1, "Ann", Decimal("15.00")),
        (2, "Bobby", Decimal("20.00")),
        (5, "Bobby", Decimal("2.50")),
    }
    assert table_rows(spark, lakehouse.table_path("order_customer")) == expected_join
    assert table_rows(spark, lakehouse.table_path("customer_totals")) == expected_totals

    orders_dead = [
        (2, "malformed JSON", malformed, "canal_orders"),
        (6, "unknown Canal type ALTER", alter, "canal_orders"),
    ]
    customers_dead = [(4, "unknown Maxwell type bootstrap-start", bootstrap, "maxwell_customers")]
    for name, expected in (("order_customer", orders_dead + customers_dead), ("customer_totals", orders_dead)):
        dead = spark.read.format("delta").load(pipelines[name].dead_letter_path(lakehouse)).collect()
        assert sorted((r.offset, r.reason, bytes(r.value).decode(), r.topic) for r in dead) == sorted(expected), name
        assert {r.partition for r in dead} == {0}
