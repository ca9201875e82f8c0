"""The query planner: walks a parsed ``SELECT`` and hands each construct to its rule.

:class:`QueryPlanner` holds what every rule needs (the catalog, the SQL source for error
locations, the state TTL) and dispatches as Flink's planner applies its rule set
(docs/semantics.md); each rule lives in its own module of :mod:`streamjoin.planner.rules`:

| SQL | rule | node |
| --- | --- | --- |
| ``FROM t`` | ``scan`` | ``TableSourceScan`` (views and ``WITH``'s common table expressions are planned inline) |
| projections, ``WHERE`` | ``project`` | ``Calc`` (expressions handed to Spark SQL) |
| ``JOIN … ON`` bounding both sides' time attributes | ``joins`` | ``IntervalJoin`` |
| ``JOIN t FOR SYSTEM_TIME AS OF l.rowtime`` | ``temporal`` | ``TemporalJoin`` (versioned table or versioned view) |
| ``JOIN delta_table FOR SYSTEM_TIME AS OF …`` / ``AS OF l.proctime`` | ``temporal`` | ``LookupJoin`` |
| any other ``JOIN`` | ``joins`` | ``Join`` (regular), state layout from the inputs' unique keys |
| ``IN`` / ``EXISTS`` subquery, ``NOT IN`` / ``NOT EXISTS`` | ``subquery`` | ``Join`` semi / anti |
| ``agg(…) OVER (… ORDER BY time …)`` | ``over`` | ``OverAggregate`` |
| ``ROW_NUMBER() OVER (…) … WHERE rn <= N`` | ``rank`` | ``Deduplicate`` (Top-1 in time order) / ``Rank`` (Top-N) |
| ``GROUP BY`` / aggregates, ``SELECT DISTINCT`` | ``aggregate`` | ``GroupAggregate`` |
| ``UNION ALL`` | ``union`` | ``Union`` |

Every error names the file, line and column, the table or column, and the rule
(:mod:`streamjoin.planner.diagnostics`), and is raised before anything runs.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from sqlglot import exp

from streamjoin.errors import StreamJoinError, UnsupportedPlanError, ValidationError
from streamjoin.planner.catalog import Catalog
from streamjoin.planner.diagnostics import SqlSource, error
from streamjoin.planner.expressions import Scope, Typer, and_all, conjuncts, field_column, resolve
from streamjoin.planner.plan import Field, Node, TableScan, walk
from streamjoin.planner.relation import Relation
from streamjoin.planner.rules.aggregate import aggregates_outside_windows, plan_aggregate
from streamjoin.planner.rules.joins import plan_join
from streamjoin.planner.rules.over import named_windows, plan_over
from streamjoin.planner.rules.project import expand_select, merge_calc, project
from streamjoin.planner.rules.rank import apply_rank_filter, check_ranks, plan_rank
from streamjoin.planner.rules.scan import plan_table_ref
from streamjoin.planner.rules.subquery import is_subquery_predicate, plan_subquery_join
from streamjoin.planner.rules.union import plan_union_all
from streamjoin.planner.rules.window import group_window_auxiliaries

__all__ = ["QueryPlanner", "check_ranks", "merge_calc"]

_Error = TypeVar("_Error", bound=StreamJoinError)

_RANK_FUNCTIONS = (exp.RowNumber,)
#: Flink 2.3 refuses these in streaming (AbstractTopNFunction).
_UNSUPPORTED_RANKS = (exp.Rank, exp.DenseRank)
_UNSUPPORTED_CLAUSES = {
    "order": ("ORDER BY", "a streaming query has no order; sort when reading the sink table"),
    "limit": ("LIMIT", "a streaming query has no end to limit"),
    "offset": ("OFFSET", "a streaming query has no end to skip into"),
    "qualify": ("QUALIFY", "filter the ROW_NUMBER() column in an outer query"),
}


@dataclass(frozen=True)
class CommonTable:
    """A common table expression of a ``WITH``: its query, the text it is in, and the frames of common table
    expressions it sees (:attr:`QueryPlanner.ctes` at its definition)."""

    query: exp.Expr
    source: SqlSource
    frames: tuple[dict[str, CommonTable], ...]


class QueryPlanner:
    """Plans queries against a catalog.

    Args:
        catalog: declared tables and views.
        source: the SQL text the queries come from (for error locations).
        state_ttl_ms: idle state retention for regular joins (``SET 'table.exec.state.ttl'``), or ``None``.
        mini_batch: group aggregates emit once per group and micro-batch (``SET 'table.exec.mini-batch.enabled'``).
    """

    def __init__(
        self, catalog: Catalog, source: SqlSource, *, state_ttl_ms: int | None = None, mini_batch: bool = False
    ):
        self.catalog = catalog
        self.source = source
        self.state_ttl_ms = state_ttl_ms
        self.mini_batch = mini_batch
        self.views_in_progress: list[str] = []
        #: The common table expressions in scope, innermost ``WITH`` last: name → its query and the frames it
        #: sees (those around its ``WITH`` and the expressions before it in the same ``WITH``).
        self.ctes: list[dict[str, CommonTable]] = []

    # ------------------------------------------------------------------ helpers

    def error(self, kind: type[_Error], node: exp.Expr | None, message: str, rule: str) -> _Error:
        """``kind`` (ValidationError / UnsupportedPlanError) for ``node`` of the current source, naming ``rule``
        (:func:`streamjoin.planner.diagnostics.error`); the caller raises it."""
        return error(kind, self.source, node, message, rule)

    @contextmanager
    def in_source(self, source: SqlSource | None):
        """Within the block, errors and types refer to ``source`` (a view's or a table's text), when given."""
        saved = self.source
        self.source = source or saved
        try:
            yield
        finally:
            self.source = saved

    def typer(self, node: Node) -> Typer:
        """A typer over ``node``'s output fields."""
        return Typer({f.name: f.type for f in node.fields}, self.source)

    def calc(self, input: Node, projections: list[tuple[Field, exp.Expr]], condition: exp.Expr | None = None) -> Node:
        """A Calc, merged into an input Calc (Flink's CalcMergeRule), and skipped when it changes nothing."""
        return merge_calc(input, projections, condition)

    def identity(self, node: Node) -> list[tuple[Field, exp.Expr]]:
        """Projections selecting every field of ``node`` unchanged."""
        return [(f, field_column(f.name)) for f in node.fields]

    @staticmethod
    def producer_name(node: Node) -> str:
        """How errors name the producer of ``node``'s rows: its table when it reads one, else the node."""
        scans = [n for n in walk(node) if isinstance(n, TableScan)]
        return f"'{scans[0].table.name}'" if len(scans) == 1 else node.describe()

    # ------------------------------------------------------------------ queries

    def plan_query(self, query: exp.Expr, outer: Scope | None = None) -> Relation:
        """Plan a query expression (``SELECT …`` or a parenthesised one).

        Raises:
            ValidationError: invalid SQL (unknown names, type mismatches, broken Flink rules).
            UnsupportedPlanError: valid SQL we cannot run with Flink's semantics.
        """
        if isinstance(query, exp.Subquery):
            return self.plan_query(query.this, outer)
        if isinstance(query, (exp.Select, exp.SetOperation)) and query.args.get("with_"):
            return self.plan_with(query, outer)
        if isinstance(query, exp.Select):
            return self.plan_select(query, outer)
        if isinstance(query, exp.Union) and query.args.get("distinct") is False:
            return plan_union_all(self, query, outer)
        what = "UNION / INTERSECT / EXCEPT" if isinstance(query, exp.SetOperation) else type(query).__name__.upper()
        raise self.error(UnsupportedPlanError, query, f"{what} queries are not supported", "supported-queries")

    def plan_with(self, query: exp.Select | exp.SetOperation, outer: Scope | None) -> Relation:
        """``WITH name AS (query), … <query>``: each common table expression is planned inline wherever the query
        reads it, as a view is (Flink expands them the same way); one sees those before it in its ``WITH``.

        Raises:
            ValidationError: a name given twice in one ``WITH``.
            UnsupportedPlanError: ``WITH RECURSIVE``, a column list (``WITH t (a, b) AS …``), or a name that is a
                declared table or view.
        """
        with_ = query.args["with_"]
        if with_.args.get("recursive"):
            raise self.error(UnsupportedPlanError, with_, "WITH RECURSIVE is not supported", "supported-clauses")
        frame: dict[str, CommonTable] = {}
        for cte in with_.expressions:
            name, alias = cte.alias, cte.args["alias"]
            if alias.columns:
                raise self.error(
                    UnsupportedPlanError,
                    cte,
                    f"WITH {name} (columns) AS … is not supported; name the columns in its SELECT",
                    "supported-clauses",
                )
            if name in frame:
                raise self.error(ValidationError, cte, f"WITH names '{name}' twice", "unique-names")
            if name in self.catalog.tables or name in self.catalog.views:
                raise self.error(
                    UnsupportedPlanError,
                    cte,
                    f"WITH {name}: '{name}' is a declared table or view; give the expression another name",
                    "unique-names",
                )
            frame[name] = CommonTable(cte.this, self.source, (*self.ctes, dict(frame)))
        query.set("with_", None)
        self.ctes.append(frame)
        try:
            return self.plan_query(query, outer)
        finally:
            self.ctes.pop()
            query.set("with_", with_)

    def common_table(self, name: str) -> CommonTable | None:
        """The innermost common table expression in scope named ``name``, if any."""
        return next((frame[name] for frame in reversed(self.ctes) if name in frame), None)

    def plan_select(self, select: exp.Select, outer: Scope | None) -> Relation:
        """Plan a ``SELECT``: FROM and WHERE, then the rule its select list calls for (aggregate, rank, OVER,
        projection)."""
        for key, (clause, why) in _UNSUPPORTED_CLAUSES.items():
            if select.args.get(key):
                raise self.error(
                    UnsupportedPlanError,
                    select.args[key],
                    f"{clause} is not supported in a streaming query: {why}",
                    "supported-clauses",
                )
        where = conjuncts(select.args["where"].this) if select.args.get("where") else []
        relation = self.plan_from(select, where, outer)
        scope = relation.scope(self.source, outer)
        node = relation.node

        plain: list[exp.Expr] = []
        subqueries: list[exp.Expr] = []
        for c in where:
            (subqueries if is_subquery_predicate(c) else plain).append(c)
        unconsumed = []
        for c in plain:
            ranked = apply_rank_filter(self, c, scope, node)
            if ranked is None:
                unconsumed.append(c)
            else:
                node = ranked
        plain = unconsumed
        if plain:
            conjunction = and_all(plain)
            assert conjunction is not None  # plain is not empty
            condition = resolve(conjunction, scope)
            self.typer(node).check_boolean(condition, "WHERE")
            node = self.calc(node, self.identity(node), condition)
        for predicate in subqueries:
            node = plan_subquery_join(self, node, predicate, Scope(relation.columns, self.source, outer))
        relation = Relation(node, relation.columns)

        items = expand_select(self, select, relation)
        windows = named_windows(select)
        distinct = select.args.get("distinct")
        has_agg = (
            bool(select.args.get("group"))
            or bool(select.args.get("having"))
            or any(aggregates_outside_windows(e) for _, e in items)
            # TUMBLE_START(…) and its kin belong to a GROUP BY TUMBLE(…): planned (or refused) with the aggregate.
            or any(group_window_auxiliaries(e) for _, e in items)
        )
        over = [w for _, e in items for w in e.find_all(exp.Window)]
        if distinct is not None:
            if distinct.args.get("on") is not None or has_agg or over:
                raise self.error(
                    UnsupportedPlanError,
                    distinct,
                    "SELECT DISTINCT is supported without ON, GROUP BY, aggregates or OVER",
                    "supported-queries",
                )
            # SELECT DISTINCT x, y is GROUP BY x, y (Flink plans it as a GroupAggregate).
            return plan_aggregate(self, select, relation, items, [e for _, e in items])
        if has_agg:
            if over:
                raise self.error(
                    UnsupportedPlanError,
                    over[0],
                    "OVER windows and GROUP BY in one query block are not supported; use a subquery",
                    "supported-queries",
                )
            return plan_aggregate(self, select, relation, items)
        for w in over:
            if isinstance(w.this, _UNSUPPORTED_RANKS):
                name = "RANK" if isinstance(w.this, exp.Rank) else "DENSE_RANK"
                raise self.error(
                    UnsupportedPlanError,
                    w,
                    f"{name}() on streaming table is not supported currently; ROW_NUMBER() is (a Top-N)",
                    "rank-function",
                )
        if any(isinstance(w.this, _RANK_FUNCTIONS) for w in over):
            return plan_rank(self, relation, items, windows)
        if over:
            return plan_over(self, relation, items, windows)
        return project(self, relation, items)

    def plan_from(self, select: exp.Select, where: list[exp.Expr], outer: Scope | None) -> Relation:
        """Plan the FROM clause and its joins; inner joins take the ``where`` conjuncts that need both sides."""
        from_ = select.args.get("from_")
        if from_ is None:
            raise self.error(UnsupportedPlanError, select, "a query without FROM is not supported", "supported-queries")
        relation = plan_table_ref(self, from_.this, outer)
        for join in select.args.get("joins") or []:
            relation = plan_join(self, relation, join, where, outer)
        return relation
