"""Error messages that point into the SQL file: ``FILE:LINE:COLUMN: what is wrong [rule]``.

Every error the planner raises names where it is (file, line and column of
the offending table, column or clause, 1-based), what is wrong (naming the
table or column), and the rule that was broken, so the user can fix the SQL
without reading our code. Example::

    sql/orders.sql:14:10: unknown column 'o_totalprise' in the FROM clause; columns: o_orderkey, … [rule: column-exists]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from sqlglot import exp

from streamjoin.errors import StreamJoinError

_Error = TypeVar("_Error", bound=StreamJoinError)

__all__ = ["SqlSource", "error", "locate"]


@dataclass(frozen=True)
class SqlSource:
    """The SQL text being planned and the name to report it under (a path, or ``<case NAME>``)."""

    name: str
    text: str


def locate(node: exp.Expr | None) -> tuple[int, int] | None:
    """(line, column) where ``node`` starts in the text: the earliest token position sqlglot kept under it."""
    if node is None:
        return None
    positions = []
    for child in node.walk():
        meta = child._meta or {}
        if "line" in meta:
            # sqlglot records the column of a token's last character.
            positions.append((meta["line"], max(1, meta["col"] - (meta.get("end", 0) - meta.get("start", 0)))))
    return min(positions) if positions else None


def error(
    kind: type[_Error],
    source: SqlSource | None,
    node: exp.Expr | None,
    message: str,
    rule: str,
) -> _Error:
    """An exception of ``kind`` whose message is ``FILE:LINE:COL: message [rule: rule]``.

    Args:
        kind: ``ValidationError`` (invalid SQL), ``UnsupportedPlanError`` (valid SQL we cannot run) or ``SinkError``.
        source: the text the node comes from; ``None`` when unknown.
        node: the offending part of the statement (its first token is reported).
        message: what is wrong, naming the table and column.
        rule: a short name of the broken rule (``column-exists``, ``interval-join-bounds``...).
    """
    where = locate(node)
    prefix = source.name if source else "<sql>"
    if where:
        prefix += f":{where[0]}:{where[1]}"
    return kind(f"{prefix}: {message} [rule: {rule}]")
