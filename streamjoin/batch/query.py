"""A pipeline's SQL as a Spark batch query: what its sink table should hold, by a path independent of the operators.

The query of the pipeline's ``INSERT INTO`` (the SQL text, not the streaming plan) is transpiled by
sqlglot from Flink SQL to Spark SQL and run as one batch query over the sources' final tables
(:mod:`streamjoin.batch.sources`). Spark's own batch operators compute it: no operator of
``streamjoin/runtime`` and no translation of ``streamjoin/planner/translate.py`` is involved. The
streaming plan is consulted only to refuse what the batch query cannot mean.

Rewrites, where a construct has no batch equivalent in Spark (docs/semantics.md §10):

- the views the query reads become common table expressions, before the query's own; ``*`` is expanded
  (sqlglot's ``qualify``);
- an event-time temporal join ``JOIN v FOR SYSTEM_TIME AS OF p.t AS r ON …`` joins the version of ``v``
  valid at ``p.t``: the latest version of the key with version time ≤ ``p.t``, none if that version
  is a delete (§4.2);
- a lookup join against a Delta table ``FOR SYSTEM_TIME AS OF …`` joins the table as it is now (§4.5);
- OVER aggregations, ``ROW_NUMBER`` deduplications, interval joins, group aggregates, regular, semi
  and anti joins are Spark's batch SQL as written;
- Flink's functions and integer division get their Spark spelling (``PROCTIME()`` is the query's time);
- a ``TUMBLE`` window table function is a subquery that adds its window columns (HOP, CUMULATE and SESSION
  are refused).

The final watermark. A streaming run that has read everything (Spark's ``availableNow``) stops with
the rows an event-time operator still waits for in its state. Unless ``ended`` (the input was ended
with a +∞ watermark, :mod:`streamjoin.connectors.end_of_input`, as Flink's bounded sources do), the
batch query leaves them out too, with the watermark ``W`` the run reached
(:func:`streamjoin.batch.sources.watermark`): a temporal join's probe rows and an OVER aggregation's
rows with time > ``W``, an event-time keep-first deduplication's rows with time > ``W``, an outer
interval join's null-padded rows whose window ``t + upper`` is not behind ``W``, and the rows of TUMBLE
windows whose end − 1 ms is after ``W``.

Deliberate differences from the streaming result (docs/semantics.md §10):

- **Late rows are kept.** Rows the streaming operators dropped as late (behind the watermark when
  they arrived: interval join, OVER, keep-first deduplication), and matches a temporal join missed
  because clean-up had dropped an old version, are in the batch result: it is what the SQL means over
  the data, the streaming result is that minus what arrived too late.
- **Ties in time are not in arrival order.** Rows of equal time in an OVER ``ROWS`` frame or a
  deduplication are ordered by Spark, not by arrival.
- **Processing time is refused.** Processing-time OVER, deduplication and interval joins depend on
  when rows arrived; a query with one raises :class:`~streamjoin.errors.UnsupportedPlanError`. A lookup
  join reads the Delta table's current rows, which is what a run that looked it up now would see.
- **Several rows per sink key** (an insert-only query into a keyed sink) are all returned; the sink keeps
  the last one it was sent.

Example:
    >>> [pipeline] = sql_pipelines(load_script("sql/orders_in_eur.sql"))  # doctest: +SKIP
    >>> batch_query(pipeline, spark, "127.0.0.1:9092", Lakehouse(".local/lakehouse")).count()  # doctest: +SKIP
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from streamjoin.batch.sources import DELETED, VALID_TO, final_table, read_changelog, versions, watermark, with_computed
from streamjoin.connectors.kafka_client import Cluster
from streamjoin.errors import UnsupportedPlanError
from streamjoin.pipeline import Lakehouse
from streamjoin.planner.catalog import Catalog, TableDef
from streamjoin.planner.connectors import KAFKA_CONNECTORS
from streamjoin.planner.dialect import (
    WINDOW_TVF_PARAMETERS,
    Descriptor,
    Flink,
    TableArgument,
    WindowTableFunction,
    interval_ms,
)
from streamjoin.planner.expressions import flink_functions
from streamjoin.planner.pipelines import SqlPipeline
from streamjoin.planner.plan import Deduplicate, IntervalJoin, Node, OverAggregate, Rank, TableScan, TemporalJoin, walk
from streamjoin.planner.script import PlannedStatement

__all__ = ["BatchPlan", "batch_query", "plan_batch", "run_batch"]

_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_RULE = "[rule: batch-query]"


@dataclass(frozen=True)
class BatchPlan:
    """A pipeline's query as Spark batch SQL, with the tables it reads.

    Attributes:
        name: the pipeline (sink table), for messages.
        sql: the Spark SQL text; it reads the temporary views named by :meth:`view`.
        columns: the result's columns: (name, Spark type or ``None`` to keep the query's).
        sources: Kafka tables read as final tables, by name.
        versioned: of ``sources``, those an event-time temporal join reads as versions.
        lookups: Delta tables a lookup join reads, by name.
        prefix: what makes this plan's view names unique in a Spark session.
    """

    name: str
    sql: str
    columns: tuple[tuple[str, DataType | None], ...]
    sources: Mapping[str, TableDef]
    versioned: frozenset[str]
    lookups: Mapping[str, TableDef]
    prefix: str

    def view(self, table: str, role: str = "") -> str:
        """The temporary view of ``table``.

        ``role``: ``"versions"`` for its versions, ``"watermark"`` for the watermark.
        """
        return f"{self.prefix}{table}{'__' + role if role else ''}"


def _refuse(name: str, construct: str, reason: str) -> UnsupportedPlanError:
    return UnsupportedPlanError(f"pipeline '{name}': the batch query cannot run {construct}: {reason} {_RULE}")


def _check_plan(plan: Node, name: str, ended: bool) -> None:
    """Refuse, from the streaming plan, what has no deterministic batch meaning."""
    arrival = "its result depends on when rows arrive, which a batch query does not know"
    for node in walk(plan):
        if isinstance(node, OverAggregate) and not node.rowtime:
            raise _refuse(name, "a processing-time OVER aggregation", arrival)
        if isinstance(node, Deduplicate) and node.time == "PROCTIME":
            raise _refuse(name, "a processing-time deduplication", arrival)
        if isinstance(node, Rank) and any(node.inputs[0].field(f).is_proctime for f, _, _ in node.order_by):
            raise _refuse(name, "a Top-N ordered by processing time", arrival)
        if isinstance(node, IntervalJoin) and not node.rowtime:
            raise _refuse(name, "a processing-time interval join", arrival)
        if isinstance(node, IntervalJoin) and not ended and node.kind in ("right", "full"):
            raise _refuse(
                name,
                f"a {node.kind.upper()} interval join without ended input",
                "which of its null-padded rows the final watermark has emitted is computed for LEFT joins only",
            )
        if isinstance(node, TemporalJoin) and node.append_only_versions:
            raise _refuse(
                name,
                "a temporal join against a versioned view",
                "its versions are a deduplication of the view's rows; join a table with a PRIMARY KEY",
            )
        if isinstance(node, TableScan) and node.table.connector in KAFKA_CONNECTORS:
            mode = node.table.options.get("scan.startup.mode", "earliest-offset")
            if mode != "earliest-offset":
                raise _refuse(
                    name,
                    f"table '{node.table.name}' with 'scan.startup.mode' = '{mode}'",
                    "the batch query reads every retained record, the streaming run only those after its start",
                )
        elif isinstance(node, TableScan) and node.table.connector not in ("delta", *KAFKA_CONNECTORS):
            raise _refuse(
                name, f"table '{node.table.name}' ({node.table.connector})", "it reads Kafka and Delta tables only"
            )


def _with_views(query: exp.Expr, catalog: Catalog) -> exp.Expr:
    """``query`` with the views it reads (transitively) as common table expressions, dependencies first."""
    needed: list[str] = []

    def visit(node: exp.Expr) -> None:
        for table in node.find_all(exp.Table):
            if table.name in catalog.views and table.name not in needed:
                visit(catalog.views[table.name].query)
                needed.append(table.name)

    visit(query)
    if needed:
        ctes = [
            exp.CTE(this=catalog.views[n].query.copy(), alias=exp.TableAlias(this=exp.to_identifier(n, quoted=True)))
            for n in needed
        ]
        # The query's own WITH (the planner refused names of views there) follows the views it may read.
        own = query.args.get("with_")
        query.set("with_", exp.With(expressions=[*ctes, *(own.expressions if own else [])]))
    return query


#: Where the final watermark goes in a window table function's rewrite (:func:`_window_table_functions`), until the
#: query is qualified: its view is no table of the catalog.
_FINAL_WATERMARK = exp.Anonymous(this="__FINAL_WATERMARK", expressions=[])


def _window_table_functions(query: exp.Expr, name: str, watermark: exp.Expr | None) -> exp.Expr:
    """``query`` with each ``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size [, offset]))`` as the subquery ``SELECT *,
    window_start, window_end, window_time FROM t`` (docs/semantics.md §11.1: ``start = t − ((t − offset) mod size)``),
    keeping, with a final ``watermark``, the rows of windows it has fired (``window_time`` ≤ ``W``): a window
    aggregate emits a window once the watermark reaches its end − 1 ms.

    Raises:
        UnsupportedPlanError: HOP, CUMULATE and SESSION (a row in several windows, or a session).
    """

    def rewrite(node: exp.Expr) -> exp.Expr:
        if not (isinstance(node, exp.Table) and isinstance(node.this, exp.Anonymous)):
            return node
        calls = [e for e in node.this.expressions if isinstance(e, WindowTableFunction)]
        if not calls:
            return node
        call = calls[0]
        if call.name.upper() != "TUMBLE":
            raise _refuse(name, f"a {call.name.upper()} window table function", "only TUMBLE is computed in batch")
        # The planner checked the arguments: positional ones in Flink's order, or named.
        args = {
            (a.this.name.upper() if isinstance(a, exp.Kwarg) else WINDOW_TVF_PARAMETERS["TUMBLE"][i]): (
                a.expression if isinstance(a, exp.Kwarg) else a
            )
            for i, a in enumerate(call.expressions)
        }
        table = args["DATA"]
        assert isinstance(table, TableArgument) and isinstance(args["TIMECOL"], Descriptor)  # the planner checks them
        time = args["TIMECOL"].expressions[0]
        size = interval_ms(args["SIZE"])
        offset = interval_ms(args["OFFSET"]) if "OFFSET" in args else 0
        millis = exp.Anonymous(this="UNIX_MILLIS", expressions=[time.copy()])
        start = exp.Sub(
            this=millis,
            expression=exp.Anonymous(
                this="PMOD",
                expressions=[
                    exp.Sub(this=millis.copy(), expression=exp.Literal.number(offset)),
                    exp.Literal.number(size),
                ],
            ),
        )

        def at(delta: int) -> exp.Expr:
            shifted = exp.Add(this=exp.paren(start.copy()), expression=exp.Literal.number(delta)) if delta else start
            return exp.Anonymous(this="TIMESTAMP_MILLIS", expressions=[shifted.copy()])

        select = exp.select(
            exp.Star(), at(0).as_("window_start"), at(size).as_("window_end"), at(size - 1).as_("window_time")
        ).from_(table.this.copy())
        if watermark is not None:
            select = select.where(exp.LTE(this=at(size - 1), expression=watermark.copy()))
        return select.subquery(node.alias or f"__tumble_{time.name}")

    return query.transform(rewrite)


def _integer_division(node: exp.Expr) -> exp.Expr:
    """Flink's ``INT / INT`` is an integer division of the wider type (Spark's ``/`` is exact)."""
    if isinstance(node, exp.Div):
        types = [side.type for side in (node.this, node.expression)]
        if all(t is not None and t.is_type(*exp.DataType.INTEGER_TYPES) for t in types):
            names = [t.this.name if t.this.name in _INTEGRAL else "BIGINT" for t in types]
            wider = max(names, key=_INTEGRAL.index)
            return exp.cast(exp.IntDiv(this=node.this, expression=node.expression), wider)
    return node


def _column_of(node: exp.Expr, alias: str) -> bool:
    return isinstance(node, exp.Column) and node.table == alias


def _uses(node: exp.Expr, alias: str) -> bool:
    return any(c.table == alias for c in node.find_all(exp.Column))


def _upper_bound(on: exp.Expr | None, alias: str) -> tuple[exp.Column, exp.Expr, bool] | None:
    """``(right time column, its upper bound over the left side, strict)`` of an interval join's condition."""
    for term in on.flatten() if isinstance(on, exp.And) else [on] if on is not None else []:
        if isinstance(term, exp.Between) and _column_of(term.this, alias) and not _uses(term.args["high"], alias):
            return term.this, term.args["high"], False
        if isinstance(term, (exp.LT, exp.LTE)) and _column_of(term.this, alias) and not _uses(term.expression, alias):
            return term.this, term.expression, isinstance(term, exp.LT)
        if isinstance(term, (exp.GT, exp.GTE)) and _column_of(term.expression, alias) and not _uses(term.this, alias):
            return term.expression, term.this, isinstance(term, exp.GT)
    return None


