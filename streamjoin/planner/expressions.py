"""Name resolution, type checking and Spark SQL compilation of scalar expressions.

The planner never evaluates an expression itself: projections, filters and
join predicates are handed to Spark as Spark SQL text (sqlglot transpiles the
Flink expression to the ``spark`` dialect, :func:`spark_sql`, for ``F.expr``).
What happens here is what Flink's validator does before that:

- :class:`Scope` resolves ``t.col`` / ``col`` against the tables of a FROM
  clause (case-sensitive, as Flink), raising on unknown or ambiguous names;
- :func:`resolve` rewrites an expression so every column names a plan field;
- :class:`Typer` infers Flink types and refuses comparisons and boolean
  operators over incompatible types (``INT = STRING``), as Calcite does.

Where Flink's and Spark's semantics of an operator differ, :func:`spark_sql`
writes the Flink meaning: ``INT / INT`` is an integer division in Flink
(``a DIV b`` in Spark), ``PROCTIME()`` is the micro-batch's timestamp,
``TIMESTAMPDIFF`` counts Flink's whole units (:func:`timestampdiff_spark`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import sqlglot
from sqlglot import exp

from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner.diagnostics import SqlSource, error
from streamjoin.planner.dialect import Flink, timestampdiff_unit
from streamjoin.planner.types import SqlType, common_type, sql_type

__all__ = [
    "TIMESTAMPDIFF_UNITS",
    "Scope",
    "ScopeColumn",
    "Typer",
    "and_all",
    "columns_of",
    "conjuncts",
    "flink_functions",
    "resolve",
    "spark_sql",
    "timestampdiff_spark",
]

#: Aggregate functions (their sqlglot classes), as Flink names them.
AGGREGATES: dict[type[exp.Expr], str] = {
    exp.Count: "COUNT",
    exp.Sum: "SUM",
    exp.Avg: "AVG",
    exp.Min: "MIN",
    exp.Max: "MAX",
    exp.FirstValue: "FIRST_VALUE",
    exp.LastValue: "LAST_VALUE",
}

_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)
_STRING = SqlType("VARCHAR", 2147483647)
_BOOLEAN = SqlType("BOOLEAN")
_INTERVAL = "INTERVAL"

#: The units of ``TIMESTAMPDIFF`` planned here (Flink also reads MICROSECOND, NANOSECOND, DECADE, …).
TIMESTAMPDIFF_UNITS = ("SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR", "MILLISECOND")
_TIMESTAMPDIFF_OTHER_UNITS = ("MICROSECOND", "NANOSECOND", "FRAC_SECOND", "DECADE", "CENTURY", "MILLENNIUM")
_TIMESTAMPDIFF_SHAPE = "TIMESTAMPDIFF(timepointunit, timepoint1, timepoint2)"


@dataclass(frozen=True)
class ScopeColumn:
    """A column visible in a FROM clause: ``qualifier.name`` (qualifier = table alias) bound to plan field ``field``."""

    qualifier: str | None
    name: str
    field: str
    type: SqlType | None


class Scope:
    """The columns a query block can name, with an optional outer scope (correlated subqueries).

    Args:
        columns: visible columns, in FROM-clause order.
        source: the SQL text, for error locations.
        outer: the enclosing query's scope, searched after this one.
    """

    def __init__(self, columns: list[ScopeColumn], source: SqlSource, outer: Scope | None = None):
        self.columns = columns
        self.source = source
        self.outer = outer

    def qualifiers(self) -> list[str]:
        """The table aliases in this scope, in order."""
        return list(dict.fromkeys(c.qualifier for c in self.columns if c.qualifier))

    def lookup(self, column: exp.Column) -> tuple[ScopeColumn, bool] | None:
        """``(column, is_outer)`` for ``column``, or ``None`` when neither this nor the outer scope has it.

        Raises:
            ValidationError: for an ambiguous unqualified name.
        """
        name, qualifier = column.name, column.table or None
        matches = [c for c in self.columns if c.name == name and (qualifier is None or c.qualifier == qualifier)]
        if len(matches) > 1:
            tables = ", ".join(sorted({m.qualifier or "?" for m in matches}))
            raise error(
                ValidationError,
                self.source,
                column,
                f"column '{name}' is ambiguous: it is in {tables}",
                "column-unambiguous",
            )
        if matches:
            return matches[0], False
        if self.outer is not None:
            found = self.outer.lookup(column)
            if found is not None:
                return found[0], True
        return None

    def resolve(self, column: exp.Column) -> tuple[ScopeColumn, bool]:
        """Like :meth:`lookup` but raising when the column does not exist.

        Raises:
            ValidationError: naming the unknown table alias or column and what is in scope.
        """
        found = self.lookup(column)
        if found is not None:
            return found
        qualifier = column.table or None
        scopes = [self]
        while scopes[-1].outer is not None:
            scopes.append(scopes[-1].outer)
        if qualifier is not None and not any(qualifier in s.qualifiers() for s in scopes):
            known = ", ".join(q for s in scopes for q in s.qualifiers()) or "none"
            raise error(
                ValidationError,
                self.source,
                column,
                f"unknown table or alias '{qualifier}' in '{column.sql(Flink)}'; tables in scope: {known}",
                "table-exists",
            )
        visible = [c for s in scopes for c in s.columns if qualifier is None or c.qualifier == qualifier]
        where = f"table '{qualifier}'" if qualifier else "the FROM clause"
        names = ", ".join(dict.fromkeys(c.name for c in visible)) or "none"
        raise error(
            ValidationError,
            self.source,
            column,
            f"unknown column '{column.name}' in {where}; columns: {names}",
            "column-exists",
        )


def conjuncts(condition: exp.Expr | None) -> list[exp.Expr]:
    """The AND-ed parts of ``condition`` (parentheses removed)."""
    if condition is None:
        return []
    condition = condition.unnest()
    if isinstance(condition, exp.And):
        return conjuncts(condition.this) + conjuncts(condition.expression)
    return [condition]


def and_all(parts: list[exp.Expr]) -> exp.Expr | None:
    """``p1 AND p2 AND …``, or ``None`` for no parts."""
    return exp.and_(*parts, copy=False) if parts else None


def columns_of(expression: exp.Expr) -> list[exp.Column]:
    """The column references in ``expression``, not descending into subqueries inside it."""
    found, stack = [], [expression]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Column):
            found.append(node)
        elif node is expression or not isinstance(node, (exp.Subquery, exp.Exists, exp.Select)):
            stack.extend(reversed(list(node.iter_expressions())))
    return found


def field_column(name: str, like: exp.Expr | None = None) -> exp.Column:
    """A column naming plan field ``name``, keeping ``like``'s position for error messages."""
    column = exp.column(name, quoted=True)
    if like is not None:
        metas = [n._meta for n in like.walk() if n._meta and "line" in n._meta]
        if metas:
            column.this.meta.update(
                min(metas, key=lambda m: (m["line"], m["col"] - (m.get("end", 0) - m.get("start", 0))))
            )
    return column


