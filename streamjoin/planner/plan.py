"""The physical plan: one node per Flink stream operator, with its changelog mode and keys.

Nodes mirror Flink's ``StreamPhysical*`` nodes (and print under their names in
EXPLAIN): ``TableSourceScan``, ``Calc`` (projection + filter), ``Join``
(regular, incl. semi/anti), ``IntervalJoin``, ``TemporalJoin``, ``LookupJoin``,
``OverAggregate``, ``Deduplicate`` / ``Rank``, ``GroupAggregate``, ``WindowTableFunction``, ``WindowAggregate``,
``DropUpdateBefore``, ``ChangelogNormalize``, ``SinkUpsertMaterializer``, ``Sink``.

Every node knows, from its inputs, at construction:

- ``fields``: its output columns (:class:`Field`: name, :class:`~streamjoin.planner.types.SqlType`);
  names are unique within a node and are the DataFrame column names at run time;
- ``modify_kinds``: Flink's ModifyKindSet, a subset of ``{"I", "U", "D"}`` (docs/semantics.md §1);
- ``unique_keys`` and ``upsert_keys``: tuples of field names, from the rules of :mod:`streamjoin.planner.metadata`.

The changelog pass (:mod:`streamjoin.planner.changelog_modes`) then sets
``update_kind`` (``NONE``, ``ONLY_UPDATE_AFTER``, ``BEFORE_AND_AFTER``), hence
``changelog_mode`` (``[I,UB,UA,D]``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from sqlglot import exp

from streamjoin.changelog import ChangelogMode, RowKind
from streamjoin.planner import metadata
from streamjoin.planner.catalog import TableDef
from streamjoin.planner.dialect import Flink
from streamjoin.planner.metadata import Keys
from streamjoin.planner.types import SqlType

__all__ = [
    "Aggregate",
    "Calc",
    "ChangelogNormalize",
    "Deduplicate",
    "DropUpdateBefore",
    "Field",
    "GroupAggregate",
    "IntervalJoin",
    "JoinKind",
    "LookupJoin",
    "Node",
    "OverAggregate",
    "Rank",
    "RegularJoin",
    "Sink",
    "SinkUpsertMaterializer",
    "TableScan",
    "TemporalJoin",
    "Union",
    "UpdateKind",
    "WindowAggregate",
    "WindowKind",
    "WindowRank",
    "WindowSpec",
    "WindowTableFunction",
    "uniquify",
    "walk",
    "watermarked_tables",
]

JoinKind = Literal["inner", "left", "right", "full", "semi", "anti"]
UpdateKind = Literal["NONE", "ONLY_UPDATE_AFTER", "BEFORE_AND_AFTER"]
WindowKind = Literal["TUMBLE", "HOP", "CUMULATE", "SESSION"]

_JOIN_TYPE_NAMES = {
    "inner": "InnerJoin",
    "left": "LeftOuterJoin",
    "right": "RightOuterJoin",
    "full": "FullOuterJoin",
    "semi": "LeftSemiJoin",
    "anti": "LeftAntiJoin",
}
ALL_KINDS = frozenset("IUD")


@dataclass(frozen=True)
class Field:
    """An output column of a node: its name (unique within the node) and type (``None`` if only Spark knows it)."""

    name: str
    type: SqlType | None

    @property
    def is_rowtime(self) -> bool:
        """A rowtime attribute (declared with ``WATERMARK FOR``)."""
        return self.type is not None and self.type.time_attribute == "ROWTIME"

    @property
    def is_proctime(self) -> bool:
        """A ``PROCTIME()`` attribute."""
        return self.type is not None and self.type.time_attribute == "PROCTIME"


@dataclass(frozen=True)
class Aggregate:
    """One aggregate call: ``function(arg) AS output``; ``function`` as in :mod:`streamjoin.runtime.aggregates`
    (``COUNT``, ``COUNT_DISTINCT``, ``SUM``, ``AVG``, ``MIN``, ``MAX``, ``FIRST_VALUE``, ``LAST_VALUE``);
    ``arg`` is an input field name, ``None`` for ``COUNT(*)``."""

    output: str
    function: str
    arg: str | None
    type: SqlType | None

    def __str__(self) -> str:
        if self.function == "COUNT_DISTINCT":
            call = f"COUNT(DISTINCT {self.arg})"
        else:
            call = f"{self.function}({self.arg or '*'})"
        return f"{call} AS {self.output}"


def uniquify(names: list[str], taken: set[str]) -> list[str]:
    """Rename ``names`` that clash with ``taken`` (or each other) as Calcite does: ``x`` → ``x0``, ``x1``..."""
    out = []
    used = set(taken)
    for name in names:
        new, i = name, 0
        while new in used:
            new, i = f"{name}{i}", i + 1
        used.add(new)
        out.append(new)
    return out


class Node:
    """Base of plan nodes. Subclasses set ``name``, ``inputs``, ``fields`` and derive kinds and keys."""

    name = "Node"
    #: Whether the node can emit updates without UPDATE_BEFORE when its consumer asks (Flink's ONLY_UPDATE_AFTER).
    supports_only_update_after = False
    #: Whether the node is an event-time operator: it follows the watermark of the tables it reads (timers).
    reads_watermark = False
    #: How far (ms) the watermark of this node's output falls behind the watermark of its inputs: an interval
    #: join holds its output watermark back by its largest output delay (Flink's
    #: ``KeyedCoProcessOperatorWithWatermarkDelay``), every other node forwards its input watermark.
    holds_back_watermark_ms = 0

    inputs: list[Node]
    fields: list[Field]
    modify_kinds: frozenset[str]
    unique_keys: Keys
    upsert_keys: Keys
    update_kind: UpdateKind = "BEFORE_AND_AFTER"

    def field(self, name: str) -> Field:
        """The output field called ``name``."""
        return next(f for f in self.fields if f.name == name)

    @property
    def field_names(self) -> list[str]:
        """The output column names, in order."""
        return [f.name for f in self.fields]

    @property
    def changelog_mode(self) -> ChangelogMode:
        """The RowKinds this node emits (after the changelog pass decided about UPDATE_BEFORE)."""
        kinds = set()
        if "I" in self.modify_kinds:
            kinds.add(RowKind.INSERT)
        if "U" in self.modify_kinds:
            kinds.add(RowKind.UPDATE_AFTER)
            if self.update_kind != "ONLY_UPDATE_AFTER":
                kinds.add(RowKind.UPDATE_BEFORE)
        if "D" in self.modify_kinds:
            kinds.add(RowKind.DELETE)
        return ChangelogMode(frozenset(kinds))

    @property
    def is_insert_only(self) -> bool:
        """Emits only INSERTs."""
        return self.modify_kinds == {"I"}

    @property
    def input_watermark_delay_ms(self) -> int:
        """How far (ms) the watermark this node's inputs carry falls behind the sources' watermark: the largest
        sum of :attr:`holds_back_watermark_ms` on a path from a source (Flink's operator watermark is the
        minimum over its inputs')."""
        return max((i.input_watermark_delay_ms + i.holds_back_watermark_ms for i in self.inputs), default=0)

    def source_tables(self) -> set[str]:
        """Names of the tables this node reads, through all its inputs."""
        return set().union(*(i.source_tables() for i in self.inputs)) if self.inputs else set()

    def attributes(self) -> list[tuple[str, str]]:
        """``(name, value)`` pairs EXPLAIN prints for this node, in Flink's order."""
        return []

    def describe(self) -> str:
        """``Name(attr=[value], …)`` as Flink's EXPLAIN prints a node (without changelog mode)."""
        return f"{self.name}({', '.join(f'{k}=[{v}]' for k, v in self.attributes())})"

    def __repr__(self) -> str:
        return self.describe()


def _expr(e: exp.Expr | None) -> str:
    """An expression as EXPLAIN prints it: field names unquoted."""
    if e is None:
        return ""
    # A Var prints its name as it is: EXPR$1, w0$o0 (an identifier with $ would be quoted).
    unquoted = e.transform(lambda n: exp.var(n.name) if isinstance(n, exp.Identifier) else n)
    return unquoted.sql(Flink)


def _names(names) -> str:
    return ", ".join(names)


def _state_ttl(state_ttl_ms: int | None) -> list[tuple[str, str]]:
    return [] if state_ttl_ms is None else [("stateTtl", f"{state_ttl_ms} ms")]


def walk(node: Node):
    """Yield ``node`` and all nodes below it (pre-order)."""
    yield node
    for child in node.inputs:
        yield from walk(child)


def watermarked_tables(node: Node) -> set[str]:
    """The tables whose watermark an event-time operator of ``node``'s plan follows (:attr:`Node.reads_watermark`).

    In Flink each operator sees the watermark of its own inputs only, and a table that no event-time operator
    reads changes no output by its watermark; Spark has one watermark per query, the minimum over every input
    that declares one, so such a table's watermark could only hold back the timers of the others.
    """
    return set().union(*(n.source_tables() for n in walk(node) if n.reads_watermark))


class TableScan(Node):
    """Reads a declared table (``TableSourceScan``); computed columns are part of its fields."""

    name = "TableSourceScan"
    supports_only_update_after = True

    def __init__(self, table: TableDef, fields: list[Field], computed: dict[str, exp.Expr] | None = None):
        self.table = table
        self.inputs = []
        self.fields = fields
        #: computed column → its expression over the physical columns
        self.computed = computed or {}
        self.modify_kinds = frozenset(
            ({"I"} if RowKind.INSERT in table.source_kinds else set())  # upsert-kafka declares [UA,D], as Flink's
            | ({"U"} if {RowKind.UPDATE_AFTER, RowKind.UPDATE_BEFORE} & table.source_kinds else set())
            | ({"D"} if RowKind.DELETE in table.source_kinds else set())
        )
        self.unique_keys, self.upsert_keys = metadata.scan_keys(table.primary_key)

    def source_tables(self) -> set[str]:
        return {self.table.name}

    def attributes(self):
        return [
            ("table", f"[default_catalog, default_database, {self.table.name}]"),
            ("fields", _names(self.field_names)),
        ]


class Calc(Node):
    """Projection and filter (Flink's ``Calc``): ``projections`` are ``(Field, expression over input fields)``."""

    name = "Calc"
    supports_only_update_after = True

    def __init__(self, input: Node, projections: list[tuple[Field, exp.Expr]], condition: exp.Expr | None = None):
        self.inputs = [input]
        self.projections = projections
        self.condition = condition
        self.fields = [f for f, _ in projections]
        self.modify_kinds = input.modify_kinds
        self.unique_keys, self.upsert_keys = metadata.calc_keys(input, projections)

    @property
    def is_identity(self) -> bool:
        """Selects every input field unchanged, in order, and filters nothing."""
        return self.condition is None and [
            (f.name, e.name if isinstance(e, exp.Column) else None) for f, e in self.projections
        ] == [(n, n) for n in self.inputs[0].field_names]

    def attributes(self):
        select = [
            f.name if isinstance(e, exp.Column) and e.name == f.name else f"{_expr(e)} AS {f.name}"
            for f, e in self.projections
        ]
        attrs = [("select", _names(select))]
        if self.condition is not None:
            attrs.append(("where", _expr(self.condition)))
        return attrs


class _Join(Node):
    """Shared by the joins: left/right inputs, join type, equi-key pairs, output fields (right names uniquified)."""

    def __init__(self, kind: JoinKind, left: Node, right: Node, left_keys: list[str], right_keys: list[str]):
        self.kind = kind
        self.inputs = [left, right]
        self.left_keys = list(left_keys)
        self.right_keys = list(right_keys)
        left_nullable = kind in ("right", "full")
        right_nullable = kind in ("left", "full")
        self.right_names = uniquify(right.field_names, set(left.field_names))
        if kind in ("semi", "anti"):
            self.fields = [self._output_field(f, False) for f in left.fields]
        else:
            self.fields = [self._output_field(f, left_nullable) for f in left.fields] + [
                self._output_field(Field(n, f.type), right_nullable) for n, f in zip(self.right_names, right.fields)
            ]

    def _output_field(self, f: Field, nullable: bool) -> Field:
        # A regular join's output has no time attribute (Flink materialises them); the event-time joins keep theirs
        # (_keep_rowtimes).
        t = f.type.plain() if f.type is not None else None
        return Field(f.name, t.with_nullable(True) if t is not None and nullable else t)

    def _keep_rowtimes(self, names: Iterable[str]) -> None:
        """Output fields ``names`` stay rowtime attributes, as an event-time join's output keeps its inputs'
        (Flink's interval join both sides', its temporal join the probe side's): an event-time operator may
        follow (docs/semantics.md §11.6)."""
        for i, f in enumerate(self.fields):
            if f.name in names and f.type is not None:
                self.fields[i] = Field(f.name, replace(f.type, time_attribute="ROWTIME"))

    @property
    def left(self) -> Node:
        return self.inputs[0]

    @property
    def right(self) -> Node:
        return self.inputs[1]

    def right_name(self, name: str) -> str:
        """The output name of right field ``name``."""
        return self.right_names[self.right.field_names.index(name)]

    @property
    def equi_pairs(self) -> list[tuple[str, str]]:
        """The equi-join pairs ``(left field, right output field)``."""
        return [(l, self.right_name(r)) for l, r in zip(self.left_keys, self.right_keys)]

    def _where(self) -> str:
        return " AND ".join(f"{l} = {r}" for l, r in self.equi_pairs)


class RegularJoin(_Join):
    """A regular (unbounded) join, incl. semi and anti (Flink's ``Join``); docs/semantics.md §2.

    Args:
        residual: the non-equi part of the condition over the output fields (for semi/anti: over
            left fields then right fields renamed as in a full join), or ``None``.
        state_ttl_ms: idle state retention, ``None`` for none.
    """

    name = "Join"

    def __init__(
        self, kind, left, right, left_keys, right_keys, residual: exp.Expr | None, state_ttl_ms: int | None = None
    ):
        super().__init__(kind, left, right, left_keys, right_keys)
        self.residual = residual
        self.state_ttl_ms = state_ttl_ms
        if kind in ("inner", "semi"):
            self.modify_kinds = left.modify_kinds | right.modify_kinds
        else:
            self.modify_kinds = ALL_KINDS
        # The state layouts and output keys are handed to the operator, which derives none itself.
        self.left_unique_key, self.left_layout = metadata.join_input_spec(self.left_keys, left.upsert_keys)
        self.right_unique_key, self.right_layout = metadata.join_input_spec(self.right_keys, right.upsert_keys)
        self.unique_keys, self.upsert_keys = metadata.regular_join_keys(self)

    @property
    def right_output_unique_key(self) -> tuple[str, ...] | None:
        """The right input's unique key in output field names, or ``None``."""
        return tuple(self.right_name(c) for c in self.right_unique_key) if self.right_unique_key else None

    def attributes(self):
        where = self._where()
        if self.residual is not None:
            where = f"{where} AND {_expr(self.residual)}" if where else _expr(self.residual)
        attrs = [
            ("joinType", _JOIN_TYPE_NAMES[self.kind]),
            ("where", where or "true"),
            ("select", _names(self.field_names)),
        ]
        for side, layout, key in (
            ("left", self.left_layout, self.left_unique_key),
            ("right", self.right_layout, self.right_unique_key),
        ):
            attrs.append((f"{side}InputSpec", f"{layout.value}{'(' + _names(key) + ')' if key else ''}"))
        return attrs + _state_ttl(self.state_ttl_ms)


class IntervalJoin(_Join):
    """An interval join (Flink's ``IntervalJoin``): ``right.time - left.time`` in ``[lower_ms, upper_ms]``.

    See docs/semantics.md §3.

    ``left_time`` / ``right_time`` are rowtime fields, or proctime fields (``rowtime=False``).
    ``post_filter`` is the rest of the condition (the residual), part of the match for every join type (§3.5).
    """

    name = "IntervalJoin"

    def __init__(
        self,
        kind,
        left,
        right,
        left_keys,
        right_keys,
        lower_ms: int,
        upper_ms: int,
        left_time: str,
        right_time: str,
        rowtime: bool,
        post_filter: exp.Expr | None = None,
    ):
        super().__init__(kind, left, right, left_keys, right_keys)
        self.lower_ms, self.upper_ms = lower_ms, upper_ms
        self.left_time, self.right_time = left_time, right_time
        self.rowtime = rowtime
        self.reads_watermark = rowtime
        self.post_filter = post_filter
        self.modify_kinds = frozenset("I")
        self.unique_keys, self.upsert_keys = metadata.NO_KEYS
        if rowtime:
            self._keep_rowtimes([left_time, self.right_name(right_time)])
            # Flink's TimeIntervalJoin.getMaxOutputDelay: max(leftRelativeSize, rightRelativeSize).
            self.holds_back_watermark_ms = max(upper_ms, -lower_ms)

    def attributes(self):
        bounds = (
            f"isRowTime={'true' if self.rowtime else 'false'}, leftLowerBound={-self.upper_ms}, "
            f"leftUpperBound={-self.lower_ms}, leftTimeIndex={self.left.field_names.index(self.left_time)}, "
            f"rightTimeIndex={self.right.field_names.index(self.right_time)}"
        )
        where = self._where() or "true"
        if self.post_filter is not None:
            where += f" AND {_expr(self.post_filter)}"
        return [
            ("joinType", _JOIN_TYPE_NAMES[self.kind]),
            ("windowBounds", bounds),
            ("where", where),
            ("select", _names(self.field_names)),
        ]


class WindowJoin(_Join):
    """A window join (Flink's ``WindowJoin``, ``WindowJoinOperator``): two window table functions of the same windows
    joined on their ``window_start``, ``window_end`` and ``left_keys``/``right_keys``; each window's rows are joined
    once the watermark passes its end, and freed (docs/semantics.md §11.4).

    ``left_window`` / ``right_window`` are each side's ``(window_start, window_end)`` field names (the right one in
    the right input's names); ``residual`` is the rest of the condition over the output fields (for semi/anti: left
    fields then right fields renamed as in a full join), part of the match for every join type. Insert-only output;
    time attributes become plain timestamps.
    """

    name = "WindowJoin"
    reads_watermark = True

    def __init__(
        self,
        kind,
        left,
        right,
        left_keys,
        right_keys,
        window: WindowSpec,
        left_window: tuple[str, str],
        right_window: tuple[str, str],
        residual: exp.Expr | None = None,
    ):
        super().__init__(kind, left, right, left_keys, right_keys)
        self.window = window
        self.left_window, self.right_window = left_window, right_window
        self.residual = residual
        self.modify_kinds = frozenset("I")
        self.unique_keys, self.upsert_keys = metadata.NO_KEYS

    def _window(self, start: str, end: str) -> str:
        """The window as Flink's EXPLAIN prints a window join's: ``TUMBLE(win_start=[…], win_end=[…], size=[…])``."""
        spec = str(self.window).replace(f"time_col=[{self.window.time_col}], ", "")
        at = spec.index("(") + 1
        return f"{spec[:at]}win_start=[{start}], win_end=[{end}], {spec[at:]}"

    def attributes(self):
        where = " AND ".join(
            [
                f"{self.left_window[0]} = {self.right_name(self.right_window[0])}",
                f"{self.left_window[1]} = {self.right_name(self.right_window[1])}",
                *(f"{l} = {r}" for l, r in self.equi_pairs),
            ]
        )
        if self.residual is not None:
            residual = _expr(self.residual)
            where += f" AND ({residual})" if isinstance(self.residual, exp.Or) else f" AND {residual}"
        return [
            ("leftWindow", self._window(*self.left_window)),
            ("rightWindow", self._window(*self.right_window)),
            ("joinType", _JOIN_TYPE_NAMES[self.kind]),
            ("where", where),
            ("select", _names(self.field_names)),
        ]


class TemporalJoin(_Join):
    """An event-time temporal join against a versioned table (Flink's ``TemporalJoin``); docs/semantics.md §4.

    ``right`` is the versioned table; with ``append_only_versions`` it is the append-only log of a versioned
    view (``ROW_NUMBER() … ORDER BY time DESC = 1``), deduplicated into versions by the operator.
    """

    name = "TemporalJoin"
    reads_watermark = True

    def __init__(
        self,
        kind,
        left,
        right,
        left_keys,
        right_keys,
        left_time: str,
        right_time: str,
        primary_key: tuple[str, ...],
        append_only_versions: bool,
    ):
        super().__init__(kind, left, right, left_keys, right_keys)
        self.left_time, self.right_time = left_time, right_time
        self.primary_key = primary_key
        self.append_only_versions = append_only_versions
        self.modify_kinds = left.modify_kinds
        self.unique_keys, self.upsert_keys = metadata.forwarded_keys(left)
        self._keep_rowtimes([left_time])

    def attributes(self):
        pk = _names(self.right_name(k) for k in self.primary_key)
        cond = (
            f"{self._where()} AND __TEMPORAL_JOIN_CONDITION({self.left_time}, {self.right_name(self.right_time)}, "
            f"__TEMPORAL_JOIN_CONDITION_PRIMARY_KEY({pk}))"
        )
        attrs = [("joinType", _JOIN_TYPE_NAMES[self.kind]), ("where", cond), ("select", _names(self.field_names))]
        if self.append_only_versions:
            attrs.append(("versions", "append-only log, latest row per key by time"))
        return attrs


class LookupJoin(_Join):
    """A processing-time lookup join against the current rows of a Delta table (Flink's ``LookupJoin``)."""

    name = "LookupJoin"

    def __init__(self, kind, left, right: TableScan, left_keys, right_keys):
        super().__init__(kind, left, right, left_keys, right_keys)
        # A stream-static join keeps the probe rows' columns and Spark's watermark: time attributes pass through.
        self.fields[: len(left.fields)] = left.fields
        self.modify_kinds = left.modify_kinds
        self.unique_keys, self.upsert_keys = metadata.forwarded_keys(left)

    @property
    def right(self) -> TableScan:
        right = self.inputs[1]
        assert isinstance(right, TableScan)  # as built
        return right

    def source_tables(self) -> set[str]:
        return self.left.source_tables()

    def attributes(self):
        lookup = ", ".join(f"{self.right_name(r)}={l}" for l, r in zip(self.left_keys, self.right_keys))
        return [
            ("table", f"[default_catalog, default_database, {self.right.table.name}]"),
            ("joinType", _JOIN_TYPE_NAMES[self.kind]),
            ("lookup", lookup),
            ("select", _names(self.field_names)),
        ]


class OverAggregate(Node):
    """``agg(…) OVER (PARTITION BY … ORDER BY time {ROWS|RANGE} BETWEEN … PRECEDING AND CURRENT ROW)``.

    See docs/semantics.md §5.

    ``order_by`` is a rowtime field, or a proctime field (``rowtime=False``); ``preceding`` is a row
    count (ROWS) or milliseconds (RANGE), ``None`` for UNBOUNDED.
    """

    name = "OverAggregate"

    def __init__(
        self,
        input: Node,
        partition_by: list[str],
        order_by: str,
        rowtime: bool,
        frame: str,
        preceding: int | None,
        aggregates: list[Aggregate],
    ):
        self.inputs = [input]
        self.partition_by = partition_by
        self.order_by = order_by
        self.rowtime = rowtime
        self.reads_watermark = rowtime
        self.frame = frame
        self.preceding = preceding
        self.aggregates = aggregates
        self.fields = [
            Field(f.name, f.type.plain() if f.type else None) if f.name == order_by else f for f in input.fields
        ]
        self.fields += [Field(a.output, a.type) for a in aggregates]
        self.modify_kinds = frozenset("I")
        self.unique_keys, self.upsert_keys = metadata.forwarded_keys(input)

    def attributes(self):
        if self.preceding is None:
            start = "UNBOUNDED"
        else:
            start = str(self.preceding)
        window = f"{'ROWS' if self.frame == 'rows' else 'RANG'} BETWEEN {start} PRECEDING AND CURRENT ROW"
        return [
            ("partitionBy", _names(self.partition_by)),
            ("orderBy", f"{self.order_by} ASC"),
            ("window", window),
            ("select", _names(self.inputs[0].field_names + [str(a) for a in self.aggregates])),
        ]


class Deduplicate(Node):
    """``ROW_NUMBER() OVER (PARTITION BY keys ORDER BY order_by {ASC|DESC}) = 1``; docs/semantics.md §6.

    Flink plans a Top-1 as ``Deduplicate`` when ``order_by`` is a time attribute (``time`` = ``"ROWTIME"`` /
    ``"PROCTIME"``; other Top-N are a :class:`Rank`). ``keep`` is ``"first"`` (ASC) or ``"last"`` (DESC).
    ``rank_field`` is the name of the row-number column (the constant 1). ``state_ttl_ms``: idle state retention
    (``table.exec.state.ttl``), ``None`` for none.
    """

    name = "Deduplicate"
    supports_only_update_after = True

    def __init__(
        self,
        input: Node,
        keys: list[str],
        order_by: str,
        time: str,
        keep: Literal["first", "last"],
        rank_field: str,
        state_ttl_ms: int | None = None,
    ):
        self.inputs = [input]
        self.state_ttl_ms = state_ttl_ms
        self.keys = keys
        self.order_by = order_by
        self.time = time
        self.keep = keep
        self.rank_field = rank_field
        # Keeping the first row on event time holds it until the watermark passes it; the others emit at once.
        self.reads_watermark = time == "ROWTIME" and keep == "first"
        self.fields = list(input.fields) + [Field(rank_field, SqlType("BIGINT", nullable=False))]
        self.modify_kinds = frozenset("I") if keep == "first" else frozenset("IU")
        self.unique_keys, self.upsert_keys = metadata.grouping_keys(keys)

    def attributes(self):
        return [
            ("keep", "FirstRow" if self.keep == "first" else "LastRow"),
            ("key", _names(self.keys)),
            ("order", self.time),
        ] + _state_ttl(self.state_ttl_ms)


RankStrategy = Literal["AppendFastStrategy", "UpdateFastStrategy", "RetractStrategy"]
Monotonicity = Literal["CONSTANT", "INCREASING", "DECREASING"]


def modified_monotonicity(node: Node, field: str) -> Monotonicity | None:
    """How the values of ``field`` change when ``node`` updates a row (Flink's ``FlinkRelMdModifiedMonotonicity``, the
    cases it can prove here): a group aggregate over insert-only input keeps its grouping keys ``CONSTANT``, its
    ``COUNT``, ``COUNT(DISTINCT)`` and ``MAX`` only grow, its ``MIN`` only shrinks; a Calc without a condition passes
    a column's on. ``None``: not known to be monotonic."""
    if isinstance(node, Calc):
        if node.condition is not None:  # a filter cannot pass upserts through (FLINK-9528)
            return None
        source = next((e for f, e in node.projections if f.name == field), None)
        return modified_monotonicity(node.inputs[0], source.name) if isinstance(source, exp.Column) else None
    if isinstance(node, GroupAggregate) and node.inputs[0].is_insert_only:
        if field in node.group_by:
            return "CONSTANT"
        call = next((a for a in node.aggregates if a.output == field), None)
        if call is not None and call.function in ("COUNT", "COUNT_DISTINCT", "MAX"):
            return "INCREASING"
        if call is not None and call.function == "MIN":
            return "DECREASING"
    return None


def _rank_strategy(input: Node, partition_by: list[str], order_by: list[tuple[str, bool, bool]]):
    """Flink's ``RankProcessStrategy.analyzeRankProcessStrategies``, with the first strategy the changelog inference
    accepts: the strategy and, for ``UpdateFastStrategy``, the input's upsert key it keys rows by."""
    if input.is_insert_only:
        return "AppendFastStrategy", None
    key = next((k for k in input.upsert_keys if set(partition_by) <= set(k)), None)
    monotonic = {(f, asc): modified_monotonicity(input, f) for f, asc, _ in order_by}
    if key is not None and all(
        m == "CONSTANT" or (m == "INCREASING" and not asc) or (m == "DECREASING" and asc)
        for (_, asc), m in monotonic.items()
    ):
        return "UpdateFastStrategy", key
    return "RetractStrategy", None


class Rank(Node):
    """``ROW_NUMBER() OVER (PARTITION BY partition_by ORDER BY order_by) AS rn`` filtered to ``rank_start <= rn <=
    rank_end``: a Top-N over any changelog (Flink's ``StreamPhysicalRank``); docs/semantics.md §6.4.

    ``order_by`` holds ``(field, ascending, nulls_first)``; ``rank_end`` is ``None`` until an outer filter bounds
    it (:attr:`pending` holds the ROW_NUMBER() call until then). ``strategy`` follows Flink's
    ``RankProcessStrategy``: ``AppendFastStrategy`` over insert-only input, ``UpdateFastStrategy`` over updates keyed
    by an upsert key that holds the partition (:attr:`row_key`) whose sort key only improves
    (:func:`modified_monotonicity`; it reads them without ``-U``), ``RetractStrategy`` otherwise.
    ``output_rank``: whether the operator outputs the rank number (Flink's ``outputRankNumber``), decided once the
    query is planned (:func:`~streamjoin.planner.rules.rank.check_ranks`): not when the range holds one rank (the
    column is that constant, Flink's ``RankNumberColumnRemoveRule``) or nothing above reads it (the column is null).
    ``state_ttl_ms``: idle state retention (``table.exec.state.ttl``), ``None`` for none.
    """

    name = "Rank"
    supports_only_update_after = True
    pending: exp.Expr | None

    def __init__(
        self,
        input: Node,
        partition_by: list[str],
        order_by: list[tuple[str, bool, bool]],
        rank_field: str,
        state_ttl_ms: int | None = None,
    ):
        self.inputs = [input]
        self.partition_by = partition_by
        self.order_by = order_by
        self.rank_field = rank_field
        self.state_ttl_ms = state_ttl_ms
        self.rank_start: int = 1
        self.rank_end: int | None = None
        self.pending = None
        self.output_rank = True
        self.strategy: RankStrategy
        self.strategy, self.row_key = _rank_strategy(input, partition_by, order_by)
        self.fields = list(input.fields) + [Field(rank_field, SqlType("BIGINT", nullable=False))]
        self.modify_kinds = ALL_KINDS
        self.derive_keys()

    def derive_keys(self) -> None:
        """Set the keys for the current rank range (a Top-1 is keyed by its partition alone)."""
        top1 = (self.rank_start, self.rank_end) == (1, 1)
        input, partition = self.inputs[0], self.partition_by
        self.unique_keys, self.upsert_keys = metadata.rank_keys(input, partition, self.rank_field, top1)

    @property
    def function(self) -> Literal["first", "top1", "append", "update", "retract"]:
        """Flink's Top-N function for it (``StreamExecRank``): over insert-only input ``AppendOnlyFirstNFunction``
        ordered by processing time ascending, ``FastTop1Function`` for a Top-1, else ``AppendOnlyTopNFunction``;
        over monotonic upserts ``FastTop1Function`` for a Top-1, else ``UpdatableTopNFunction``; over other updates
        ``RetractableTopNFunction``."""
        top1 = (self.rank_start, self.rank_end) == (1, 1)
        if self.strategy == "RetractStrategy":
            return "retract"
        if self.strategy == "UpdateFastStrategy":
            return "top1" if top1 else "update"
        field = self.inputs[0].field(self.order_by[0][0])
        if len(self.order_by) == 1 and self.order_by[0][1] and field.is_proctime:
            return "first"
        return "top1" if top1 else "append"

    def attributes(self):
        order = ", ".join(
            f"{f} {'ASC' if asc else 'DESC'}"
            + ("" if nulls_first == asc else f" NULLS {'FIRST' if nulls_first else 'LAST'}")
            for f, asc, nulls_first in self.order_by
        )
        select = self.inputs[0].field_names + ([self.rank_field] if self.output_rank else [])
        strategy = str(self.strategy)
        if self.row_key is not None:
            names = self.inputs[0].field_names
            strategy += f"[{','.join(str(i) for i in sorted(names.index(c) for c in self.row_key))}]"
        return [
            ("strategy", strategy),
            ("rankType", "ROW_NUMBER"),
            ("rankRange", f"rankStart={self.rank_start}, rankEnd={self.rank_end}"),
            ("partitionBy", _names(self.partition_by)),
            ("orderBy", order),
            ("select", _names(select)),
        ] + _state_ttl(self.state_ttl_ms)


class GroupAggregate(Node):
    """``GROUP BY group_by`` with ``aggregates`` over any changelog; docs/semantics.md §6.

    ``state_ttl_ms``: idle state retention (``table.exec.state.ttl``), ``None`` for none.
    ``mini_batch``: one emission per group and micro-batch (``table.exec.mini-batch.enabled``).
    """

    name = "GroupAggregate"
    supports_only_update_after = True

    def __init__(
        self,
        input: Node,
        group_by: list[str],
        aggregates: list[Aggregate],
        state_ttl_ms: int | None = None,
        *,
        mini_batch: bool = False,
    ):
        self.inputs = [input]
        self.state_ttl_ms = state_ttl_ms
        self.mini_batch = mini_batch
        self.group_by = group_by
        self.aggregates = aggregates
        self.fields = [Field(g, t.plain() if (t := input.field(g).type) else None) for g in group_by]
        self.fields += [Field(a.output, a.type) for a in aggregates]
        self.modify_kinds = frozenset("IU") if input.is_insert_only else ALL_KINDS
        self.unique_keys, self.upsert_keys = metadata.grouping_keys(group_by)

    def attributes(self):
        attrs = [("groupBy", _names(self.group_by))] if self.group_by else []
        attrs += [("select", _names(self.group_by + [str(a) for a in self.aggregates]))] + _state_ttl(self.state_ttl_ms)
        return attrs + ([("miniBatch", "true")] if self.mini_batch else [])


def _duration(ms: int) -> str:
    """A window length as Flink's EXPLAIN prints it (``10 min``, ``1 h``, ``5 s``, ``1500 ms``)."""
    for unit, length in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1_000)):
        if ms % length == 0:
            return f"{ms // length} {unit}"
    return f"{ms} ms"


