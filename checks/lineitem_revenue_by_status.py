"""Great Expectations checks of ``lineitem_revenue_by_status``."""

from pyspark.sql import functions as F

from checks.batch_inputs import equals_batch_check


def expected_lineitem_revenue_by_status(inputs):
    """The batch query: the final line items JOIN the final orders, per ``o_orderstatus`` the line items, the
    orders, the revenue (SUM of ``l_extendedprice``) and the largest ``l_quantity``."""
    lineitems, orders = inputs.final_lineitems(), inputs.final_orders()
    joined = lineitems.join(orders, lineitems.l_orderkey == orders.o_orderkey)
    return joined.groupBy("o_orderstatus").agg(
        F.count(F.lit(1)).alias("line_count"),
        F.countDistinct("o_orderkey").alias("order_count"),
        F.sum("l_extendedprice").cast("decimal(38,2)").alias("revenue"),
        F.max("l_quantity").alias("max_quantity"),
    )


lineitem_revenue_by_status_checks = [
    equals_batch_check(
        "lineitem_revenue_by_status",
        name="lineitem_revenue_by_status_equals_batch_aggregate",
        description="Per order status, the line items, orders, revenue and largest quantity equal the batch join and "
        "aggregate of the final lineitem and orders tables recomputed from the same generated changelogs.",
        expected=expected_lineitem_revenue_by_status,
    ),
]
