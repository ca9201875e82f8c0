"""Flink SQL as a sqlglot dialect: the few tables Flink's syntax adds to sqlglot's base dialect.

Flink SQL (Calcite) is standard SQL with backtick identifiers, case-sensitive
names and a handful of streaming clauses. sqlglot's base parser already reads
most of it, including ``PRIMARY KEY (…) NOT ENFORCED`` (``KEY_CONSTRAINT_OPTIONS``),
computed columns (``pt AS PROCTIME()``), ``FOR SYSTEM_TIME AS OF`` (``VERSION_PHRASES``),
``WITH ('k' = 'v')`` table options, ``CREATE TEMPORARY VIEW`` and Flink's
interval literals (``INTERVAL '10' MINUTE``, ``INTERVAL '1 02:00' DAY TO MINUTE``).
What the dialect adds, as sqlglot's RisingWave dialect does, through tables
rather than methods:

- ``WATERMARK FOR ts AS ts - INTERVAL '5' SECOND`` as a schema constraint
  (``CONSTRAINT_PARSERS`` / ``SCHEMA_UNNAMED_CONSTRAINTS``);
- ``EXPLAIN [CHANGELOG_MODE, …] <statement>`` as an :class:`Explain` node;
- ``TIMESTAMPDIFF(timepointunit, timepoint1, timepoint2)`` with its first argument read as a time unit
  (a ``Var``, ``SQL_TSI_DAY`` spelled ``DAY``), not a column: a ``TimestampDiff`` whose ``this`` is
  ``timepoint2`` and ``expression`` ``timepoint1``, as sqlglot's MySQL dialect reads it;
- the window table functions ``TUMBLE``, ``HOP``, ``CUMULATE`` and ``SESSION`` with a table argument
  (``TABLE t [PARTITION BY k]``), a ``DESCRIPTOR(ts)`` and named arguments (``SIZE => …``) as a
  :class:`WindowTableFunction`; called without a table argument (``GROUP BY TUMBLE(ts, INTERVAL …)``, Flink's
  legacy group windows) they stay anonymous calls;
- ``CREATE TABLE … WITH (…) LIKE source (INCLUDING ALL OVERWRITING OPTIONS …)``: Flink's LIKE
  clause, a ``LikeProperty`` whose ``expressions`` are ``Property(this=strategy, value=feature)``
  (sqlglot reads the options of Postgres' form, without parentheses);
- the generator writes Flink's spellings back: ``STRING``, ``TIMESTAMP_LTZ``, ``PARTITIONED BY (…)``,
  ``FOR SYSTEM_TIME AS OF``, ``'key' = 'value'`` options, ``x NOT IN (…)``.

The pinned sqlglot (30.30.0, pure Python) is required: its internals move
between versions.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from sqlglot import exp, tokens
from sqlglot.dialects.dialect import Dialect, NormalizationStrategy
from sqlglot.generator import Generator
from sqlglot.parsers.base import BaseParser
from sqlglot.tokens import TokenType

from streamjoin.errors import ValidationError

__all__ = [
    "EXPLAIN_DETAILS",
    "WINDOW_TVF_PARAMETERS",
    "Descriptor",
    "Explain",
    "Flink",
    "TableArgument",
    "WindowTableFunction",
    "interval_ms",
    "timestampdiff_unit",
]

#: The ``EXPLAIN`` details Flink accepts (``ExplainDetail``).
EXPLAIN_DETAILS = ("CHANGELOG_MODE", "ESTIMATED_COST", "JSON_EXECUTION_PLAN", "PLAN_ADVICE")

_UNIT_MS = {"DAY": 86_400_000, "HOUR": 3_600_000, "MINUTE": 60_000, "SECOND": 1_000}


def _build_timestampdiff(args: list) -> exp.Expr:
    """Flink's ``TIMESTAMPDIFF(timepointunit, timepoint1, timepoint2)``: the unit is a keyword (Calcite's
    ``TimeUnit``), not a column. A call of another shape (a quoted or string unit, two or four arguments)
    stays an anonymous ``TIMESTAMPDIFF(…)`` for the planner to refuse with its location."""
    unit = args[0] if args else None
    plain = isinstance(unit, exp.Var) or (isinstance(unit, exp.Column) and not unit.table and not unit.this.quoted)
    if len(args) != 3 or not plain:
        return exp.Anonymous(this="TIMESTAMPDIFF", expressions=list(args))
    assert unit is not None  # plain
    return exp.TimestampDiff(this=args[2], expression=args[1], unit=exp.var(unit.name.upper()))


def _build_regexp_extract(args: list) -> exp.Expr:
    """Flink's ``REGEXP_EXTRACT(string, regex[, extractIndex])``: the third argument is the group (sqlglot's base
    parser reads it as a position, which its Spark generator drops), and without it the group is 0, the whole
    match (``SqlFunctionUtils.regexpExtract(str, regex)`` calls it with 0; Spark's default group is 1). A call of
    another shape stays an anonymous ``REGEXP_EXTRACT(…)``."""
    if len(args) not in (2, 3):
        return exp.Anonymous(this="REGEXP_EXTRACT", expressions=list(args))
    group = args[2] if len(args) == 3 else exp.Literal.number(0)
    return exp.RegexpExtract(this=args[0], expression=args[1], group=group)


def timestampdiff_unit(node: exp.TimestampDiff) -> str | None:
    """The unit of a parsed ``TIMESTAMPDIFF`` (``SECOND``, ``MONTH``…; Calcite's ``SQL_TSI_X`` is ``X``), or
    ``None`` when it is not a unit keyword."""
    unit = node.args.get("unit")
    if not isinstance(unit, exp.Var):
        return None
    name = unit.name.upper()
    return name.removeprefix("SQL_TSI_")


class Explain(exp.Expression):
    """``EXPLAIN [detail, …] statement``: ``this`` is the statement, ``expressions`` the details (Var)."""

    arg_types = {"this": True, "expressions": False}


#: Flink's window table functions and their parameters in positional order (Flink's ``SqlTumbleTableFunction``,
#: ``SqlHopTableFunction``, ``SqlCumulateTableFunction``, ``SqlSessionTableFunction``).
WINDOW_TVF_PARAMETERS = {
    "TUMBLE": ("DATA", "TIMECOL", "SIZE", "OFFSET"),
    "HOP": ("DATA", "TIMECOL", "SLIDE", "SIZE", "OFFSET"),
    "CUMULATE": ("DATA", "TIMECOL", "STEP", "SIZE", "OFFSET"),
    "SESSION": ("DATA", "TIMECOL", "GAP"),
}


class TableArgument(exp.Expression):
    """A table argument of a table function, ``TABLE t [PARTITION BY k, …]``: ``this`` is the ``exp.Table``,
    ``partition_by`` its columns."""

    arg_types = {"this": True, "partition_by": False}


class Descriptor(exp.Expression):
    """``DESCRIPTOR(col, …)``: ``expressions`` are the columns."""

    arg_types = {"expressions": True}


class WindowTableFunction(exp.Expression):
    """``TUMBLE|HOP|CUMULATE|SESSION(TABLE t, DESCRIPTOR(ts), interval, …)``: ``this`` is the function's name
    (upper case), ``expressions`` its arguments as written, an ``exp.Kwarg`` (``SIZE => …``) when named; the table
    argument is a :class:`TableArgument`, the time column a :class:`Descriptor`."""

    arg_types = {"this": True, "expressions": True}


class FlinkParser(BaseParser):
    """sqlglot's base parser plus Flink's ``WATERMARK FOR`` constraint and ``EXPLAIN``."""

    CONSTRAINT_PARSERS = {
        **BaseParser.CONSTRAINT_PARSERS,
        "WATERMARK": lambda self: self.expression(
            exp.WatermarkColumnConstraint(
                this=self._match(TokenType.FOR) and self._parse_column(),
                expression=self._match(TokenType.ALIAS) and self._parse_disjunction(),
            )
        ),
    }

    SCHEMA_UNNAMED_CONSTRAINTS = {*BaseParser.SCHEMA_UNNAMED_CONSTRAINTS, "WATERMARK"}

    PROPERTY_PARSERS = {**BaseParser.PROPERTY_PARSERS, "LIKE": lambda self: self._parse_like_clause()}

    FUNCTIONS = {
        **BaseParser.FUNCTIONS,
        "TIMESTAMPDIFF": _build_timestampdiff,
        "REGEXP_EXTRACT": _build_regexp_extract,
    }

    FUNCTION_PARSERS = {
        **BaseParser.FUNCTION_PARSERS,
        **{name: (lambda self, name=name: self._parse_window_function(name)) for name in WINDOW_TVF_PARAMETERS},
    }

    # The tokenizer files EXPLAIN with DESCRIBE (Flink's DESCRIBE is not supported).
    STATEMENT_PARSERS = {
        **BaseParser.STATEMENT_PARSERS,
        TokenType.DESCRIBE: lambda self: self._parse_explain(),
    }

    def _parse_like_clause(self) -> exp.LikeProperty:
        table = self._parse_table_parts(schema=True)  # schema: 's (' opens the options, not a call
        options = []
        if self._match(TokenType.L_PAREN):
            while self._match_texts(("INCLUDING", "EXCLUDING", "OVERWRITING")):
                strategy = self._prev.text.upper()
                feature = self._parse_var(any_token=True)
                if feature is None:
                    self.raise_error(
                        f"expected a feature after {strategy} (ALL, CONSTRAINTS, GENERATED, OPTIONS, WATERMARKS, …)"
                    )
                assert feature is not None  # raise_error raises at the dialect's error level (IMMEDIATE)
                options.append(exp.Property(this=exp.var(strategy), value=exp.var(feature.name.upper())))
            self._match_r_paren()
        return self.expression(exp.LikeProperty(this=table, expressions=options))

    def _parse_window_function(self, name: str) -> exp.Expr:
        """After ``TUMBLE(``: a window table function when its first argument is a table (``TABLE t``) or named
        (``DATA => …``), else a legacy group window call (``TUMBLE(ts, INTERVAL '1' HOUR)``), anonymous."""
        first, second = self._curr, self._next
        named = second is not None and second.token_type == TokenType.FARROW
        if first is None or not (first.token_type == TokenType.TABLE or named):
            return self.expression(exp.Anonymous(this=name, expressions=self._parse_csv(self._parse_lambda)))
        return self.expression(WindowTableFunction(this=name, expressions=self._parse_csv(self._parse_window_argument)))

    def _parse_window_argument(self) -> exp.Expr | None:
        if self._curr is not None and self._next is not None and self._next.token_type == TokenType.FARROW:
            key = self._curr.text.upper()
            self._advance(2)
            value = self._parse_window_value()
            return self.expression(exp.Kwarg(this=exp.var(key), expression=value))
        return self._parse_window_value()

    def _parse_window_value(self) -> exp.Expr | None:
        if self._match(TokenType.TABLE):
            table = self._parse_table_parts()
            partition: list = []
            if self._match(TokenType.PARTITION_BY):
                # PARTITION BY k or PARTITION BY (k1, k2): a comma after one column starts the next argument.
                if self._match(TokenType.L_PAREN):
                    partition = self._parse_csv(self._parse_column)
                    self._match_r_paren()
                else:
                    partition = [self._parse_column()]
            return self.expression(TableArgument(this=table, partition_by=partition))
        opens = self._next is not None and self._next.token_type == TokenType.L_PAREN
        if self._curr is not None and self._curr.text.upper() == "DESCRIPTOR" and opens:
            self._advance(2)
            columns = self._parse_csv(self._parse_column)
            self._match_r_paren()
            return self.expression(Descriptor(expressions=columns))
        return self._parse_disjunction()

    def _parse_explain(self) -> Explain:
        if self._prev.text.upper() != "EXPLAIN":
            self.raise_error("DESCRIBE is not supported; use EXPLAIN")
        details = []
        if not self._match_text_seq("PLAN", "FOR"):
            while self._curr and self._curr.text.upper() in EXPLAIN_DETAILS:
                details.append(exp.var(self._curr.text.upper()))
                self._advance()
                if not self._match(TokenType.COMMA):
                    break
        return self.expression(Explain(this=self._parse_statement(), expressions=details))


class FlinkGenerator(Generator):
    """sqlglot's base generator writing Flink's spellings."""

    TYPE_MAPPING = {
        **Generator.TYPE_MAPPING,
        exp.DType.TEXT: "STRING",
        exp.DType.TIMESTAMPLTZ: "TIMESTAMP_LTZ",
    }

    # Flink writes PARTITIONED BY before WITH (…), LIKE after it.
    PROPERTIES_LOCATION = {
        **Generator.PROPERTIES_LOCATION,
        exp.LikeProperty: exp.Properties.Location.POST_EXPRESSION,
        exp.PartitionedByProperty: exp.Properties.Location.POST_SCHEMA,
    }

    TRANSFORMS = {
        **Generator.TRANSFORMS,
        Explain: lambda self, e: self.explain_sql(e),
        WindowTableFunction: lambda self, e: self.func(e.name, *e.expressions),
        Descriptor: lambda self, e: self.func("DESCRIPTOR", *e.expressions),
        TableArgument: lambda self, e: (
            f"TABLE {self.sql(e, 'this')}"
            + (
                f" PARTITION BY {self.expressions(e, key='partition_by', flat=True)}"
                if e.args.get("partition_by")
                else ""
            )
        ),
        exp.Kwarg: lambda self, e: f"{self.sql(e, 'this')} => {self.sql(e, 'expression')}",
        exp.PartitionedByProperty: lambda self, e: f"PARTITIONED BY {self.sql(e, 'this')}",
        exp.TimestampDiff: lambda self, e: self.func("TIMESTAMPDIFF", e.args.get("unit"), e.expression, e.this),
    }

    def version_sql(self, expression: exp.Version) -> str:
        if expression.name == "TIMESTAMP" and expression.text("kind") == "AS OF":
            return f"FOR SYSTEM_TIME AS OF {self.sql(expression, 'expression')}"
        return super().version_sql(expression)

    def property_sql(self, expression: exp.Property) -> str:
        if type(expression) is exp.Property and isinstance(expression.this, exp.Literal):
            return f"{self.sql(expression, 'this')} = {self.sql(expression, 'value')}"
        return super().property_sql(expression)

    def not_sql(self, expression: exp.Not) -> str:
        inner = expression.this
        if isinstance(inner, exp.In):
            return self.in_sql(inner).replace(" IN ", " NOT IN ", 1)
        return super().not_sql(expression)

    def likeproperty_sql(self, expression: exp.LikeProperty) -> str:
        options = " ".join(f"{o.name} {o.text('value')}" for o in expression.expressions)
        return f"LIKE {self.sql(expression, 'this')}" + (f" ({options})" if options else "")

    def explain_sql(self, expression: Explain) -> str:
        details = ", ".join(self.sql(d) for d in expression.expressions)
        return f"EXPLAIN {details + ' ' if details else 'PLAN FOR '}{self.sql(expression, 'this')}"


class Flink(Dialect):
    """Apache Flink SQL: backtick identifiers, case-sensitive names, ``''`` escapes in strings.

    Example:
        >>> import sqlglot
        >>> sql = "SELECT o.id FROM o JOIN r FOR SYSTEM_TIME AS OF o.t AS x ON o.k = x.k"
        >>> sqlglot.parse_one(sql, read=Flink).sql(Flink)
        'SELECT o.id FROM o JOIN r FOR SYSTEM_TIME AS OF o.t AS x ON o.k = x.k'
    """

    NORMALIZATION_STRATEGY = NormalizationStrategy.CASE_SENSITIVE

    class Tokenizer(tokens.Tokenizer):
        QUOTES = ["'"]
        IDENTIFIERS = ["`"]
        STRING_ESCAPES = ["'"]
        # EXPLAIN is a statement with a statement inside, not a command whose rest is one string.
        # SESSION is a window function's name in Flink (no ALTER/SET SESSION).
        KEYWORDS = {
            **{k: v for k, v in tokens.Tokenizer.KEYWORDS.items() if k != "SESSION"},
            "EXPLAIN": TokenType.DESCRIBE,
        }

    Parser = FlinkParser
    Generator = FlinkGenerator


def interval_ms(interval: exp.Expr) -> int:
    """The length of a Flink day-time interval literal in milliseconds.

    Accepts ``INTERVAL 'n' {DAY|HOUR|MINUTE|SECOND}`` (``n`` may be negative,
    seconds may have a fraction: ``INTERVAL '0.001' SECOND``), an optional
    precision (``SECOND(3)``), and the spans ``DAY TO HOUR|MINUTE|SECOND``,
    ``HOUR TO MINUTE|SECOND``, ``MINUTE TO SECOND`` (``INTERVAL '1 02:30' DAY TO MINUTE``).

    Raises:
        ValidationError: for anything else (YEAR/MONTH intervals have no fixed length).

    Example:
        >>> import sqlglot
        >>> interval_ms(sqlglot.parse_one("INTERVAL '10' MINUTE", read=Flink))
        600000
    """
    if not isinstance(interval, exp.Interval) or not isinstance(interval.this, exp.Literal):
        raise ValidationError(f"expected an interval literal such as INTERVAL '10' SECOND, got {interval.sql(Flink)}")
    text = interval.this.name.strip()
    unit = interval.args.get("unit")
    if isinstance(unit, exp.IntervalSpan):
        units = [unit.this.name.upper(), unit.expression.name.upper()]
    elif unit is not None:
        units = [(unit.key if not isinstance(unit, exp.Var) else unit.name).upper()]
    else:
        parts = text.split()
        text, units = parts[0], [parts[1].upper()] if len(parts) == 2 else []
    units = [u[:-1] if u.endswith("S") and u[:-1] in _UNIT_MS else u for u in units]
    if not units or any(u not in _UNIT_MS for u in units):
        raise ValidationError(
            f"interval {interval.sql(Flink)}: "
            "only day-time intervals (DAY, HOUR, MINUTE, SECOND) have a length in milliseconds"
        )
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("+-")
    order = list(_UNIT_MS)
    span = order[order.index(units[0]) : order.index(units[-1]) + 1]
    fields = text.replace(" ", ":").split(":")
    if len(fields) != len(span):
        raise ValidationError(f"interval {interval.sql(Flink)}: '{text}' does not fit {' TO '.join(units)}")
    try:
        total = sum((Decimal(value) * _UNIT_MS[name] for value, name in zip(fields, span)), Decimal(0))
    except InvalidOperation:
        raise ValidationError(f"interval {interval.sql(Flink)}: '{text}' is not a number") from None
    if total != total.to_integral_value():
        raise ValidationError(f"interval {interval.sql(Flink)} is not a whole number of milliseconds")
    return sign * int(total)
