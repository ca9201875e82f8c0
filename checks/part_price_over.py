"""Great Expectations checks of ``part_price_over``."""

import datetime as dt

import great_expectations as gx
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from checks.batch_inputs import RESOURCES, equals_batch_check, read_table
from checks.expectations import expectation_check

_DAY = dt.timedelta(days=1)


def expected_part_price_over(inputs):
    """The batch window query over the shipped line items the final watermark has passed (an event-time
    OVER aggregation emits a row when the watermark reaches its time; rows are in ship-time order, ties
    in arrival order, which for one ship time is the line number of one order)."""
    watermark = inputs.shipments_max_time() - _DAY
    priced = (
        inputs.shipments()
        .where(F.col("l_shiptime") <= F.lit(watermark))
        .join(inputs.part(), F.col("l_partkey") == F.col("p_partkey"))
        .select("l_orderkey", "l_linenumber", "p_type", "l_shiptime", "p_retailprice")
    )
    rows = (
        Window.partitionBy("p_type")
        .orderBy("l_shiptime", "l_orderkey", "l_linenumber")
        .rowsBetween(-2, Window.currentRow)
    )
    # RANGE over epoch seconds (ship times are whole seconds): the frame is [t - 7 days, t], peers included.
    days = Window.partitionBy("p_type").orderBy("_t").rangeBetween(-7 * 86400, Window.currentRow)
    by_rows = priced.withColumn("frame", F.lit("ROWS 2 PRECEDING")).withColumn(
        "max_price", F.max("p_retailprice").over(rows)
    )
    by_days = (
        priced.withColumn("_t", F.unix_timestamp("l_shiptime"))
        .withColumn("frame", F.lit("RANGE 7 DAYS"))
        .withColumn("max_price", F.max("p_retailprice").over(days))
    )
    columns = ["l_orderkey", "l_linenumber", "frame", "p_type", "l_shiptime", "p_retailprice", "max_price"]
    return by_rows.select(*columns).unionByName(by_days.select(*columns))


def _with_not_below(context):
    return read_table(context, "part_price_over").withColumn("_not_below", F.col("max_price") >= F.col("p_retailprice"))


part_price_over_checks = [
    equals_batch_check(
        "part_price_over",
        name="part_price_over_equals_batch_window",
        description="Both frames equal the batch window query (MAX(p_retailprice) OVER the 2 preceding line items "
        "of the part type, and over its last 7 days) over the line items the final watermark has passed: the "
        "difference, both ways, has 0 rows.",
        expected=expected_part_price_over,
    ),
    expectation_check(
        "part_price_over",
        name="part_price_over_max_not_below_price",
        description="Each window's max is at least the line item's own price, and every frame is one of the two.",
        expectations=[
            gx.expectations.ExpectColumnValuesToBeInSet(column="_not_below", value_set=[True]),
            gx.expectations.ExpectColumnValuesToBeInSet(column="frame", value_set=["ROWS 2 PRECEDING", "RANGE 7 DAYS"]),
        ],
        build=_with_not_below,
        required_resource_keys=RESOURCES,
    ),
]
