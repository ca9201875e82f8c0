"""``JOIN … ON``: Flink's choice between an interval join (both sides' time attributes bounded against each
other, insert-only inputs) and a regular join (every other condition), after pushing an inner join's
two-sided ``WHERE`` conjuncts into its condition (Flink's ``StreamPhysicalIntervalJoinRule`` /
``StreamPhysicalJoinRule``). ``FOR SYSTEM_TIME AS OF`` joins go to :mod:`.temporal`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner.dialect import Flink
from streamjoin.planner.expressions import Scope, ScopeColumn, Typer, and_all, columns_of, conjuncts, resolve
from streamjoin.planner.joins import extract_interval, split_equi
from streamjoin.planner.plan import IntervalJoin, Node, RegularJoin, uniquify
from streamjoin.planner.relation import Relation
from streamjoin.planner.rules.scan import plan_table_ref
from streamjoin.planner.rules.subquery import is_subquery_predicate
from streamjoin.planner.rules.temporal import plan_temporal
from streamjoin.planner.rules.window import plan_window_join

if TYPE_CHECKING:
    from streamjoin.planner.builder import QueryPlanner

__all__ = ["choose_join", "join_kind", "plan_join"]


def join_kind(planner: QueryPlanner, join: exp.Join) -> str:
    """``inner``, ``left``, ``right`` or ``full`` for a parsed join; SEMI/ANTI JOIN syntax is refused."""
    side = (join.side or "").upper()
    kind = (join.kind or "").upper()
    if kind in ("SEMI", "ANTI"):
        raise planner.error(
            UnsupportedPlanError, join, f"{kind} JOIN syntax is not Flink SQL; use IN / EXISTS", "supported-joins"
        )
    return {"LEFT": "left", "RIGHT": "right", "FULL": "full"}.get(side, "inner")


def plan_join(
    planner: QueryPlanner, left: Relation, join: exp.Join, where: list[exp.Expr], outer: Scope | None
) -> Relation:
    """``left JOIN item ON …`` as an interval, regular, temporal or lookup join over ``left``'s and the
    item's columns (right names uniquified); inner joins take from ``where`` the conjuncts needing both sides.

    Raises:
        ValidationError / UnsupportedPlanError: naming the condition or input that breaks a join rule.
    """
    kind = join_kind(planner, join)
    item = join.this
    on = join.args.get("on")
    if join.args.get("using"):
        raise planner.error(
            UnsupportedPlanError, join, "JOIN … USING is not supported; write ON a.x = b.x", "supported-joins"
        )
    if isinstance(item, exp.Table) and item.args.get("version") is not None:
        return plan_temporal(planner, left, item, kind, on, outer)
    right = plan_table_ref(planner, item, outer)
    right_names = uniquify(right.node.field_names, set(left.node.field_names))
    rename = dict(zip(right.node.field_names, right_names))
    columns = left.columns + [ScopeColumn(c.qualifier, c.name, rename[c.field], c.type) for c in right.columns]
    scope = Scope(columns, planner.source, outer)
    conditions = conjuncts(on) if on is not None else []
    if kind == "inner":
        # Flink pushes WHERE predicates that need both sides into an inner join's condition.
        for c in list(where):
            if is_subquery_predicate(c) or not columns_of(c):
                continue
            found = [scope.lookup(col) for col in columns_of(c)]
            if all(f is not None and not f[1] for f in found):
                fields = {f[0].field for f in found if f is not None}
                if fields & set(left.node.field_names) and fields & set(right_names):
                    conditions.append(c)
                    where.remove(c)
    resolved = [resolve(c, scope) for c in conditions]
    output_types = {f.name: f.type for f in left.node.fields}
    output_types.update({rename[f.name]: f.type for f in right.node.fields})
    typer = Typer(output_types, planner.source)
    for c in resolved:
        typer.check_boolean(c, "ON")
    pairs, rest = split_equi(resolved, set(left.node.field_names), set(right_names))
    original = {v: k for k, v in rename.items()}
    node = choose_join(planner, kind, left.node, right.node, pairs, rest, original, join)
    return Relation(node, columns)


def _time_fields(node: Node, names: dict[str, str] | None = None) -> dict[str, str]:
    """Output name → ``ROWTIME``/``PROCTIME`` of ``node``'s time attributes."""
    out: dict[str, str] = {}
    for f in node.fields:
        if f.type is not None and f.type.time_attribute:
            out[names[f.name] if names else f.name] = f.type.time_attribute
    return out


