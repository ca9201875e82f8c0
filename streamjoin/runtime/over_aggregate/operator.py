"""OVER aggregation: ``agg(col) OVER (PARTITION BY … ORDER BY time {ROWS|RANGE} BETWEEN … PRECEDING AND CURRENT ROW)``.

docs/semantics.md §5; Flink's ``flink-table-runtime/.../operators/over/``. One
output row per input row: the input row followed by the aggregates over its
frame. Input is insert-only, output is insert-only (``+I``).

Frames (``preceding`` rows / ``preceding_ms`` milliseconds, ``None`` = UNBOUNDED):

- ROWS: the row and the ``preceding`` rows before it in the partition, in time
  order; rows with the same time keep their arrival order.
- RANGE: every row whose time is within ``preceding_ms`` before the row's time,
  the row's peers (same time) included; peers get the same values.

Event time (``order_by`` = a rowtime column). Rows wait in state until the
watermark passes their time, then are emitted in time order (Flink registers
an event-time timer per distinct time). A row is **late**, and dropped and
counted, when

- bounded frames (``RowTimeRowsBoundedPrecedingFunction``,
  ``RowTimeRangeBoundedPrecedingFunction``): its time is ≤ the time of the last
  timer that fired for its partition key (Flink's ``lastTriggeringTs``, 0
  before any), so a row behind the watermark is still accepted if no timer of
  its key fired at or after its time;
- unbounded frames (``RowTimeUnboundedPrecedingOverFunctionV2``, Flink 2.3.0's
  default, ``table.exec.unbounded-over.version`` 2; the legacy
  ``RowTime{Rows,Range}UnboundedPrecedingFunction`` has the same rule): its
  time is ≤ the operator's watermark when it arrives. A row at a time whose
  timer is registered but has not fired yet joins that time's pending rows.

Bounded RANGE also registers Flink's clean-up timer at
``t + 1.5 × preceding_ms + 1`` after each accepted row at ``t``: when the latest
one fires the key's state is cleared (its frame is empty by then), and, as in
Flink, an earlier clean-up timer that fires counts as a fired timer for the
late rule.

Processing time (``order_by=None``): the wall clock; on Spark a key's rows
of one micro-batch are one instant, arriving in ``_seq`` order. ROWS frames and unbounded
frames emit each row on arrival (``ProcTimeRowsBoundedPrecedingFunction``,
``ProcTimeUnboundedPrecedingFunction``; Flink treats unbounded RANGE like ROWS
here). A bounded RANGE frame (``ProcTimeRangeBoundedPrecedingFunction``)
emits the rows of one instant together, as peers, once the instant is over.
(With a zero interval Flink's clean-up timer coincides with the emission timer
and Flink clears the instant's rows without emitting them; here they are
emitted — the one deliberate difference.)

State per partition key (what the frame can still need): rows waiting for the
watermark; for a bounded frame the aggregate arguments of the rows still inside
it and retractable accumulators; for an unbounded frame only the accumulators.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, LongType, StructField, TimestampNTZType, TimestampType

from streamjoin.changelog import SEQ_COLUMN, RowKind
from streamjoin.contract import OverAggregateSpec
from streamjoin.errors import ValidationError
from streamjoin.runtime.aggregates import AggregateCall, parse_calls
from streamjoin.runtime.engine import JvmLogic
from streamjoin.runtime.inputs import (
    changelog_columns,
    check_insert,
    output_schema,
    require_columns,
    require_order_value,
    rows_in_order,
    unshared_exchange,
    without_watermark_columns,
)
from streamjoin.runtime.over_aggregate.functions import Frame, OverState, OverWindow
from streamjoin.runtime.processor import Element, KeyedLogic, KeyedProcessor

__all__ = ["over_aggregate"]

#: Hidden input column: the rowtime in epoch milliseconds.
_ROWTIME_MS = "_rowtime_ms"
#: State variable name.
OVER_STATE = "overState"


class _OverAggregateLogic(KeyedLogic):
    """An :class:`~streamjoin.runtime.over_aggregate.functions.OverFunction` as the shell's per-key logic;
    see :func:`over_aggregate`. Every output is ``+I``."""

    state_name = OVER_STATE
    counts_late_rows = True

    def __init__(
        self, window: OverWindow, columns: list[str], input_types: dict[str, DataType], watermark_column: str | None
    ) -> None:
        self.window = window
        self.columns = columns
        self.input_types = input_types
        self.watermark_column = watermark_column

    def open(self, handle, state_ttl_ms) -> None:
        super().open(handle, state_ttl_ms)
        self.fn = self.window.function(self.input_types, self.columns)

    def new_state(self, key: tuple) -> OverState:
        return self.fn.create_state()

    def elements(self, rows):
        for row in rows_in_order(rows):
            check_insert(row, "over_aggregate")
            time = None
            if self.window.order_by is not None:
                time = require_order_value(row[_ROWTIME_MS], row, "over_aggregate", self.window.order_by)
            yield Element(
                seq=row[SEQ_COLUMN],
                kind=RowKind.INSERT,
                row=tuple(row[c] for c in self.columns),
                time=time,
                watermark=None if self.watermark_column is None else row[self.watermark_column],
            )

    def on_element(self, state, element, now):
        time = now if self.window.order_by is None else element.time
        return [(RowKind.INSERT, values) for values in self.fn.process_element(state, element.row, time)]

    def on_timer(self, state, timestamp):
        return [(RowKind.INSERT, values) for values in self.fn.on_timer(state, timestamp)]

    def jvm_logic(self) -> JvmLogic:
        fn = self.window.function(self.input_types, self.columns)
        return JvmLogic(
            "over_aggregate.OverAggregateLogic",
            OverAggregateSpec(
                function=type(fn).__name__,  # type: ignore[arg-type]  # checked against the Literal by encode
                offset=fn.offset,
                columns=tuple(self.columns),
                aggregates=fn.aggregates.specs(),
                retractable=self.window.preceding is not None,
                order_by=self.window.order_by,
                rowtime_column=_ROWTIME_MS,
                watermark_column=self.watermark_column,
            ),
        )


def over_aggregate(
    df: DataFrame,
    *,
    partition_by: Sequence[str],
    order_by: str | None,
    frame: Frame,
    preceding: int | None = None,
    preceding_ms: int | None = None,
    aggregates: Sequence[AggregateCall | tuple[str, str, str | None]],
    watermark_column: str | None = None,
    watermark_delay_ms: int = 0,
) -> DataFrame:
    """OVER aggregation of an insert-only changelog stream (docs/semantics.md §5).

    ``SELECT *, agg(col) OVER w AS name, … FROM df WINDOW w AS (PARTITION BY
    partition_by ORDER BY order_by {ROWS|RANGE} BETWEEN {preceding|INTERVAL
    preceding_ms|UNBOUNDED} PRECEDING AND CURRENT ROW)``. See the module
    docstring for frames, event and processing time, the late rule and state.

    Spark specifics:

    - Event time runs in ``timeMode="EventTime"``: the watermark is Spark's,
      which moves once per micro-batch (to ``max(rowtime seen) − delay`` of the
      batches before), and Spark runs a micro-batch without data when it moves,
      so buffered rows are emitted without waiting for new input. A key first
      advances to the micro-batch's watermark (firing its due timers), then
      takes its rows in ``_seq`` order; its timers live in its state and one
      Spark timer per key wakes it up when it gets no rows. Spark's own
      late-row filter (rowtime ≤ the previous batch's watermark) is switched
      off (:func:`~streamjoin.runtime.inputs.without_watermark_columns`) so that
      Flink's late rule decides. With one row per micro-batch Spark's
      watermark is Flink's per-row one and the output equals Flink's. With
      more, every row of a micro-batch sees the same watermark, where Flink's
      may already have moved: a row that Flink drops because an earlier row
      of the *same* micro-batch raised the watermark is kept here (it then
      takes part in the frames as the batch window query over the kept rows
      would). ``watermark_column`` closes that gap when the source knows the
      watermark at each row.
    - Processing time runs in ``timeMode="None"`` with the wall clock read
      once per key and micro-batch: a key's rows of one micro-batch are one
      instant (peers in a RANGE frame), in ``_seq`` order. Spark's
      ``"ProcessingTime"`` mode is not used because it runs a micro-batch on
      every trigger, so an ``availableNow`` query would never end; without
      processing-time timers, the clean-up of an idle key's bounded-RANGE
      state happens at its next row instead of 1.5 × the interval later.
    - Late rows dropped per key are counted in the ``numLateRecordsDropped``
      state variable (readable with Spark's state data source).

    Args:
        df: a changelog DataFrame (columns + ``_rowkind`` + ``_seq``) holding only ``+I`` rows.
        partition_by: PARTITION BY columns (may be empty: one partition).
        order_by: the rowtime column (TIMESTAMP, with a watermark defined
            upstream by ``withWatermark``), or ``None`` for processing time.
        frame: ``"rows"`` or ``"range"``.
        preceding: for ``"rows"``: rows before the current one; ``None`` = UNBOUNDED.
        preceding_ms: for ``"range"``: the interval in milliseconds; ``None`` = UNBOUNDED.
        aggregates: ``(output_name, function, column)`` with function one of
            MIN, MAX, SUM, COUNT (column ``None`` = ``COUNT(*)``), AVG,
            FIRST_VALUE, LAST_VALUE (COUNT_DISTINCT too).
        watermark_column: optional LONG column: the watermark (epoch ms) in
            effect when the row arrived, as Flink's per-record watermark. The
            operator advances to it before the row; not part of the output.
        watermark_delay_ms: how far (ms) the input's watermark falls behind Spark's (the interval joins upstream hold
            it back; :class:`~streamjoin.runtime.processor.KeyedProcessor`).

    Returns:
        A changelog DataFrame: ``df``'s columns (without ``watermark_column``),
        one column per aggregate (Flink's result types: COUNT BIGINT, AVG/SUM of
        INT INT, SUM of DECIMAL(p,s) DECIMAL(38,s), AVG of DECIMAL(p,s)
        DECIMAL(38,max(6,s)), else the argument's type), ``_rowkind`` (always
        ``+I``) and ``_seq`` (the key's emission order within the micro-batch).
        The rowtime column carries no watermark: set one again before another
        event-time operator.

    Raises:
        ValidationError: for unknown columns, a frame/bound mismatch, a
            non-timestamp ``order_by``, or invalid aggregates.
        pyspark.errors.StreamingQueryException: at run time, wrapping
            :class:`~streamjoin.changelog.ChangelogError` when a row is not
            ``+I`` or its rowtime is null.

    Example:
        >>> out = over_aggregate(items, partition_by=["itemType"], order_by="onSellTime",
        ...                      frame="rows", preceding=2,
        ...                      aggregates=[("maxPrice", "MAX", "price")])  # doctest: +SKIP
    """
    columns = changelog_columns(df, "over_aggregate")
    window = _window(frame, order_by, preceding, preceding_ms, aggregates)
    require_columns(df, list(partition_by), "over_aggregate partition_by")
    types = {f.name: f.dataType for f in df.schema.fields}
    if order_by is not None:
        require_columns(df, [order_by], "over_aggregate order_by")
        if not isinstance(types[order_by], (TimestampType, TimestampNTZType)):
            raise ValidationError(
                f"over_aggregate order_by {order_by!r} must be a TIMESTAMP rowtime; it is {types[order_by]}"
            )
    if watermark_column is not None:
        if order_by is None:
            raise ValidationError("over_aggregate watermark_column needs event time (an order_by rowtime column)")
        require_columns(df, [watermark_column], "over_aggregate watermark_column")
        if not isinstance(types[watermark_column], LongType):
            raise ValidationError(
                f"watermark_column {watermark_column!r} must be LONG epoch ms; it is {types[watermark_column]}"
            )
        columns.remove(watermark_column)
    clash = sorted({c.output for c in window.aggregates} & set(columns))
    if clash:
        raise ValidationError(f"over_aggregate output names {clash} clash with input columns")
    fn = window.function(types, columns)  # validates aggregate columns and types

    prepared = unshared_exchange(without_watermark_columns(df))
    keys = list(partition_by)
    if not keys:
        # No PARTITION BY: one partition, as Flink runs it with parallelism 1.
        prepared = prepared.withColumn("_partition", F.lit(0))
        keys = ["_partition"]
    if order_by is not None:
        prepared = prepared.withColumn(_ROWTIME_MS, F.unix_millis(F.col(order_by).cast("timestamp")))
    fields = [StructField(c, types[c]) for c in columns]
    fields += [StructField(c.output, t) for c, t in zip(window.aggregates, fn.aggregates.result_types)]
    schema = output_schema(fields)
    logic = _OverAggregateLogic(window, columns, types, watermark_column)
    processor = KeyedProcessor(
        logic,
        schema.names,
        clock="instant" if order_by is None else "event",
        watermark_delay_ms=watermark_delay_ms,
    )
    return processor.apply(prepared, keys, schema)


def _window(frame, order_by, preceding, preceding_ms, aggregates) -> OverWindow:
    if frame == "rows" and preceding_ms is not None:
        raise ValidationError(f"a ROWS frame takes preceding (a row count), not preceding_ms={preceding_ms!r}")
    if frame == "range" and preceding is not None:
        raise ValidationError(f"a RANGE frame takes preceding_ms (an interval), not preceding={preceding!r}")
    bound = preceding if frame == "rows" else preceding_ms
    return OverWindow(order_by=order_by, frame=frame, preceding=bound, aggregates=parse_calls(aggregates))
