"""The window join of one join key (``streamjoin.runtime.window_join.function``): the worked example of
docs/semantics.md §11.4 for every join type, Flink's output order, NULL keys, late rows and candidate mode."""

import pytest

from streamjoin.changelog import ChangelogError, RowKind
from streamjoin.runtime.timers import TimerService
from streamjoin.runtime.window_join.function import WindowJoinFunction, WindowJoinState
from streamjoin.runtime.window_join.operator import WindowJoinLogic

MINUTE = 60_000
END = 5 * MINUTE  # the window [0, 5 min)
I = RowKind.INSERT


def _run(how: str, left: list[tuple], right: list[tuple], *, key=(2,), candidates=False):
    """Both sides' rows into the window ending at END, then the watermark past its end: what it emits."""
    fn = WindowJoinFunction(how, (2, 2), candidates=candidates)
    state, timers = fn.new_state(key), TimerService()
    for side, rows in ((0, left), (1, right)):
        for row in rows:
            fn.process_element(state, side, row, END, timers.time, timers)
    out = timers.advance(END - 1, lambda t: fn.on_timer(state, t))
    assert state.is_empty
    return out


# The worked example: key num = 2; left rows L1, L2, right rows R1, R2 in one window.
LEFT = [("L1", 2), ("L2", 2)]
RIGHT = [("R1", 2), ("R2", 2)]
PAIRS = [(I, ("L1", 2, "R1", 2)), (I, ("L1", 2, "R2", 2)), (I, ("L2", 2, "R1", 2)), (I, ("L2", 2, "R2", 2))]


@pytest.mark.parametrize("how", ["inner", "left", "right", "full"])
def test_every_join_type_pairs_the_rows_of_one_window_left_major_in_arrival_order(how):
    out = _run(how, LEFT, RIGHT)
    if how == "right":  # Flink's RightOuterWindowJoinProcessor walks the right rows
        assert out == [PAIRS[0], PAIRS[2], PAIRS[1], PAIRS[3]]
    else:
        assert out == PAIRS


def test_outer_rows_without_a_match_are_padded_and_full_pads_the_right_rows_last():
    assert _run("inner", LEFT, []) == []
    assert _run("left", LEFT, []) == [(I, ("L1", 2, None, None)), (I, ("L2", 2, None, None))]
    assert _run("right", LEFT, []) == []
    assert _run("right", [], RIGHT) == [(I, (None, None, "R1", 2)), (I, (None, None, "R2", 2))]
    assert _run("full", [], RIGHT) == [(I, (None, None, "R1", 2)), (I, (None, None, "R2", 2))]


def test_semi_and_anti_emit_each_left_row_once():
    assert _run("semi", LEFT, RIGHT) == [(I, ("L1", 2, None, None)), (I, ("L2", 2, None, None))]
    assert _run("anti", LEFT, RIGHT) == []
    assert _run("anti", LEFT, []) == [(I, ("L1", 2, None, None)), (I, ("L2", 2, None, None))]
    assert _run("semi", LEFT, []) == []


def test_a_null_key_never_matches_but_its_outer_rows_are_padded():
    assert _run("inner", LEFT, RIGHT, key=(None,)) == []
    assert _run("full", LEFT[:1], RIGHT[:1], key=(None,)) == [(I, ("L1", 2, None, None)), (I, (None, None, "R1", 2))]
    assert _run("anti", LEFT[:1], RIGHT, key=(None,)) == [(I, ("L1", 2, None, None))]


def test_a_row_of_a_fired_window_is_dropped():
    fn = WindowJoinFunction("left", (2, 2))
    state, timers = WindowJoinState(), TimerService()
    fn.process_element(state, 0, ("L1", 2), END, timers.time, timers)
    assert timers.advance(END - 1, lambda t: fn.on_timer(state, t)) == [(I, ("L1", 2, None, None))]
    fn.process_element(state, 1, ("R1", 2), END, timers.time, timers)
    fn.process_element(state, 0, ("L2", 2), END + MINUTE, timers.time, timers)
    assert list(state.windows) == [END + MINUTE]  # R1 of the fired window is not kept
    assert timers.advance(END + MINUTE - 1, lambda t: fn.on_timer(state, t)) == [(I, ("L2", 2, None, None))]


def test_candidate_mode_emits_every_pair_with_ids_and_each_outer_rows_expiry_after_its_pairs():
    out = _run("full", LEFT[:1], RIGHT, candidates=True)
    assert out == [
        (I, ("L1", 2, "R1", 2, 0, 0)),
        (I, ("L1", 2, "R2", 2, 0, 1)),
        (I, ("L1", 2, None, None, 0, None)),
        (I, (None, None, "R1", 2, None, 0)),
        (I, (None, None, "R2", 2, None, 1)),
    ]


def test_the_logic_refuses_updates_as_flink_plans_no_window_join_over_them():
    logic = WindowJoinLogic(WindowJoinFunction("inner", (2, 2)))
    with pytest.raises(ChangelogError, match="insert-only"):
        logic.on_row(logic.new_state((1,)), 0, RowKind.DELETE, ("L1", 2), END, 0, TimerService())


def test_the_python_engine_refuses_a_semi_join_residual_it_cannot_evaluate_inside_the_join(spark):
    from datetime import datetime

    from streamjoin.errors import EngineError
    from streamjoin.jvm import ENGINE_CONF
    from streamjoin.runtime.window_join import window_join

    schema = "k INT, {v} INT, {we} TIMESTAMP, _rowkind STRING, _seq LONG"
    row = [(1, 2, datetime(2024, 1, 1, 10, 5), "+I", 0)]
    left = spark.createDataFrame(row, schema.format(v="a", we="lwe"))
    right = spark.createDataFrame(row, schema.format(v="b", we="rwe")).withColumnRenamed("k", "rk")
    before = spark.conf.get(ENGINE_CONF)
    spark.conf.set(ENGINE_CONF, "python")
    try:
        with pytest.raises(EngineError, match="semi window join's residual predicate 'a < b'.*jvm engine"):
            window_join(
                left,
                right,
                on=[("k", "rk")],
                left_window_end="lwe",
                right_window_end="rwe",
                how="semi",
                condition="a < b",
            )
    finally:
        spark.conf.set(ENGINE_CONF, before)
