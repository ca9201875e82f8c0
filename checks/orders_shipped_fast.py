"""Great Expectations checks of ``orders_shipped_fast``."""

import datetime as dt

import great_expectations as gx
from pyspark.sql import functions as F

from checks.batch_inputs import RESOURCES, equals_batch_check, read_table
from checks.expectations import expectation_check

_DAY = dt.timedelta(days=1)
_WINDOW = dt.timedelta(days=30)


def expected_orders_shipped_fast(inputs):
    """The batch query with the same bounds: every (placement, line item shipped in [o_ordertime,
    o_ordertime + 30 days]) pair, and each placement with no such line item null-padded (line 0) once the
    final watermark is past its window (docs/semantics.md §3: an unmatched left row is emitted when the
    watermark passes ``t + 30 days``), with the placement day ``o_orderday`` (the event's date, UTC)."""
    watermark = min(inputs.order_events_max_time(), inputs.shipments_max_time()) - _DAY
    placed = (
        inputs.order_events()
        .where("op = 'c'")
        .select("o_orderkey", "o_ordertime", F.to_date("event_time").alias("o_orderday"))
    )
    shipments = inputs.shipments()
    within = (F.col("l_orderkey") == F.col("o_orderkey")) & F.col("l_shiptime").between(
        F.col("o_ordertime"), F.col("o_ordertime") + F.expr("INTERVAL 30 DAYS")
    )
    matched = placed.join(shipments, within).select(
        "o_orderkey", "l_linenumber", "o_ordertime", "l_shiptime", "l_quantity", "l_shipmode", "o_orderday"
    )
    expired = F.col("o_ordertime") + F.expr("INTERVAL 30 DAYS") < F.lit(watermark)
    unmatched = (
        placed.join(shipments, within, "left_anti")
        .where(expired)
        .select(
            "o_orderkey",
            F.lit(0).alias("l_linenumber"),
            "o_ordertime",
            F.lit(None).cast("timestamp").alias("l_shiptime"),
            F.lit(None).cast("decimal(15,2)").alias("l_quantity"),
            F.lit(None).cast("string").alias("l_shipmode"),
            "o_orderday",
        )
    )
    return matched.unionByName(unmatched)


def _with_days_to_ship(context):
    return read_table(context, "orders_shipped_fast").withColumn(
        "days_to_ship", (F.unix_timestamp("l_shiptime") - F.unix_timestamp("o_ordertime")) / 86400.0
    )


orders_shipped_fast_checks = [
    equals_batch_check(
        "orders_shipped_fast",
        name="orders_shipped_fast_equals_batch_interval_join",
        description="The table equals the batch LEFT interval join with the same bounds (line items shipped 0-30 "
        "days after the order; orders without one null-padded once the final watermark passed their window) "
        "over the same generated events: the difference, both ways, has 0 rows.",
        expected=expected_orders_shipped_fast,
        day_column="o_orderday",
    ),
    expectation_check(
        "orders_shipped_fast",
        name="orders_shipped_fast_within_bounds",
        description="Every matched line item shipped 0 to 30 days after its order.",
        expectations=[
            gx.expectations.ExpectColumnValuesToBeBetween(column="days_to_ship", min_value=0, max_value=_WINDOW.days)
        ],
        build=_with_days_to_ship,
        required_resource_keys=RESOURCES,
    ),
]