@dataclass(frozen=True)
class WindowSpec:
    """The windows of a window table function (docs/semantics.md §11); lengths in milliseconds.

    ``kind`` is ``TUMBLE`` (``size``), ``HOP`` (``size`` every ``step``, Flink's slide), ``CUMULATE``
    (windows growing by ``step`` up to ``size``) or ``SESSION`` (rows closer than the gap ``size`` in one window, per
    ``partition_by`` key); ``offset`` shifts the windows' alignment from the epoch. ``time_col`` is the input's
    rowtime column the windows are assigned by.
    """

    kind: WindowKind
    time_col: str
    size_ms: int
    step_ms: int | None = None
    offset_ms: int = 0
    partition_by: tuple[str, ...] = ()

    def __str__(self) -> str:
        parts = [f"time_col=[{self.time_col}]"]
        if self.kind == "SESSION":
            parts.append(f"gap=[{_duration(self.size_ms)}]")
            if self.partition_by:
                parts.append(f"partition keys=[{', '.join(self.partition_by)}]")
        elif self.kind == "CUMULATE":
            parts += [f"max_size=[{_duration(self.size_ms)}]", f"step=[{_duration(self.step_ms or 0)}]"]
        else:
            parts.append(f"size=[{_duration(self.size_ms)}]")
            if self.kind == "HOP":
                parts.append(f"slide=[{_duration(self.step_ms or 0)}]")
        if self.offset_ms:
            parts.append(f"offset=[{_duration(self.offset_ms)}]")
        return f"{self.kind}({', '.join(parts)})"


