"""``a UNION ALL b``: the changes of both inputs, cast to a common type per column (Flink's ``Union``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from streamjoin.errors import ValidationError
from streamjoin.planner.dialect import Flink
from streamjoin.planner.expressions import Scope, ScopeColumn, field_column
from streamjoin.planner.plan import Field, Union
from streamjoin.planner.relation import Relation
from streamjoin.planner.types import common_type

if TYPE_CHECKING:
    from streamjoin.planner.builder import QueryPlanner

__all__ = ["plan_union_all", "union_relations"]


def plan_union_all(planner: QueryPlanner, query: exp.Union, outer: Scope | None) -> Relation:
    """``a UNION ALL b``: same number of columns, pairwise of one type family; named after ``a``."""
    left, right = planner.plan_query(query.this, outer), planner.plan_query(query.expression, outer)
    return union_relations(planner, [left, right], query.expression)


def union_relations(planner: QueryPlanner, relations: list[Relation], at: exp.Expr) -> Relation:
    """The ``Union`` of ``relations``: same number of columns, each column cast to the common type of its inputs',
    named after the first relation's.

    Raises:
        ValidationError: at ``at``, a relation with another number of columns, a column without a common type.
    """
    first = relations[0]
    fields = []
    for i, a in enumerate(first.columns):
        types = []
        for relation in relations:
            if len(relation.columns) != len(first.columns):
                raise planner.error(
                    ValidationError,
                    at,
                    f"UNION ALL of {len(first.columns)} and {len(relation.columns)} columns",
                    "union-columns",
                )
            types.append(relation.node.field(relation.columns[i].field).type)
        common = types[0]
        for t in types[1:]:
            if common is None or t is None:
                common = None
                break
            widened = common_type(common, t)
            if widened is None:
                raise planner.error(
                    ValidationError,
                    at,
                    f"UNION ALL column '{a.name}' is {common} on one side and {t} on the other",
                    "type-mismatch",
                )
            common = widened
        fields.append(Field(a.name, common))
    inputs = []
    for relation in relations:
        projections: list[tuple[Field, exp.Expr]] = [
            (
                f,
                field_column(c.field)
                if f.type is None or relation.node.field(c.field).type == f.type
                else exp.cast(field_column(c.field), exp.DataType.build(f.type.sql, dialect=Flink)),
            )
            for f, c in zip(fields, relation.columns)
        ]
        inputs.append(planner.calc(relation.node, projections))
    flattened = [n for i in inputs for n in (i.inputs if isinstance(i, Union) else [i])]
    node = Union(flattened, fields)
    return Relation(node, [ScopeColumn(None, f.name, f.name, f.type) for f in fields])
