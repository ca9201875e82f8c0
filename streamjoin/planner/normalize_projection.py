"""The columns a ChangelogNormalize's consumers read, projected before it (Flink's PushCalcPastChangelogNormalizeRule).

Flink prunes the columns no operator reads and pushes that projection (with the primary key) below an
upsert source's ``ChangelogNormalize``: ``ChangelogNormalize(key=[b1]) <- Calc(select=[b1]) <- scan``. It
is visible in the changelog: ``processLastRowOnChangelog`` drops an upsert equal to the stored row, and
after the projection an upsert that changes only unread columns is such a duplicate, so it is dropped
before the consumer sees it (a semi join over ``B(b1 PRIMARY KEY, b2)`` that reads only ``b1`` gets no
``-U``/``+U`` when ``b2`` changes; when its condition reads ``b2`` it does). docs/semantics.md §1.

Here the read columns are found top-down over the finished plan; where a node's needs are not modelled
(OVER, deduplication, interval/temporal/lookup joins, unions, the materializer) all its
input's columns count as read, so a column is pruned only where no operator can read it. The
ChangelogNormalize keeps its output fields: the pruned ones leave it as NULL, which nothing reads.
"""

from __future__ import annotations

from sqlglot import exp

from streamjoin.planner.expressions import field_column
from streamjoin.planner.plan import Calc, ChangelogNormalize, GroupAggregate, Node, RegularJoin, Sink

__all__ = ["project_before_normalize", "read_columns"]


def _columns(e: exp.Expr | None) -> set[str]:
    return set() if e is None else {c.name for c in e.find_all(exp.Column)}


def read_columns(node: Node, needed: set[str]) -> list[set[str]]:
    """Per input of ``node``, the input columns it reads when its consumers read ``needed`` of its output.

    A Calc reads the columns of the projections kept and of its condition; a group aggregate its grouping
    columns and arguments; a regular join (incl. semi and anti) its equi keys, its residual's columns and
    the output columns needed from each side; a sink everything; any other node, conservatively, all its
    input's columns.
    """
    if isinstance(node, Calc):
        kept = [e for f, e in node.projections if f.name in needed]
        return [set().union(*map(_columns, kept), _columns(node.condition))]
    if isinstance(node, GroupAggregate):
        return [set(node.group_by) | {a.arg for a in node.aggregates if a.arg}]
    if isinstance(node, RegularJoin):
        used = needed | _columns(node.residual)
        left = {n for n in node.left.field_names if n in used} | set(node.left_keys)
        right = {n for n, out in zip(node.right.field_names, node.right_names) if out in used} | set(node.right_keys)
        return [left, right]
    return [set(child.field_names) for child in node.inputs]


def _push(node: Node, needed: set[str]) -> None:
    if isinstance(node, ChangelogNormalize):
        input = node.inputs[0]
        kept = [f for f in input.fields if f.name in needed or f.name in node.key]
        if len(kept) < len(input.fields):
            projection = Calc(input, [(f, field_column(f.name)) for f in kept])
            projection.update_kind = input.update_kind
            node.inputs[0] = input = projection
        _push(input, set(input.field_names))
        return
    for child, child_needed in zip(node.inputs, read_columns(node, needed)):
        _push(child, child_needed)


def project_before_normalize(sink: Sink) -> Sink:
    """Put a Calc of the read columns (and the primary key) before every ChangelogNormalize under ``sink``.

    Runs after the changelog-mode pass (which adds the ChangelogNormalize nodes); returns ``sink``.
    """
    _push(sink, set(sink.inputs[0].field_names))
    return sink