#: The columns a window table function adds, in Flink's order.
WINDOW_COLUMNS = ("window_start", "window_end", "window_time")


class WindowTableFunction(Node):
    """``TABLE(TUMBLE|HOP|CUMULATE(TABLE t, DESCRIPTOR(rowtime), …))``: each input row once per window it falls in,
    with ``window_start``, ``window_end`` (TIMESTAMP(3)) and ``window_time`` (``window_end`` − 1 ms, a rowtime
    attribute) added; the input's rowtime becomes a plain timestamp (Flink's ``StreamPhysicalWindowTableFunction``).
    Stateless: a row is emitted when it arrives, with the input's RowKind. docs/semantics.md §11.
    """

    name = "WindowTableFunction"

    def __init__(self, input: Node, window: WindowSpec, at: exp.Expr | None = None, *, group_window: bool = False):
        """``at``: the call it was planned from (for messages about it); ``group_window``: planned from a legacy
        ``GROUP BY TUMBLE(…)``, whose aggregate's window columns are plain timestamps (Flink's
        ``GroupWindowAggregate`` has no window properties for a later window operator)."""
        self.inputs = [input]
        self.window = window
        self.group_window = group_window
        self.at = at
        time_type = input.field(window.time_col).type
        assert time_type is not None and time_type.time_attribute == "ROWTIME"  # the rule checks it
        self.fields = [Field(f.name, f.type.plain() if f.type else None) for f in input.fields]
        bound = SqlType("TIMESTAMP", 3, nullable=False)
        self.fields += [
            Field("window_start", bound),
            Field("window_end", bound),
            Field("window_time", SqlType(time_type.root, 3, nullable=False, time_attribute="ROWTIME")),
        ]
        self.modify_kinds = input.modify_kinds
        # A HOP or CUMULATE row is emitted once per window: the input's keys hold with window_start only.
        self.unique_keys = tuple(tuple(sorted((*k, "window_start"))) for k in input.unique_keys)
        self.upsert_keys = tuple(tuple(sorted((*k, "window_start"))) for k in input.upsert_keys)

    def attributes(self):
        return [("window", str(self.window))]


