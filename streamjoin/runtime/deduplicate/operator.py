"""Deduplication on Spark: :func:`deduplicate`, Flink's deduplicate functions (:mod:`.functions`) run per key by the
processor shell (docs/semantics.md §6).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, TimestampNTZType, TimestampType

from streamjoin.changelog import SEQ_COLUMN, RowKind
from streamjoin.contract import DeduplicateSpec
from streamjoin.errors import ValidationError
from streamjoin.runtime.deduplicate.functions import DedupState, deduplicate_function
from streamjoin.runtime.engine import JvmLogic
from streamjoin.runtime.inputs import (
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
from streamjoin.runtime.processor import Element, KeyedLogic, KeyedProcessor

__all__ = ["deduplicate"]


# --------------------------------------------------------------------------- Spark operator

_ORDER = "_order"
DEDUP_STATE = "deduplicateState"


class _DeduplicateLogic(KeyedLogic):
    """A :class:`DeduplicateFunction` as the shell's per-key logic; see :func:`deduplicate`."""

    state_name = DEDUP_STATE
    output_keyed_by_key = True
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
            "deduplicate.DeduplicateLogic",
            DeduplicateSpec(
                keep=self.keep,
                ordered=self.ordered,
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
    watermark_delay_ms: int = 0,
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
        watermark_delay_ms: how far (ms) the input's watermark falls behind Spark's (the interval joins upstream hold
            it back; :class:`~streamjoin.runtime.processor.KeyedProcessor`).

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
    processor = KeyedProcessor(
        logic,
        schema.names,
        clock="event" if event_time else "none",
        state_ttl_ms=state_ttl_ms,
        watermark_delay_ms=watermark_delay_ms,
    )
    return processor.apply(prepared, key, schema)
