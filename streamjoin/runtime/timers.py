"""One key's timers, with Flink's timer-service semantics, kept in the key's state.

Flink's ``InternalTimerService`` fires event-time timers when a watermark
*strictly greater* than the previous one arrives: every timer at or before the
new watermark fires, in time order; a timer registered for a time the
watermark has already passed waits for the next increase. Registering the
same time twice gives one timer. The same holds for processing time.

Operators here keep a :class:`TimerService` per key inside the key's state and
advance it lazily — when the key gets input, or when the single Spark timer
that stands for the key's earliest timer (:meth:`TimerService.next_wakeup`)
expires. Because a key's outputs depend only on the order of its own rows and
of the times it sees, firing its timers late (at its next activity) gives the
same outputs as firing them the moment the watermark passed.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["MAX_TIME", "MIN_TIME", "KeyTimers", "TimerService"]

#: Time before any watermark (Flink's ``Long.MIN_VALUE``).
MIN_TIME = -(2**63)
#: The end-of-input watermark (Flink's ``Long.MAX_VALUE``): nothing fires after it.
MAX_TIME = 2**63 - 1


class KeyTimers(Protocol):
    """What an operator's logic does with its key's timers: :class:`TimerService`'s ``register`` and ``delete``."""

    def register(self, at: int) -> None: ...

    def delete(self, at: int) -> None: ...


@dataclass
class TimerService:
    """Timers of one key and the latest time (watermark or processing time) the key has seen.

    Attributes:
        time: the latest time advanced to, epoch milliseconds.
        timers: registered timer times, sorted, unique.
    """

    time: int = MIN_TIME
    timers: list[int] = field(default_factory=list)

    def register(self, at: int) -> None:
        """Register a timer at ``at`` (ms); a second registration of the same time is a no-op."""
        i = bisect.bisect_left(self.timers, at)
        if i == len(self.timers) or self.timers[i] != at:
            self.timers.insert(i, at)

    def delete(self, at: int) -> None:
        """Delete the timer at ``at`` if there is one."""
        i = bisect.bisect_left(self.timers, at)
        if i < len(self.timers) and self.timers[i] == at:
            del self.timers[i]

    def advance(self, time: int, on_timer: Callable[[int], Iterable]) -> list:
        """Move to ``time`` and fire the due timers, as a watermark (or clock) advance does in Flink.

        Nothing happens unless ``time`` is strictly greater than :attr:`time`.
        Timers at or before ``time`` are removed and passed to ``on_timer`` in
        time order (including any that ``on_timer`` itself registers at or
        before ``time``).

        Returns:
            The concatenated outputs of the ``on_timer`` calls.
        """
        if time <= self.time:
            return []
        self.time = time
        out: list = []
        while self.timers and self.timers[0] <= time:
            out.extend(on_timer(self.timers.pop(0)))
        return out

    def next_wakeup(self) -> int | None:
        """The earliest time at which a timer can fire: the first timer, but after :attr:`time`.

        ``None`` when no timer is registered or time has reached :data:`MAX_TIME`.
        A timer at or before :attr:`time` fires only on the next strict
        increase, hence ``time + 1``.
        """
        if not self.timers or self.time >= MAX_TIME:
            return None
        return max(self.timers[0], self.time + 1)
