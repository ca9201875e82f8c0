"""Source tables for the batch query: a Kafka topic's retained records as a changelog, then as a table.

The records are read in batch (Spark's Kafka source, earliest to latest offset) and decoded by the
same format decoders the streaming source uses (:func:`streamjoin.connectors.formats.decode`); a
record the decoder makes a dead letter is left out, as the streaming path leaves it out. From the
changelog, this module builds what the batch query reads (docs/semantics.md §1.4, §1.8, §4.1):

- :func:`final_table`: the table after every change, the batch meaning of materialising a
  changelog (Flink's ``ChangelogNormalize`` / sink materializer);
- :func:`versions`: a versioned table's versions with their validity interval, for an event-time
  temporal join;
- :func:`watermark`: the watermark a streaming run reaches once it has read the same records.

A changelog here is a DataFrame of the table's physical columns plus ``_rowkind`` (STRING, ``+I``
``-U`` ``+U`` ``-D``), ``_partition`` (INT) and ``_seq`` (LONG, the change's order in its partition:
Kafka offset × changes per record + the change's index in its record).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind
from streamjoin.connectors.formats import CHANGES, ERROR, changes_per_record, decode
from streamjoin.connectors.kafka_client import Cluster, as_connection
from streamjoin.planner.catalog import TableDef
from streamjoin.planner.expressions import flink_functions

__all__ = [
    "DELETED",
    "PARTITION_COLUMN",
    "VALID_TO",
    "final_table",
    "read_changelog",
    "versions",
    "watermark",
    "with_computed",
]

#: INT: the Kafka partition a change was read from.
PARTITION_COLUMN = "_partition"
#: TIMESTAMP: the next version's time (exclusive), NULL for the newest version of a key.
VALID_TO = "__valid_to"
#: BOOLEAN: the version is a delete (``-D``): no row is valid from its time on.
DELETED = "__deleted"

_ACCUMULATE = (RowKind.INSERT.value, RowKind.UPDATE_AFTER.value)
_ORDER = (PARTITION_COLUMN, SEQ_COLUMN)


def read_changelog(spark: SparkSession, table: TableDef, cluster: Cluster) -> DataFrame:
    """Every retained record of a ``kafka`` / ``upsert-kafka`` table's topic, decoded into changes.

    Args:
        table: the declared table (its topic, format and ``properties.*`` options).
        cluster: the Kafka cluster (:class:`~streamjoin.connectors.kafka_client.KafkaConnection` or servers); the
            table's own ``properties.*`` win over its security settings.

    Returns:
        A changelog (module docstring): the physical columns, ``_rowkind``, ``_partition``, ``_seq``;
        dead letters and skipped records (tombstones of a CDC format, filtered canal records) left out.
    """
    source = table.kafka_source()
    reader = (
        spark.read.format("kafka")
        .options(**as_connection(cluster).spark_options())
        .option("subscribe", source.topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
    )
    for key, value in source.options.items():
        if key.startswith("kafka."):  # the client settings (SASL/SSL); offsets are the batch's own
            reader = reader.option(key, value)
    decoded = decode(reader.load(), source)
    return (
        decoded.where(F.col(ERROR).isNull())
        .select("partition", "offset", F.explode(CHANGES).alias("c"))
        .select(
            *[F.col(f"c.values.{name}").alias(name) for name in source.schema.names],
            F.col("c.kind").alias(ROWKIND_COLUMN),
            F.col("partition").alias(PARTITION_COLUMN),
            (F.col("offset") * changes_per_record(source.format) + F.col("c.i")).alias(SEQ_COLUMN),
        )
    )


def with_computed(changelog: DataFrame, table: TableDef) -> DataFrame:
    """``changelog`` with the table's computed columns (``pt AS PROCTIME()``, ``total AS price * qty``) added
    in declaration order; a ``PROCTIME()`` column is the batch query's timestamp."""
    for column in table.columns:
        if column.computed is not None:
            spark_sql = column.computed.copy().transform(flink_functions).sql(dialect="spark")
            changelog = changelog.withColumn(column.name, F.expr(spark_sql))
    return changelog


