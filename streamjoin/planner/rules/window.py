"""Window table functions in ``FROM`` and the window aggregate over them (docs/semantics.md §11).

``FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' MINUTES))`` becomes a ``WindowTableFunction`` (Flink's
``StreamPhysicalWindowTableFunction``); a ``GROUP BY`` holding both its ``window_start`` and ``window_end`` becomes
a ``WindowAggregate`` over it (Flink's ``StreamPhysicalWindowAggregateRule``); any other ``GROUP BY`` over its
columns stays a ``GroupAggregate``, as in Flink. A ``ROW_NUMBER()`` partitioned by both becomes a ``WindowRank``
(Flink's ``StreamPhysicalWindowRankRule``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from sqlglot import exp

from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner.diagnostics import SqlSource, error
from streamjoin.planner.dialect import (
    WINDOW_TVF_PARAMETERS,
    Descriptor,
    Flink,
    TableArgument,
    WindowTableFunction,
    interval_ms,
)
from streamjoin.planner.expressions import Scope, ScopeColumn, and_all, resolve
from streamjoin.planner.plan import (
    WINDOW_COLUMNS,
    Aggregate,
    Calc,
    Node,
    WindowAggregate,
    WindowJoin,
    WindowKind,
    WindowRank,
    WindowSpec,
    walk,
)
from streamjoin.planner.plan import WindowTableFunction as WindowTableFunctionNode
from streamjoin.planner.relation import Relation

if TYPE_CHECKING:
    from streamjoin.planner.builder import QueryPlanner

__all__ = [
    "check_session_windows",
    "group_window_auxiliaries",
    "plan_window_aggregate",
    "plan_window_join",
    "plan_window_rank",
    "plan_window_table_function",
    "rewrite_group_window",
    "window_table_function_call",
]

#: The aggregate functions a window aggregate takes (those of the group aggregate).
_WINDOW_AGG_FUNCTIONS = ("COUNT", "COUNT_DISTINCT", "SUM", "AVG", "MIN", "MAX")


def window_table_function_call(item: exp.Expr) -> WindowTableFunction | None:
    """The window table function of a ``FROM TABLE(…)`` item, if it is one."""
    call = item.this if isinstance(item, exp.Table) else None
    if isinstance(call, exp.Anonymous) and call.name.upper() == "TABLE" and len(call.expressions) == 1:
        inner = call.expressions[0]
        if isinstance(inner, WindowTableFunction):
            return inner
    return None


def _arguments(planner: QueryPlanner, call: WindowTableFunction) -> dict[str, exp.Expr]:
    """The call's arguments by Flink's parameter names, positional ones first."""
    kind = call.name
    names = WINDOW_TVF_PARAMETERS[kind]
    args: dict[str, exp.Expr] = {}
    named = False
    for i, arg in enumerate(call.expressions):
        if isinstance(arg, exp.Kwarg):
            named = True
            name, value = arg.this.name.upper(), arg.expression
            if name not in names:
                raise planner.error(
                    ValidationError,
                    arg,
                    f"{kind} has no parameter {name}; its parameters: {', '.join(names)}",
                    "window-functions",
                )
        elif named:
            raise planner.error(
                ValidationError, arg, f"{kind}: a positional argument after a named one", "window-functions"
            )
        elif i >= len(names):
            raise planner.error(
                ValidationError,
                arg,
                f"{kind} takes at most {len(names)} arguments ({', '.join(names)})",
                "window-functions",
            )
        else:
            name, value = names[i], arg
        if name in args:
            raise planner.error(ValidationError, arg, f"{kind}: {name} is given twice", "window-functions")
        args[name] = value
    required = names[:-1] if names[-1] == "OFFSET" else names
    missing = [n for n in required if n not in args]
    if missing:
        raise planner.error(
            ValidationError, call, f"{kind} needs {', '.join(missing)} ({kind}({', '.join(names)}))", "window-functions"
        )
    return args


def _length(planner: QueryPlanner, kind: str, name: str, value: exp.Expr, *, positive: bool = True) -> int:
    try:
        ms = interval_ms(value)
    except ValidationError as e:
        raise planner.error(ValidationError, value, f"{kind} {name}: {e}", "window-functions") from None
    if positive and ms <= 0:
        raise planner.error(
            ValidationError, value, f"{kind} {name} must be positive, got {value.sql(Flink)}", "window-functions"
        )
    return ms


def plan_window_table_function(planner: QueryPlanner, call: WindowTableFunction, outer: Scope | None) -> Relation:
    """The ``WindowTableFunction`` of ``TABLE(TUMBLE|HOP|CUMULATE(…))``: its input's columns (the rowtime as a
    plain timestamp) and ``window_start``, ``window_end``, ``window_time``.

    Raises:
        ValidationError: unknown, missing or repeated parameters, a time column that is not a rowtime attribute,
            a non-positive or non day-time interval, an input with a column named like a window column.
        UnsupportedPlanError: processing-time windows.
    """
    from streamjoin.planner.rules.scan import plan_table_ref

    kind = call.name
    args = _arguments(planner, call)
    data, timecol = args["DATA"], args["TIMECOL"]
    if not isinstance(data, TableArgument):
        raise planner.error(
            ValidationError, data, f"{kind}'s DATA must be a table argument: TABLE name", "window-functions"
        )
    if data.args.get("partition_by") and kind != "SESSION":
        raise planner.error(
            ValidationError, data, f"{kind} takes no PARTITION BY (only SESSION does)", "window-functions"
        )
    if not isinstance(timecol, Descriptor) or len(timecol.expressions) != 1:
        raise planner.error(
            ValidationError, timecol, f"{kind}'s TIMECOL must be DESCRIPTOR(column) of one column", "window-functions"
        )
    table = cast(exp.Table, data.this)
    relation = plan_table_ref(planner, table, outer)
    partition_by: tuple[str, ...] = ()
    if data.args.get("partition_by"):
        scope = relation.scope(planner.source, outer)
        partition_by = tuple(resolve(c, scope).name for c in data.args["partition_by"])
    return _windowed(planner, kind, args, relation, timecol, table, outer, partition_by)


def _windowed(
    planner: QueryPlanner,
    kind: str,
    args: dict[str, exp.Expr],
    relation: Relation,
    timecol: Descriptor,
    at: exp.Expr,
    outer: Scope | None,
    partition_by: tuple[str, ...] = (),
    *,
    group_window: bool = False,
) -> Relation:
    """The ``WindowTableFunction`` ``kind`` with ``args`` over ``relation``, windowed by ``timecol`` (a SESSION's
    sessions per ``partition_by`` key)."""
    scope = relation.scope(planner.source, outer)
    column = resolve(timecol.expressions[0], scope)
    field = relation.node.field(column.name)
    if field.type is None or field.type.time_attribute != "ROWTIME":
        what = "a processing-time attribute" if field.is_proctime else str(field.type)
        message = (
            f"The window function requires the timecol is a time attribute type, but is {what}"
            if not field.is_proctime
            else f"{kind} windows on processing time are not supported: '{column.name}' is {what}"
        )
        rule = "window-functions"
        raise planner.error(UnsupportedPlanError if field.is_proctime else ValidationError, timecol, message, rule)
    clash = [c for c in WINDOW_COLUMNS if c in relation.node.field_names or c in {c.name for c in relation.columns}]
    if clash:
        raise planner.error(
            ValidationError,
            at,
            f"{kind}'s input already has a column {clash[0]}, which the window function adds",
            "window-functions",
        )
    size = _length(planner, kind, "GAP" if kind == "SESSION" else "SIZE", args["GAP" if kind == "SESSION" else "SIZE"])
    step = None
    if kind in ("HOP", "CUMULATE"):
        step_name = "SLIDE" if kind == "HOP" else "STEP"
        step = _length(planner, kind, step_name, args[step_name])
    offset = _length(planner, kind, "OFFSET", args["OFFSET"], positive=False) if "OFFSET" in args else 0
    window = WindowSpec(cast(WindowKind, kind), column.name, size, step, offset, partition_by)
    node = WindowTableFunctionNode(relation.node, window, at, group_window=group_window)
    types = {f.name: f.type for f in node.fields}
    columns = [ScopeColumn(c.qualifier, c.name, c.field, types[c.field]) for c in relation.columns]
    columns += [ScopeColumn(None, name, name, types[name]) for name in WINDOW_COLUMNS]
    return Relation(node, columns)


def _window_origin(
    node: Node, name: str, *, window_columns_only: bool = True
) -> tuple[WindowTableFunctionNode, str] | None:
    """The window table function and its window column (or, without ``window_columns_only``, any column) that
    field ``name`` of ``node`` is, through Calcs that pass it on unchanged."""
    through_aggregate = False
    while True:
        if isinstance(node, WindowTableFunctionNode):
            if through_aggregate and node.group_window:
                return None
            return (node, name) if name in WINDOW_COLUMNS or not window_columns_only else None
        if isinstance(node, WindowAggregate) and node.window.kind != "SESSION":
            # A window aggregate's window columns are its windows' (Flink's window properties): an aggregate, a
            # Top-N or a join over them has those windows (a cascaded window aggregate, a window Top-N of windows'
            # results). Not a legacy group window's (plain timestamps in Flink), nor a SESSION aggregate's
            # sessions, which are not windows its input could assign again.
            if name not in (node.window_start, node.window_end, node.window_time):
                return None
            node, through_aggregate = node.inputs[0], True
            continue
        if not isinstance(node, Calc):
            return None
        expr = next((e for f, e in node.projections if f.name == name), None)
        if not isinstance(expr, exp.Column):
            return None
        node, name = node.inputs[0], expr.name


def _window_of(input: Node, fields: list[str]) -> tuple[WindowSpec, dict[str, str]] | None:
    """The window whose ``window_start`` and ``window_end`` are both among ``fields`` of ``input`` (the columns of
    one window table function below it, through Calcs), and its columns' roles → field names; else ``None``."""
    origins = {name: _window_origin(input, name) for name in fields}
    tvfs = {id(o[0]): o[0] for o in origins.values() if o is not None}
    for tvf in tvfs.values():
        roles = {o[1]: name for name, o in origins.items() if o is not None and o[0] is tvf}
        if "window_start" in roles and "window_end" in roles:
            return tvf.window, roles
    return None


