"""Top-N on Spark: :func:`rank`, Flink's Top-N functions (:mod:`.function`) run per partition key by the processor
shell (docs/semantics.md §6.4)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql.types import LongType, StructField

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind
from streamjoin.contract import RankSpec, SortFieldSpec
from streamjoin.errors import ValidationError
from streamjoin.runtime.engine import JvmLogic
from streamjoin.runtime.inputs import (
    changelog_columns,
    check_insert,
    check_state_ttl,
    check_upsert,
    output_schema,
    require_columns,
    rows_in_order,
    without_watermark_columns,
)
from streamjoin.runtime.processor import Element, KeyedLogic, KeyedProcessor
from streamjoin.runtime.rank.function import RankState, Strategy, TopNFunction
from streamjoin.runtime.window_rank.function import SortKey

__all__ = ["rank"]

#: State variable name.
RANK_STATE = "rankState"


class _RankLogic(KeyedLogic):
    """:class:`TopNFunction` as the shell's per-key logic; see :func:`rank`."""

    state_name = RANK_STATE

    def __init__(self, spec: RankSpec) -> None:
        self.spec = spec
        self.columns = list(spec.columns)
        keys = [SortKey(self.columns.index(s.column), s.ascending, s.nulls_first) for s in spec.order_by]
        row_key = [self.columns.index(c) for c in spec.row_key]
        self.fn = TopNFunction(keys, spec.rank_start, spec.rank_end, spec.output_rank, spec.strategy, row_key)

    def new_state(self, key: tuple) -> RankState:
        return RankState()

    def is_done(self, state: RankState) -> bool:
        return not state.groups and not state.count

    def elements(self, rows):
        strategy = self.spec.strategy
        for row in rows_in_order(rows):
            if strategy in ("update", "top1"):
                check_upsert(row, "rank")
            elif strategy != "retract":
                check_insert(row, "rank")
            yield Element(
                seq=row[SEQ_COLUMN],
                kind=RowKind.from_short(row[ROWKIND_COLUMN]),
                row=tuple(row[c] for c in self.columns),
            )

    def on_element(self, state, element, now):
        return self.fn.process_element(state, element.kind, element.row)

    def jvm_logic(self) -> JvmLogic:
        return JvmLogic("rank.RankLogic", self.spec)


def rank(
    df: DataFrame,
    *,
    partition_by: Sequence[str],
    order_by: Sequence[tuple[str, bool, bool]],
    rank_start: int,
    rank_end: int,
    rank_column: str | None,
    strategy: Strategy,
    row_key: Sequence[str] = (),
    state_ttl_ms: int | None = None,
) -> DataFrame:
    """Top-N per partition key of a changelog (docs/semantics.md §6.4).

    ``ROW_NUMBER() OVER (PARTITION BY partition_by ORDER BY order_by) AS rn`` filtered to ``rank_start <= rn <=
    rank_end``, with ``rn`` in the output when ``rank_column`` is given: the changes Flink's Top-N function of
    ``strategy`` emits (:mod:`streamjoin.runtime.rank.function`), as soon as each input change arrives (no timers).

    Args:
        df: a changelog DataFrame (columns + ``_rowkind`` + ``_seq``): insert-only for ``"first"`` and ``"append"``;
            ``+I``/``+U`` only for ``"update"`` and ``"top1"`` (Flink's ``UpdateFastStrategy`` reads an upsert stream
            whose sort key only improves); any changelog with its ``-U`` rows for ``"retract"``.
        partition_by: the PARTITION BY columns (at least one).
        order_by: ``(column, ascending, nulls_first)`` per ORDER BY field; for ``strategy="first"`` (processing
            time ascending) arrival order decides and it is not read.
        rank_start: the first rank kept, ≥ 1.
        rank_end: the last rank kept, ≥ ``rank_start``.
        rank_column: the output column of the rank (BIGINT), or None to leave the rank out.
        strategy: ``"first"``, ``"top1"``, ``"append"``, ``"update"`` or ``"retract"``
            (:mod:`streamjoin.runtime.rank.function`).
        row_key: the columns that identify a row (``"update"``: the input's upsert key, holding ``partition_by``).
        state_ttl_ms: idle state retention in ms (``table.exec.state.ttl``), or None.

    Returns:
        A changelog DataFrame: ``df``'s columns, ``rank_column`` (BIGINT) if given, ``_rowkind``, ``_seq``; the
        i-th change caused by an input change gets that change's ``_seq`` followed by ``i``.

    Raises:
        ValidationError: unknown columns, no partition column, an empty rank range or one starting below 1, a
            rank column that clashes with an input column, an unknown strategy.
        pyspark.errors.StreamingQueryException: at run time, wrapping
            :class:`~streamjoin.changelog.ChangelogError` for a change the strategy does not take.
    """
    columns = changelog_columns(df, "rank")
    if not partition_by:
        raise ValidationError("rank needs at least one PARTITION BY column")
    require_columns(df, [*partition_by, *(c for c, _, _ in order_by)], "rank")
    if strategy not in ("first", "top1", "append", "update", "retract"):
        raise ValidationError(f"rank: unknown strategy {strategy!r}; one of first, top1, append, update, retract")
    if (strategy == "update") != bool(row_key):
        raise ValidationError("rank: a row key goes with strategy 'update', and only with it")
    require_columns(df, list(row_key), "rank row_key")
    if strategy == "top1" and (rank_start, rank_end) != (1, 1):
        raise ValidationError(f"rank: strategy 'top1' keeps rank 1 only, not {rank_start}..{rank_end}")
    if strategy != "first" and not order_by:
        raise ValidationError("rank needs an ORDER BY")
    if rank_start < 1 or rank_end < rank_start:
        raise ValidationError(f"rank: rank range {rank_start}..{rank_end} is empty or starts below 1")
    if rank_column is not None and rank_column in columns:
        raise ValidationError(f"rank: rank column {rank_column!r} is an input column")
    check_state_ttl(state_ttl_ms, "rank")
    types = {f.name: f.dataType for f in df.schema.fields}
    spec = RankSpec(
        columns=tuple(columns),
        order_by=tuple(SortFieldSpec(c, asc, nulls_first) for c, asc, nulls_first in order_by),
        rank_start=rank_start,
        rank_end=rank_end,
        output_rank=rank_column is not None,
        strategy=strategy,
        row_key=tuple(row_key),
    )
    fields = [StructField(c, types[c]) for c in columns]
    if rank_column is not None:
        fields.append(StructField(rank_column, LongType()))
    schema = output_schema(fields)
    processor = KeyedProcessor(_RankLogic(spec), schema.names, clock="none", state_ttl_ms=state_ttl_ms)
    return processor.apply(without_watermark_columns(df), list(partition_by), schema)
