"""upsert-kafka tables: their SQL options, their plans (ChangelogNormalize where Flink puts one), and a regular
LEFT join, a group aggregate and a copy over an upsert topic through a real Kafka broker into Delta upsert tables,
with their dead letters."""

import json
from decimal import Decimal

import pytest

from streamjoin.changelog import RowKind
from streamjoin.connectors.kafka_admin import ensure_topics, produce
from streamjoin.errors import ValidationError
from streamjoin.pipeline import Lakehouse, run_pipeline
from streamjoin.planner import plan_script, sql_pipelines

# One topic read two ways: its values hold every column, so ALL reads the key column from the value, and
# EXCEPT_KEY with a prefix reads it from the record key (ignoring the value's id).
DDL = """
CREATE TABLE orders (order_id INT, customer_id INT, amount DECIMAL(10, 2), PRIMARY KEY (order_id) NOT ENFORCED)
  WITH ('connector' = 'kafka', 'topic' = 'uk_orders', 'format' = 'json');
CREATE TABLE customers (k_id INT, name STRING, tier STRING, PRIMARY KEY (k_id) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'uk_customers', 'key.format' = 'json', 'value.format' = 'json',
        'key.fields-prefix' = 'k_', 'value.fields-include' = 'EXCEPT_KEY', 'properties.bootstrap.servers' = 'localhost:9092');
CREATE TABLE customers_all (id INT, name STRING, tier STRING, PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'uk_customers', 'key.format' = 'json', 'value.format' = 'json');
"""  # noqa: E501
SINKS = """
CREATE TABLE order_customer (order_id INT, name STRING, amount DECIMAL(10, 2), PRIMARY KEY (order_id) NOT ENFORCED)
  WITH ('connector' = 'delta');
CREATE TABLE tier_counts (tier STRING, customers BIGINT, PRIMARY KEY (tier) NOT ENFORCED) WITH ('connector' = 'delta');
CREATE TABLE customers_copy (id INT, name STRING, tier STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'delta');
INSERT INTO order_customer SELECT o.order_id, c.name, o.amount FROM orders o LEFT JOIN customers c ON o.customer_id = c.k_id;
INSERT INTO tier_counts SELECT tier, COUNT(*) FROM customers_all GROUP BY tier;
INSERT INTO customers_copy SELECT id, name, tier FROM customers_all;
"""  # noqa: E501


def test_upsert_kafka_tables_are_upsert_changelogs_read_from_the_key():
    tables = plan_script(DDL).catalog.tables
    # Flink's UpsertKafkaDynamicTableFactory declares [UA, D] (its records come as INSERTs, read as upserts)
    assert tables["customers"].source_kinds == frozenset({RowKind.UPDATE_AFTER, RowKind.DELETE})
    source = tables["customers"].kafka_source()
    assert (
        source.upsert,
        source.format,
        source.rowkind_field,
        source.key_fields_prefix,
        source.value_fields_include,
    ) == (True, "json", None, "k_", "EXCEPT_KEY")
    assert source.options == {}  # always from the earliest offset; the servers are the pipeline's
    assert tables["customers_all"].kafka_source().value_fields_include == "ALL"


def test_changelog_normalize_where_flink_plans_it():
    plans = {s.sink_table.name: s.explain for s in plan_script(DDL + SINKS).inserts}
    join = plans["order_customer"]
    assert "ChangelogNormalize(key=[k_id], changelogMode=[I,UB,UA,D]" in join
    assert (
        "TableSourceScan(table=[[default_catalog, default_database, customers]], fields=[k_id, name, tier], changelogMode=[UA,D]"  # noqa: E501
        in join
    )
    # as PyFlink 2.3.0 shows a [UA,D] source (fromChangelogStream with that mode and a primary key)
    assert (
        "ChangelogNormalize(key=[k_id], changelogMode=[I,UB,UA,D], upsertKeys=[[k_id]])\n"
        "                  +- Exchange(distribution=[hash[k_id]], changelogMode=[UA,D])" in join
    )
    assert "ChangelogNormalize(key=[id]" in plans["tier_counts"]
    # an upsert sink keyed by the source's key takes its deletes by key: no ChangelogNormalize, as Flink removes it
    assert "ChangelogNormalize" not in plans["customers_copy"]