def plan_window_rank(
    planner: QueryPlanner, at: exp.Expr, input: Node, keys: list[str], order: list[tuple[str, bool, bool]], rank: str
) -> WindowRank | None:
    """A ``WindowRank`` when the partition ``keys`` hold the ``window_start`` and ``window_end`` of one window
    table function below ``input``, else ``None`` (Flink's ``StreamPhysicalWindowRankRule``).

    Raises:
        UnsupportedPlanError: an input that is not insert-only (Flink: the window rank does not consume updates).
    """
    found = _window_of(input, keys)
    if found is None:
        return None
    window, roles = found
    if window.kind == "SESSION":
        raise planner.error(
            UnsupportedPlanError,
            at,
            "a window Top-N over a SESSION window table function is not supported",
            "window-rank",
        )
    if not input.is_insert_only:
        raise planner.error(
            UnsupportedPlanError,
            at,
            f"StreamPhysicalWindowRank doesn't support consuming update and delete changes which is produced by "
            f"{planner.producer_name(input)}",
            "window-rank",
        )
    window_names = set(roles.values())
    partition = [k for k in keys if k not in window_names]
    time_ordered = False
    if len(order) == 1:
        origin = _window_origin(input, order[0][0], window_columns_only=False)
        time_ordered = (
            origin is not None and origin[0].window == window and origin[1] in (window.time_col, "window_time")
        )
    return WindowRank(
        input, window, partition, order, roles["window_start"], roles["window_end"], rank, time_ordered=time_ordered
    )


