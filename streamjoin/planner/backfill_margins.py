"""Which source rows a per-day backfill of a pipeline must read: the margins its operators need (docs/backfill.md).

A pipeline whose Delta sink is ``PARTITIONED BY (day)``, with ``day`` a ``DATE`` column computed as
``CAST(<rowtime> AS DATE)``, can recompute the sink rows of days ``[first, last]`` from the source rows
whose rowtime lies in a window around them. :func:`backfill_plan` derives that window per source from the
plan, walking from the sink's day column down to the sources' rowtimes:

==========================  ==============================================================================
operator                    the window its input needs, for output rows with time in ``[S, E)``
==========================  ==============================================================================
Calc, DropUpdateBefore,     the same (a projection of the time column; filters keep rows, never add)
SinkUpsertMaterializer
LookupJoin                  the same on the probe side (the Delta table is read as it is now)
IntervalJoin (rowtime)      the partitioned side the same; the other side shifted by the bounds:
                            ``right.time - left.time ∈ [lower, upper]`` (Flink's ``IntervalJoin``)
TemporalJoin (rowtime)      the probe side the same; the versioned table from its first record up to ``E``
                            (the version valid at ``S`` may be of any age)
OverAggregate RANGE         ``[S - preceding, E)``: the frame of the first row reaches back ``preceding``
Union                       the same, on every input
==========================  ==============================================================================

Every other operator keeps state across unbounded time, so a day's rows may depend on rows of any
other day and only a full rebuild (a new checkpoint over the whole topic) is exact: a regular join
(matches rows of any time, even with a state TTL, which is processing time), a group aggregate, a
deduplication (first or last row of a key over all time), ChangelogNormalize, OVER with a ROWS frame
(its N preceding rows may be of any age) or an UNBOUNDED one, and proctime operators.
:func:`backfill_plan` refuses those with an :class:`~streamjoin.errors.UnsupportedPlanError` naming
the pipeline, the operator and the rule, before anything runs.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlglot import exp

from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner.diagnostics import error
from streamjoin.planner.plan import (
    Calc,
    DropUpdateBefore,
    IntervalJoin,
    LookupJoin,
    Node,
    OverAggregate,
    SinkUpsertMaterializer,
    TableScan,
    TemporalJoin,
    Union,
)
from streamjoin.planner.script import PlannedStatement

__all__ = ["BackfillPlan", "SourceWindow", "backfill_plan"]

_RULE = "backfill-bounded-time"


@dataclass(frozen=True)
class SourceWindow:
    """The rowtime window of one source a backfill reads, relative to the days ``[S, E)`` it recomputes.

    Args:
        table: the source table's name.
        rowtime: its rowtime column.
        before_ms: how far before ``S`` the window starts (ms; negative: after ``S``); ``None``: from the
            topic's first record (a versioned table).
        after_ms: how far after ``E`` it ends (ms; negative: before ``E``).
        watermark_delay_ms: the table's watermark delay: the bound on how far a record's Kafka timestamp may
            be from its rowtime, which widens the Kafka read (not the rowtime window).
    """

    table: str
    rowtime: str
    before_ms: int | None
    after_ms: int
    watermark_delay_ms: int

    def rowtimes(self, first: dt.date, last: dt.date) -> tuple[dt.datetime | None, dt.datetime]:
        """The rowtime window ``[start, end]`` (UTC, naive) of days ``first``..``last``; ``start`` None: unbounded."""
        start = dt.datetime.combine(first, dt.time())
        end = dt.datetime.combine(last + dt.timedelta(days=1), dt.time())
        before = None if self.before_ms is None else start - dt.timedelta(milliseconds=self.before_ms)
        return before, end + dt.timedelta(milliseconds=self.after_ms)

    def union(self, other: SourceWindow) -> SourceWindow:
        """The smallest window holding both (one table scanned twice is read once, for both)."""
        before = None if self.before_ms is None or other.before_ms is None else max(self.before_ms, other.before_ms)
        return SourceWindow(
            self.table, self.rowtime, before, max(self.after_ms, other.after_ms), self.watermark_delay_ms
        )


@dataclass(frozen=True)
class BackfillPlan:
    """How to backfill one pipeline per day.

    Args:
        pipeline: the sink table's name.
        day_column: the sink's ``PARTITIONED BY`` DATE column.
        windows: source table name → the :class:`SourceWindow` it reads.
    """

    pipeline: str
    day_column: str
    windows: dict[str, SourceWindow]


def backfill_plan(statement: PlannedStatement) -> BackfillPlan:
    """The per-day backfill of an ``INSERT INTO`` a table ``PARTITIONED BY`` a day column.

    Raises:
        ValidationError: the sink is not partitioned by exactly one ``DATE`` column
            ``[rule: backfill-day-column]``.
        UnsupportedPlanError: the day column is not ``CAST(<rowtime> AS DATE)`` of a source's rowtime
            ``[rule: backfill-day-column]``, or an operator between a source and the sink keeps state over
            unbounded time (a full rebuild is needed) ``[rule: backfill-bounded-time]``.
    """
    sink = statement.sink
    table = sink.table
    assert table is not None  # an INSERT's
    source, node = table.source, table.node
    name = table.name
    day_column = table.column(table.partition_keys[0]) if len(table.partition_keys) == 1 else None
    if day_column is None or day_column.declared_type.root != "DATE":
        raise error(
            ValidationError,
            source,
            node,
            f"pipeline '{name}' cannot be backfilled per day: its sink must be "
            f"PARTITIONED BY one DATE column, it is partitioned by {list(table.partition_keys) or 'nothing'}",
            "backfill-day-column",
        )
    day = table.partition_keys[0]
    walker = _Walker(name, statement)
    walker.day(sink.inputs[0], sink.inputs[0].field_names[sink.field_names.index(day)])
    return BackfillPlan(name, day, walker.windows)


class _Walker:
    def __init__(self, pipeline: str, statement: PlannedStatement):
        self.pipeline = pipeline
        self.statement = statement
        self.windows: dict[str, SourceWindow] = {}

    def refuse(self, node: Node, why: str, rule: str = _RULE) -> UnsupportedPlanError:
        table = self.statement.sink_table
        assert table is not None  # an INSERT's
        return error(
            UnsupportedPlanError,
            table.source,
            self.statement.statement,
            f"pipeline '{self.pipeline}' cannot be backfilled per day: operator {_operator(node)} {why}; "
            "rebuild it in full instead (a new checkpoint and sink)",
            rule,
        )

    def day(self, node: Node, name: str) -> None:
        """Follow the day column ``name`` of ``node`` to the time it is the day of."""
        if isinstance(node, Calc):
            expr = {f.name: e for f, e in node.projections}[name]
            if isinstance(expr, exp.Column):
                return self.day(node.inputs[0], expr.name)
            if isinstance(expr, exp.Cast) and expr.to.is_type("date") and isinstance(expr.this, exp.Column):
                return self.time(node.inputs[0], expr.this.name, 0, 0)
        elif isinstance(node, (DropUpdateBefore, SinkUpsertMaterializer)):
            return self.day(node.inputs[0], name)
        raise self.refuse(
            node, f"computes the day column '{name}': it must be CAST(<rowtime> AS DATE)", "backfill-day-column"
        )

    def time(self, node: Node, name: str, before: int | None, after: int) -> None:
        """Record the windows the inputs of ``node`` need for its rows with ``name`` in ``[S - before, E + after)``."""
        if isinstance(node, Calc):
            expr = {f.name: e for f, e in node.projections}[name]
            # The planner casts a rowtime to a plain TIMESTAMP where it leaves a time attribute: the same instant.
            if isinstance(expr, exp.Cast) and expr.to.this in exp.DataType.TEMPORAL_TYPES - {exp.DType.DATE}:
                expr = expr.this
            if not isinstance(expr, exp.Column):
                raise self.refuse(node, f"computes the time '{name}' from an expression: it must be a column")
            return self.time(node.inputs[0], expr.name, before, after)
        if isinstance(node, (DropUpdateBefore, SinkUpsertMaterializer)):
            return self.time(node.inputs[0], name, before, after)
        if isinstance(node, Union):
            index = node.field_names.index(name)
            for child in node.inputs:
                self.time(child, child.field_names[index], before, after)
            return None
        if isinstance(node, LookupJoin):
            return self.time(node.left, self._left_field(node, name), before, after)
        if isinstance(node, IntervalJoin) and node.rowtime:
            return self._interval(node, name, before, after)
        if isinstance(node, TemporalJoin):
            if self._left_field(node, name) != node.left_time:
                raise self.refuse(
                    node, f"is partitioned by '{name}', not by its probe side's rowtime '{node.left_time}'"
                )
            self.time(node.left, node.left_time, before, after)
            # The version valid at a probe row's time may be of any age: the versioned table from its first record.
            return self.time(node.right, node.right_time, None, after)
        if isinstance(node, OverAggregate) and node.rowtime and node.frame == "range" and node.preceding is not None:
            if name != node.order_by:
                raise self.refuse(node, f"is partitioned by '{name}', not by its ORDER BY rowtime '{node.order_by}'")
            return self.time(node.inputs[0], name, None if before is None else before + node.preceding, after)
        if isinstance(node, TableScan):
            return self._scan(node, name, before, after)
        raise self.refuse(node, _UNBOUNDED.get(type(node).__name__, "keeps state over unbounded time"))

    def _left_field(self, node, name: str) -> str:
        index = node.field_names.index(name)
        if index >= len(node.left.fields):
            raise self.refuse(node, f"is partitioned by '{name}' of its build side, which does not bound its rows")
        return node.left.field_names[index]

    def _interval(self, node: IntervalJoin, name: str, before: int | None, after: int) -> None:
        index = node.field_names.index(name)
        left_side = index < len(node.left.fields)
        side, field = (
            (node.left, node.left.field_names[index])
            if left_side
            else (node.right, node.right.field_names[index - len(node.left.fields)])
        )
        own_time = node.left_time if left_side else node.right_time
        if field != own_time:
            raise self.refuse(
                node,
                f"is partitioned by '{name}', not by a rowtime of the join ('{node.left_time}', '{node.right_time}')",
            )
        padded = node.kind in (("right", "full") if left_side else ("left", "full"))
        if padded:
            raise self.refuse(node, f"null-pads '{name}' (an outer join's padded side): padded rows have no day")
        self.time(side, field, before, after)
        # right.time - left.time in [lower, upper]
        if left_side:
            self.time(
                node.right, node.right_time, None if before is None else before - node.lower_ms, after + node.upper_ms
            )
        else:
            self.time(
                node.left, node.left_time, None if before is None else before + node.upper_ms, after - node.lower_ms
            )

    def _scan(self, node: TableScan, name: str, before: int | None, after: int) -> None:
        table = node.table
        if name != table.rowtime:
            raise self.refuse(
                node,
                f"reads '{name}', which is not the rowtime of table '{table.name}' "
                f"({table.rowtime or 'none'}): only a rowtime bounds a Kafka read",
                "backfill-day-column",
            )
        assert table.watermark is not None  # it has a rowtime: name
        window = SourceWindow(table.name, name, before, after, table.watermark.delay_ms)
        known = self.windows.get(table.name)
        self.windows[table.name] = known.union(window) if known else window


def _operator(node: Node) -> str:
    """The node's name and first EXPLAIN attribute, e.g. ``Join(joinType=[InnerJoin])``."""
    first = node.attributes()[:1]
    return f"{node.name}({first[0][0]}=[{first[0][1]}])" if first else node.name


#: Why an operator needs a full rebuild, by plan node class.
_UNBOUNDED = {
    "RegularJoin": "matches rows of any time (a regular join; a state TTL is processing time and does not bound it)",
    "GroupAggregate": "aggregates rows of any time (a group aggregate)",
    "Deduplicate": "keeps the first or last row of a key over all time (a deduplication)",
    "Rank": "ranks the rows of a key over all time (a Top-N)",
    "ChangelogNormalize": "keeps the last row of every key over all time (an upsert source's ChangelogNormalize)",
    "OverAggregate": "has a ROWS or UNBOUNDED frame, or orders by processing time: its frame may reach rows of any age",
    "IntervalJoin": "joins on processing time, which a re-run does not reproduce",
    "TemporalJoin": "joins on processing time, which a re-run does not reproduce",
}