class _Rewriter:
    """The rewrites of the module docstring over a qualified query."""

    def __init__(self, catalog: Catalog, name: str, prefix: str, ended: bool, outer_interval_joins: int) -> None:
        self.catalog, self.name, self.prefix, self.ended = catalog, name, prefix, ended
        self.outer_interval_joins = outer_interval_joins
        self.versioned: set[str] = set()
        self.lookups: dict[str, TableDef] = {}

    def watermark(self) -> exp.Expr:
        return exp.select("wm").from_(exp.to_table(f"{self.prefix}__watermark")).subquery()

    def rewrite(self, query: exp.Expr) -> None:
        padded = 0
        for select in list(query.find_all(exp.Select)):
            for join in select.args.get("joins") or []:
                if isinstance(join.this, exp.Table) and join.this.args.get("version") is not None:
                    self._as_of(select, join)
                elif not self.ended and join.side in ("LEFT", "RIGHT", "FULL") and self.outer_interval_joins:
                    padded += self._padding(select, join)
        for table in query.find_all(exp.Table):
            if table.args.get("version") is not None:
                raise _refuse(
                    self.name, f"FROM {table.name} FOR SYSTEM_TIME AS OF", "a temporal table is read by a JOIN only"
                )
        if padded != self.outer_interval_joins:
            raise _refuse(
                self.name,
                "an outer interval join",
                "its condition does not bound the right side's time by the left side's (right.t BETWEEN … AND …)",
            )
        if not self.ended:
            self._windows(query)

    def _as_of(self, select: exp.Select, join: exp.Join) -> None:
        table = join.this
        time = table.args["version"].expression
        table.set("version", None)
        definition = self.catalog.tables.get(table.name)
        if definition is None:
            raise _refuse(self.name, f"a temporal join against view '{table.name}'", "join a table with a PRIMARY KEY")
        if definition.connector == "delta":
            self.lookups[definition.name] = definition
            return
        alias = table.alias_or_name
        self.versioned.add(definition.name)
        table.set("this", exp.to_identifier(f"{self.prefix}{definition.name}__versions", quoted=True))
        assert definition.rowtime is not None  # the planner's temporal join needs the versioned table's rowtime
        valid_from = exp.column(definition.rowtime, table=alias, quoted=True)
        valid_to = exp.column(VALID_TO, table=alias, quoted=True)
        current = exp.and_(
            exp.LTE(this=valid_from, expression=time.copy()),
            exp.or_(valid_to.is_(exp.null()), exp.LT(this=time.copy(), expression=valid_to.copy())),
            exp.not_(exp.column(DELETED, table=alias, quoted=True)),
        )
        join.set("on", exp.and_(join.args["on"], current) if join.args.get("on") else current)
        if not self.ended:
            select.where(exp.LTE(this=time.copy(), expression=self.watermark()), copy=False)

    def _padding(self, select: exp.Select, join: exp.Join) -> int:
        bound = _upper_bound(join.args.get("on"), join.this.alias_or_name)
        if bound is None:
            return 0
        if join.side != "LEFT":
            raise _refuse(self.name, f"a {join.side} interval join without ended input", "only LEFT joins are computed")
        column, upper, strict = bound
        expired = (exp.LTE if strict else exp.LT)(this=upper.copy(), expression=self.watermark())
        select.where(exp.paren(exp.or_(exp.not_(column.copy().is_(exp.null())), expired)), copy=False)
        return 1

    def _windows(self, query: exp.Expr) -> None:
        for window in list(query.find_all(exp.Window)):
            order = window.args.get("order")
            if order is None:
                if not isinstance(window.this, exp.RowNumber):
                    raise _refuse(
                        self.name, f"the window of {window.this.sql(Flink)}", "write its ORDER BY in the OVER clause"
                    )
                continue
            first = order.expressions[0]
            if isinstance(window.this, exp.RowNumber) and first.args.get("desc"):
                continue  # keep-last and Top-1 emit at once, without the watermark
            select = window.find_ancestor(exp.Select)
            assert select is not None  # a window function is part of a SELECT
            select.where(exp.LTE(this=first.this.copy(), expression=self.watermark()), copy=False)


