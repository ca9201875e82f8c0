"""The pure parts of the sustained-load benchmark (bench/sustained*.py): pacing, shifted passes, sampling,
lag and verdicts. No Spark, no broker: the real path is the benchmark's own run (`make sustained`)."""

import datetime as dt
import itertools
import time
from decimal import Decimal

import pytest

from bench.sustained_feed import PacedProducer, due, shift_row
from bench.sustained_report import BatchStat, Sample, results_table, slope, summarize, total_lag, verdict, write_csv


def test_due_keeps_to_the_rate_and_never_goes_negative():
    assert due(100, 0.0, 0) == 0
    assert due(100, 1.5, 0) == 150
    assert due(100, 1.5, 120) == 30
    assert due(100, 1.0, 150) == 0  # ahead of the rate: wait, nothing taken back
    # Writing what is due at each tick adds up to rate × time, whatever the ticks.
    sent = 0
    for elapsed in (0.3, 0.7, 1.9, 2.0, 4.25):
        sent += due(40, elapsed, sent)
    assert sent == 170


def test_paced_producer_writes_bursts_and_paced_records_per_topic(monkeypatch):
    written = []
    monkeypatch.setattr(
        "bench.sustained_feed.produce", lambda servers, topic, records: written.append((topic, records)) or len(records)
    )
    records = iter([("a", (str(i), "v")) if i % 2 else ("b", (str(i), "v")) for i in range(1000)])
    producer = PacedProducer("servers", records, tick_s=0.01)
    producer.burst(5)
    producer.start()
    deadline = time.monotonic() + 10
    while producer.pending and time.monotonic() < deadline:
        time.sleep(0.01)
    assert written[:2] == [("b", [("0", "v"), ("2", "v"), ("4", "v")]), ("a", [("1", "v"), ("3", "v")])]
    assert producer.sent == 5 and producer.rate == 0  # no rate set: the burst only
    producer.set_rate(1000)
    time.sleep(0.3)
    producer.stop()
    producer.join(5)
    assert producer.error is None
    assert 5 + 100 <= producer.sent <= 5 + 400  # ~0.3 s at 1,000 records/s
    # Each record once, the stream's first ones; a topic's in stream order.
    assert sorted(int(r[0]) for _, records in written for r in records) == list(range(producer.sent))
    for topic in ("a", "b"):
        keys = [int(r[0]) for t, records in written if t == topic for r in records]
        assert keys == sorted(keys)


def test_shift_row_moves_times_and_order_keys_only():
    row = {
        "o_orderkey": 7,
        "o_custkey": 3,
        "o_orderdate": dt.date(2002, 1, 1),
        "o_ordertime": dt.datetime(2002, 1, 1, 5),
        "o_totalprice": Decimal("1.50"),
        "o_comment": "x",
    }
    shifted = shift_row(row, 10, 1000)
    assert shifted == {
        "o_orderkey": 1007,
        "o_custkey": 3,
        "o_orderdate": dt.date(2002, 1, 11),
        "o_ordertime": dt.datetime(2002, 1, 11, 5),
        "o_totalprice": Decimal("1.50"),
        "o_comment": "x",
    }
    assert row["o_orderkey"] == 7  # a new dict


def test_total_lag_sums_every_partition():
    assert total_lag({"orders": {0: 3, 1: 4}, "rates": {0: 0}}) == 7
    assert total_lag({}) == 0


def _fields(**overrides):
    return {"minute": 1.0, "phase": "sustained", "lag": 10, "produced": 100, "rate": 5.0, **overrides}


def test_summarize_takes_percentiles_rates_and_the_last_batch_state():
    batches = [BatchStat(3000, 60, 10, 1000, 7), BatchStat(1000, 30, 12, 1100, 9), BatchStat(2000, 30, 11, 1050, 8)]
    sample = summarize("p", batches, 60.0, None, **_fields())
    assert (sample.batches, sample.batch_ms_p50, sample.batch_ms_max) == (3, 2000, 3000)
    assert sample.input_rows_per_s == 2.0
    assert (sample.state_rows, sample.state_bytes, sample.state_sst_bytes) == (
        11,
        1050,
        8,
    )  # the last batch's, not the largest
    assert (sample.lag, sample.pipeline) == (10, "p")


def test_summarize_without_a_batch_keeps_the_previous_state():
    previous = summarize("p", [BatchStat(1000, 5, 42, 4200)], 60.0, None, **_fields())
    quiet = summarize("p", [], 60.0, previous, **_fields(minute=2.0))
    assert (quiet.batches, quiet.batch_ms_p50, quiet.batch_ms_max, quiet.input_rows_per_s) == (0, None, None, 0.0)
    assert (quiet.state_rows, quiet.state_bytes) == (42, 4200)
    assert summarize("p", [], 60.0, None, **_fields()).state_rows == 0
    with pytest.raises(ValueError, match="positive"):
        summarize("p", [], 0.0, None, **_fields())


def test_slope_is_least_squares():
    assert slope([0, 1, 2, 3], [1, 3, 5, 7]) == pytest.approx(2.0)
    assert slope([0, 1, 2], [5, 5, 5]) == 0.0
    assert slope([1, 1], [0, 9]) == 0.0


def _series(pipeline, states, lags, rate=10.0):
    return [
        Sample(float(i), "sustained", pipeline, 1, 1000.0, 1500.0, rate, s, s * 100, s * 1000, lag, 0, rate)
        for i, (s, lag) in enumerate(zip(states, lags))
    ]


def test_verdict_flat_state_and_bounded_lag():
    samples = _series("p", [1000, 1010, 990, 1005], [300, 900, 100, 500])
    assert verdict(samples, 10.0) == {"state": "flat", "lag": "sustained"}


