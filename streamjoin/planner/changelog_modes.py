"""Changelog-mode inference and the sink check (docs/semantics.md §1), as Flink's FlinkChangelogModeInferenceProgram.

Two passes over a planned statement:

1. **ModifyKindSet, bottom-up** (done by the nodes at construction, :mod:`streamjoin.planner.plan`):
   which of INSERT / UPDATE / DELETE each node emits. The sink is checked
   against it here: an append-only sink refuses updates and deletes, naming the
   sink and the node that produces them; an upsert sink (a primary key) takes
   everything, through a **SinkUpsertMaterializer** when its primary key is not
   an upsert key of the query.
2. **UpdateKind, top-down** (:func:`assign_update_kinds`): whether updates carry
   UPDATE_BEFORE. A sink keyed by an upsert key of the query needs only
   UPDATE_AFTER, and a node that can omit ``-U`` (a group aggregate, a
   keep-last deduplication, a changelog source through ``DropUpdateBefore``)
   does; everything that retracts by value (joins, aggregates, the
   materializer, retract sinks) gets BEFORE_AND_AFTER.

Sink kinds: ``delta`` with a primary key and ``upsert-kafka`` are upsert sinks; ``delta`` without
one and ``kafka`` with ``json`` are append-only; ``kafka`` with a CDC format
(``debezium-json``, ``canal-json``, ``maxwell-json``), ``values`` and the
collecting sink of a ``SELECT`` take a retract changelog.
"""

from __future__ import annotations

from sqlglot import exp

from streamjoin.changelog import RowKind
from streamjoin.connectors.formats import CDC_FORMATS
from streamjoin.errors import SinkError, UnsupportedPlanError
from streamjoin.planner.diagnostics import SqlSource, error
from streamjoin.planner.normalize_projection import project_before_normalize
from streamjoin.planner.plan import (
    Calc,
    ChangelogNormalize,
    Deduplicate,
    DropUpdateBefore,
    GroupAggregate,
    LookupJoin,
    Node,
    Rank,
    Sink,
    SinkUpsertMaterializer,
    TableScan,
    TemporalJoin,
    Union,
    UpdateKind,
)

__all__ = ["assign_update_kinds", "drops_update_before", "finish_plan", "producer", "sink_kind"]


def sink_kind(sink: Sink) -> str:
    """``"upsert"``, ``"append"`` or ``"retract"``: what changes ``sink`` can take."""
    table = sink.table
    if table is None or table.connector == "values":
        return "retract"
    if table.connector == "delta":
        return "upsert" if table.primary_key else "append"
    if table.connector == "upsert-kafka":
        return "upsert"
    return "retract" if table.options.get("format") in CDC_FORMATS else "append"


# Nodes that forward their (first) input's changes as they are.
_FORWARDING = (Calc, TemporalJoin, LookupJoin)


def producer(node: Node, kind: str) -> Node:
    """The node that introduces changes of ``kind`` (``"U"`` or ``"D"``) into ``node``'s output."""
    if isinstance(node, _FORWARDING) and kind in node.inputs[0].modify_kinds:
        return producer(node.inputs[0], kind)
    if isinstance(node, (DropUpdateBefore, SinkUpsertMaterializer, ChangelogNormalize)):
        return producer(node.inputs[0], kind)
    return node


def finish_plan(sink: Sink, source: SqlSource, at: exp.Expr | None, *, state_ttl_ms: int | None = None) -> Sink:
    """Check that ``sink`` can take its query's changes, add a SinkUpsertMaterializer if needed, decide UPDATE_BEFORE.

    Args:
        sink: the planned statement.
        source / at: the statement's text and the sink's name in it, for error locations.
        state_ttl_ms: idle state retention of a materializer or ChangelogNormalize, if one is added.

    Returns:
        ``sink``, its input possibly wrapped (materializer, DropUpdateBefore), the columns read after each
        ChangelogNormalize projected before it (:mod:`streamjoin.planner.normalize_projection`).

    Raises:
        SinkError: an append-only sink fed updates or deletes; the message names the sink and the producing node.
        UnsupportedPlanError: an upsert source without a primary key whose consumer needs full rows.
    """
    query = sink.inputs[0]
    kind = sink_kind(sink)
    if kind == "append" and not query.is_insert_only:
        changes = "update and delete" if {"U", "D"} <= query.modify_kinds or "D" in query.modify_kinds else "update"
        culprit = producer(query, "U" if "U" in query.modify_kinds else "D")
        raise error(
            SinkError,
            source,
            at,
            f"table sink '{sink.table_name}' doesn't support consuming {changes} changes which are produced by node "
            f"{culprit.describe()}; declare a PRIMARY KEY on the sink (an upsert sink)",
            "sink-changelog-mode",
        )
    required = "BEFORE_AND_AFTER"
    if kind == "upsert" and not query.is_insert_only:
        assert sink.table is not None  # an upsert sink is a declared table
        pk = set(sink.table.primary_key)
        if any(k and set(k) <= pk for k in query.upsert_keys):
            required = "ONLY_UPDATE_AFTER"
        else:
            sink.inputs[0] = query = SinkUpsertMaterializer(query, tuple(sink.table.primary_key), state_ttl_ms)
    try:
        sink.inputs[0] = assign_update_kinds(
            query, required, keyed_deletes=required == "ONLY_UPDATE_AFTER", state_ttl_ms=state_ttl_ms
        )
    except UnsupportedPlanError as e:
        raise error(UnsupportedPlanError, source, at, str(e), "changelog-normalize") from None
    sink.update_kind = "NONE"
    return project_before_normalize(sink)


