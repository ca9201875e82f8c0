"""The benchmark's input: TPC-H ``orders``, ``lineitem`` and the ECB ``rates`` cut into aligned micro-batches.

Each table is cut, in event-time order, into ``batches`` slices; slice *i* of
every table forms micro-batch *i*. ``orders`` and ``lineitem`` are cut into
equal slices; the rates are aligned in time with the orders' slices (batch *i*
holds the rates up to the latest ``o_ordertime`` of orders slice *i*, the last
batch also every later rate), so the combined watermark of a temporal join
moves with the orders. The same rows feed every engine: as one Parquet file per
micro-batch for Spark (:func:`spark_streams`) and as one CSV file per table for
Flink (:func:`write_csv`).

Two columns are added to the TPC-H rows so that every query reads these three
tables only: ``o_currency`` (the customer's currency, the temporal join's key)
and ``p_type`` (the part's type, the OVER aggregation's partition key).
"""

from __future__ import annotations

import csv
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from streamjoin.config import local_dir
from streamjoin.connectors.changelog_files import read_changelog_files, write_changelog_batches
from streamjoin.datagen.topics import LINEITEM, ORDERS, RATES, rate_rows
from streamjoin.datagen.tpch import TpchChangelog, customer_currencies, generate_tpch, parts

__all__ = ["BenchTable", "bench_tables", "equal_slices", "flink_ddl", "spark_streams", "tpch_changelog", "write_csv"]


@dataclass(frozen=True)
class BenchTable:
    """One input table: its columns, rowtime, watermark delay (ms), unique key and rows per micro-batch (dicts)."""

    name: str
    schema: StructType
    rowtime: str
    watermark_delay_ms: int
    primary_key: tuple[str, ...]
    slices: list[list[dict]]

    def prefix(self, batches: int, rows: int | None = None) -> BenchTable:
        """The first ``batches`` micro-batches, each cut to its first ``rows`` rows when given."""
        return BenchTable(
            self.name,
            self.schema,
            self.rowtime,
            self.watermark_delay_ms,
            self.primary_key,
            [s[:rows] for s in self.slices[:batches]],
        )

    @property
    def rows(self) -> int:
        return sum(len(s) for s in self.slices)


def tpch_changelog(scale_factor: float) -> TpchChangelog:
    """The insert-only TPC-H changelog (no updates, no deletes) of ``scale_factor``.

    Generated once under ``.local/tpch``. ``.orders`` / ``.lineitems`` are the rows (dicts) in event-time order;
    ``.data_dir`` holds the tables' Parquet files.
    """
    return TpchChangelog(generate_tpch(local_dir("tpch"), scale_factor), update_fraction=0, delete_fraction=0)


