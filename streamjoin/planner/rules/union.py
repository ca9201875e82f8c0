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

__all__ = ["plan_union_all"]


def plan_union_all(planner: QueryPlanner, query: exp.Union, outer: Scope | None) -> Relation:
    """``a UNION ALL b``: same number of columns, pairwise of one type family; named after ``a``."""
    left, right = planner.plan_query(query.this, outer), planner.plan_query(query.expression, outer)
    if len(left.columns) != len(right.columns):
        raise planner.error(
            ValidationError,
            query.expression,
            f"UNION ALL of {len(left.columns)} and {len(right.columns)} columns",
            "union-columns",
        )
    fields = []
    for a, b in zip(left.columns, right.columns):
        ta, tb = left.node.field(a.field).type, right.node.field(b.field).type
        common = common_type(ta, tb) if ta is not None and tb is not None else None
        if ta is not None and tb is not None and common is None:
            raise planner.error(
                ValidationError,
                query.expression,
                f"UNION ALL column '{a.name}' is {ta} on one side and {tb} on the other",
                "type-mismatch",
            )
        fields.append(Field(a.name, common))
    inputs = []
    for relation in (left, right):
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
