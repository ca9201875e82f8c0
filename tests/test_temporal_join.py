"""Temporal join logic in plain Python: Flink's reference cases, the classic rates example,
random streams against a batch temporal join, and flat state (docs/semantics.md §4)."""

from __future__ import annotations

import datetime as dt
import random

import pytest
from flink_cases import case_names, load_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamjoin.changelog import RowKind, materialize
from streamjoin.contract import TemporalJoinSpec, TwoInputSpec
from streamjoin.errors import ValidationError
from streamjoin.runtime.engine import JvmLogic
from streamjoin.runtime.keyed_two_input import LocalKeyedDriver, _Columns, _KeyedTwoInputLogic
from streamjoin.runtime.temporal_join import TemporalJoinLogic, TemporalProcessTimeJoin, TemporalRowTimeJoin

EPOCH = dt.datetime(1970, 1, 1)


def times(a, b):
    return None if a is None or b is None else a * b


# What the planner (a later issue) will derive from each case's SQL, by hand from the queries:
# probe table, versioned table, how, whether the versioned side is an append-only log
# deduplicated into versions (the `setup` view: ROW_NUMBER() ... ORDER BY update_time DESC = 1
# over RatesLog), and the SELECT list as a function of (o, r).
SELECT_WITH_TIME = lambda o, r: (
    o["order_id"],
    o["order_time"],
    o["currency"],
    o["amount"],
    r["rate"],
    times(o["amount"], r["rate"]),
    r["update_time"],
)
SELECT = lambda o, r: (
    o["order_id"],
    o["order_time"],
    o["currency"],
    o["amount"],
    r["rate"],
    times(o["amount"], r["rate"]),
)
CASES = {
    "temporal_join_inner": {
        "versioned": "RatesHistory",
        "how": "inner",
        "append_only": False,
        "select": SELECT_WITH_TIME,
    },
    "temporal_join_left": {
        "versioned": "RatesHistory",
        "how": "left",
        "append_only": False,
        "select": SELECT_WITH_TIME,
    },
    "temporal_join_left_ub_oldtime": {
        "versioned": "RatesHistory",
        "how": "left",
        "append_only": False,
        "select": SELECT_WITH_TIME,
    },
    "temporal_join_versioned_view": {"versioned": "RatesLog", "how": "inner", "append_only": True, "select": SELECT},
}
# Every case: Orders o (rowtime order_time) JOIN <versioned> FOR SYSTEM_TIME AS OF o.order_time r
# ON o.currency = r.currency (the versioned table's primary key), version time r.update_time.
PROBE, PROBE_TIME, VERSION_TIME, KEY = "Orders", "order_time", "update_time", "currency"


def millis(value: dt.datetime) -> int:
    return (value - EPOCH) // dt.timedelta(milliseconds=1)


def typed(columns, values) -> tuple:
    return tuple(
        dt.datetime.fromisoformat(v) if v is not None and t.startswith("TIMESTAMP") else v
        for (_, t), v in zip(columns, values)
    )


def replay(case, versioned: str, how: str, append_only: bool, select):
    probe, build = case.tables[PROBE], case.tables[versioned]
    join = TemporalRowTimeJoin(how, len(build.columns), append_only_versions=append_only)
    driver = LocalKeyedDriver(TemporalJoinLogic(join), (probe.watermark_delay_ms, build.watermark_delay_ms))
    for name, kind, values in case.arrivals():
        table = case.tables[name]
        row = typed(table.columns, values)
        names = [c for c, _ in table.columns]
        side = 0 if name == PROBE else 1
        rowtime = millis(row[names.index(PROBE_TIME if side == 0 else VERSION_TIME)])
        driver.process(side, (row[names.index(KEY)],), RowKind.from_short(kind), row, rowtime)
    driver.finish()
    probe_names, build_names = [c for c, _ in probe.columns], [c for c, _ in build.columns]
    n = len(probe_names)
    return [
        (kind, select(dict(zip(probe_names, row[:n])), dict(zip(build_names, row[n:]))))
        for kind, row in driver.changelog
    ]


