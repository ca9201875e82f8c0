"""From a parsed query to plan nodes: name resolution, validation and Flink's choice of operators.

:class:`QueryPlanner` walks a ``SELECT`` the way Flink's planner rules do and
picks one operator per construct (SEMANTICS.md):

| SQL | node |
| --- | --- |
| ``FROM t`` | ``TableSourceScan`` (views are planned inline) |
| projections, ``WHERE`` | ``Calc`` (expressions handed to Spark SQL) |
| ``JOIN … ON`` bounding both sides' time attributes | ``IntervalJoin`` |
| ``JOIN t FOR SYSTEM_TIME AS OF l.rowtime`` | ``TemporalJoin`` (versioned table or versioned view) |
| ``JOIN delta_table FOR SYSTEM_TIME AS OF …`` / ``AS OF l.proctime`` | ``LookupJoin`` |
| any other ``JOIN`` | ``Join`` (regular), state layout from the inputs' unique keys |
| ``IN`` / ``EXISTS`` subquery, ``NOT IN`` / ``NOT EXISTS`` | ``Join`` semi / anti |
| ``agg(…) OVER (… ORDER BY time …)`` | ``OverAggregate`` |
| ``ROW_NUMBER() OVER (…) … WHERE rn = 1`` | ``Deduplicate`` (time order) / ``Rank`` (Top-1) |
| ``GROUP BY`` / aggregates, ``SELECT DISTINCT`` | ``GroupAggregate`` |
| ``UNION ALL`` | ``Union`` |

Every error names the file, line and column, the table or column, and the rule
(:mod:`streamjoin.planner.diagnostics`), and is raised before anything runs.
"""

from __future__ import annotations

from contextlib import contextmanager

from sqlglot import exp

from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner.catalog import Catalog
from streamjoin.planner.diagnostics import SqlSource, error
from streamjoin.planner.relation import Relation
from streamjoin.planner.rules.project import expand_select, merge_calc, output_names, project
from streamjoin.planner.rules.scan import plan_table_ref, scan
from streamjoin.planner.rules.union import plan_union_all
from streamjoin.planner.dialect import Flink, interval_ms
from streamjoin.planner.expressions import (
    AGGREGATES, Scope, ScopeColumn, Typer, and_all, columns_of, conjuncts, field_column, resolve,
)
from streamjoin.planner.joins import extract_interval, split_equi
from streamjoin.planner.plan import (
    Aggregate, Calc, Deduplicate, Field, GroupAggregate, IntervalJoin, LookupJoin, Node, OverAggregate,
    RegularJoin, TableScan, TemporalJoin, uniquify, walk,
)
from streamjoin.planner.types import SqlType

__all__ = ["Relation", "QueryPlanner"]

_RANK_FUNCTIONS = (exp.RowNumber,)
_UNSUPPORTED_CLAUSES = {
    "order": ("ORDER BY", "a streaming query has no order; sort when reading the sink table"),
    "limit": ("LIMIT", "a streaming query has no end to limit"),
    "offset": ("OFFSET", "a streaming query has no end to skip into"),
    "qualify": ("QUALIFY", "filter the ROW_NUMBER() column in an outer query"),
}


def _computed_name(node: Node, extra: list) -> str:
    """A name for a computed input field: Flink's ``$f<n>`` spelled ``f<n>``, because Spark's state store
    takes grouping-key names as Avro names (letters, digits, ``_``); unique among ``node``'s fields."""
    taken = set(node.field_names) | {f.name for f, _ in extra}
    return uniquify([f"f{len(node.fields) + len(extra)}"], taken)[0]


def _is_subquery_predicate(node: exp.Expr) -> bool:
    inner = node.this if isinstance(node, exp.Not) else node
    return isinstance(inner, exp.Exists) or (isinstance(inner, exp.In) and inner.args.get("query") is not None)