def resolve(expression: exp.Expr, scope: Scope, *, allow_outer: bool = False) -> exp.Expr:
    """A copy of ``expression`` whose columns name plan fields of ``scope``.

    Raises:
        ValidationError: for unknown/ambiguous columns, or a correlated (outer) column
            where the query cannot use one.
        UnsupportedPlanError: for a subquery inside the expression.
    """

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, (exp.Subquery, exp.Exists, exp.Select)):
            raise error(
                UnsupportedPlanError,
                scope.source,
                node,
                "subqueries are supported only as IN / EXISTS conditions AND-ed into a WHERE clause, and in FROM",
                "supported-queries",
            )
        if isinstance(node, (exp.TimestampDiff, exp.Anonymous)):
            _check_timestampdiff(node, scope.source)
        if isinstance(node, (exp.Anonymous, exp.StrToMap, exp.SimilarTo)):
            _check_function(node, scope.source)
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            column, outer = scope.resolve(node)
            if outer and not allow_outer:
                raise error(
                    ValidationError,
                    scope.source,
                    node,
                    f"column '{node.sql(Flink)}' of the outer query is used "
                    "where only IN/EXISTS subquery conditions may use it",
                    "correlation",
                )
            return field_column(column.field, node)
        return node

    return expression.copy().transform(replace, copy=False)


