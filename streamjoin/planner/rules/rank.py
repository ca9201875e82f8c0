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
from streamjoin.planner.metadata import calc_keys
from streamjoin.planner.plan import Calc, Deduplicate, Node, Rank, WindowRank, uniquify, walk
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
    sort = _sort_fields(planner, order, scope)
    if not sort:
        raise planner.error(
            UnsupportedPlanError,
            window,
            "Over Agg: The window rank function requires order by clause with non-constant fields",
            "rank-order",
        )
    if not node.is_insert_only and any(node.field(f).is_proctime for f, _, _ in sort):
        raise planner.error(
            UnsupportedPlanError,
            window,
            f"ROW_NUMBER() over updates ({planner.producer_name(node)}) ordered by a PROCTIME() column is not "
            "supported: a retraction could not find its row by the processing time it was ranked at",
            "rank-order",
        )
    # Only the columns the query reads reach the Top-N, as Flink projects before its Rank: they are its state.
    needed = set(keys) | {f for f, _, _ in sort}
    for _, e in items:
        if e is not window:
            needed |= {c.name for c in resolve(e, scope).find_all(exp.Column)}
    kept = [p for p in planner.identity(node) if p[0].name in needed]
    if len(kept) < len(node.fields):
        node = planner.calc(node, kept)
    ranked = Rank(node, keys, sort, uniquify([rank_name], set(node.field_names))[0], planner.state_ttl_ms)
    ranked.pending = window
    columns = [c for c in relation.columns if c.field in needed]
    columns.append(ScopeColumn(None, rank_name, ranked.rank_field, ranked.fields[-1].type))
    exprs = [
        field_column(ranked.rank_field) if e is window else resolve(e, Scope(columns, planner.source)) for _, e in items
    ]
    return project(planner, Relation(ranked, columns), items, exprs)


def _sort_fields(planner: QueryPlanner, order, scope: Scope) -> list[tuple[str, bool, bool]]:
    """``(field, ascending, nulls_first)`` per ORDER BY field of a ROW_NUMBER() (Flink: NULLS FIRST for ASC,
    NULLS LAST for DESC unless the query says otherwise)."""
    sort: list[tuple[str, bool, bool]] = []
    for ordered in order.expressions if order is not None else []:
        resolved = resolve(ordered.this, scope)
        if not isinstance(resolved, exp.Column):
            raise planner.error(UnsupportedPlanError, ordered, "ROW_NUMBER() ORDER BY takes columns", "rank-order")
        sort.append((resolved.name, not ordered.args.get("desc"), bool(ordered.args.get("nulls_first"))))
    return sort


def _deduplicate(planner: QueryPlanner, ranked: Rank, condition: exp.Expr) -> Deduplicate | None:
    """The ``Deduplicate`` Flink makes of a Top-1 ordered by one time attribute (``StreamPhysicalDeduplicateRule``),
    else ``None``.

    Raises:
        UnsupportedPlanError: keeping the first row on event time with a state TTL.
    """
    node = ranked.inputs[0]
    if (ranked.rank_start, ranked.rank_end) != (1, 1) or len(ranked.order_by) != 1:
        return None
    order_field = node.field(ranked.order_by[0][0])
    time = order_field.type.time_attribute if order_field.type else None
    if time is None:
        return None
    keep: Literal["first", "last"] = "first" if ranked.order_by[0][1] else "last"
    if not node.is_insert_only:
        return None  # over updates Flink 2.3 ranks it (RetractStrategy), it does not deduplicate
    if planner.state_ttl_ms is not None and time == "ROWTIME" and keep == "first":
        raise planner.error(
            UnsupportedPlanError,
            condition,
            "table.exec.state.ttl is set, but a deduplication keeping the first row on event time has no state TTL "
            "here (it runs on Spark's event-time timers, and Spark expires state in processing time); "
            "remove the setting",
            "state-ttl",
        )
    return Deduplicate(node, ranked.partition_by, order_field.name, time, keep, ranked.rank_field, planner.state_ttl_ms)


