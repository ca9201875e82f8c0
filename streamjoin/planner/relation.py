"""A planned query block as the surrounding query sees it: its plan node and the columns it can name."""

from __future__ import annotations

from dataclasses import dataclass

from streamjoin.planner.diagnostics import SqlSource
from streamjoin.planner.expressions import Scope, ScopeColumn
from streamjoin.planner.plan import Node

__all__ = ["Relation"]


@dataclass
class Relation:
    """A planned query block: its node and the columns a surrounding query can name."""

    node: Node
    columns: list[ScopeColumn]

    def scope(self, source: SqlSource, outer: Scope | None = None) -> Scope:
        """A scope over the columns (for resolving expressions)."""
        return Scope(self.columns, source, outer)

    def qualified(self, qualifier: str | None) -> Relation:
        """The same relation with its columns named ``qualifier.column`` (a FROM alias)."""
        return Relation(self.node, [ScopeColumn(qualifier, c.name, c.field, c.type) for c in self.columns])
