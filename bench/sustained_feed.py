"""The sustained-load benchmark's input: the TPC-H changelogs pass after pass, written to Kafka at a fixed rate.

One pass is every record :func:`streamjoin.datagen.topics.topic_records` makes of a
:class:`~streamjoin.datagen.tpch.TpchChangelog` and the ECB rates, all five topics merged into one stream
in time order: an event topic's record (``order_events``, ``shipments``, ``rates``) at its rowtime, a CDC
topic's record (``orders``, ``lineitem``, which are not in time order) at its position spread evenly over
the pass's time span. Pass ``k`` is pass 0 with every date and time ``k`` spans later and every order key
``k`` key steps higher: the keys are new (a pass neither updates nor retracts an earlier pass's rows) and
event time keeps advancing, so the watermarks advance and the operators can free what they keep for
earlier passes (interval and temporal joins, OVER). At 400 records/s a pass of scale factor 0.01
(~210,000 records) lasts ~9 minutes of wall-clock time for ~7.3 years of event time.

:class:`PacedProducer` writes that stream at ``rate`` records/s (all topics together), plus bursts.
"""

from __future__ import annotations

import datetime as dt
import heapq
import itertools
import threading
import time
from collections.abc import Iterator

from streamjoin.connectors.kafka_admin import produce
from streamjoin.datagen.topics import rate_rows, topic_records
from streamjoin.datagen.tpch import Change, TpchChangelog

__all__ = ["Feed", "PacedProducer", "due", "shift_row"]

#: The order key columns: shifted by a pass's key offset.
KEY_COLUMNS = frozenset({"o_orderkey", "l_orderkey"})


def shift_row(row: dict, days: int, key_offset: int) -> dict:
    """``row`` with every DATE/TIMESTAMP value (``date``/``datetime``) ``days`` later and the order keys
    (:data:`KEY_COLUMNS`) ``key_offset`` higher; other values as they are (a new dict)."""
    later = dt.timedelta(days=days)
    return {
        column: value + key_offset if column in KEY_COLUMNS else value + later if isinstance(value, dt.date) else value
        for column, value in row.items()
    }


def _shift_change(change: Change, days: int, key_offset: int) -> Change:
    before = None if change.before is None else shift_row(change.before, days, key_offset)
    return Change(change.kind, shift_row(change.row, days, key_offset), before)


class _ShiftedChangelog:
    """A changelog's rows shifted (:func:`shift_row`), with the attributes :func:`topic_records` reads."""

    def __init__(self, base: TpchChangelog, days: int, key_offset: int) -> None:
        self._base, self._days, self._offset = base, days, key_offset

    def orders_changes(self) -> Iterator[Change]:
        return (_shift_change(c, self._days, self._offset) for c in self._base.orders_changes())

    def lineitem_changes(self) -> Iterator[Change]:
        return (_shift_change(c, self._days, self._offset) for c in self._base.lineitem_changes())

    @property
    def order_events(self) -> list[dict]:
        return [shift_row(e, self._days, self._offset) for e in self._base.order_events]

    @property
    def lineitems(self) -> list[dict]:
        return [shift_row(i, self._days, self._offset) for i in self._base.lineitems]


def _epoch_ms(time_: dt.datetime) -> int:
    return int(time_.replace(tzinfo=dt.UTC).timestamp() * 1000)


class Feed:
    """The endless record stream of the module docstring over ``base``.

    Attributes:
        first / last: the earliest and latest rowtime of pass 0 (naive UTC datetimes).
        rates: the ``rates`` rows of pass 0 (:func:`~streamjoin.datagen.topics.rate_rows` of ``base.period``).
        span_days: how much later each pass is (whole days, more than ``last - first``).
        key_step: how much higher each pass's order keys are (above pass 0's highest order key).
    """

    def __init__(self, base: TpchChangelog) -> None:
        self.base = base
        times = [e["event_time"] for e in base.order_events] + [i["l_shiptime"] for i in base.lineitems]
        self.rates = rate_rows(base.period)
        times += [r["rate_time"] for r in self.rates]
        self.first, self.last = min(times), max(times)
        self.span_days = (self.last - self.first).days + 1
        self.key_step = max(o["o_orderkey"] for o in base.orders) + 1

    def pass_records(self, k: int) -> list[tuple[str, tuple]]:
        """Pass ``k``: ``(topic, record)`` pairs in time order; a record as :func:`topic_records` makes it."""
        days = k * self.span_days
        shifted = _ShiftedChangelog(self.base, days, k * self.key_step)
        rates = [shift_row(r, days, 0) for r in self.rates]
        start = _epoch_ms(self.first + dt.timedelta(days=days))
        length = self.span_days * 86_400_000
        streams = []
        for topic, records in topic_records(shifted, rates).items():
            records = list(records)
            # A CDC record has no timestamp: its place in the pass stands for its time.
            streams.append(
                [(r[2] if len(r) == 3 else start + length * i // len(records), topic, r) for i, r in enumerate(records)]
            )
        return [(topic, record) for _, topic, record in heapq.merge(*streams, key=lambda t: t[0])]

    def records(self) -> Iterator[tuple[str, tuple]]:
        """Pass 0, 1, 2, … without end."""
        for k in itertools.count():
            yield from self.pass_records(k)


def due(rate: float, elapsed_s: float, sent: int) -> int:
    """How many records to write now so that ``sent`` records over ``elapsed_s`` seconds keep to ``rate``
    records/s: never negative (a producer ahead of its rate waits, it does not take records back)."""
    return max(0, int(rate * elapsed_s) - sent)


class PacedProducer(threading.Thread):
    """Writes ``records`` (``(topic, record)`` pairs, :meth:`Feed.records`) to Kafka at a set rate, plus bursts.

    Every ``tick_s`` it writes what :func:`due` says for the rate since the last :meth:`set_rate`, plus
    every pending :meth:`burst`, one ``produce`` call per topic (each topic's records in stream order).
    ``sent`` counts the records acknowledged; ``error`` holds what stopped the thread.
    """

    def __init__(self, bootstrap: str, records: Iterator[tuple[str, tuple]], *, tick_s: float = 1.0) -> None:
        super().__init__(daemon=True, name="sustained-producer")
        self.bootstrap, self._records, self.tick_s = bootstrap, records, tick_s
        self.sent = 0
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._rate, self._since, self._paced = 0.0, time.monotonic(), 0
        self._burst = 0

    @property
    def rate(self) -> float:
        """Records/s now (0 before :meth:`set_rate`)."""
        return self._rate

    def set_rate(self, rate: float) -> None:
        """Write ``rate`` records/s from now on."""
        with self._lock:
            self._rate, self._since, self._paced = rate, time.monotonic(), 0

    def burst(self, n: int) -> None:
        """Write ``n`` records at once (at the next tick), beside the paced ones."""
        with self._lock:
            self._burst += n

    @property
    def pending(self) -> int:
        """Burst records not written yet."""
        return self._burst

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        try:
            while not self._stopping.wait(self.tick_s):
                with self._lock:
                    paced = due(self._rate, time.monotonic() - self._since, self._paced)
                    burst, self._paced = self._burst, self._paced + paced
                self._write(paced + burst)
                with self._lock:
                    self._burst -= burst
        except BaseException as e:  # noqa: BLE001 - reported by the benchmark
            self.error = e

    def _write(self, n: int) -> None:
        by_topic: dict[str, list[tuple]] = {}
        for topic, record in itertools.islice(self._records, n):
            by_topic.setdefault(topic, []).append(record)
        for topic, records in by_topic.items():
            self.sent += produce(self.bootstrap, topic, records)
