"""Top-N (docs/semantics.md §6.4): Flink's Top-N functions per partition key, on the worked example and on the shapes
each of its algorithms has (the engines' changelogs are held equal to these in ``test_engines_property.py``, and to
Flink's in ``test_flink_diff.py``'s ``topn_*`` cases)."""

from __future__ import annotations

import pytest

from streamjoin.changelog import RowKind
from streamjoin.errors import ValidationError
from streamjoin.runtime.rank import RankState, TopNFunction
from streamjoin.runtime.window_rank import SortKey

I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE
PRICE_DESC = [SortKey(2, ascending=False, nulls_first=False)]


def run(fn: TopNFunction, changes) -> list[list]:
    state = RankState()
    return [fn.process_element(state, kind, row) for kind, row in changes]


def test_the_worked_example_of_the_semantics():
    fn = TopNFunction(PRICE_DESC, 1, 2, output_rank=True, strategy="retract")
    out = run(fn, [(I, (1, "a", 5)), (I, (2, "a", 7)), (I, (3, "a", 6)), (D, (2, "a", 7))])
    assert out == [
        [(I, (1, "a", 5, 1))],
        [(UB, (1, "a", 5, 1)), (UA, (2, "a", 7, 1)), (I, (1, "a", 5, 2))],
        [(UB, (1, "a", 5, 2)), (UA, (3, "a", 6, 2))],
        [(UB, (2, "a", 7, 1)), (UA, (3, "a", 6, 1)), (UB, (3, "a", 6, 2)), (UA, (1, "a", 5, 2))],
    ]


def test_without_the_rank_a_row_pushes_one_out_and_a_retraction_pulls_one_in():
    fn = TopNFunction(PRICE_DESC, 1, 2, output_rank=False, strategy="retract")
    out = run(fn, [(I, (1, "a", 5)), (I, (2, "a", 7)), (I, (3, "a", 6)), (D, (2, "a", 7))])
    assert out == [[(I, (1, "a", 5))], [(I, (2, "a", 7))], [(D, (1, "a", 5)), (I, (3, "a", 6))],
                   [(D, (2, "a", 7)), (I, (1, "a", 5))]]  # fmt: skip


def test_append_only_forgets_rows_that_can_no_longer_rank_and_ties_rank_in_arrival_order():
    fn = TopNFunction(PRICE_DESC, 1, 2, output_rank=True, strategy="append")
    state = RankState()
    for row in [(1, "a", 5), (2, "a", 5), (3, "a", 5)]:
        fn.process_element(state, I, row)
    assert state.groups == [[(1, "a", 5), (2, "a", 5)]]  # the third tie is past rank 2: not kept
    assert fn.process_element(state, I, (4, "a", 9)) == [
        (UB, (1, "a", 5, 1)),
        (UA, (4, "a", 9, 1)),
        (UB, (2, "a", 5, 2)),
        (UA, (1, "a", 5, 2)),
    ]


def test_top1_replaces_only_a_strictly_better_row_and_first_n_keeps_arrival_order():
    top1 = TopNFunction(PRICE_DESC, 1, 1, output_rank=False, strategy="top1")
    assert run(top1, [(I, (1, "a", 5)), (I, (2, "a", 5)), (I, (3, "a", 6))]) == [
        [(I, (1, "a", 5))],
        [],
        [(UB, (1, "a", 5)), (UA, (3, "a", 6))],
    ]
    first = TopNFunction(PRICE_DESC, 2, 3, output_rank=True, strategy="first")
    assert run(first, [(I, (n, "a", 9 - n)) for n in range(4)]) == [
        [],
        [(I, (1, "a", 8, 2))],
        [(I, (2, "a", 7, 3))],
        [],
    ]


def test_updatable_top_n_moves_an_upserted_row_up_and_retracts_its_old_rank_first():
    fn = TopNFunction([SortKey(2, False, False)], 1, 3, output_rank=True, strategy="update", row_key=[0, 1])
    out = run(fn, [(I, ("a", "p", 1)), (I, ("a", "q", 1)), (UA, ("a", "q", 2)), (UA, ("a", "q", 3))])
    assert out == [
        [(I, ("a", "p", 1, 1))],
        [(I, ("a", "q", 1, 2))],
        [(UB, ("a", "p", 1, 1)), (UB, ("a", "q", 1, 2)), (UA, ("a", "q", 2, 1)), (UA, ("a", "p", 1, 2))],
        [(UB, ("a", "q", 2, 1)), (UA, ("a", "q", 3, 1))],  # the same rank: the row only changes
    ]


def test_the_operator_refuses_what_its_strategy_cannot_run(spark):
    from streamjoin.runtime.rank import rank

    df = spark.createDataFrame([("a", 1, "+I", b"\x00")], "k STRING, v INT, _rowkind STRING, _seq BINARY")
    with pytest.raises(ValidationError, match="rank range 3..2 is empty"):
        rank(df, partition_by=["k"], order_by=[("v", True, True)], rank_start=3, rank_end=2, rank_column=None,
             strategy="retract")  # fmt: skip
    with pytest.raises(ValidationError, match="strategy 'top1' keeps rank 1 only"):
        rank(df, partition_by=["k"], order_by=[("v", True, True)], rank_start=1, rank_end=2, rank_column=None,
             strategy="top1")  # fmt: skip
    with pytest.raises(ValidationError, match="a row key goes with strategy 'update'"):
        rank(df, partition_by=["k"], order_by=[("v", True, True)], rank_start=1, rank_end=2, rank_column=None,
             strategy="update")  # fmt: skip