def _plan_window_rank(
    planner: QueryPlanner, window: exp.Window, relation: Relation, keys: list[str], order, rank_name: str, items
) -> Relation | None:
    """A pending ``WindowRank`` when ``keys`` hold a window table function's ``window_start`` and ``window_end``
    (:func:`~streamjoin.planner.rules.window.plan_window_rank`), projected as ``items``; else ``None``."""
    node = relation.node
    sort = _sort_fields(planner, order, relation.scope(planner.source))
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


def apply_rank_filter(planner: QueryPlanner, condition: exp.Expr, scope: Scope, node: Node) -> Node | None:
    """Consume a filter of a pending ROW_NUMBER column: any bound (:func:`_rank_bounds`) narrows the rank range of a
    Top-N or window Top-N. ``None`` when ``condition`` is no such filter; else the node to go on with: ``node``, or
    what replaced it when it was the Top-N itself — a Top-1 ordered by a time attribute becomes a ``Deduplicate``
    (:func:`_deduplicate`), in its consumer's place.

    Raises:
        UnsupportedPlanError: a range that leaves no rank; :func:`_deduplicate`'s.
    """
    c = condition.unnest()
    bounds = _rank_bounds(c)
    if bounds is None:
        return None
    column, low, high = bounds
    found = scope.lookup(column)
    if found is None or found[1]:
        return None
    name, current, calcs = found[0].field, node, []
    while isinstance(current, Calc):
        source = next((e for f, e in current.projections if f.name == name), None)
        if not isinstance(source, exp.Column):
            return None
        calcs.append(current)
        name, current = source.name, current.inputs[0]
    if not isinstance(current, (WindowRank, Rank)) or current.rank_field != name or current.rank_end is not None:
        return None
    at = current.pending
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
    if not isinstance(current, Rank) or current.rank_end is None:
        return node
    replaced: Node | None = _deduplicate(planner, current, at if at is not None else condition)
    if replaced is None:
        current.derive_keys()
    elif calcs:
        calcs[-1].inputs[0] = replaced
    else:
        return replaced
    for calc in reversed(calcs):  # the keys the Calcs above took from the Top-N before its range was known
        calc.unique_keys, calc.upsert_keys = calc_keys(calc.inputs[0], calc.projections)
    return node


def _rank_read(rank: Rank, parents: dict[int, Node]) -> bool:
    """Whether a node above ``rank`` reads its rank column (Flink's ``outputRankNumber``): followed up through the
    Calcs that pass it on by name; any other consumer reads every column."""
    names: set[str] = {rank.rank_field}
    below: Node = rank
    while True:
        parent = parents.get(id(below))
        if not isinstance(parent, Calc):
            return True
        if parent.condition is not None and any(c.name in names for c in parent.condition.find_all(exp.Column)):
            return True
        passed = set()
        for f, e in parent.projections:
            if isinstance(e, exp.Column):
                if e.name in names:
                    passed.add(f.name)
            elif any(c.name in names for c in e.find_all(exp.Column)):
                return True
        if not passed:
            return False
        names, below = passed, parent


def check_ranks(root: Node, source: SqlSource) -> None:
    """Refuse a ROW_NUMBER() column that no outer filter bounds (Flink has no unbounded ROW_NUMBER), and decide
    whether each Top-N outputs its rank number (:func:`_rank_read`).

    Raises:
        UnsupportedPlanError: naming the ranked column.
    """
    parents = {id(child): node for node in walk(root) for child in node.inputs}
    for node in walk(root):
        if isinstance(node, (WindowRank, Rank)) and node.pending is not None:
            raise error(
                UnsupportedPlanError,
                source,
                node.pending,
                f"Rank end is not specified. Currently rank only accepts finite rank end: filter "
                f"ROW_NUMBER() AS {node.rank_field} by an outer WHERE {node.rank_field} <= N",
                "rank-filter",
            )
        if isinstance(node, Rank):
            # Flink's RankNumberColumnRemoveRule: a rank range of one rank outputs that rank as a constant.
            node.output_rank = node.rank_start != node.rank_end and _rank_read(node, parents)