def plan_batch(statement: PlannedStatement, catalog: Catalog, name: str, *, ended: bool = False) -> BatchPlan:
    """Plan ``statement``'s query as Spark batch SQL (module docstring); nothing runs.

    Args:
        statement: a planned ``INSERT`` (or ``SELECT``) of a script.
        catalog: the script's tables and views.
        name: what messages call it (the pipeline).
        ended: the input was ended (+∞ watermark): every buffered row is emitted; else rows the final
            watermark has not reached are left out (module docstring).

    Raises:
        UnsupportedPlanError: naming the pipeline and the construct, for what the module docstring refuses.
    """
    _check_plan(statement.sink, name, ended)
    outer_interval = sum(1 for n in walk(statement.sink) if isinstance(n, IntervalJoin) and n.kind != "inner")
    query = statement.statement.expression if isinstance(statement.statement, exp.Insert) else statement.statement
    query = _with_views(query.copy(), catalog)
    query = _window_table_functions(query, name, None if ended else _FINAL_WATERMARK)
    schema: dict[str, object] = {
        t.name: {c.name: c.declared_type.sql for c in t.columns} for t in catalog.tables.values()
    }
    try:
        query = qualify(query, schema=schema, dialect=Flink, quote_identifiers=True)
        annotate_types(query, schema=schema, dialect=Flink)
    except SqlglotError as e:
        raise _refuse(name, "its query", f"sqlglot cannot resolve it ({e})") from None
    prefix = f"__batch_{uuid.uuid4().hex[:8]}_"
    rewriter = _Rewriter(catalog, name, prefix, ended, outer_interval if not ended else 0)
    rewriter.rewrite(query)
    query = query.transform(lambda n: rewriter.watermark() if n == _FINAL_WATERMARK else n)
    query = query.transform(_integer_division).transform(flink_functions)
    sources = {}
    for table in query.find_all(exp.Table):
        definition = catalog.tables.get(table.name)
        if definition is None:
            continue  # a view (CTE), a versions view or the watermark
        if definition.connector in KAFKA_CONNECTORS:
            sources[definition.name] = definition
        elif definition.name not in rewriter.lookups:
            raise _refuse(
                name, f"a scan of Delta table '{definition.name}'", "Delta tables are read by lookup joins only"
            )
        table.set("this", exp.to_identifier(prefix + definition.name, quoted=True))
    sources.update({n: catalog.tables[n] for n in rewriter.versioned})
    return BatchPlan(
        name=name,
        sql=query.sql(dialect="spark"),
        columns=tuple((f.name, f.type.spark if f.type is not None else None) for f in statement.sink.fields),
        sources=sources,
        versioned=frozenset(rewriter.versioned),
        lookups=dict(rewriter.lookups),
        prefix=prefix,
    )