def equal_slices(rows: Sequence, batches: int) -> list[list]:
    """``rows`` cut, in their order, into ``batches`` slices of equal size (the last may be shorter or empty)."""
    size = -(-len(rows) // batches)
    return [list(rows[i * size : (i + 1) * size]) for i in range(batches)]


def _aligned_rates(rates: list[dict], order_slices: list[list[dict]]) -> list[list[dict]]:
    slices, start = [], 0  # rates in rate_time order
    for index, rows in enumerate(order_slices):
        end = start
        if index == len(order_slices) - 1:
            end = len(rates)
        elif rows:
            until = max(o["o_ordertime"] for o in rows)
            while end < len(rates) and rates[end]["rate_time"] <= until:
                end += 1
        slices.append(rates[start:end])
        start = end
    return slices


def bench_tables(tpch: TpchChangelog, batches: int) -> dict[str, BenchTable]:
    """``orders`` (+ ``o_currency``), ``lineitem`` (+ ``p_type``) and ``rates`` in ``batches`` aligned micro-batches."""
    currency = {c["c_custkey"]: c["currency"] for c in customer_currencies(tpch.data_dir)}
    part_type = {p["p_partkey"]: p["p_type"] for p in parts(tpch.data_dir)}
    orders = equal_slices([{**o, "o_currency": currency[o["o_custkey"]]} for o in tpch.orders], batches)
    items = equal_slices([{**i, "p_type": part_type[i["l_partkey"]]} for i in tpch.lineitems], batches)
    return {
        "orders": BenchTable(
            "orders",
            StructType([*ORDERS.schema.fields, StructField("o_currency", StringType())]),
            ORDERS.rowtime,
            ORDERS.watermark_delay_ms,
            ORDERS.primary_key,
            orders,
        ),
        "lineitem": BenchTable(
            "lineitem",
            StructType([*LINEITEM.schema.fields, StructField("p_type", StringType())]),
            LINEITEM.rowtime,
            LINEITEM.watermark_delay_ms,
            LINEITEM.primary_key,
            items,
        ),
        "rates": BenchTable(
            "rates",
            RATES.schema,
            RATES.rowtime,
            RATES.watermark_delay_ms,
            ("currency",),
            _aligned_rates(rate_rows(tpch.period), orders),
        ),
    }


def spark_streams(
    spark: SparkSession, tables: dict[str, BenchTable], folder: Path
) -> dict[str, Callable[[], DataFrame]]:
    """Write each table as ``+I`` changes, one Parquet file per micro-batch, under ``folder/<table>``.

    Returns:
        ``{table: build}``; ``build()`` returns a fresh stream (the table's columns + ``_rowkind`` + ``_seq``,
        watermarked on its rowtime) that reads one micro-batch per trigger.
    """
    builders = {}
    for table in tables.values():
        batches = [[("+I", tuple(r[c] for c in table.schema.names)) for r in rows] for rows in table.slices]
        write_changelog_batches(folder / table.name, table.schema, batches)
        builders[table.name] = lambda t=table: read_changelog_files(
            spark, folder / t.name, t.schema, rowtime=t.rowtime, watermark_delay_ms=t.watermark_delay_ms
        )
    return builders


def _csv_value(value):
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return str(value)


def write_csv(table: BenchTable, folder: Path) -> Path:
    """All rows of ``table``, in micro-batch order, as one CSV file ``folder/<table>/part-0.csv`` (no header)."""
    path = folder / table.name / "part-0.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        for rows in table.slices:
            writer.writerows([_csv_value(r[c]) for c in table.schema.names] for r in rows)
    return path.parent


_FLINK_TYPES = {
    LongType: "BIGINT",
    IntegerType: "INT",
    StringType: "STRING",
    DateType: "DATE",
    TimestampType: "TIMESTAMP(3)",
    TimestampNTZType: "TIMESTAMP(3)",
}


def _flink_interval(ms: int) -> str:
    seconds, ms = divmod(ms, 1000)
    days, seconds = divmod(seconds, 86_400)
    return f"INTERVAL '{days} {seconds // 3600:02}:{seconds // 60 % 60:02}:{seconds % 60:02}.{ms:03}' DAY TO SECOND(3)"


def flink_ddl(table: BenchTable, folder: Path) -> str:
    """Flink's ``CREATE TABLE`` of ``table`` read from the CSV files in ``folder`` (filesystem connector,
    bounded), with the same watermark and, for ``rates``, the primary key a versioned table needs."""
    columns = [
        f"`{f.name}` DECIMAL({f.dataType.precision}, {f.dataType.scale})"
        if isinstance(f.dataType, DecimalType)
        else f"`{f.name}` {_FLINK_TYPES[type(f.dataType)]}"
        for f in table.schema.fields
    ]
    columns.append(
        f"WATERMARK FOR `{table.rowtime}` AS `{table.rowtime}` - {_flink_interval(table.watermark_delay_ms)}"
    )
    if table.name == "rates":
        columns.append(f"PRIMARY KEY ({', '.join(table.primary_key)}) NOT ENFORCED")
    return (
        f"CREATE TEMPORARY TABLE {table.name} (\n  " + ",\n  ".join(columns) + "\n) WITH ("
        f"'connector' = 'filesystem', 'path' = '{folder}', 'format' = 'csv')"
    )
