"""Deduplication: ``ROW_NUMBER() OVER (PARTITION BY key ORDER BY t {ASC|DESC}) = 1`` (docs/semantics.md §6).

Flink's ``operators/deduplicate/``; input is insert-only. Per key:

=================================== ============ ===========================================================
function                            output       behaviour
=================================== ============ ===========================================================
ProcTimeDeduplicateKeepFirstRow     insert-only  the first row to arrive is emitted (``+I``), later ones dropped
ProcTimeDeduplicateKeepLastRow      updates      ``+I`` for the first row; each later row ``-U`` old, ``+U`` new;
                                                 a row equal to the key's first row, while that row
                                                 is still the kept one, emits nothing (see below)
RowTimeDeduplicateKeepLastRow       updates      a row replaces the kept one when its time is ≥ the kept
                                                 one's (ties: the later arrival wins): ``+I`` / ``-U`` ``+U``;
                                                 an older row is ignored
RowTimeDeduplicateKeepFirstRow      insert-only  the row with the smallest time (ties: the earlier arrival)
                                                 is held until the watermark passes it, then emitted once;
                                                 a row whose time is < the watermark is late: dropped, counted
=================================== ============ ===========================================================

Processing time means arrival order: on Spark, micro-batch order then ``_seq``.

Keeping the last row on processing time, Flink 2.3 skips a row equal to the kept one
(``DeduplicateFunctionHelper.processLastRowOnProcTime``, without state TTL) with a record equaliser
that compares the RowKind too, and its heap state keeps the very object it then emits: once a key has
emitted an update its kept row is a ``+U`` and no ``+I`` row equals it. So a repeat is skipped only
while the key's first row is still the kept one; after the key's first update every row, equal or not,
emits ``-U`` ``+U``. A ``PROCTIME()`` column has no value in Flink's row (it is read from the clock
only where a query uses it) and takes no part in the comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, TimestampNTZType, TimestampType

from streamjoin.changelog import SEQ_COLUMN, RowKind
from streamjoin.contract import DeduplicateSpec
from streamjoin.errors import ValidationError
from streamjoin.runtime.engine import JvmLogic
from streamjoin.runtime.processor import Element, KeyedLogic, KeyedProcessor
from streamjoin.runtime.timers import TimerService
from streamjoin.runtime.tws import (
    changelog_columns,
    check_insert,
    check_state_ttl,
    output_schema,
    require_columns,
    require_order_value,
    rows_in_order,
    unshared_exchange,
    without_watermark_columns,
)

__all__ = [
    "DedupState",
    "DeduplicateFunction",
    "ProcTimeDeduplicateKeepFirstRowFunction",
    "ProcTimeDeduplicateKeepLastRowFunction",
    "RowTimeDeduplicateKeepFirstRowFunction",
    "RowTimeDeduplicateKeepLastRowFunction",
    "deduplicate",
    "deduplicate_function",
]

Change = tuple[RowKind, tuple]


@dataclass
class DedupState:
    """One key's state.

    Attributes:
        row: the kept row (or, keeping the first row on event time, the row
            waiting for the watermark).
        time: its order value (rowtime in ms, or the ORDER BY value).
        seq: its input ``_seq`` (Spark operator: the ``_seq`` of a timer's output).
        emitted: keeping the first row, whether it was emitted (event-time keep-first); keeping the last
            row on processing time, whether the key emitted an update (its kept row went out as ``+U``).
        timers, late_dropped, spark_timer: as in :class:`~streamjoin.runtime.over_functions.OverState`.
    """

    row: tuple | None = None
    time: object = None
    seq: bytes | None = None
    emitted: bool = False
    timers: TimerService = field(default_factory=TimerService)
    late_dropped: int = 0
    spark_timer: int | None = None


class DeduplicateFunction:
    """A per-key deduplication function; state passed in, changes returned."""

    def process_element(self, state: DedupState, row: tuple, time=None) -> list[Change]:
        """Take one input row; ``time`` is its ORDER BY value (unused on processing time)."""
        raise NotImplementedError

    def on_timer(self, state: DedupState, time: int) -> list[Change]:
        return []


def _replace(state: DedupState, row: tuple) -> list[Change]:
    """Flink's ``updateDeduplicateResult``: ``+I`` for a first row, else ``-U`` old, ``+U`` new."""
    previous, state.row = state.row, row
    if previous is None:
        return [(RowKind.INSERT, row)]
    return [(RowKind.UPDATE_BEFORE, previous), (RowKind.UPDATE_AFTER, row)]


class ProcTimeDeduplicateKeepFirstRowFunction(DeduplicateFunction):
    """Keep the first row to arrive; insert-only output."""

    def process_element(self, state, row, time=None):
        if state.emitted:
            return []
        state.emitted = True
        return [(RowKind.INSERT, row)]


class ProcTimeDeduplicateKeepLastRowFunction(DeduplicateFunction):
    """Keep the last row to arrive; a row equal to the key's first row emits nothing while that row is kept.

    Flink's rule without state TTL (module docstring): the repeat is skipped only until the key's first
    update; with state TTL nothing is skipped.

    Args:
        compared: the positions of the row's values that the comparison looks at (None: all); a
            ``PROCTIME()`` column's is left out.
        state_ttl: whether state TTL is on (Flink then emits every row).
    """

    def __init__(self, compared: Sequence[int] | None = None, state_ttl: bool = False):
        self.compared = None if compared is None else tuple(compared)
        self.state_ttl = state_ttl

    def _equal(self, kept: tuple, row: tuple) -> bool:
        if self.compared is None:
            return kept == row
        return all(kept[i] == row[i] for i in self.compared)

    def process_element(self, state, row, time=None):
        if not self.state_ttl and not state.emitted and state.row is not None and self._equal(state.row, row):
            return []  # the kept row stays the one emitted, so that a later -U retracts exactly it
        changes = _replace(state, row)
        state.emitted = len(changes) > 1
        return changes


class RowTimeDeduplicateKeepLastRowFunction(DeduplicateFunction):
    """Keep the row with the greatest order value; a row with an equal value replaces the kept one."""

    def process_element(self, state, row, time=None):
        if state.row is not None and time < state.time:
            return []
        state.time = time
        return _replace(state, row)


class RowTimeDeduplicateKeepFirstRowFunction(DeduplicateFunction):
    """Keep the row with the smallest rowtime, emitted once the watermark passes it; insert-only."""

    def process_element(self, state, row, time=None):
        if time < state.timers.time:
            state.late_dropped += 1
            return []
        if state.emitted:
            return []
        if state.row is None or time < state.time:
            if state.row is not None:
                state.timers.delete(state.time)
            state.timers.register(time)
            state.row, state.time = row, time
        return []

    def on_timer(self, state, time):
        row, state.row, state.time = state.row, None, None
        state.emitted = True
        return [(RowKind.INSERT, row)]


def deduplicate_function(
    keep: Literal["first", "last"], rowtime: bool, *, compared: Sequence[int] | None = None, state_ttl: bool = False
) -> DeduplicateFunction:
    """The Flink function for ``keep`` on event time (``rowtime``) or processing time.

    ``compared`` and ``state_ttl`` are those of :class:`ProcTimeDeduplicateKeepLastRowFunction` (the
    other variants compare no rows).

    Raises:
        ValidationError: for ``keep`` other than ``"first"``/``"last"``.
    """
    if keep not in ("first", "last"):
        raise ValidationError(f"keep must be 'first' or 'last'; got {keep!r}")
    if rowtime:
        return RowTimeDeduplicateKeepFirstRowFunction() if keep == "first" else RowTimeDeduplicateKeepLastRowFunction()
    if keep == "first":
        return ProcTimeDeduplicateKeepFirstRowFunction()
    return ProcTimeDeduplicateKeepLastRowFunction(compared, state_ttl)


# --------------------------------------------------------------------------- Spark operator

_ORDER = "_order"
DEDUP_STATE = "deduplicateState"


class _DeduplicateLogic(KeyedLogic):
    """A :class:`DeduplicateFunction` as the shell's per-key logic; see :func:`deduplicate`."""

    state_name = DEDUP_STATE
    counts_late_rows = True

    def __init__(
        self,
        keep: Literal["first", "last"],
        ordered: bool,
        event_time: bool,
        columns: list[str],
        watermark_column: str | None,
        proctime_columns: Sequence[str] = (),
        state_ttl: bool = False,
    ):
        self.keep = keep
        compared = [i for i, c in enumerate(columns) if c not in proctime_columns]
        self.fn = deduplicate_function(keep, rowtime=ordered, compared=compared, state_ttl=state_ttl)
        self.ordered = ordered
        self.event_time = event_time
        self.columns = columns
        self.watermark_column = watermark_column
        self.proctime_columns = list(proctime_columns)
        self.state_ttl = state_ttl

    def new_state(self, key: tuple) -> DedupState:
        return DedupState()

    def elements(self, rows):
        for row in rows_in_order(rows):
            check_insert(row, "deduplicate")
            yield Element(
                seq=row[SEQ_COLUMN],
                kind=RowKind.INSERT,
                row=tuple(row[c] for c in self.columns),
                time=require_order_value(row[_ORDER], row, "deduplicate", "ORDER BY") if self.ordered else None,
                watermark=None if self.watermark_column is None else row[self.watermark_column],
            )

    def on_element(self, state, element, now):
        changes = self.fn.process_element(state, element.row, element.time)
        if self.event_time and state.row is element.row:
            state.seq = bytes(element.seq)  # the row now waiting for the watermark
        return changes

    def on_timer(self, state, timestamp):
        return self.fn.on_timer(state, timestamp)

    def timer_seq(self, state, timestamp):
        return state.seq

    def jvm_logic(self) -> JvmLogic:
        return JvmLogic(
            "DeduplicateLogic",
            DeduplicateSpec(
                keep=self.keep,
                ordered=self.ordered,
                event_time=self.event_time,
                columns=tuple(self.columns),
                watermark_column=self.watermark_column,
                proctime_columns=tuple(self.proctime_columns),
                state_ttl=self.state_ttl,
            ),
        )


def deduplicate(
    df: DataFrame,
    *,
    key: Sequence[str],
    order_by: str | None,
    keep: Literal["first", "last"],
    watermark_column: str | None = None,
    state_ttl_ms: int | None = None,
    proctime_columns: Sequence[str] = (),
) -> DataFrame:
    """Keep one row per key of an insert-only changelog stream (docs/semantics.md §6).

    ``SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY key ORDER BY
    order_by {ASC if keep == "first" else DESC}) AS rn FROM df) WHERE rn = 1``.
    See the module docstring for each variant's output.

    Spark specifics: processing time is arrival order (micro-batch, then
    ``_seq``). Keeping the first row on event time runs in
    ``timeMode="EventTime"`` with Spark's watermark (one value per
    micro-batch; Spark's own late-row filter is switched off so Flink's rule
    ``rowtime < watermark`` decides; ``watermark_column`` gives a per-row
    watermark as in :func:`~streamjoin.runtime.over_aggregate.over_aggregate`);
    late rows are counted in the ``numLateRecordsDropped`` state variable.
    The other variants need no timers.

    Args:
        df: a changelog DataFrame (columns + ``_rowkind`` + ``_seq``) holding only ``+I`` rows.
        key: PARTITION BY columns (at least one).
        order_by: ``None`` for processing time; else the ORDER BY column: a
            rowtime TIMESTAMP (required for ``keep="first"``, with a watermark
            defined upstream), or any orderable column for ``keep="last"``
            (e.g. a BIGINT version; Flink plans that as a Top-1, same output).
        keep: ``"first"`` (ASC) or ``"last"`` (DESC).
        watermark_column: optional LONG column, the watermark (epoch ms) in
            effect when the row arrived; only with ``keep="first"`` on event time.
        state_ttl_ms: idle state retention in ms (``table.exec.state.ttl``), or ``None``: a key not
            written for that long is forgotten, and its next row is emitted as a first row (``+I``,
            no retraction of the forgotten one), as Flink's deduplication with state TTL. Not with
            ``keep="first"`` on event time (event-time timers; Spark expires state in processing time).
        proctime_columns: the input's ``PROCTIME()`` columns, left out when keep-last on processing time
            compares a row with the kept one (module docstring): Flink's row holds no value in them.

    Returns:
        A changelog DataFrame with ``df``'s columns (without
        ``watermark_column``), ``_rowkind`` and ``_seq``. The i-th change caused
        by an input row gets that row's ``_seq`` followed by ``i``
        (:func:`~streamjoin.runtime.processor.child_seq`), so the input's order
        carries over across keys; a row emitted by a timer counts as caused by
        itself (its own input ``_seq``).

    Raises:
        ValidationError: for unknown columns, an empty key, an invalid ``keep``,
            a non-timestamp ``order_by`` with ``keep="first"``, or ``state_ttl_ms`` <= 0 or given
            with ``keep="first"`` on event time.
        pyspark.errors.StreamingQueryException: at run time, wrapping
            :class:`~streamjoin.changelog.ChangelogError` when a row is not
            ``+I`` or its ORDER BY value is null.

    Example:
        >>> latest = deduplicate(orders, key=["o_orderkey"], order_by=None, keep="last")  # doctest: +SKIP
    """
    columns = changelog_columns(df, "deduplicate")
    deduplicate_function(keep, rowtime=order_by is not None)  # validates keep
    if not key:
        raise ValidationError("deduplicate needs at least one key column")
    require_columns(df, list(key), "deduplicate key")
    types = {f.name: f.dataType for f in df.schema.fields}
    is_timestamp = order_by is not None and isinstance(types.get(order_by), (TimestampType, TimestampNTZType))
    if order_by is not None:
        require_columns(df, [order_by], "deduplicate order_by")
    event_time = order_by is not None and keep == "first"
    if event_time and not is_timestamp:
        assert order_by is not None  # event_time
        raise ValidationError(
            f"deduplicate keep='first' ORDER BY {order_by!r} needs a TIMESTAMP rowtime with a watermark; "
            f"it is {types[order_by]}"
        )
    check_state_ttl(state_ttl_ms, "deduplicate")
    if state_ttl_ms is not None and event_time:
        raise ValidationError("deduplicate keep='first' on event time has no state TTL (it runs on event-time timers)")
    if watermark_column is not None:
        if not event_time:
            raise ValidationError("deduplicate watermark_column applies only to keep='first' on event time")
        require_columns(df, [watermark_column], "deduplicate watermark_column")
        if not isinstance(types[watermark_column], LongType):
            raise ValidationError(
                f"watermark_column {watermark_column!r} must be LONG epoch ms; it is {types[watermark_column]}"
            )
        columns.remove(watermark_column)

    require_columns(df, list(proctime_columns), "deduplicate proctime_columns")

    prepared = without_watermark_columns(df)
    if event_time:
        prepared = unshared_exchange(prepared)
    if order_by is not None:
        order = F.unix_millis(F.col(order_by).cast("timestamp")) if is_timestamp else F.col(order_by)
        prepared = prepared.withColumn(_ORDER, order)
    schema = output_schema([StructField(c, types[c]) for c in columns])
    logic = _DeduplicateLogic(
        keep,
        order_by is not None,
        event_time,
        columns,
        watermark_column,
        proctime_columns=proctime_columns,
        state_ttl=state_ttl_ms is not None,
    )
    processor = KeyedProcessor(logic, schema.names, clock="event" if event_time else "none", state_ttl_ms=state_ttl_ms)
    return processor.apply(prepared, key, schema)