def test_every_temporal_case_is_mapped():
    assert sorted(CASES) == case_names("temporal_join_")


@pytest.mark.parametrize("name", sorted(CASES))
def test_flink_case(name):
    case = load_case(name)
    changelog = replay(case, **CASES[name])
    expected = [(RowKind.from_short(k), typed(case.expected_columns, v)) for k, v in case.expected_changelog]
    assert changelog == expected
    assert sorted(materialize(changelog).elements(), key=repr) == sorted(
        (typed(case.expected_columns, v) for v in case.expected_final), key=repr
    )


# -- the classic rates example (docs/semantics.md §4) ---------------------------------------------------


def hm(text: str) -> int:
    h, m = map(int, text.split(":"))
    return (h * 60 + m) * 60_000


def run_rates(how, orders):
    """Rates 09:00 USD 102, EUR 114, JPY 1; 10:45 EUR 116; 11:15 EUR 119; 11:49 GBP 108, then the orders
    (in time order; their watermark lags 1 minute so orders sharing a time are not late)."""
    rates = [
        ("USD", 102, "09:00"),
        ("EUR", 114, "09:00"),
        ("JPY", 1, "09:00"),
        ("EUR", 116, "10:45"),
        ("EUR", 119, "11:15"),
        ("GBP", 108, "11:49"),
    ]
    driver = LocalKeyedDriver(TemporalJoinLogic(TemporalRowTimeJoin(how, 2)), (60_000, 0))
    seen = set()
    for currency, rate, at in rates:
        kind = RowKind.UPDATE_AFTER if currency in seen else RowKind.INSERT
        seen.add(currency)
        driver.process(1, (currency,), kind, (currency, rate), hm(at))
    for order_id, currency, at in orders:
        driver.process(0, (currency,), RowKind.INSERT, (order_id, currency, at), hm(at))
    driver.finish()
    return {row[0]: row[4] for _, row in driver.changelog}


def test_classic_rates_example():
    orders = [
        ("o1", "EUR", "10:00"),
        ("o4", "EUR", "10:45"),
        ("o2", "EUR", "11:00"),
        ("o5", "GBP", "11:00"),
        ("o6", "CHF", "11:00"),
        ("o3", "EUR", "11:30"),
    ]
    assert run_rates("inner", orders) == {"o1": 114, "o2": 116, "o3": 119, "o4": 116}
    # LEFT: a currency with no rate yet (GBP before 11:49) or never (CHF) -> null.
    assert run_rates("left", orders) == {"o1": 114, "o2": 116, "o3": 119, "o4": 116, "o5": None, "o6": None}


def test_results_wait_for_the_watermark_and_are_never_retracted():
    join = TemporalRowTimeJoin("inner", 2)
    driver = LocalKeyedDriver(TemporalJoinLogic(join), (0, 0))
    driver.process(1, ("EUR",), RowKind.INSERT, ("EUR", 114), hm("09:00"))
    assert driver.process(0, ("EUR",), RowKind.INSERT, ("o1", "EUR"), hm("10:00")) == []  # rates wm still 09:00
    # A rate at 10:00 arrives: the order's time is now behind the combined watermark -> joined with it.
    out = driver.process(1, ("EUR",), RowKind.UPDATE_AFTER, ("EUR", 115), hm("10:00"))
    assert out == [(RowKind.INSERT, ("o1", "EUR", "EUR", 115))]
    # A later rate never touches the emitted result; the 09:00 version is gone from state.
    assert driver.process(1, ("EUR",), RowKind.UPDATE_AFTER, ("EUR", 116), hm("10:30")) == []
    assert sorted(driver.states[("EUR",)].versions) == [hm("10:00"), hm("10:30")]


