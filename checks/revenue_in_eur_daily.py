"""Great Expectations checks of ``revenue_in_eur_daily``."""

import datetime as dt

from pyspark.sql import functions as F

from checks.batch_inputs import equals_batch_check
from checks.orders_in_eur import expected_orders_in_eur

_DAY = dt.timedelta(days=1)


def expected_revenue_in_eur_daily(inputs):
    """The batch query: the placements of :func:`~checks.orders_in_eur.expected_orders_in_eur` (each in euros at
    the rate valid at its time) per currency and UTC day of their ``event_time``, for the days the final watermark
    has passed (a window aggregate emits a day once the watermark reaches its end − 1 ms), with Spark's own
    ``window()``: ``order_count`` and the sum of ``amount_eur`` (``revenue_eur``)."""
    watermark = min(inputs.order_events_max_time() - _DAY, inputs.rates_max_time())
    placed = inputs.order_events().where(F.col("op") == "c").select("o_orderkey", "event_time")
    converted = expected_orders_in_eur(inputs).join(placed, "o_orderkey")
    days = converted.withColumn("day", F.window("event_time", "1 day"))
    fired = days.where(F.col("day.end") - F.expr("INTERVAL 1 MILLISECOND") <= F.lit(watermark))
    return (
        fired.groupBy("currency", "day")
        .agg(F.count(F.lit(1)).alias("order_count"), F.sum("amount_eur").cast("decimal(38, 2)").alias("revenue_eur"))
        .select(
            "currency",
            F.col("day.start").alias("window_start"),
            F.col("day.end").alias("window_end"),
            "order_count",
            "revenue_eur",
        )
    )


revenue_in_eur_daily_checks = [
    equals_batch_check(
        "revenue_in_eur_daily",
        name="revenue_in_eur_daily_equals_batch_windows",
        description="Each day's order count and euro revenue per currency equal a batch aggregation with Spark's "
        "window() of the orders converted at the ECB rate valid at their time, recomputed from the same generated "
        "input, for the days the final watermark has passed.",
        expected=expected_revenue_in_eur_daily,
    ),
]