def plan_window_aggregate(
    planner: QueryPlanner, at: exp.Expr, input: Node, group_fields: list[str], calls: list[Aggregate]
) -> WindowAggregate | None:
    """A ``WindowAggregate`` when ``group_fields`` hold the ``window_start`` and ``window_end`` of one window table
    function below ``input`` (through Calcs), else ``None`` (a ``GroupAggregate`` then, as Flink plans it).

    Raises:
        ValidationError: a HOP size that is not a multiple of its slide, a CUMULATE size not a multiple of its
            step (Flink's rules for window aggregates).
        UnsupportedPlanError: an aggregate function the window aggregate does not take.
    """
    found = _window_of(input, group_fields)
    if found is None:
        return None
    window, roles = found
    if window.kind in ("HOP", "CUMULATE") and window.size_ms % (window.step_ms or 1):
        which = "size must be an integral multiple of slide" if window.kind == "HOP" else "maxSize must be an "
        which = which if window.kind == "HOP" else which + "integral multiple of step"
        raise planner.error(
            ValidationError, at, f"{window.kind} table function based aggregate requires {which}", "window-functions"
        )
    unsupported = [a for a in calls if a.function not in _WINDOW_AGG_FUNCTIONS]
    if unsupported:
        raise planner.error(
            UnsupportedPlanError,
            at,
            f"{unsupported[0].function} is not supported in a window aggregate; supported: "
            f"{', '.join(_WINDOW_AGG_FUNCTIONS)}",
            "supported-aggregates",
        )
    window_names = set(roles.values())
    keys = [g for g in group_fields if g not in window_names]
    if window.kind == "SESSION":
        _check_session_keys(planner, at, input, window, keys)
    return WindowAggregate(
        input, window, keys, calls, roles["window_start"], roles["window_end"], roles.get("window_time")
    )