def run_batch(
    spark: SparkSession, plan: BatchPlan, changelogs: Mapping[str, DataFrame], lookups: Mapping[str, DataFrame]
) -> DataFrame:
    """Run ``plan`` over the given inputs.

    Args:
        changelogs: per table of ``plan.sources``, its changelog (:mod:`streamjoin.batch.sources`: physical
            columns + ``_rowkind`` + ``_partition`` + ``_seq``).
        lookups: per table of ``plan.lookups``, its current rows.

    Returns:
        The query's rows as ``plan.columns`` (names and types of the sink). The temporary views it used
        are dropped: the DataFrame holds the analysed plan.
    """
    views: dict[str, DataFrame] = {}
    computed = {name: (with_computed(changelogs[name], table), table) for name, table in plan.sources.items()}
    for name, (changelog, table) in computed.items():
        views[plan.view(name)] = final_table(changelog, table)
        if name in plan.versioned:
            views[plan.view(name, "versions")] = versions(changelog, table)
    for name, table in plan.lookups.items():
        views[plan.view(name)] = with_computed(lookups[name], table)
    views[plan.view("", "watermark")] = watermark(spark, computed)
    for view, df in views.items():
        df.createOrReplaceTempView(view)
    try:
        result = spark.sql(plan.sql)
    finally:
        for view in views:
            spark.catalog.dropTempView(view)
    renamed = result.toDF(*[n for n, _ in plan.columns])
    return renamed.select(*[F.col(n).cast(t) if t is not None else F.col(n) for n, t in plan.columns])