def test_an_upsert_kafka_sink_takes_updates():
    [statement] = plan_script(
        DDL
        + """
        CREATE TABLE counts (tier STRING, n BIGINT, PRIMARY KEY (tier) NOT ENFORCED)
          WITH ('connector' = 'upsert-kafka', 'topic' = 'counts', 'key.format' = 'json', 'value.format' = 'json');
        INSERT INTO counts SELECT tier, COUNT(*) FROM customers GROUP BY tier;"""
    ).inserts
    assert "GroupAggregate(groupBy=[tier]" in statement.explain


REQUIRED = "'topic' = 't', 'key.format' = 'json', 'value.format' = 'json'"


@pytest.mark.parametrize(
    "columns, options, message",
    [
        (
            "id INT, PRIMARY KEY (id) NOT ENFORCED",
            "'topic' = 't', 'value.format' = 'json'",
            "connector 'upsert-kafka' needs option 'key.format'",
        ),
        (
            "id INT, PRIMARY KEY (id) NOT ENFORCED",
            "'topic' = 't', 'key.format' = 'json'",
            "connector 'upsert-kafka' needs option 'value.format'",
        ),
        (
            "id INT, PRIMARY KEY (id) NOT ENFORCED",
            "'key.format' = 'json', 'value.format' = 'json'",
            "connector 'upsert-kafka' needs option 'topic'",
        ),
        ("id INT", REQUIRED, "'upsert-kafka' tables require to define a PRIMARY KEY constraint"),
        (
            "id INT, PRIMARY KEY (id) NOT ENFORCED",
            "'topic' = 't', 'key.format' = 'json', 'value.format' = 'debezium-json'",
            "'upsert-kafka' connector doesn't support 'debezium-json' as value format, because 'debezium-json' is not in insert-only mode",  # noqa: E501
        ),
        (
            "id INT, PRIMARY KEY (id) NOT ENFORCED",
            "'topic' = 't', 'key.format' = 'avro', 'value.format' = 'json'",
            "key.format 'avro' is not supported; supported: json",
        ),
        (
            "id INT, PRIMARY KEY (id) NOT ENFORCED",
            REQUIRED + ", 'key.fields-prefix' = 'k_'",
            "a key prefix is not allowed when option 'value.fields-include' is set to 'ALL'",
        ),
        (
            "id INT, PRIMARY KEY (id) NOT ENFORCED",
            REQUIRED + ", 'key.fields-prefix' = 'k_', 'value.fields-include' = 'EXCEPT_KEY'",
            "column 'id' is not prefixed",
        ),
        (
            "id INT, PRIMARY KEY (id) NOT ENFORCED",
            REQUIRED + ", 'value.fields-include' = 'NONE'",
            "value.fields-include 'NONE' must be one of ALL, EXCEPT_KEY",
        ),
        (
            "id INT, PRIMARY KEY (id) NOT ENFORCED",
            REQUIRED + ", 'format' = 'json'",
            "unsupported option 'format' for connector 'upsert-kafka'",
        ),
        (
            "id INT, PRIMARY KEY (id) NOT ENFORCED",
            REQUIRED + ", 'scan.startup.mode' = 'latest-offset'",
            "unsupported option 'scan.startup.mode'",
        ),
        (
            "id INT, PRIMARY KEY (id) NOT ENFORCED",
            REQUIRED + ", 'json.rowkind-field' = 'op'",
            "unsupported option 'json.rowkind-field'",
        ),
    ],
)
def test_upsert_kafka_options_are_checked(columns, options, message):
    with pytest.raises(ValidationError) as caught:
        plan_script(f"CREATE TABLE t ({columns}) WITH ('connector' = 'upsert-kafka', {options});")
    assert message in str(caught.value)