def _check_session_keys(planner: QueryPlanner, at: exp.Expr, input: Node, window: WindowSpec, keys: list[str]) -> None:
    """A session window aggregate groups by exactly the SESSION's partition keys: it forms the sessions per grouping
    key. (Flink also accepts other grouping keys: its SESSION table function then forms the sessions per partition
    key, globally without one, before the aggregate groups them; not supported here.)"""
    partition = []
    for key in window.partition_by:
        name = next(
            (f for f in keys if (o := _window_origin(input, f, window_columns_only=False)) and o[1] == key), None
        )
        partition.append(name or key)
    if sorted(partition) != sorted(keys):
        raise planner.error(
            UnsupportedPlanError,
            at,
            "a session window aggregate must group by window_start, window_end and exactly the SESSION's "
            f"PARTITION BY keys: its partition keys are [{', '.join(window.partition_by)}], its grouping keys "
            f"[{', '.join([*keys, 'window_start', 'window_end'])}] (sessions formed per partition key and grouped "
            "by other keys are not supported)",
            "window-functions",
        )


def _computes_on_window_columns(calc: Calc) -> exp.Expr | None:
    """The condition or projection of ``calc`` that reads a window column of the table function below it other than
    by passing it on unchanged, or ``None``."""
    input = calc.inputs[0]
    windows = {f for f in input.field_names if _window_origin(input, f) is not None}
    expressions = [e for _, e in calc.projections if not isinstance(e, exp.Column)]
    if calc.condition is not None:
        expressions.insert(0, calc.condition)
    return next((e for e in expressions if any(c.name in windows for c in e.find_all(exp.Column))), None)


def check_session_windows(root: Node, source: SqlSource) -> None:
    """Refuse a SESSION window table function that no window aggregate consumes (through Calcs): its rows' windows
    are known only when their session closes, which only the session window aggregate decides here.

    Raises:
        UnsupportedPlanError: naming the SESSION call.
    """
    consumed = set()
    for node in walk(root):
        if isinstance(node, WindowAggregate):
            below = node.inputs[0]
            while isinstance(below, Calc):
                computed = _computes_on_window_columns(below)
                if computed is not None and node.window.kind == "SESSION":
                    # The rows carry their own window [t, t + gap) until the aggregate merges them into sessions.
                    raise error(
                        UnsupportedPlanError,
                        source,
                        computed,
                        f"'{computed.sql(Flink)}' reads the window columns of a SESSION window table function "
                        "before its window aggregate; only the aggregate knows a row's session",
                        "window-functions",
                    )
                below = below.inputs[0]
            consumed.add(id(below))
    for node in walk(root):
        if isinstance(node, WindowTableFunctionNode) and node.window.kind == "SESSION" and id(node) not in consumed:
            raise error(
                UnsupportedPlanError,
                source,
                node.at,
                "a SESSION window table function is supported under a window aggregate (GROUP BY window_start, "
                "window_end and its partition keys) only",
                "window-functions",
            )


