"""``ROW_NUMBER() OVER (PARTITION BY … ORDER BY …) AS rn`` filtered by an outer ``WHERE rn = 1``:
``Deduplicate`` when ordered by a time attribute, else a Top-1 ``Rank`` (Flink's
``StreamPhysicalDeduplicateRule`` / ``StreamPhysicalRankRule``); partitioned by a window table function's
``window_start`` and ``window_end`` and filtered to a rank range (``rn <= N``, ``rn BETWEEN M AND N``, …), a
``WindowRank`` (window Top-N, Flink's ``StreamPhysicalWindowRankRule``); other Top-N are refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from sqlglot import exp

from streamjoin.errors import UnsupportedPlanError
from streamjoin.planner.diagnostics import SqlSource, error
from streamjoin.planner.dialect import Flink
from streamjoin.planner.expressions import Scope, ScopeColumn, field_column, resolve
from streamjoin.planner.plan import Calc, Deduplicate, Node, WindowRank, uniquify, walk
from streamjoin.planner.relation import Relation
from streamjoin.planner.rules.over import partition_columns, window_spec
from streamjoin.planner.rules.project import project
from streamjoin.planner.rules.window import plan_window_rank

if TYPE_CHECKING:
    from streamjoin.planner.builder import QueryPlanner

__all__ = ["apply_rank_filter", "check_ranks", "plan_rank"]


def plan_rank(planner: QueryPlanner, relation: Relation, items, named) -> Relation:
    """A ``Deduplicate`` / ``Rank`` for the ``ROW_NUMBER()`` item of ``items``, pending until an outer
    ``WHERE rn = 1`` consumes it (:func:`apply_rank_filter`; :func:`check_ranks` refuses it otherwise).

    Raises:
        UnsupportedPlanError: other windows beside it, no PARTITION BY, an ORDER BY not on one column,
            ASC on a non-time column, or non-insert-only input.
    """
    scope = relation.scope(planner.source)
    node = relation.node
    windows = [w for _, e in items for w in e.find_all(exp.Window)]
    if len(windows) != 1:
        raise planner.error(
            UnsupportedPlanError,
            windows[1],
            "ROW_NUMBER() cannot be combined with other OVER windows in one query block",
            "rank-alone",
        )
    window = windows[0]
    alias_item = next((a, e) for a, e in items if window in list(e.find_all(exp.Window)))
    if alias_item[1] is not window or not alias_item[0]:
        raise planner.error(
            UnsupportedPlanError,
            window,
            "ROW_NUMBER() OVER (…) must be a select item of its own with an alias (… AS rn)",
            "rank-filter",
        )
    spec = window_spec(planner, window, named)
    keys = partition_columns(planner, spec, scope, "ROW_NUMBER() PARTITION BY takes columns", "rank-partition")
    if not keys:
        raise planner.error(
            UnsupportedPlanError,
            window,
            "ROW_NUMBER() without PARTITION BY (a global Top-N) is not supported",
            "rank-partition",
        )
    order = spec.args.get("order")
    rank_name = alias_item[0]
    windowed = _plan_window_rank(planner, window, relation, keys, order, rank_name, items)
    if windowed is not None:
        return windowed
    if order is None or len(order.expressions) != 1:
        raise planner.error(
            UnsupportedPlanError, window, "ROW_NUMBER() must be ORDER BY exactly one column here", "rank-order"
        )
    ordered = order.expressions[0]
    order_resolved = resolve(ordered.this, scope)
    if not isinstance(order_resolved, exp.Column):
        raise planner.error(UnsupportedPlanError, ordered, "ROW_NUMBER() ORDER BY takes a column", "rank-order")
    order_field = node.field(order_resolved.name)
    time = order_field.type.time_attribute if order_field.type else None
    keep: Literal["first", "last"] = "last" if ordered.args.get("desc") else "first"
    if time is None and keep == "first":
        raise planner.error(
            UnsupportedPlanError,
            ordered,
            f"ROW_NUMBER() ORDER BY '{ordered.this.sql(Flink)}' ASC is a Top-1 Rank on a non-time column, "
            "which is not supported; order by a time attribute (deduplication) or DESC",
            "rank-order",
        )
    if not node.is_insert_only:
        raise planner.error(
            UnsupportedPlanError,
            window,
            f"deduplication consumes insert-only input; {planner.producer_name(node)} produces updates",
            "deduplicate-insert-only",
        )
    if planner.state_ttl_ms is not None and time == "ROWTIME" and keep == "first":
        raise planner.error(
            UnsupportedPlanError,
            window,
            "table.exec.state.ttl is set, but a deduplication keeping the first row on event time has no state TTL "
            "here (it runs on Spark's event-time timers, and Spark expires state in processing time); "
            "remove the setting",
            "state-ttl",
        )
    dedup = Deduplicate(
        node, keys, order_field.name, time, keep, uniquify([rank_name], set(node.field_names))[0], planner.state_ttl_ms
    )
    dedup.pending = window
    columns = relation.columns + [ScopeColumn(None, rank_name, dedup.rank_field, dedup.fields[-1].type)]
    exprs = [
        field_column(dedup.rank_field) if e is window else resolve(e, Scope(columns, planner.source)) for _, e in items
    ]
    return project(planner, Relation(dedup, columns), items, exprs)


def _plan_window_rank(
    planner: QueryPlanner, window: exp.Window, relation: Relation, keys: list[str], order, rank_name: str, items
) -> Relation | None:
    """A pending ``WindowRank`` when ``keys`` hold a window table function's ``window_start`` and ``window_end``
    (:func:`~streamjoin.planner.rules.window.plan_window_rank`), projected as ``items``; else ``None``."""
    scope = relation.scope(planner.source)
    node = relation.node
    sort: list[tuple[str, bool, bool]] = []
    for ordered in order.expressions if order is not None else []:
        resolved = resolve(ordered.this, scope)
        if not isinstance(resolved, exp.Column):
            raise planner.error(UnsupportedPlanError, ordered, "ROW_NUMBER() ORDER BY takes columns", "rank-order")
        sort.append((resolved.name, not ordered.args.get("desc"), bool(ordered.args.get("nulls_first"))))
    ranked = plan_window_rank(planner, window, node, keys, sort, uniquify([rank_name], set(node.field_names))[0])
    if ranked is None:
        return None
    if not sort:
        raise planner.error(
            UnsupportedPlanError, window, "ROW_NUMBER() of a window Top-N needs an ORDER BY", "rank-order"
        )
    ranked.pending = window
    columns = [ScopeColumn(c.qualifier, c.name, c.field, ranked.field(c.field).type) for c in relation.columns]
    columns.append(ScopeColumn(None, rank_name, ranked.rank_field, ranked.fields[-1].type))
    exprs = [
        field_column(ranked.rank_field) if e is window else resolve(e, Scope(columns, planner.source)) for _, e in items
    ]
    return project(planner, Relation(ranked, columns), items, exprs)


def _rank_bounds(c: exp.Expr) -> tuple[exp.Column, int, int | None] | None:
    """``(column, lowest rank, highest rank or None)`` that ``c`` keeps: ``rn = n``, ``rn <= n``, ``rn < n``,
    ``rn >= n``, ``rn > n``, ``rn BETWEEN m AND n`` on integer literals; else ``None``."""
    if isinstance(c, exp.Between) and isinstance(c.this, exp.Column):
        low, high = c.args.get("low"), c.args.get("high")
        if isinstance(low, exp.Literal) and isinstance(high, exp.Literal) and not low.is_string:
            return c.this, int(low.name), int(high.name)
        return None
    if not isinstance(c, (exp.EQ, exp.LTE, exp.LT, exp.GTE, exp.GT)):
        return None
    if not isinstance(c.this, exp.Column) or not isinstance(c.expression, exp.Literal) or c.expression.is_string:
        return None
    n = int(c.expression.name)
    bounds = {exp.EQ: (n, n), exp.LTE: (1, n), exp.LT: (1, n - 1), exp.GTE: (n, None), exp.GT: (n + 1, None)}
    low, high = bounds[type(c)]
    return c.this, low, high


def apply_rank_filter(planner: QueryPlanner, condition: exp.Expr, scope: Scope, node: Node) -> bool:
    """Consume a filter of a pending ROW_NUMBER column; True when consumed: ``rn = 1`` (``rn <= 1``, ``rn < 2``)
    of a deduplication, any bound (:func:`_rank_bounds`) of a window Top-N, which narrows its rank range."""
    c = condition.unnest()
    bounds = _rank_bounds(c)
    if bounds is None:
        return False
    column, low, high = bounds
    found = scope.lookup(column)
    if found is None or found[1]:
        return False
    name, current = found[0].field, node
    while isinstance(current, Calc):
        source = next((e for f, e in current.projections if f.name == name), None)
        if not isinstance(source, exp.Column):
            return False
        name, current = source.name, current.inputs[0]
    if isinstance(current, WindowRank) and current.rank_field == name and current.rank_end is None:
        current.rank_start = max(current.rank_start, low)
        if high is not None:
            current.rank_end = high
            current.pending = None
        if current.rank_end is not None and current.rank_end < current.rank_start:
            raise planner.error(
                UnsupportedPlanError,
                condition,
                f"'{condition.sql(Flink)}' leaves no rank: rankStart={current.rank_start} > rankEnd={current.rank_end}",
                "rank-filter",
            )
        return True
    if not isinstance(c, (exp.EQ, exp.LTE, exp.LT)) or c.this is not column:
        return False
    if not (isinstance(current, Deduplicate) and getattr(current, "pending", False) and current.rank_field == name):
        return False
    limit = high
    if limit != 1:
        raise planner.error(
            UnsupportedPlanError,
            condition,
            f"'{condition.sql(Flink)}' is a Top-N with N = {limit}; "
            "only ROW_NUMBER() … = 1 (deduplication, Top-1) is supported",
            "rank-filter",
        )
    current.pending = None
    return True


def check_ranks(root: Node, source: SqlSource) -> None:
    """Refuse a ROW_NUMBER() column that no outer ``WHERE rn = 1`` filters (Flink has no unbounded ROW_NUMBER).

    Raises:
        UnsupportedPlanError: naming the ranked column.
    """
    for node in walk(root):
        if isinstance(node, WindowRank) and node.pending is not None:
            raise error(
                UnsupportedPlanError,
                source,
                node.pending,
                f"Rank end is not specified. Currently rank only accepts finite rank end: filter "
                f"ROW_NUMBER() AS {node.rank_field} by an outer WHERE {node.rank_field} <= N",
                "rank-filter",
            )
        if isinstance(node, Deduplicate) and getattr(node, "pending", False):
            raise error(
                UnsupportedPlanError,
                source,
                node.pending,
                f"ROW_NUMBER() AS {node.rank_field} must be filtered by an outer "
                f"WHERE {node.rank_field} = 1 (deduplication)",
                "rank-filter",
            )
