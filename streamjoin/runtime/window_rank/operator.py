"""The window Top-N on Spark: :func:`window_rank`, Flink's ``WindowRankOperator`` (:mod:`.function`) run per
partition key by the processor shell (docs/semantics.md §11.3)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql.types import LongType, StructField, TimestampType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN
from streamjoin.contract import SortFieldSpec, WindowRankSpec
from streamjoin.errors import ValidationError
from streamjoin.runtime.engine import JvmLogic
from streamjoin.runtime.inputs import (
    changelog_columns,
    output_schema,
    require_columns,
)
from streamjoin.runtime.processor import KeyedLogic, KeyedProcessor
from streamjoin.runtime.window_rank.function import SortKey, WindowRankFunction, WindowRankState
from streamjoin.runtime.windowed import WINDOW_END_MS, window_elements, windowed_input

__all__ = ["window_rank"]

#: State variable name.
WINDOW_RANK_STATE = "windowRankState"


class _WindowRankLogic(KeyedLogic):
    """:class:`WindowRankFunction` as the shell's per-key logic; see :func:`window_rank`."""

    state_name = WINDOW_RANK_STATE
    counts_late_rows = True

    def __init__(self, spec: WindowRankSpec, types) -> None:
        self.spec = spec
        self.columns = list(spec.columns)
        self.timestamps = {c for c in self.columns if isinstance(types[c], TimestampType)}
        self.keys = [SortKey(self.columns.index(s.column), s.ascending, s.nulls_first) for s in spec.order_by]

    def open(self, handle, state_ttl_ms) -> None:
        super().open(handle, state_ttl_ms)
        self.fn = WindowRankFunction(
            self.keys, self.spec.rank_start, self.spec.rank_end, self.spec.newest_first_on_ties
        )

    def new_state(self, key: tuple) -> WindowRankState:
        return WindowRankState()

    def is_done(self, state: WindowRankState) -> bool:
        return not state.windows and not state.timers.timers

    def elements(self, rows):
        spec = self.spec
        return window_elements(
            rows, self.columns, self.timestamps, spec.window_end, spec.watermark_column, "window_rank", insert_only=True
        )

    def on_element(self, state, element, now):
        return self.fn.process_element(state, element.row, element.time)

    def on_timer(self, state, timestamp):
        return self.fn.on_timer(state, timestamp)

    def jvm_logic(self) -> JvmLogic:
        return JvmLogic("window_rank.WindowRankLogic", self.spec)


def window_rank(
    df: DataFrame,
    *,
    partition_by: Sequence[str],
    window_end: str,
    order_by: Sequence[tuple[str, bool, bool]],
    rank_start: int,
    rank_end: int,
    rank_column: str,
    newest_first_on_ties: bool = False,
    watermark_column: str | None = None,
    watermark_delay_ms: int = 0,
) -> DataFrame:
    """Window Top-N of an insert-only changelog whose rows carry their window (docs/semantics.md §11.3).

    ``ROW_NUMBER() OVER (PARTITION BY window_start, window_end, partition_by ORDER BY order_by) AS rank_column``
    filtered to ``rank_start <= rank_column <= rank_end``: once the watermark passes a window's end − 1 ms, one
    ``+I`` per row of rank ``rank_start`` … ``rank_end`` of each partition key's window, in rank order (rows
    that tie in ``order_by`` rank in arrival order); a row whose window has already fired is dropped and counted.
    Runs as a row-based ``transformWithState`` in ``timeMode="EventTime"`` keyed by ``partition_by`` (the window
    is part of the state's key, not the grouping key); the watermark is Spark's, or, when ``watermark_column`` is
    given, the watermark each row carries.

    Args:
        df: an insert-only changelog DataFrame (columns + ``_rowkind`` + ``_seq``) with its window's columns.
        partition_by: the partition columns but the window's (may be empty: one partition per window).
        window_end: the TIMESTAMP column of the row's window end (exclusive).
        order_by: ``(column, ascending, nulls_first)`` per ORDER BY field.
        rank_start: the first rank kept, ≥ 1.
        rank_end: the last rank kept, ≥ ``rank_start``.
        rank_column: the output column of the rank (BIGINT).
        newest_first_on_ties: rows that tie rank newest first (a window deduplication keeping the last row, Flink's
            ``WindowDeduplicate`` with ``keep=[LastRow]``), else in arrival order.
        watermark_column: optional LONG column: the watermark (epoch ms) in effect when the row arrived.
        watermark_delay_ms: how far (ms) the input's watermark falls behind Spark's (the interval joins upstream hold
            it back; :class:`~streamjoin.runtime.processor.KeyedProcessor`).

    Returns:
        A changelog DataFrame of ``+I`` rows: ``df``'s columns, ``rank_column`` (BIGINT), ``_rowkind``, ``_seq``.

    Raises:
        ValidationError: unknown columns, a non-timestamp window column, a rank range that is empty or starts
            below 1, a rank column that clashes with an input column.
        pyspark.errors.StreamingQueryException: at run time, wrapping
            :class:`~streamjoin.changelog.ChangelogError` for a row that is not ``+I``.
    """
    changelog_columns(df, "window_rank")
    columns = [c for c in df.columns if c not in (ROWKIND_COLUMN, SEQ_COLUMN, watermark_column)]
    require_columns(df, [*partition_by, window_end, *(c for c, _, _ in order_by)], "window_rank")
    types = {f.name: f.dataType for f in df.schema.fields}
    if not isinstance(types[window_end], TimestampType):
        raise ValidationError(
            f"window_rank: window column {window_end!r} must be a TIMESTAMP; it is {types[window_end]}"
        )
    if not order_by:
        raise ValidationError("window_rank needs an ORDER BY")
    if rank_start < 1 or rank_end < rank_start:
        raise ValidationError(f"window_rank: rank range {rank_start}..{rank_end} is empty or starts below 1")
    if rank_column in columns:
        raise ValidationError(f"window_rank rank column {rank_column!r} clashes with an input column")
    if watermark_column is not None and not isinstance(types.get(watermark_column), LongType):
        raise ValidationError(f"watermark_column {watermark_column!r} must be a LONG column of epoch ms")
    prepared, keys = windowed_input(df, columns, window_end, watermark_column, partition_by)
    spec = WindowRankSpec(
        columns=tuple(columns),
        window_end=window_end,
        window_end_ms=WINDOW_END_MS,
        order_by=tuple(SortFieldSpec(c, asc, nulls_first) for c, asc, nulls_first in order_by),
        rank_start=rank_start,
        rank_end=rank_end,
        newest_first_on_ties=newest_first_on_ties,
        watermark_column=watermark_column,
    )
    fields = [StructField(c, types[c]) for c in columns] + [StructField(rank_column, LongType(), False)]
    schema = output_schema(fields)
    return KeyedProcessor(
        _WindowRankLogic(spec, types), schema.names, clock="event", watermark_delay_ms=watermark_delay_ms
    ).apply(prepared, keys, schema)
