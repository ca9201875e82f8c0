"""``GROUP BY … GROUPING SETS (…)``, ``ROLLUP (…)``, ``CUBE (…)``: one aggregate per grouping set, unioned
(docs/semantics.md §6.1).

Flink plans an ``Expand`` (each input row once per grouping set, the columns not in the set NULL, plus the set's
id) under one aggregate grouped by the keys and the id. Each group of one set is the same group either way, with
the same changes, so streamjoin plans one aggregate per set — a window aggregate when the plain ``GROUP BY`` part
holds ``window_start`` and ``window_end`` — and a ``Union`` of their outputs: in each, a grouping column outside the
set reads NULL (of its type) and ``GROUPING(…)`` / ``GROUPING_ID(…)`` the set's constant (bit ``i`` from the right
set when argument ``i`` is not grouped, as Flink). Only the order of changes across sets differs from Flink's.
"""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING

from sqlglot import exp

from streamjoin.errors import UnsupportedPlanError
from streamjoin.planner.dialect import Flink
from streamjoin.planner.expressions import resolve
from streamjoin.planner.relation import Relation
from streamjoin.planner.rules.project import output_names
from streamjoin.planner.rules.union import union_relations

if TYPE_CHECKING:
    from collections.abc import Callable

    from streamjoin.planner.builder import QueryPlanner

__all__ = ["grouping_sets", "plan_grouping_sets"]

_SET_NODES = (exp.GroupingSets, exp.Rollup, exp.Cube)


def _members(e: exp.Expr) -> list[exp.Expr]:
    """The expressions of one grouping set as written: ``(a, b)``, ``(a)``, ``()`` or ``a``."""
    if isinstance(e, exp.Tuple):
        return list(e.expressions)
    if isinstance(e, exp.Paren):
        return [e.this]
    return [e]


def grouping_sets(group_exprs: list[exp.Expr]) -> list[list[exp.Expr]] | None:
    """The grouping sets a ``GROUP BY`` means, each a list of expressions (its plain expressions in every set, then
    the set's, in Flink's order: ``ROLLUP (a, b)`` is ``(a, b), (a), ()``, ``CUBE (a, b)`` is ``(a, b), (a), (b),
    ()``; several set clauses combine as a cross product); ``None`` without ``GROUPING SETS``/``ROLLUP``/``CUBE``."""
    if not any(isinstance(g, _SET_NODES) for g in group_exprs):
        return None
    sets: list[list[exp.Expr]] = [[]]
    for g in group_exprs:
        if isinstance(g, exp.GroupingSets):
            options = [_members(e) for e in g.expressions]
        elif isinstance(g, exp.Rollup):
            options = [list(g.expressions[:n]) for n in range(len(g.expressions), -1, -1)]
        elif isinstance(g, exp.Cube):
            items = list(g.expressions)
            options = [list(c) for n in range(len(items), -1, -1) for c in combinations(items, n)]
        else:
            options = [[g]]
        sets = [[*s, *o] for s in sets for o in options]
    return sets


def plan_grouping_sets(
    planner: QueryPlanner,
    select: exp.Select,
    relation: Relation,
    items: list[tuple[str | None, exp.Expr]],
    sets: list[list[exp.Expr]],
    plan_one: Callable[[exp.Select, list[tuple[str | None, exp.Expr]], list[exp.Expr]], Relation],
) -> Relation:
    """The ``Union`` of one aggregate per grouping set (``plan_one(select, items, group_exprs)`` plans one), each
    reading NULL for the grouping columns outside its set (module docstring).

    Raises:
        UnsupportedPlanError: an expression (not a column) in a grouping set.
    """
    scope = relation.scope(planner.source)
    grouped: dict[str, exp.Column] = {}
    for s in sets:
        for e in s:
            if not isinstance(e, exp.Column):
                raise planner.error(
                    UnsupportedPlanError, e, "GROUPING SETS, ROLLUP and CUBE take columns only", "group-by-columns"
                )
            grouped.setdefault(resolve(e, scope).name, e)
    names = output_names(items)
    relations = []
    for s in sets:
        in_set = {resolve(e, scope).name for e in s}
        absent = {name for name in grouped if name not in in_set}

        def rewrite(e: exp.Expr, in_set=in_set, absent=absent) -> exp.Expr:
            e = e.copy()
            inside_aggregates = {id(c) for agg in e.find_all(exp.AggFunc) for c in agg.find_all(exp.Column)}

            def replace(n: exp.Expr) -> exp.Expr:
                if isinstance(n, (exp.Grouping, exp.GroupingId)):
                    bits = 0
                    for arg in n.expressions:
                        bits = bits * 2 + (0 if resolve(arg, scope).name in in_set else 1)
                    return exp.cast(exp.Literal.number(bits), exp.DataType.build("BIGINT"))
                if isinstance(n, exp.Column) and id(n) not in inside_aggregates:
                    name = resolve(n, scope).name
                    if name in absent:
                        field_type = relation.node.field(name).type
                        assert field_type is not None  # a grouping column has a type
                        return exp.cast(exp.Null(), exp.DataType.build(field_type.sql, dialect=Flink))
                return n

            return e.transform(replace, copy=False)

        branch_items: list[tuple[str | None, exp.Expr]] = [(name, rewrite(e)) for name, (_, e) in zip(names, items)]
        branch = select.copy()
        if select.args.get("having"):
            branch.set("having", exp.Having(this=rewrite(select.args["having"].this)))
        relations.append(plan_one(branch, branch_items, list(s)))
    return union_relations(planner, relations, select)
