"""The select list and ``WHERE`` as a ``Calc`` (projection + filter), merged into an input Calc as Flink's
``CalcMergeRule`` does; ``*`` and ``t.*`` expanded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from streamjoin.errors import ValidationError
from streamjoin.planner.expressions import ScopeColumn, and_all, resolve
from streamjoin.planner.plan import Calc, Field, Node, uniquify
from streamjoin.planner.relation import Relation

if TYPE_CHECKING:
    from streamjoin.planner.builder import QueryPlanner

__all__ = ["expand_select", "merge_calc", "output_names", "project"]


def expand_select(planner: QueryPlanner, select: exp.Select, relation: Relation) -> list[tuple[str | None, exp.Expr]]:
    """``(alias or None, expression)`` per select item, ``*`` and ``t.*`` expanded to columns."""
    items: list[tuple[str | None, exp.Expr]] = []
    for e in select.expressions:
        target = e.this if isinstance(e, exp.Alias) else e
        if isinstance(target, exp.Star) or (isinstance(target, exp.Column) and isinstance(target.this, exp.Star)):
            qualifier = target.table if isinstance(target, exp.Column) else None
            if qualifier and qualifier not in {c.qualifier for c in relation.columns}:
                raise planner.error(
                    ValidationError, target, f"unknown table or alias '{qualifier}' in '{qualifier}.*'", "table-exists"
                )
            for c in relation.columns:
                if qualifier is None or c.qualifier == qualifier:
                    items.append(
                        (
                            c.name,
                            exp.column(c.name, table=c.qualifier, quoted=True)
                            if c.qualifier
                            else exp.column(c.name, quoted=True),
                        )
                    )
            continue
        items.append((e.alias if isinstance(e, exp.Alias) else None, target))
    return items


def output_names(items: list[tuple[str | None, exp.Expr]]) -> list[str]:
    """The output column names of select items: the alias, a column's name, else Calcite's ``EXPR$<i>``; made unique."""
    names = []
    for i, (alias, e) in enumerate(items):
        if alias:
            names.append(alias)
        elif isinstance(e, exp.Column):
            names.append(e.name)
        else:
            names.append(f"EXPR${i}")
    return uniquify(names, set())


def project(planner: QueryPlanner, relation: Relation, items, resolved: list[exp.Expr] | None = None) -> Relation:
    """The Calc computing the select items over ``relation`` (already resolved items may be given)."""
    scope = relation.scope(planner.source)
    names = output_names(items)
    exprs = resolved if resolved is not None else [resolve(e, scope) for _, e in items]
    typer = planner.typer(relation.node)
    projections = [(Field(n, typer.type_of(e)), e) for n, e in zip(names, exprs)]
    node = planner.calc(relation.node, projections)
    return Relation(node, [ScopeColumn(None, f.name, f.name, f.type) for f, _ in projections])


def merge_calc(input: Node, projections: list[tuple[Field, exp.Expr]], condition: exp.Expr | None = None) -> Node:
    """``Calc(input, projections, condition)``, composed with ``input`` when it is a Calc; ``input`` itself when
    the result would change nothing."""
    if isinstance(input, Calc):
        inner = {f.name: e for f, e in input.projections}

        def substitute(e: exp.Expr) -> exp.Expr:
            return e.transform(lambda n: inner[n.name].copy() if isinstance(n, exp.Column) and n.name in inner else n)

        projections = [(f, substitute(e)) for f, e in projections]
        conditions = [
            c for c in (input.condition, substitute(condition) if condition is not None else None) if c is not None
        ]
        calc = Calc(input.inputs[0], projections, and_all(conditions))
    else:
        calc = Calc(input, projections, condition)
    return calc.inputs[0] if calc.is_identity else calc