def final_table(changelog: DataFrame, table: TableDef) -> DataFrame:
    """The table a changelog leaves once every change is applied (docs/semantics.md §1.4, §1.8).

    - insert-only source: every row (a declared primary key is not enforced, as in Flink);
    - with a primary key: per key, the last change in ``(_partition, _seq)`` order; the key is there when
      that change is ``+I``/``+U`` and gone when it is ``-D``/``-U`` (Flink's ``ChangelogNormalize``:
      a retraction clears the key's state). Duplicate upserts and tombstones need no special case;
    - without a primary key: a multiset; each ``+I``/``+U`` adds the row, each ``-U``/``-D`` removes one
      equal row (rows retracted more often than added are absent).

    Args:
        changelog: module docstring's columns, the table's computed columns included or not.
        table: the declared table (its primary key and source RowKinds).

    Returns:
        ``changelog``'s columns without ``_rowkind``, ``_partition``, ``_seq``.
    """
    columns = [c for c in changelog.columns if c not in (ROWKIND_COLUMN, *_ORDER)]
    accumulate = F.col(ROWKIND_COLUMN).isin(*_ACCUMULATE)
    if table.source_kinds == frozenset({RowKind.INSERT}):
        return changelog.where(accumulate).select(*columns)
    if table.primary_key:
        last = Window.partitionBy(*table.primary_key).orderBy(*[F.col(c).desc() for c in _ORDER])
        return (
            changelog.withColumn("__n", F.row_number().over(last))
            .where((F.col("__n") == 1) & accumulate)
            .select(*columns)
        )
    net = changelog.groupBy(*columns).agg(F.sum(F.when(accumulate, 1).otherwise(-1)).alias("__n")).where("__n > 0")
    return net.select(*columns, F.explode(F.array_repeat(F.lit(0), F.col("__n").cast("int")))).select(*columns)


def versions(changelog: DataFrame, table: TableDef) -> DataFrame:
    """The versions of a versioned table (docs/semantics.md §4.1-4.2): its ``+I``/``+U``/``-D`` changes (``-U`` is
    dropped, as the temporal join operator drops it), each valid from its rowtime until the key's next version.
    Of versions at one time the later change wins: the earlier one is valid over an empty interval.

    Args:
        changelog: module docstring's columns with the table's computed columns; ``table`` has a primary key
            and a rowtime.

    Returns:
        The table's columns + :data:`VALID_TO` (TIMESTAMP, NULL for the newest) + :data:`DELETED` (BOOLEAN).
    """
    columns = [c for c in changelog.columns if c not in (ROWKIND_COLUMN, *_ORDER)]
    rowtime = table.rowtime
    assert rowtime is not None  # a versioned table has one
    order = Window.partitionBy(*table.primary_key).orderBy(rowtime, *_ORDER)
    return (
        changelog.where(F.col(ROWKIND_COLUMN) != RowKind.UPDATE_BEFORE.value)
        .withColumn(VALID_TO, F.lead(rowtime).over(order))
        .withColumn(DELETED, F.col(ROWKIND_COLUMN) == RowKind.DELETE.value)
        .select(*columns, VALID_TO, DELETED)
    )


def watermark(spark: SparkSession, changelogs: dict[str, tuple[DataFrame, TableDef]]) -> DataFrame:
    """The watermark a streaming run reaches after reading these changelogs (docs/semantics.md §8): per table
    with a ``WATERMARK``, ``max(rowtime) - delay`` over every change (a source's watermark sees every row);
    over the tables, the smallest (Spark's global ``min`` policy); a table without rows holds none.

    Args:
        changelogs: table name → (changelog with computed columns, its declaration).

    Returns:
        One row, one column ``wm`` (TIMESTAMP; NULL when no table with a watermark has a row).
    """
    maxima = [
        df.select(F.timestamp_millis(F.unix_millis(F.max(declared.column)) - F.lit(declared.delay_ms)).alias("wm"))
        for df, table in changelogs.values()
        if (declared := table.watermark) is not None
    ]
    if not maxima:
        return spark.range(1).select(F.lit(None).cast("timestamp").alias("wm"))
    union = maxima[0]
    for other in maxima[1:]:
        union = union.unionByName(other)
    return union.agg(F.min("wm").alias("wm"))
