"""Group aggregate logic (and the aggregate functions) in pure Python: Flink's cases, the worked example of
docs/semantics.md §1.6, rules, properties."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest
from flink_cases import load_case
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_replay import replay_keyed
from over_window_oracle import flink_avg
from pyspark.sql.types import DecimalType, IntegerType, LongType, StringType

from streamjoin.changelog import RowKind, materialize
from streamjoin.errors import StateError, ValidationError
from streamjoin.runtime.aggregates import AggregateCall, Aggregates, parse_calls
from streamjoin.runtime.deduplicate import DedupState, deduplicate_function
from streamjoin.runtime.group_aggregate import GroupAggFunction, GroupState

I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE
ORDERS = {"order_id": StringType(), "tms_company": StringType(), "arrival": LongType()}


def group_function(aggregates, types, columns, retractable=True):
    return GroupAggFunction(Aggregates(parse_calls(aggregates), types, columns, retractable=retractable))


def dedup_then_count_distinct(rows, rowtime: bool):
    """Seed 003's query: latest row per order_id (dedup keep-last), then COUNT(DISTINCT order_id) per company."""
    dedup = deduplicate_function("last", rowtime=rowtime)
    group = group_function([("order_cnt", "COUNT_DISTINCT", "order_id")], ORDERS, list(ORDERS))
    dedup_states: dict = {}
    group_states: dict = {}
    out = []
    for row in rows:
        for kind, kept in dedup.process_element(dedup_states.setdefault(row[0], DedupState()), row, row[2]):
            out += group.process_element(group_states.setdefault(kept[1], GroupState()), (kept[1],), kind, kept)
    return out


# CASE → how its query maps to operators: changelog_group_proctime orders by PROCTIME (arrival order),
# changelog_group_arrival_col by the BIGINT arrival column (Flink: Top-1, same changelog).
@pytest.mark.parametrize("name, rowtime", [("changelog_group_proctime", False), ("changelog_group_arrival_col", True)])
def test_flink_case_dedup_then_count_distinct(name, rowtime):
    case = load_case(name)
    rows = [(*values, arrival) for arrival, (_, _, values) in enumerate(case.arrivals())]
    out = dedup_then_count_distinct(rows, rowtime)
    assert [(k.short, v) for k, v in out] == case.expected_changelog
    assert sorted(materialize(out).elements()) == sorted(case.expected_final)


def test_seed_003_changelog():
    # The input and printed output of the worked example (docs/semantics.md §1.6).
    rows = [("001", "ZhongTong", 0), ("002", "YuanTong", 1), ("003", "ZhongTong", 2), ("001", "YuanTong", 3)]
    printed = (
        "+I(ZhongTong,1) +I(YuanTong,1) -U(ZhongTong,1) +U(ZhongTong,2) "
        "-U(ZhongTong,2) +U(ZhongTong,1) -U(YuanTong,1) +U(YuanTong,2)"
    )
    out = dedup_then_count_distinct(rows, rowtime=False)
    assert " ".join(f"{k.short}({v[0]},{v[1]})" for k, v in out) == printed
    assert materialize(out) == Counter({("ZhongTong", 1): 1, ("YuanTong", 2): 1})


KV = {"k": StringType(), "v": IntegerType()}
ALL = [
    ("n", "COUNT", None),
    ("nv", "COUNT", "v"),
    ("d", "COUNT_DISTINCT", "v"),
    ("s", "SUM", "v"),
    ("a", "AVG", "v"),
    ("lo", "MIN", "v"),
    ("hi", "MAX", "v"),
]


def feed(fn, changes):
    state = GroupState()
    return [out for kind, row in changes for out in fn.process_element(state, (row[0],), kind, row)]


def test_emits_insert_update_pairs_and_delete_when_the_group_empties():
    fn = group_function([("n", "COUNT", None), ("hi", "MAX", "v")], KV, ["k", "v"])
    changes = [(I, ("a", 5)), (I, ("a", 9)), (D, ("a", 9)), (UB, ("a", 5)), (UA, ("a", 7)), (D, ("a", 7))]
    assert feed(fn, changes) == [
        (I, ("a", 1, 5)),
        (UB, ("a", 1, 5)),
        (UA, ("a", 2, 9)),
        (UB, ("a", 2, 9)),
        (UA, ("a", 1, 5)),  # retracting the max finds the next one
        (D, ("a", 1, 5)),  # -U empties the group for a moment
        (I, ("a", 1, 7)),
        (D, ("a", 1, 7)),
    ]