#: Flink built-in functions and operators that Spark has no counterpart of here (Spark would fail on them at run
#: time, or on their result): Flink's name → what stands in the way.
UNSUPPORTED_FUNCTIONS = {
    "CONVERT_TZ": "Spark has no CONVERT_TZ(string, from_tz, to_tz)",
    "CURRENT_WATERMARK": "the watermark is Spark's, per micro-batch, not a value a row can read",
    "STR_TO_MAP": "MAP types are not supported",
    "SIMILAR TO": "Spark has no SQL-standard regular expressions",
}


def _check_function(node: exp.Anonymous | exp.StrToMap | exp.SimilarTo, source: SqlSource) -> None:
    """Refuse a Flink built-in of :data:`UNSUPPORTED_FUNCTIONS` before anything runs (not inside Spark)."""
    name = {exp.StrToMap: "STR_TO_MAP", exp.SimilarTo: "SIMILAR TO"}.get(type(node)) or node.name.upper()
    if name in UNSUPPORTED_FUNCTIONS:
        raise error(
            UnsupportedPlanError,
            source,
            node,
            f"'{node.sql(Flink)}': Flink's built-in {name} is not supported ({UNSUPPORTED_FUNCTIONS[name]})",
            "supported-functions",
        )


def _check_timestampdiff(node: exp.TimestampDiff | exp.Anonymous, source: SqlSource) -> None:
    """Refuse a ``TIMESTAMPDIFF`` call Flink refuses (not a unit keyword and two time points), or whose unit is
    not planned here (:data:`TIMESTAMPDIFF_UNITS`)."""
    if isinstance(node, exp.Anonymous):
        if node.name.upper() == "TIMESTAMPDIFF":
            raise error(
                ValidationError,
                source,
                node,
                f"'{node.sql(Flink)}': the call is {_TIMESTAMPDIFF_SHAPE}, its first argument a time unit "
                f"({', '.join(TIMESTAMPDIFF_UNITS)})",
                "function-arguments",
            )
        return
    unit = timestampdiff_unit(node)
    if unit in TIMESTAMPDIFF_UNITS:
        return
    kind, what = (
        (UnsupportedPlanError, "is not supported")
        if unit in _TIMESTAMPDIFF_OTHER_UNITS
        else (ValidationError, "is not a time unit")
    )
    raise error(
        kind,
        source,
        node,
        f"'{node.sql(Flink)}': {unit} {what} in {_TIMESTAMPDIFF_SHAPE}; units: {', '.join(TIMESTAMPDIFF_UNITS)}",
        "supported-functions" if kind is UnsupportedPlanError else "function-arguments",
    )


