"""The TPC-H dimension tables as Spark rows: their schemas and a rows-to-DataFrame helper.

``customer_currencies`` (``c_custkey`` BIGINT NOT NULL, ``n_name`` STRING, ``currency`` STRING:
the customer's nation's ISO 4217 currency) and ``part`` (``p_partkey`` BIGINT NOT NULL,
``p_name``, ``p_brand``, ``p_type`` STRING, ``p_size`` INT, ``p_retailprice`` DECIMAL(15, 2)),
from :func:`~streamjoin.datagen.tpch.customer_currencies` and :func:`~streamjoin.datagen.tpch.parts`.
The Dagster assets write them to Delta; the checks rebuild them for their batch queries.
"""

from collections.abc import Iterable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DecimalType, IntegerType, LongType, StringType, StructField, StructType

__all__ = ["CUSTOMER_CURRENCIES_SCHEMA", "PART_SCHEMA", "rows_frame"]

CUSTOMER_CURRENCIES_SCHEMA = StructType(
    [
        StructField("c_custkey", LongType(), False),
        StructField("n_name", StringType()),
        StructField("currency", StringType()),
    ]
)

PART_SCHEMA = StructType(
    [
        StructField("p_partkey", LongType(), False),
        StructField("p_name", StringType()),
        StructField("p_brand", StringType()),
        StructField("p_type", StringType()),
        StructField("p_size", IntegerType()),
        StructField("p_retailprice", DecimalType(15, 2)),
    ]
)


def rows_frame(spark: SparkSession, rows: Iterable[dict], schema: StructType) -> DataFrame:
    """A batch DataFrame of ``schema`` from dict rows (column name → value; every column of ``schema`` present)."""
    return spark.createDataFrame([tuple(r[f.name] for f in schema.fields) for r in rows], schema)
