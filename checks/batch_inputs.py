"""The generated input of the pipelines as batch Spark DataFrames, for checks that recompute a table in batch.

Every frame is built from the same :class:`~streamjoin.datagen.tpch.TpchChangelog`
the loader produced to Kafka, so a check compares a streaming table with the
batch query over exactly what the topics hold.
"""

import datetime as dt
from collections.abc import Callable

import great_expectations as gx
from pyspark.sql import DataFrame, SparkSession

from checks.expectations import expectation_check, table_difference, within_run_days
from streamjoin.datagen.dimensions import CUSTOMER_CURRENCIES_SCHEMA, PART_SCHEMA, rows_frame
from streamjoin.datagen.topics import LINEITEM, ORDER_EVENTS, ORDERS, RATES, rate_rows
from streamjoin.datagen.tpch import TpchChangelog, customer_currencies, parts

__all__ = ["RESOURCES", "BatchInputs", "batch_inputs", "equals_batch_check", "read_table"]

#: The resources a check over the lakehouse and the generated input needs.
RESOURCES = {"spark", "lakehouse", "tpch"}


class BatchInputs:
    """The inputs of one TPC-H changelog as batch DataFrames (schemas of ``streamjoin.datagen.topics``)."""

    def __init__(self, spark: SparkSession, changelog: TpchChangelog) -> None:
        self.spark = spark
        self.changelog = changelog

    def write_lookup_tables(self, root: str) -> None:
        """Write the Delta tables the pipelines' lookup joins read under ``root``.

        They are ``customer_currencies`` and ``part``.
        """
        self.customer_currencies().write.format("delta").save(f"{root}/customer_currencies")
        self.part().write.format("delta").save(f"{root}/part")

    def final_orders(self) -> DataFrame:
        """The orders table after every change."""
        return rows_frame(self.spark, self.changelog.final_orders().values(), ORDERS.schema)

    def final_lineitems(self) -> DataFrame:
        """The lineitem table after every change."""
        return rows_frame(self.spark, self.changelog.final_lineitems().values(), LINEITEM.schema)

    def order_events(self) -> DataFrame:
        """The ``order_events`` topic: order columns + ``op`` + ``event_time``."""
        return rows_frame(self.spark, self.changelog.order_events, ORDER_EVENTS.schema)

    def shipments(self) -> DataFrame:
        """The ``shipments`` topic: every line item as inserted."""
        return rows_frame(self.spark, self.changelog.lineitems, LINEITEM.schema)

    def rates(self) -> DataFrame:
        """The ``rates`` topic."""
        return rows_frame(self.spark, rate_rows(self.changelog.period), RATES.schema)

    def customer_currencies(self) -> DataFrame:
        return rows_frame(self.spark, customer_currencies(self.changelog.data_dir), CUSTOMER_CURRENCIES_SCHEMA)

    def part(self) -> DataFrame:
        return rows_frame(self.spark, parts(self.changelog.data_dir), PART_SCHEMA)

    # The watermark a query reaches once its input is exhausted is, per watermarked input, its
    # max rowtime - delay over every row of the topic (as Flink's source watermark: a query that
    # reads only placements, op = 'c', still gets the watermark of every event), and over several
    # inputs the smallest (Spark's 'min' watermark policy).

    def rates_max_time(self) -> dt.datetime:
        return max(r["rate_time"] for r in rate_rows(self.changelog.period))

    def order_events_max_time(self) -> dt.datetime:
        return max(e["event_time"] for e in self.changelog.order_events)

    def shipments_max_time(self) -> dt.datetime:
        return max(i["l_shiptime"] for i in self.changelog.lineitems)


def batch_inputs(context) -> BatchInputs:
    """:class:`BatchInputs` of a check's ``spark`` and ``tpch`` resources."""
    return BatchInputs(context.resources.spark.session(), context.resources.tpch.changelog())


def read_table(context, name: str) -> DataFrame:
    """The lakehouse Delta table ``name``, read with a check's ``spark`` and ``lakehouse`` resources."""
    path = context.resources.lakehouse.lakehouse().table_path(name)
    return context.resources.spark.session().read.format("delta").load(path)


def equals_batch_check(
    table: str, name: str, description: str, expected: Callable[[BatchInputs], DataFrame], day_column: str | None = None
):
    """A blocking Dagster asset check: ``table`` equals ``expected(inputs)``, the batch query over the generated input.

    Validated with Great Expectations on :func:`~checks.expectations.table_difference` (the rows only
    in one of the two, both ways, as multisets): the expectation is a row count of 0. ``day_column``: the
    DATE column a daily-partitioned table is ``PARTITIONED BY`` (also a column of ``expected``); a partition
    run compares only its days (:func:`~checks.expectations.within_run_days`).
    """

    def build(context):
        return table_difference(
            *(
                within_run_days(context, frame, day_column)
                for frame in (read_table(context, table), expected(batch_inputs(context)))
            )
        )

    return expectation_check(
        table,
        name=name,
        description=description,
        expectations=[gx.expectations.ExpectTableRowCountToEqual(value=0)],
        build=build,
        required_resource_keys=RESOURCES,
    )
