"""``agg(…) OVER (PARTITION BY … ORDER BY time {ROWS|RANGE} BETWEEN … PRECEDING AND CURRENT ROW)``: an
``OverAggregate`` over insert-only input, all windows of a query block the same (Flink's
``StreamPhysicalOverAggregateRule``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner.dialect import Flink, interval_ms
from streamjoin.planner.expressions import AGGREGATES, Scope, ScopeColumn, field_column, resolve
from streamjoin.planner.plan import Aggregate, Calc, Field, OverAggregate
from streamjoin.planner.relation import Relation
from streamjoin.planner.rules.aggregate import aggregate_call
from streamjoin.planner.rules.project import project

if TYPE_CHECKING:
    from streamjoin.planner.builder import QueryPlanner

__all__ = ["named_windows", "partition_columns", "plan_over", "window_spec"]


def named_windows(select: exp.Select) -> dict[str, exp.Window]:
    """The ``WINDOW w AS (…)`` clause of ``select`` by name."""
    return {w.this.name: w for w in select.args.get("windows") or []}


def partition_columns(planner: QueryPlanner, spec: exp.Window, scope: Scope, message: str, rule: str) -> list[str]:
    """The field names of a window's ``PARTITION BY`` columns; an expression there is refused with ``message``.

    Raises:
        UnsupportedPlanError: naming ``rule``.
    """
    columns = []
    for p in spec.args.get("partition_by") or []:
        resolved = resolve(p, scope)
        if not isinstance(resolved, exp.Column):
            raise planner.error(UnsupportedPlanError, p, message, rule)
        columns.append(resolved.name)
    return columns


def window_spec(planner: QueryPlanner, window: exp.Window, named: dict[str, exp.Window]) -> exp.Window:
    """The specification of ``window``: itself, or the named window it refers to (``OVER w``)."""
    alias = window.args.get("alias")
    if alias is not None:
        name = alias.name
        if name not in named:
            raise planner.error(
                ValidationError, window, f"window '{name}' is not defined in the WINDOW clause", "window-exists"
            )
        return named[name]
    return window


def _over_frame(planner: QueryPlanner, spec: exp.Window, order_field: Field, at: exp.Expr) -> tuple[str, int | None]:
    frame = spec.args.get("spec")
    if frame is None:
        return "range", None
    kind = frame.args.get("kind", "").upper()
    start, end = frame.args.get("start"), frame.args.get("end")
    if frame.args.get("start_side", "").upper() != "PRECEDING" or (end not in (None, "CURRENT ROW")):
        raise planner.error(
            UnsupportedPlanError,
            at,
            f"OVER frame '{frame.sql(Flink)}' is not supported: only … PRECEDING AND CURRENT ROW",
            "over-frame",
        )
    if start == "UNBOUNDED":
        return kind.lower(), None
    if kind == "ROWS":
        if not (isinstance(start, exp.Literal) and not start.is_string):
            raise planner.error(ValidationError, at, f"ROWS frames count rows: '{frame.sql(Flink)}'", "over-frame")
        return "rows", int(start.name)
    if not isinstance(start, exp.Interval):
        raise planner.error(
            ValidationError,
            at,
            f"RANGE frames over a time attribute need an INTERVAL: '{frame.sql(Flink)}'",
            "over-frame",
        )
    return "range", interval_ms(start)


def plan_over(planner: QueryPlanner, relation: Relation, items, named: dict[str, exp.Window]) -> Relation:
    """An ``OverAggregate`` for the OVER windows of ``items``, then the Calc computing ``items``.

    Raises:
        ValidationError: ORDER BY not one ascending time attribute, a bad frame.
        UnsupportedPlanError: differing windows, non-insert-only input, unsupported frames or functions.
    """
    scope = relation.scope(planner.source)
    node = relation.node
    windows = [w for _, e in items for w in e.find_all(exp.Window)]
    specs = [window_spec(planner, w, named) for w in windows]
    keys = {
        (
            tuple(p.sql(Flink) for p in s.args.get("partition_by") or []),
            s.args["order"].sql(Flink) if s.args.get("order") else None,
            s.args["spec"].sql(Flink) if s.args.get("spec") else None,
        )
        for s in specs
    }
    if len(keys) > 1:
        raise planner.error(
            UnsupportedPlanError,
            windows[1],
            "all OVER aggregates of a query must use the same window (Flink requires it)",
            "over-same-window",
        )
    spec = specs[0]
    order = spec.args.get("order")
    if order is None or len(order.expressions) != 1:
        raise planner.error(
            ValidationError, windows[0], "an OVER window must be ORDER BY one time attribute", "over-order-by-time"
        )
    ordered = order.expressions[0]
    order_resolved = resolve(ordered.this, scope)
    order_field = node.field(order_resolved.name) if isinstance(order_resolved, exp.Column) else None
    if order_field is None or order_field.type is None or not order_field.type.time_attribute:
        described = f"{order_field.type}" if order_field and order_field.type else "not a time attribute"
        raise planner.error(
            ValidationError,
            ordered,
            f"OVER window ORDER BY '{ordered.this.sql(Flink)}' ({described}): in streaming, OVER windows must be "
            "ordered by a time attribute (a rowtime with WATERMARK FOR, or PROCTIME())",
            "over-order-by-time",
        )
    if ordered.args.get("desc"):
        raise planner.error(
            ValidationError,
            ordered,
            "OVER windows must be ordered by their time attribute ascending",
            "over-order-by-time",
        )
    if not node.is_insert_only:
        raise planner.error(
            UnsupportedPlanError,
            windows[0],
            f"OverAggregate consumes insert-only input; {planner.producer_name(node)} produces updates",
            "over-insert-only",
        )
    partition = partition_columns(planner, spec, scope, "PARTITION BY takes columns", "over-partition")
    frame, preceding = _over_frame(planner, spec, order_field, windows[0])
    extra: list = []
    aggregates: list[Aggregate] = []
    over_map: dict[str, str] = {}
    for w in windows:
        if type(w.this) not in AGGREGATES:
            raise planner.error(
                UnsupportedPlanError,
                w,
                f"{w.this.sql(Flink)} OVER is not supported; supported: {', '.join(AGGREGATES.values())}",
                "supported-aggregates",
            )
        if w.sql(Flink) not in over_map:
            output = f"w0$o{len(aggregates)}"
            aggregates.append(aggregate_call(planner, w.this, output, node, scope, extra))
            over_map[w.sql(Flink)] = output
    pre = Calc(node, planner.identity(node) + extra) if extra else node
    over = OverAggregate(
        pre, partition, order_field.name, order_field.type.time_attribute == "ROWTIME", frame, preceding, aggregates
    )
    over_columns = relation.columns + [ScopeColumn(None, a.output, a.output, a.type) for a in aggregates]

    def replace(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Window):
            return field_column(over_map[n.sql(Flink)], n)
        return n

    exprs = [resolve(e.transform(replace), Scope(over_columns, planner.source)) for _, e in items]
    return project(planner, Relation(over, over_columns), items, exprs)
