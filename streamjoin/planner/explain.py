"""``EXPLAIN CHANGELOG_MODE``: the operator tree with each node's changelog mode, keys, state layout and TTL.

The tree is drawn as Flink's ``== Optimized Physical Plan ==`` (``+-`` last
child, ``:-`` other children); each node prints ``changelogMode=[I,UB,UA,D]``
(the sink ``[NONE]``) and, where known, ``upsertKeys`` / ``uniqueKeys``. Below
every keyed stateful operator an ``Exchange`` shows how rows are distributed:
``hash[k]`` by key, or ``single`` when there is no key (one task does all the
work). Regular joins print their state layout per input
(``leftInputSpec=[JoinKeyContainsUniqueKey]``) and ``stateTtl`` when set.

Example::

    == Optimized Physical Plan ==
    Sink(table=[default_catalog.default_database.collect], fields=[a1, b1], changelogMode=[NONE])
    +- Join(joinType=[InnerJoin], where=[a1 = b1], ..., changelogMode=[I,UB,UA,D])
       :- Exchange(distribution=[hash[a1]], changelogMode=[I,UB,UA,D])
       :  +- TableSourceScan(table=[[default_catalog, default_database, A]], fields=[a1, a2], changelogMode=[I,UB,UA,D])
       +- Exchange(distribution=[hash[b1]], changelogMode=[I,UB,UA,D])
          +- TableSourceScan(table=[[default_catalog, default_database, B]], fields=[b1, b2], changelogMode=[I,UB,UA,D])
"""

from __future__ import annotations

from streamjoin.planner.plan import (
    ChangelogNormalize,
    Deduplicate,
    GroupAggregate,
    Node,
    OverAggregate,
    Rank,
    Sink,
    SinkUpsertMaterializer,
    WindowAggregate,
    WindowRank,
    _Join,
)

__all__ = ["explain_plan"]


def _keys(keys) -> str:
    return ", ".join("[" + ", ".join(k) + "]" for k in keys)


def _line(node: Node) -> str:
    attrs = node.attributes()
    mode = "NONE" if isinstance(node, Sink) else str(node.changelog_mode)[1:-1]
    attrs.append(("changelogMode", mode))
    if not isinstance(node, Sink):
        if node.upsert_keys:
            attrs.append(("upsertKeys", _keys(node.upsert_keys)))
        if node.unique_keys and node.unique_keys != node.upsert_keys:
            attrs.append(("uniqueKeys", _keys(node.unique_keys)))
    return f"{node.name}({', '.join(f'{k}=[{v}]' for k, v in attrs)})"


def _distribution(node: Node, index: int) -> str | None:
    """The Exchange in front of input ``index`` of ``node``, or ``None`` when the input is not shuffled."""
    if isinstance(node, _Join) and node.name != "LookupJoin":
        keys = node.left_keys if index == 0 else node.right_keys
    elif isinstance(node, (GroupAggregate, WindowAggregate)):
        keys = node.group_by
    elif isinstance(node, (OverAggregate, WindowRank, Rank)):
        keys = node.partition_by
    elif isinstance(node, Deduplicate):
        keys = node.keys
    elif isinstance(node, SinkUpsertMaterializer):
        keys = list(node.primary_key)
    elif isinstance(node, ChangelogNormalize):
        keys = list(node.key)
    else:
        return None
    return f"hash[{', '.join(keys)}]" if keys else "single"


def _render(node: Node, lines: list[str], prefix: str, child_prefix: str) -> None:
    lines.append(prefix + _line(node))
    for i, child in enumerate(node.inputs):
        last = i == len(node.inputs) - 1
        head = child_prefix + ("+- " if last else ":- ")
        tail = child_prefix + ("   " if last else ":  ")
        distribution = _distribution(node, i)
        if distribution is not None:
            lines.append(
                f"{head}Exchange(distribution=[{distribution}], changelogMode=[{str(child.changelog_mode)[1:-1]}])"
            )
            _render(child, lines, tail + "+- ", tail + "   ")
        else:
            _render(child, lines, head, tail)


def explain_plan(sink: Sink) -> str:
    """The ``== Optimized Physical Plan ==`` text of a finished plan (see the module docstring)."""
    lines = ["== Optimized Physical Plan =="]
    _render(sink, lines, "", "")
    return "\n".join(lines)
