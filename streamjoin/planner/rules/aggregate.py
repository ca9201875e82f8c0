"""``GROUP BY``, aggregate calls and ``HAVING`` (and ``SELECT DISTINCT``, planned as ``GROUP BY`` every
column): a ``GroupAggregate`` over any changelog, argument expressions computed by a Calc before it
(Flink's ``StreamPhysicalGroupAggregateRule``), split around an inner join with a side unique on its join key
(:mod:`.aggregate_join_transpose`); also the aggregate calls of OVER windows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner.dialect import Flink
from streamjoin.planner.expressions import AGGREGATES, Scope, ScopeColumn, field_column, resolve
from streamjoin.planner.plan import Aggregate, Calc, Field, GroupAggregate, Node, uniquify
from streamjoin.planner.relation import Relation
from streamjoin.planner.rules.aggregate_join_transpose import split_aggregate_around_join
from streamjoin.planner.rules.grouping_sets import grouping_sets, plan_grouping_sets
from streamjoin.planner.rules.project import output_names
from streamjoin.planner.rules.window import plan_window_aggregate, rewrite_group_window
from streamjoin.planner.types import SqlType, from_spark
from streamjoin.runtime.aggregates import result_type

if TYPE_CHECKING:
    from streamjoin.planner.builder import QueryPlanner

__all__ = ["aggregate_call", "aggregates_outside_windows", "computed_name", "plan_aggregate"]


def aggregates_outside_windows(e: exp.Expr) -> list[exp.Expr]:
    """The aggregate calls in ``e`` that are not inside an OVER window."""
    return [a for a in e.find_all(*AGGREGATES) if not a.find_ancestor(exp.Window)]


def aggregate_call(
    planner: QueryPlanner, call: exp.Expr, output: str, input: Node, scope: Scope, extra: list
) -> Aggregate:
    """An :class:`Aggregate` for ``call``; a non-column argument becomes a computed input field in ``extra``."""
    function = AGGREGATES[type(call)]
    arg = call.this
    if isinstance(arg, exp.Distinct):
        if function != "COUNT" or len(arg.expressions) != 1:
            raise planner.error(
                UnsupportedPlanError,
                call,
                f"{call.sql(Flink)}: DISTINCT is supported in COUNT(DISTINCT x) only",
                "supported-aggregates",
            )
        function, arg = "COUNT_DISTINCT", arg.expressions[0]
    if isinstance(arg, exp.Star) or (function == "COUNT" and arg is None):
        return Aggregate(output, "COUNT", None, SqlType("BIGINT", nullable=False))
    if arg is None or call.expressions:
        raise planner.error(
            UnsupportedPlanError, call, f"{call.sql(Flink)}: aggregates take one argument here", "supported-aggregates"
        )
    resolved = resolve(arg, scope)
    arg_type = planner.typer(input).type_of(resolved)
    if isinstance(resolved, exp.Column):
        field = resolved.name
    else:
        field = computed_name(input, extra)
        extra.append((Field(field, arg_type), resolved))
    return Aggregate(output, function, field, _aggregate_type(planner, function, arg_type, call))


def _aggregate_type(planner: QueryPlanner, function: str, t: SqlType | None, call: exp.Expr) -> SqlType | None:
    if function in ("COUNT", "COUNT_DISTINCT"):
        return SqlType("BIGINT", nullable=False)
    if t is None:
        return None
    t = t.plain()
    if function in ("SUM", "AVG") and t.family != "numeric":
        raise planner.error(
            ValidationError, call, f"{function} needs a number; '{call.this.sql(Flink)}' is {t}", "type-mismatch"
        )
    if function in ("SUM", "AVG") and t.root == "DECIMAL":  # the operator's rule, which changes its scale
        return from_spark(result_type(function, t.spark)).with_nullable(True)
    return t.with_nullable(True)


def plan_aggregate(
    planner: QueryPlanner, select: exp.Select, relation: Relation, items, group_exprs: list | None = None
) -> Relation:
    """A ``GroupAggregate`` for ``select`` over ``relation``, then the Calc computing ``items`` and ``HAVING``.

    ``group_exprs`` overrides ``GROUP BY`` (``SELECT DISTINCT`` passes its items). ``GROUPING SETS``, ``ROLLUP`` and
    ``CUBE`` plan one aggregate per set and their union (:mod:`.grouping_sets`). As in Flink (Calcite's
    default conformance), the names in the select list, ``GROUP BY`` and ``HAVING`` are the input's columns:
    a select alias names an output column only (``SUM(x) AS s`` over an input with a column ``s`` is no
    ambiguity, and ``HAVING s > 1`` then reads the input's ``s``).

    Raises:
        ValidationError: a selected column that is neither grouped nor aggregated, a non-numeric SUM/AVG.
        UnsupportedPlanError: group windows inside an expression, ordinals, unsupported aggregates,
            FIRST_VALUE/LAST_VALUE over retractions.
    """
    if group_exprs is None:
        group_exprs = select.args["group"].expressions if select.args.get("group") else []
        sets = grouping_sets(group_exprs)
        if sets is not None:
            return plan_grouping_sets(
                planner,
                select,
                relation,
                items,
                sets,
                lambda branch, branch_items, exprs: plan_aggregate(planner, branch, relation, branch_items, exprs),
            )
    having = select.args["having"].this if select.args.get("having") else None
    relation, items, group_exprs, having = rewrite_group_window(planner, relation, items, group_exprs, having)
    scope = relation.scope(planner.source)
    node = relation.node
    for g in group_exprs:
        nested = next(
            (a for a in g.find_all(exp.Anonymous) if a.name.upper() in ("TUMBLE", "HOP", "SESSION", "CUMULATE")), None
        )
        if isinstance(g, exp.Literal) or nested is not None:
            raise planner.error(
                UnsupportedPlanError,
                g,
                f"GROUP BY {g.sql(Flink)} is not supported (group windows inside an expression, ordinals)",
                "supported-aggregates",
            )
    extra: list[tuple[Field, exp.Expr]] = []
    group_fields, group_map = [], {}
    for g in group_exprs:
        resolved = resolve(g, scope)
        if isinstance(resolved, exp.Column):
            field = resolved.name
        else:
            field = computed_name(node, extra)
            extra.append((Field(field, planner.typer(node).type_of(resolved)), resolved))
        group_fields.append(field)
        group_map[resolved.sql(Flink)] = field
    calls: list[Aggregate] = []
    call_map: dict[str, str] = {}
    names = output_names(items)
    item_names = {id(e): n for (_, e), n in zip(items, names)}
    for e in [e for _, e in items] + ([having] if having is not None else []):
        for call in aggregates_outside_windows(e):
            key = call.sql(Flink)
            if key in call_map:
                continue
            # An aggregate that is a select item of its own is named like it (Flink: EXPR$1 or its alias).
            output = item_names.get(id(call))
            if output is None or output in group_fields or output in call_map.values():
                output = f"agg${len(calls)}"
            aggregate = aggregate_call(planner, call, output, node, scope, extra)
            calls.append(aggregate)
            call_map[key] = output
    if not calls:
        # GROUP BY without aggregates: MIN of a grouping column never changes, so the operator emits
        # +I when a group appears and -D when it empties, as Flink's GroupAggregate without calls.
        first = group_fields[0]
        calls.append(
            Aggregate("$distinct", "MIN", first, node.field(first).type if first in node.field_names else None)
        )
    computed = {f.name for f, _ in extra}
    needed = [n for n in dict.fromkeys(group_fields + [a.arg for a in calls if a.arg]) if n not in computed]
    pre: Node
    if extra:
        pre = Calc(node, [(node.field(n), field_column(n)) for n in needed] + extra)
    else:
        pre = node
    if not pre.is_insert_only and any(a.function in ("FIRST_VALUE", "LAST_VALUE") for a in calls):
        raise planner.error(
            UnsupportedPlanError,
            select,
            "FIRST_VALUE / LAST_VALUE over a changelog with retractions is not supported",
            "supported-aggregates",
        )
    agg: Node | None = plan_window_aggregate(planner, select, pre, group_fields, calls)
    if agg is None and pre is node:
        agg = split_aggregate_around_join(
            node, group_fields, calls, planner.state_ttl_ms, mini_batch=planner.mini_batch
        )
    if agg is None:
        agg = GroupAggregate(pre, group_fields, calls, planner.state_ttl_ms, mini_batch=planner.mini_batch)

    def rewrite(e: exp.Expr) -> exp.Expr:
        # Columns name the input (Flink: a SELECT alias never shadows an input column, so an aggregate
        # named ``s`` and an input column ``s`` are different columns); an aggregate call becomes its
        # output field and a grouped expression its grouping field. What is left naming the input is
        # neither grouped nor aggregated.
        outputs: set[int] = set()

        def replace(n: exp.Expr) -> exp.Expr:
            if isinstance(n, tuple(AGGREGATES)) and not n.find_ancestor(exp.Window):
                column = field_column(call_map[n.sql(Flink)], n)
                outputs.add(id(column))
                return column
            if isinstance(n, (exp.Column, exp.Subquery, exp.Exists, exp.Select)):
                return resolve(n, scope)
            return n

        def to_group(n: exp.Expr) -> exp.Expr:
            if id(n) in outputs:
                return n
            key = n.sql(Flink)
            if key in group_map:
                column = field_column(group_map[key], n)
                outputs.add(id(column))
                return column
            return n

        grouped = e.transform(replace).transform(to_group, copy=False)
        for col in grouped.find_all(exp.Column):
            if id(col) not in outputs and not isinstance(col.this, exp.Star):
                raise planner.error(
                    ValidationError,
                    col,
                    f"column '{col.name}' is not being grouped: add it to GROUP BY or aggregate it",
                    "group-by-columns",
                )
        return grouped

    exprs = [rewrite(e) for _, e in items]
    condition = rewrite(having) if having is not None else None
    if condition is not None:
        planner.typer(agg).check_boolean(condition, "HAVING")
    typer = planner.typer(agg)
    projections = [(Field(n, typer.type_of(e)), e) for n, e in zip(names, exprs)]
    out = planner.calc(agg, projections, condition)
    return Relation(out, [ScopeColumn(None, f.name, f.name, f.type) for f, _ in projections])


def computed_name(node: Node, extra: list) -> str:
    """A name for a computed input field: Flink's ``$f<n>`` spelled ``f<n>``, because Spark's state store
    takes grouping-key names as Avro names (letters, digits, ``_``); unique among ``node``'s fields."""
    taken = set(node.field_names) | {f.name for f, _ in extra}
    return uniquify([f"f{len(node.fields) + len(extra)}"], taken)[0]
