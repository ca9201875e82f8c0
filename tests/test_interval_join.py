"""Interval join logic in plain Python: Flink's reference cases, the worked example of docs/semantics.md §3.4,
residual conditions of outer joins, random streams against a batch interval join, and flat state
(docs/semantics.md §3)."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import pytest
from flink_cases import case_names, load_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamjoin.changelog import ChangelogError, RowKind, materialize
from streamjoin.contract import IntervalJoinSpec, ResidualPaddingSpec, TwoInputSpec
from streamjoin.errors import ValidationError
from streamjoin.planner.script import plan_script
from streamjoin.runtime.engine import JvmLogic
from streamjoin.runtime.interval_join import (
    IntervalBounds,
    IntervalJoinLogic,
    ProcTimeIntervalJoin,
    RowTimeIntervalJoin,
)
from streamjoin.runtime.interval_join.residual import ResidualPaddingLogic
from streamjoin.runtime.keyed_two_input import LocalKeyedDriver, _Columns, _KeyedTwoInputLogic
from streamjoin.runtime.processor import Element

MINUTE = 60_000
EPOCH = dt.datetime(1970, 1, 1)

# What the planner (a later issue) will derive from each case's SQL: the inputs, keys,
# time columns, bounds and join type. Written by hand from the queries, never from outputs.
CASES = {
    "interval_join_inner": {"how": "inner", "bounds": IntervalBounds.between(-10 * MINUTE, 10 * MINUTE)},
    "interval_join_left": {"how": "left", "bounds": IntervalBounds.between(-10 * MINUTE, 10 * MINUTE)},
    "interval_join_right": {"how": "right", "bounds": IntervalBounds.between(-10 * MINUTE, 10 * MINUTE)},
    "interval_join_full": {"how": "full", "bounds": IntervalBounds.between(-10 * MINUTE, 10 * MINUTE)},
    "interval_join_left_late": {"how": "left", "bounds": IntervalBounds.between(-10 * MINUTE, 10 * MINUTE)},
}
# Every case: Orders a JOIN Shipments b ON a.order_id = b.order_id, a.ts / b.ship_ts,
# SELECT a.order_id, a.ts, b.order_id, b.ship_ts (all columns, left then right).
LEFT, RIGHT, KEY, LEFT_TIME, RIGHT_TIME = "Orders", "Shipments", "order_id", "ts", "ship_ts"


def ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def millis(value: dt.datetime) -> int:
    return (value - EPOCH) // dt.timedelta(milliseconds=1)


def typed(columns, values) -> tuple:
    """Case JSON values → Python values (timestamps as datetime)."""
    return tuple(ts(v) if v is not None and t.startswith("TIMESTAMP") else v for (_, t), v in zip(columns, values))


def replay(case, how: str, bounds: IntervalBounds):
    """Feed the case to the logic in Flink's arrival order with Flink's watermark rule."""
    left, right = case.tables[LEFT], case.tables[RIGHT]
    join = RowTimeIntervalJoin(how, bounds, len(left.columns), len(right.columns))
    driver = LocalKeyedDriver(IntervalJoinLogic(join), (left.watermark_delay_ms, right.watermark_delay_ms))
    for name, kind, values in case.arrivals():
        table = case.tables[name]
        row = typed(table.columns, values)
        names = [c for c, _ in table.columns]
        side = 0 if name == LEFT else 1
        rowtime = millis(row[names.index(LEFT_TIME if side == 0 else RIGHT_TIME)])
        driver.process(side, (row[names.index(KEY)],), RowKind.from_short(kind), row, rowtime)
    driver.finish()
    return driver.changelog


def test_every_interval_case_is_mapped():
    assert sorted(CASES) == case_names("interval_join_")


@pytest.mark.parametrize("name", sorted(CASES))
def test_flink_case(name):
    case = load_case(name)
    changelog = replay(case, **CASES[name])
    expected = [(RowKind.from_short(k), typed(case.expected_columns, v)) for k, v in case.expected_changelog]
    assert changelog == expected
    assert sorted(materialize(changelog).elements(), key=repr) == sorted(
        (typed(case.expected_columns, v) for v in case.expected_final), key=repr
    )


class RecordingTimers:
    def __init__(self):
        self.registered = []

    def register(self, timestamp):
        self.registered.append(timestamp)

    def delete(self, timestamp):
        self.registered.remove(timestamp)


def at(hhmmss: str) -> int:
    return millis(ts(f"2022-10-10 {hhmmss}"))


def test_seed_worked_example_emitted_stored_and_expiry():
    """Seed 001: ±10 min on order_id. What each row emits, what is stored, which timer is set."""
    bounds = IntervalBounds.between(-10 * MINUTE, 10 * MINUTE)
    join = RowTimeIntervalJoin("full", bounds, 2, 2)
    key1001, key1002 = join.new_state((1001,)), join.new_state((1002,))
    t1001, t1002 = RecordingTimers(), RecordingTimers()

    # left 1001 @10:00:00, watermark 0: stored, clean-up timer at t + upper bound + 1 ms = 10:10:00.001.
    # (The seed says 10:20:00.001: it adds Flink's pre-1.18 minCleanUpInterval, half the window;
    # since Flink 1.18 `table.exec.interval-join.min-cleanup-interval` defaults to 0.)
    assert join.process_left(key1001, (1001, "10:00"), at("10:00:00"), 0, t1001) == []
    assert key1001.left_rows == {at("10:00:00"): [[(1001, "10:00"), False]]}
    assert t1001.registered == [at("10:10:00") + 1]

    # right 1002 @10:01:02; the example's first write-up took the watermark as 10:00 (Flink's min over the inputs is
    # still 0 here; the outcome is the same): stored, its timer 10:11:02.001 (the first write-up: 10:21:02.001).
    assert join.process_right(key1002, (1002, "10:01:02"), at("10:01:02"), at("10:00:00"), t1002) == []
    assert key1002.right_rows == {at("10:01:02"): [[(1002, "10:01:02"), False]]}
    assert t1002.registered == [at("10:11:02") + 1]

    # left 1002 @10:05: right 1002 lies in [09:55, 10:15] -> emitted; both stay (not expired).
    out = join.process_left(key1002, (1002, "10:05"), at("10:05:00"), at("10:01:02"), t1002)
    assert out == [((1002, "10:05") + (1002, "10:01:02"))]
    assert key1002.row_count == 2 and key1002.right_rows[at("10:01:02")][0][1] is True
    assert t1002.registered == [at("10:11:02") + 1, at("10:15:00") + 1]

    # right 1001 @10:12: left 1001 (10:00) is outside [10:02, 10:22] -> no match; stored.
    assert join.process_right(key1001, (1001, "10:12"), at("10:12:00"), at("10:05:00"), t1001) == []
    assert key1001.row_count == 2

    # Expiry: left 1001's timer fires once the watermark reaches 10:10:00.001 -> null-padded once.
    assert join.on_timer(key1001, at("10:10:00") + 1, at("10:10:00") + 1, t1001) == [(1001, "10:00", None, None)]
    assert list(key1001.left_rows) == [] and key1001.left_cleanup_timer is None
    # Right 1001 expires at 10:22:00.001 (10:12 + 10 min + 1 ms): unmatched -> padded on the right side.
    assert join.on_timer(key1001, at("10:22:00") + 1, at("10:22:00") + 1, t1001) == [(None, None, 1001, "10:12")]
    assert key1001.is_empty
    # 1002's rows matched: they expire silently.
    assert join.on_timer(key1002, at("10:11:02") + 1, at("10:30:00"), t1002) == []
    assert join.on_timer(key1002, at("10:15:00") + 1, at("10:30:00"), t1002) == []
    assert key1002.is_empty


def test_strict_bounds_move_by_one_millisecond():
    # B.t > A.t - 10 min AND B.t < A.t + 10 min
    strict = IntervalBounds.between(-10 * MINUTE, 10 * MINUTE, lower_inclusive=False, upper_inclusive=False)
    assert strict == IntervalBounds(-10 * MINUTE + 1, 10 * MINUTE - 1)
    join = RowTimeIntervalJoin("inner", strict, 1, 1)
    state, timers = join.new_state((1,)), RecordingTimers()
    join.process_left(state, ("a",), 0 + 10 * MINUTE, 0, timers)
    assert join.process_right(state, ("edge",), 0, 0, timers) == []  # exactly 10 min before: excluded
    assert join.process_right(state, ("in",), 1, 0, timers) == [("a", "in")]
    assert join.process_right(state, ("edge2",), 20 * MINUTE, 0, timers) == []


def test_negative_window_joins_nothing_and_pads_outer_rows_at_once():
    join = RowTimeIntervalJoin("left", IntervalBounds(5, 1), 1, 1)
    state, timers = join.new_state((1,)), RecordingTimers()
    assert join.process_left(state, ("l",), 10, 0, timers) == [("l", None)]
    assert join.process_right(state, ("r",), 12, 0, timers) == []
    assert state.is_empty and timers.registered == []


def test_late_row_joins_state_is_not_stored_and_is_padded_at_once():
    join = RowTimeIntervalJoin("full", IntervalBounds.between(-10, 10), 1, 1)
    state, timers = join.new_state((1,)), RecordingTimers()
    join.process_left(state, ("l100",), 100, 0, timers)
    # right @95 arrives when the watermark is 106: its left window [85, 105] ends before 106 -> late,
    # but left 100 is still cached (its window ends at 110): they join; the late row is not stored.
    assert join.process_right(state, ("r95",), 95, 106, timers) == [("l100", "r95")]
    assert state.right_rows == {}
    # An unmatched late row of an outer side is emitted null-padded immediately.
    assert join.process_right(state, ("r50",), 50, 106, timers) == [(None, "r50")]
    assert state.right_rows == {}
    # left 100 matched: no padding when it expires.
    assert join.on_timer(state, 111, 111, timers) == []


def test_null_key_never_matches_but_outer_rows_are_padded_on_expiry():
    join = RowTimeIntervalJoin("left", IntervalBounds.between(-10, 10), 1, 1)
    state, timers = join.new_state((None,)), RecordingTimers()
    assert join.process_left(state, ("l",), 100, 0, timers) == []
    assert join.process_right(state, ("r",), 100, 0, timers) == []
    assert join.on_timer(state, 111, 111, timers) == [("l", None)]


def test_proctime_join_uses_arrival_time():
    join = ProcTimeIntervalJoin("left", IntervalBounds.between(-5, 5), 1, 1)
    state, timers = join.new_state((1,)), RecordingTimers()
    now = 1_000
    assert join.process_left(state, ("l",), now, join.operator_time(now), timers) == []
    now = 1_004
    assert join.process_right(state, ("r",), now, join.operator_time(now), timers) == [("l", "r")]
    assert join.on_timer(state, 1_006, join.operator_time(1_006), timers) == []


def test_arguments_are_checked():
    with pytest.raises(ValidationError, match="'outer'"):
        RowTimeIntervalJoin("outer", IntervalBounds(0, 1), 1, 1)
    with pytest.raises(ValidationError, match="lower_ms"):
        IntervalBounds(1.5, 2)
    with pytest.raises(ValidationError, match="IntervalBounds"):
        RowTimeIntervalJoin("inner", (0, 1), 1, 1)
    driver = LocalKeyedDriver(IntervalJoinLogic(RowTimeIntervalJoin("inner", IntervalBounds(0, 1), 1, 1)), (0, 0))
    with pytest.raises(ChangelogError, match=r"insert-only.*-D\[1\] on the left"):
        driver.process(0, (1,), RowKind.DELETE, (1,), 5)


# -- residual conditions of outer joins (docs/semantics.md §3) ----------------------------------


class ResidualPipeline:
    """An outer interval join with a residual as the Spark plan runs it, in plain Python: step 1 (the
    join in candidate mode, fed like Flink's operator), step 2 (``residual(left values, right values)``
    in place of Spark's filter: a pair is kept only when it returns True, so None drops it, as
    Spark's ``coalesce(condition, false)``) and step 3 (:class:`ResidualPaddingLogic` per join key).
    Rows of both inputs have the join key at ``key_index``.

    ``changelog`` / ``steps`` are the output and when each change came, as :class:`LocalKeyedDriver`'s."""

    def __init__(self, how, bounds, arities, residual, delays=(0, 0), key_index=1):
        self.join = RowTimeIntervalJoin(how, bounds, *arities, candidates=True)
        self.driver = LocalKeyedDriver(IntervalJoinLogic(self.join), delays)
        columns = [f"c{i}" for i in range(sum(arities))]
        self.padding = ResidualPaddingLogic(columns, (self.join.left_outer, self.join.right_outer))
        self.residual, self.left_arity, self.key_index = residual, arities[0], key_index
        self.states, self.changelog, self.steps = {}, [], []
        self._fed = 0

    def process(self, side, key, kind, row, rowtime):
        self.driver.process(side, key, kind, row, rowtime)
        self._feed()

    def finish(self):
        self.driver.finish()
        self._feed()

    @property
    def state_row_count(self):
        """Rows in step 1's state plus keys with remembered rows in step 3's."""
        return self.driver.state_row_count + len(self.states)

    def _feed(self):
        for (kind, values), step in zip(self.driver.changelog[self._fed :], self.driver.steps[self._fed :]):
            *data, left_id, right_id = values
            left, right = tuple(data[: self.left_arity]), tuple(data[self.left_arity :])
            if left_id is not None and right_id is not None and self.residual(left, right) is not True:
                continue
            key = left[self.key_index] if left_id is not None else right[self.key_index]
            state = self.states.setdefault(key, self.padding.new_state((key,)))
            for change in self.padding.on_element(state, Element(0, kind, values), None):
                self.changelog.append(change)
                self.steps.append(step)
            if self.padding.is_done(state):
                del self.states[key]
        self._fed = len(self.driver.changelog)


def tag_differs(left, right):
    """``l.tag <> r.tag`` over rows ``(id, key, tag)``: NULL when a tag is NULL."""
    return None if left[2] is None or right[2] is None else left[2] != right[2]


TEN_EITHER_SIDE = IntervalBounds.between(-10, 10)


def run_tags(how, arrivals, bounds=TEN_EITHER_SIDE, residual=tag_differs):
    """``arrivals``: ``(side, key, rowtime, tag)``; row ids ``L<n>`` / ``R<n>`` by arrival; the output rows
    as ``(left id, right id)`` and the step each came in."""
    pipeline = ResidualPipeline(how, bounds, (3, 3), residual)
    for n, (side, key, time, tag) in enumerate(arrivals):
        pipeline.process(side, (key,), RowKind.INSERT, (f"{'LR'[side]}{n}", key, tag), time)
    pipeline.finish()
    assert not pipeline.driver.states and not pipeline.states, "state is cleaned when rows expire"
    return [(v[0], v[3]) for _, v in pipeline.changelog], pipeline.steps


def test_a_pair_failing_the_residual_is_no_match_and_its_rows_are_padded_once():
    out, steps = run_tags("left", [(0, 1, 100, "a"), (1, 1, 105, "a"), (0, 9, 200, "x"), (1, 9, 200, "x")])
    # L0-R1 fails (a <> a is false): not emitted; L0 is padded once, when the watermark (200) passes 110.
    assert out == [("L0", None), ("L2", None)]
    assert steps == [4, 5]  # L0 after row 3 (the watermark moved to 200), L2 at the end of input


def test_a_row_matching_later_after_a_failing_pair_is_not_padded():
    out, _ = run_tags("full", [(0, 1, 100, "a"), (1, 1, 101, "a"), (1, 1, 102, "b")])
    assert out == [("L0", "R2"), (None, "R1")]


def test_a_null_residual_is_no_match():
    out, _ = run_tags("full", [(0, 1, 100, None), (1, 1, 101, "a"), (1, 1, 102, "b")])
    assert sorted(out, key=repr) == sorted([("L0", None), (None, "R1"), (None, "R2")], key=repr)


@pytest.mark.parametrize(
    "how, expected",
    [
        ("left", [("L0", "R2"), ("L1", None)]),
        ("right", [("L0", "R2"), (None, "R3")]),
        ("full", [("L0", "R2"), ("L1", None), (None, "R3")]),
    ],
)
def test_each_outer_type_pads_its_outer_sides_rows_without_a_passing_pair(how, expected):
    # L0-R2 passes (a <> b); L1-R2 fails (b <> b); both pairs with R3 are NULL.
    out, _ = run_tags(how, [(0, 1, 100, "a"), (0, 1, 100, "b"), (1, 1, 100, "b"), (1, 1, 100, None)])
    assert sorted(out, key=repr) == sorted(expected, key=repr)


def test_a_late_row_whose_only_pair_fails_is_padded_at_once_after_it():
    # The watermark is 107 when R3 @95 arrives: late (its window [85, 105] is behind), it meets L0
    # (cached until 110) and fails; its expiry follows its pair at once.
    pipeline = ResidualPipeline("right", IntervalBounds.between(-10, 10), (3, 3), tag_differs)
    for n, (side, key, time, tag) in enumerate([(0, 1, 100, "a"), (0, 2, 107, "x"), (1, 2, 107, "y"), (1, 1, 95, "a")]):
        pipeline.process(side, (key,), RowKind.INSERT, (f"{'LR'[side]}{n}", key, tag), time)
    candidates = pipeline.driver.changelog
    assert [v[-2:] for _, v in candidates[-2:]] == [(0, 1), (None, 1)]  # pair (L id 0, R id 1), then R's expiry
    assert pipeline.changelog[-1] == (RowKind.INSERT, (None, None, None, "R3", 1, "a"))
    assert pipeline.steps[-1] == 3


def test_candidate_mode_numbers_rows_per_key_and_emits_every_outer_rows_expiry():
    join = RowTimeIntervalJoin("left", IntervalBounds.between(-10, 10), 1, 1, candidates=True)
    state, timers = join.new_state((1,)), RecordingTimers()
    assert join.process_left(state, ("l",), 100, 0, timers) == []
    assert join.process_right(state, ("r",), 100, 0, timers) == [("l", "r", 0, 1)]
    assert state.left_rows == {100: [[("l",), True, 0]]}
    # Matched or not, the left row's expiry comes: only the next step knows whether a pair passed.
    assert join.on_timer(state, 111, 111, timers) == [("l", None, 0, None)]
    assert join.on_timer(state, 111, 111, timers) == []


def test_residual_padding_state_holds_only_matched_outer_rows_until_they_expire():
    padding = ResidualPaddingLogic(["l", "r"], (True, False))
    state = padding.new_state((1,))
    assert padding.on_element(state, Element(0, RowKind.INSERT, ("l", "r", 0, 7)), None) == [
        (RowKind.INSERT, ("l", "r"))
    ]
    assert state == ({0}, set())  # the inner side's ids are not kept
    assert padding.on_element(state, Element(1, RowKind.INSERT, ("l", None, 0, None)), None) == []
    assert padding.is_done(state)
    assert padding.on_element(state, Element(2, RowKind.INSERT, ("m", None, 1, None)), None) == [
        (RowKind.INSERT, ("m", None))
    ]


def test_the_jvm_twins_are_described_with_the_union_frames_columns():
    """What the Scala twins read (IntervalJoinLogic.scala over TwoInputLogic.scala, ResidualPaddingLogic.scala)."""
    join = RowTimeIntervalJoin("left", IntervalBounds.between(-10, 10, upper_inclusive=False), 2, 3, candidates=True)
    logic = _KeyedTwoInputLogic(IntervalJoinLogic(join), _Columns(rowtime=(1, 0), row_watermark=(2, 3)), ["_key0"])
    assert logic.jvm_logic() == JvmLogic(
        "interval_join.IntervalJoinLogic",
        IntervalJoinSpec(
            inputs=TwoInputSpec(key_columns=("_key0",), rowtime=(1, 0), row_watermark=(2, 3)),
            how="left",
            lower_ms=-10,
            upper_ms=9,
            candidates=True,
            condition=None,
        ),
    )
    padding = ResidualPaddingLogic(["l", "r"], (True, False))
    assert padding.jvm_logic() == JvmLogic(
        "interval_join.ResidualPaddingLogic", ResidualPaddingSpec(columns=("l", "r"), outer=(True, False))
    )


def test_an_outer_interval_join_with_a_residual_plans_and_explains_it():
    ddl = """
    CREATE TABLE L (id STRING, k INT, rt TIMESTAMP(3), WATERMARK FOR rt AS rt) WITH ('connector' = 'values');
    CREATE TABLE R (tag STRING, k INT, rt TIMESTAMP(3), WATERMARK FOR rt AS rt) WITH ('connector' = 'values');
    """
    for how, name in (("LEFT", "LeftOuterJoin"), ("RIGHT", "RightOuterJoin"), ("FULL", "FullOuterJoin")):
        script = plan_script(
            ddl + f"SELECT l.id, r.tag FROM L l {how} JOIN R r ON l.k = r.k "
            "AND r.rt BETWEEN l.rt - INTERVAL '5' SECOND AND l.rt AND l.id <> 'x';"
        )
        explain = script.statements[0].explain
        assert f"IntervalJoin(joinType=[{name}]" in explain
        assert "where=[k = k0 AND id <> 'x']" in explain, explain


def generate(rng: random.Random, n: int, keys: int, delay: int, late_share: float):
    """Rows ``(side, key, rowtime, id)`` in arrival order: event times mostly increasing, shuffled
    within ``delay``; a share of rows is sent much later than its time (late)."""
    rows = []
    clock = 0
    for i in range(n):
        clock += rng.randint(0, 4)
        rows.append([clock + rng.randint(0, delay), rng.randrange(2), rng.randrange(keys), clock, i])
    for r in rows:
        if rng.random() < late_share:
            r[0] += 40 + rng.randint(0, 40)  # arrives long after its time
    rows.sort(key=lambda r: (r[0], r[4]))
    return [(side, key, rowtime, f"{'LR'[side]}{i}") for _, side, key, rowtime, i in rows]


def run_random(rows, how, bounds, delay, residual=None):
    """Run the logic (with a ``residual``: the steps of :class:`ResidualPipeline`); return the output
    changelog, the rows held in state at the end, the rows that arrived at or behind the watermark
    (*late*), and the late rows whose whole window was behind it (*not stored*)."""
    if residual is None:
        runner = driver = LocalKeyedDriver(IntervalJoinLogic(RowTimeIntervalJoin(how, bounds, 3, 3)), (delay, delay))
    else:
        runner = ResidualPipeline(how, bounds, (3, 3), residual, (delay, delay))
        driver = runner.driver
    late, not_stored = set(), set()
    for side, key, rowtime, ident in rows:
        # The harness's own rules (docs/semantics.md §3), from the operator watermark at arrival.
        watermark = max(driver.watermark, 0)
        window_end = bounds.upper_ms if side == 0 else -bounds.lower_ms
        if rowtime <= watermark:
            late.add(ident)
        if watermark >= rowtime + window_end:
            not_stored.add(ident)
        runner.process(side, (key,), RowKind.INSERT, (ident, key, rowtime), rowtime)
    runner.finish()
    return runner.changelog, runner.state_row_count, late, not_stored


def batch_pairs(rows, bounds, keep, residual=None):
    left = [(i, k, t) for s, k, t, i in rows if s == 0 and keep(i)]
    right = [(i, k, t) for s, k, t, i in rows if s == 1 and keep(i)]
    return {
        (l[0], r[0])
        for l in left
        for r in right
        if l[1] == r[1]
        and bounds.lower_ms <= r[2] - l[2] <= bounds.upper_ms
        and (residual is None or residual(l, r) is True)
    }


def id_residual(left, right):
    """A residual over rows ``(id, key, rowtime)``: NULL for some pairs, false for others."""
    n = int(left[0][1:]) + int(right[0][1:])
    return None if n % 5 == 0 else n % 3 != 0


def check_against_batch(rows, how, bounds, delay, residual=None):
    changelog, state_rows, late, not_stored = run_random(rows, how, bounds, delay, residual)
    out = materialize(changelog)
    assert all(c == 1 for c in out.values()), "every output row is emitted once"
    pairs = {(r[0], r[3]) for r in out if r[0] is not None and r[3] is not None}
    left_padded = Counter(r[0] for r in out if r[3] is None)
    right_padded = Counter(r[3] for r in out if r[0] is None)
    # 1. Among rows that were not late, the output is exactly the batch join.
    assert {p for p in pairs if not late & set(p)} == batch_pairs(rows, bounds, lambda i: i not in late, residual)
    # 2. Late rows join only what state holds, so only pairs satisfying the condition, and two
    #    rows that were never stored never meet.
    assert pairs <= batch_pairs(rows, bounds, lambda i: True, residual)
    assert not any(set(p) <= not_stored for p in pairs)
    # 3. Outer sides: a row is null-padded exactly once iff it matched nothing; inner sides never.
    matched = {i for p in pairs for i in p}
    lefts = {i for s, _, _, i in rows if s == 0}
    rights = {i for s, _, _, i in rows if s == 1}
    assert set(left_padded) == ((lefts - matched) if how in ("left", "full") else set())
    assert set(right_padded) == ((rights - matched) if how in ("right", "full") else set())
    assert all(c == 1 for c in (left_padded + right_padded).values())
    # 4. After the end of input, state is empty.
    assert state_rows == 0
    return late, not_stored


#: The drawn parameters of a random interval-join stream (:func:`generate`): join type, bounds, watermark delay.
STREAM_PARAMETERS = {
    "seed": st.integers(0, 2**32 - 1),
    "how": st.sampled_from(["inner", "left", "right", "full"]),
    "lower": st.integers(-15, 10),
    "width": st.integers(0, 20),
    "delay": st.integers(0, 6),
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**STREAM_PARAMETERS, residual=st.sampled_from([None, id_residual]))
def test_random_streams_equal_batch_join_over_rows_that_were_not_late(seed, how, lower, width, delay, residual):
    rows = generate(random.Random(seed), 60, 4, delay, late_share=0.1)
    check_against_batch(rows, how, IntervalBounds(lower, lower + width), delay, residual)


def test_random_streams_do_exercise_late_rows():
    results = [
        check_against_batch(generate(random.Random(s), 60, 4, 3, 0.1), "full", IntervalBounds(-5, 5), 3)
        for s in range(20)
    ]
    assert sum(len(late) for late, _ in results) > 20
    assert sum(len(not_stored) for _, not_stored in results) > 20


# -- state stays flat -----------------------------------------------------------------------------


def test_state_is_bounded_by_rate_times_window_not_by_stream_length():
    def peak_state(n):
        rows = generate(random.Random(7), n, 50, 5, late_share=0.0)
        join = RowTimeIntervalJoin("full", IntervalBounds.between(-20, 20), 3, 3)
        driver = LocalKeyedDriver(IntervalJoinLogic(join), (5, 5))
        peak = 0
        for side, key, rowtime, ident in rows:
            driver.process(side, (key,), RowKind.INSERT, (ident, key, rowtime), rowtime)
            peak = max(peak, driver.state_row_count)
        return peak, len(driver.states)

    small, _ = peak_state(2_000)
    large, keys = peak_state(20_000)
    assert 0 < small and large <= small * 1.5, (small, large)
    assert keys <= 50
