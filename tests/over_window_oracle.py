"""Independent oracles for OVER aggregation tests: the batch window query and Flink's late rule.

Nothing here calls the operator: :func:`batch_over` evaluates each row's frame
from scratch over the final rows (what a batch ``SELECT … OVER`` returns), and
:func:`flink_late_rows` replays only the bookkeeping that decides lateness
(timers per key and the watermark), written out directly from Flink's
``RowTime*PrecedingFunction`` rules.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from streamjoin.runtime.timers import MIN_TIME

#: Aggregates the oracle evaluates, by name, over a frame's argument values in frame order.
_FUNCTIONS = {
    "MIN": lambda vs: min((v for v in vs if v is not None), default=None),
    "MAX": lambda vs: max((v for v in vs if v is not None), default=None),
    "SUM": lambda vs: sum(v for v in vs if v is not None) if any(v is not None for v in vs) else None,
    "COUNT": lambda vs: sum(v is not None for v in vs),
    "FIRST_VALUE": lambda vs: next((v for v in vs if v is not None), None),
    "LAST_VALUE": lambda vs: next((v for v in reversed(vs) if v is not None), None),
}


def flink_avg(values: Sequence) -> int | float | None:
    """AVG as Flink computes it: of INTs an INT (division truncated toward zero), of DOUBLEs sum / count."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    total = sum(present)
    if isinstance(total, float):
        return total / len(present)
    quotient = abs(total) // len(present)
    return quotient if total >= 0 else -quotient


def aggregate(function: str, values: Sequence, star: bool = False):
    """One aggregate over a frame's values (``star``: COUNT(*), counting nulls too)."""
    if star:
        return len(values)
    if function == "AVG":
        return flink_avg(values)
    return _FUNCTIONS[function](values)


def batch_over(
    rows: Sequence[tuple[Hashable, int, int, tuple]],
    frame: str,
    preceding: int | None,
    calls: Sequence[tuple[str, int | None]],
) -> list[tuple]:
    """The batch OVER query: for each ``(key, time, arrival, row)``, ``row + aggregates over its frame``.

    Rows of a partition are ordered by (time, arrival). ROWS: the row and the
    ``preceding`` rows before it. RANGE: rows with time in
    ``[time − preceding, time]``, later-arriving peers included.
    ``calls`` are ``(function, argument position or None for COUNT(*))``.
    """
    out = []
    partitions: dict = {}
    for key, time, arrival, row in rows:
        partitions.setdefault(key, []).append((time, arrival, row))
    for ordered in partitions.values():
        ordered.sort(key=lambda r: (r[0], r[1]))
        for i, (time, _, row) in enumerate(ordered):
            if frame == "rows":
                start = 0 if preceding is None else max(0, i - preceding)
                in_frame = ordered[start : i + 1]
            else:
                low = MIN_TIME if preceding is None else time - preceding
                in_frame = [r for r in ordered if low <= r[0] <= time]
            values = []
            for function, position in calls:
                args = [r[2][position] if position is not None else None for r in in_frame]
                values.append(aggregate(function, args, star=position is None))
            out.append(row + tuple(values))
    return out


def flink_late_rows(
    rows: Sequence[tuple[Hashable, int]],
    watermarks: Sequence[int],
    frame: str,
    preceding: int | None,
) -> list[bool]:
    """Which ``(key, time)`` rows Flink's event-time OVER drops, given the watermark before each row.

    - UNBOUNDED: late iff ``time ≤ watermark``.
    - Bounded: late iff ``time ≤`` the key's last fired timer. A timer is the
      time of an accepted row; it fires when the watermark *rises* to or past
      it. RANGE adds the clean-up timer ``t + 1.5 × preceding + 1`` (moved only
      when it would fire before ``t + preceding + 1``); when the key's latest
      clean-up timer fires the key forgets its last fired timer.
    """
    late = []
    watermark = MIN_TIME
    pending: dict = {}
    last_fired: dict = {}
    cleanup: dict = {}
    for (key, time), mark in zip(rows, watermarks):
        if mark > watermark:
            watermark = mark
            for k, timers in pending.items():
                for t in sorted(x for x in timers if x <= watermark):
                    timers.discard(t)
                    if cleanup.get(k) is not None and cleanup[k] <= t:
                        last_fired[k], cleanup[k] = 0, None
                    else:
                        last_fired[k] = t
        if preceding is None:
            is_late = time <= watermark
        else:
            is_late = time <= last_fired.get(key, 0)
            if not is_late:
                pending.setdefault(key, set()).add(time)
                if frame == "range" and (cleanup.get(key) is None or cleanup[key] < time + preceding + 1):
                    cleanup[key] = time + int(preceding * 1.5) + 1
                    pending[key].add(cleanup[key])
        late.append(is_late)
    return late
