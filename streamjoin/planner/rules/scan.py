"""Tables and views in ``FROM``: a declared table becomes a ``TableSourceScan`` (its computed columns typed from
their expressions), a view is planned inline where it is used, as Flink expands views."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner.catalog import TableDef
from streamjoin.planner.diagnostics import error
from streamjoin.planner.dialect import Flink
from streamjoin.planner.expressions import Scope, ScopeColumn, Typer, resolve
from streamjoin.planner.plan import Field, TableScan
from streamjoin.planner.relation import Relation
from streamjoin.planner.rules.window import plan_window_table_function, window_table_function_call
from streamjoin.planner.types import SqlType

if TYPE_CHECKING:
    from streamjoin.planner.builder import QueryPlanner

__all__ = ["plan_table_ref", "plan_view", "scan"]


def plan_table_ref(planner: QueryPlanner, item: exp.Expr, outer: Scope | None) -> Relation:
    """A ``FROM`` item: a common table expression of a ``WITH``, a table, a view, a window table function or a
    parenthesised query, under its alias.

    Raises:
        ValidationError: an unknown name, or ``FOR SYSTEM_TIME AS OF`` outside a join.
        UnsupportedPlanError: a qualified name or another kind of ``FROM`` item.
    """
    call = window_table_function_call(item)
    if call is not None:
        return plan_window_table_function(planner, call, outer).qualified(item.alias or None)
    if isinstance(item, exp.Table):
        if item.args.get("version") is not None:
            raise planner.error(
                ValidationError,
                item,
                "FOR SYSTEM_TIME AS OF applies to the right table of a JOIN",
                "temporal-join-syntax",
            )
        if item.args.get("db") or item.args.get("catalog"):
            raise planner.error(
                UnsupportedPlanError,
                item,
                f"catalog/database qualified names are not supported: {item.sql(Flink)}",
                "table-exists",
            )
        name = item.name
        alias = item.alias or name
        common = planner.common_table(name)
        if common is not None:
            saved = planner.ctes
            planner.ctes = list(common.frames)
            try:
                with planner.in_source(common.source):
                    return planner.plan_query(common.query).qualified(alias)
            finally:
                planner.ctes = saved
        if name in planner.catalog.tables:
            return scan(planner, planner.catalog.tables[name]).qualified(alias)
        if name in planner.catalog.views:
            return plan_view(planner, name, item).qualified(alias)
        known = ", ".join([*planner.catalog.tables, *planner.catalog.views]) or "none"
        raise planner.error(ValidationError, item, f"unknown table or view '{name}'; declared: {known}", "table-exists")
    if isinstance(item, exp.Subquery):
        return planner.plan_query(item.this, outer).qualified(item.alias or None)
    raise planner.error(UnsupportedPlanError, item, f"{item.sql(Flink)} is not supported in FROM", "supported-queries")


def plan_view(planner: QueryPlanner, name: str, at: exp.Expr) -> Relation:
    """The view ``name`` planned inline, its errors located in its own text; a view using itself is refused."""
    if name in planner.views_in_progress:
        raise planner.error(ValidationError, at, f"view '{name}' refers to itself", "view-cycle")
    view = planner.catalog.views[name]
    planner.views_in_progress.append(name)
    # A view reads the catalog only, never the common table expressions of the query that reads it.
    ctes, planner.ctes = planner.ctes, []
    try:
        with planner.in_source(view.source):
            return planner.plan_query(view.query)
    finally:
        planner.views_in_progress.pop()
        planner.ctes = ctes


def scan(planner: QueryPlanner, table: TableDef) -> Relation:
    """A TableSourceScan of ``table``; computed columns are typed from their expressions."""
    physical = [ScopeColumn(None, c.name, c.name, c.type) for c in table.physical_columns]
    scope = Scope(physical, table.source or planner.source)
    typer = Typer({c.name: c.type for c in table.physical_columns}, table.source or planner.source)
    fields, computed = [], {}
    for c in table.columns:
        if c.computed is None:
            fields.append(Field(c.name, c.type))
            continue
        with planner.in_source(table.source):
            resolved = resolve(c.computed, scope)
        computed[c.name] = resolved
        ctype = c.type or typer.type_of(resolved)
        if table.rowtime == c.name and ctype is not None:
            ctype = SqlType(ctype.root, ctype.precision, nullable=ctype.nullable, time_attribute="ROWTIME")
        fields.append(Field(c.name, ctype))
    if table.rowtime:
        rowtime = next(f for f in fields if f.name == table.rowtime)
        if rowtime.type is None or rowtime.type.root not in ("TIMESTAMP", "TIMESTAMP_LTZ"):
            raise error(
                ValidationError,
                table.source,
                table.node,
                f"WATERMARK FOR '{table.rowtime}' of table '{table.name}': "
                "the rowtime must be TIMESTAMP(p) or TIMESTAMP_LTZ(p)",
                "watermark-type",
            )
    node = TableScan(table, fields, computed)
    return Relation(node, [ScopeColumn(None, f.name, f.name, f.type) for f in fields])
