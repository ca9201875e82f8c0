"""Great Expectations checks of ``top_open_orders``."""

from pyspark.sql import Window
from pyspark.sql import functions as F

from checks.batch_inputs import equals_batch_check


def expected_top_open_orders(inputs):
    """The batch query: the final orders whose status is ``'O'``, per ``o_custkey`` ranked by ``o_totalprice``
    descending then ``o_orderkey``, ranks 1 to 3 (``order_rank``)."""
    ranking = Window.partitionBy("o_custkey").orderBy(F.col("o_totalprice").desc(), "o_orderkey")
    ranked = inputs.final_orders().where("o_orderstatus = 'O'").withColumn("order_rank", F.row_number().over(ranking))
    return ranked.where("order_rank <= 3").select(
        "o_custkey", F.col("order_rank").cast("bigint"), "o_orderkey", "o_totalprice", "o_orderdate"
    )


top_open_orders_checks = [
    equals_batch_check(
        "top_open_orders",
        name="top_open_orders_equals_batch_top_n",
        description="Each customer's three most expensive open orders, by rank, equal the batch ROW_NUMBER() over the "
        "final orders recomputed from the same generated changelog.",
        expected=expected_top_open_orders,
    ),
]
