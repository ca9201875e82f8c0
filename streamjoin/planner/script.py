"""A SQL file, parsed and planned: its tables and views, settings, INSERTs, SELECTs and EXPLAINs.

Statements (separated by ``;``, ``--`` comments allowed), in file order:

- ``CREATE TABLE`` (Flink's ``LIKE`` clause included) → the catalog (:mod:`streamjoin.planner.catalog`);
- ``CREATE [TEMPORARY] VIEW name AS query`` → the catalog, planned where used;
- ``SET 'table.exec.state.ttl' = '1 h'`` → idle state retention of regular joins, group aggregates, deduplications,
  ChangelogNormalize and the SinkUpsertMaterializer (not of event-time deduplication keeping the first row);
- ``SET 'table.exec.mini-batch.enabled' = 'true'`` → group aggregates emit once per group and micro-batch (Flink's
  mini-batch aggregation, the micro-batch being the bundle);
- ``SET 'parallelism.default' = '4'`` (or ``'table.exec.resource.default-parallelism'``, which wins when both are
  set, as in Flink) → the pipelines' parallelism: their queries' shuffle partitions, i.e. the parallel instances
  and state partitions of each stateful operator (:mod:`streamjoin.pipeline`);
- ``INSERT INTO sink SELECT …`` → a planned statement writing a sink table;
- ``SELECT …`` → a planned statement collected by the caller (tests, case replay);
- ``EXPLAIN [CHANGELOG_MODE] <INSERT or SELECT>`` → its plan text.

Everything is planned and checked when the file is loaded; nothing runs.

Initialization scripts, as Flink's SQL client runs ``sql-client.sh -i init.sql -f job.sql``, are
planned first and may hold only ``CREATE`` and ``SET``: the tables several pipelines share are
declared once. By convention (:func:`load_script`) a pipeline's are the files of ``catalog/``
next to it.

Example:
    >>> script = plan_script(open("sql/orders_current.sql").read(), "sql/orders_current.sql")  # doctest: +SKIP
    >>> print(script.statements[0].explain)  # doctest: +SKIP
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from streamjoin.connectors.formats import FORMATS
from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner.builder import QueryPlanner, check_ranks, merge_calc
from streamjoin.planner.catalog import Catalog, TableDef, ViewDef, table_from_ddl
from streamjoin.planner.changelog_modes import finish_plan
from streamjoin.planner.diagnostics import SqlSource, error
from streamjoin.planner.dialect import Explain, Flink
from streamjoin.planner.explain import explain_plan
from streamjoin.planner.expressions import field_column
from streamjoin.planner.plan import Field, Sink
from streamjoin.planner.rules.window import check_session_windows
from streamjoin.planner.types import common_type

__all__ = [
    "PlannedStatement",
    "Script",
    "catalog_scripts",
    "load_script",
    "parse_duration_ms",
    "parse_sql",
    "plan_script",
]

#: Flink's parallelism settings; the first one set wins (``table.exec.resource.default-parallelism`` overrides the
#: environment's ``parallelism.default`` in Flink; its -1, "not set", falls back to it).
_PARALLELISM_SETTINGS = ("table.exec.resource.default-parallelism", "parallelism.default")
_SETTINGS = ("table.exec.state.ttl", "table.exec.mini-batch.enabled", *_PARALLELISM_SETTINGS)
_DURATION_UNITS = {
    "ms": 1,
    "milli": 1,
    "millis": 1,
    "millisecond": 1,
    "milliseconds": 1,
    "s": 1000,
    "sec": 1000,
    "secs": 1000,
    "second": 1000,
    "seconds": 1000,
    "min": 60_000,
    "m": 60_000,
    "minute": 60_000,
    "minutes": 60_000,
    "h": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
    "days": 86_400_000,
}


@dataclass
class PlannedStatement:
    """An ``INSERT`` or ``SELECT`` with its finished plan.

    Attributes:
        statement: the parsed statement.
        sink: the plan's root (``Sink``); ``sink.table`` is ``None`` for a ``SELECT``.
        explain: the ``EXPLAIN CHANGELOG_MODE`` text of the plan.
    """

    statement: exp.Expr
    sink: Sink
    explain: str

    @property
    def sink_table(self) -> TableDef | None:
        """The declared sink table, ``None`` for a ``SELECT``."""
        return self.sink.table


@dataclass
class Script:
    """A planned SQL file.

    Attributes:
        source: the file's name and text.
        catalog: its tables and views.
        statements: its INSERTs and SELECTs, planned, in file order.
        explains: the output of its EXPLAIN statements, in file order.
        state_ttl_ms: ``table.exec.state.ttl`` in milliseconds, if set.
        mini_batch: ``table.exec.mini-batch.enabled``.
        parallelism_settings: the parallelism settings set (``parallelism.default``,
            ``table.exec.resource.default-parallelism``) → their value (``-1``: not set).
    """

    source: SqlSource
    catalog: Catalog
    statements: list[PlannedStatement] = field(default_factory=list)
    explains: list[str] = field(default_factory=list)
    state_ttl_ms: int | None = None
    mini_batch: bool = False
    parallelism_settings: dict[str, int] = field(default_factory=dict)

    @property
    def parallelism(self) -> int | None:
        """The parallelism of the script's pipelines (their queries' shuffle partitions), or None when not set.

        ``table.exec.resource.default-parallelism`` when set to a positive number, else ``parallelism.default``,
        as Flink resolves them.
        """
        values = [self.parallelism_settings.get(key, -1) for key in _PARALLELISM_SETTINGS]
        return next((v for v in values if v > 0), None)

    @property
    def inserts(self) -> list[PlannedStatement]:
        """The ``INSERT INTO`` statements, in file order."""
        return [s for s in self.statements if s.sink_table is not None]


def parse_duration_ms(text: str) -> int:
    """Flink's duration text (``'1 h'``, ``'10 min'``, ``'3600000 ms'``, ``'1d'``, plain ms) in milliseconds.

    Raises:
        ValidationError: for anything else, listing the units.
    """
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if not match or (match.group(2) and match.group(2).lower() not in _DURATION_UNITS):
        raise ValidationError(f"duration {text!r} is not '<number> <unit>' with unit one of ms, s, min, h, d")
    return int(match.group(1)) * _DURATION_UNITS[match.group(2).lower() or "ms"]


def _parse_parallelism(key: str, text: str) -> int:
    """A parallelism setting's value: a positive integer; ``-1`` (not set) also for
    ``table.exec.resource.default-parallelism``, whose default it is in Flink."""
    value = int(text.strip()) if re.fullmatch(r"\s*-?\d+\s*", text) else 0
    if value < 1 and not (value == -1 and key == _PARALLELISM_SETTINGS[0]):
        raise ValidationError(
            f"setting '{key}' takes a positive integer (the number of parallel instances), not {text!r}"
        )
    return value


def _parse_bool(key: str, text: str) -> bool:
    """A boolean setting's value, as Flink's configuration reads it (``true``/``false``, any case)."""
    if text.strip().lower() not in ("true", "false"):
        raise ValidationError(f"setting '{key}' takes 'true' or 'false', not {text!r}")
    return text.strip().lower() == "true"


def parse_sql(text: str, source: SqlSource) -> list[exp.Expr]:
    """The statements of ``text`` (Flink dialect).

    Raises:
        ValidationError: for a syntax error, with file, line and column.
    """
    try:
        # A comment after the last ";" of a line parses as an empty (Semicolon) statement.
        return [s for s in sqlglot.parse(text, read=Flink) if s is not None and not isinstance(s, exp.Semicolon)]
    except ParseError as e:
        first = e.errors[0] if e.errors else {}
        line, col = first.get("line"), first.get("col")
        highlight = first.get("highlight") or ""
        where = f"{source.name}:{line}:{max(1, col - len(highlight) + 1)}" if line and col is not None else source.name
        description = (first.get("description") or str(e)).split(" <Token")[0]
        raise ValidationError(f"{where}: syntax error: {description} near '{highlight}' [rule: syntax]") from None
    except TokenError as e:
        raise ValidationError(f"{source.name}: syntax error: {e} [rule: syntax]") from None


def _is_table_ddl(create: exp.Create) -> bool:
    """``CREATE TABLE t (…) WITH (…) [LIKE s …]``, or ``CREATE TABLE t WITH (…) LIKE s …``; not ``… AS query``."""
    properties = create.args.get("properties")
    has_like = bool(properties and any(isinstance(p, exp.LikeProperty) for p in properties.expressions))
    return create.args.get("expression") is None and (isinstance(create.this, exp.Schema) or has_like)


def _set(statement: exp.Set, source: SqlSource) -> tuple[str, str]:
    item = statement.expressions[0] if statement.expressions else None
    eq = item.this if isinstance(item, exp.SetItem) else None
    if not (isinstance(eq, exp.EQ) and isinstance(eq.this, exp.Literal) and isinstance(eq.expression, exp.Literal)):
        raise error(ValidationError, source, statement, "SET takes 'key' = 'value'", "set-syntax")
    key, value = eq.this.name, eq.expression.name
    if key not in _SETTINGS:
        raise error(
            UnsupportedPlanError,
            source,
            eq.this,
            f"setting '{key}' is not supported; supported: {', '.join(_SETTINGS)}",
            "settings",
        )
    return key, value


def _sink_statement(
    planner: QueryPlanner, insert: exp.Insert, catalog: Catalog, source: SqlSource
) -> tuple[Sink, exp.Expr]:
    target = insert.this
    if isinstance(target, exp.Schema):
        raise error(
            UnsupportedPlanError,
            source,
            target,
            "INSERT INTO t (columns) is not supported; select every sink column in order",
            "sink-columns",
        )
    name = target.name
    if name not in catalog.tables:
        what = "a view" if name in catalog.views else "not declared"
        raise error(ValidationError, source, target, f"INSERT INTO '{name}': the sink table is {what}", "sink-table")
    table = catalog.tables[name]
    if table.connector == "kafka" and table.options.get("format") not in FORMATS:
        raise error(ValidationError, source, target, f"sink '{name}' has no supported format", "sink-table")
    relation = planner.plan_query(insert.expression)
    query = relation.node
    sink_columns = table.physical_columns
    if len(relation.columns) != len(sink_columns):
        raise error(
            ValidationError,
            source,
            target,
            f"INSERT INTO '{name}': the query has {len(relation.columns)} columns "
            f"({', '.join(c.name for c in relation.columns)}), "
            f"the sink has {len(sink_columns)} ({', '.join(c.name for c in sink_columns)})",
            "sink-columns",
        )
    projections: list[tuple[Field, exp.Expr]] = []
    for column, sink_column in zip(relation.columns, sink_columns):
        query_type = query.field(column.field).type
        sink_type = sink_column.declared_type
        value: exp.Expr = field_column(column.field)
        if query_type is not None and common_type(query_type, sink_type) is None:
            raise error(
                ValidationError,
                source,
                target,
                f"INSERT INTO '{name}': column '{column.name}' of the query is {query_type}, but sink column "
                f"'{sink_column.name}' is {sink_type}",
                "sink-types",
            )
        if query_type is None or query_type.sql != sink_type.sql:
            value = exp.cast(value, exp.DataType.build(sink_type.sql, dialect=Flink))
        projections.append((Field(sink_column.name, sink_type), value))
    return Sink(merge_calc(query, projections), table, [f for f, _ in projections]), target


def plan_script(text: str, name: str = "<sql>", init: Sequence[tuple[str, str]] = ()) -> Script:
    """Parse and plan every statement of ``text`` (see the module docstring).

    Args:
        text: the SQL.
        name: what error messages call it (a path).
        init: ``(name, text)`` of initialization scripts planned first, as Flink's SQL client runs
            ``-i init.sql``: their tables, views and settings are known to ``text``; they may hold
            only ``CREATE`` and ``SET`` statements.

    Returns:
        The planned :class:`Script` (its ``source`` is ``text``'s).

    Raises:
        ValidationError / UnsupportedPlanError / SinkError: for the first invalid or unsupported statement,
            with file, line, column, the table or column, and the rule.
    """
    source = SqlSource(name, text)
    catalog = Catalog()
    script = Script(source, catalog)

    def plan_statement(statement: exp.Expr, source: SqlSource) -> PlannedStatement:
        planner = QueryPlanner(catalog, source, state_ttl_ms=script.state_ttl_ms, mini_batch=script.mini_batch)
        if isinstance(statement, exp.Insert):
            sink, at = _sink_statement(planner, statement, catalog, source)
        elif isinstance(statement, (exp.Select, exp.Subquery, exp.SetOperation)):
            relation = planner.plan_query(statement)
            node = relation.node
            sink = Sink(node, None, node.fields)
            at = statement
        else:
            raise error(
                UnsupportedPlanError,
                source,
                statement,
                f"statement {statement.sql(Flink)[:40]}… is not supported",
                "supported-statements",
            )
        check_ranks(sink, source)
        check_session_windows(sink, source)
        finish_plan(sink, source, at, state_ttl_ms=script.state_ttl_ms)
        return PlannedStatement(statement, sink, explain_plan(sink))

    def plan_file(source: SqlSource, is_init: bool) -> None:
        for statement in parse_sql(source.text, source):
            if isinstance(statement, exp.Create):
                kind = (statement.args.get("kind") or "").upper()
                if kind == "TABLE" and _is_table_ddl(statement):
                    catalog.add_table(table_from_ddl(statement, source, catalog.tables))
                elif kind == "VIEW":
                    if isinstance(statement.this, exp.Schema):
                        raise error(
                            UnsupportedPlanError,
                            source,
                            statement.this,
                            "a view column list is not supported; alias in the query",
                            "supported-statements",
                        )
                    catalog.add_view(ViewDef(statement.this.name, statement.expression, source))
                else:
                    raise error(
                        UnsupportedPlanError,
                        source,
                        statement,
                        f"CREATE {kind} is not supported",
                        "supported-statements",
                    )
            elif isinstance(statement, exp.Set):
                key, value = _set(statement, source)
                try:
                    if key == "table.exec.mini-batch.enabled":
                        script.mini_batch = _parse_bool(key, value)
                    elif key in _PARALLELISM_SETTINGS:
                        script.parallelism_settings[key] = _parse_parallelism(key, value)
                    else:
                        script.state_ttl_ms = parse_duration_ms(value)
                except ValidationError as e:
                    raise error(ValidationError, source, statement, str(e), "settings") from None
            elif is_init:
                raise error(
                    UnsupportedPlanError,
                    source,
                    statement,
                    "an initialization script may only hold CREATE and SET statements",
                    "init-script",
                )
            elif isinstance(statement, Explain):
                script.explains.append(plan_statement(statement.this, source).explain)
            else:
                script.statements.append(plan_statement(statement, source))

    for init_name, init_text in init:
        plan_file(SqlSource(init_name, init_text), is_init=True)
    plan_file(source, is_init=False)
    return script


def catalog_scripts(path: str | Path) -> list[Path]:
    """The initialization scripts of the pipeline at ``path`` by convention: ``catalog/*.sql`` beside it, by name."""
    return sorted((Path(path).parent / "catalog").glob("*.sql"))


#: resolved path → (resolved path, mtime and size of the file and of each init script; the planned Script).
_LOADED: dict[Path, tuple[tuple, Script]] = {}


def load_script(path: str | Path, init: Sequence[str | Path] | None = None) -> Script:
    """:func:`plan_script` of the file at ``path`` (errors name the path), planned once per process: while
    neither the file nor its init scripts change (same paths, same mtimes), later calls return the same
    :class:`Script` (the Dagster definitions, their jobs and the CLI share one plan). Do not modify it.

    Args:
        path: the SQL file.
        init: initialization scripts planned first (Flink SQL client's ``-i``); ``None`` means
            :func:`catalog_scripts` of ``path`` (the shared table declarations of ``sql/catalog/``).
    """
    path = Path(path)
    init_paths = catalog_scripts(path) if init is None else [Path(p) for p in init]
    stamp = tuple((p.resolve(), p.stat().st_mtime_ns, p.stat().st_size) for p in [path, *init_paths])
    cached = _LOADED.get(stamp[0][0])
    if cached is None or cached[0] != stamp:
        script = plan_script(path.read_text(), str(path), [(str(p), p.read_text()) for p in init_paths])
        cached = _LOADED[stamp[0][0]] = (stamp, script)
    return cached[1]
