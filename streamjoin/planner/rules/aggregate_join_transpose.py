"""An aggregate over an inner join with a side unique on its join key is split around the join, as Flink plans
it (``FlinkAggregateJoinTransposeRule.EXTENDED``, after Calcite's ``AggregateJoinTransposeRule``).

``SELECT c.region, COUNT(*), SUM(o.amount) FROM orders o JOIN customers c ON o.cid = c.cid GROUP BY
c.region``, with ``customers`` unique on ``cid``: Flink 2.3.0 aggregates ``orders`` per join key below the
join, joins those partial aggregates with ``customers`` and sums them per group above it::

    GroupAggregate(groupBy=[region], select=[region, $SUM0($f1), SUM($f2)])
    +- Join(where=[cid = cid0])
       :- GroupAggregate(groupBy=[cid], select=[cid, COUNT(*) AS $f1, SUM(amount) AS $f2])
       :  +- orders
       +- customers

The final table is the same either way; the changelog is not: an order's change reaches its group as a change
of its customer's partial aggregate, so the group's intermediate values are Flink's only in Flink's plan.

Planned where Calcite's rule applies and Flink's cost model takes it on the cases we compare with (an aggregate
pushed to one side, the other unique): an INNER regular join without residual predicate whose one input (the
*unique side*) has a unique key inside its join key and the other (the *aggregated side*) none; the aggregate
directly over the join; every call ``COUNT(*)``, or ``COUNT``/``SUM``/``MIN``/``MAX`` of an aggregated side's
column, or ``MIN``/``MAX`` of a unique side's column (Calcite also splits ``SUM``/``COUNT`` of a unique side's
column, multiplied by the other side's count: not planned here); no ``DISTINCT``; not every join column
grouped (there Calcite turns the top aggregate into a projection). Otherwise the aggregate stays above the
join.
"""

from __future__ import annotations

from sqlglot import exp

from streamjoin.planner.expressions import field_column
from streamjoin.planner.plan import Aggregate, Calc, Field, GroupAggregate, Node, RegularJoin, uniquify

__all__ = ["split_aggregate_around_join"]

#: The calls split into a partial call below the join and the final call above it (Calcite's splitters).
_FINAL = {"COUNT": "SUM", "SUM": "SUM", "MIN": "MIN", "MAX": "MAX"}


def split_aggregate_around_join(
    join: Node, group_by: list[str], calls: list[Aggregate], state_ttl_ms: int | None, *, mini_batch: bool
) -> GroupAggregate | None:
    """The final ``GroupAggregate`` of the split plan (module docstring), or None where the rule does not apply.

    Args:
        join: the aggregate's input.
        group_by: the grouping fields, ``join``'s output names.
        calls: the aggregate calls over ``join``'s output.
        state_ttl_ms, mini_batch: the aggregate's settings, for both aggregates.

    Returns:
        A ``GroupAggregate`` whose fields are ``group_by`` and the calls' outputs, as the aggregate over ``join``
        would have them.
    """
    if not isinstance(join, RegularJoin) or join.kind != "inner" or join.residual is not None:
        return None
    sides = [join.left, join.right]
    keys = [join.left_keys, join.right_keys]
    unique = [any(set(k) <= set(keys[i]) for k in sides[i].unique_keys) for i in (0, 1)]
    if unique.count(True) != 1:
        return None
    u = unique.index(True)
    a = 1 - u
    # Each output field of the join as (side, the side's field name).
    origin = {n: (0, n) for n in join.left.field_names}
    origin.update({out: (1, n) for out, n in zip(join.right_names, join.right.field_names)})
    grouped = {origin[g] for g in group_by}
    if all((0, l) in grouped or (1, r) in grouped for l, r in zip(*keys)):
        return None  # every join column grouped: Calcite turns the top aggregate into a projection
    for call in calls:
        if call.function not in _FINAL or call.output == "$distinct":
            return None
        if call.arg is not None and origin[call.arg][0] == u and call.function not in ("MIN", "MAX"):
            return None

    # Below the join: the aggregated side grouped by its join and grouping columns, in its field order.
    below = sides[a]
    below_keys = [n for n in below.field_names if n in keys[a] or (a, n) in grouped]
    taken = set(join.field_names) | set(sides[u].field_names)
    partial_calls: list[Aggregate] = []
    partial_of: dict[int, str] = {}  # index of a call → its partial's output name
    for i, call in enumerate(calls):
        if call.arg is not None and origin[call.arg][0] == u:
            continue
        name = uniquify([f"f{len(below_keys) + len(partial_calls) + 1}"], taken)[0]
        taken.add(name)
        arg = origin[call.arg][1] if call.arg is not None else None
        partial_calls.append(Aggregate(name, call.function, arg, call.type))
        partial_of[i] = name
    partial = GroupAggregate(below, below_keys, partial_calls, state_ttl_ms, mini_batch=mini_batch)
    inputs = [partial, sides[u]] if a == 0 else [sides[u], partial]
    split = RegularJoin("inner", inputs[0], inputs[1], join.left_keys, join.right_keys, None, join.state_ttl_ms)

    def output_name(side: int, name: str) -> str:
        """The split join's output name of a side's field (the right side's may be renamed otherwise)."""
        return name if side == 0 else split.right_name(name)

    def final_arg(index: int, call: Aggregate) -> str:
        if index in partial_of:
            return output_name(a, partial_of[index])
        assert call.arg is not None  # only a MIN/MAX of a unique side's column has no partial
        return output_name(*origin[call.arg])

    groups = {g: output_name(*origin[g]) for g in group_by}
    args = [final_arg(i, call) for i, call in enumerate(calls)]
    top: Node = split
    if any(g != new for g, new in groups.items()):
        # Back to the grouping names the aggregate's consumers read.
        others = [n for n in dict.fromkeys(args) if n not in groups.values()]
        if set(others) & set(groups):
            return None
        projections: list[tuple[Field, exp.Expr]] = [
            (Field(g, split.field(new).type), field_column(new)) for g, new in groups.items()
        ]
        top = Calc(split, projections + [(split.field(n), field_column(n)) for n in others])
        back = {new: g for g, new in groups.items()}
        args = [back.get(n, n) for n in args]
    finals = [Aggregate(call.output, _FINAL[call.function], arg, call.type) for call, arg in zip(calls, args)]
    return GroupAggregate(top, group_by, finals, state_ttl_ms, mini_batch=mini_batch)
