"""The window Top-N of one partition key (``streamjoin.runtime.window_rank.function``): the worked example of
docs/semantics.md §11.3, ties, NULL order, late rows and the deduplication keeping the last row."""

from streamjoin.changelog import RowKind
from streamjoin.runtime.window_rank.function import SortKey, WindowRankFunction, WindowRankState

MINUTE = 60_000
END = 10 * MINUTE  # the window [0, 10 min)


def _run(fn: WindowRankFunction, rows: list[tuple], watermark_after: dict[int, int] | None = None):
    state, out = WindowRankState(), []
    for i, row in enumerate(rows):
        out += fn.process_element(state, row, END)
        if watermark_after and i in watermark_after:
            out += state.timers.advance(watermark_after[i], lambda t: fn.on_timer(state, t))
    return state, out


def test_the_worked_example_top_two_by_price_ties_in_arrival_order():
    fn = WindowRankFunction([SortKey(1, ascending=False, nulls_first=False)], 1, 2)
    rows = [("a", 4), ("b", 7), ("c", 7), ("d", 9)]
    state, out = _run(fn, rows)
    assert out == [] and state.windows[END] == [("d", 9), ("b", 7)]
    fired = state.timers.advance(11 * MINUTE - 1, lambda t: fn.on_timer(state, t))
    assert fired == [(RowKind.INSERT, ("d", 9, 1)), (RowKind.INSERT, ("b", 7, 2))]
    assert state.windows == {}


def test_a_rank_range_emits_only_its_ranks_and_nulls_sort_where_the_key_says():
    rows = [("a", None), ("b", 3), ("c", 1), ("d", 2)]
    nulls_first = WindowRankFunction([SortKey(1, ascending=True, nulls_first=True)], 2, 3)
    state, _ = _run(nulls_first, rows)
    assert nulls_first.on_timer(state, END - 1) == [(RowKind.INSERT, ("c", 1, 2)), (RowKind.INSERT, ("d", 2, 3))]
    nulls_last = WindowRankFunction([SortKey(1, ascending=True, nulls_first=False)], 3, 4)
    state, _ = _run(nulls_last, rows)
    assert nulls_last.on_timer(state, END - 1) == [(RowKind.INSERT, ("b", 3, 3)), (RowKind.INSERT, ("a", None, 4))]


def test_a_row_of_a_fired_window_is_dropped_and_counted():
    fn = WindowRankFunction([SortKey(1, ascending=False, nulls_first=False)], 1, 1)
    state, out = _run(fn, [("a", 1), ("b", 5)], watermark_after={0: END - 1})
    assert out == [(RowKind.INSERT, ("a", 1, 1))] and state.late_dropped == 1 and state.windows == {}


def test_the_deduplication_keeping_the_last_row_keeps_the_last_of_equal_rowtimes():
    rows = [("a", 5), ("b", 5), ("c", 3)]
    by_time = [SortKey(1, ascending=False, nulls_first=False)]
    last = WindowRankFunction(by_time, 1, 1, newest_first_on_ties=True)
    state, _ = _run(last, rows)
    assert last.on_timer(state, END - 1) == [(RowKind.INSERT, ("b", 5, 1))]
    rank = WindowRankFunction(by_time, 1, 1)
    state, _ = _run(rank, rows)
    assert rank.on_timer(state, END - 1) == [(RowKind.INSERT, ("a", 5, 1))]