def test_delete_ends_a_version_and_a_probe_row_behind_the_watermark_is_joined_at_the_next_rise():
    join = TemporalRowTimeJoin("left", 2)
    driver = LocalKeyedDriver(TemporalJoinLogic(join), (0, 0))
    driver.process(1, ("EUR",), RowKind.INSERT, ("EUR", 114), hm("09:00"))
    driver.process(1, ("EUR",), RowKind.DELETE, ("EUR", 114), hm("10:00"))
    driver.process(0, ("EUR",), RowKind.INSERT, ("o1", "EUR"), hm("09:30"))
    driver.process(0, ("EUR",), RowKind.INSERT, ("o2", "EUR"), hm("10:30"))
    driver.process(1, ("EUR",), RowKind.INSERT, ("EUR", 120), hm("11:00"))  # watermark -> 10:30
    # Behind the watermark: Flink 2.3.0 buffers it (no late rule); its timer fires at the next rise (end of input).
    assert driver.process(0, ("EUR",), RowKind.INSERT, ("behind", "EUR"), hm("10:15")) == []
    driver.finish()
    assert driver.changelog == [
        (RowKind.INSERT, ("o1", "EUR", "EUR", 114)),
        (RowKind.INSERT, ("o2", "EUR", None, None)),
        (RowKind.INSERT, ("behind", "EUR", None, None)),  # the -D at 10:00 is its version
    ]


def test_probe_row_behind_the_watermark_joins_its_version_while_it_is_in_state():
    """temporal_left_1_0013: rates delay 0, orders delay 1 ms; order 2 (10:00) arrives after order 1
    (10:01) raised the combined watermark to 10:00, the JPY rate's time. Flink 2.3.0 joins it."""
    driver = LocalKeyedDriver(TemporalJoinLogic(TemporalRowTimeJoin("left", 1)), (1, 0))
    driver.process(1, ("JPY",), RowKind.INSERT, (3,), hm("10:00"))
    driver.process(0, ("USD",), RowKind.INSERT, (1, "USD"), hm("10:01"))
    assert driver.watermark == hm("10:00")
    driver.process(0, ("JPY",), RowKind.INSERT, (2, "JPY"), hm("10:00"))  # at the watermark
    driver.process(0, ("EUR",), RowKind.INSERT, (3, "EUR"), hm("10:04"))
    driver.finish()
    assert driver.changelog == [
        (RowKind.INSERT, (2, "JPY", 3)),  # timers fire in time order across keys
        (RowKind.INSERT, (1, "USD", None)),
        (RowKind.INSERT, (3, "EUR", None)),
    ]


def test_probe_row_behind_the_watermark_misses_a_version_already_cleaned_up():
    """The clean-up at a watermark keeps only the newest version at or before it: a probe row arriving
    later with an older time finds no version (LEFT pads it, INNER drops it), as in Flink 2.3.0."""
    for how, expected in (("left", [("o1", "EUR", 116), ("old", "EUR", None)]), ("inner", [("o1", "EUR", 116)])):
        driver = LocalKeyedDriver(TemporalJoinLogic(TemporalRowTimeJoin(how, 1)), (0, 0))
        driver.process(1, ("EUR",), RowKind.INSERT, (114,), hm("09:00"))
        driver.process(1, ("EUR",), RowKind.UPDATE_AFTER, (116,), hm("10:00"))
        driver.process(0, ("EUR",), RowKind.INSERT, ("o1", "EUR"), hm("10:30"))
        driver.process(1, ("EUR",), RowKind.UPDATE_AFTER, (119,), hm("11:00"))  # fires: 09:00 dropped
        assert sorted(driver.states[("EUR",)].versions) == [hm("10:00"), hm("11:00")]
        driver.process(0, ("EUR",), RowKind.INSERT, ("old", "EUR"), hm("09:30"))
        driver.finish()
        assert [row for _, row in driver.changelog] == expected