class WindowAggregate(Node):
    """``GROUP BY window_start, window_end[, keys]`` over a window table function: one ``+I`` row per window and
    key once the watermark passes the window's end (Flink's ``StreamPhysicalWindowAggregate``,
    ``WindowAggOperator``); docs/semantics.md §11.

    ``group_by`` are the grouping fields but the window's; ``window_start`` / ``window_end`` (and
    ``window_time``, or ``None`` when not grouped) name the input's window columns. The output is
    ``group_by``, the aggregates, then the window columns (Flink's order).
    """

    name = "WindowAggregate"
    reads_watermark = True

    def __init__(
        self,
        input: Node,
        window: WindowSpec,
        group_by: list[str],
        aggregates: list[Aggregate],
        window_start: str,
        window_end: str,
        window_time: str | None,
    ):
        self.inputs = [input]
        self.window = window
        self.group_by = group_by
        self.aggregates = aggregates
        self.window_start, self.window_end, self.window_time = window_start, window_end, window_time
        self.fields = [Field(g, t.plain() if (t := input.field(g).type) else None) for g in group_by]
        self.fields += [Field(a.output, a.type) for a in aggregates]
        bound = SqlType("TIMESTAMP", 3, nullable=False)
        self.fields += [Field(window_start, bound), Field(window_end, bound)]
        if window_time is not None:
            time_type = input.field(window_time).type
            assert time_type is not None  # a window table function's column
            # Flink's window aggregate keeps window_time a rowtime attribute: an event-time operator may follow.
            self.fields.append(Field(window_time, time_type))
        self.modify_kinds = frozenset("I")
        self.unique_keys, self.upsert_keys = metadata.grouping_keys([*group_by, window_start, window_end])

    def attributes(self):
        properties = [f"start('w$) AS {self.window_start}", f"end('w$) AS {self.window_end}"]
        if self.window_time is not None:
            properties.append(f"rowtime('w$) AS {self.window_time}")
        attrs = [("groupBy", _names(self.group_by))] if self.group_by else []
        return attrs + [
            ("window", str(self.window)),
            ("select", _names(self.group_by + [str(a) for a in self.aggregates] + properties)),
        ]


