"""End to end Kafka → Delta: each ``sql/`` pipeline beside a passthrough query on the same topics.

The TPC-H changelog (with updates and deletes, as ``make demo`` loads it) goes into the topics of
``sql/catalog/tpch.sql`` on a fresh embedded broker; the dimension tables the lookup joins read are
written to a fresh lakehouse. Each pipeline then runs as ``make demo`` runs it
(:func:`streamjoin.pipeline.run_pipeline`, ``availableNow``, the Delta upsert writer and the
dead-letter query), and beside it the limit: a passthrough query reading the same topics, decoding
them into changelog rows as the pipeline does, and appending them to a Delta table (no operator,
no MERGE). Rows/s are the records on the pipeline's topics per wall-clock second of the run, start included.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from assets.sql_pipelines import load_sql_pipelines
from bench.harness import Measurement, failed, from_progress, measure
from streamjoin.changelog import ROWKIND_COLUMN
from streamjoin.config import local_dir
from streamjoin.connectors.embedded_kafka import EmbeddedKafka
from streamjoin.connectors.kafka import KafkaSource, changelog_rows, decode, read_kafka
from streamjoin.datagen.dimensions import CUSTOMER_CURRENCIES_SCHEMA, PART_SCHEMA, rows_frame
from streamjoin.datagen.topics import load_topics
from streamjoin.datagen.tpch import TpchChangelog, customer_currencies, generate_tpch, parts
from streamjoin.pipeline import Lakehouse, run_pipeline

__all__ = ["passthrough", "run_pipelines", "write_dimensions"]


def write_dimensions(spark: SparkSession, data_dir: Path, lake: Lakehouse) -> None:
    """Write the Delta tables the pipelines' lookup joins read, ``customer_currencies`` and ``part``, from the
    TPC-H folder ``data_dir`` (:func:`~streamjoin.datagen.tpch.generate_tpch`) into ``lake``."""
    rows_frame(spark, customer_currencies(data_dir), CUSTOMER_CURRENCIES_SCHEMA).write.format("delta").save(
        lake.table_path("customer_currencies")
    )
    rows_frame(spark, parts(data_dir), PART_SCHEMA).write.format("delta").save(lake.table_path("part"))


def passthrough(spark: SparkSession, sources: list[KafkaSource], bootstrap: str) -> DataFrame:
    """The sources' changelog rows, unioned as ``source``, ``_rowkind`` and the row as JSON text (STRING)."""
    frames = [
        changelog_rows(decode(read_kafka(spark, s, bootstrap), s), s).select(
            F.lit(s.name).alias("source"),
            ROWKIND_COLUMN,
            F.to_json(F.struct(*s.schema.names)).alias("row"),
        )
        for s in sources
    ]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union


def run_pipelines(spark: SparkSession, scale_factor: float, workdir: Path) -> list[tuple[Measurement, Measurement]]:
    """Load the topics at ``scale_factor``, then run each ``sql/`` pipeline and its passthrough.

    Returns:
        ``(pipeline, passthrough)`` figures per pipeline, in ``sql/`` file order.
    """
    tpch = TpchChangelog(generate_tpch(local_dir("tpch"), scale_factor))  # updates and deletes, as make demo's
    lake = Lakehouse(str(workdir / "lakehouse"))
    write_dimensions(spark, tpch.data_dir, lake)
    shutil.rmtree(workdir / "kafka", ignore_errors=True)
    results = []
    with EmbeddedKafka(workdir / "kafka") as broker:
        bootstrap = broker.bootstrap_servers
        records = load_topics(bootstrap, tpch)
        print("Kafka records per topic: " + ", ".join(f"{t} {n:,}" for t, n in records.items()), flush=True)
        for definition in load_sql_pipelines():
            pipeline = definition.pipeline
            progress = []
            start = time.perf_counter()
            try:
                # Records on its topics, not run_pipeline's records_read: that counts a topic once per scan.
                run_pipeline(pipeline, spark, lake, bootstrap, on_progress=progress.append)
                ours = from_progress(
                    f"pipeline {pipeline.name}",
                    progress,
                    time.perf_counter() - start,
                    input_rows=sum(records[t] for t in {s.topic for s in pipeline.sources}),
                )
            except Exception as e:  # noqa: BLE001 - recorded in the table; the other pipelines go on
                ours = failed(f"pipeline {pipeline.name}", e)
            try:
                limit = measure(
                    f"passthrough {pipeline.name}",
                    passthrough(spark, list(pipeline.sources), bootstrap),
                    Path(lake.checkpoint(f"passthrough_{pipeline.name}", "main")),
                    sink="delta",
                    path=lake.table_path(f"passthrough_{pipeline.name}"),
                )
            except Exception as e:  # noqa: BLE001 - recorded in the table, as the pipeline's failure is
                limit = failed(f"passthrough {pipeline.name}", e)
            print(
                f"{pipeline.name}: {ours.rows_per_second:,.0f} records/s, passthrough {limit.rows_per_second:,.0f}",
                flush=True,
            )
            results.append((ours, limit))
    return results