def test_unchanged_result_emits_nothing():
    fn = group_function([("d", "COUNT_DISTINCT", "v")], KV, ["k", "v"])
    assert feed(fn, [(I, ("a", 1)), (I, ("a", 1)), (D, ("a", 1))]) == [(I, ("a", 1))]


def test_retraction_for_an_empty_group_is_ignored():
    fn = group_function([("n", "COUNT", None)], KV, ["k", "v"])
    assert feed(fn, [(D, ("a", 1)), (I, ("a", 2))]) == [(I, ("a", 1))]


def test_a_bundle_emits_once_against_the_values_before_it():
    # Flink's MiniBatchGroupAggFunction.finishBundle: one emission per group and bundle.
    fn = group_function([("n", "COUNT", None), ("hi", "MAX", "v")], KV, ["k", "v"])
    state = GroupState()
    assert fn.process_bundle(state, ("a",), [(I, ("a", 5)), (I, ("a", 9)), (D, ("a", 9))]) == [(I, ("a", 1, 5))]
    assert fn.process_bundle(state, ("a",), [(I, ("a", 2)), (UB, ("a", 5)), (UA, ("a", 7))]) == [
        (UB, ("a", 1, 5)),
        (UA, ("a", 2, 7)),
    ]
    # The count passes through 0 inside the bundle: no -D/+I, one update.
    assert fn.process_bundle(state, ("a",), [(D, ("a", 2)), (D, ("a", 7)), (I, ("a", 4))]) == [
        (UB, ("a", 2, 7)),
        (UA, ("a", 1, 4)),
    ]
    assert fn.process_bundle(state, ("a",), [(I, ("a", 4)), (D, ("a", 4))]) == []  # same values: nothing
    assert fn.process_bundle(state, ("a",), [(D, ("a", 4))]) == [(D, ("a", 1, 4))]
    assert state.accs is None


def test_a_bundle_into_a_group_without_state_drops_its_leading_retractions():
    fn = group_function([("n", "COUNT", None)], KV, ["k", "v"])
    state = GroupState()
    assert fn.process_bundle(state, ("a",), [(D, ("a", 1)), (UB, ("a", 2))]) == []
    assert state.accs is None
    # Only the leading ones: the -D after the +I retracts it, and the group ends where it began.
    assert fn.process_bundle(state, ("a",), [(D, ("a", 1)), (I, ("a", 2)), (D, ("a", 2))]) == []
    assert state.accs is None and state.count == 0


def test_min_max_views_hold_multiplicities_and_are_cleared_with_the_group():
    fn = group_function([("lo", "MIN", "v"), ("d", "COUNT_DISTINCT", "v")], KV, ["k", "v"])
    state = GroupState()
    for kind, v in [(I, 3), (I, 3), (I, 1), (D, 1)]:
        fn.process_element(state, ("a",), kind, ("a", v))
    assert state.views == {0: {3: 2}, 1: {3: 2}} and fn.aggregates.get_values(state.accs, state.views) == (3, 1)
    for _ in range(2):
        fn.process_element(state, ("a",), D, ("a", 3))
    assert state.accs is None and state.views == {0: {}, 1: {}}


def test_insert_only_extremes_keep_no_view_and_refuse_retraction():
    fn = group_function([("hi", "MAX", "v")], KV, ["k", "v"], retractable=False)
    state = GroupState()
    fn.process_element(state, ("a",), I, ("a", 4))
    assert state.views == {} and state.accs == [[4, 0]]
    with pytest.raises(StateError, match="insert-only"):
        fn.process_element(state, ("a",), D, ("a", 4))


# ------------------------------------------------- invalid changelogs (docs/semantics.md §1.9)
# Expected changes are Flink 2.3.0's for the cases invalid_group_agg_* of tests/data/flink-diff/cases.

KI = {"k": IntegerType(), "v": IntegerType()}


