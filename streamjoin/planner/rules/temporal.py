"""``JOIN t FOR SYSTEM_TIME AS OF l.time``: an event-time temporal join against a versioned table or
versioned view (Flink's ``StreamPhysicalTemporalJoinRule``), or a lookup join against a Delta table
(processing time, or a Delta table on the right: Flink's ``StreamPhysicalLookupJoinRule``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner.dialect import Flink
from streamjoin.planner.expressions import Scope, ScopeColumn, Typer, conjuncts, resolve
from streamjoin.planner.joins import split_equi
from streamjoin.planner.plan import Calc, Deduplicate, LookupJoin, Node, TableScan, TemporalJoin, uniquify
from streamjoin.planner.relation import Relation
from streamjoin.planner.rules.scan import plan_table_ref, scan

if TYPE_CHECKING:
    from streamjoin.planner.builder import QueryPlanner

__all__ = ["plan_temporal"]


def plan_temporal(
    planner: QueryPlanner, left: Relation, item: exp.Table, kind: str, on: exp.Expr | None, outer: Scope | None
) -> Relation:
    """``left JOIN item FOR SYSTEM_TIME AS OF left.time ON …``: a ``LookupJoin`` against a Delta table
    (or with a proctime), else a ``TemporalJoin`` against the versioned table or view ``item``.

    Raises:
        ValidationError: not INNER/LEFT, no time attribute, a condition not equating the versioned
            table's primary key.
        UnsupportedPlanError: a proctime join on a non-Delta table, non-equi conditions.
    """
    if kind not in ("inner", "left"):
        raise planner.error(
            ValidationError, item, f"a temporal table join is INNER or LEFT, not {kind.upper()}", "temporal-join-type"
        )
    version = item.args["version"]
    left_scope = left.scope(planner.source, outer)
    time_column = version.expression
    if not isinstance(time_column, exp.Column):
        raise planner.error(
            ValidationError,
            time_column,
            "FOR SYSTEM_TIME AS OF takes a time attribute of the left table",
            "temporal-join-time",
        )
    found, _ = left_scope.resolve(time_column)
    left_time = left.node.field(found.field)
    if not left_time.type or not left_time.type.time_attribute:
        raise planner.error(
            ValidationError,
            time_column,
            f"FOR SYSTEM_TIME AS OF '{time_column.sql(Flink)}': the column is {left_time.type}, not a time attribute; "
            "declare WATERMARK FOR it (event time) or use a PROCTIME() column",
            "temporal-join-watermark",
        )
    name, alias = item.name, item.alias or item.name
    table = planner.catalog.tables.get(name)
    if table is not None and table.connector == "delta" or left_time.type.time_attribute == "PROCTIME":
        if table is None or table.connector != "delta":
            raise planner.error(
                UnsupportedPlanError,
                item,
                f"a processing-time temporal join needs a Delta table to look up; '{name}' is not one",
                "lookup-join-table",
            )
        right = scan(planner, table)
    else:
        right = plan_table_ref(planner, exp.Table(this=item.this.copy()), outer)
    right = right.qualified(alias)
    right_names = uniquify(right.node.field_names, set(left.node.field_names))
    rename = dict(zip(right.node.field_names, right_names))
    original = {v: k for k, v in rename.items()}
    columns = left.columns + [ScopeColumn(c.qualifier, c.name, rename[c.field], c.type) for c in right.columns]
    scope = Scope(columns, planner.source, outer)
    resolved = [resolve(c, scope) for c in conjuncts(on)]
    types = {f.name: f.type for f in left.node.fields} | {rename[f.name]: f.type for f in right.node.fields}
    typer = Typer(types, planner.source)
    for c in resolved:
        typer.check_boolean(c, "ON")
    pairs, rest = split_equi(resolved, set(left.node.field_names), set(right_names))
    if rest:
        raise planner.error(
            UnsupportedPlanError,
            rest[0],
            "a temporal join condition may only equate left columns with the right table's key; "
            f"'{rest[0].sql(Flink)}' is not supported",
            "temporal-join-condition",
        )
    left_keys = [l for l, _ in pairs]
    right_keys = [original[r] for _, r in pairs]
    if isinstance(right.node, TableScan) and right.node.table.connector == "delta":
        if not pairs:
            raise planner.error(
                ValidationError,
                item,
                f"a lookup join needs an equality on columns of '{name}'",
                "lookup-join-condition",
            )
        lookup = LookupJoin(kind, left.node, right.node, left_keys, right_keys)
        return Relation(lookup, columns)
    versioned, primary_key, rowtime, append_only = _versioned(planner, right.node, name, item)
    if set(right_keys) != set(primary_key):
        raise planner.error(
            ValidationError,
            item,
            f"the temporal join condition must equate the versioned table's primary key [{', '.join(primary_key)}] "
            f"of '{name}' with left columns, and nothing else; it equates [{', '.join(right_keys) or 'nothing'}]",
            "temporal-join-primary-key",
        )
    node = TemporalJoin(
        kind, left.node, versioned, left_keys, right_keys, found.field, rowtime, primary_key, append_only
    )
    return Relation(node, columns)


def _versioned(planner: QueryPlanner, node: Node, name: str, at: exp.Expr) -> tuple[Node, tuple[str, ...], str, bool]:
    """The versioned side of an event-time temporal join: ``(input node, primary key, rowtime, append-only log)``.

    A versioned view (``ROW_NUMBER() OVER (PARTITION BY k ORDER BY rowtime DESC) = 1`` over an
    append-only log) becomes the log itself, deduplicated into versions by the temporal join operator.
    """
    calc = node if isinstance(node, Calc) else None
    below = calc.inputs[0] if calc else node
    if (
        isinstance(below, Deduplicate)
        and below.keep == "last"
        and below.time == "ROWTIME"
        and below.inputs[0].is_insert_only
    ):
        projections = calc.projections if calc else planner.identity(below)[:-1]
        if any(isinstance(e, exp.Column) and e.name == below.rank_field for _, e in projections):
            raise planner.error(
                UnsupportedPlanError,
                at,
                f"versioned view '{name}' may not select its ROW_NUMBER column",
                "temporal-join-versioned-view",
            )
        calc = Calc(below.inputs[0], projections)
        names = {e.name: f.name for f, e in projections if isinstance(e, exp.Column)}
        if below.order_by not in names or not all(k in names for k in below.keys):
            raise planner.error(
                ValidationError,
                at,
                f"versioned view '{name}' must select its key and rowtime",
                "temporal-join-versioned-view",
            )
        log = calc if not calc.is_identity else below.inputs[0]
        return log, tuple(names[k] for k in below.keys), names[below.order_by], True
    if not node.unique_keys:
        raise planner.error(
            ValidationError,
            at,
            f"the versioned table '{name}' of an event-time temporal join needs a PRIMARY KEY (… NOT ENFORCED), "
            "but none can be found",
            "temporal-join-primary-key",
        )
    rowtimes = [f.name for f in node.fields if f.is_rowtime]
    if not rowtimes:
        raise planner.error(
            ValidationError,
            at,
            f"the versioned table '{name}' of an event-time temporal join needs a rowtime: "
            "declare WATERMARK FOR its version time",
            "temporal-join-watermark",
        )
    return node, node.unique_keys[0], rowtimes[0], False
