"""Dagster assets for a streaming pipeline: its Delta sink table and the sink's changelog table.

Materialising them runs the pipeline's streaming query, by default with
``trigger(availableNow=True)``: everything the topics hold now is processed,
then the query stops (a backfill run); with ``available_now: false`` in the
run config it runs continuously until the Dagster run is terminated. Asset metadata carries the run's
progress: micro-batches, Kafka records read, rows in the sink, dead letters.
"""


from dagster import AssetExecutionContext, AssetSpec, Config, MaterializeResult, MetadataValue, multi_asset

from assets.kafka_topics import topic_key
from dagster_project.resources import KafkaResource, LakehouseResource, SparkResource
from streamjoin.pipeline import Pipeline, run_pipeline

__all__ = ["pipeline_assets", "StreamingRunConfig"]


class StreamingRunConfig(Config):
    """Run config of a pipeline asset.

    ``available_now=True`` (default): process what the topics hold, then stop (a backfill).
    ``False``: a continuous streaming run, until the Dagster run is terminated.
    """

    available_now: bool = True


def pipeline_assets(pipeline: Pipeline, *, description: str):
    """The multi-asset ``<sink>`` + ``<sink>_changelog`` for ``pipeline``, downstream of its topics."""
    deps = [topic_key(s) for s in pipeline.sources]
    specs = [
        AssetSpec(pipeline.name, deps=deps, description=description, kinds={"delta", "spark"}, group_name="lakehouse",
                  metadata={"primary_key": ", ".join(pipeline.primary_key)}),
        AssetSpec(f"{pipeline.name}_changelog", deps=deps, kinds={"delta", "spark"}, group_name="lakehouse",
                  description=f"Raw changelog of `{pipeline.name}`: every change with its RowKind, batch id, source offsets and processing time."),
    ]

    @multi_asset(name=pipeline.name, specs=specs)
    def _assets(context: AssetExecutionContext, config: StreamingRunConfig, spark: SparkResource, kafka: KafkaResource, lakehouse: LakehouseResource):
        session = spark.session()
        home = lakehouse.lakehouse()

        def log_progress(progress) -> None:
            context.log.info(
                f"batch {progress.batchId}: {progress.numInputRows} records, "
                f"{progress.processedRowsPerSecond:.0f} rows/s, sources {[(s.description, s.endOffset) for s in progress.sources]}"
            )

        run = run_pipeline(pipeline, session, home, kafka.servers, available_now=config.available_now, on_progress=log_progress)
        sink = pipeline.sink(home)
        rows = session.read.format("delta").load(sink.path).count()
        changes = session.read.format("delta").load(sink.changelog_path).count()
        dead = session.read.format("delta").load(pipeline.dead_letter_path(home)).count()
        yield MaterializeResult(
            asset_key=pipeline.name,
            metadata={
                "path": MetadataValue.path(sink.path),
                "rows": rows,
                "micro_batches": run.batches,
                "records_read": MetadataValue.json(run.records_read),
                "dead_letters": dead,
                "dead_letter_table": MetadataValue.path(pipeline.dead_letter_path(home)),
            },
        )
        yield MaterializeResult(
            asset_key=f"{pipeline.name}_changelog",
            metadata={"path": MetadataValue.path(sink.changelog_path), "changes": changes},
        )

    return _assets