class QueryPlanner:
    """Plans queries against a catalog.

    Args:
        catalog: declared tables and views.
        source: the SQL text the queries come from (for error locations).
        state_ttl_ms: idle state retention for regular joins (``SET 'table.exec.state.ttl'``), or ``None``.
    """

    def __init__(self, catalog: Catalog, source: SqlSource, *, state_ttl_ms: int | None = None):
        self.catalog = catalog
        self.source = source
        self.state_ttl_ms = state_ttl_ms
        self.views_in_progress: list[str] = []

    # ------------------------------------------------------------------ helpers

    def error(self, kind: type[Exception], node: exp.Expr | None, message: str, rule: str) -> Exception:
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
        if isinstance(query, exp.Select):
            return self.plan_select(query, outer)
        if isinstance(query, exp.Union) and query.args.get("distinct") is False:
            return plan_union_all(self, query, outer)
        what = "UNION / INTERSECT / EXCEPT" if isinstance(query, exp.SetOperation) else type(query).__name__.upper()
        raise self.error(UnsupportedPlanError, query, f"{what} queries are not supported", "supported-queries")

    def plan_select(self, select: exp.Select, outer: Scope | None) -> Relation:
        """Plan a ``SELECT``: FROM and WHERE, then the rule its select list calls for (aggregate, rank, OVER,
        projection)."""
        for key, (clause, why) in _UNSUPPORTED_CLAUSES.items():
            if select.args.get(key):
                raise self.error(UnsupportedPlanError, select.args[key], f"{clause} is not supported in a streaming query: {why}", "supported-clauses")
        if select.args.get("with_"):
            raise self.error(UnsupportedPlanError, select.args["with_"], "WITH (common table expressions) is not supported; declare a view", "supported-clauses")
        where = conjuncts(select.args["where"].this) if select.args.get("where") else []
        relation = self.plan_from(select, where, outer)
        scope = relation.scope(self.source, outer)
        node = relation.node

        plain, subqueries = [], []
        for c in where:
            (subqueries if _is_subquery_predicate(c) else plain).append(c)
        plain = [c for c in plain if not self._apply_rank_filter(c, scope, node)]
        if plain:
            condition = resolve(and_all(plain), scope)
            self.typer(node).check_boolean(condition, "WHERE")
            node = self.calc(node, self.identity(node), condition)
        for predicate in subqueries:
            node = self._plan_subquery_join(node, predicate, Scope(relation.columns, self.source, outer))
        relation = Relation(node, relation.columns)

        items = expand_select(self, select, relation)
        windows = self._named_windows(select)
        distinct = select.args.get("distinct")
        has_agg = bool(select.args.get("group")) or bool(select.args.get("having")) or any(
            self._aggregates_outside_windows(e) for _, e in items)
        over = [w for _, e in items for w in e.find_all(exp.Window)]
        if distinct is not None:
            if distinct.args.get("on") is not None or has_agg or over:
                raise self.error(UnsupportedPlanError, distinct, "SELECT DISTINCT is supported without ON, GROUP BY, aggregates or OVER", "supported-queries")
            # SELECT DISTINCT x, y is GROUP BY x, y (Flink plans it as a GroupAggregate).
            return self._plan_aggregate(select, relation, items, [e for _, e in items])
        if has_agg:
            if over:
                raise self.error(UnsupportedPlanError, over[0], "OVER windows and GROUP BY in one query block are not supported; use a subquery", "supported-queries")
            return self._plan_aggregate(select, relation, items)
        if any(isinstance(w.this, _RANK_FUNCTIONS) for w in over):
            return self._plan_rank(relation, items, windows)
        if over:
            return self._plan_over(relation, items, windows)
        return project(self, relation, items)

    # ------------------------------------------------------------------ FROM

    def plan_from(self, select: exp.Select, where: list[exp.Expr], outer: Scope | None) -> Relation:
        """Plan the FROM clause and its joins; inner joins take the ``where`` conjuncts that need both sides."""
        from_ = select.args.get("from_")
        if from_ is None:
            raise self.error(UnsupportedPlanError, select, "a query without FROM is not supported", "supported-queries")
        relation = plan_table_ref(self, from_.this, outer)
        for join in select.args.get("joins") or []:
            relation = self._plan_join(relation, join, where, outer)
        return relation

    # ------------------------------------------------------------------ joins

    def _join_kind(self, join: exp.Join) -> str:
        side = (join.side or "").upper()
        kind = (join.kind or "").upper()
        if kind in ("SEMI", "ANTI"):
            raise self.error(UnsupportedPlanError, join, f"{kind} JOIN syntax is not Flink SQL; use IN / EXISTS", "supported-joins")
        return {"LEFT": "left", "RIGHT": "right", "FULL": "full"}.get(side, "inner")

    def _plan_join(self, left: Relation, join: exp.Join, where: list[exp.Expr], outer: Scope | None) -> Relation:
        kind = self._join_kind(join)
        item = join.this
        on = join.args.get("on")
        if join.args.get("using"):
            raise self.error(UnsupportedPlanError, join, "JOIN … USING is not supported; write ON a.x = b.x", "supported-joins")
        if isinstance(item, exp.Table) and item.args.get("version") is not None:
            return self._plan_temporal(left, item, kind, on, outer)
        right = plan_table_ref(self, item, outer)
        right_names = uniquify(right.node.field_names, set(left.node.field_names))
        rename = dict(zip(right.node.field_names, right_names))
        columns = left.columns + [ScopeColumn(c.qualifier, c.name, rename[c.field], c.type) for c in right.columns]
        scope = Scope(columns, self.source, outer)
        conditions = conjuncts(on) if on is not None else []
        if kind == "inner":
            # Flink pushes WHERE predicates that need both sides into an inner join's condition.
            for c in list(where):
                if _is_subquery_predicate(c) or not columns_of(c):
                    continue
                found = [scope.lookup(col) for col in columns_of(c)]
                if all(f is not None and not f[1] for f in found):
                    fields = {f[0].field for f in found}
                    if fields & set(left.node.field_names) and fields & set(right_names):
                        conditions.append(c)
                        where.remove(c)
        resolved = [resolve(c, scope) for c in conditions]
        output_types = {f.name: f.type for f in left.node.fields}
        output_types.update({rename[f.name]: f.type for f in right.node.fields})
        typer = Typer(output_types, self.source)
        for c in resolved:
            typer.check_boolean(c, "ON")
        pairs, rest = split_equi(resolved, set(left.node.field_names), set(right_names))
        original = {v: k for k, v in rename.items()}
        node = self._choose_join(kind, left.node, right.node, pairs, rest, original, join)
        return Relation(node, columns)

    def _time_fields(self, node: Node, names: dict[str, str] | None = None) -> dict[str, str]:
        """Output name → ``ROWTIME``/``PROCTIME`` of ``node``'s time attributes."""
        out = {}
        for f in node.fields:
            if f.type is not None and f.type.time_attribute:
                out[names[f.name] if names else f.name] = f.type.time_attribute
        return out

    def _choose_join(self, kind, left: Node, right: Node, pairs, rest, original: dict[str, str], join: exp.Join) -> Node:
        """Flink's choice between IntervalJoin and Join for resolved ``pairs`` (equi keys) and ``rest``."""
        right_out = {v: k for k, v in original.items()}
        left_times = self._time_fields(left)
        right_times = self._time_fields(right, right_out)
        left_keys = [l for l, _ in pairs]
        right_keys = [original[r] for _, r in pairs]
        for attribute in ("ROWTIME", "PROCTIME"):
            lt = {n for n, a in left_times.items() if a == attribute}
            rt = {n for n, a in right_times.items() if a == attribute}
            bounds = extract_interval(rest, lt, rt)
            if bounds is None:
                continue
            for side, node in (("left", left), ("right", right)):
                if not node.is_insert_only:
                    raise self.error(
                        UnsupportedPlanError, join,
                        f"IntervalJoin consumes insert-only input, but its {side} input {self.producer_name(node)} "
                        f"produces {'updates' if 'U' in node.modify_kinds else 'deletes'}",
                        "interval-join-insert-only",
                    )
            remaining = [c for c in rest if c not in bounds.conditions]
            if remaining and kind != "inner":
                raise self.error(
                    UnsupportedPlanError, remaining[0],
                    f"an outer interval join supports only equality and time-bound conditions; '{remaining[0].sql(Flink)}' is neither",
                    "interval-join-condition",
                )
            return IntervalJoin(kind, left, right, left_keys, right_keys, bounds.lower_ms, bounds.upper_ms,
                                bounds.left_time, original[bounds.right_time], attribute == "ROWTIME", and_all(remaining))
        self._check_watermarks_for_bounds(rest, left, right, original)
        all_times = {**left_times, **right_times}
        for c in rest:
            used = [col for col in c.find_all(exp.Column) if col.name in all_times]
            if used:
                sides = {("left" if col.name in left_times else "right") for col in used}
                attributes = {all_times[col.name] for col in used}
                if sides == {"left", "right"} and len(attributes) > 1:
                    message = (f"join condition '{c.sql(Flink)}' compares a rowtime with a proctime; an interval join "
                               "needs time attributes of one kind on both sides")
                    raise self.error(ValidationError, c, message, "interval-join-time-attributes")
                raise self.error(
                    ValidationError, c,
                    f"regular join condition '{c.sql(Flink)}' uses time attribute '{used[0].name}': a regular join keeps every "
                    "row forever, so its condition may not use time attributes; bound both sides' rowtimes "
                    "(e.g. b.t BETWEEN a.t - INTERVAL '1' HOUR AND a.t) for an interval join, or CAST the time attribute to TIMESTAMP",
                    "regular-join-time-attributes",
                )
        return RegularJoin(kind, left, right, left_keys, right_keys, and_all(rest), self.state_ttl_ms)

    def _check_watermarks_for_bounds(self, rest, left: Node, right: Node, original: dict[str, str]) -> None:
        """Refuse an interval-shaped condition between a rowtime and a timestamp without WATERMARK.

        (Between two plain timestamps it is a regular join's condition, as in Flink.)
        """
        left_ts = {f.name for f in left.fields if f.type is not None and f.type.family == "timestamp"}
        right_ts = {r for r, o in original.items() if right.field(o).type is not None and right.field(o).type.family == "timestamp"}
        bounds = extract_interval(rest, left_ts, right_ts)
        if bounds is None:
            return
        sides = ((bounds.left_time, left.field(bounds.left_time)), (bounds.right_time, right.field(original[bounds.right_time])))
        if not any(f.is_rowtime for _, f in sides):
            return
        for name, node_field in sides:
            if not node_field.is_rowtime:
                raise self.error(
                    ValidationError, bounds.conditions[0],
                    f"the join condition bounds '{name}' like an interval join, but '{name}' has no watermark: "
                    "declare WATERMARK FOR it in its table to make it a rowtime",
                    "interval-join-watermark",
                )

    def _plan_temporal(self, left: Relation, item: exp.Table, kind: str, on: exp.Expr | None, outer: Scope | None) -> Relation:
        if kind not in ("inner", "left"):
            raise self.error(ValidationError, item, f"a temporal table join is INNER or LEFT, not {kind.upper()}", "temporal-join-type")
        version = item.args["version"]
        left_scope = left.scope(self.source, outer)
        time_column = version.expression
        if not isinstance(time_column, exp.Column):
            raise self.error(ValidationError, time_column, "FOR SYSTEM_TIME AS OF takes a time attribute of the left table", "temporal-join-time")
        found, _ = left_scope.resolve(time_column)
        left_time = left.node.field(found.field)
        if not left_time.type or not left_time.type.time_attribute:
            raise self.error(
                ValidationError, time_column,
                f"FOR SYSTEM_TIME AS OF '{time_column.sql(Flink)}': the column is {left_time.type}, not a time attribute; "
                "declare WATERMARK FOR it (event time) or use a PROCTIME() column",
                "temporal-join-watermark",
            )
        name, alias = item.name, item.alias or item.name
        table = self.catalog.tables.get(name)
        if table is not None and table.connector == "delta" or left_time.type.time_attribute == "PROCTIME":
            if table is None or table.connector != "delta":
                raise self.error(UnsupportedPlanError, item, f"a processing-time temporal join needs a Delta table to look up; '{name}' is not one", "lookup-join-table")
            right = scan(self, table)
        else:
            right = plan_table_ref(self, exp.Table(this=item.this.copy()), outer)
        right = right.qualified(alias)
        right_names = uniquify(right.node.field_names, set(left.node.field_names))
        rename = dict(zip(right.node.field_names, right_names))
        original = {v: k for k, v in rename.items()}
        columns = left.columns + [ScopeColumn(c.qualifier, c.name, rename[c.field], c.type) for c in right.columns]
        scope = Scope(columns, self.source, outer)
        resolved = [resolve(c, scope) for c in conjuncts(on)]
        types = {f.name: f.type for f in left.node.fields} | {rename[f.name]: f.type for f in right.node.fields}
        typer = Typer(types, self.source)
        for c in resolved:
            typer.check_boolean(c, "ON")
        pairs, rest = split_equi(resolved, set(left.node.field_names), set(right_names))
        if rest:
            raise self.error(
                UnsupportedPlanError, rest[0],
                f"a temporal join condition may only equate left columns with the right table's key; '{rest[0].sql(Flink)}' is not supported",
                "temporal-join-condition",
            )
        left_keys = [l for l, _ in pairs]
        right_keys = [original[r] for _, r in pairs]
        if isinstance(right.node, TableScan) and right.node.table.connector == "delta":
            if not pairs:
                raise self.error(ValidationError, item, f"a lookup join needs an equality on columns of '{name}'", "lookup-join-condition")
            node = LookupJoin(kind, left.node, right.node, left_keys, right_keys)
            return Relation(node, columns)
        versioned, primary_key, rowtime, append_only = self._versioned(right.node, name, item)
        if set(right_keys) != set(primary_key):
            raise self.error(
                ValidationError, item,
                f"the temporal join condition must equate the versioned table's primary key [{', '.join(primary_key)}] "
                f"of '{name}' with left columns, and nothing else; it equates [{', '.join(right_keys) or 'nothing'}]",
                "temporal-join-primary-key",
            )
        node = TemporalJoin(kind, left.node, versioned, left_keys, right_keys, found.field, rowtime, primary_key, append_only)
        return Relation(node, columns)

    def _versioned(self, node: Node, name: str, at: exp.Expr) -> tuple[Node, tuple[str, ...], str, bool]:
        """The versioned side of an event-time temporal join: ``(input node, primary key, rowtime, append-only log)``.

        A versioned view (``ROW_NUMBER() OVER (PARTITION BY k ORDER BY rowtime DESC) = 1`` over an
        append-only log) becomes the log itself, deduplicated into versions by the temporal join operator.
        """
        calc = node if isinstance(node, Calc) else None
        below = calc.inputs[0] if calc else node
        if isinstance(below, Deduplicate) and below.keep == "last" and below.time == "ROWTIME" and below.inputs[0].is_insert_only:
            projections = calc.projections if calc else self.identity(below)[:-1]
            if any(isinstance(e, exp.Column) and e.name == below.rank_field for _, e in projections):
                raise self.error(UnsupportedPlanError, at, f"versioned view '{name}' may not select its ROW_NUMBER column", "temporal-join-versioned-view")
            log = Calc(below.inputs[0], projections)
            names = {e.name: f.name for f, e in projections if isinstance(e, exp.Column)}
            if below.order_by not in names or not all(k in names for k in below.keys):
                raise self.error(ValidationError, at, f"versioned view '{name}' must select its key and rowtime", "temporal-join-versioned-view")
            log = log if not log.is_identity else below.inputs[0]
            return log, tuple(names[k] for k in below.keys), names[below.order_by], True
        if not node.unique_keys:
            raise self.error(
                ValidationError, at,
                f"the versioned table '{name}' of an event-time temporal join needs a PRIMARY KEY (… NOT ENFORCED), but none can be found",
                "temporal-join-primary-key",
            )
        rowtimes = [f.name for f in node.fields if f.is_rowtime]
        if not rowtimes:
            raise self.error(
                ValidationError, at,
                f"the versioned table '{name}' of an event-time temporal join needs a rowtime: declare WATERMARK FOR its version time",
                "temporal-join-watermark",
            )
        return node, node.unique_keys[0], rowtimes[0], False

    # ------------------------------------------------------------------ IN / EXISTS

    def _plan_subquery_join(self, left: Node, predicate: exp.Expr, outer_scope: Scope) -> Node:
        negated = isinstance(predicate, exp.Not)
        inner = predicate.this if negated else predicate
        query = inner.this if isinstance(inner, exp.Exists) else inner.args["query"].this
        if not isinstance(query, exp.Select):
            raise self.error(UnsupportedPlanError, query, "only SELECT subqueries are supported in IN / EXISTS", "supported-queries")
        sub_where = conjuncts(query.args["where"].this) if query.args.get("where") else []
        right = self.plan_from(query, sub_where, None)
        right_scope = right.scope(self.source)
        local, correlated = [], []
        for c in sub_where:
            outer_refs = [col for col in columns_of(c) if right_scope.lookup(col) is None]
            (correlated if outer_refs else local).append(c)
        is_aggregating = bool(query.args.get("group") or query.args.get("having")) or any(
            self._aggregates_outside_windows(e) for e in query.expressions)
        if is_aggregating or any(query.args.get(k) for k in ("order", "limit", "distinct")):
            if correlated:
                raise self.error(UnsupportedPlanError, correlated[0], "a correlated subquery with aggregates is not supported", "supported-queries")
            rel = self.plan_select(query, None)
            right_node, right_columns = rel.node, rel.columns
            local = []
        else:
            right_node = right.node
            if local:
                condition = resolve(and_all(local), right_scope)
                self.typer(right_node).check_boolean(condition, "WHERE")
                right_node = self.calc(right_node, self.identity(right_node), condition)
            right_columns = right.columns
        kind = "anti" if negated else "semi"
        right_names = uniquify(right_node.field_names, set(left.field_names))
        rename = dict(zip(right_node.field_names, right_names))
        left_columns = outer_scope.columns
        join_scope = Scope(
            [ScopeColumn(c.qualifier, c.name, rename[c.field], c.type) for c in right_columns],
            self.source,
            Scope(left_columns, self.source, outer_scope.outer),
        )
        conditions = [resolve(c, join_scope, allow_outer=True) for c in correlated]
        types = {f.name: f.type for f in left.fields} | {rename[f.name]: f.type for f in right_node.fields}
        typer = Typer(types, self.source)
        null_aware = False
        if isinstance(inner, exp.In):
            if len(query.expressions) != 1 or isinstance(query.expressions[0], exp.Star):
                raise self.error(ValidationError, query, "an IN subquery must select exactly one column", "in-subquery-columns")
            needle = resolve(inner.this, Scope(left_columns, self.source, outer_scope.outer))
            if is_aggregating:
                selected = field_column(rename[right_columns[0].field], query.expressions[0])
            else:
                item = query.expressions[0].this if isinstance(query.expressions[0], exp.Alias) else query.expressions[0]
                selected = resolve(item, Scope([ScopeColumn(c.qualifier, c.name, rename[c.field], c.type) for c in right_columns], self.source))
                if not isinstance(selected, exp.Column):
                    raise self.error(UnsupportedPlanError, item, "an IN subquery must select a plain column", "in-subquery-columns")
            equality = exp.EQ(this=needle, expression=selected)
            typer.type_of(equality)
            left_type, right_type = typer.type_of(needle), typer.type_of(selected)
            null_aware = negated and not (left_type and right_type and not left_type.nullable and not right_type.nullable)
            if null_aware:
                # NOT IN is false as soon as a NULL is involved: Flink's null-aware anti join, no equi key.
                conditions.insert(0, exp.or_(equality.copy(), exp.Is(this=needle.copy(), expression=exp.Null()),
                                             exp.Is(this=selected.copy(), expression=exp.Null())))
            else:
                conditions.insert(0, equality)
        for c in conditions:
            typer.check_boolean(c, "subquery")
        pairs, rest = ([], conditions) if null_aware else split_equi(conditions, set(left.field_names), set(right_names))
        original = {v: k for k, v in rename.items()}
        for c in rest:
            times = [col.name for col in c.find_all(exp.Column) if (types.get(col.name) and types[col.name].time_attribute)]
            if times:
                raise self.error(ValidationError, c, f"a semi/anti join condition may not use time attribute '{times[0]}'", "regular-join-time-attributes")
        return RegularJoin(kind, left, right_node, [l for l, _ in pairs], [original[r] for _, r in pairs],
                           and_all(rest), self.state_ttl_ms)

    # ------------------------------------------------------------------ aggregates

    def _aggregates_outside_windows(self, e: exp.Expr) -> list[exp.Expr]:
        return [a for a in e.find_all(*AGGREGATES) if not a.find_ancestor(exp.Window)]

    def _aggregate_call(self, call: exp.Expr, output: str, input: Node, scope: Scope, extra: list) -> Aggregate:
        """An :class:`Aggregate` for ``call``; a non-column argument becomes a computed input field in ``extra``."""
        function = AGGREGATES[type(call)]
        arg = call.this
        if isinstance(arg, exp.Distinct):
            if function != "COUNT" or len(arg.expressions) != 1:
                raise self.error(UnsupportedPlanError, call, f"{call.sql(Flink)}: DISTINCT is supported in COUNT(DISTINCT x) only", "supported-aggregates")
            function, arg = "COUNT_DISTINCT", arg.expressions[0]
        if isinstance(arg, exp.Star) or (function == "COUNT" and arg is None):
            return Aggregate(output, "COUNT", None, SqlType("BIGINT", nullable=False))
        if arg is None or call.expressions:
            raise self.error(UnsupportedPlanError, call, f"{call.sql(Flink)}: aggregates take one argument here", "supported-aggregates")
        resolved = resolve(arg, scope)
        arg_type = self.typer(input).type_of(resolved)
        if isinstance(resolved, exp.Column):
            field = resolved.name
        else:
            field = _computed_name(input, extra)
            extra.append((Field(field, arg_type), resolved))
        return Aggregate(output, function, field, self._aggregate_type(function, arg_type, call))

    def _aggregate_type(self, function: str, t: SqlType | None, call: exp.Expr) -> SqlType | None:
        if function in ("COUNT", "COUNT_DISTINCT"):
            return SqlType("BIGINT", nullable=False)
        if t is None:
            return None
        t = t.plain()
        if function in ("SUM", "AVG") and t.family != "numeric":
            raise self.error(ValidationError, call, f"{function} needs a number; '{call.this.sql(Flink)}' is {t}", "type-mismatch")
        if function == "SUM" and t.root == "DECIMAL":
            return SqlType("DECIMAL", 38, t.scale)
        if function == "AVG" and t.root == "DECIMAL":
            return SqlType("DECIMAL", 38, max(6, t.scale))
        return t.with_nullable(True)

    def _plan_aggregate(self, select: exp.Select, relation: Relation, items, group_exprs: list | None = None) -> Relation:
        scope = relation.scope(self.source)
        node = relation.node
        if group_exprs is None:
            group_exprs = select.args["group"].expressions if select.args.get("group") else []
        for g in group_exprs:
            if isinstance(g, (exp.Literal,)) or g.find(exp.Anonymous) and g.find(exp.Anonymous).name.upper() in ("TUMBLE", "HOP", "SESSION", "CUMULATE"):
                raise self.error(UnsupportedPlanError, g, f"GROUP BY {g.sql(Flink)} is not supported (group windows, ordinals)", "supported-aggregates")
        extra: list[tuple[Field, exp.Expr]] = []
        group_fields, group_map = [], {}
        for g in group_exprs:
            resolved = resolve(g, scope)
            if isinstance(resolved, exp.Column):
                field = resolved.name
            else:
                field = _computed_name(node, extra)
                extra.append((Field(field, self.typer(node).type_of(resolved)), resolved))
            group_fields.append(field)
            group_map[resolved.sql(Flink)] = field
        calls: list[Aggregate] = []
        call_map: dict[str, str] = {}
        having = select.args["having"].this if select.args.get("having") else None
        names = output_names(items)
        item_names = {id(e): n for (_, e), n in zip(items, names)}
        for e in [e for _, e in items] + ([having] if having is not None else []):
            for call in self._aggregates_outside_windows(e):
                key = call.sql(Flink)
                if key in call_map:
                    continue
                # An aggregate that is a select item of its own is named like it (Flink: EXPR$1 or its alias).
                output = item_names.get(id(call))
                if output is None or output in group_fields or output in call_map.values():
                    output = f"agg${len(calls)}"
                aggregate = self._aggregate_call(call, output, node, scope, extra)
                calls.append(aggregate)
                call_map[key] = output
        if not calls:
            # GROUP BY without aggregates: MIN of a grouping column never changes, so the operator emits
            # +I when a group appears and -D when it empties, as Flink's GroupAggregate without calls.
            first = group_fields[0]
            calls.append(Aggregate("$distinct", "MIN", first, node.field(first).type if first in node.field_names else None))
        computed = {f.name for f, _ in extra}
        needed = [n for n in dict.fromkeys(group_fields + [a.arg for a in calls if a.arg]) if n not in computed]
        if extra:
            pre = Calc(node, [(node.field(n), field_column(n)) for n in needed] + extra)
        else:
            pre = node
        if not pre.is_insert_only and any(a.function in ("FIRST_VALUE", "LAST_VALUE") for a in calls):
            raise self.error(UnsupportedPlanError, select, "FIRST_VALUE / LAST_VALUE over a changelog with retractions is not supported", "supported-aggregates")
        agg = GroupAggregate(pre, group_fields, calls)
        agg_scope_types = {f.name: f.type for f in agg.fields}

        def rewrite(e: exp.Expr) -> exp.Expr:
            def replace(n: exp.Expr) -> exp.Expr:
                if isinstance(n, tuple(AGGREGATES)) and not n.find_ancestor(exp.Window):
                    return field_column(call_map[n.sql(Flink)], n)
                return n

            replaced = e.copy().transform(replace, copy=False)
            resolved_expr = resolve(replaced, Scope(relation.columns + [ScopeColumn(None, c, c, agg_scope_types[c]) for c in call_map.values()], self.source))

            def to_group(n: exp.Expr) -> exp.Expr:
                key = n.sql(Flink)
                if key in group_map:
                    return field_column(group_map[key], n)
                return n

            grouped = resolved_expr.transform(to_group, copy=False)
            for col in grouped.find_all(exp.Column):
                if col.name not in agg_scope_types:
                    raise self.error(ValidationError, col, f"column '{col.name}' is not being grouped: add it to GROUP BY or aggregate it", "group-by-columns")
            return grouped

        exprs = [rewrite(e) for _, e in items]
        condition = rewrite(having) if having is not None else None
        if condition is not None:
            self.typer(agg).check_boolean(condition, "HAVING")
        typer = self.typer(agg)
        projections = [(Field(n, typer.type_of(e)), e) for n, e in zip(names, exprs)]
        out = self.calc(agg, projections, condition)
        return Relation(out, [ScopeColumn(None, f.name, f.name, f.type) for f, _ in projections])

    # ------------------------------------------------------------------ OVER

    def _named_windows(self, select: exp.Select) -> dict[str, exp.Window]:
        return {w.this.name: w for w in select.args.get("windows") or []}

    def _window_spec(self, window: exp.Window, named: dict[str, exp.Window]) -> exp.Window:
        alias = window.args.get("alias")
        if alias is not None:
            name = alias.name
            if name not in named:
                raise self.error(ValidationError, window, f"window '{name}' is not defined in the WINDOW clause", "window-exists")
            return named[name]
        return window

    def _over_frame(self, spec: exp.Window, order_field: Field, at: exp.Expr) -> tuple[str, int | None]:
        frame = spec.args.get("spec")
        if frame is None:
            return "range", None
        kind = frame.args.get("kind", "").upper()
        start, end = frame.args.get("start"), frame.args.get("end")
        if frame.args.get("start_side", "").upper() != "PRECEDING" or (end not in (None, "CURRENT ROW")):
            raise self.error(UnsupportedPlanError, at, f"OVER frame '{frame.sql(Flink)}' is not supported: only … PRECEDING AND CURRENT ROW", "over-frame")
        if start == "UNBOUNDED":
            return kind.lower(), None
        if kind == "ROWS":
            if not (isinstance(start, exp.Literal) and not start.is_string):
                raise self.error(ValidationError, at, f"ROWS frames count rows: '{frame.sql(Flink)}'", "over-frame")
            return "rows", int(start.name)
        if not isinstance(start, exp.Interval):
            raise self.error(ValidationError, at, f"RANGE frames over a time attribute need an INTERVAL: '{frame.sql(Flink)}'", "over-frame")
        return "range", interval_ms(start)

    def _plan_over(self, relation: Relation, items, named: dict[str, exp.Window]) -> Relation:
        scope = relation.scope(self.source)
        node = relation.node
        windows = [w for _, e in items for w in e.find_all(exp.Window)]
        specs = [self._window_spec(w, named) for w in windows]
        keys = {(tuple(p.sql(Flink) for p in s.args.get("partition_by") or []),
                 s.args["order"].sql(Flink) if s.args.get("order") else None,
                 s.args["spec"].sql(Flink) if s.args.get("spec") else None) for s in specs}
        if len(keys) > 1:
            raise self.error(UnsupportedPlanError, windows[1], "all OVER aggregates of a query must use the same window (Flink requires it)", "over-same-window")
        spec = specs[0]
        order = spec.args.get("order")
        if order is None or len(order.expressions) != 1:
            raise self.error(ValidationError, windows[0], "an OVER window must be ORDER BY one time attribute", "over-order-by-time")
        ordered = order.expressions[0]
        order_resolved = resolve(ordered.this, scope)
        order_field = node.field(order_resolved.name) if isinstance(order_resolved, exp.Column) else None
        if order_field is None or order_field.type is None or not order_field.type.time_attribute:
            described = f"{order_field.type}" if order_field and order_field.type else "not a time attribute"
            raise self.error(
                ValidationError, ordered,
                f"OVER window ORDER BY '{ordered.this.sql(Flink)}' ({described}): in streaming, OVER windows must be ordered by a "
                "time attribute (a rowtime with WATERMARK FOR, or PROCTIME())",
                "over-order-by-time",
            )
        if ordered.args.get("desc"):
            raise self.error(ValidationError, ordered, "OVER windows must be ordered by their time attribute ascending", "over-order-by-time")
        if not node.is_insert_only:
            raise self.error(UnsupportedPlanError, windows[0], f"OverAggregate consumes insert-only input; {self.producer_name(node)} produces updates", "over-insert-only")
        partition = []
        for p in spec.args.get("partition_by") or []:
            resolved = resolve(p, scope)
            if not isinstance(resolved, exp.Column):
                raise self.error(UnsupportedPlanError, p, "PARTITION BY takes columns", "over-partition")
            partition.append(resolved.name)
        frame, preceding = self._over_frame(spec, order_field, windows[0])
        extra: list = []
        aggregates: list[Aggregate] = []
        over_map: dict[str, str] = {}
        for w in windows:
            if type(w.this) not in AGGREGATES:
                raise self.error(UnsupportedPlanError, w, f"{w.this.sql(Flink)} OVER is not supported; supported: {', '.join(AGGREGATES.values())}", "supported-aggregates")
            if w.sql(Flink) not in over_map:
                output = f"w0$o{len(aggregates)}"
                aggregates.append(self._aggregate_call(w.this, output, node, scope, extra))
                over_map[w.sql(Flink)] = output
        pre = Calc(node, self.identity(node) + extra) if extra else node
        over = OverAggregate(pre, partition, order_field.name, order_field.type.time_attribute == "ROWTIME", frame, preceding, aggregates)
        over_columns = relation.columns + [ScopeColumn(None, a.output, a.output, a.type) for a in aggregates]

        def replace(n: exp.Expr) -> exp.Expr:
            if isinstance(n, exp.Window):
                return field_column(over_map[n.sql(Flink)], n)
            return n

        exprs = [resolve(e.transform(replace), Scope(over_columns, self.source)) for _, e in items]
        return project(self, Relation(over, over_columns), items, exprs)

    # ------------------------------------------------------------------ ROW_NUMBER

    def _plan_rank(self, relation: Relation, items, named) -> Relation:
        scope = relation.scope(self.source)
        node = relation.node
        windows = [w for _, e in items for w in e.find_all(exp.Window)]
        if len(windows) != 1:
            raise self.error(UnsupportedPlanError, windows[1], "ROW_NUMBER() cannot be combined with other OVER windows in one query block", "rank-alone")
        window = windows[0]
        alias_item = next((a, e) for a, e in items if window in list(e.find_all(exp.Window)))
        if alias_item[1] is not window or not alias_item[0]:
            raise self.error(UnsupportedPlanError, window, "ROW_NUMBER() OVER (…) must be a select item of its own with an alias (… AS rn)", "rank-filter")
        spec = self._window_spec(window, named)
        keys = []
        for p in spec.args.get("partition_by") or []:
            resolved = resolve(p, scope)
            if not isinstance(resolved, exp.Column):
                raise self.error(UnsupportedPlanError, p, "ROW_NUMBER() PARTITION BY takes columns", "rank-partition")
            keys.append(resolved.name)
        if not keys:
            raise self.error(UnsupportedPlanError, window, "ROW_NUMBER() without PARTITION BY (a global Top-N) is not supported", "rank-partition")
        order = spec.args.get("order")
        if order is None or len(order.expressions) != 1:
            raise self.error(UnsupportedPlanError, window, "ROW_NUMBER() must be ORDER BY exactly one column here", "rank-order")
        ordered = order.expressions[0]
        order_resolved = resolve(ordered.this, scope)
        if not isinstance(order_resolved, exp.Column):
            raise self.error(UnsupportedPlanError, ordered, "ROW_NUMBER() ORDER BY takes a column", "rank-order")
        order_field = node.field(order_resolved.name)
        time = order_field.type.time_attribute if order_field.type else None
        keep = "last" if ordered.args.get("desc") else "first"
        if time is None and keep == "first":
            raise self.error(
                UnsupportedPlanError, ordered,
                f"ROW_NUMBER() ORDER BY '{ordered.this.sql(Flink)}' ASC is a Top-1 Rank on a non-time column, which is not supported; "
                "order by a time attribute (deduplication) or DESC",
                "rank-order",
            )
        if not node.is_insert_only:
            raise self.error(UnsupportedPlanError, window, f"deduplication consumes insert-only input; {self.producer_name(node)} produces updates", "deduplicate-insert-only")
        rank_name = alias_item[0]
        dedup = Deduplicate(node, keys, order_field.name, time, keep, uniquify([rank_name], set(node.field_names))[0])
        dedup.pending = window
        columns = relation.columns + [ScopeColumn(None, rank_name, dedup.rank_field, dedup.fields[-1].type)]
        exprs = [field_column(dedup.rank_field) if e is window else resolve(e, Scope(columns, self.source)) for _, e in items]
        return project(self, Relation(dedup, columns), items, exprs)

    def _apply_rank_filter(self, condition: exp.Expr, scope: Scope, node: Node) -> bool:
        """Consume ``rn = 1`` (``rn <= 1``, ``rn < 2``) on a pending ROW_NUMBER column; True when consumed."""
        c = condition.unnest()
        if not isinstance(c, (exp.EQ, exp.LTE, exp.LT)) or not isinstance(c.this, exp.Column) or not isinstance(c.expression, exp.Literal):
            return False
        found = scope.lookup(c.this)
        if found is None or found[1]:
            return False
        name, current = found[0].field, node
        while isinstance(current, Calc):
            source = next((e for f, e in current.projections if f.name == name), None)
            if not isinstance(source, exp.Column):
                return False
            name, current = source.name, current.inputs[0]
        if not (isinstance(current, Deduplicate) and getattr(current, "pending", False) and current.rank_field == name):
            return False
        limit = int(c.expression.name) - (1 if isinstance(c, exp.LT) else 0)
        if limit != 1:
            raise self.error(UnsupportedPlanError, condition, f"'{condition.sql(Flink)}' is a Top-N with N = {limit}; only ROW_NUMBER() … = 1 (deduplication, Top-1) is supported", "rank-filter")
        current.pending = None
        return True


def check_ranks(root: Node, source: SqlSource) -> None:
    """Refuse a ROW_NUMBER() column that no outer ``WHERE rn = 1`` filters (Flink has no unbounded ROW_NUMBER).

    Raises:
        UnsupportedPlanError: naming the ranked column.
    """
    for node in walk(root):
        if isinstance(node, Deduplicate) and getattr(node, "pending", False):
            raise error(
                UnsupportedPlanError, source, node.pending,
                f"ROW_NUMBER() AS {node.rank_field} must be filtered by an outer WHERE {node.rank_field} = 1 (deduplication)",
                "rank-filter",
            )