def _same_windows(a: WindowSpec, b: WindowSpec) -> bool:
    """Whether two window table functions assign the same windows (Flink compares their window specs, which leave
    out the time column)."""
    return (a.kind, a.size_ms, a.step_ms, a.offset_ms) == (b.kind, b.size_ms, b.step_ms, b.offset_ms)


def plan_window_join(
    planner: QueryPlanner,
    kind: str,
    left: Node,
    right: Node,
    pairs: list[tuple[str, str]],
    rest: list[exp.Expr],
    original: dict[str, str],
    at: exp.Expr,
) -> WindowJoin | None:
    """A ``WindowJoin`` when the equi ``pairs`` (left field, right output field; ``original`` maps the latter to the
    right input's names) equate both sides' ``window_start`` and both sides' ``window_end`` of window table functions
    with the same windows, else ``None`` (a regular join then, as Flink's ``WindowJoinUtil.satisfyWindowJoin``
    decides: other windows on the two sides, or only one of the two equalities, plan a regular join).

    Raises:
        UnsupportedPlanError: an input that is not insert-only (Flink: the window join does not consume updates).
    """
    roles: dict[str, tuple[str, str]] = {}
    tvfs: list[tuple[WindowTableFunctionNode, WindowTableFunctionNode]] = []
    keys: list[tuple[str, str]] = []
    for l, r in pairs:
        lo, ro = _window_origin(left, l), _window_origin(right, original[r])
        if lo is not None and ro is not None and lo[1] == ro[1] and lo[1] in ("window_start", "window_end"):
            roles.setdefault(lo[1], (l, original[r]))
            tvfs.append((lo[0], ro[0]))
        else:
            keys.append((l, r))
    if set(roles) != {"window_start", "window_end"}:
        return None
    if any(a is not tvfs[0][0] or b is not tvfs[0][1] for a, b in tvfs):
        return None
    if not _same_windows(tvfs[0][0].window, tvfs[0][1].window):
        return None
    if tvfs[0][0].window.kind == "SESSION":
        raise planner.error(
            UnsupportedPlanError, at, "a window join of SESSION window table functions is not supported", "window-join"
        )
    for node in (left, right):
        if not node.is_insert_only:
            raise planner.error(
                UnsupportedPlanError,
                at,
                f"StreamPhysicalWindowJoin doesn't support consuming update and delete changes which is produced by "
                f"{planner.producer_name(node)}",
                "window-join",
            )
    return WindowJoin(
        kind,
        left,
        right,
        [l for l, _ in keys],
        [original[r] for _, r in keys],
        tvfs[0][0].window,
        (roles["window_start"][0], roles["window_end"][0]),
        (roles["window_start"][1], roles["window_end"][1]),
        and_all(rest),
    )


#: Flink's legacy group window functions, their arguments after the time column, and their window table function.
_GROUP_WINDOWS = {"TUMBLE": ("SIZE",), "HOP": ("SLIDE", "SIZE"), "SESSION": ("GAP",)}
#: The auxiliary functions of a group window and the window column each reads.
_AUXILIARY = {"_START": "window_start", "_END": "window_end", "_ROWTIME": "window_time"}


def group_window_auxiliaries(e: exp.Expr) -> list[exp.Anonymous]:
    """The group window auxiliary calls in ``e`` (``TUMBLE_START(…)``, ``HOP_END(…)``, …)."""
    return [
        a
        for a in e.find_all(exp.Anonymous)
        if "_" in a.name and a.name.upper().split("_")[0] in ("TUMBLE", "HOP", "SESSION")
    ]


def _group_window_call(e: exp.Expr) -> exp.Anonymous | None:
    if isinstance(e, exp.Anonymous) and e.name.upper() in ("TUMBLE", "HOP", "SESSION", "CUMULATE"):
        return e
    return None


