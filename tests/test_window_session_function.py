"""The session window aggregate of one group key (``streamjoin.runtime.window_aggregate.function``): the worked
example of docs/semantics.md §11.2 (sessions that open, touch, bridge and merge), late rows and retractions."""

from pyspark.sql.types import IntegerType, StringType

from streamjoin.changelog import RowKind
from streamjoin.runtime.aggregates import Aggregates, parse_calls
from streamjoin.runtime.window_aggregate.function import SessionWindowAggFunction, WindowAggState

MINUTE = 60_000
GAP = 5 * MINUTE
COLUMNS = ["k", "v"]
TYPES = {"k": StringType(), "v": IntegerType()}


def _fn(retractable: bool = False) -> SessionWindowAggFunction:
    calls = parse_calls([("c", "COUNT", None), ("s", "SUM", "v")])
    return SessionWindowAggFunction(Aggregates(calls, TYPES, COLUMNS, retractable=retractable), GAP)


def _add(fn, state, minute: int, v: int, kind: RowKind = RowKind.INSERT) -> None:
    t = minute * MINUTE
    fn.process_element(state, kind, ("a", v), ("a",), t, t + GAP, t + GAP)


def _fire(fn, state, watermark_minute: int):
    return state.timers.advance(watermark_minute * MINUTE, lambda t: fn.on_timer(state, t))


def test_the_worked_example_sessions_grow_touch_and_a_row_between_two_merges_them():
    fn, state = _fn(), WindowAggState()
    for minute, v in [(0, 1), (3, 2), (20, 4), (12, 8)]:
        _add(fn, state, minute, v)
    assert sorted((s.start_ms // MINUTE, s.end_ms // MINUTE) for s in state.windows.values()) == [
        (0, 8),
        (12, 17),
        (20, 25),
    ]
    _add(fn, state, 8, 16)  # [8, 13) touches [0, 8) and overlaps [12, 17): one session [0, 17)
    assert sorted((s.start_ms // MINUTE, s.end_ms // MINUTE) for s in state.windows.values()) == [(0, 17), (20, 25)]
    assert sorted(state.timers.timers) == [17 * MINUTE - 1, 25 * MINUTE - 1]
    assert _fire(fn, state, 18) == [(RowKind.INSERT, ("a", 4, 27, 0, 17 * MINUTE))]
    assert _fire(fn, state, 30) == [(RowKind.INSERT, ("a", 1, 4, 20 * MINUTE, 25 * MINUTE))]
    assert state.windows == {}


def test_a_row_whose_own_session_has_fired_is_late_unless_it_joins_an_open_session():
    fn, state = _fn(), WindowAggState()
    _add(fn, state, 10, 1)
    assert _fire(fn, state, 9) == []  # the watermark at 10:09 is before [10, 15) ends
    _add(fn, state, 2, 5)  # [2, 7) fired by 10:09 and touches nothing open: late
    _add(fn, state, 6, 7)  # [6, 11) overlaps the open [10, 15): joins it
    assert state.late_dropped == 1
    assert _fire(fn, state, 15) == [(RowKind.INSERT, ("a", 2, 8, 6 * MINUTE, 15 * MINUTE))]


def test_retractions_join_a_session_and_a_session_that_cancels_out_emits_nothing():
    fn, state = _fn(retractable=True), WindowAggState()
    _add(fn, state, 0, 3)
    _add(fn, state, 0, 3, RowKind.DELETE)
    _add(fn, state, 20, 4)
    _add(fn, state, 22, 4, RowKind.UPDATE_BEFORE)  # joins [20, 25) as [22, 27)
    _add(fn, state, 22, 9, RowKind.UPDATE_AFTER)
    assert _fire(fn, state, 40) == [(RowKind.INSERT, ("a", 1, 9, 20 * MINUTE, 27 * MINUTE))]