class WindowRank(Node):
    """``ROW_NUMBER() OVER (PARTITION BY window_start, window_end[, keys] ORDER BY …) AS rn`` over a window table
    function, filtered to ``rank_start <= rn <= rank_end``: each window's top rows once the watermark passes its end
    (Flink's ``StreamPhysicalWindowRank``, ``WindowRankOperator``); docs/semantics.md §11.3.

    ``partition_by`` are the partition fields but the window's; ``order_by`` holds ``(field, ascending,
    nulls_first)``; ``rank_end`` is ``None`` until an outer filter bounds it. The output is the input's fields
    (time attributes made plain) and ``rank_field``. ``time_ordered``: ordered by the window's time attribute
    alone (the table function's time column or ``window_time``); with the rank range ``[1, 1]`` it is then a
    window deduplication (Flink's ``StreamPhysicalWindowDeduplicate``, :attr:`keep`).
    """

    reads_watermark = True
    #: The ROW_NUMBER() call while no outer filter has bounded the rank yet (set by the rank rule).
    pending: exp.Expr | None

    def __init__(
        self,
        input: Node,
        window: WindowSpec,
        partition_by: list[str],
        order_by: list[tuple[str, bool, bool]],
        window_start: str,
        window_end: str,
        rank_field: str,
        *,
        time_ordered: bool = False,
    ):
        self.inputs = [input]
        self.window = window
        self.time_ordered = time_ordered
        self.partition_by = partition_by
        self.order_by = order_by
        self.window_start, self.window_end = window_start, window_end
        self.rank_field = rank_field
        self.rank_start: int = 1
        self.rank_end: int | None = None
        self.pending = None
        self.fields = [Field(f.name, f.type.plain() if f.type else None) for f in input.fields]
        self.fields.append(Field(rank_field, SqlType("BIGINT", nullable=False)))
        self.modify_kinds = frozenset("I")
        self.unique_keys, self.upsert_keys = metadata.grouping_keys(
            [*partition_by, window_start, window_end, rank_field]
        )

    @property
    def keep(self) -> Literal["first", "last"] | None:
        """``"first"`` / ``"last"`` for a window deduplication (ASC / DESC), else ``None``."""
        if not self.time_ordered or (self.rank_start, self.rank_end) != (1, 1):
            return None
        return "first" if self.order_by[0][1] else "last"

    @property
    def name(self) -> str:  # type: ignore[override]
        return "WindowRank" if self.keep is None else "WindowDeduplicate"

    def attributes(self):
        window = ("window", str(self.window))
        if self.keep is not None:
            return [
                window,
                ("keep", "FirstRow" if self.keep == "first" else "LastRow"),
                ("partitionKeys", _names(self.partition_by)),
                ("orderKey", self.order_by[0][0]),
                ("order", "ROWTIME"),
            ]
        order = ", ".join(
            f"{f} {'ASC' if asc else 'DESC'}"
            + ("" if nulls_first == asc else f" NULLS {'FIRST' if nulls_first else 'LAST'}")
            for f, asc, nulls_first in self.order_by
        )
        return [
            window,
            ("rankType", "ROW_NUMBER"),
            ("rankRange", f"rankStart={self.rank_start}, rankEnd={self.rank_end}"),
            ("partitionBy", _names(self.partition_by)),
            ("orderBy", order),
            ("select", _names(self.field_names)),
        ]


