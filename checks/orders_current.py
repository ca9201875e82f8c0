"""Great Expectations checks of ``orders_current``."""

import great_expectations as gx

from checks.expectations import expectation_check
from dagster_project.resources import LakehouseResource, SparkResource, TpchResource


def _orders_current(context):
    spark: SparkResource = context.resources.spark
    lakehouse: LakehouseResource = context.resources.lakehouse
    tpch: TpchResource = context.resources.tpch
    df = spark.session().read.format("delta").load(lakehouse.lakehouse().table_path("orders_current"))
    expected_rows = len(tpch.changelog().final_orders())
    return df, [
        gx.expectations.ExpectColumnValuesToNotBeNull(column="o_orderkey"),
        gx.expectations.ExpectColumnValuesToBeUnique(column="o_orderkey"),
        gx.expectations.ExpectTableRowCountToEqual(value=expected_rows),
    ]


orders_current_check = expectation_check(
    "orders_current",
    name="orders_current_matches_batch",
    description="o_orderkey is not null and unique, and the row count equals the orders table recomputed in "
    "batch from the same generated TPC-H changelog (after every update and delete).",
    build=_orders_current,
    required_resource_keys={"spark", "lakehouse", "tpch"},
)
