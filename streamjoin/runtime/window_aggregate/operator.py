"""The window aggregate on Spark: :func:`window_aggregate`, Flink's ``WindowAggOperator`` (:mod:`.function`) run per
group key by the processor shell (docs/semantics.md §11)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql.types import LongType, StructField, TimestampType

from streamjoin.contract import WindowAggregateSpec
from streamjoin.errors import ValidationError
from streamjoin.runtime.aggregates import AggregateCall, Aggregates, parse_calls
from streamjoin.runtime.engine import JvmLogic
from streamjoin.runtime.group_aggregate.function import GROUP_FUNCTIONS
from streamjoin.runtime.inputs import (
    changelog_columns,
    output_schema,
    require_columns,
)
from streamjoin.runtime.processor import KeyedLogic, KeyedProcessor
from streamjoin.runtime.window_aggregate.function import SessionWindowAggFunction, WindowAggFunction, WindowAggState
from streamjoin.runtime.windowed import WINDOW_END_MS, window_elements, windowed_input

__all__ = ["window_aggregate"]

#: State variable name.
WINDOW_STATE = "windowAggState"


class _WindowAggregateLogic(KeyedLogic):
    """:class:`WindowAggFunction` as the shell's per-key logic; see :func:`window_aggregate`."""

    state_name = WINDOW_STATE
    counts_late_rows = True

    def __init__(self, calls, spec: WindowAggregateSpec, types) -> None:
        self.calls = calls
        self.spec = spec
        self.types = types
        self.columns = list(spec.columns)
        self.group_positions = [self.columns.index(c) for c in spec.group_by]
        self.start_position = self.columns.index(spec.window_start)
        self.end_position = self.columns.index(spec.window_end)
        self.timestamps = {c for c in self.columns if isinstance(types[c], TimestampType)}

    def open(self, handle, state_ttl_ms) -> None:
        super().open(handle, state_ttl_ms)
        aggregates = Aggregates(self.calls, self.types, self.columns, retractable=self.spec.retractable)
        gap = self.spec.session_gap_ms
        self.fn = WindowAggFunction(aggregates) if gap is None else SessionWindowAggFunction(aggregates, gap)

    def new_state(self, key: tuple) -> WindowAggState:
        return WindowAggState()

    def is_done(self, state: WindowAggState) -> bool:
        return not state.windows and not state.timers.timers

    def elements(self, rows):
        spec = self.spec
        return window_elements(
            rows,
            self.columns,
            self.timestamps,
            spec.window_end,
            spec.watermark_column,
            "window_aggregate",
            insert_only=False,
        )

    def on_element(self, state, element, now):
        row = element.row
        key = tuple(row[i] for i in self.group_positions)
        start, end = row[self.start_position], row[self.end_position]
        return self.fn.process_element(state, element.kind, row, key, start, end, element.time)

    def on_timer(self, state, timestamp):
        return self.fn.on_timer(state, timestamp)

    def jvm_logic(self) -> JvmLogic:
        name = "WindowAggregateLogic" if self.spec.session_gap_ms is None else "SessionWindowAggregateLogic"
        return JvmLogic(f"window_aggregate.{name}", self.spec)


