"""Dagster assets from the SQL pipelines in ``sql/``: adding a SQL file adds its assets, without Python.

Each ``INSERT INTO <delta table>`` of a ``sql/*.sql`` file becomes a
multi-asset: the sink table and its raw changelog table (``<sink>_changelog``).
Lineage comes from the statement's plan: the Kafka tables it scans are
upstream external assets ``kafka/<topic>`` (Dagster does not produce them),
the Delta tables it looks up (lookup joins) are upstream assets keyed by their
name. The file's leading ``--`` comment is the asset's description; its
``EXPLAIN CHANGELOG_MODE`` plan is shown as metadata.

Materialising a pipeline asset runs its streaming query, by default with
``trigger(availableNow=True)``: everything the topics hold now is processed,
then the query stops (a backfill); with ``available_now: false`` in the run
config it runs continuously until the Dagster run is terminated (which stops the
query; the next run resumes from its checkpoint). The figures come from Spark's
progress events (:mod:`streamjoin.progress`): a continuous run reports them every
``report_every`` micro-batches as an asset observation of the sink; a catch-up run
ends with them summed over the run, with the Delta operation metrics of its
commits, as materialization metadata. No table is scanned for them.
"""

from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetObservation,
    AssetSpec,
    Config,
    MaterializeResult,
    MetadataValue,
    multi_asset,
)
from pydantic import Field

from resources import KafkaResource, LakehouseResource, SparkResource, concurrency_pool
from streamjoin.config import PROJECT_ROOT
from streamjoin.connectors.kafka import KafkaSource
from streamjoin.pipeline import run_pipeline
from streamjoin.planner import SqlPipeline, load_script, sql_pipelines
from streamjoin.progress import Figures, StopOnInterrupt

__all__ = [
    "SQL_DIR",
    "SqlPipelineDef",
    "StreamingRunConfig",
    "load_sql_pipelines",
    "materialize_pipeline",
    "pipeline_assets",
    "topic_key",
    "topic_specs",
]

#: Where the pipelines live.
SQL_DIR = PROJECT_ROOT / "sql"


class StreamingRunConfig(Config):
    """Run config of a pipeline asset.

    ``available_now=True`` (default): process what the topics hold, then stop (a backfill).
    ``False``: a continuous streaming run, until the Dagster run is terminated.
    """

    available_now: bool = True
    report_every: int = Field(
        default=10, ge=1, description="A continuous run reports an asset observation every this many micro-batches."
    )


class _Observations:
    """``on_figures`` of a continuous run: the figures of every ``every`` micro-batches as an observation of ``asset``.

    Called on the step's thread (``run_pipeline`` hands Spark's listener events over), where
    ``context.log_event`` may be called.
    """

    def __init__(self, context: AssetExecutionContext, asset: str, every: int) -> None:
        self.context, self.asset, self.every = context, asset, every
        self.window = Figures()

    def __call__(self, figures: Figures) -> None:
        self.window += figures
        if self.window.batches >= self.every:
            self.flush()

    def flush(self) -> None:
        if self.window.batches:
            self.context.log_event(AssetObservation(asset_key=self.asset, metadata=self.window.metadata()))
        self.window = Figures()


@dataclass(frozen=True)
class SqlPipelineDef:
    """One ``INSERT INTO`` of a SQL file: the file, the compiled pipeline, the file's header comment."""

    path: Path
    pipeline: SqlPipeline
    description: str


def _header(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].removeprefix(" "))
    return "\n".join(lines).strip()


def load_sql_pipelines(directory: Path = SQL_DIR) -> list[SqlPipelineDef]:
    """Every pipeline of ``directory/*.sql``, files in name order, INSERTs in file order.

    Raises:
        ValidationError / UnsupportedPlanError: a file that does not plan (nothing is defined then).
    """
    defs = []
    for path in sorted(directory.glob("*.sql")):
        description = _header(path.read_text())
        defs.extend(SqlPipelineDef(path, p, description) for p in sql_pipelines(load_script(path)))
    return defs


def topic_key(source: KafkaSource) -> AssetKey:
    """``kafka/<topic>``."""
    return AssetKey(["kafka", source.topic])


def topic_specs(defs: list[SqlPipelineDef]) -> list[AssetSpec]:
    """One external asset per Kafka topic the pipelines read (the first declaration's schema as metadata)."""
    sources: dict[str, KafkaSource] = {}
    for d in defs:
        for source in d.pipeline.sources:
            sources.setdefault(source.topic, source)
    return [
        AssetSpec(
            topic_key(source),
            description=f"Kafka topic `{source.topic}` ({source.format}), read as table `{source.name}`.",
            group_name="kafka",
            kinds={"kafka"},
            metadata={
                "format": source.format,
                "primary_key": ", ".join(source.primary_key),
                "rowtime": source.rowtime or "",
                "watermark_delay_ms": source.watermark_delay_ms,
                "columns": ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in source.schema.fields),
            },
        )
        for source in sorted(sources.values(), key=lambda s: s.topic)
    ]