def test_invalid_changelog_on_the_versioned_side_is_read_as_flink_reads_it():
    # Flink 2.3.0's output of invalid_temporal_versioned_anomalies (tests/data/flink-diff/cases): a +U with no
    # insert is a version, a -D of a key never inserted is "no row from then on", a -U without its +U is dropped
    # (the join reads +I/+U/-D only), a +I of an existing key is a new version.
    driver = LocalKeyedDriver(TemporalJoinLogic(TemporalRowTimeJoin("left", 2)), (0, 0))
    for kind, k, r, at in [
        (RowKind.UPDATE_AFTER, 1, 10, 0),
        (RowKind.DELETE, 2, 0, 1000),
        (RowKind.UPDATE_BEFORE, 1, 10, 2000),
        (RowKind.INSERT, 1, 20, 3000),
    ]:
        driver.process(1, (k,), kind, (k, r), at)
    for o, k, at in [(1, 1, 1000), (2, 2, 1500), (3, 1, 2500), (4, 1, 4000)]:
        driver.process(0, (k,), RowKind.INSERT, (o, k), at)
    driver.finish()
    assert sorted((kind, row[0], row[3]) for kind, row in driver.changelog) == [
        (RowKind.INSERT, 1, 10),
        (RowKind.INSERT, 2, None),
        (RowKind.INSERT, 3, 10),
        (RowKind.INSERT, 4, 20),
    ]


def test_append_only_versions_ignore_an_older_row():
    join = TemporalRowTimeJoin("inner", 2, append_only_versions=True)
    driver = LocalKeyedDriver(TemporalJoinLogic(join), (0, 10 * 60_000))
    driver.process(1, ("EUR",), RowKind.INSERT, ("EUR", 116), hm("10:45"))
    driver.process(1, ("EUR",), RowKind.INSERT, ("EUR", 114), hm("09:00"))  # older than the latest: ignored
    driver.process(0, ("EUR",), RowKind.INSERT, ("o1", "EUR"), hm("10:50"))
    driver.finish()
    assert driver.changelog == [(RowKind.INSERT, ("o1", "EUR", "EUR", 116))]
    with pytest.raises(ValidationError, match=r"append-only.*-D"):
        driver.process(1, ("EUR",), RowKind.DELETE, ("EUR", 116), hm("11:00"))


def test_the_jvm_twin_is_described_with_the_union_frames_columns():
    """What TemporalJoinLogic.scala (over TwoInputLogic.scala) reads; no per-row watermark here."""
    join = TemporalRowTimeJoin("left", 2, append_only_versions=True)
    logic = _KeyedTwoInputLogic(
        TemporalJoinLogic(join), _Columns(rowtime=(2, 1), row_watermark=None), ["_key0", "_key1"]
    )
    assert logic.jvm_logic() == JvmLogic(
        "temporal_join.TemporalJoinLogic",
        TemporalJoinSpec(
            inputs=TwoInputSpec(key_columns=("_key0", "_key1"), rowtime=(2, 1), row_watermark=None),
            how="left",
            append_only_versions=True,
        ),
    )


def test_processing_time_join_uses_the_current_row():
    join = TemporalProcessTimeJoin("left", 2)
    current = join.process_version(None, RowKind.INSERT, ("EUR", 114))
    assert join.process_probe(current, RowKind.INSERT, ("o1",)) == [(RowKind.INSERT, ("o1", "EUR", 114))]
    current = join.process_version(current, RowKind.DELETE, ("EUR", 114))
    assert join.process_probe(current, RowKind.INSERT, ("o2",)) == [(RowKind.INSERT, ("o2", None, None))]
    assert TemporalProcessTimeJoin("inner", 2).process_probe(None, RowKind.INSERT, ("o3",)) == []


def test_arguments_are_checked():
    with pytest.raises(ValidationError, match="'full'"):
        TemporalRowTimeJoin("full", 2)
    with pytest.raises(ValidationError, match="versioned_arity"):
        TemporalRowTimeJoin("inner", -1)
    with pytest.raises(ValidationError, match="'right'"):
        TemporalProcessTimeJoin("right", 2)


# -- random streams against a batch temporal join ---------------------------------------------------


