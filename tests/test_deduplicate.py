"""Deduplication logic in pure Python: Flink's reference case, each variant's rules, properties.

Processing time is modelled as arrival order: rows are fed one by one in the
order they arrive, which is all the processing-time variants look at.
"""

from __future__ import annotations

from collections import Counter

import pytest
from flink_cases import load_case
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_replay import flink_watermarks, replay_keyed
from pyspark.sql import Row

from streamjoin.changelog import ChangelogError, RowKind, materialize
from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner import plan_script
from streamjoin.planner.plan import walk
from streamjoin.runtime.deduplicate import DedupState, deduplicate_function
from streamjoin.runtime.inputs import check_insert
from streamjoin.runtime.timers import MIN_TIME

I, UB, UA = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER


def test_flink_case_dedup_keep_last_on_proctime():
    # SELECT order_id, tms_company FROM (… ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY proctime DESC) …) WHERE rn
    # = 1
    case = load_case("changelog_dedup_only_proctime")
    fn = deduplicate_function("last", rowtime=False)
    rows = [(values[0], values) for _, _, values in case.arrivals()]
    out = replay_keyed(lambda s, row: fn.process_element(s, row), DedupState, rows)
    assert [(k.short, v) for k, v in out] == case.expected_changelog
    assert sorted(materialize(out).elements()) == sorted(case.expected_final)


def test_an_updating_input_never_reaches_deduplication():
    # docs/semantics.md §1.9: over updates Flink 2.3.0 plans a Top-1 ordered by time as a Rank, not a
    # deduplication, and so does the planner; the operator itself refuses a non-+I row loudly.
    ddl = (
        "CREATE TABLE T (k INT, v STRING, ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts) "
        "WITH ('connector' = 'values', 'changelog-mode' = 'I,UB,UA,D');\n"
    )
    query = (
        "SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY {} DESC) AS rn FROM T) WHERE rn = 1;"
    )
    sink = plan_script(ddl + query.format("ts")).statements[-1].sink
    assert [n.describe().split("(")[0] for n in walk(sink)][1:3] == ["Calc", "Rank"]
    with pytest.raises(UnsupportedPlanError, match=r"ordered by a PROCTIME\(\) column.*\[rule: rank-order\]"):
        plan_script(ddl + query.format("pt"))
    with pytest.raises(ChangelogError, match="deduplicate consumes an insert-only changelog; got -D"):
        check_insert(Row(_rowkind="-D", _seq=0), "deduplicate")


def test_proctime_keep_first_is_insert_only():
    fn = deduplicate_function("first", rowtime=False)
    state = DedupState()
    assert fn.process_element(state, ("k", 1)) == [(I, ("k", 1))]
    assert fn.process_element(state, ("k", 2)) == []


def test_proctime_keep_last_skips_an_identical_row():
    fn = deduplicate_function("last", rowtime=False)
    state = DedupState()
    assert fn.process_element(state, ("k", 1)) == [(I, ("k", 1))]
    assert fn.process_element(state, ("k", 1)) == []
    assert fn.process_element(state, ("k", 2)) == [(UB, ("k", 1)), (UA, ("k", 2))]


def test_proctime_keep_last_skips_a_repeat_only_until_the_keys_first_update():
    # Flink 2.3 (case chain_dedup_last_proctime_repeated_row): its equaliser compares the RowKind too, and its heap
    # state holds the row it emitted as +U, so after a key's first update a repeat is emitted again.
    fn = deduplicate_function("last", rowtime=False)
    state = DedupState()
    assert fn.process_element(state, ("k", 1)) == [(I, ("k", 1))]
    assert fn.process_element(state, ("k", 2)) == [(UB, ("k", 1)), (UA, ("k", 2))]
    assert fn.process_element(state, ("k", 2)) == [(UB, ("k", 2)), (UA, ("k", 2))]
    assert fn.process_element(state, ("k", 1)) == [(UB, ("k", 2)), (UA, ("k", 1))]


