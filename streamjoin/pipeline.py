"""Run a pipeline: Kafka sources → changelog query → Delta upsert writer → Delta.

A pipeline is its Kafka sources, a function that builds the output changelog
from the sources' changelog streams (the operators of ``streamjoin.runtime``
or plain Spark projections), and a Delta sink. :func:`run_pipeline` starts

- the main query, whose ``foreachBatch`` is the :class:`~streamjoin.sink.delta.DeltaUpsertWriter`, and
- one dead-letter query appending every undecodable record of the sources to
  ``<sink>_dead_letters`` (:class:`~streamjoin.sink.delta.DeltaAppendWriter`: idempotent per batch, no
  commit for a batch without dead letters),

with checkpoints under the lakehouse's ``_checkpoints/<sink>/``. With
``available_now=True`` both process what the topics hold and stop (a backfill);
otherwise they run until stopped (a continuous streaming run). ``end_of_input=True``
ends a bounded run as Flink's bounded sources end: with a +∞ watermark that flushes
every row the operators still buffer (:mod:`streamjoin.connectors.end_of_input`).
:func:`run_pipelines` runs several pipelines at once in one Spark session, as Flink runs every
``INSERT INTO`` of a SQL file.

A :class:`~streamjoin.progress.ProgressQueue` listener receives both queries' progress events; the
caller's thread turns them into :class:`~streamjoin.progress.Figures` (``on_figures``) while the run
lives, and the run's totals, with the Delta operation metrics of the commits it made, come back in
:class:`PipelineRun`.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.listener import StreamingQueryProgress

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN
from streamjoin.connectors.changelog_files import changelog_schema
from streamjoin.connectors.end_of_input import check_not_ended, control_stream, end_input, has_ended
from streamjoin.connectors.kafka import KafkaSource, changelog_rows, dead_letters, decode, read_kafka
from streamjoin.connectors.kafka_client import Cluster, as_connection, declared_properties
from streamjoin.connectors.topic_identity import TopicIdentity
from streamjoin.errors import IncompatibleStateError, ValidationError
from streamjoin.progress import Figures, ProgressQueue, batch_figures, observe_changes, observe_dead_letters
from streamjoin.sink.delta import (
    DeltaAppendWriter,
    DeltaSink,
    DeltaUpsertWriter,
    checkpoint_reset,
    checkpoint_shuffle_partitions,
    commit_metrics,
    create_sink_tables,
    table_version,
)

__all__ = [
    "Lakehouse",
    "Pipeline",
    "PipelineRun",
    "check_one_pipeline_per_table",
    "parallelism_warning",
    "run_pipeline",
    "run_pipelines",
]

_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
#: Held while a pipeline starts its queries (:func:`_start`).
_START_LOCK = threading.Lock()


@dataclass(frozen=True)
class Lakehouse:
    """Where Delta tables and checkpoints live: ``<root>/<table>``, ``<root>/_checkpoints/<pipeline>/...``.

    ``root`` is any Spark-supported URI: a local folder or object storage.
    """

    root: str

    def table_path(self, name: str) -> str:
        return f"{self.root.rstrip('/')}/{name}"

    def checkpoint(self, pipeline: str, query: str) -> str:
        return f"{self.root.rstrip('/')}/_checkpoints/{pipeline}/{query}"


@dataclass(frozen=True)
class Pipeline:
    """A streaming pipeline with Flink SQL semantics.

    Args:
        name: the sink table's name; names the queries, checkpoints and tables.
        sources: the Kafka tables it reads.
        query: builds the output changelog (sink columns + ``_rowkind`` + ``_seq``)
            from ``{source name: changelog DataFrame}``.
        primary_key: the sink's primary key; must be an upsert key of ``query``'s output.
        parallelism: the shuffle partitions of its queries (Flink's ``parallelism.default``): how many parallel
            instances, each with its own state partition, every stateful operator runs in; None: the session's
            ``spark.sql.shuffle.partitions``. A checkpoint keeps the number it started with (Spark cannot
            rescale a streaming query's state): a run on an older checkpoint with another number warns.
    """

    name: str
    sources: Sequence[KafkaSource]
    query: Callable[[Mapping[str, DataFrame]], DataFrame]
    primary_key: tuple[str, ...]
    parallelism: int | None = None

    def changelog(self, tables: Mapping[str, DataFrame], lakehouse: Lakehouse) -> DataFrame:
        """The output changelog over ``tables`` when run against ``lakehouse``: ``query(tables)``.

        A pipeline reading Delta tables of the lakehouse (a SQL pipeline's lookup joins) resolves them here,
        at run time, so the same pipeline object runs against any lakehouse.
        """
        return self.query(tables)

    def sink(self, lakehouse: Lakehouse) -> DeltaSink:
        return DeltaSink(self.name, lakehouse.table_path(self.name), self.primary_key)

    def dead_letter_path(self, lakehouse: Lakehouse) -> str:
        return lakehouse.table_path(f"{self.name}_dead_letters")

    def end_of_input_folders(self, lakehouse: Lakehouse) -> dict[str, str]:
        """Source name → the folder of its end-of-input control stream, for every source with a rowtime."""
        return {s.name: lakehouse.checkpoint(self.name, f"end_of_input/{s.name}") for s in self.sources if s.rowtime}


@dataclass
class PipelineRun:
    """What a run did.

    Attributes:
        figures: the run's progress figures, summed over its micro-batches (:class:`~streamjoin.progress.Figures`).
        commits: ``"sink"`` / ``"changelog"`` / ``"dead_letters"`` → the Delta operation metrics
            (``operationMetrics`` of ``DESCRIBE HISTORY``, e.g. ``numTargetRowsInserted``, ``numOutputRows``)
            summed over the commits the run made to that table: read from the Delta log, no table scan.
        warnings: e.g. a checkpoint reset (:func:`streamjoin.sink.delta.checkpoint_reset`), a partitioned sink
            whose MERGE reads the whole table (:meth:`streamjoin.sink.delta.DeltaSink.merge_warning`), a restart of
            the queries after a Python worker missed its start-up deadline; also logged on logger ``streamjoin``.
    """

    figures: Figures = field(default_factory=Figures)
    commits: dict[str, dict[str, int]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def batches(self) -> int:
        """Micro-batches of the main query."""
        return self.figures.batches

    @property
    def records_read(self) -> dict[str, int]:
        """Kafka records read per topic."""
        return dict(self.figures.records_read)


def _start(
    pipeline: Pipeline,
    spark: SparkSession,
    lakehouse: Lakehouse,
    bootstrap_servers: Cluster,
    available_now: bool,
    identity: TopicIdentity,
) -> tuple[StreamingQuery, StreamingQuery]:
    decoded = {s.name: decode(read_kafka(spark, s, bootstrap_servers), s) for s in pipeline.sources}
    folders = pipeline.end_of_input_folders(lakehouse)
    controls = {
        s.name: control_stream(spark, folders[s.name], changelog_schema(s.schema))
        for s in pipeline.sources
        if s.name in folders
    }
    changes = pipeline.changelog(
        {s.name: changelog_rows(decoded[s.name], s, end_of_input=controls.get(s.name)) for s in pipeline.sources},
        lakehouse,
    )
    changes = observe_changes(changes)
    sink = pipeline.sink(lakehouse)
    sink_schema = changes.drop(ROWKIND_COLUMN, SEQ_COLUMN).schema
    create_sink_tables(spark, sink, sink_schema)

    main_checkpoint = lakehouse.checkpoint(pipeline.name, "main")
    identity.check()  # before anything is read: a topic recreated while the pipeline was down
    upsert = DeltaUpsertWriter(sink, main_checkpoint)

    def write(batch: DataFrame, batch_id: int) -> None:
        identity.check()  # a topic recreated while the query runs: nothing of this batch reaches Delta
        upsert(batch, batch_id)

    writer = (
        changes.writeStream.queryName(pipeline.name).foreachBatch(write).option("checkpointLocation", main_checkpoint)
    )
    bad = None
    for source in pipeline.sources:
        letters = dead_letters(decoded[source.name])
        bad = letters if bad is None else bad.unionByName(letters)
    dead_checkpoint = lakehouse.checkpoint(pipeline.name, "dead_letters")
    dead_table = DeltaAppendWriter(
        f"{pipeline.name}_dead_letters", pipeline.dead_letter_path(lakehouse), dead_checkpoint
    )
    assert bad is not None  # a pipeline reads at least one source
    dead_table.create(spark, bad.schema)
    dead_writer = (
        observe_dead_letters(bad)
        .writeStream.queryName(f"{pipeline.name}_dead_letters")
        .foreachBatch(dead_table)
        .option("checkpointLocation", dead_checkpoint)
    )
    if available_now:
        writer, dead_writer = writer.trigger(availableNow=True), dead_writer.trigger(availableNow=True)
    with _START_LOCK:
        # A query copies the session's settings when it is created (Spark's StreamExecution clones the session),
        # so the pipeline's own shuffle partitions are set just for its start; the lock keeps the other
        # pipelines of run_pipelines, started from their own threads, from starting with this one's number.
        previous = spark.conf.get(_SHUFFLE_PARTITIONS)
        assert previous is not None  # the setting has a default
        if pipeline.parallelism is not None:
            spark.conf.set(_SHUFFLE_PARTITIONS, str(pipeline.parallelism))
        try:
            return writer.start(), dead_writer.start()
        finally:
            spark.conf.set(_SHUFFLE_PARTITIONS, previous)


def parallelism_warning(spark: SparkSession, pipeline: Pipeline, checkpoint: str) -> str | None:
    """A warning when ``pipeline`` sets a parallelism and resumes a checkpoint started with another one, else None.

    Spark keeps a stateful query's shuffle partitions (its state partitions) in the checkpoint's offset log
    and ignores the session's number on a restart; Flink would rescale its state from a savepoint.
    """
    started_with = checkpoint_shuffle_partitions(spark, checkpoint)
    if pipeline.parallelism is None or started_with is None or started_with == pipeline.parallelism:
        return None
    return (
        f"pipeline {pipeline.name}: parallelism {pipeline.parallelism} is set, but its checkpoint {checkpoint} "
        f"started with {started_with} shuffle partitions, which it keeps: Spark cannot rescale a streaming "
        f"query's state. The run goes on with {started_with}; a new checkpoint would start with "
        f"{pipeline.parallelism} (and read the sources again from their starting offsets)"
    )


def run_pipeline(
    pipeline: Pipeline,
    spark: SparkSession,
    lakehouse: Lakehouse,
    bootstrap_servers: Cluster,
    *,
    available_now: bool = True,
    end_of_input: bool = False,
    on_progress: Callable[[StreamingQueryProgress], None] | None = None,
    on_figures: Callable[[Figures], None] | None = None,
) -> PipelineRun:
    """Run ``pipeline`` until its input is consumed (``available_now``) or it is stopped.

    Args:
        end_of_input: after consuming what the topics hold, end every input with a +∞ watermark, as
            Flink's bounded sources do, so that interval joins pad, temporal joins and OVER aggregates emit
            every buffered row (:mod:`streamjoin.connectors.end_of_input`); needs ``available_now``.
            The input stays ended: later runs on this checkpoint are refused. An interrupted ended run
            resumes when run with ``end_of_input`` again.
        on_progress: called with each progress report of the main query
            (Spark's ``StreamingQueryProgress``), e.g. to log it.
        on_figures: called with the :class:`~streamjoin.progress.Figures` of each progress report of
            the main query (one micro-batch) and of the dead-letter query (its dead letters only).

    Both callbacks run on the caller's thread, as the events arrive (Spark's listener bus hands them
    over through a queue). An exception raised on that thread (a callback's, or an interrupt such as
    Dagster's run termination) stops both queries and removes the listener before it propagates;
    the checkpoints keep what was committed, and the next run resumes from there.

    Returns:
        A :class:`PipelineRun` summary.

    Raises:
        ValidationError: ``end_of_input`` without ``available_now``; a run without ``end_of_input`` on a
            pipeline whose input has ended.
        TopicRecreatedError: a topic the checkpoint has read was deleted and created again
            (:mod:`streamjoin.connectors.topic_identity`), found before the run starts or before a
            micro-batch is written.
        pyspark.errors.StreamingQueryException: when a query fails.
    """
    folders = pipeline.end_of_input_folders(lakehouse)
    if end_of_input and not available_now:
        raise ValidationError(f"pipeline '{pipeline.name}': end of input needs an available-now (bounded) run")
    if not end_of_input:
        check_not_ended(spark, pipeline.name, folders)
    run = PipelineRun(Figures(records_read={s.topic: 0 for s in pipeline.sources}))
    sink = pipeline.sink(lakehouse)
    main_checkpoint = lakehouse.checkpoint(pipeline.name, "main")
    warnings = (
        sink.merge_warning(),
        checkpoint_reset(spark, sink, main_checkpoint),
        parallelism_warning(spark, pipeline, main_checkpoint),
    )
    for warning in warnings:
        if warning:
            logging.getLogger("streamjoin").warning(warning)
            run.warnings.append(warning)
    tables = {"sink": sink.path, "changelog": sink.changelog_path, "dead_letters": pipeline.dead_letter_path(lakehouse)}
    versions = {name: table_version(spark, path) for name, path in tables.items()}
    callbacks = (on_progress, on_figures)
    pending = {name: folder for name, folder in folders.items() if not has_ended(spark, folder)} if end_of_input else {}
    if pending:
        # First what the topics hold, then the end-of-input rows: no topic row may come after them.
        _run_queries(pipeline, spark, lakehouse, bootstrap_servers, available_now, run, callbacks)
        sources = {s.name: s for s in pipeline.sources}
        for name, folder in pending.items():
            rowtime = sources[name].rowtime
            assert rowtime is not None  # only a source with a rowtime has an end-of-input folder
            end_input(spark, folder, changelog_schema(sources[name].schema), rowtime)
    _run_queries(pipeline, spark, lakehouse, bootstrap_servers, available_now, run, callbacks)
    run.commits = {
        name: commit_metrics(spark, path, versions[name], _OPERATIONS[name]) for name, path in tables.items()
    }
    return run


def check_one_pipeline_per_table(pipelines: Sequence[Pipeline]) -> None:
    """Refuse two pipelines that write one table: they would share its checkpoints (``_checkpoints/<table>/``).

    Raises:
        ValidationError: naming the tables written twice.
    """
    twice = sorted(name for name, n in Counter(p.name for p in pipelines).items() if n > 1)
    if twice:
        raise ValidationError(
            f"more than one INSERT INTO {', '.join(twice)}: each table is written by one pipeline, "
            "which keeps its checkpoints under _checkpoints/<table>/"
        )


def run_pipelines(
    pipelines: Sequence[Pipeline],
    spark: SparkSession,
    lakehouse: Lakehouse,
    bootstrap_servers: Cluster,
    *,
    available_now: bool = True,
    end_of_input: bool = False,
    on_progress: Callable[[StreamingQueryProgress], None] | None = None,
) -> dict[str, PipelineRun]:
    """Run every pipeline of ``pipelines`` at the same time in ``spark``, each as :func:`run_pipeline` does.

    Flink's SQL client submits each ``INSERT INTO`` of a file as a job of its own, and they all run
    together; here each pipeline's queries run in the one Spark session, started from a thread of their
    own, with their own checkpoints. The arguments are :func:`run_pipeline`'s; ``on_progress`` is called
    on the thread of the pipeline whose main query reports (``progress.name`` is the pipeline's name).

    When one pipeline fails, the queries of the others are stopped (their checkpoints keep what they
    committed, and a later run resumes from there), and its exception is raised once every pipeline
    has stopped. An exception raised on the caller's thread while they run (an interrupt) stops them too.

    Returns:
        Pipeline name → its :class:`PipelineRun`, in the order of ``pipelines``.

    Raises:
        ValidationError: two pipelines write the same table (they would share its checkpoints).
        The first failure of a pipeline, as :func:`run_pipeline` raises it.
    """
    check_one_pipeline_per_table(pipelines)
    runs: dict[str, PipelineRun] = {}
    failures: list[BaseException] = []
    failed = threading.Event()

    def run(pipeline: Pipeline) -> None:
        try:
            runs[pipeline.name] = run_pipeline(
                pipeline,
                spark,
                lakehouse,
                bootstrap_servers,
                available_now=available_now,
                end_of_input=end_of_input,
                on_progress=on_progress,
            )
        except BaseException as e:  # noqa: BLE001 - raised on the caller's thread
            failures.append(e)
            failed.set()

    threads = [threading.Thread(target=run, args=(p,), name=f"pipeline-{p.name}", daemon=True) for p in pipelines]
    for thread in threads:
        thread.start()
    try:
        while any(t.is_alive() for t in threads) and not failed.wait(timeout=1):
            pass
    finally:
        queries = {p.name for p in pipelines} | {f"{p.name}_dead_letters" for p in pipelines}
        # Here with threads alive only after a failure or an interrupt. Stopped until every thread is
        # done: a pipeline whose input ends starts a second pair of queries after the first.
        while any(t.is_alive() for t in threads):
            for query in spark.streams.active:
                if query.name in queries:
                    query.stop()
            for thread in threads:
                thread.join(timeout=0.5)
    if failures:
        raise failures[0]
    return {p.name: runs[p.name] for p in pipelines}


#: The Delta operations the run's writers commit, per table: the writer's MERGE and changelog append,
#: the dead-letter query's appends (not, e.g., a maintenance job's OPTIMIZE).
_OPERATIONS = {"sink": ("MERGE",), "changelog": ("WRITE",), "dead_letters": ("WRITE",)}


#: How often a run restarts its queries after a Python worker missed its start-up deadline (below).
WORKER_START_RESTARTS = 3

#: Spark's message when a Python worker it started alone (not through the worker daemon) does not connect back
#: in time. The python engine's transformWithState starts one on the driver when its query starts (Spark's
#: ``TransformWithStateInPySparkPythonPreInitRunner``), and Spark gives it 10 s, hard-coded in
#: ``PythonWorkerFactory.createSimpleWorker`` (``spark.python.authenticate.socketTimeout`` does not apply): on an
#: overloaded machine the worker can miss it and the query fails before its first micro-batch.
_WORKER_START_FAILURE = "Python worker failed to connect back"


def _run_queries(
    pipeline: Pipeline,
    spark: SparkSession,
    lakehouse: Lakehouse,
    bootstrap_servers: Cluster,
    available_now: bool,
    run: PipelineRun,
    callbacks: tuple,
) -> None:
    """Run the pipeline's queries until they end, restarting them from their checkpoints when a Python worker
    missed its start-up deadline (``_WORKER_START_FAILURE``), up to ``WORKER_START_RESTARTS`` times.

    A restart from the checkpoint is exactly-once (the sink's writers are idempotent per batch), as a restart
    of Flink's fixed-delay restart strategy is; each restart is a warning in the log and in ``run.warnings``.
    Any other failure, and this one after the last restart, is raised.
    """
    for restart in range(WORKER_START_RESTARTS + 1):
        try:
            return _run_queries_once(pipeline, spark, lakehouse, bootstrap_servers, available_now, run, callbacks)
        except StreamingQueryException as e:
            if restart == WORKER_START_RESTARTS or _WORKER_START_FAILURE not in str(e):
                raise
            warning = (
                f"pipeline '{pipeline.name}': a Python worker did not connect back to Spark within its start-up "
                f"deadline (an overloaded machine?); restarting the queries from their checkpoints "
                f"(restart {restart + 1} of {WORKER_START_RESTARTS})"
            )
            logging.getLogger("streamjoin").warning(warning)
            run.warnings.append(warning)


def _run_queries_once(
    pipeline: Pipeline,
    spark: SparkSession,
    lakehouse: Lakehouse,
    bootstrap_servers: Cluster,
    available_now: bool,
    run: PipelineRun,
    callbacks: tuple,
) -> None:
    events = ProgressQueue()
    # The login the tables declare (their `properties.*`) over the cluster's own, as read_kafka applies them.
    cluster = as_connection(bootstrap_servers).with_properties(declared_properties(s.options for s in pipeline.sources))
    identity = TopicIdentity(
        spark, lakehouse.checkpoint(pipeline.name, "main"), cluster, [s.topic for s in pipeline.sources]
    )
    spark.streams.addListener(events)
    try:
        main, dead = _start(pipeline, spark, lakehouse, bootstrap_servers, available_now, identity)
        ids = {str(main.id), str(dead.id)}
        try:
            while main.isActive:
                _collect(events.take(ids, timeout_s=1), str(main.id), run, callbacks)
            try:
                main.awaitTermination()  # raises the query's failure
            except StreamingQueryException as e:
                # Spark's own "offsets went back" failure (failOnDataLoss) is a recreated topic: say so.
                identity.check()
                _check_state_compatible(pipeline, lakehouse, e)
                raise
            dead.awaitTermination()
        finally:
            for query in (main, dead):
                if query.isActive:
                    query.stop()
            _collect(events.take_until_terminated(ids), str(main.id), run, callbacks)
    finally:
        spark.streams.removeListener(events)
        identity.close()


#: Spark's error classes for a checkpoint whose state does not fit the query restarted on it.
INCOMPATIBLE_STATE_ERRORS = (
    "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE",
    "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
    "STATE_STORE_COLUMN_FAMILY_SCHEMA_INCOMPATIBLE",
    "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION",
    "STATE_STORE_INVALID_VARIABLE_TYPE_CHANGE",
    "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA",
)


def _check_state_compatible(pipeline: Pipeline, lakehouse: Lakehouse, failure: StreamingQueryException) -> None:
    """Raise :class:`IncompatibleStateError` when ``failure`` is Spark refusing the checkpoint's state; else return.

    Spark's message names the schemas and suggests a new checkpoint folder; this one names the pipeline, what
    changes cause it, and what rebuilding it means for its tables.
    """
    refused = next((name for name in INCOMPATIBLE_STATE_ERRORS if name in str(failure)), None)
    if refused is None:
        return
    checkpoints = lakehouse.checkpoint(pipeline.name, "").rstrip("/")
    sink = pipeline.sink(lakehouse)
    raise IncompatibleStateError(
        f"pipeline '{pipeline.name}': its checkpoint holds operator state this query cannot read (Spark: {refused}): "
        "the pipeline's SQL, its operator engine (jvm/python) or streamjoin's state layout changed since the "
        f"checkpoint was written. Run it as it was, or rebuild it: remove {checkpoints} and the tables {sink.path}, "
        f"{sink.changelog_path} and {pipeline.dead_letter_path(lakehouse)}, then run again (the sources are read again "
        "from their starting offsets)"
    ) from failure


def _collect(progresses: list[StreamingQueryProgress], main_id: str, run: PipelineRun, callbacks: tuple) -> None:
    """Add the figures of ``progresses`` to ``run`` and pass them to the callbacks ``(on_progress, on_figures)``."""
    on_progress, on_figures = callbacks
    for progress in progresses:
        figures = batch_figures(progress)
        run.figures += figures
        if on_progress and str(progress.id) == main_id:
            on_progress(progress)
        if on_figures:
            on_figures(figures)
