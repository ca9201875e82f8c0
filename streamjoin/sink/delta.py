"""Delta sink: the upsert writer, the raw changelog table and dead letters (docs/semantics.md §7).

Per micro-batch (``foreachBatch``), :class:`DeltaUpsertWriter`

1. appends the batch's changes to ``<table>_changelog`` (RowKind, ``_seq``,
   batch id, the batch's source offsets, processing time), and
2. collapses each primary key's changes in changelog order (``_seq``) to the
   last one and applies them with one Delta ``MERGE``: ``+I``/``+U`` upsert,
   ``-U``/``-D`` delete. When the primary key holds the partition columns, the
   MERGE reads only the partitions of the batch's rows.

A micro-batch without changes (one that only moved the watermark) writes nothing.
Both writes are idempotent per micro-batch: they carry Delta's transaction
identifiers (``txnAppId`` = the sink's name and the checkpoint's query id,
``txnVersion`` = batch id), so a batch replayed after a crash between the Delta
commit and the checkpoint commit changes nothing. A new checkpoint (deleted or
reset) is a new query id: its batch ids start again at 0 and are written, not
skipped as already committed. With Kafka offsets in the checkpoint this gives exactly-once
results end to end. :func:`checkpoint_reset` tells when a query starts on another checkpoint than
the one that last wrote the sink (a reset or deleted checkpoint: the stream starts over on a table
that already holds its results).

The upsert table has Change Data Feed on. Paths are any Spark-supported URI
(local folder, ``s3a://``, ``abfss://``...).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark import InheritableThread
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType, TimestampType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, with_seq_path
from streamjoin.checkpoint import Checkpoint, HadoopFiles
from streamjoin.connectors.formats import sql_string
from streamjoin.errors import SinkError

__all__ = [
    "CHANGELOG_METADATA",
    "DeltaAppendWriter",
    "DeltaSink",
    "DeltaUpsertWriter",
    "checkpoint_reset",
    "checkpoint_shuffle_partitions",
    "commit_metrics",
    "create_sink_tables",
    "last_writer",
    "merge_warning",
    "table_version",
]

BATCH_ID_COLUMN = "_batch_id"
SOURCE_OFFSETS_COLUMN = "_source_offsets"
PROCESSING_TIME_COLUMN = "_processing_time"

#: Columns the changelog table adds to the sink's columns.
CHANGELOG_METADATA = StructType(
    [
        StructField(ROWKIND_COLUMN, StringType(), False),
        StructField(SEQ_COLUMN, BinaryType(), False),
        StructField(BATCH_ID_COLUMN, LongType(), False),
        StructField(SOURCE_OFFSETS_COLUMN, StringType(), True),
        StructField(PROCESSING_TIME_COLUMN, TimestampType(), False),
    ]
)


class _Write(InheritableThread):
    """A write on its own thread, with the job properties of the thread that starts it (the streaming query's
    job group: stopping the query cancels the write's jobs too); ``error`` holds what it raised."""

    def __init__(self, write, *args) -> None:
        self.error: BaseException | None = None

        def run() -> None:
            try:
                write(*args)
            except BaseException as e:  # noqa: BLE001 - re-raised on the starting thread
                self.error = e

        super().__init__(run, daemon=True)


@dataclass(frozen=True)
class DeltaSink:
    """A Delta sink table with a primary key (Flink's sink ``PRIMARY KEY ... NOT ENFORCED``).

    Args:
        name: table name; also the default Delta transaction app id.
        path: location of the upsert table.
        primary_key: the upsert key columns (non-empty).
        changelog_path: location of the raw changelog table; ``<path>_changelog`` by default.
        partition_by: the columns both tables are partitioned by (the sink's ``PARTITIONED BY``), empty for none.
    """

    name: str
    path: str
    primary_key: tuple[str, ...]
    changelog_path: str = ""
    partition_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.primary_key:
            raise SinkError(f"sink {self.name}: an upsert sink needs a PRIMARY KEY")
        if not self.changelog_path:
            object.__setattr__(self, "changelog_path", f"{self.path}_changelog")

    @property
    def prunes_merge(self) -> bool:
        """Whether each micro-batch's MERGE reads only the partitions of its batch's rows: when the primary key
        holds every partition column (Paimon's rule for a partitioned primary-key table), a key's row can only be
        in its own partition. Otherwise a key's row may have moved between partitions (an upsert changelog
        carries no ``-U`` with the old partition value) and the MERGE reads the whole table (docs/semantics.md §7.3)."""
        return bool(self.partition_by) and set(self.partition_by) <= set(self.primary_key)

    def merge_warning(self) -> str | None:
        """A warning for a partitioned sink whose MERGE reads the whole table (:attr:`prunes_merge`), else None
        (:func:`merge_warning`)."""
        return merge_warning(self.name, self.primary_key, self.partition_by)


def merge_warning(sink: str, primary_key: Sequence[str], partition_by: Sequence[str]) -> str | None:
    """The warning for a sink ``PARTITIONED BY`` columns its primary key does not hold: every micro-batch's MERGE then
    reads the whole table (:attr:`DeltaSink.prunes_merge`); None when the key holds them all (or there are none).

    A function of the table's declaration only, so that ``streamjoin explain`` says it before anything runs.
    """
    missing = ", ".join(c for c in partition_by if c not in primary_key)
    if not missing:
        return None
    return (
        f"sink {sink}: PARTITIONED BY ({', '.join(partition_by)}) but its PRIMARY KEY "
        f"({', '.join(primary_key)}) does not hold {missing}: every micro-batch's MERGE reads every "
        f"partition of the table; when {missing} is a function of the key, add it to the key "
        f"(docs/semantics.md §7.3)"
    )


def create_sink_tables(spark: SparkSession, sink: DeltaSink, schema: StructType) -> None:
    """Create the upsert table (Change Data Feed on) and the changelog table if they do not exist,
    both partitioned by ``sink.partition_by``.

    Args:
        schema: the sink's columns (without ``_rowkind``/``_seq``).

    Raises:
        SinkError: when a primary-key or partition column is not in ``schema``, or when the changelog table
            exists with a LONG ``_seq`` (written before ``_seq`` became a path).
    """
    for what, columns in (("primary key", sink.primary_key), ("partition", sink.partition_by)):
        missing = [k for k in columns if k not in schema.names]
        if missing:
            raise SinkError(f"sink {sink.name}: {what} column(s) {missing} not among the columns {schema.names}")
    (
        DeltaTable.createIfNotExists(spark)
        .location(sink.path)
        .addColumns(schema)
        .partitionedBy(*sink.partition_by)
        .property("delta.enableChangeDataFeed", "true")
        .execute()
    )
    if DeltaTable.isDeltaTable(spark, sink.changelog_path):
        found = DeltaTable.forPath(spark, sink.changelog_path).toDF().schema
        if SEQ_COLUMN in found.names and not isinstance(found[SEQ_COLUMN].dataType, BinaryType):
            raise SinkError(
                f"sink {sink.name}: its changelog table {sink.changelog_path} has {SEQ_COLUMN} "
                f"{found[SEQ_COLUMN].dataType.simpleString()}, written before {SEQ_COLUMN} became a BINARY path "
                "(docs/semantics.md §1.1); remove that table, the sink table and the pipeline's checkpoint to rebuild"
            )
    (
        DeltaTable.createIfNotExists(spark)
        .location(sink.changelog_path)
        .addColumns(StructType(list(schema.fields) + list(CHANGELOG_METADATA.fields)))
        .partitionedBy(*sink.partition_by)
        .execute()
    )


def table_version(spark: SparkSession, path: str) -> int:
    """The latest version of the Delta table at ``path``; -1 when there is no Delta table there."""
    if not DeltaTable.isDeltaTable(spark, path):
        return -1
    latest = DeltaTable.forPath(spark, path).history(1).first()
    assert latest is not None  # a Delta table has a commit
    return latest["version"]


def commit_metrics(spark: SparkSession, path: str, after_version: int, operations: tuple[str, ...]) -> dict[str, int]:
    """Delta's operation metrics summed over the table's commits after ``after_version`` of one of ``operations``.

    Reads only the transaction log (``DESCRIBE HISTORY``), never the data. Keys are Delta's
    ``operationMetrics`` names, e.g. ``numTargetRowsInserted`` / ``numTargetRowsUpdated`` /
    ``numTargetRowsDeleted`` (``MERGE``) or ``numOutputRows`` (``WRITE``, ``STREAMING UPDATE``); rows, bytes, ms.
    Empty when no such commit.
    """
    latest = table_version(spark, path)
    if latest <= after_version:
        return {}
    totals: dict[str, int] = {}
    for commit in DeltaTable.forPath(spark, path).history(latest - after_version).collect():
        if commit["version"] > after_version and commit["operation"] in operations:
            for key, value in (commit["operationMetrics"] or {}).items():
                if value.isdigit():
                    totals[key] = totals.get(key, 0) + int(value)
    return totals


def _checkpoint(spark: SparkSession, checkpoint: str) -> Checkpoint:
    return Checkpoint(checkpoint, HadoopFiles.of_session(spark))


def _batch_offsets(spark: SparkSession, checkpoint: str, batch_id: int) -> str | None:
    """The end offsets of micro-batch ``batch_id`` from the checkpoint's offset log, as a JSON array (one value per
    source, null for a source without offsets; :meth:`streamjoin.checkpoint.Checkpoint.batch_offsets`)."""
    offsets = _checkpoint(spark, checkpoint).batch_offsets(batch_id)
    return None if offsets is None else json.dumps(offsets)


def _checkpoint_query_id(spark: SparkSession, checkpoint: str) -> str | None:
    """The streaming query id in ``<checkpoint>/metadata`` (``{"id": …}``, written when the checkpoint is created)."""
    return _checkpoint(spark, checkpoint).query_id()


def checkpoint_shuffle_partitions(spark: SparkSession, checkpoint: str) -> int | None:
    """The shuffle partitions a streaming query's checkpoint started with (its state partitions), or None for a
    checkpoint without a micro-batch yet (:meth:`streamjoin.checkpoint.Checkpoint.shuffle_partitions`)."""
    return _checkpoint(spark, checkpoint).shuffle_partitions()


#: How many of the newest Delta commits :func:`last_writer` reads.
_WRITER_COMMITS = 100


def _app_id_prefix(sink: DeltaSink) -> str:
    return f"streamjoin-{sink.name}"


def _query_app_id(spark: SparkSession, prefix: str, checkpoint: str) -> str:
    """``<prefix>-<query id>``, the query id read from the checkpoint's ``metadata``, or ``prefix`` without one."""
    query_id = _checkpoint_query_id(spark, checkpoint)
    return prefix + (f"-{query_id}" if query_id else "")


def last_writer(spark: SparkSession, sink: DeltaSink) -> str | None:
    """The ``txnAppId`` of the newest commit of the upsert table made by a :class:`DeltaUpsertWriter`
    (``streamjoin-<sink>-<query id>``), among its newest 100 commits; None when there is none (a new table, or
    only other writers such as a backfill's ``replaceWhere``). Reads the table's ``_delta_log/*.json`` commits
    (Delta's ``txn`` actions), any Hadoop file system."""
    files = HadoopFiles.of_session(spark)
    log = f"{sink.path}/_delta_log"
    commits = sorted((name for name in files.names(log) if name.endswith(".json")), reverse=True)
    for name in commits[:_WRITER_COMMITS]:
        for line in (files.read(f"{log}/{name}") or "").splitlines():
            app_id = json.loads(line).get("txn", {}).get("appId", "")
            if app_id.startswith(_app_id_prefix(sink) + "-"):
                return app_id
    return None


def checkpoint_reset(spark: SparkSession, sink: DeltaSink, checkpoint: str) -> str | None:
    """A warning when the query about to start on ``checkpoint`` is not the one that last wrote ``sink``, else None.

    That happens when the checkpoint was deleted or replaced (reset): the query starts from its sources'
    starting offsets again and re-applies changes the table already holds (the upserts land on the same
    rows; the changelog table gets them a second time).
    """
    writer = last_writer(spark, sink)
    if writer is None:
        return None
    query_id = _checkpoint_query_id(spark, checkpoint)
    if writer == f"{_app_id_prefix(sink)}-{query_id}":
        return None
    now = f"a new checkpoint at {checkpoint}" if query_id is None else f"checkpoint {checkpoint} (query {query_id})"
    return (
        f"sink {sink.name}: the checkpoint was reset: the table was last written by {writer}, this run starts on "
        f"{now}; the sources are read again from their starting offsets "
        "and the changelog table gets those changes again"
    )


class DeltaUpsertWriter:
    """The ``foreachBatch`` function that lands a changelog stream in a Delta sink.

    One idempotent MERGE per micro-batch with changes.

    Input DataFrame: the sink's columns + ``_rowkind`` (STRING) + ``_seq`` (an operator's BINARY path, or a
    source's LONG, which the changelog table keeps as its 8-byte root: ``changelog.seq_root``).
    The sink's primary key must be an upsert key of the stream (each key's
    changes ordered by ``_seq``); when it is not, put Flink's SinkUpsertMaterializer
    operator in front (:func:`~streamjoin.runtime.upsert_materializer.sink_upsert_materialize`,
    docs/semantics.md §1): that operator orders the changes, this writer only applies them.

    Args:
        sink: the target tables.
        checkpoint: the query's checkpoint location, for the source offsets of each batch.
        app_id: Delta transaction app id; stable across restarts of one query. Defaults to
            ``streamjoin-<sink>-<query id>``, the query id read from the checkpoint's ``metadata``
            file (Spark keeps it for the checkpoint's life), or ``streamjoin-<sink>`` when the
            checkpoint has none (a writer called outside a streaming query).

    A micro-batch without changes writes nothing (no Delta commit).

    Example:
        >>> stream.writeStream.foreachBatch(DeltaUpsertWriter(sink, checkpoint)).option(
        ...     "checkpointLocation", checkpoint).start()
    """

    def __init__(self, sink: DeltaSink, checkpoint: str, *, app_id: str | None = None) -> None:
        self.sink = sink
        self.checkpoint = checkpoint
        self._app_id = app_id

    def app_id(self, spark: SparkSession) -> str:
        """The Delta ``txnAppId`` of this writer's batches (see ``app_id`` above)."""
        if self._app_id is None:
            self._app_id = _query_app_id(spark, _app_id_prefix(self.sink), self.checkpoint)
        return self._app_id

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        app_id = self.app_id(spark)
        columns = [c for c in batch.columns if c not in (ROWKIND_COLUMN, SEQ_COLUMN)]
        batch = with_seq_path(batch).persist()
        try:
            # Computed here, into the cache the writes read, for two reasons. A batch replayed after a crash
            # between the Delta commit and the checkpoint commit: Delta skips both its writes (their txnVersion
            # is committed) without reading it, but Spark requires every state store to commit each batch
            # (STATE_STORE_COMMIT_VALIDATION_FAILED). And a batch without changes (a micro-batch that only
            # moved the watermark, or fired no timer that emits) writes nothing: its two Delta commits would
            # cost time and change no row.
            # A sink whose MERGE reads only the batch's partitions learns them in the same pass.
            if self.sink.prunes_merge:
                partitions = self._batch_partitions(batch)
                empty = not partitions
            else:
                partitions, empty = None, batch.count() == 0
            if empty:
                return
            changelog = batch.select(
                *columns,
                ROWKIND_COLUMN,
                SEQ_COLUMN,
                F.lit(batch_id).cast("long").alias(BATCH_ID_COLUMN),
                F.lit(_batch_offsets(spark, self.checkpoint, batch_id)).cast("string").alias(SOURCE_OFFSETS_COLUMN),
                F.current_timestamp().alias(PROCESSING_TIME_COLUMN),
            )
            if self.sink.partition_by:
                # Each task writes a file per partition value it holds: without the shuffle every task holds
                # most days of a batch that spans many (a backlog), and the files multiply. Delta's MERGE
                # shuffles its output this way itself
                # (spark.databricks.delta.merge.repartitionBeforeWrite.enabled), a plain append does not.
                changelog = changelog.repartition(*self.sink.partition_by)
            # MERGE has no writer options; Delta reads the transaction identifiers of both writes from these
            # session settings (the query's own session: Spark gives each streaming query a copy).
            spark.conf.set("spark.databricks.delta.write.txnAppId", app_id)
            spark.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
            try:
                # The two writes go to two tables, each idempotent on its own, so their order does not matter:
                # they run at once, and one's driver work (planning, log replay, commit) overlaps the other's
                # tasks.
                append = _Write(changelog.write.format("delta").mode("append").save, self.sink.changelog_path)
                append.start()
                try:
                    self._merge(spark, batch, columns, partitions)
                finally:
                    append.join()
                if append.error is not None:
                    raise append.error
            finally:
                spark.conf.unset("spark.databricks.delta.write.txnAppId")
                spark.conf.unset("spark.databricks.delta.write.txnVersion")
        finally:
            batch.unpersist()

    def _batch_partitions(self, batch: DataFrame) -> list[tuple[str | None, ...]]:
        """The distinct partition values of ``batch`` as Spark casts them to STRING (a tuple of one value per
        partition column, None for NULL); empty for a batch without rows."""
        values = batch.select(*(F.col(f"`{c}`").cast("string") for c in self.sink.partition_by)).distinct().collect()
        return [tuple(row) for row in values]

    def _merge(
        self, spark: SparkSession, batch: DataFrame, columns: list[str], partitions: list[tuple[str | None, ...]] | None
    ) -> None:
        key = list(self.sink.primary_key)
        last = (
            batch.withColumn("_n", F.row_number().over(Window.partitionBy(*key).orderBy(F.col(SEQ_COLUMN).desc())))
            .where("_n = 1")
            .drop("_n")
        )
        accumulate = f"s.{ROWKIND_COLUMN} IN ('+I', '+U')"
        values: dict[str, str | Column] = {c: f"s.`{c}`" for c in columns}
        condition = F.expr(" AND ".join(f"t.`{k}` = s.`{k}`" for k in key))
        if partitions is not None:
            # A predicate on the target's partition columns alone: Delta skips the files of every other partition
            # before it joins (a day-partitioned table that grows by a day a day would otherwise be read whole by
            # every micro-batch). The values go through STRING and back, in the session's time zone both ways; a
            # NULL one needs no partition read: its key, which holds the column, matches no row. One SQL text, not
            # a Column per value: a backlog batch spans thousands of days, and each Column is a py4j round trip.
            types = {f.name: f.dataType.simpleString() for f in batch.schema.fields}
            for i, column in enumerate(self.sink.partition_by):
                present = sorted({v for v in (p[i] for p in partitions) if v is not None})
                listed = ", ".join(f"CAST({sql_string(v)} AS {types[column]})" for v in present)
                condition = condition & (F.expr(f"t.`{column}` IN ({listed})") if present else F.lit(False))
        (
            DeltaTable.forPath(spark, self.sink.path)
            .alias("t")
            .merge(last.alias("s"), condition)
            .whenMatchedDelete(condition=f"NOT ({accumulate})")
            .whenMatchedUpdate(set=values)
            .whenNotMatchedInsert(condition=accumulate, values=values)
            .execute()
        )


class DeltaAppendWriter:
    """The ``foreachBatch`` function that appends a stream's rows to a Delta table, idempotent per micro-batch;
    a micro-batch without rows writes nothing.

    Used for the dead-letter tables. Delta's own streaming sink commits a table version for every micro-batch,
    empty ones included (the commit records the batch id): a dead-letter table, empty in most batches, got a
    commit (and a log checkpoint every ten) for every micro-batch of its pipeline, each costing the run a Delta
    transaction (~1 s on 2 cores) beside the main query's. The batch is appended with Delta's transaction
    identifiers (``txnAppId`` = ``streamjoin-<name>-<query id>``, ``txnVersion`` = batch id), so a batch replayed
    after a crash between the Delta commit and the checkpoint commit is skipped, as Delta's sink skips it.

    Args:
        name: the table's name (the ``txnAppId`` prefix).
        path: the Delta table's location (:meth:`create` makes it before the query starts).
        checkpoint: the query's checkpoint location (its ``metadata`` holds the query id).
    """

    def __init__(self, name: str, path: str, checkpoint: str) -> None:
        self.name = name
        self.path = path
        self.checkpoint = checkpoint
        self._app_id: str | None = None

    def create(self, spark: SparkSession, schema: StructType) -> None:
        """Create the table with ``schema`` (the stream's) when there is none: it exists, empty, before any row."""
        DeltaTable.createIfNotExists(spark).location(self.path).addColumns(schema).execute()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        if self._app_id is None:
            self._app_id = _query_app_id(spark, f"streamjoin-{self.name}", self.checkpoint)
        batch = batch.persist()
        try:
            if batch.count() == 0:
                return
            (
                batch.write.format("delta")
                .mode("append")
                .option("txnAppId", self._app_id)
                .option("txnVersion", batch_id)
                .save(self.path)
            )
        finally:
            batch.unpersist()