def rewrite_group_window(
    planner: QueryPlanner,
    relation: Relation,
    items: list[tuple[str | None, exp.Expr]],
    group_exprs: list[exp.Expr],
    having: exp.Expr | None,
) -> tuple[Relation, list[tuple[str | None, exp.Expr]], list[exp.Expr], exp.Expr | None]:
    """Flink's legacy group windows, ``GROUP BY TUMBLE(ts, INTERVAL …)`` / ``HOP(ts, slide, size)`` / ``SESSION(ts,
    gap)`` with ``TUMBLE_START``, ``TUMBLE_END`` and ``TUMBLE_ROWTIME`` (``HOP_*``, ``SESSION_*``) in the select list,
    as the window table
    function they mean: the relation gets the window's columns, the group window becomes ``window_start,
    window_end`` and each auxiliary call that window's column (named as Flink names the call). Without a group
    window everything is returned unchanged.

    Raises:
        ValidationError: a second group window, an auxiliary call whose arguments differ from the group
            window's, an auxiliary call without a group window.
        UnsupportedPlanError: ``*_PROCTIME``, a ``SESSION`` group window grouped by an expression.
    """
    from streamjoin.planner.rules.project import output_names

    calls = [g for g in group_exprs if _group_window_call(g) is not None]
    auxiliary = [a for _, e in items for a in group_window_auxiliaries(e)]
    if not calls:
        if auxiliary:
            raise planner.error(
                ValidationError,
                auxiliary[0],
                f"{auxiliary[0].name} needs a GROUP BY {auxiliary[0].name.split('_')[0]}(…)",
                "window-functions",
            )
        return relation, items, group_exprs, having
    call = calls[0]
    kind = call.name.upper()
    if len(calls) > 1:
        raise planner.error(ValidationError, calls[1], "a GROUP BY takes one group window", "window-functions")
    if kind not in _GROUP_WINDOWS:
        raise planner.error(UnsupportedPlanError, call, f"the {kind} group window is not supported", "window-functions")
    parameters = _GROUP_WINDOWS[kind]
    if len(call.expressions) != 1 + len(parameters):
        raise planner.error(
            ValidationError,
            call,
            f"{kind}(time_attr, {', '.join(p.lower() for p in parameters)}) takes {1 + len(parameters)} arguments",
            "window-functions",
        )
    descriptor = Descriptor(expressions=[call.expressions[0]])
    args: dict[str, exp.Expr] = dict(zip(parameters, call.expressions[1:]))
    partition_by: tuple[str, ...] = ()
    if kind == "SESSION":
        # A legacy session window forms its sessions per grouping key: the keys are its partition keys.
        scope = relation.scope(planner.source, None)
        keys = [g for g in group_exprs if g is not call]
        plain = [g for g in keys if isinstance(g, exp.Column)]
        if len(plain) != len(keys):
            raise planner.error(
                UnsupportedPlanError,
                next(g for g in keys if not isinstance(g, exp.Column)),
                "a SESSION group window groups by columns only",
                "window-functions",
            )
        partition_by = tuple(resolve(g, scope).name for g in plain)
    windowed = _windowed(planner, kind, args, relation, descriptor, call, None, partition_by, group_window=True)
    signature = [a.sql(Flink) for a in call.expressions]
    names = output_names(items)

    def auxiliary_column(n: exp.Expr) -> exp.Expr:
        if not isinstance(n, exp.Anonymous) or "_" not in n.name:
            return n
        prefix, _, suffix = n.name.upper().partition("_")
        if prefix not in ("TUMBLE", "HOP", "SESSION"):
            return n
        if f"_{suffix}" not in _AUXILIARY:
            raise planner.error(UnsupportedPlanError, n, f"{n.name.upper()} is not supported", "window-functions")
        if prefix != kind or [a.sql(Flink) for a in n.expressions] != signature:
            raise planner.error(
                ValidationError,
                n,
                f"{n.sql(Flink)} does not match the group window {call.sql(Flink)}",
                "window-functions",
            )
        return exp.column(_AUXILIARY[f"_{suffix}"])

    rewritten = []
    for (alias, e), name in zip(items, names):
        new = e.transform(auxiliary_column)
        rewritten.append((alias or (name if new is not e else None), new))
    groups: list[exp.Expr] = []
    for g in group_exprs:
        groups += [exp.column("window_start"), exp.column("window_end")] if g is call else [g]
    if any(n.name.upper() == "window_time".upper() for _, e in rewritten for n in e.find_all(exp.Column)):
        groups.append(exp.column("window_time"))
    return windowed, rewritten, groups, having.transform(auxiliary_column) if having is not None else None
