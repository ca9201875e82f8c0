"""Unique keys and upsert keys of every plan node, and the state layout of a regular join's inputs.

Flink asks its metadata query for these (``FlinkRelMdUniqueKeys``, ``FlinkRelMdUpsertKeys``,
``JoinInputSideSpec``); here each plan node calls the rule for its kind when it is built
(:mod:`streamjoin.planner.plan`), so every rule is in this one module:

| node | unique keys | upsert keys |
| --- | --- | --- |
| TableSourceScan | the primary key | the same |
| Calc | the input's, through the columns it selects unchanged | the same |
| Join (regular, semi, anti) | :func:`derive_output_keys` | the same function |
| IntervalJoin, Union | none | none |
| TemporalJoin, LookupJoin, OverAggregate, DropUpdateBefore, Sink | the input's (left input's) | the same |
| Deduplicate, Rank, GroupAggregate, SinkUpsertMaterializer | its key columns | the same |

A key is a tuple of field names; a node's keys are a tuple of keys (``Keys``), empty when none is known.
The planner hands the regular join its inputs' unique keys and state layouts (:mod:`streamjoin.planner.translate`);
the operator derives none of them itself. The layout rule is the state views' own
(:func:`streamjoin.runtime.regular_join.state_views.choose_layout`, which direct Python callers of the operator
get by default).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from sqlglot import exp

from streamjoin.runtime.regular_join.state_views import StateLayout, choose_layout
from streamjoin.runtime.regular_join.streaming_join import JoinType

if TYPE_CHECKING:
    from streamjoin.planner.plan import Field, Node, RegularJoin

__all__ = [
    "NO_KEYS",
    "JoinInputSideSpec",
    "Keys",
    "NodeKeys",
    "calc_keys",
    "derive_output_keys",
    "forwarded_keys",
    "grouping_keys",
    "join_input_spec",
    "regular_join_keys",
    "scan_keys",
]

Keys = tuple[tuple[str, ...], ...]


class NodeKeys(NamedTuple):
    """A node's ``unique_keys`` (column sets identifying an output row) and ``upsert_keys`` (unique keys whose
    changes arrive in order, so a sink keyed by one may apply the changelog as upserts)."""

    unique_keys: Keys
    upsert_keys: Keys


class JoinInputSideSpec(NamedTuple):
    """One input of a regular join (Flink's ``JoinInputSideSpec``): the unique key its state is keyed by
    (field names of that input, ``None`` without one) and the state layout it picks."""

    unique_key: tuple[str, ...] | None
    layout: StateLayout


#: Neither unique nor upsert keys (IntervalJoin: a row may join many; Union: inputs may repeat a key).
NO_KEYS = NodeKeys((), ())


def _minimal(keys: Iterable[Iterable[str]]) -> Keys:
    """Distinct keys, each as a sorted tuple, dropping supersets of other keys."""
    sets = sorted({frozenset(k) for k in keys}, key=lambda s: (len(s), sorted(s)))
    kept: list[frozenset] = []
    for s in sets:
        if not any(k <= s for k in kept):
            kept.append(s)
    return tuple(tuple(sorted(k)) for k in kept)


def scan_keys(primary_key: Sequence[str]) -> NodeKeys:
    """A table source: its declared ``PRIMARY KEY … NOT ENFORCED`` is both keys (Flink trusts it)."""
    keys = (tuple(primary_key),) if primary_key else ()
    return NodeKeys(keys, keys)


def calc_keys(input: Node, projections: Sequence[tuple[Field, exp.Expr]]) -> NodeKeys:
    """A Calc: the input's keys whose columns are all selected as plain columns, renamed to their output names
    (Flink ``FlinkRelMdUniqueKeys.getProjectUniqueKeys``; a filter keeps keys)."""
    renamed: dict[str, str] = {}
    for f, e in projections:
        if isinstance(e, exp.Column) and e.name not in renamed:
            renamed[e.name] = f.name

    def mapped(keys: Keys) -> Keys:
        return _minimal(tuple(renamed[c] for c in k) for k in keys if all(c in renamed for c in k))

    return NodeKeys(mapped(input.unique_keys), mapped(input.upsert_keys))


def forwarded_keys(input: Node) -> NodeKeys:
    """A node that emits each input row at most once, with its columns (temporal and lookup joins on their
    left input, OVER aggregation, dropping ``-U``, the sink): the input's keys."""
    return NodeKeys(input.unique_keys, input.upsert_keys)


def grouping_keys(columns: Sequence[str]) -> NodeKeys:
    """A node holding one row per value of ``columns`` (deduplication, Top-1, group aggregation, the sink
    upsert materializer): those columns are both keys."""
    keys = (tuple(sorted(columns)),)
    return NodeKeys(keys, keys)


def rank_keys(input: Node, partition_by: Sequence[str], rank_field: str, top1: bool) -> NodeKeys:
    """A Top-N (Flink ``FlinkRelMdUniqueKeys.getRankUniqueKeys``, ``FlinkRelMdUpsertKeys`` of a Rank): a Top-1's
    partition columns; else the partition columns with the rank number, and the input's keys (upsert keys: those
    that hold the partition columns)."""
    if top1:
        return grouping_keys(partition_by)
    own = (*partition_by, rank_field)
    part = set(partition_by)
    return NodeKeys(
        _minimal([own, *input.unique_keys]), _minimal([own, *(k for k in input.upsert_keys if part <= set(k))])
    )


def join_input_spec(join_keys: Sequence[str], upsert_keys: Keys) -> JoinInputSideSpec:
    """The unique key and state layout of a regular join's input with equi-join columns ``join_keys``.

    The input's upsert key inside the join key if there is one (JoinKeyContainsUniqueKey: one row per
    join key), else its first upsert key (InputSideHasUniqueKey), else none (InputSideHasNoUniqueKey);
    Flink ``JoinInputSideSpec`` / ``JoinUtil.analyzeJoinInput``.

    Example:
        >>> join_input_spec(["a"], (("a",),)).layout.value
        'JoinKeyContainsUniqueKey'
    """
    inside = [k for k in upsert_keys if set(k) <= set(join_keys)]
    unique_key = next(iter(inside or upsert_keys), None)
    positions = None
    if unique_key:
        # Relative to the join key columns; columns outside it get positions past them.
        positions = [join_keys.index(c) if c in join_keys else len(join_keys) + i for i, c in enumerate(unique_key)]
    return JoinInputSideSpec(unique_key, choose_layout(range(len(join_keys)), positions))


def regular_join_keys(join: RegularJoin) -> NodeKeys:
    """A regular join's output keys, in its output field names, from its kind, equi-join pairs and the
    sides' unique keys (set from :func:`join_input_spec` before this is called)."""
    return NodeKeys(
        *derive_output_keys(
            JoinType.parse(join.kind),
            join.left.field_names,
            join.right_names,
            join.equi_pairs,
            join.left_unique_key,
            join.right_output_unique_key,
        )
    )


def derive_output_keys(
    join_type: JoinType,
    left_columns: Sequence[str],
    right_columns: Sequence[str],
    on: Sequence[tuple[str, str]],
    left_unique_key: Sequence[str] | None,
    right_unique_key: Sequence[str] | None,
) -> tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]]:
    """Unique keys and upsert keys of the join output, as Flink derives them.

    A declared input unique key is taken as the input's upsert key too (a source
    primary key is both). Rules (Flink ``FlinkRelMdUniqueKeys.getJoinUniqueKeys``):
    every union of a left and a right key; plus the left keys when the right join
    columns contain a right key (each left row meets at most one right row) and the
    join does not pad the left side; symmetrically for the right; SEMI/ANTI keep the
    left keys. For upsert keys only input keys that contain their side's join
    columns take part (Flink ``FlinkRelMdUpsertKeys``).

    Returns:
        ``(unique_keys, upsert_keys)``, each a tuple of column-name tuples in output order.

    Example:
        >>> derive_output_keys(JoinType.LEFT, ["l_ok", "l_ln"], ["o_ok"], [("l_ok", "o_ok")],
        ...                    ["l_ok", "l_ln"], ["o_ok"])
        ((('l_ok', 'l_ln'), ('l_ok', 'l_ln', 'o_ok')), (('l_ok', 'l_ln'), ('l_ok', 'l_ln', 'o_ok')))
    """
    order = {c: i for i, c in enumerate([*left_columns, *right_columns])}
    left_on = frozenset(l for l, _ in on)
    right_on = frozenset(r for _, r in on)

    def combine(left_keys: list[frozenset], right_keys: list[frozenset], left_unique: bool, right_unique: bool) -> set:
        if not join_type.projects_right:
            return set(left_keys)
        keys = {lk | rk for lk in left_keys for rk in right_keys}
        if right_unique and join_type not in (JoinType.RIGHT, JoinType.FULL):
            keys |= set(left_keys)
        if left_unique and join_type not in (JoinType.LEFT, JoinType.FULL):
            keys |= set(right_keys)
        return keys

    left_keys = [frozenset(left_unique_key)] if left_unique_key else []
    right_keys = [frozenset(right_unique_key)] if right_unique_key else []
    left_unique = any(k <= left_on for k in left_keys)
    right_unique = any(k <= right_on for k in right_keys)
    unique = combine(left_keys, right_keys, left_unique, right_unique)
    upsert = combine(
        [k for k in left_keys if left_on <= k], [k for k in right_keys if right_on <= k], left_unique, right_unique
    )

    def ordered(keys: set) -> tuple[tuple[str, ...], ...]:
        return tuple(sorted((tuple(sorted(k, key=order.__getitem__)) for k in keys), key=lambda k: (len(k), k)))

    return ordered(unique), ordered(upsert)