def pipeline_assets(definition: SqlPipelineDef):
    """The multi-asset ``<sink>`` + ``<sink>_changelog`` of one SQL pipeline.

    Downstream of the pipeline's topics and lookup tables.
    """
    pipeline = definition.pipeline
    deps = [topic_key(s) for s in pipeline.sources] + [AssetKey(t) for t in pipeline.lookup_tables]
    source_file = (
        str(definition.path.relative_to(PROJECT_ROOT))
        if definition.path.is_relative_to(PROJECT_ROOT)
        else str(definition.path)
    )
    specs = [
        AssetSpec(
            pipeline.name,
            deps=deps,
            description=definition.description,
            kinds={"delta", "spark"},
            group_name="lakehouse",
            metadata={
                "primary_key": ", ".join(pipeline.primary_key),
                "sql": MetadataValue.path(source_file),
                "plan": MetadataValue.md(f"```\n{pipeline.explain}\n```"),
                # SET 'parallelism.default': its queries' shuffle partitions (else the Spark session's).
                **({"parallelism": pipeline.parallelism} if pipeline.parallelism else {}),
            },
        ),
        AssetSpec(
            f"{pipeline.name}_changelog",
            deps=deps,
            kinds={"delta", "spark"},
            group_name="lakehouse",
            description=f"Raw changelog of `{pipeline.name}`: every change with its RowKind, batch id, source offsets "
            "and processing time.",
        ),
    ]

    @multi_asset(name=pipeline.name, specs=specs, pool=concurrency_pool(pipeline.name))
    def _assets(
        context: AssetExecutionContext,
        config: StreamingRunConfig,
        spark: SparkResource,
        kafka: KafkaResource,
        lakehouse: LakehouseResource,
    ):
        yield from materialize_pipeline(pipeline, context, config, spark, kafka, lakehouse)

    return _assets


def materialize_pipeline(
    pipeline: SqlPipeline,
    context: AssetExecutionContext,
    config: StreamingRunConfig,
    spark: SparkResource,
    kafka: KafkaResource,
    lakehouse: LakehouseResource,
):
    """The body of a pipeline asset's run without a partition: a catch-up or a continuous run of ``pipeline``.

    Yields:
        The ``MaterializeResult`` of ``<sink>`` (the run's figures, Delta's commit metrics, ``rows`` from the
        Delta log) and of ``<sink>_changelog`` (``changes``); a continuous run also logs an ``AssetObservation``
        every ``config.report_every`` micro-batches.
    """
    session = spark.session()
    home = lakehouse.lakehouse()

    def log_progress(progress) -> None:
        context.log.info(
            f"batch {progress.batchId}: {progress.numInputRows} records, "
            f"{progress.processedRowsPerSecond:.0f} rows/s, "
            f"sources {[(s.description, s.endOffset) for s in progress.sources]}"
        )

    # The pipeline planned at definition load: it binds the lakehouse (its lookup tables) when it runs.
    observations = None if config.available_now else _Observations(context, pipeline.name, config.report_every)
    # Terminating a continuous run stops its queries between micro-batches: the run returns, and the step ends
    # with its figures (jobs.end_terminated_run ends the run canceled). A catch-up run ends by itself.
    stop = StopOnInterrupt(session) if observations else nullcontext()
    try:
        with stop:
            run = run_pipeline(
                pipeline,
                session,
                home,
                kafka.connection(),
                available_now=config.available_now,
                on_progress=log_progress,
                on_figures=observations,
            )
    finally:
        if observations:  # a terminated run: the batches since the last observation
            observations.flush()
    if isinstance(stop, StopOnInterrupt) and stop.requested:
        context.log.info(f"terminated: the queries stopped after {run.batches} micro-batches")
    sink = pipeline.sink(home)
    merged, appended, dead = run.commits["sink"], run.commits["changelog"], run.commits["dead_letters"]
    yield MaterializeResult(
        asset_key=pipeline.name,
        metadata={
            "path": MetadataValue.path(sink.path),
            **run.figures.metadata(),
            # Delta answers a COUNT(*) from the per-file row counts in its log: no data file is read.
            "rows": session.read.format("delta").load(sink.path).count(),
            "rows_inserted": merged.get("numTargetRowsInserted", 0),
            "rows_updated": merged.get("numTargetRowsUpdated", 0),
            "rows_deleted": merged.get("numTargetRowsDeleted", 0),
            "records_read": MetadataValue.json(run.records_read),
            "dead_letters": dead.get("numOutputRows", 0),
            "dead_letter_table": MetadataValue.path(pipeline.dead_letter_path(home)),
        },
    )
    yield MaterializeResult(
        asset_key=f"{pipeline.name}_changelog",
        metadata={"path": MetadataValue.path(sink.changelog_path), "changes": appended.get("numOutputRows", 0)},
    )