def test_retractions_of_values_never_accumulated_follow_flinks_retract_functions():
    # MAX keeps 9 at -1; retracting the max 7 rescans every value, 9 included (MaxWithRetractAggFunction.updateMax).
    fn = group_function(
        [
            ("c", "COUNT", None),
            ("s", "SUM", "v"),
            ("mn", "MIN", "v"),
            ("mx", "MAX", "v"),
            ("cd", "COUNT_DISTINCT", "v"),
        ],
        KI,
        ["k", "v"],
    )
    changes = [(I, (1, v)) for v in (5, 7, 3, 4, 6)] + [(D, (1, v)) for v in (9, 1, 7, 3)] + [(I, (1, 9))]
    after = [row for kind, row in feed(fn, changes) if kind in (I, UA)]
    assert after[5:] == [
        (1, 4, 16, 3, 7, 5),
        (1, 3, 15, 3, 7, 5),
        (1, 2, 8, 3, 9, 4),
        (1, 1, 5, 1, 9, 3),
        (1, 2, 14, 1, 9, 3),
    ]


def test_a_value_back_at_zero_from_minus_one_can_become_the_extreme():
    # MaxWithRetractAggFunction.accumulate compares before counting: 9 (at -1) becomes the max at 0.
    fn = group_function([("n", "COUNT", None), ("mx", "MAX", "v")], KI, ["k", "v"])
    out = feed(fn, [(I, (1, 5)), (I, (1, 5)), (D, (1, 9)), (I, (1, 9))])
    assert out[-1] == (UA, (1, 2, 9))


def test_retractions_without_group_state_are_skipped_and_a_negative_count_divides_like_java():
    fn = group_function(
        [
            ("c", "COUNT", None),
            ("n", "COUNT", "v"),
            ("s", "SUM", "v"),
            ("a", "AVG", "v"),
            ("mn", "MIN", "v"),
            ("mx", "MAX", "v"),
            ("cd", "COUNT_DISTINCT", "v"),
        ],
        KI,
        ["k", "v"],
    )
    changes = [(D, (1, 5)), (UA, (2, 8)), (UB, (2, 8)), (D, (2, 8))]
    changes += [(I, (3, None))] * 3 + [(D, (3, 4)), (D, (3, 3))]
    out = feed(fn, changes)
    assert out[:2] == [(I, (2, 1, 1, 8, 8, 8, 8, 1)), (D, (2, 1, 1, 8, 8, 8, 8, 1))]
    assert out[-3:] == [
        (UA, (3, 2, -1, -4, 4, None, None, 0)),
        (UB, (3, 2, -1, -4, 4, None, None, 0)),
        (UA, (3, 1, -2, -7, 3, None, None, 0)),
    ]  # AVG: -7 / -2 = 3 (truncated toward zero)


# --------------------------------------------------------------------------- aggregate functions


def evaluate(aggregates, input_type, values, retract=()):
    aggs = Aggregates(parse_calls(aggregates), {"v": input_type}, ["v"], retractable=True)
    accs, views = aggs.create()
    for v in values:
        aggs.accumulate(accs, views, aggs.args((v,)))
    for v in retract:
        aggs.retract(accs, views, aggs.args((v,)))
    return aggs.get_values(accs, views), aggs.result_types


def test_result_types_follow_flink():
    _, types = evaluate([("s", "SUM", "v"), ("a", "AVG", "v"), ("n", "COUNT", "v")], IntegerType(), [])
    assert types == [IntegerType(), IntegerType(), LongType()]
    _, types = evaluate([("s", "SUM", "v"), ("a", "AVG", "v"), ("m", "MIN", "v")], DecimalType(15, 2), [])
    assert types == [DecimalType(38, 2), DecimalType(38, 6), DecimalType(15, 2)]


def test_int_sum_wraps_like_java_and_flink_avg_truncates():
    big = 2**31 - 1
    (s, a), _ = evaluate([("s", "SUM", "v"), ("a", "AVG", "v")], IntegerType(), [big, 1])
    assert s == -(2**31) and a == 2**30  # AVG sums in BIGINT: (2^31) / 2
    (a,), _ = evaluate([("a", "AVG", "v")], IntegerType(), [-3, -4])
    assert a == -3  # -3.5 truncated toward zero