def _requirement(node: Node, index: int) -> str:
    if isinstance(node, TemporalJoin) and index == 1:
        return "ONLY_UPDATE_AFTER"  # the versioned side is read as upserts; -U is never needed
    if isinstance(node, Rank) and node.strategy == "UpdateFastStrategy":
        return "ONLY_UPDATE_AFTER"  # UpdatableTopNFunction / FastTop1Function read upserts
    return "BEFORE_AND_AFTER"


def _filters_by_value(node: Node) -> bool:
    """A Calc whose condition reads a column outside its input's upsert key (Flink's ``isNonUpsertKeyCondition``):
    an update that stops matching must retract the old row, so it cannot pass upserts (FLINK-9528)."""
    if not isinstance(node, Calc) or node.condition is None or "U" not in node.inputs[0].modify_kinds:
        return False
    keys = node.inputs[0].upsert_keys
    used = {c.name for c in node.condition.find_all(exp.Column)}
    return not keys or not used <= set(keys[0])


def _normalized(scan: TableScan, own: UpdateKind, keyed_deletes: bool, state_ttl_ms: int | None) -> Node:
    """An upsert source scan, behind a ChangelogNormalize where Flink 2.3 keeps one (docs/semantics.md §1).

    Flink adds it to every upsert source and removes it again when the consumer needs no ``-U``, takes deletes
    that carry only the key (an upsert sink keyed by the same key) and no filter was pushed into it. A table
    with a watermark also loses it then: Flink's WatermarkAssigner declares full deletes whatever its input.
    """
    scan.update_kind = "ONLY_UPDATE_AFTER"
    if own == "ONLY_UPDATE_AFTER" and (keyed_deletes or scan.table.watermark is not None):
        return scan
    if not scan.table.primary_key:
        raise UnsupportedPlanError(
            f"table '{scan.table.name}' is an upsert changelog (no UPDATE_BEFORE) without a PRIMARY KEY, and its "
            "consumer needs full rows; ChangelogNormalize keys it by the primary key: "
            "declare PRIMARY KEY (...) NOT ENFORCED"
        )
    normalize = ChangelogNormalize(scan, scan.table.primary_key, state_ttl_ms)
    normalize.update_kind = own
    return normalize


def assign_update_kinds(
    node: Node, required: str, *, keyed_deletes: bool = False, state_ttl_ms: int | None = None
) -> Node:
    """Set ``update_kind`` on ``node`` and below for a consumer that needs ``required``; the (maybe wrapped) node.

    Args:
        keyed_deletes: the consumer takes deletes that carry only the key (Flink's DELETE_BY_KEY): an upsert
            sink keyed by the query's upsert key. Otherwise an upsert source gets a ChangelogNormalize.
        state_ttl_ms: idle state retention of an added ChangelogNormalize.

    Raises:
        UnsupportedPlanError: an upsert source without a primary key whose consumer needs full rows.
    """

    def visit(child: Node, child_required: str, child_keyed: bool = False) -> Node:
        return assign_update_kinds(child, child_required, keyed_deletes=child_keyed, state_ttl_ms=state_ttl_ms)

    if isinstance(node, Union):
        node.inputs = [visit(child, required, keyed_deletes) for child in node.inputs]
        kinds = {child.update_kind for child in node.inputs} - {"NONE"}
        node.update_kind = "NONE" if not kinds else kinds.pop() if len(kinds) == 1 else "BEFORE_AND_AFTER"
        return node
    if isinstance(node, _FORWARDING):
        by_value = _filters_by_value(node)
        node.inputs[0] = visit(
            node.inputs[0],
            "BEFORE_AND_AFTER" if by_value else required,
            keyed_deletes and isinstance(node, Calc) and not by_value,
        )
        for i in range(1, len(node.inputs)):
            node.inputs[i] = visit(node.inputs[i], _requirement(node, i))
        node.update_kind = node.inputs[0].update_kind if "U" in node.modify_kinds else "NONE"
        return node
    own: UpdateKind
    if "U" not in node.modify_kinds:
        own = "NONE"
    elif isinstance(node, SinkUpsertMaterializer):
        own = "ONLY_UPDATE_AFTER"  # it emits upserts: +I/+U/-D
    elif required == "ONLY_UPDATE_AFTER" and node.supports_only_update_after:
        own = "ONLY_UPDATE_AFTER"
    else:
        own = "BEFORE_AND_AFTER"
    for i, child in enumerate(node.inputs):
        node.inputs[i] = visit(child, _requirement(node, i))
    if isinstance(node, TableScan) and "U" in node.modify_kinds:
        if RowKind.UPDATE_BEFORE not in node.table.source_kinds:
            return _normalized(node, own, keyed_deletes, state_ttl_ms)
        if own == "ONLY_UPDATE_AFTER":
            node.update_kind = "BEFORE_AND_AFTER"
            return DropUpdateBefore(node)
    node.update_kind = own
    return node


def drops_update_before(node: Node) -> bool:
    """Whether the operator of ``node`` emits ``-U`` that its decided mode leaves out (dropped after it)."""
    return node.update_kind == "ONLY_UPDATE_AFTER" and isinstance(
        node, (GroupAggregate, Deduplicate, Rank, DropUpdateBefore)
    )
