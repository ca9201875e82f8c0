"""Temporal table joins (docs/semantics.md §4): event time against a versioned table, and the
processing-time lookup join against the current rows of a Delta table.

Event time, ``probe JOIN versioned FOR SYSTEM_TIME AS OF probe.rowtime ON probe.k = versioned.pk``
(INNER or LEFT), follows Apache Flink 2.3.0's ``TemporalRowTimeJoinOperator``
(flink-table-runtime ``operators/join/temporal``):

* versions are kept per key by version time (a later change at the same time
  replaces the earlier one); ``-U`` changes are dropped before the join, as
  Flink's planner does (the operator needs only ``+I``/``+U``/``-D`` of an
  upsert-keyed versioned table); a ``-D`` at time *v* means "no row from *v* on";
* a probe row is buffered until the combined watermark (the minimum of both
  inputs' watermarks) reaches its time, then joined with the version valid at
  that time (the latest version with version time ≤ probe time; a version
  exactly at the probe time applies); a probe row with no valid version, or
  whose valid version is a ``-D``, is dropped by INNER and emitted
  null-padded by LEFT; outputs keep the probe rows' arrival order and RowKind;
* a probe row is never late: one arriving at or behind the watermark is
  buffered like any other and emitted at the next rise of the combined
  watermark (its timer is already due), joined with the versions still in
  state then — the version valid at its time if clean-up has not removed it,
  else none (so LEFT pads it);
* versions older than the newest version at or before the watermark are
  dropped when the key's timer fires, so state holds per key the pending
  probe rows and the versions that can still apply, not the history; later
  versions never change emitted results (no retraction);
* one event-time timer per key, at the smallest pending time.

A versioned table can also be an append-only stream deduplicated into
versions (Flink's versioned view ``ROW_NUMBER() OVER (PARTITION BY pk ORDER BY
t DESC) = 1``): a row becomes the key's new version when its time is not older
than the key's latest version; an older row is ignored, as Flink's rowtime
deduplication ignores it.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pyspark.sql import DataFrame

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind
from streamjoin.contract import TemporalJoinSpec, TwoInputSpec
from streamjoin.errors import ValidationError
from streamjoin.runtime.engine import JvmLogic
from streamjoin.runtime.keyed_two_input import join_pairs, keyed_two_input
from streamjoin.runtime.timers import TimerService
from streamjoin.runtime.two_input import data_schema
from streamjoin.runtime.tws import require_columns

__all__ = [
    "TemporalHow",
    "TemporalJoinOperator",
    "TemporalJoinState",
    "TemporalProcessTimeJoin",
    "TemporalRowTimeJoin",
    "lookup_join",
    "temporal_join",
]

TemporalHow = Literal["inner", "left"]
_HOWS = ("inner", "left")


@dataclass
class TemporalJoinState:
    """State of one key (Flink: ``left`` / ``right`` / ``next-index`` / ``timer`` states).

    ``probes`` maps an arrival index to ``(rowtime, RowKind, row)`` of a buffered
    probe row; ``versions`` maps a version time (ms) to ``(RowKind, row)``;
    ``timer`` is the registered event-time timer.
    """

    probes: dict[int, tuple[int, RowKind, tuple]] = field(default_factory=dict)
    next_index: int = 0
    versions: dict[int, tuple[RowKind, tuple]] = field(default_factory=dict)
    timer: int | None = None

    @property
    def row_count(self) -> int:
        """Probe rows buffered plus versions held."""
        return len(self.probes) + len(self.versions)

    @property
    def is_empty(self) -> bool:
        return not self.probes and not self.versions and self.timer is None


class TemporalRowTimeJoin:
    """The event-time temporal join logic for one key (Flink ``TemporalRowTimeJoinOperator``).

    Args:
        how: ``"inner"`` or ``"left"``.
        versioned_arity: number of columns of the versioned table (for padding).
        append_only_versions: the versioned side is an append-only stream
            deduplicated into versions (keep the row with the latest time per key).

    Raises:
        ValidationError: for another ``how`` or a negative arity.

    Example:
        >>> join = TemporalRowTimeJoin("left", 2)
        >>> state = TemporalJoinState()
        >>> class T:
        ...     def register(self, t): pass
        ...     def delete(self, t): pass
        >>> join.process_version(state, RowKind.INSERT, ("EUR", 114), 9, T())
        >>> join.process_probe(state, RowKind.INSERT, ("o1", "EUR"), 10, T())
        >>> join.on_timer(state, 10, T())
        [(<RowKind.INSERT: '+I'>, ('o1', 'EUR', 'EUR', 114))]
    """

    def __init__(self, how: TemporalHow, versioned_arity: int, *, append_only_versions: bool = False):
        if how not in _HOWS:
            raise ValidationError(f"temporal join type {how!r} is not supported; expected one of {_HOWS}")
        if not isinstance(versioned_arity, int) or versioned_arity < 0:
            raise ValidationError(f"versioned_arity must be a non-negative int, got {versioned_arity!r}")
        self.how = how
        self.append_only_versions = append_only_versions
        self._nulls = (None,) * versioned_arity

    def new_state(self, key: tuple = ()) -> TemporalJoinState:
        return TemporalJoinState()

    def process_probe(
        self, state: TemporalJoinState, kind: RowKind, row: tuple, row_time: int, timers: TimerService
    ) -> None:
        """Buffer a probe row until the watermark reaches ``row_time``.

        A row at or behind the watermark is buffered too (Flink 2.3.0 has no late
        rule here): its timer is due and fires at the next watermark rise.
        """
        state.probes[state.next_index] = (row_time, kind, row)
        state.next_index += 1
        self._register_smallest_timer(state, row_time, timers)

    def process_version(
        self, state: TemporalJoinState, kind: RowKind, row: tuple, version_time: int, timers: TimerService
    ) -> None:
        """Record a change of the versioned table as the version at ``version_time``.

        Raises:
            ValidationError: an append-only versioned input carrying another RowKind than ``+I``.
        """
        if self.append_only_versions:
            if kind is not RowKind.INSERT:
                raise ValidationError(
                    f"an append-only versioned input must contain only +I rows, got {kind.short}{list(row)}"
                )
            if state.versions and version_time < max(state.versions):
                return
        elif kind is RowKind.UPDATE_BEFORE:
            return
        state.versions[version_time] = (kind, row)
        self._register_smallest_timer(state, version_time, timers)

    def on_timer(self, state: TemporalJoinState, watermark: int, timers: TimerService) -> list[tuple[RowKind, tuple]]:
        """The key's timer fires: emit every buffered probe row at or before ``watermark``
        (in arrival order), drop versions no later probe can use, set the next timer."""
        state.timer = None
        times = sorted(state.versions)
        out: list[tuple[RowKind, tuple]] = []
        for index in sorted(i for i, (t, _, _) in state.probes.items() if t <= watermark):
            row_time, kind, row = state.probes.pop(index)
            version = self._valid_version(state, times, row_time)
            if version is not None:
                out.append((kind, row + version))
            elif self.how == "left":
                out.append((kind, row + self._nulls))
        # Keep the newest version at or before the watermark and everything after it.
        at_or_before = [t for t in times if t <= watermark]
        for t in at_or_before[:-1]:
            del state.versions[t]
        if state.probes:
            self._register(state, min(t for t, _, _ in state.probes.values()), timers)
        else:
            state.next_index = 0
        return out

    @staticmethod
    def _valid_version(state: TemporalJoinState, times: list[int], row_time: int) -> tuple | None:
        # times is sorted: the valid version is the last one at or before row_time.
        position = bisect.bisect_right(times, row_time)
        if position == 0:
            return None
        kind, row = state.versions[times[position - 1]]
        return row if kind.is_accumulate else None

    def _register_smallest_timer(self, state: TemporalJoinState, timestamp: int, timers: TimerService) -> None:
        if state.timer is None:
            self._register(state, timestamp, timers)
        elif state.timer > timestamp:
            timers.delete(state.timer)
            self._register(state, timestamp, timers)

    @staticmethod
    def _register(state: TemporalJoinState, timestamp: int, timers: TimerService) -> None:
        state.timer = timestamp
        timers.register(timestamp)


class TemporalProcessTimeJoin:
    """Processing-time temporal join for one key (Flink ``TemporalProcessTimeJoinOperator``):
    the key's current versioned row is the last accumulate change (``-U``/``-D`` clear it), and
    each probe row joins it at arrival. The Delta lookup join (:func:`lookup_join`) is the
    same rule with a Delta snapshot as the current rows.

    Args:
        how: ``"inner"`` or ``"left"``.
        versioned_arity: number of columns of the versioned table (for padding).
    """

    def __init__(self, how: TemporalHow, versioned_arity: int):
        if how not in _HOWS:
            raise ValidationError(f"temporal join type {how!r} is not supported; expected one of {_HOWS}")
        if not isinstance(versioned_arity, int) or versioned_arity < 0:
            raise ValidationError(f"versioned_arity must be a non-negative int, got {versioned_arity!r}")
        self.how = how
        self._nulls = (None,) * versioned_arity

    def process_version(self, current: tuple | None, kind: RowKind, row: tuple) -> tuple | None:
        """Returns the key's new current row."""
        return row if kind.is_accumulate else None

    def process_probe(self, current: tuple | None, kind: RowKind, row: tuple) -> list[tuple[RowKind, tuple]]:
        if current is not None:
            return [(kind, row + current)]
        return [(kind, row + self._nulls)] if self.how == "left" else []


class TemporalJoinOperator:
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
        """Its Scala twin, ``TemporalJoinLogic.scala`` (Flink's state layout: probe rows and versions
        in a MapState each)."""
        return JvmLogic(
            "TemporalJoinLogic",
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
        logic=TemporalJoinOperator(join),
        row_watermark_column=row_watermark_column,
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
