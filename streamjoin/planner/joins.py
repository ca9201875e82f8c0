"""Reading a join condition as Flink's planner does: equi-key pairs, interval bounds, the rest.

A join condition, once resolved to the join's output fields (left fields, then
the right fields renamed), splits into

- **equi pairs** ``left_field = right_field`` (the hash key of the join);
- **interval bounds** on the two sides' time attributes (Flink's
  ``IntervalJoinUtil.extractWindowBounds``): each ``>``, ``>=``, ``<``, ``<=``
  (``BETWEEN`` is both) between ``l.t [± INTERVAL]`` and ``r.t [± INTERVAL]``
  bounds ``r.t - l.t``; with a lower and an upper bound on the same pair of
  time attributes (both rowtime, or both proctime) the join is an interval join;
- the **residual** predicate: everything else.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from streamjoin.planner.dialect import interval_ms

__all__ = ["IntervalBounds", "extract_interval", "split_equi", "time_term"]

_FLIP: dict[type[exp.Expr], type[exp.Expr]] = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}


def split_equi(
    conditions: list[exp.Expr], left: set[str], right: set[str]
) -> tuple[list[tuple[str, str]], list[exp.Expr]]:
    """``(left field, right field)`` pairs of the ``=`` conjuncts between the two sides, and the other conjuncts."""
    pairs, rest = [], []
    for c in conditions:
        if isinstance(c, exp.EQ) and isinstance(c.this, exp.Column) and isinstance(c.expression, exp.Column):
            a, b = c.this.name, c.expression.name
            if a in left and b in right:
                pairs.append((a, b))
                continue
            if b in left and a in right:
                pairs.append((b, a))
                continue
        rest.append(c)
    return pairs, rest


def time_term(node: exp.Expr) -> tuple[str, int] | None:
    """``(field, offset_ms)`` when ``node`` is ``field``, ``field ± INTERVAL …`` (nested), else ``None``."""
    node = node.unnest()
    if isinstance(node, exp.Column):
        return node.name, 0
    if isinstance(node, (exp.Add, exp.Sub)):
        sign = 1 if isinstance(node, exp.Add) else -1
        if isinstance(node.expression, exp.Interval):
            inner = time_term(node.this)
            if inner is not None:
                return inner[0], inner[1] + sign * interval_ms(node.expression)
        if isinstance(node, exp.Add) and isinstance(node.this, exp.Interval):
            inner = time_term(node.expression)
            if inner is not None:
                return inner[0], inner[1] + interval_ms(node.this)
    return None


@dataclass(frozen=True)
class IntervalBounds:
    """``right_time - left_time`` within ``[lower_ms, upper_ms]`` (inclusive), from ``conditions``."""

    left_time: str
    right_time: str
    lower_ms: int
    upper_ms: int
    conditions: tuple[exp.Expr, ...]


def _comparisons(condition: exp.Expr) -> list[tuple[type[exp.Expr], exp.Expr, exp.Expr]]:
    condition = condition.unnest()
    if isinstance(condition, exp.Between):
        return [(exp.GTE, condition.this, condition.args["low"]), (exp.LTE, condition.this, condition.args["high"])]
    if type(condition) in _FLIP:
        return [(type(condition), condition.this, condition.expression)]
    return []


def extract_interval(conditions: list[exp.Expr], left_times: set[str], right_times: set[str]) -> IntervalBounds | None:
    """The interval bounds of a join, or ``None`` when there is no lower and upper bound on one pair of time fields.

    Args:
        conditions: the non-equi conjuncts, resolved to output field names.
        left_times / right_times: the time-attribute fields of each side (output names), of one kind
            (both rowtime or both proctime).

    Example:
        ``b.t BETWEEN a.t - INTERVAL '10' MINUTE AND a.t + INTERVAL '5' MINUTE`` gives
        ``lower_ms=-600000, upper_ms=300000``; ``b.t > a.t`` gives ``lower_ms=1``.
    """
    found: dict[tuple[str, str], dict] = {}
    for condition in conditions:
        for op, lhs, rhs in _comparisons(condition):
            lt, rt = time_term(lhs), time_term(rhs)
            if lt is None or rt is None:
                continue
            if lt[0] in left_times and rt[0] in right_times:
                # l + lo OP r + ro  <=>  r - l OP' lo - ro
                op, (left_field, lo), (right_field, ro) = _FLIP[op], lt, rt
                constant = lo - ro
            elif lt[0] in right_times and rt[0] in left_times:
                # r + ro OP l + lo  <=>  r - l OP lo - ro
                (right_field, ro), (left_field, lo) = lt, rt
                constant = lo - ro
            else:
                continue
            entry = found.setdefault((left_field, right_field), {"lower": [], "upper": [], "conditions": []})
            if op in (exp.GT, exp.GTE):
                entry["lower"].append(constant + (1 if op is exp.GT else 0))
            else:
                entry["upper"].append(constant - (1 if op is exp.LT else 0))
            if condition not in entry["conditions"]:
                entry["conditions"].append(condition)
    for (left_field, right_field), entry in found.items():
        if entry["lower"] and entry["upper"]:
            return IntervalBounds(
                left_field, right_field, max(entry["lower"]), min(entry["upper"]), tuple(entry["conditions"])
            )
    return None