def customer(id, name, tier):
    return json.dumps({"id": id}), json.dumps({"id": id, "name": name, "tier": tier})


# The customers topic: (key, value) records; a None value is a tombstone.
CUSTOMERS = [
    customer(10, "Ann", "gold"),
    customer(20, "Bob", "silver"),
    customer(20, "Bobby", "gold"),
    customer(30, "Cid", "silver"),
    (json.dumps({"id": 30}), None),
    (json.dumps({"id": 40}), None),  # a tombstone of a key never seen
    customer(10, "Ann", "gold"),  # the same row again
    (None, json.dumps({"id": 50, "name": "Eve", "tier": "gold"})),  # offset 7: a null key
    (json.dumps({"id": 60}), '{"id": 60, "name": '),  # offset 8: malformed value
    (json.dumps({"id": "x"}), json.dumps({"id": 70, "name": "Xi", "tier": "gold"})),  # offset 9: a key that is no INT
    customer(20, "Bobby", "bronze"),
    customer(50, "Eve", "gold"),
]
ORDERS = [(1, 10, "10.00"), (2, 20, "20.00"), (3, 30, "5.00"), (4, 50, "7.50"), (5, 99, "1.00")]


def final_customers():
    """The customers table after the topic, applying each good record as an upsert by key (not through the decoder)."""
    table = {}
    for key, value in CUSTOMERS[:7] + CUSTOMERS[10:]:
        id = json.loads(key)["id"]
        if value is None:
            table.pop(id, None)
        else:
            row = json.loads(value)
            table[id] = (row["name"], row["tier"])
    return table


def table_rows(spark, path):
    return {tuple(r) for r in spark.read.format("delta").load(path).collect()}


@pytest.mark.e2e
def test_upsert_topic_through_a_left_join_an_aggregate_and_a_copy_into_delta(spark, kafka_bootstrap, tmp_path):
    ensure_topics(kafka_bootstrap, {"uk_orders": 1, "uk_customers": 1})
    produce(kafka_bootstrap, "uk_customers", CUSTOMERS)
    produce(
        kafka_bootstrap,
        "uk_orders",
        [(None, json.dumps({"order_id": o, "customer_id": c, "amount": a})) for o, c, a in ORDERS],
    )

    lakehouse = Lakehouse(str(tmp_path / "lake"))
    pipelines = {p.name: p for p in sql_pipelines(plan_script(DDL + SINKS))}
    for pipeline in pipelines.values():
        run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)

    customers = final_customers()
    expected_join = {(o, customers.get(c, (None,))[0], Decimal(a)) for o, c, a in ORDERS}
    tiers = {}
    for _, tier in customers.values():
        tiers[tier] = tiers.get(tier, 0) + 1
    assert expected_join == {
        (1, "Ann", Decimal("10.00")),
        (2, "Bobby", Decimal("20.00")),
        (3, None, Decimal("5.00")),
        (4, "Eve", Decimal("7.50")),
        (5, None, Decimal("1.00")),
    }
    assert table_rows(spark, lakehouse.table_path("order_customer")) == expected_join
    assert table_rows(spark, lakehouse.table_path("tier_counts")) == set(tiers.items()) == {("gold", 2), ("bronze", 1)}
    assert table_rows(spark, lakehouse.table_path("customers_copy")) == {(i, n, t) for i, (n, t) in customers.items()}

    def dead(column):
        return [
            (7, "null key"),
            (8, "malformed JSON"),
            (9, f'key: column {column}: value "x" is not INT'),
        ]

    for name, column in (("order_customer", "k_id"), ("tier_counts", "id"), ("customers_copy", "id")):
        letters = spark.read.format("delta").load(pipelines[name].dead_letter_path(lakehouse)).collect()
        assert sorted((r.offset, r.reason) for r in letters) == dead(column), name
        assert {(r.topic, r.partition) for r in letters} == {("uk_customers", 0)}
        assert bytes(next(r for r in letters if r.offset == 8).value).decode() == CUSTOMERS[8][1]
