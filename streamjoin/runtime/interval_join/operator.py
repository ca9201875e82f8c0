"""The interval join on Spark: :func:`interval_join`, Flink's ``TimeIntervalJoin`` (:mod:`.logic`) run per join key by
the keyed two-input shell (docs/semantics.md §3).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamjoin.changelog import RowKind
from streamjoin.contract import IntervalJoinSpec, TwoInputSpec
from streamjoin.runtime.engine import JvmLogic, residual_in_join
from streamjoin.runtime.interval_join.logic import (
    IntervalBounds,
    IntervalJoinState,
    JoinHow,
    ProcTimeIntervalJoin,
    RowTimeIntervalJoin,
)
from streamjoin.runtime.interval_join.residual import ID_FIELDS, pad_after_residual
from streamjoin.runtime.keyed_two_input import check_insert_only_row, join_pairs, keyed_two_input
from streamjoin.runtime.two_input import data_schema

__all__ = ["IntervalJoinLogic", "interval_join"]

_log = logging.getLogger(__name__)


class IntervalJoinLogic:
    """:class:`TimeIntervalJoin` as a :class:`KeyedTwoInputLogic`: insert-only rows in, ``+I`` rows out.

    Raises (from :meth:`on_row`):
        ChangelogError: for a row that is not ``+I`` (Flink's planner rejects
            interval joins over updating inputs).
    """

    def __init__(self, join: RowTimeIntervalJoin | ProcTimeIntervalJoin, condition: str | None = None):
        """``condition``: the residual predicate (Spark SQL) for the Scala twin to evaluate inside the
        join (jvm engine only: the Python logic never evaluates Spark SQL, and runs without one)."""
        self.join = join
        self.condition = condition

    def new_state(self, key: tuple) -> IntervalJoinState:
        return self.join.new_state(key)

    def on_row(self, state, side, kind, row, rowtime, time, timers):
        check_insert_only_row("an interval join", self.condition, side, kind, row)
        process = self.join.process_left if side == 0 else self.join.process_right
        return [(RowKind.INSERT, r) for r in process(state, row, rowtime, self.join.operator_time(time), timers)]

    def on_timer(self, state, timestamp, time, timers):
        return [
            (RowKind.INSERT, r) for r in self.join.on_timer(state, timestamp, self.join.operator_time(time), timers)
        ]

    def jvm_logic(self, inputs: TwoInputSpec) -> JvmLogic:
        """Scala twin."""
        j, b = self.join, self.join.bounds
        return JvmLogic(
            "interval_join.IntervalJoinLogic",
            IntervalJoinSpec(
                inputs=inputs,
                how=j.how,
                lower_ms=b.lower_ms,
                upper_ms=b.upper_ms,
                candidates=j.candidates,
                condition=self.condition,
            ),
        )


def interval_join(
    left: DataFrame,
    right: DataFrame,
    *,
    on: Sequence[str | tuple[str, str]],
    left_time: str | None,
    right_time: str | None,
    lower_bound_ms: int,
    upper_bound_ms: int,
    how: JoinHow = "inner",
    lower_inclusive: bool = True,
    upper_inclusive: bool = True,
    row_watermark_column: str | None = None,
    condition: str | None = None,
    watermark_delay_ms: int = 0,
) -> DataFrame:
    """Interval join of two insert-only changelog streams, with Flink SQL's semantics (docs/semantics.md §3).

    ``left [INNER|LEFT|RIGHT|FULL] JOIN right ON left.k = right.k AND right.t
    BETWEEN left.t + lower_bound_ms AND left.t + upper_bound_ms`` (each bound
    inclusive unless told otherwise; a strict bound moves by 1 ms, as Flink
    plans ``<`` / ``>``). Inner rows are emitted as soon as both rows are
    there; an outer row that never matched is emitted null-padded once, when
    the watermark passes the end of its window; a late row (its window already
    behind the watermark) is joined with the rows still in state, never
    stored, and null-padded at once on an outer side if it matched nothing. A
    null join key never matches. See the module docstring for Flink's rules.
    A residual ``condition`` is part of the match, as in Flink: a pair for
    which it is false or NULL is not emitted and does not keep an outer row
    from being null-padded. The jvm engine evaluates it inside the join; on the
    python engine Spark does (INNER: a filter on the joined rows; outer: two
    stateful steps around a Spark filter, :mod:`streamjoin.runtime.interval_join.residual`).
    Where the residual is evaluated is logged at INFO by ``streamjoin.runtime.interval_join``
    (``streamjoin explain`` renders the operator from the plan).

    Spark specifics (what differs from Flink, and why):

    - The watermark is Spark's ``min`` over the inputs (an input that has seen
      no row counts as 0, like Flink's operator time before both inputs have a
      watermark), computed at the end of each micro-batch from the rows of the
      batches before. Every row of a micro-batch sees that watermark, where
      Flink's moves after each row: a row that Flink finds late because an
      earlier row of the *same* micro-batch advanced the watermark is joined
      and stored here. ``row_watermark_column`` closes that gap when the
      source knows Flink's per-row watermark.
    - Spark drops rows behind the watermark before a ``transformWithState``;
      the operator hides the watermark marker from that filter so that Flink's
      late rule decides instead.
    - Spark has no end-of-input watermark: outer rows of a bounded input whose
      window the watermark never passes stay in state (Flink flushes them at
      the end of input) until a later row moves the watermark.
    - Processing time runs in Spark's ``"ProcessingTime"`` mode (its timers
      emit the null-padded rows on time); a micro-batch's processing time is
      the time of all its rows. That mode runs a micro-batch on every trigger:
      use a processing-time trigger, or ``availableNow`` with
      ``spark.sql.streaming.noDataMicroBatches.enabled=false``, else the query
      never ends.

    Spark's native stream-stream join is not used: it drops rows behind the
    watermark (Flink joins them with what state holds) and evicts state and
    emits outer rows by its own rules, at other times than Flink.

    Args:
        left / right: changelog DataFrames (data columns + ``_rowkind`` + ``_seq``)
            holding only ``+I`` rows; no data column may be on both.
        on: join keys: column names present in both inputs, or ``(left, right)`` pairs.
        left_time / right_time: TIMESTAMP rowtime columns with a watermark
            (``withWatermark`` upstream), or both ``None`` for a processing-time
            interval join (a row's time is its micro-batch's processing time).
        lower_bound_ms / upper_bound_ms: range of ``right.t - left.t``, milliseconds.
        how: ``"inner"``, ``"left"``, ``"right"`` or ``"full"``.
        lower_inclusive / upper_inclusive: ``<=`` (True) or ``<`` (False).
        row_watermark_column: optional LONG column on both inputs with the
            combined watermark (epoch ms) in effect when the row arrived; the
            operator advances to it before the row (not part of the output).
        condition: residual predicate, a Spark SQL boolean expression over the
            output's data columns (``"l_id <> r_tag"``), or None.
        watermark_delay_ms: how far (ms) the input's watermark falls behind Spark's (the interval joins upstream hold
            it back; :class:`~streamjoin.runtime.processor.KeyedProcessor`).

    Returns:
        A changelog DataFrame: left data columns, right data columns (nullable),
        ``_rowkind`` (always ``+I``) and ``_seq`` (the key's emission order
        within the micro-batch). Rowtime columns carry no watermark.

    Raises:
        ValidationError: for bad arguments (unknown columns, rowtime without
            watermark, clashing names, unknown ``how``, non-int bounds).
        pyspark.errors.AnalysisException: for a ``condition`` Spark cannot analyse.
        pyspark.errors.StreamingQueryException: at run time, wrapping
            :class:`~streamjoin.changelog.ChangelogError` for a row that is not ``+I``.

    Example:
        >>> shipped = interval_join(orders, shipments, on=[("order_id", "ship_order_id")],
        ...     left_time="order_ts", right_time="ship_ts", lower_bound_ms=0,
        ...     upper_bound_ms=30 * 86_400_000, how="left")  # doctest: +SKIP
    """
    pairs = join_pairs(on, "interval_join")
    bounds = IntervalBounds.between(
        lower_bound_ms, upper_bound_ms, lower_inclusive=lower_inclusive, upper_inclusive=upper_inclusive
    )
    schemas = [
        StructType([f for f in data_schema(df, side).fields if f.name != row_watermark_column])
        for df, side in ((left, "left"), (right, "right"))
    ]
    arities = (len(schemas[0].fields), len(schemas[1].fields))
    join_class = ProcTimeIntervalJoin if left_time is None else RowTimeIntervalJoin
    in_join = residual_in_join(left.sparkSession, condition, *schemas)
    two_steps = condition is not None and not in_join and how != "inner"
    join = join_class(how, bounds, *arities, candidates=two_steps)
    joined = keyed_two_input(
        left,
        right,
        on=pairs,
        left_time=left_time,
        right_time=right_time,
        logic=IntervalJoinLogic(join, condition if in_join else None),
        row_watermark_column=row_watermark_column,
        watermark_delay_ms=watermark_delay_ms,
        extra_output=ID_FIELDS if two_steps else (),
    )
    if condition is not None:
        _log.info("interval join residual predicate %r: %s", condition, _residual_placement(how, in_join))
    if two_steps:
        assert condition is not None  # two steps evaluate a residual
        return pad_after_residual(joined, condition=condition, on=pairs, outer=(join.left_outer, join.right_outer))
    if condition is not None and not in_join:
        return joined.filter(F.coalesce(F.expr(condition), F.lit(False)))
    return joined


def _residual_placement(how: str, in_join: bool) -> str:
    """Where the engine evaluates a residual predicate (the planner's EXPLAIN shows the predicate itself)."""
    if in_join:
        return "in the join, on each pair in the window"
    if how == "inner":
        return "Spark filter on the joined rows"
    return "Spark filter on candidate pairs between two stateful steps; outer rows padded at expiry"