def test_proctime_keep_last_compares_without_the_proctime_column_and_skips_nothing_with_state_ttl():
    # A PROCTIME() column holds no value in Flink's row: rows that differ only there are equal, and the kept row stays
    # the one emitted (a later -U retracts exactly what went out).
    fn = deduplicate_function("last", rowtime=False, compared=[0, 1])
    state = DedupState()
    assert fn.process_element(state, ("k", 1, "10:00")) == [(I, ("k", 1, "10:00"))]
    assert fn.process_element(state, ("k", 1, "10:01")) == []
    assert fn.process_element(state, ("k", 2, "10:02")) == [(UB, ("k", 1, "10:00")), (UA, ("k", 2, "10:02"))]
    ttl = deduplicate_function("last", rowtime=False, state_ttl=True)
    state = DedupState()
    assert ttl.process_element(state, ("k", 1)) == [(I, ("k", 1))]
    assert ttl.process_element(state, ("k", 1)) == [(UB, ("k", 1)), (UA, ("k", 1))]


def test_rowtime_keep_last_keeps_the_greatest_time_and_the_later_of_equal_times():
    fn = deduplicate_function("last", rowtime=True)
    state = DedupState()
    assert fn.process_element(state, ("k", "a"), 10) == [(I, ("k", "a"))]
    assert fn.process_element(state, ("k", "b"), 5) == []
    assert fn.process_element(state, ("k", "c"), 10) == [(UB, ("k", "a")), (UA, ("k", "c"))]


def test_rowtime_keep_first_waits_for_the_watermark_and_drops_late_rows():
    fn = deduplicate_function("first", rowtime=True)
    state = DedupState()
    fire = lambda t: fn.on_timer(state, t)
    assert fn.process_element(state, ("k", "a"), 10) == []
    assert fn.process_element(state, ("k", "b"), 7) == []  # earlier time replaces the waiting row
    assert fn.process_element(state, ("k", "c"), 7) == []  # equal time: the earlier arrival stays
    assert state.timers.timers == [7]
    assert state.timers.advance(8, fire) == [(I, ("k", "b"))]
    assert fn.process_element(state, ("k", "d"), 5) == [] and state.late_dropped == 1  # 5 < watermark 8
    assert fn.process_element(state, ("k", "e"), 9) == [] and state.late_dropped == 1  # already emitted
    assert state.timers.advance(100, fire) == []


def test_keep_must_be_first_or_last():
    with pytest.raises(ValidationError, match="'first' or 'last'"):
        deduplicate_function("latest", rowtime=False)


# --------------------------------------------------------------------------- properties

streams = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 6), st.integers(0, 99)), max_size=30)


def expected_rows(rows, keep, rowtime, late=None):
    """The batch query: per key, the first / last row by arrival or by time (ties: arrival order)."""
    chosen = {}
    for i, (key, time, value) in enumerate(rows):
        if late and late[i]:
            continue
        current = chosen.get(key)
        if rowtime:
            better = current is None or (time < current[1] if keep == "first" else time >= current[1])
        else:
            better = current is None or keep == "last"
        if better:
            chosen[key] = (key, time, value)
    return Counter(chosen.values())


@settings(max_examples=200, deadline=None)
@given(streams, st.sampled_from(["first", "last"]))
def test_processing_time_and_keep_last_on_time_materialise_to_the_batch_result(rows, keep):
    for rowtime in [False, True] if keep == "last" else [False]:
        fn = deduplicate_function(keep, rowtime=rowtime)
        out = replay_keyed(lambda s, r, fn=fn: fn.process_element(s, r, r[1]), DedupState, [(r[0], r) for r in rows])
        assert materialize(out) == expected_rows(rows, keep, rowtime)
        if keep == "first":
            assert {kind for kind, _ in out} <= {I}


@settings(max_examples=200, deadline=None)
@given(streams, st.sampled_from([0, 1, 3]))
def test_keep_first_on_event_time_materialises_to_the_batch_result_over_rows_not_late(rows, delay):
    fn = deduplicate_function("first", rowtime=True)
    marks = flink_watermarks([t for _, t, _ in rows], delay)
    states: dict = {}
    out = []
    watermark = MIN_TIME
    for (key, time, value), mark in zip(rows, marks):
        if mark > watermark:
            watermark = mark
            for s in states.values():
                out += s.timers.advance(watermark, lambda t, s=s: fn.on_timer(s, t))
        state = states.setdefault(key, DedupState())
        state.timers.advance(watermark, lambda t: [])
        out += fn.process_element(state, (key, time, value), time)
    for s in states.values():
        out += s.timers.advance(2**63 - 1, lambda t, s=s: fn.on_timer(s, t))
    late = [t < m for (_, t, _), m in zip(rows, marks)]
    assert {kind for kind, _ in out} <= {I}
    assert materialize(out) == expected_rows(rows, "first", True, late)
    assert sum(s.late_dropped for s in states.values()) == sum(late)