class Typer:
    """Infers Flink types of resolved expressions over plan fields and checks operand types.

    Args:
        types: field name → type (``None`` when only Spark knows it).
        source: the SQL text, for error locations.
    """

    def __init__(self, types: dict[str, SqlType | None], source: SqlSource):
        self.types = types
        self.source = source

    def _mismatch(self, node: exp.Expr, left: SqlType | None, right: SqlType | None) -> ValidationError:
        return error(
            ValidationError,
            self.source,
            node,
            f"type mismatch in '{node.sql(Flink)}': cannot compare {left} with {right}",
            "type-mismatch",
        )

    def check_boolean(self, node: exp.Expr, what: str) -> None:
        """Raise unless ``node`` is a BOOLEAN (or of unknown type).

        Raises:
            ValidationError: naming ``what`` (``WHERE``, ``ON``...) and the type found.
        """
        t = self.type_of(node)
        if t is not None and t.family not in ("boolean", "null"):
            raise error(
                ValidationError,
                self.source,
                node,
                f"{what} condition '{node.sql(Flink)}' is {t}, not BOOLEAN",
                "type-mismatch",
            )

    def type_of(self, node: exp.Expr) -> SqlType | None:
        """The Flink type of ``node`` (time attributes kept on plain column references), ``None`` if unknown.

        Raises:
            ValidationError: for comparisons or boolean operators over incompatible types.
        """
        if isinstance(node, exp.Paren):
            return self.type_of(node.this)
        if isinstance(node, exp.Column):
            return self.types.get(node.name)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return _STRING.with_nullable(False)
            text = node.name
            if "e" in text.lower():
                return SqlType("DOUBLE", nullable=False)
            if "." in text:
                digits = text.replace("-", "").replace(".", "").lstrip("0") or "0"
                scale = len(text.split(".")[1])
                return SqlType("DECIMAL", max(len(digits), scale, 1), scale, nullable=False)
            return SqlType("INT" if -(2**31) <= int(text) < 2**31 else "BIGINT", nullable=False)
        if isinstance(node, exp.Boolean):
            return _BOOLEAN.with_nullable(False)
        if isinstance(node, exp.Null):
            return SqlType("NULL")
        if isinstance(node, exp.Interval):
            return None
        if isinstance(node, (exp.Cast, exp.TryCast)):
            self.type_of(node.this)
            try:
                return sql_type(node.to)
            except ValidationError as e:
                raise error(ValidationError, self.source, node, str(e), "cast-type") from None
        if isinstance(node, _COMPARISONS):
            self._compare(node, node.this, node.expression)
            return _BOOLEAN
        if isinstance(node, exp.Between):
            self._compare(node, node.this, node.args["low"])
            self._compare(node, node.this, node.args["high"])
            return _BOOLEAN
        if isinstance(node, exp.In):
            for item in node.expressions:
                self._compare(node, node.this, item)
            return _BOOLEAN
        if isinstance(node, (exp.And, exp.Or, exp.Not)):
            for operand in (node.this, node.args.get("expression")):
                if operand is not None:
                    self.check_boolean(operand, type(node).__name__.upper())
            return _BOOLEAN
        if isinstance(node, (exp.Is, exp.Exists)):
            return _BOOLEAN.with_nullable(False)
        if isinstance(node, (exp.Like, exp.ILike)):
            for operand in (node.this, node.expression):
                t = self.type_of(operand)
                if t is not None and t.family not in ("string", "null"):
                    raise error(
                        ValidationError,
                        self.source,
                        node,
                        f"LIKE needs strings; '{operand.sql(Flink)}' is {t}",
                        "type-mismatch",
                    )
            return _BOOLEAN
        if isinstance(node, exp.Neg):
            return self._plain(self.type_of(node.this))
        if isinstance(node, _ARITHMETIC):
            return self._arithmetic(node)
        if isinstance(node, exp.DPipe):
            return _STRING
        if isinstance(node, (exp.Upper, exp.Lower, exp.Trim, exp.Substring, exp.Concat)):
            return _STRING
        if isinstance(node, exp.RegexpExtract):
            for operand in node.iter_expressions():
                self.type_of(operand)
            return _STRING.with_nullable(True)
        if isinstance(node, exp.Length):
            return SqlType("INT")
        if isinstance(node, (exp.Abs, exp.Floor, exp.Ceil, exp.Round)):
            return self._plain(self.type_of(node.this))
        if isinstance(node, (exp.Coalesce, exp.If, exp.Case)):
            return self._branches(node)
        if isinstance(node, exp.CurrentTimestamp):
            return SqlType("TIMESTAMP_LTZ", 3, nullable=False)
        if isinstance(node, exp.TimestampDiff):
            return self._timestampdiff(node)
        if isinstance(node, exp.Anonymous) and node.name.upper() == "PROCTIME" and not node.expressions:
            return SqlType("TIMESTAMP_LTZ", 3, nullable=False, time_attribute="PROCTIME")
        if isinstance(node, exp.Anonymous) and node.name.upper() == "TO_TIMESTAMP":
            return SqlType("TIMESTAMP", 3)
        if isinstance(node, exp.Anonymous) and node.name.upper() == "TO_TIMESTAMP_LTZ":
            return SqlType("TIMESTAMP_LTZ", 3)
        for child in node.iter_expressions():
            self.type_of(child)
        return None

    def _timestampdiff(self, node: exp.TimestampDiff) -> SqlType:
        # Flink: TIMESTAMPDIFF(<ANY>, <DATETIME>, <DATETIME>) is an INT, nullable when a time point is.
        nullable = False
        for operand in (node.expression, node.this):
            t = self.type_of(operand)
            if t is not None and t.family not in ("date", "timestamp", "null"):
                raise error(
                    ValidationError,
                    self.source,
                    node,
                    f"TIMESTAMPDIFF needs a DATE or TIMESTAMP; '{operand.sql(Flink)}' is {t}",
                    "type-mismatch",
                )
            nullable = nullable or t is None or t.nullable
        return SqlType("INT", nullable=nullable)

    @staticmethod
    def _plain(t: SqlType | None) -> SqlType | None:
        return t.plain() if t is not None else None

    def _compare(self, node: exp.Expr, left: exp.Expr, right: exp.Expr) -> None:
        lt, rt = self.type_of(left), self.type_of(right)
        if lt is not None and rt is not None and common_type(lt, rt) is None:
            raise self._mismatch(node, lt, rt)

    def _arithmetic(self, node: exp.Expr) -> SqlType | None:
        lt, rt = self.type_of(node.this), self.type_of(node.expression)
        if isinstance(node.expression, exp.Interval) and isinstance(node, (exp.Add, exp.Sub)):
            return self._plain(lt)
        if isinstance(node.this, exp.Interval) and isinstance(node, exp.Add):
            return self._plain(rt)
        if lt is None or rt is None:
            return None
        for t in (lt, rt):
            if t.family not in ("numeric", "null"):
                raise error(
                    ValidationError,
                    self.source,
                    node,
                    f"type mismatch in '{node.sql(Flink)}': arithmetic needs numbers, got {lt} and {rt}",
                    "type-mismatch",
                )
        common = common_type(lt, rt)
        if common is None or common.root != "DECIMAL" or lt.root != rt.root:
            return common
        (left_precision, left_scale), (right_precision, right_scale) = lt.decimal_digits, rt.decimal_digits
        if isinstance(node, exp.Mul):
            return SqlType("DECIMAL", min(38, left_precision + right_precision), min(38, left_scale + right_scale))
        if isinstance(node, exp.Div):
            scale = max(6, left_scale + right_precision + 1)
            return SqlType("DECIMAL", min(38, left_precision - left_scale + right_scale + scale), min(scale, 38))
        return common

    def _branches(self, node: exp.Expr) -> SqlType | None:
        if isinstance(node, exp.Case):
            values = [i.args["true"] for i in node.args.get("ifs") or []] + (
                [node.args["default"]] if node.args.get("default") else []
            )
            for i in node.args.get("ifs") or []:
                self.check_boolean(i.this, "CASE WHEN")
        elif isinstance(node, exp.If):
            self.check_boolean(node.this, "IF")
            values = [node.args["true"]] + ([node.args["false"]] if node.args.get("false") else [])
        else:
            values = [node.this, *node.expressions]
        result: SqlType | None = SqlType("NULL")
        for value in values:
            t = self.type_of(value)
            if t is None or result is None:
                result = None
                continue
            widened = common_type(result, t)
            if widened is None:
                raise self._mismatch(node, result, t)
            result = widened
        return result


