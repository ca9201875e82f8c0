"""Great Expectations checks of ``orders_in_eur``."""

import datetime as dt

import great_expectations as gx
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from checks.batch_inputs import RESOURCES, equals_batch_check, read_table
from checks.expectations import expectation_check

_DAY = dt.timedelta(days=1)


def expected_orders_in_eur(inputs):
    """The batch query: each placement with its customer's currency and the ECB rate valid at its time
    (the latest rate at or before it), for placements the final watermark has passed (a temporal join
    emits a probe row when the watermark reaches its time)."""
    watermark = min(inputs.order_events_max_time() - _DAY, inputs.rates_max_time())
    placed = (
        inputs.order_events()
        .where(F.col("op") == "c")
        .where(F.col("event_time") <= F.lit(watermark))
        .join(inputs.customer_currencies(), F.col("o_custkey") == F.col("c_custkey"))
    )
    # Each rate is valid from its time until the currency's next rate: one interval per order matches.
    rates = inputs.rates().withColumn(
        "valid_to", F.lead("rate_time").over(Window.partitionBy("currency").orderBy("rate_time"))
    )
    valid = placed.alias("o").join(
        rates.alias("r"),
        (F.col("o.currency") == F.col("r.currency"))
        & (F.col("r.rate_time") <= F.col("o.event_time"))
        & (F.col("r.valid_to").isNull() | (F.col("o.event_time") < F.col("r.valid_to"))),
        "left",
    )
    return valid.select(
        "o.o_orderkey",
        "o.o_custkey",
        "o.o_ordertime",
        "o.o_totalprice",
        "o.n_name",
        "o.currency",
        "r.rate",
        F.expr(
            "CAST(CASE WHEN o.currency = 'EUR' THEN o.o_totalprice ELSE o.o_totalprice / r.rate END AS DECIMAL(17, 2))"
        ).alias("amount_eur"),
    )


def _table(context):
    return read_table(context, "orders_in_eur")


orders_in_eur_checks = [
    equals_batch_check(
        "orders_in_eur",
        name="orders_in_eur_equals_batch_temporal_join",
        description="Every converted amount equals amount / rate of the ECB rate valid at the order's time (EUR: "
        "rate 1; no rate: null), recomputed in batch from the same generated input: the difference, both ways, "
        "between the table and the batch query over the placements the final watermark has passed has 0 rows.",
        expected=expected_orders_in_eur,
    ),
    expectation_check(
        "orders_in_eur",
        name="orders_in_eur_rate_positive",
        description="Every rate found is positive.",
        expectations=[gx.expectations.ExpectColumnValuesToBeBetween(column="rate", min_value=0, strict_min=True)],
        build=_table,
        required_resource_keys=RESOURCES,
    ),
]
