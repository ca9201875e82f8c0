"""The temporal joins on Spark: :func:`temporal_join` (Flink's ``TemporalRowTimeJoinOperator``, :mod:`.logic`, run per
key by the keyed two-input shell) and :func:`lookup_join` (docs/semantics.md §4).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN
from streamjoin.contract import TemporalJoinSpec, TwoInputSpec
from streamjoin.errors import ValidationError
from streamjoin.runtime.engine import JvmLogic
from streamjoin.runtime.inputs import require_columns
from streamjoin.runtime.keyed_two_input import join_pairs, keyed_two_input
from streamjoin.runtime.temporal_join.logic import _HOWS, TemporalHow, TemporalJoinState, TemporalRowTimeJoin
from streamjoin.runtime.two_input import data_schema

__all__ = ["TemporalJoinLogic", "lookup_join", "temporal_join"]


class TemporalJoinLogic:
    """:class:`TemporalRowTimeJoin` as a :class:`~streamjoin.runtime.interval_join.KeyedTwoInputLogic`
    (side 0 = probe, side 1 = versioned table)."""

    def __init__(self, join: TemporalRowTimeJoin):
        self.join = join

    def new_state(self, key: tuple) -> TemporalJoinState:
        return self.join.new_state(key)

    def on_row(self, state, side, kind, row, rowtime, time, timers):
        if side == 0:
            self.join.process_probe(state, kind, row, rowtime, timers)
        else:
            self.join.process_version(state, kind, row, rowtime, timers)
        return []

    def on_timer(self, state, timestamp, time, timers):
        return self.join.on_timer(state, time, timers)

    def jvm_logic(self, inputs: TwoInputSpec) -> JvmLogic:
        """Its Scala twin, ``TemporalJoinLogic.scala`` running ``TemporalRowTimeJoin.scala`` (Flink's state
        layout: probe rows and versions in a MapState each)."""
        return JvmLogic(
            "temporal_join.TemporalJoinLogic",
            TemporalJoinSpec(inputs=inputs, how=self.join.how, append_only_versions=self.join.append_only_versions),
        )


def temporal_join(
    probe: DataFrame,
    versioned: DataFrame,
    *,
    on: Sequence[str | tuple[str, str]],
    probe_time: str,
    version_time: str,
    how: TemporalHow = "inner",
    append_only_versions: bool = False,
    row_watermark_column: str | None = None,
    watermark_delay_ms: int = 0,
) -> DataFrame:
    """Event-time temporal join ``probe JOIN versioned FOR SYSTEM_TIME AS OF probe.probe_time`` (docs/semantics.md §4).

    Each probe row is emitted once the watermark reaches its time, joined with
    the version of its key valid at that time (latest ``version_time`` ≤ probe
    time); INNER drops a probe row without a valid version, LEFT pads it with
    nulls. Later versions never retract emitted rows. See the module docstring
    for Flink's rules (``-U`` dropped, ``-D`` ends a version, probe rows behind
    the watermark joined at the next watermark rise, old versions cleaned up).

    Spark specifics: the watermark is Spark's ``min`` over both inputs, moved
    once per micro-batch from the rows of the batches before (an input that has
    seen no row counts as 0); probe rows wait for it across micro-batches, and
    Spark's no-data micro-batches emit them when it moves. A key fires its
    timer when it sees the watermark rise, which inside one micro-batch is
    later than in Flink unless ``row_watermark_column`` gives each row
    Flink's watermark; the versions a probe row behind the watermark finds
    can then differ. Spark has no end-of-input watermark: probe rows the
    watermark never reaches stay buffered.

    Args:
        probe: changelog DataFrame (data columns + ``_rowkind`` + ``_seq``);
            its RowKinds pass through to the output.
        versioned: changelog DataFrame of the versioned table (``+I``/``+U``/``-D``;
            ``-U`` is ignored), or an append-only stream with
            ``append_only_versions=True``. No data column may also be in ``probe``.
        on: the versioned table's primary key, as column names present in both
            inputs or ``(probe column, versioned column)`` pairs.
        probe_time / version_time: TIMESTAMP rowtime columns with a watermark
            (``withWatermark`` upstream).
        how: ``"inner"`` or ``"left"``.
        append_only_versions: ``versioned`` is an append-only log deduplicated
            into versions (Flink's versioned view: latest row per key by time).
        row_watermark_column: optional LONG column on both inputs with the
            combined watermark (epoch ms) in effect when the row arrived (Flink's
            per-record watermark); not part of the output.
        watermark_delay_ms: how far (ms) the input's watermark falls behind Spark's (the interval joins upstream hold
            it back; :class:`~streamjoin.runtime.processor.KeyedProcessor`).

    Returns:
        A changelog DataFrame: probe data columns, versioned data columns
        (nullable), ``_rowkind`` (the probe row's) and ``_seq`` (the key's
        emission order within the micro-batch). Rowtime columns carry no watermark.

    Raises:
        ValidationError: for bad arguments (unknown columns, rowtime without
            watermark, clashing names, ``how`` not inner/left).
        pyspark.errors.StreamingQueryException: at run time, wrapping
            ValidationError for a non-``+I`` row with ``append_only_versions``.

    Example:
        >>> in_eur = temporal_join(orders, rates.withColumnRenamed("currency", "rate_currency"),
        ...     on=[("currency", "rate_currency")], probe_time="order_time",
        ...     version_time="rate_time", how="left")  # doctest: +SKIP
    """
    pairs = join_pairs(on, "temporal_join")
    extra = 0 if row_watermark_column is None else 1
    arity = len(data_schema(versioned, "versioned").fields) - extra
    join = TemporalRowTimeJoin(how, arity, append_only_versions=append_only_versions)
    return keyed_two_input(
        probe,
        versioned,
        on=pairs,
        left_time=probe_time,
        right_time=version_time,
        logic=TemporalJoinLogic(join),
        row_watermark_column=row_watermark_column,
        watermark_delay_ms=watermark_delay_ms,
    )


def lookup_join(
    probe: DataFrame,
    table: DataFrame | str,
    *,
    on: Sequence[str | tuple[str, str]],
    how: TemporalHow = "inner",
) -> DataFrame:
    """Processing-time temporal join (lookup join): each probe row joins the current row of ``table``.

    ``probe JOIN table FOR SYSTEM_TIME AS OF probe.proctime ON probe.k = table.pk``
    (docs/semantics.md §4), with a Delta table as the current rows: a stream-static
    join, for which Spark plans the table scan again in every micro-batch, so a
    micro-batch reads the table's latest committed version when it starts.
    Consistency: every row of one micro-batch sees the same table version
    (snapshot isolation per micro-batch); a change committed while a
    micro-batch runs is seen from the next one; rows already emitted are never
    revised (no retraction, as in Flink). Like Flink's lookup join, there is no
    state and no watermark.

    Args:
        probe: streaming changelog DataFrame (data columns + ``_rowkind`` + ``_seq``);
            RowKind and ``_seq`` pass through.
        table: a Delta table path, or a batch DataFrame (e.g. ``spark.read.table(...)``).
        on: the table's key, as column names present in both or ``(probe, table)`` pairs.
        how: ``"inner"`` or ``"left"`` (probe rows with no current row padded with nulls).

    Returns:
        A changelog DataFrame: probe data columns, table columns, ``_rowkind``, ``_seq``.

    Raises:
        ValidationError: for unknown columns, clashing names, or another ``how``.

    Example:
        >>> enriched = lookup_join(orders, "/lake/customers", on=[("cust_id", "c_custkey")],
        ...                        how="left")  # doctest: +SKIP
    """
    if how not in _HOWS:
        raise ValidationError(f"lookup join type {how!r} is not supported; expected one of {_HOWS}")
    pairs = join_pairs(on, "lookup_join")
    if isinstance(table, str):
        table = probe.sparkSession.read.format("delta").load(table)
    probe_cols = data_schema(probe, "lookup_join probe").names
    require_columns(probe, [p for p, _ in pairs], "lookup_join probe key")
    require_columns(table, [t for _, t in pairs], "lookup_join table key")
    clash = sorted(set(probe_cols) & set(table.columns))
    if clash:
        raise ValidationError(f"columns {clash} are in both the probe and the table; rename them on one side")
    condition = [probe[p] == table[t] for p, t in pairs]
    joined = probe.join(table, on=condition, how=how)
    return joined.select(
        *[probe[c] for c in probe_cols], *[table[c] for c in table.columns], probe[ROWKIND_COLUMN], probe[SEQ_COLUMN]
    )