def spark_sql(expression: exp.Expr, typer: Typer) -> str:
    """Spark SQL text for a resolved expression (columns are plan fields), with Flink's meaning.

    - ``a / b`` of two integral types is Flink's integer division (``CAST(a DIV b AS <type>)``);
    - ``PROCTIME()`` is ``CURRENT_TIMESTAMP()`` (the micro-batch's timestamp);
    - ``TO_TIMESTAMP_LTZ(epoch, 3)`` / ``(epoch, 0)`` are ``TIMESTAMP_MILLIS`` / ``TIMESTAMP_SECONDS``;
    - ``TIMESTAMPDIFF(unit, t1, t2)`` counts Flink's whole units (:func:`timestampdiff_spark`);
    - ``REGEXP_EXTRACT(s, regex[, group])`` is Flink's (:func:`regexp_extract_spark`);
    - everything else is sqlglot's transpilation to the ``spark`` dialect.

    Operands are rewritten before the operator that contains them (``i / 2 / 3`` divides as integers twice).

    Example:
        >>> spark_sql(sqlglot.parse_one("`a` / 2", read=Flink), Typer({"a": SqlType("INT")}, src))  # doctest: +SKIP
        'CAST(`a` DIV 2 AS INT)'
    """

    tree = expression.copy()
    # The operands' Flink types, taken before the operands are rewritten into Spark's spelling.
    division_types = {
        id(n): (typer.type_of(n.this), typer.type_of(n.expression)) for n in tree.walk() if isinstance(n, exp.Div)
    }

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Div):
            lt, rt = division_types[id(node)]
            if lt is not None and rt is not None and lt.is_integral and rt.is_integral:
                result = common_type(lt, rt)
                assert result is not None  # two integral types widen to one
                return exp.cast(exp.IntDiv(this=node.this, expression=node.expression), result.root)
        return flink_functions(node)

    return _bottom_up(tree, rewrite).sql(dialect="spark")


