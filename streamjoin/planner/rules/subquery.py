"""``[NOT] IN (SELECT …)`` and ``[NOT] EXISTS (SELECT …)`` in ``WHERE``: a semi / anti regular join, the
correlated conditions as its condition; ``NOT IN`` over nullable columns is Flink's null-aware anti
join (Flink's ``SubQueryRemoveRule`` then ``StreamPhysicalJoinRule``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner.expressions import (
    Scope,
    ScopeColumn,
    Typer,
    and_all,
    columns_of,
    conjuncts,
    field_column,
    resolve,
)
from streamjoin.planner.joins import split_equi
from streamjoin.planner.plan import Node, RegularJoin, uniquify
from streamjoin.planner.rules.aggregate import aggregates_outside_windows
from streamjoin.planner.rules.window import plan_window_join

if TYPE_CHECKING:
    from streamjoin.planner.builder import QueryPlanner

__all__ = ["is_subquery_predicate", "plan_subquery_join"]


def plan_subquery_join(planner: QueryPlanner, left: Node, predicate: exp.Expr, outer_scope: Scope) -> Node:
    """``left`` semi/anti-joined with the subquery of ``predicate`` (``[NOT] IN`` / ``[NOT] EXISTS``);
    correlated conjuncts of the subquery's WHERE become the join condition.

    Raises:
        ValidationError: an IN subquery not selecting one column, time attributes in the condition.
        UnsupportedPlanError: a non-SELECT subquery, a correlated aggregating subquery.
    """
    negated = isinstance(predicate, exp.Not)
    inner = predicate.this if negated else predicate
    query = inner.this if isinstance(inner, exp.Exists) else inner.args["query"].this
    if not isinstance(query, exp.Select):
        raise planner.error(
            UnsupportedPlanError, query, "only SELECT subqueries are supported in IN / EXISTS", "supported-queries"
        )
    sub_where = conjuncts(query.args["where"].this) if query.args.get("where") else []
    right = planner.plan_from(query, sub_where, None)
    right_scope = right.scope(planner.source)
    local: list[exp.Expr] = []
    correlated: list[exp.Expr] = []
    for c in sub_where:
        outer_refs = [col for col in columns_of(c) if right_scope.lookup(col) is None]
        (correlated if outer_refs else local).append(c)
    is_aggregating = bool(query.args.get("group") or query.args.get("having")) or any(
        aggregates_outside_windows(e) for e in query.expressions
    )
    if is_aggregating or any(query.args.get(k) for k in ("order", "limit", "distinct")):
        if correlated:
            raise planner.error(
                UnsupportedPlanError,
                correlated[0],
                "a correlated subquery with aggregates is not supported",
                "supported-queries",
            )
        rel = planner.plan_select(query, None)
        right_node, right_columns = rel.node, rel.columns
        local = []
    else:
        right_node = right.node
        if local:
            conjunction = and_all(local)
            assert conjunction is not None  # local is not empty
            condition = resolve(conjunction, right_scope)
            planner.typer(right_node).check_boolean(condition, "WHERE")
            right_node = planner.calc(right_node, planner.identity(right_node), condition)
        right_columns = right.columns
    kind = "anti" if negated else "semi"
    right_names = uniquify(right_node.field_names, set(left.field_names))
    rename = dict(zip(right_node.field_names, right_names))
    left_columns = outer_scope.columns
    join_scope = Scope(
        [ScopeColumn(c.qualifier, c.name, rename[c.field], c.type) for c in right_columns],
        planner.source,
        Scope(left_columns, planner.source, outer_scope.outer),
    )
    conditions = [resolve(c, join_scope, allow_outer=True) for c in correlated]
    types = {f.name: f.type for f in left.fields} | {rename[f.name]: f.type for f in right_node.fields}
    typer = Typer(types, planner.source)
    null_aware = False
    if isinstance(inner, exp.In):
        if len(query.expressions) != 1 or isinstance(query.expressions[0], exp.Star):
            raise planner.error(
                ValidationError, query, "an IN subquery must select exactly one column", "in-subquery-columns"
            )
        needle = resolve(inner.this, Scope(left_columns, planner.source, outer_scope.outer))
        selected: exp.Expr
        if is_aggregating:
            selected = field_column(rename[right_columns[0].field], query.expressions[0])
        else:
            item = query.expressions[0].this if isinstance(query.expressions[0], exp.Alias) else query.expressions[0]
            selected = resolve(
                item,
                Scope(
                    [ScopeColumn(c.qualifier, c.name, rename[c.field], c.type) for c in right_columns], planner.source
                ),
            )
            if not isinstance(selected, exp.Column):
                raise planner.error(
                    UnsupportedPlanError, item, "an IN subquery must select a plain column", "in-subquery-columns"
                )
        equality = exp.EQ(this=needle, expression=selected)
        typer.type_of(equality)
        left_type, right_type = typer.type_of(needle), typer.type_of(selected)
        null_aware = negated and not (left_type and right_type and not left_type.nullable and not right_type.nullable)
        if null_aware:
            # NOT IN is false as soon as a NULL is involved: Flink's null-aware anti join, no equi key.
            conditions.insert(
                0,
                exp.or_(
                    equality.copy(),
                    exp.Is(this=needle.copy(), expression=exp.Null()),
                    exp.Is(this=selected.copy(), expression=exp.Null()),
                ),
            )
        else:
            conditions.insert(0, equality)
    for c in conditions:
        typer.check_boolean(c, "subquery")
    pairs, rest = ([], conditions) if null_aware else split_equi(conditions, set(left.field_names), set(right_names))
    original = {v: k for k, v in rename.items()}
    # A null-aware NOT IN keeps its equalities of the window columns: a window join with the rest as its residual.
    window_pairs, window_rest = (
        split_equi(conditions, set(left.field_names), set(right_names)) if null_aware else (pairs, rest)
    )
    windowed = plan_window_join(planner, kind, left, right_node, window_pairs, window_rest, original, query)
    if windowed is not None:
        return windowed
    for c in rest:
        times = [
            col.name
            for col in c.find_all(exp.Column)
            if (col_type := types.get(col.name)) is not None and col_type.time_attribute
        ]
        if times:
            raise planner.error(
                ValidationError,
                c,
                f"a semi/anti join condition may not use time attribute '{times[0]}'",
                "regular-join-time-attributes",
            )
    return RegularJoin(
        kind,
        left,
        right_node,
        [l for l, _ in pairs],
        [original[r] for _, r in pairs],
        and_all(rest),
        planner.state_ttl_ms,
    )


def is_subquery_predicate(node: exp.Expr) -> bool:
    """Whether a WHERE conjunct is ``[NOT] EXISTS (…)`` or ``[NOT] x IN (SELECT …)``."""
    inner = node.this if isinstance(node, exp.Not) else node
    return isinstance(inner, exp.Exists) or (isinstance(inner, exp.In) and inner.args.get("query") is not None)
