"""The window join on Spark: :func:`window_join`, Flink's ``WindowJoinOperator`` (:mod:`.function`) run per join
key by the keyed two-input shell (docs/semantics.md §11.4).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType, TimestampType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN
from streamjoin.contract import TwoInputSpec, WindowJoinSpec
from streamjoin.errors import EngineError, ValidationError
from streamjoin.runtime.engine import JvmLogic, residual_in_join
from streamjoin.runtime.interval_join.residual import ID_FIELDS, pad_after_residual
from streamjoin.runtime.keyed_two_input import check_insert_only_row, join_pairs, keyed_two_input
from streamjoin.runtime.two_input import data_schema
from streamjoin.runtime.window_join.function import WindowJoinFunction, WindowJoinHow

__all__ = ["WindowJoinLogic", "window_join"]

_HOWS = ("inner", "left", "right", "full", "semi", "anti")
#: The constant join key of a window join on the window alone: one key, as Flink runs it with parallelism 1.
_ONE_KEY = ("_window_key_l", "_window_key_r")


class WindowJoinLogic:
    """:class:`WindowJoinFunction` as a :class:`~streamjoin.runtime.keyed_two_input.KeyedTwoInputLogic`: insert-only
    rows in, their window's ``+I`` rows out when its timer fires.

    Args:
        fn: the join.
        condition: the residual predicate (Spark SQL) for the Scala twin to evaluate inside the join (jvm engine
            only: the python logic never evaluates Spark SQL, and runs without one).

    Raises (from :meth:`on_row`):
        ChangelogError: a row that is not ``+I`` (Flink's planner refuses a window join over updating input).
    """

    def __init__(self, fn: WindowJoinFunction, condition: str | None = None):
        self.fn = fn
        self.condition = condition

    def new_state(self, key: tuple):
        return self.fn.new_state(key)

    def on_row(self, state, side, kind, row, rowtime, time, timers):
        check_insert_only_row("a window join", self.condition, side, kind, row)
        self.fn.process_element(state, side, row, rowtime, time, timers)
        return []

    def on_timer(self, state, timestamp, time, timers):
        return self.fn.on_timer(state, timestamp)

    def jvm_logic(self, inputs: TwoInputSpec) -> JvmLogic:
        """Scala twin: ``window_join.WindowJoinLogic``."""
        spec = WindowJoinSpec(inputs=inputs, how=self.fn.how, candidates=self.fn.candidates, condition=self.condition)
        return JvmLogic("window_join.WindowJoinLogic", spec)


def window_join(
    left: DataFrame,
    right: DataFrame,
    *,
    on: Sequence[str | tuple[str, str]],
    left_window_end: str,
    right_window_end: str,
    how: WindowJoinHow = "inner",
    condition: str | None = None,
    row_watermark_column: str | None = None,
    watermark_delay_ms: int = 0,
) -> DataFrame:
    """Window join of two insert-only changelogs whose rows carry the same windows (docs/semantics.md §11.4).

    ``left [INNER|LEFT|RIGHT|FULL] JOIN right ON left.window_start = right.window_start AND left.window_end =
    right.window_end AND left.k = right.k [AND condition]`` over two window table functions of the same windows
    (Flink's ``WindowJoin``), or with ``how="semi"``/``"anti"`` the left rows that have / have not a match in their
    window (``IN`` / ``EXISTS`` on the window columns). Once the watermark passes a window's end − 1 ms its rows are
    joined, emitted as ``+I`` (outer rows that matched nothing padded with NULLs) and freed; a row whose window has
    fired is dropped. A NULL join key never matches. The residual ``condition`` is part of the match: the jvm engine
    evaluates it inside the join; on the python engine Spark does (INNER: a filter on the joined rows; outer: a
    filter between the join in candidate mode and the padding step of
    :func:`~streamjoin.runtime.interval_join.residual.pad_after_residual`).

    Runs as a row-based ``transformWithState`` in ``timeMode="EventTime"`` keyed by the join key (the window is part
    of the state's key, not the grouping key). The watermark is Spark's, or the combined per-row watermark in
    ``row_watermark_column``.

    Args:
        left / right: changelog DataFrames (data columns + ``_rowkind`` + ``_seq``) of ``+I`` rows; no data column
            may be on both.
        on: the join keys but the window's: column names on both inputs or ``(left, right)`` pairs; may be empty
            (one key).
        left_window_end / right_window_end: each side's TIMESTAMP column of its row's window end (exclusive).
        how: ``"inner"``, ``"left"``, ``"right"``, ``"full"``, ``"semi"`` or ``"anti"``.
        condition: residual predicate, a Spark SQL boolean expression over the data columns of both sides, or None.
        row_watermark_column: optional LONG column on both inputs: the combined watermark (epoch ms) in effect when
            the row arrived (not part of the output).
        watermark_delay_ms: how far (ms) the input's watermark falls behind Spark's (the interval joins upstream hold
            it back; :class:`~streamjoin.runtime.processor.KeyedProcessor`).

    Returns:
        A changelog DataFrame of ``+I`` rows: the left data columns and the right ones (nullable; none for semi and
        anti), ``_rowkind``, ``_seq``.

    Raises:
        ValidationError: unknown columns, a window end that is not a TIMESTAMP, an unknown ``how``, clashing columns.
        EngineError: a semi or anti join with a residual predicate Spark must evaluate outside the join (the python
            engine, or a predicate with a Python UDF): only the jvm engine evaluates one there.
        pyspark.errors.StreamingQueryException: at run time, wrapping
            :class:`~streamjoin.changelog.ChangelogError` for a row that is not ``+I``.
    """
    if how not in _HOWS:
        raise ValidationError(f"window_join how={how!r}; expected one of {', '.join(_HOWS)}")
    for df, column, side in ((left, left_window_end, "left"), (right, right_window_end, "right")):
        if column not in df.columns or not isinstance(df.schema[column].dataType, TimestampType):
            raise ValidationError(f"window_join: the {side} window end {column!r} must be a TIMESTAMP column")
    pairs = join_pairs(on, "window_join") if on else []
    if not pairs:
        left, right = left.withColumn(_ONE_KEY[0], F.lit(0)), right.withColumn(_ONE_KEY[1], F.lit(0))
        pairs = [_ONE_KEY]
    schemas = [
        StructType([f for f in data_schema(df, side).fields if f.name != row_watermark_column])
        for df, side in ((left, "left"), (right, "right"))
    ]
    in_join = residual_in_join(left.sparkSession, condition, *schemas)
    if condition is not None and not in_join and how in ("semi", "anti"):
        raise EngineError(
            f"a {how} window join's residual predicate {condition!r} is evaluated inside the join only, which the "
            "jvm engine does (STREAMJOIN_ENGINE=jvm) for a predicate without Python UDFs"
        )
    candidates = condition is not None and not in_join and how in ("left", "right", "full")
    fn = WindowJoinFunction(how, (len(schemas[0].fields), len(schemas[1].fields)), candidates=candidates)
    joined = keyed_two_input(
        left,
        right,
        on=pairs,
        left_time=left_window_end,
        right_time=right_window_end,
        logic=WindowJoinLogic(fn, condition if in_join else None),
        row_watermark_column=row_watermark_column,
        watermark_delay_ms=watermark_delay_ms,
        extra_output=ID_FIELDS if candidates else (),
        watermarked_times=False,
    )
    data = [f.name for f in schemas[0].fields if f.name not in _ONE_KEY]
    if how not in ("semi", "anti"):
        data += [f.name for f in schemas[1].fields if f.name not in _ONE_KEY]
    if candidates:
        assert condition is not None  # candidate mode filters on a residual
        outer = (how in ("left", "full"), how in ("right", "full"))
        joined = pad_after_residual(joined, condition=condition, on=pairs, outer=outer)
    elif condition is not None and not in_join:
        joined = joined.filter(F.coalesce(F.expr(condition), F.lit(False)))
    return joined.select(*[F.col(f"`{c}`") for c in data], ROWKIND_COLUMN, SEQ_COLUMN)
