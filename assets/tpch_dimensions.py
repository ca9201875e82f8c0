"""The TPC-H dimension tables the pipelines look up, written to Delta from the generated input.

``customer_currencies`` (``c_custkey`` BIGINT, ``n_name`` STRING, ``currency``
STRING: the customer's nation's ISO 4217 currency) and ``part`` (``p_partkey``
BIGINT, ``p_name``, ``p_brand``, ``p_type`` STRING, ``p_size`` INT,
``p_retailprice`` DECIMAL(15, 2)) at ``<lakehouse>/<name>``, replaced on
every materialisation (Delta keeps the earlier versions).
"""

from collections.abc import Iterable

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DecimalType, IntegerType, LongType, StringType, StructField, StructType

from dagster_project.resources import LakehouseResource, SparkResource, TpchResource
from streamjoin.datagen.tpch import customer_currencies as customer_currency_rows
from streamjoin.datagen.tpch import parts

__all__ = ["customer_currencies", "part", "rows_frame", "CUSTOMER_CURRENCIES_SCHEMA", "PART_SCHEMA"]

CUSTOMER_CURRENCIES_SCHEMA = StructType([
    StructField("c_custkey", LongType(), False),
    StructField("n_name", StringType()),
    StructField("currency", StringType()),
])

PART_SCHEMA = StructType([
    StructField("p_partkey", LongType(), False),
    StructField("p_name", StringType()),
    StructField("p_brand", StringType()),
    StructField("p_type", StringType()),
    StructField("p_size", IntegerType()),
    StructField("p_retailprice", DecimalType(15, 2)),
])


def rows_frame(spark: SparkSession, rows: Iterable[dict], schema: StructType) -> DataFrame:
    """A batch DataFrame of ``schema`` from dict rows (column name → value)."""
    return spark.createDataFrame([tuple(r[f.name] for f in schema.fields) for r in rows], schema)


def _write(spark: SparkResource, lakehouse: LakehouseResource, name: str, rows: list[dict], schema: StructType) -> MaterializeResult:
    path = lakehouse.lakehouse().table_path(name)
    df = rows_frame(spark.session(), rows, schema)
    df.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)
    return MaterializeResult(metadata={"path": MetadataValue.path(path), "rows": len(rows)})


@asset(group_name="lakehouse", kinds={"delta", "spark"},
       description="Each TPC-H customer's nation and its currency (ISO 4217), looked up by `orders_in_eur`.")
def customer_currencies(context: AssetExecutionContext, spark: SparkResource, lakehouse: LakehouseResource, tpch: TpchResource) -> MaterializeResult:
    return _write(spark, lakehouse, "customer_currencies", customer_currency_rows(tpch.changelog().data_dir), CUSTOMER_CURRENCIES_SCHEMA)


@asset(group_name="lakehouse", kinds={"delta", "spark"},
       description="The TPC-H part table (type, brand, retail price), looked up by `part_price_over`.")
def part(context: AssetExecutionContext, spark: SparkResource, lakehouse: LakehouseResource, tpch: TpchResource) -> MaterializeResult:
    return _write(spark, lakehouse, "part", parts(tpch.changelog().data_dir), PART_SCHEMA)
