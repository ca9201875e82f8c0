"""The processor shell's rules for an event-time operator after another (docs/semantics.md §11.6), on a toy logic:
a key collects the values of rows not yet behind its time and emits their sum when its time reaches 10."""

from dataclasses import dataclass, field

from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester

from streamjoin.changelog import RowKind
from streamjoin.runtime.processor import Element, KeyedLogic, KeyedProcessor, child_seq
from streamjoin.runtime.timers import TimerService


@dataclass
class _State:
    timers: TimerService = field(default_factory=TimerService)
    spark_timer: int | None = None
    values: list = field(default_factory=list)
    late: int = 0


class _SumAtTen(KeyedLogic):
    def new_state(self, key):
        return _State()

    def elements(self, rows):
        for r in sorted(rows, key=lambda r: r._seq):
            yield Element(seq=r._seq, kind=RowKind.INSERT, row=(r.v,), time=r.t, watermark=r.wm)

    def on_element(self, state, element, now):
        if element.time <= state.timers.time:  # behind the key's time: late
            state.late += 1
            return []
        state.values.append(element.row[0])
        state.timers.register(10)
        return []

    def on_timer(self, state, timestamp):
        total, state.values = sum(state.values), []
        return [(RowKind.INSERT, ("k", total, state.late))]


def _tester(delay: int = 0) -> TwsTester:
    processor = KeyedProcessor(
        _SumAtTen(), ["k", "sum", "late", "_rowkind", "_seq"], clock="event", watermark_delay_ms=delay
    )
    return TwsTester(processor, timeMode="EventTime", eventTimeExtractor=lambda row: 2**62)


def _row(v: int, t: int, seq: int, upstream: bool) -> Row:
    root = seq.to_bytes(8, "big")
    # An upstream operator's row: a path longer than a root, its event time in the row watermark column.
    return Row(k="k", v=v, t=t, wm=t if upstream else None, _seq=child_seq(root, 0) if upstream else root)


def test_rows_an_upstream_operator_fired_on_this_watermark_come_before_the_key_advances_to_it():
    tester = _tester()
    tester.setWatermark(12)
    out = tester.test("k", [_row(4, 9, 1, upstream=True), _row(2, 8, 2, upstream=False)])
    # The upstream row (time 9 <= 12) counts, then the key advances to 12 and fires; the source row at 8 is late.
    assert [(r.sum, r.late) for r in out] == [(4, 0)]
    assert tester.test("k", [_row(1, 11, 3, upstream=False)]) == []


def test_a_source_row_behind_the_current_watermark_is_late_as_before():
    tester = _tester()
    tester.setWatermark(12)
    assert tester.test("k", [_row(4, 9, 1, upstream=False)]) == []


def test_the_watermark_delay_holds_the_keys_time_back():
    tester = _tester(delay=5)
    tester.setWatermark(12)  # the key's time is 7
    assert tester.test("k", [_row(4, 9, 1, upstream=False)]) == []
    assert tester.setWatermark(14) == [], "the key's time 9 has not reached its timer at 10"
    # The Spark timer stands at 10 + 5: Spark's watermark 15 wakes the key at its time 10.
    assert [r.sum for r in tester.setWatermark(15)] == [4]