def choose_join(
    planner: QueryPlanner, kind, left: Node, right: Node, pairs, rest, original: dict[str, str], join: exp.Join
) -> Node:
    """Flink's choice between WindowJoin, IntervalJoin and Join for resolved ``pairs`` (equi keys) and ``rest``."""
    right_out = {v: k for k, v in original.items()}
    left_times = _time_fields(left)
    right_times = _time_fields(right, right_out)
    left_keys = [l for l, _ in pairs]
    right_keys = [original[r] for _, r in pairs]
    windowed = plan_window_join(planner, kind, left, right, pairs, rest, original, join)
    if windowed is not None:
        return windowed
    for attribute in ("ROWTIME", "PROCTIME"):
        lt = {n for n, a in left_times.items() if a == attribute}
        rt = {n for n, a in right_times.items() if a == attribute}
        bounds = extract_interval(rest, lt, rt)
        if bounds is None:
            continue
        for side, node in (("left", left), ("right", right)):
            if not node.is_insert_only:
                raise planner.error(
                    UnsupportedPlanError,
                    join,
                    f"IntervalJoin consumes insert-only input, but its {side} input {planner.producer_name(node)} "
                    f"produces {'updates' if 'U' in node.modify_kinds else 'deletes'}",
                    "interval-join-insert-only",
                )
        # The rest is part of the match, also for outer joins (Flink's IntervalJoinFunction): the runtime
        # evaluates it per candidate pair before deciding on null padding.
        remaining = [c for c in rest if c not in bounds.conditions]
        return IntervalJoin(
            kind,
            left,
            right,
            left_keys,
            right_keys,
            bounds.lower_ms,
            bounds.upper_ms,
            bounds.left_time,
            original[bounds.right_time],
            attribute == "ROWTIME",
            and_all(remaining),
        )
    _check_watermarks_for_bounds(planner, rest, left, right, original)
    all_times = {**left_times, **right_times}
    for c in rest:
        used = [col for col in c.find_all(exp.Column) if col.name in all_times]
        if used:
            sides = {("left" if col.name in left_times else "right") for col in used}
            attributes = {all_times[col.name] for col in used}
            if sides == {"left", "right"} and len(attributes) > 1:
                message = (
                    f"join condition '{c.sql(Flink)}' compares a rowtime with a proctime; an interval join "
                    "needs time attributes of one kind on both sides"
                )
                raise planner.error(ValidationError, c, message, "interval-join-time-attributes")
            raise planner.error(
                ValidationError,
                c,
                f"regular join condition '{c.sql(Flink)}' uses time attribute '{used[0].name}': a regular join keeps "
                "every row forever, so its condition may not use time attributes; bound both sides' rowtimes "
                "(e.g. b.t BETWEEN a.t - INTERVAL '1' HOUR AND a.t) for an interval join, "
                "or CAST the time attribute to TIMESTAMP",
                "regular-join-time-attributes",
            )
    return RegularJoin(kind, left, right, left_keys, right_keys, and_all(rest), planner.state_ttl_ms)


def _check_watermarks_for_bounds(
    planner: QueryPlanner, rest, left: Node, right: Node, original: dict[str, str]
) -> None:
    """Refuse an interval-shaped condition between a rowtime and a timestamp without WATERMARK.

    (Between two plain timestamps it is a regular join's condition, as in Flink.)
    """
    left_ts = {f.name for f in left.fields if f.type is not None and f.type.family == "timestamp"}
    right_ts = {
        r
        for r, o in original.items()
        if (right_type := right.field(o).type) is not None and right_type.family == "timestamp"
    }
    bounds = extract_interval(rest, left_ts, right_ts)
    if bounds is None:
        return
    sides = (
        (bounds.left_time, left.field(bounds.left_time)),
        (bounds.right_time, right.field(original[bounds.right_time])),
    )
    if not any(f.is_rowtime for _, f in sides):
        return
    for name, node_field in sides:
        if not node_field.is_rowtime:
            raise planner.error(
                ValidationError,
                bounds.conditions[0],
                f"the join condition bounds '{name}' like an interval join, but '{name}' has no watermark: "
                "declare WATERMARK FOR it in its table to make it a rowtime",
                "interval-join-watermark",
            )
