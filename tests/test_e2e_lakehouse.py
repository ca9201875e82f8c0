"""The lakehouse pipelines (every ``sql/*.sql``) through Dagster on the real path: Kafka → Spark operators → Delta, with
GE checks.

Runs ``lakehouse_job`` in process (sharing the tests' Spark session) against
the test broker's demo topics, then checks each table against the batch query
over the final inputs, independently of the GE checks.
"""

from conftest import DAYS, SCALE_FACTOR
from dagster import DagsterInstance

from assets.sql_pipelines import load_sql_pipelines
from dagster_project.definitions import defs
from resources import KafkaResource, LakehouseResource, SparkResource, TpchResource
from streamjoin.datagen.topics import LINEITEM, ORDERS


def test_lakehouse_job_materialises_every_pipeline_and_checks_pass(spark, kafka_bootstrap, demo_topics, tpch, tmp_path):
    job = defs.resolve_job_def("lakehouse_job")
    result = job.execute_in_process(
        instance=DagsterInstance.ephemeral(),
        resources={
            "spark": SparkResource(),
            "kafka": KafkaResource(bootstrap_servers=kafka_bootstrap),
            "lakehouse": LakehouseResource(root=str(tmp_path / "lake")),
            "tpch": TpchResource(scale_factor=SCALE_FACTOR, days=DAYS),
        },
        raise_on_error=False,
    )
    assert result.success
    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    assert checks and all(checks.values()), checks
    # Every SQL pipeline was materialised and has a check that compares it with the batch query.
    materialised = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    pipelines = {d.pipeline.name for d in load_sql_pipelines()}
    assert pipelines | {f"{p}_changelog" for p in pipelines} | {"customer_currencies", "part"} <= materialised
    checked = {c.asset_key.to_user_string() for c in result.get_asset_check_evaluations()}
    assert pipelines <= checked
    assert {
        "orders_current_matches_batch",
        "lineitem_with_order_equals_batch_join",
        "orders_in_eur_equals_batch_temporal_join",
        "orders_shipped_fast_equals_batch_interval_join",
        "orders_by_status_equals_batch_aggregate",
        "part_price_over_equals_batch_window",
    } <= set(checks)
    # ... and with its SQL run as a Spark batch query over the topics (streamjoin.batch): with the checks
    # above, the batch query equals each hand-written expectation of checks/ too.
    assert {f"{p}_equals_batch_query" for p in pipelines} <= set(checks)

    # Independently of GX: the LEFT join table equals the batch LEFT JOIN of the final inputs.
    orders = {k[0]: o for k, o in tpch.final_orders().items()}
    expected = set()
    for item in tpch.final_lineitems().values():
        order = orders.get(item["l_orderkey"])
        expected.add(
            tuple(item[c] for c in LINEITEM.schema.names)
            + tuple(order[c] if order else None for c in ORDERS.schema.names)
        )
    table = spark.read.format("delta").load(str(tmp_path / "lake" / "lineitem_with_order"))
    assert {tuple(r) for r in table.select(*LINEITEM.schema.names, *ORDERS.schema.names).collect()} == expected
    # The input really made the join retract: line items of updated orders carry the updated order.
    updated = {c.row["o_orderkey"] for c in tpch.orders_changes() if c.kind.short == "+U"}
    assert any(row[0] in updated for row in expected)