class Union(Node):
    """``UNION ALL``: the changes of every input, under the first input's column names (Flink's ``Union``)."""

    name = "Union"

    def __init__(self, inputs: list[Node], fields: list[Field]):
        self.inputs = inputs
        self.fields = fields
        self.modify_kinds = frozenset().union(*(i.modify_kinds for i in inputs))
        self.unique_keys, self.upsert_keys = metadata.NO_KEYS

    def attributes(self):
        return [("all", "true"), ("union", _names(self.field_names))]


class DropUpdateBefore(Node):
    """Drops ``-U`` rows when the consumer needs only ``+U`` (Flink's ``DropUpdateBefore``)."""

    name = "DropUpdateBefore"
    supports_only_update_after = True

    def __init__(self, input: Node):
        self.inputs = [input]
        self.fields = input.fields
        self.modify_kinds = input.modify_kinds
        self.unique_keys, self.upsert_keys = metadata.forwarded_keys(input)
        self.update_kind = "ONLY_UPDATE_AFTER"


class ChangelogNormalize(Node):
    """An upsert source's changes made a full changelog, keyed by its primary key (Flink's ``ChangelogNormalize``).

    Added by the changelog pass (docs/semantics.md §1); emits ``[I,UB,UA,D]`` or ``[I,UA,D]`` as its
    consumer needs, deletes always with the full row. Its input may then become a Calc of the columns its
    consumers read (:mod:`streamjoin.planner.normalize_projection`); ``fields`` stay the source's, the
    projected-out ones NULL.
    """

    name = "ChangelogNormalize"
    supports_only_update_after = True

    def __init__(self, input: Node, key: tuple[str, ...], state_ttl_ms: int | None = None):
        self.inputs = [input]
        self.key = key
        self.state_ttl_ms = state_ttl_ms
        self.fields = input.fields
        self.modify_kinds = ALL_KINDS
        self.unique_keys, self.upsert_keys = metadata.grouping_keys(key)

    def attributes(self):
        return [("key", _names(self.key))]