def _bottom_up(expression: exp.Expr, fun) -> exp.Expr:
    """``expression`` with ``fun`` applied to every node after its operands (sqlglot's ``transform`` goes
    top-down and does not descend into what it replaced), in place."""
    root = expression
    for node in reversed(list(expression.walk(bfs=False))):
        new = fun(node)
        if new is not node:
            if node is root:
                root = new
            else:
                node.replace(new)
    return root


def flink_functions(node: exp.Expr) -> exp.Expr:
    """A sqlglot transform giving Flink's functions their Spark spelling: ``PROCTIME()`` is the query's
    ``CURRENT_TIMESTAMP()``, ``TO_TIMESTAMP_LTZ(epoch, 3|0)`` is ``TIMESTAMP_MILLIS`` / ``TIMESTAMP_SECONDS``,
    ``TIMESTAMPDIFF`` is :func:`timestampdiff_spark` (its operands transformed first, for a top-down
    ``transform``)."""
    if isinstance(node, exp.Anonymous) and node.name.upper() == "PROCTIME" and not node.expressions:
        return exp.CurrentTimestamp()
    if isinstance(node, exp.Anonymous) and node.name.upper() == "TO_TIMESTAMP_LTZ" and len(node.expressions) == 2:
        unit = {"3": "TIMESTAMP_MILLIS", "0": "TIMESTAMP_SECONDS"}.get(node.expressions[1].name)
        if unit:
            return exp.Anonymous(this=unit, expressions=[node.expressions[0]])
    if isinstance(node, exp.TimestampDiff):
        return timestampdiff_spark(
            timestampdiff_unit(node), node.expression.transform(flink_functions), node.this.transform(flink_functions)
        )
    if isinstance(node, exp.RegexpExtract):
        return regexp_extract_spark(
            node.this.transform(flink_functions),
            node.expression.transform(flink_functions),
            node.args["group"].transform(flink_functions),
        )
    return node


def regexp_extract_spark(string: exp.Expr, regex: exp.Expr, group: exp.Expr) -> exp.Expr:
    """Flink's ``REGEXP_EXTRACT`` (``SqlFunctionUtils.regexpExtract``) in Spark: the group of the first match
    (``find``, as Spark's ``RLIKE`` and ``regexp_extract``), NULL when the regex finds no match (Spark's
    ``regexp_extract`` gives ``''``), and NULL when a literal group index is negative or past the regex's groups
    (Flink swallows the error into NULL; Spark fails the query). One difference stays: a group that took no part
    in the match is ``''`` in Spark where Flink gives NULL (``(a)|(b)``, group 2, on ``'a'``)."""
    negative = isinstance(group, exp.Neg)
    literal = group.this if negative else group
    if isinstance(literal, exp.Literal) and not literal.is_string:
        index = -int(literal.name) if negative else int(literal.name)
        groups = None
        if isinstance(regex, exp.Literal) and regex.is_string:
            try:
                groups = re.compile(regex.name).groups
            except re.error:
                pass  # a Java-only construct: Spark counts the groups
        if index < 0 or (groups is not None and index > groups):
            return exp.cast(exp.null(), "STRING")
    found = exp.RegexpLike(this=string.copy(), expression=regex.copy())
    extracted = exp.RegexpExtract(this=string, expression=regex, group=group)
    return exp.Case(ifs=[exp.If(this=found, true=extracted)])