def window_aggregate(
    df: DataFrame,
    *,
    group_by: Sequence[str],
    window_start: str,
    window_end: str,
    aggregates: Sequence[AggregateCall | tuple[str, str, str | None]],
    insert_only_input: bool = True,
    watermark_column: str | None = None,
    session_gap_ms: int | None = None,
    watermark_delay_ms: int = 0,
) -> DataFrame:
    """Window aggregation of a changelog stream whose rows carry their window (docs/semantics.md §11).

    ``SELECT group_by, agg(col), …, window_start, window_end FROM df GROUP BY group_by, window_start,
    window_end`` over the rows of a window table function (or, with ``session_gap_ms``, the sessions of each key):
    one ``+I`` row per window and key once the watermark
    passes the window's end − 1 ms; a change whose window has already fired is dropped and counted (module
    docstring of :mod:`.function`). Runs as a row-based ``transformWithState`` in ``timeMode="EventTime"``
    keyed by ``group_by``: the watermark is Spark's (Spark's own late-row filter is switched off,
    :func:`~streamjoin.runtime.inputs.without_watermark_columns`), or, when ``watermark_column`` is given,
    the watermark each row carries (Flink's per-record watermark). State per key: its windows not yet fired,
    each with a row count and accumulators, one pickled value; Flink's ``numLateRecordsDropped`` is mirrored
    per key into that state variable.

    Args:
        df: a changelog DataFrame (columns + ``_rowkind`` + ``_seq``); any RowKinds unless
            ``insert_only_input``.
        group_by: the grouping columns but the window's (may be empty: one global group).
        window_start: the TIMESTAMP column of the row's window start.
        window_end: the TIMESTAMP column of the row's window end (exclusive).
        aggregates: ``(output_name, function, column)`` with function one of COUNT (column ``None`` =
            ``COUNT(*)``), COUNT_DISTINCT, SUM, AVG, MIN, MAX.
        insert_only_input: the input holds only ``+I``; MIN/MAX then keep only the extreme.
        watermark_column: optional LONG column: the watermark (epoch ms) in effect when the row arrived.
        session_gap_ms: a session window aggregate (Flink's SESSION windows): each row's window is its own
            ``[t, t + gap)`` (the SESSION table function's), merged per key with the sessions it touches; the output
            carries each session's bounds.
        watermark_delay_ms: how far (ms) the input's watermark falls behind Spark's (the interval joins upstream hold
            it back; :class:`~streamjoin.runtime.processor.KeyedProcessor`).

    Returns:
        A changelog DataFrame of ``+I`` rows: the ``group_by`` columns, one column per aggregate (Flink's result
        types, :mod:`streamjoin.runtime.aggregates`), ``window_start``, ``window_end``, ``_rowkind``, ``_seq``.

    Raises:
        ValidationError: unknown or non-timestamp window columns, an unsupported function, output names that
            clash with ``group_by``.
        pyspark.errors.StreamingQueryException: at run time, wrapping
            :class:`~streamjoin.changelog.ChangelogError` for a row without a window.
    """
    changelog_columns(df, "window_aggregate")
    calls = parse_calls(aggregates)
    unsupported = [c.function for c in calls if c.function not in GROUP_FUNCTIONS]
    if unsupported:
        raise ValidationError(f"window_aggregate does not support {unsupported}; allowed: {list(GROUP_FUNCTIONS)}")
    require_columns(df, [*group_by, window_start, window_end], "window_aggregate")
    types = {f.name: f.dataType for f in df.schema.fields}
    for c in (window_start, window_end):
        if not isinstance(types[c], TimestampType):
            raise ValidationError(f"window_aggregate: window column {c!r} must be a TIMESTAMP; it is {types[c]}")
    clash = sorted({c.output for c in calls} & {*group_by, window_start, window_end})
    if clash:
        raise ValidationError(f"window_aggregate output names {clash} clash with the grouping columns")
    if watermark_column is not None:
        require_columns(df, [watermark_column], "window_aggregate watermark_column")
        if not isinstance(types[watermark_column], LongType):
            raise ValidationError(
                f"watermark_column {watermark_column!r} must be LONG epoch ms; it is {types[watermark_column]}"
            )
    if session_gap_ms is not None and session_gap_ms <= 0:
        raise ValidationError(f"window_aggregate: session_gap_ms must be positive, got {session_gap_ms}")
    retractable = not insert_only_input
    columns = list(
        dict.fromkeys([*group_by, window_start, window_end, *(c.column for c in calls if c.column is not None)])
    )
    result_types = Aggregates(calls, types, columns, retractable=retractable).result_types
    prepared, keys = windowed_input(df, columns, window_end, watermark_column, group_by)
    spec = WindowAggregateSpec(
        columns=tuple(columns),
        group_by=tuple(group_by),
        window_start=window_start,
        window_end=window_end,
        window_end_ms=WINDOW_END_MS,
        aggregates=Aggregates(calls, types, columns, retractable=retractable).specs(),
        retractable=retractable,
        watermark_column=watermark_column,
        session_gap_ms=session_gap_ms,
    )
    fields = [StructField(c, types[c]) for c in group_by]
    fields += [StructField(c.output, t) for c, t in zip(calls, result_types)]
    fields += [StructField(window_start, types[window_start]), StructField(window_end, types[window_end])]
    schema = output_schema(fields)
    logic = _WindowAggregateLogic(calls, spec, types)
    return KeyedProcessor(logic, schema.names, clock="event", watermark_delay_ms=watermark_delay_ms).apply(
        prepared, keys, schema
    )