class SinkUpsertMaterializer(Node):
    """Keeps per sink key the rows the changelog holds, so out-of-order changes end in the right row.

    See docs/semantics.md §1.
    """

    name = "SinkUpsertMaterializer"

    def __init__(self, input: Node, primary_key: tuple[str, ...], state_ttl_ms: int | None = None):
        self.inputs = [input]
        self.primary_key = primary_key
        self.state_ttl_ms = state_ttl_ms
        self.fields = input.fields
        self.modify_kinds = input.modify_kinds
        self.unique_keys, self.upsert_keys = metadata.grouping_keys(primary_key)

    def attributes(self):
        return [("pk", _names(self.primary_key))] + _state_ttl(self.state_ttl_ms)


class Sink(Node):
    """Where the query's changelog goes: a declared table, or the collecting sink of ``SELECT`` (``table=None``)."""

    name = "Sink"

    def __init__(self, input: Node, table: TableDef | None, fields: list[Field]):
        self.inputs = [input]
        self.table = table
        self.fields = fields
        self.modify_kinds = input.modify_kinds
        self.unique_keys, self.upsert_keys = metadata.forwarded_keys(input)

    @property
    def table_name(self) -> str:
        """The sink table's name, ``collect`` for a ``SELECT``."""
        return self.table.name if self.table else "collect"

    def attributes(self):
        return [("table", f"default_catalog.default_database.{self.table_name}"), ("fields", _names(self.field_names))]
