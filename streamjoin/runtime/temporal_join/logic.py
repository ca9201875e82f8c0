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
from dataclasses import dataclass, field
from typing import Literal

from streamjoin.changelog import RowKind
from streamjoin.errors import ValidationError
from streamjoin.runtime.timers import TimerService

__all__ = ["TemporalHow", "TemporalJoinState", "TemporalProcessTimeJoin", "TemporalRowTimeJoin"]

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
