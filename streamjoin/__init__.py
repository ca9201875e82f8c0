"""streamjoin: Flink SQL's streaming semantics (retracting joins, interval and temporal joins,
OVER, group aggregation, deduplication) on Spark Structured Streaming; Kafka in, Delta out.

Public API. ``import streamjoin`` imports only the changelog vocabulary and the errors; every
other name is imported from its module on first use, so the import starts no JVM and loads
neither PySpark nor sqlglot.

- the changelog vocabulary: :class:`RowKind`, :class:`ChangelogMode`, :data:`ROWKIND_COLUMN`,
  :data:`SEQ_COLUMN` (:mod:`streamjoin.changelog`);
- the errors, all under :class:`StreamJoinError` (:mod:`streamjoin.errors`);
- SQL pipelines: :func:`load_script` / :func:`plan_script` (a Flink SQL file, planned),
  :func:`sql_pipelines` (its ``INSERT INTO`` statements as :class:`SqlPipeline` objects)
  (:mod:`streamjoin.planner`);
- running them: :func:`spark_session`, :class:`Lakehouse`, :class:`Pipeline`, :func:`run_pipeline`,
  :func:`run_pipelines` (:mod:`streamjoin.session`, :mod:`streamjoin.pipeline`);
- the Kafka source: :class:`KafkaSource` (:mod:`streamjoin.connectors`).

The operators (:mod:`streamjoin.runtime`), the Delta sink (:mod:`streamjoin.sink`) and the demo
data (:mod:`streamjoin.datagen`) are their own packages. Example::

    from streamjoin import Lakehouse, load_script, run_pipeline, spark_session, sql_pipelines

    [pipeline] = sql_pipelines(load_script("sql/orders_current.sql"))
    run_pipeline(pipeline, spark_session(), Lakehouse(".local/lakehouse"), "127.0.0.1:9092", available_now=True)
"""

from streamjoin._lazy import lazy_exports
from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, ChangelogMode, RowKind
from streamjoin.errors import (
    ChangelogError,
    ConnectorError,
    ConnectorTimeoutError,
    EmbeddedKafkaError,
    SinkError,
    StateError,
    StreamJoinError,
    UnsupportedPlanError,
    ValidationError,
)

_EXPORTS = {
    **dict.fromkeys(["load_script", "plan_script", "sql_pipelines", "SqlPipeline", "Script"], "streamjoin.planner"),
    "spark_session": "streamjoin.session",
    **dict.fromkeys(["Lakehouse", "Pipeline", "PipelineRun", "run_pipeline", "run_pipelines"], "streamjoin.pipeline"),
    "KafkaSource": "streamjoin.connectors.kafka",
}
__all__ = [  # noqa: PLE0604 - *_EXPORTS unpacks the lazily imported names, all strings
    "RowKind",
    "ChangelogMode",
    "ROWKIND_COLUMN",
    "SEQ_COLUMN",
    "StreamJoinError",
    "ValidationError",
    "UnsupportedPlanError",
    "ChangelogError",
    "StateError",
    "SinkError",
    "ConnectorError",
    "EmbeddedKafkaError",
    "ConnectorTimeoutError",
    *_EXPORTS,
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