def batch_query(
    pipeline: SqlPipeline, spark: SparkSession, bootstrap_servers: Cluster, lakehouse: Lakehouse, *, ended: bool = False
) -> DataFrame:
    """What ``pipeline``'s sink table should hold after it has processed everything its topics hold now,
    computed as a Spark batch query (module docstring), independently of the streaming operators.

    Args:
        pipeline: a compiled SQL pipeline (:func:`streamjoin.planner.sql_pipelines`).
        bootstrap_servers: the Kafka cluster its topics are read from (every retained record): a
            :class:`~streamjoin.connectors.kafka_client.KafkaConnection` or servers.
        lakehouse: where its lookup joins' Delta tables live (a table's ``path`` option wins).
        ended: the streaming run ended its input (``run_pipeline(..., end_of_input=True)``); default: a
            catch-up run, whose event-time operators still hold what the final watermark has not reached.

    Returns:
        The sink's columns (names and Spark types of ``pipeline.sink_table``), one row per row of the query.

    Raises:
        UnsupportedPlanError: before anything runs, naming the pipeline and the construct the batch query
            cannot compute.
    """
    plan = plan_batch(pipeline.statement, pipeline.catalog, pipeline.name, ended=ended)
    changelogs = {name: read_changelog(spark, table, bootstrap_servers) for name, table in plan.sources.items()}
    lookups = {
        name: spark.read.format("delta").load(table.options.get("path") or lakehouse.table_path(name))
        for name, table in plan.lookups.items()
    }
    return run_batch(spark, plan, changelogs, lookups)
