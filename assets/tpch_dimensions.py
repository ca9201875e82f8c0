"""The TPC-H dimension tables the pipelines look up, written to Delta from the generated input.

``customer_currencies`` and ``part`` (schemas in :mod:`streamjoin.datagen.dimensions`) at
``<lakehouse>/<name>``, replaced on every materialisation (Delta keeps the earlier versions).
"""

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset
from pyspark.sql.types import StructType

from resources import LakehouseResource, SparkResource, TpchResource
from streamjoin.datagen.dimensions import CUSTOMER_CURRENCIES_SCHEMA, PART_SCHEMA, rows_frame
from streamjoin.datagen.tpch import customer_currencies as customer_currency_rows
from streamjoin.datagen.tpch import parts

__all__ = ["customer_currencies", "part"]


def _write(
    spark: SparkResource, lakehouse: LakehouseResource, name: str, rows: list[dict], schema: StructType
) -> MaterializeResult:
    path = lakehouse.lakehouse().table_path(name)
    df = rows_frame(spark.session(), rows, schema)
    df.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)
    return MaterializeResult(metadata={"path": MetadataValue.path(path), "rows": len(rows)})


@asset(
    group_name="lakehouse",
    kinds={"delta", "spark"},
    description="Each TPC-H customer's nation and its currency (ISO 4217), looked up by `orders_in_eur`.",
)
def customer_currencies(
    context: AssetExecutionContext, spark: SparkResource, lakehouse: LakehouseResource, tpch: TpchResource
) -> MaterializeResult:
    return _write(
        spark,
        lakehouse,
        "customer_currencies",
        customer_currency_rows(tpch.changelog().data_dir),
        CUSTOMER_CURRENCIES_SCHEMA,
    )


@asset(
    group_name="lakehouse",
    kinds={"delta", "spark"},
    description="The TPC-H part table (type, brand, retail price), looked up by `part_price_over`.",
)
def part(
    context: AssetExecutionContext, spark: SparkResource, lakehouse: LakehouseResource, tpch: TpchResource
) -> MaterializeResult:
    return _write(spark, lakehouse, "part", parts(tpch.changelog().data_dir), PART_SCHEMA)
