"""Great Expectations checks of ``lineitem_with_order``."""

import great_expectations as gx
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from checks.batch_inputs import RESOURCES, equals_batch_check, read_table
from checks.expectations import CheckNotApplicable, expectation_check
from streamjoin.datagen.topics import ORDERS

_ORDER_COLUMNS = ORDERS.schema.names


def expected_lineitem_with_order(inputs):
    """The batch query: the final lineitem table LEFT JOIN the final orders table on the order key."""
    lineitems, orders = inputs.final_lineitems(), inputs.final_orders()
    return lineitems.join(orders, lineitems.l_orderkey == orders.o_orderkey, "left")


def _inconsistent_rows(context):
    path = context.resources.lakehouse.lakehouse().table_path("orders_current")
    if not DeltaTable.isDeltaTable(context.resources.spark.session(), path):
        raise CheckNotApplicable(
            f"orders_current has no Delta table at {path} yet: materialize it, then re-run this check"
        )
    joined = read_table(context, "lineitem_with_order")
    current = read_table(context, "orders_current").select(*[F.col(c).alias(f"cur_{c}") for c in _ORDER_COLUMNS])
    # A row's order columns are either all null (no order) or exactly the order's current row.
    all_null, matches = F.lit(True), F.lit(True)
    for c in _ORDER_COLUMNS:
        all_null = all_null & F.col(c).isNull()
        matches = matches & F.col(c).eqNullSafe(F.col(f"cur_{c}"))
    return joined.join(current, joined.o_orderkey == current.cur_o_orderkey, "left").where(~(all_null | matches))


lineitem_with_order_checks = [
    expectation_check(
        "lineitem_with_order",
        name="lineitem_with_order_matches_current_orders",
        description="Every row's order columns are all null or equal to the order's row in orders_current "
        "(no inconsistent row: the DataFrame of violations has 0 rows).",
        expectations=[gx.expectations.ExpectTableRowCountToEqual(value=0)],
        build=_inconsistent_rows,
        required_resource_keys=RESOURCES,
        additional_deps=["orders_current"],
    ),
    equals_batch_check(
        "lineitem_with_order",
        name="lineitem_with_order_equals_batch_join",
        description="The table equals the batch LEFT JOIN of the final lineitem and orders tables recomputed from "
        "the same generated changelogs (the difference, both ways, has 0 rows).",
        expected=expected_lineitem_with_order,
    ),
]