def test_verdict_growing_state_and_growing_lag():
    samples = _series("p", [1000, 2000, 3000, 4000], [0, 600, 1200, 1800])
    judged = verdict(samples, 10.0)
    assert judged["state"] == "grows +1,000 rows/min"
    assert judged["lag"] == "grows +600 records/min (100% of input)"
    assert verdict(samples[:1], 10.0) == {"state": "n/a", "lag": "n/a"}
    freed = _series("p", [4000, 3000, 2000, 1000], [0, 0, 0, 0])
    assert verdict(freed, 10.0) == {"state": "falls -1,000 rows/min", "lag": "sustained"}


def test_a_state_ttl_verdict_is_judged_from_one_ttl_into_the_phase():
    # Rows pile up for the first 5 minutes, until the first keys can expire; then state holds.
    samples = _series("p", [100, 600, 1100, 1600, 2100, 2600, 2500, 2600, 2550, 2600, 2580], [0] * 11)
    assert "grows" in results_table(samples, 10.0).splitlines()[2]
    row = results_table(samples, 10.0, settle_minutes=5).splitlines()[2]
    assert row.startswith("| p | 100 / 2,580 / 2,600 |") and row.endswith("| flat | sustained |")


def test_results_table_and_csv_cover_the_sustained_phase(tmp_path):
    warm = Sample(0.5, "warmup", "p", 1, None, None, 0.0, 1, 1, 1, 99_999, 0, 0.0)
    samples = [warm, *_series("p", [1000, 2000], [5, 7]), *_series("q", [10, 10], [0, 0])]
    table = results_table(samples, 10.0).splitlines()
    assert len(table) == 4
    assert table[2].startswith(
        "| p | 1,000 / 2,000 / 2,000 | 0.1 / 0.2 / 0.2 | 1.0 / 1.9 / 1.9 | 5 / 7 / 7 | 1.0 | 10 | grows"
    )
    assert "99,999" not in "\n".join(table)  # the warm-up's lag is not the sustained phase's
    write_csv(samples, tmp_path / "s.csv")
    lines = (tmp_path / "s.csv").read_text().splitlines()
    assert lines[0].startswith("minute,phase,pipeline,batches,batch_ms_p50")
    assert lines[1] == "0.5,warmup,p,1,,,0.0,1,1,1,99999,0,0.0"
    assert len(lines) == 6


class _TinyChangelog:
    """Two orders with a line item each, as TpchChangelog has them (after its date shift)."""

    def __init__(self):
        t = dt.datetime(2002, 1, 1)
        self.orders = [{"o_orderkey": k, "o_ordertime": t + dt.timedelta(days=k)} for k in (1, 2)]
        self.lineitems = [
            {"l_orderkey": k, "l_linenumber": 1, "l_shiptime": t + dt.timedelta(days=k + 3)} for k in (1, 2)
        ]
        self.order_events = [{**o, "op": "c", "event_time": o["o_ordertime"]} for o in self.orders]
        self.period = (t.date(), t.date() + dt.timedelta(days=5))

    def orders_changes(self):
        from streamjoin.changelog import RowKind
        from streamjoin.datagen.tpch import Change

        return iter([Change(RowKind.INSERT, o) for o in self.orders])

    def lineitem_changes(self):
        from streamjoin.changelog import RowKind
        from streamjoin.datagen.tpch import Change

        return iter([Change(RowKind.INSERT, i) for i in self.lineitems])


def test_feed_passes_are_in_time_order_with_new_keys_and_later_times(monkeypatch):
    import json

    from bench.sustained_feed import Feed

    rates = [
        {"currency": "USD", "rate": Decimal("1.1"), "rate_time": dt.datetime(2001, 12, 31) + dt.timedelta(days=d)}
        for d in range(0, 10, 2)
    ]
    monkeypatch.setattr("bench.sustained_feed.rate_rows", lambda period: rates)
    feed = Feed(_TinyChangelog())
    assert (feed.first, feed.last, feed.span_days, feed.key_step) == (
        dt.datetime(2001, 12, 31),
        dt.datetime(2002, 1, 8),
        9,
        3,
    )
    stream = list(itertools.islice(feed.records(), 26))  # two passes of 13 records
    stamps = [record[2] for _, record in stream if len(record) == 3]
    assert stamps == sorted(stamps)  # every event topic's rowtime, across topics and passes
    keys = [int(record[0]) for topic, record in stream if topic == "order_events"]
    assert keys == [1, 2, 4, 5]  # pass 1: the keys + key_step
    second = [json.loads(record[1]) for topic, record in stream[13:] if topic == "orders"]
    assert [o["after"]["o_ordertime"] for o in second] == ["2002-01-11 00:00:00", "2002-01-12 00:00:00"]  # + 9 days
    assert [topic for topic, _ in stream[:13]].count("rates") == 5


def test_the_state_ttl_variant_sets_the_ttl_on_every_stateful_operator_it_applies_to(tmp_path):
    from assets.sql_pipelines import load_sql_pipelines
    from bench.sustained import _sql_with_state_ttl

    defs = {d.pipeline.name: d for d in load_sql_pipelines(_sql_with_state_ttl("5 min", tmp_path / "sql"))}
    plans = {name: d.pipeline.explain for name, d in defs.items()}
    bounded = [
        line
        for line in plans["lineitem_with_order"].splitlines() + plans["orders_by_status"].splitlines()
        if line.lstrip(" +-").startswith(("Join(", "GroupAggregate(", "Deduplicate("))
    ]
    assert len(bounded) == 3 and all("stateTtl=[300000 ms]" in line for line in bounded)
    assert (
        defs["orders_by_status"].description
        == {d.pipeline.name: d for d in load_sql_pipelines()}["orders_by_status"].description
    )
