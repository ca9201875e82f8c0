"""Great Expectations checks of ``orders_by_status``."""

import great_expectations as gx
from pyspark.sql import functions as F

from checks.batch_inputs import RESOURCES, equals_batch_check, read_table
from checks.expectations import expectation_check


def expected_orders_by_status(inputs):
    """The batch aggregate of the final orders: per ``o_orderstatus``, the number of orders and their total price."""
    return (
        inputs.final_orders()
        .groupBy("o_orderstatus")
        .agg(
            F.countDistinct("o_orderkey").alias("order_count"),
            F.sum("o_totalprice").cast("decimal(38,2)").alias("total_price"),
        )
    )


def _table(context):
    return read_table(context, "orders_by_status")


orders_by_status_checks = [
    equals_batch_check(
        "orders_by_status",
        name="orders_by_status_equals_batch_aggregate",
        description="Per status, COUNT(DISTINCT o_orderkey) and SUM(o_totalprice) equal the batch aggregate of "
        "the final orders (after every update and cancellation) recomputed from the same generated changelog.",
        expected=expected_orders_by_status,
    ),
    expectation_check(
        "orders_by_status",
        name="orders_by_status_groups",
        description=(
            "Every row is a TPC-H order status (O, P, F) and none is empty: a group whose last order left is deleted."
        ),
        expectations=[
            gx.expectations.ExpectColumnValuesToBeInSet(column="o_orderstatus", value_set=["O", "P", "F"]),
            gx.expectations.ExpectColumnValuesToBeBetween(column="order_count", min_value=1),
        ],
        build=_table,
        required_resource_keys=RESOURCES,
    ),
]