def generate(rng: random.Random, n_versions: int, n_probes: int, keys: int, delay: int, late_share: float):
    """Arrival-ordered events ``(side, kind, key, time, ident, value)``: versions and probes out of order
    within ``delay``; a share of probe rows sent long after their time (late). Versions are never late,
    so every version a probe can need arrives before the watermark passes the probe: version times
    strictly increase (a version at the time of an earlier-arrived one would be behind its own
    watermark with delay 0), while a probe may share its time with a version."""
    events = []
    clock, last_version = 0, -1
    for i in range(n_versions + n_probes):
        clock += rng.randint(0, 5)
        side = 1 if i % (1 + n_probes // max(n_versions, 1)) == 0 else 0
        if side == 1:
            clock = last_version = max(clock, last_version + 1)
        key = rng.randrange(keys)
        arrival = clock + rng.randint(0, delay)
        if side == 0 and rng.random() < late_share:
            arrival += 30 + rng.randint(0, 30)
        kind = RowKind.DELETE if side == 1 and rng.random() < 0.1 else RowKind.INSERT
        events.append((arrival, i, side, kind, key, clock, f"{'PV'[side]}{i}", rng.randint(1, 99)))
    events.sort()
    return [e[2:] for e in events]


def batch_temporal_join(events, how):
    """For each probe row: the latest version of its key at or before its time."""
    versions = [(key, t, kind, value) for side, kind, key, t, _, value in events if side == 1]
    out = []
    for side, _, key, t, ident, _ in events:
        if side != 0:
            continue
        # Same time: the version that arrived last wins (as in the operator's map by time).
        valid = [v for v in versions if v[0] == key and v[1] <= t]
        best = max(valid, key=lambda v: v[1], default=None)
        if best is not None:
            same_time = [v for v in valid if v[1] == best[1]]
            best = same_time[-1]
        if best is not None and best[2].is_accumulate:
            out.append((ident, key, t, best[3]))
        elif how == "left":
            out.append((ident, key, t, None))
    return sorted(out, key=repr)


def run_random(events, how, delay):
    driver = LocalKeyedDriver(TemporalJoinLogic(TemporalRowTimeJoin(how, 2)), (delay, delay))
    late = set()
    for side, kind, key, t, ident, value in events:
        if side == 0 and t <= driver.watermark:
            late.add(ident)
        row = (ident, key, t) if side == 0 else (key, value)
        driver.process(side, (key,), kind, row, t)
    driver.finish()
    return driver, late


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), how=st.sampled_from(["inner", "left"]), delay=st.integers(0, 8))
def test_random_streams_equal_batch_temporal_join_except_where_clean_up_came_first(seed, how, delay):
    """Probe rows that were not behind the watermark get the batch join's version; one behind it gets
    the same or, when clean-up already dropped that version, none (LEFT: null-padded, INNER: dropped)."""
    events = generate(random.Random(seed), 15, 45, 3, delay, late_share=0.15)
    driver, late = run_random(events, how, delay)
    got = {r[0]: (r[0], r[1], r[2], r[4]) for r in materialize(c for c in driver.changelog).elements()}
    for ident, key, t, value in batch_temporal_join(events, how):
        if ident not in late:
            assert got.pop(ident) == (ident, key, t, value)
        elif ident in got:
            assert got.pop(ident)[3] in (value, None)
        else:
            assert how == "inner"
    assert not got
    assert driver.state_row_count == sum(len(s.versions) for s in driver.states.values())  # no probe left


def test_random_streams_do_exercise_late_probes():
    lates = [len(run_random(generate(random.Random(s), 15, 45, 3, 4, 0.15), "left", 4)[1]) for s in range(20)]
    assert sum(lates) > 20


# -- state stays flat -----------------------------------------------------------------------------


def test_state_is_bounded_by_keys_and_watermark_delay_not_by_stream_length():
    def peak_state(n):
        events = generate(random.Random(3), n // 4, n, 20, 5, late_share=0.0)
        driver = LocalKeyedDriver(TemporalJoinLogic(TemporalRowTimeJoin("left", 2)), (5, 5))
        peak = 0
        for side, kind, key, t, ident, value in events:
            driver.process(side, (key,), kind, (ident, key, t) if side == 0 else (key, value), t)
            peak = max(peak, driver.state_row_count)
        return peak

    small, large = peak_state(2_000), peak_state(20_000)
    assert 0 < small and large <= small * 1.5, (small, large)
