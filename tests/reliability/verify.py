"""What a kill/restart trial checks at the end: the sink table against the batch query, and its changelog table.

:func:`verify` compares, after the final catch-up run:

- the Delta table with :func:`streamjoin.batch.batch_query` over every record the topics hold (the
  final inputs), as multisets: rows only in the table are *duplicates* (a change applied twice or a
  wrong row), rows only in the batch query are *missing*;
- ``<table>_changelog`` (docs/semantics.md §7): each micro-batch appended once (one ``_processing_time``
  per ``_batch_id``: an append replayed under the same batch id would carry its own), its Kafka end
  offsets never going back as batch ids grow (a batch re-read under a new id), and the changelog folded
  to each primary key's last change (``_batch_id``, then ``_seq``) equal to the table (no batch missing).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from checks.expectations import table_difference
from streamjoin.batch import batch_query
from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN
from streamjoin.pipeline import Lakehouse
from streamjoin.planner.pipelines import SqlPipeline
from streamjoin.sink.delta import BATCH_ID_COLUMN, PROCESSING_TIME_COLUMN, SOURCE_OFFSETS_COLUMN

__all__ = ["Verdict", "changelog_batches_twice", "offsets_going_back", "verify"]


@dataclass(frozen=True)
class Verdict:
    """The end state of one trial.

    Attributes:
        rows_expected: rows of the batch query.
        rows_in_delta: rows of the sink table.
        duplicates: rows only in the table (multiset difference).
        missing: rows only in the batch query.
        batches_twice: batch ids appended to the changelog more than once.
        offsets_back: batch ids whose end offset of some topic partition is below an earlier batch's.
        changelog_vs_table: rows differing between the folded changelog and the table (both ways).
    """

    rows_expected: int
    rows_in_delta: int
    duplicates: int
    missing: int
    batches_twice: list[int] = field(default_factory=list)
    offsets_back: list[int] = field(default_factory=list)
    changelog_vs_table: int = 0

    @property
    def ok(self) -> bool:
        return not (
            self.duplicates or self.missing or self.batches_twice or self.offsets_back or self.changelog_vs_table
        )


def changelog_batches_twice(changelog: DataFrame) -> list[int]:
    """Batch ids of ``changelog`` (a ``<table>_changelog`` frame) whose rows carry more than one
    ``_processing_time``."""
    rows = (
        changelog.groupBy(BATCH_ID_COLUMN)
        .agg(F.countDistinct(PROCESSING_TIME_COLUMN).alias("appends"))
        .where("appends > 1")
        .collect()
    )
    return sorted(r[BATCH_ID_COLUMN] for r in rows)


def offsets_going_back(changelog: DataFrame) -> list[int]:
    """Batch ids whose ``_source_offsets`` (JSON array of ``{topic: {partition: offset}}``) has an offset below
    the same topic partition's offset in an earlier batch id."""
    rows = changelog.select(BATCH_ID_COLUMN, SOURCE_OFFSETS_COLUMN).distinct().orderBy(BATCH_ID_COLUMN).collect()
    highest: dict[tuple[int, str, str], int] = {}
    back = []
    for row in rows:
        for source, offsets in enumerate(json.loads(row[SOURCE_OFFSETS_COLUMN] or "[]")):
            for topic, partitions in (offsets or {}).items():
                if not isinstance(partitions, dict):
                    continue  # not a Kafka source (the end-of-input control stream)
                for partition, offset in partitions.items():
                    key = (source, topic, partition)
                    if offset < highest.get(key, -1):
                        back.append(row[BATCH_ID_COLUMN])
                    highest[key] = max(offset, highest.get(key, -1))
    return sorted(set(back))


def _folded(changelog: DataFrame, key: list[str], columns: list[str]) -> DataFrame:
    """Each key's last change (``_batch_id``, ``_seq``), kept when it is a ``+I``/``+U``: what the upsert writer
    applies."""
    order = Window.partitionBy(*key).orderBy(F.col(BATCH_ID_COLUMN).desc(), F.col(SEQ_COLUMN).desc())
    return (
        changelog.withColumn("_n", F.row_number().over(order))
        .where(f"_n = 1 AND {ROWKIND_COLUMN} IN ('+I', '+U')")
        .select(*columns)
    )


def verify(spark: SparkSession, pipeline: SqlPipeline, bootstrap_servers: str, lakehouse: Lakehouse) -> Verdict:
    """Check ``pipeline``'s sink and changelog tables in ``lakehouse`` after a final catch-up run (module docstring).

    Args:
        pipeline: the SQL pipeline the trial ran.
        bootstrap_servers: the broker holding the final inputs.

    Returns:
        A :class:`Verdict`; ``verdict.ok`` is False on any loss, duplicate or changelog defect.
    """
    sink = pipeline.sink(lakehouse)
    expected = batch_query(pipeline, spark, bootstrap_servers, lakehouse).cache()
    actual = spark.read.format("delta").load(sink.path).cache()
    changelog = spark.read.format("delta").load(sink.changelog_path).cache()
    try:
        sides = {
            r["_where"]: r["count"] for r in table_difference(actual, expected).groupBy("_where").count().collect()
        }
        folded = _folded(changelog, list(sink.primary_key), actual.columns)
        return Verdict(
            rows_expected=expected.count(),
            rows_in_delta=actual.count(),
            duplicates=sides.get("only in actual", 0),
            missing=sides.get("only in expected", 0),
            batches_twice=changelog_batches_twice(changelog),
            offsets_back=offsets_going_back(changelog),
            changelog_vs_table=table_difference(folded, actual).count(),
        )
    finally:
        for frame in (expected, actual, changelog):
            frame.unpersist()