# Flink reads the time points as milliseconds (TimestampData.getMillisecond: sub-millisecond digits dropped).
_MS = "UNIX_MILLIS(CAST({t} AS TIMESTAMP))"
_MS_DIFF = f"({_MS.format(t=':t2')} - {_MS.format(t=':t1')})"
# Java's (int) of a long: the low 32 bits, as Flink casts the BIGINT count to INT.
_INT = "CAST(PMOD({x} + 2147483648, 4294967296) - 2147483648 AS INT)"
_SECONDS = _INT.format(x=f"{_MS_DIFF} DIV 1000")
_DAY_TIME_MS = {"SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000}
_MONTH_DIVISOR = {"MONTH": 1, "QUARTER": 3, "YEAR": 12}


def _months() -> str:
    """Flink's months from ``:t1`` to ``:t2`` (``DateTimeUtils.subtractMonths(t2, t1)``): on the dates, the
    most months ``m`` with ``t1 + m months`` (the day clamped to the month's end) not past ``t2``'s date
    (from ``t2`` when ``t2`` is earlier, negated); one less when that lands on ``t2``'s date and ``t2``'s
    time of day is earlier than ``t1``'s (in either direction: ``2020-01-01 00:00:59`` to ``2020-01-01
    00:00:00`` is -1 month in Flink)."""
    d2, d1 = "CAST(:t2 AS DATE)", "CAST(:t1 AS DATE)"
    k = f"((YEAR({d2}) * 12 + MONTH({d2})) - (YEAR({d1}) * 12 + MONTH({d1})))"
    m = (
        f"(CASE WHEN {d2} >= {d1} THEN {k} - IF(LEAST(DAY({d1}), DAY(LAST_DAY({d2}))) > DAY({d2}), 1, 0) "
        f"ELSE {k} + IF(LEAST(DAY({d2}), DAY(LAST_DAY({d1}))) > DAY({d1}), 1, 0) END)"
    )
    day_ms = "PMOD({ms}, 86400000)"
    earlier = f"{day_ms.format(ms=_MS.format(t=':t2'))} < {day_ms.format(ms=_MS.format(t=':t1'))}"
    return f"({m} - IF(ADD_MONTHS({d1}, {m}) = {d2} AND {earlier}, 1, 0))"


def timestampdiff_spark(unit: str | None, t1: exp.Expr, t2: exp.Expr) -> exp.Expr:
    """A Spark expression for Flink's ``TIMESTAMPDIFF(unit, t1, t2)`` over Spark-spelled time points (an INT).

    What Flink 2.3 computes (Calcite's ``TimestampDiffConvertlet``: ``CAST((t2 - t1) unit AS INT)``), pinned by
    ``tests/data/flink-diff/cases/timestampdiff_units.json``:

    - SECOND, MINUTE, HOUR, DAY: the milliseconds from ``t1`` to ``t2`` divided by the unit's, truncated
      toward zero, then the low 32 bits (past 68 years of seconds Flink's INT wraps);
    - WEEK: the seconds (as an INT) divided by 604800, truncated toward zero; MILLISECOND: the seconds
      (as an INT) times 1000, wrapped to an INT (Flink counts whole seconds there: 1.5 s is 1000);
    - MONTH: Flink's month count (:func:`_months`, not Spark's ``months_between`` or ``timestampdiff``);
      QUARTER and YEAR: the months divided by 3 and 12, truncated toward zero.

    Spark's own ``timestampdiff`` differs: it counts microseconds, returns a BIGINT and counts months
    symmetrically. Dates count from their midnight (UTC, the session time zone).

    Raises:
        UnsupportedPlanError: for a unit not in :data:`TIMESTAMPDIFF_UNITS`.
    """
    if unit in _DAY_TIME_MS:
        text = _INT.format(x=f"{_MS_DIFF} DIV {_DAY_TIME_MS[unit]}")
    elif unit == "WEEK":
        text = f"CAST({_SECONDS} DIV 604800 AS INT)"
    elif unit == "MILLISECOND":
        text = _INT.format(x=f"CAST({_SECONDS} AS BIGINT) * 1000")
    elif unit in _MONTH_DIVISOR:
        months = _months()
        text = (
            f"CAST({months} DIV {_MONTH_DIVISOR[unit]} AS INT)"
            if _MONTH_DIVISOR[unit] > 1
            else f"CAST({months} AS INT)"
        )
    else:
        raise UnsupportedPlanError(
            f"TIMESTAMPDIFF unit {unit} is not supported; units: {', '.join(TIMESTAMPDIFF_UNITS)}"
        )
    points = {"t1": t1, "t2": t2}
    return _spark_template(text).transform(lambda n: points[n.name].copy() if isinstance(n, exp.Placeholder) else n)


@cache
def _spark_template(text: str) -> exp.Expr:
    return sqlglot.parse_one(text, read="spark")
