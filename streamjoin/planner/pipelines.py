"""SQL pipelines as :class:`~streamjoin.pipeline.Pipeline` objects: one per ``INSERT INTO <delta table>``.

The compiled pipeline reads the Kafka tables its plan scans (``kafka`` and
``upsert-kafka``, their ``KafkaSource``), builds the output changelog with the planner's translation
(:mod:`streamjoin.planner.translate`), and lands it in the Delta sink table
through :func:`streamjoin.pipeline.run_pipeline` (the Delta upsert writer).

Example:
    >>> from streamjoin.planner import load_script, sql_pipelines
    >>> [orders_current] = sql_pipelines(load_script("sql/orders_current.sql"))  # doctest: +SKIP

The plan is made once, when the file is loaded; the lakehouse is bound when the pipeline runs (Delta
tables looked up without a ``path`` option live in it), so the pipeline planned at Dagster definition
load is the one its asset runs.
    >>> run_pipeline(orders_current, spark, Lakehouse(".local/lakehouse"), "127.0.0.1:9092")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial

from pyspark.sql import DataFrame

from streamjoin.errors import UnsupportedPlanError
from streamjoin.pipeline import Lakehouse, Pipeline
from streamjoin.planner.catalog import Catalog, TableDef
from streamjoin.planner.connectors import KAFKA_CONNECTORS, option_value
from streamjoin.planner.diagnostics import SqlSource
from streamjoin.planner.plan import LookupJoin, TableScan, walk
from streamjoin.planner.script import PlannedStatement, Script
from streamjoin.planner.translate import Translator
from streamjoin.sink.delta import DeltaSink

__all__ = ["SqlPipeline", "bootstrap_servers", "sql_pipelines"]


@dataclass(frozen=True)
class SqlPipeline(Pipeline):
    """A :class:`~streamjoin.pipeline.Pipeline` compiled from an ``INSERT INTO`` statement.

    Args (beyond ``Pipeline``'s):
        statement: the planned statement (its plan gives the lineage: ``statement.sink.source_tables()``).
        sink_table: the sink's declaration; its ``path`` option, when set, overrides ``<lakehouse>/<name>``.
        source: the SQL text the statement was planned from (for expression types and errors).
        catalog: the script's tables and views (the batch query reads the views, :mod:`streamjoin.batch`).
    """

    # Keyword-only, without defaults: after Pipeline's fields, which have them.
    statement: PlannedStatement = field(kw_only=True, compare=False, repr=False)
    sink_table: TableDef = field(kw_only=True, compare=False, repr=False)
    source: SqlSource = field(kw_only=True, compare=False, repr=False)
    catalog: Catalog = field(kw_only=True, compare=False, repr=False)

    def changelog(self, tables: Mapping[str, DataFrame], lakehouse: Lakehouse) -> DataFrame:
        """The statement's plan translated over ``tables``; looked-up Delta tables without a ``path`` option
        are read from ``lakehouse``."""
        return _translate(self.statement, self.source, lakehouse, tables)

    def sink(self, lakehouse: Lakehouse) -> DeltaSink:
        """The Delta sink at the table's ``path`` option, else ``<lakehouse>/<name>``, partitioned as the table says."""
        path = self.sink_table.options.get("path") if self.sink_table else None
        partition_by = self.sink_table.partition_keys if self.sink_table else ()
        return DeltaSink(
            self.name, path or lakehouse.table_path(self.name), self.primary_key, partition_by=partition_by
        )

    @property
    def lookup_tables(self) -> list[str]:
        """Names of the Delta tables the plan looks up (lookup joins), in plan order."""
        names = [n.right.table.name for n in walk(self.statement.sink) if isinstance(n, LookupJoin)]
        return list(dict.fromkeys(names))

    @property
    def explain(self) -> str:
        """The statement's EXPLAIN CHANGELOG_MODE text."""
        return self.statement.explain


def _delta_path(lakehouse: Lakehouse | None) -> Callable[[TableDef], str]:
    def path(table: TableDef) -> str:
        if "path" in table.options:
            return table.options["path"]
        if lakehouse is None:
            raise UnsupportedPlanError(f"Delta table '{table.name}' has no 'path' option and no lakehouse is given")
        return lakehouse.table_path(table.name)

    return path


def _translate(
    statement: PlannedStatement, source: SqlSource, lakehouse: Lakehouse | None, tables: Mapping[str, DataFrame]
) -> DataFrame:
    return Translator(tables, source, delta_path=_delta_path(lakehouse)).translate(statement.sink)


def sql_pipelines(script: Script) -> list[SqlPipeline]:
    """One :class:`SqlPipeline` per ``INSERT INTO`` a Delta table of ``script``, in file order.

    Each pipeline's ``query`` translates its plan without a lakehouse (looked-up Delta tables need a
    ``path`` option then); :func:`~streamjoin.pipeline.run_pipeline` calls its ``changelog`` with the
    lakehouse it runs against.

    Args:
        script: a planned SQL file.

    Raises:
        UnsupportedPlanError: for an INSERT into a non-Delta or key-less Delta table, or a source
            that is not a ``kafka`` or ``upsert-kafka`` table.
    """
    pipelines = []
    for statement in script.inserts:
        table = statement.sink_table
        assert table is not None  # an INSERT's
        if table.connector != "delta" or not table.primary_key:
            raise UnsupportedPlanError(
                f"{script.source.name}: INSERT INTO '{table.name}': pipelines write Delta tables with a PRIMARY KEY; "
                f"'{table.name}' is a {table.connector} table{'' if table.primary_key else ' without primary key'}"
            )
        scans = [n for n in walk(statement.sink) if isinstance(n, TableScan)]
        lookups = {id(n.right) for n in walk(statement.sink) if isinstance(n, LookupJoin)}
        sources = {}
        for scan in scans:
            if id(scan) in lookups:
                continue
            if scan.table.connector not in KAFKA_CONNECTORS:
                raise UnsupportedPlanError(
                    f"{script.source.name}: table '{scan.table.name}' ({scan.table.connector}) "
                    f"cannot be a pipeline source; pipelines read Kafka tables ({', '.join(KAFKA_CONNECTORS)})"
                )
            sources[scan.table.name] = scan.table.kafka_source()
        pipelines.append(
            SqlPipeline(
                name=table.name,
                sources=list(sources.values()),
                query=partial(_translate, statement, script.source, None),
                primary_key=tuple(table.primary_key),
                parallelism=script.parallelism,
                statement=statement,
                sink_table=table,
                source=script.source,
                catalog=script.catalog,
            )
        )
    return pipelines


def bootstrap_servers(pipelines: list[SqlPipeline], override: str | None = None) -> str:
    """The Kafka bootstrap servers: ``override`` if given, else the sources' ``properties.bootstrap.servers``.

    Raises:
        UnsupportedPlanError: when none is given or the sources disagree.
    """
    if override:
        return override
    declared = set()
    for pipeline in pipelines:
        for scan in walk(pipeline.statement.sink):
            if isinstance(scan, TableScan) and scan.table.connector in KAFKA_CONNECTORS:
                value = option_value(scan.table, "properties.bootstrap.servers")
                if value:
                    declared.add(value)
    if len(declared) != 1:
        raise UnsupportedPlanError(
            "set KAFKA_BOOTSTRAP_SERVERS (or --bootstrap-servers): the Kafka tables declare "
            + (
                f"different 'properties.bootstrap.servers': {sorted(declared)}"
                if declared
                else "no 'properties.bootstrap.servers'"
            )
        )
    return declared.pop()