def test_decimal_sum_and_avg_round_half_up_at_scale_six():
    (s, a), _ = evaluate(
        [("s", "SUM", "v"), ("a", "AVG", "v")], DecimalType(15, 2), [Decimal("0.01"), Decimal("0.01"), Decimal("0.00")]
    )
    assert s == Decimal("0.02") and a == Decimal("0.006667")
    (s,), _ = evaluate([("s", "SUM", "v")], DecimalType(38, 2), [Decimal("9" * 34 + ".99"), Decimal("0.01")])
    assert s == Decimal("1" + "0" * 34 + ".00")  # exact beyond Python's default 28 digits


def test_nulls_are_skipped_and_an_empty_sum_is_null():
    values, _ = evaluate(
        [("s", "SUM", "v"), ("n", "COUNT", "v"), ("c", "COUNT", None), ("lo", "MIN", "v")], IntegerType(), [None, None]
    )
    assert values == (None, 0, 2, None)
    values, _ = evaluate([("s", "SUM", "v"), ("a", "AVG", "v")], IntegerType(), [4], retract=[4])
    assert values == (None, None)


def test_aggregate_calls_are_checked():
    with pytest.raises(ValidationError, match="unknown aggregate function 'MEDIAN'"):
        AggregateCall("m", "MEDIAN", "v")
    with pytest.raises(ValidationError, match="needs an argument"):
        AggregateCall("m", "MAX", None)
    with pytest.raises(ValidationError, match="repeated"):
        parse_calls([("m", "MAX", "v"), ("m", "MIN", "v")])
    with pytest.raises(ValidationError, match=r"\(output_name, function, column\)"):
        parse_calls([("m", "MAX")])


# --------------------------------------------------------------------------- properties


@st.composite
def changelogs(draw):
    """A valid changelog over rows (k, v): inserts, deletes and -U/+U updates of present rows."""
    present: list = []
    changes = []
    for _ in range(draw(st.integers(0, 40))):
        op = draw(st.sampled_from(["insert", "delete", "update"]) if present else st.just("insert"))
        new = (draw(st.sampled_from("abc")), draw(st.one_of(st.none(), st.integers(-20, 20))))
        if op == "insert":
            present.append(new)
            changes.append((I, new))
        else:
            old = present.pop(draw(st.integers(0, len(present) - 1)))
            if op == "delete":
                changes.append((D, old))
            else:
                present.append(new)
                changes += [(UB, old), (UA, new)]
    return changes


def batch_group_by(rows):
    """SELECT k, COUNT(*), COUNT(v), COUNT(DISTINCT v), SUM(v), AVG(v), MIN(v), MAX(v) FROM rows GROUP BY k."""
    groups: dict = {}
    for k, v in rows:
        groups.setdefault(k, []).append(v)
    out = Counter()
    for k, vs in groups.items():
        present = [v for v in vs if v is not None]
        out[
            (
                k,
                len(vs),
                len(present),
                len(set(present)),
                sum(present) if present else None,
                flink_avg(vs),
                min(present, default=None),
                max(present, default=None),
            )
        ] += 1
    return out


@settings(max_examples=200, deadline=None)
@given(changelogs(), st.lists(st.integers(1, 8), min_size=1))
def test_bundles_materialise_to_the_batch_aggregate_with_one_emission_per_group_and_bundle(changes, sizes):
    fn = group_function(ALL, KV, ["k", "v"])
    states: dict = {}
    out, start, i = [], 0, 0
    while start < len(changes):
        bundle = changes[start : start + sizes[i % len(sizes)]]
        start, i = start + len(bundle), i + 1
        for k in dict.fromkeys(row[0] for _, row in bundle):
            emitted = fn.process_bundle(states.setdefault(k, GroupState()), (k,), [c for c in bundle if c[1][0] == k])
            assert [kind for kind, _ in emitted] in ([], [I], [D], [UB, UA])
            out += emitted
    assert materialize(out) == batch_group_by(materialize(changes).elements())


@settings(max_examples=300, deadline=None)
@given(changelogs())
def test_output_materialises_to_the_batch_aggregate_of_the_materialised_input(changes):
    fn = group_function(ALL, KV, ["k", "v"])
    out = replay_keyed(lambda s, c: fn.process_element(s, (c[1][0],), *c), GroupState, [(c[1][0], c) for c in changes])
    assert materialize(out) == batch_group_by(materialize(changes).elements())
