"""The regular join's worked behaviours (docs/semantics.md §2), state layouts, output keys and arguments.

Exact changelogs in plain Python (``LocalRegularJoin``), one list of changes per
input change. Rows are ``(key, value)``; L/R say which input a change comes from.
"""

from __future__ import annotations

import logging
from collections import Counter

import pytest
from flink_cases import case_names, load_case
from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester
from pyspark.sql.types import IntegerType, StringType, StructField, StructType
from test_regular_join_cases import QUERIES, SIDES, _spec, assert_same_changes_per_input

from streamjoin.changelog import RowKind, materialize
from streamjoin.connectors.changelog_files import changelog_file_stream
from streamjoin.contract import RegularJoinSpec
from streamjoin.errors import ValidationError
from streamjoin.planner.metadata import derive_output_keys
from streamjoin.runtime.processor import KeyedProcessor, child_seq
from streamjoin.runtime.regular_join import regular_join
from streamjoin.runtime.regular_join.operator import (
    _RegularJoinAssociateLogic,
    _RegularJoinCandidateLogic,
    _RegularJoinLogic,
)
from streamjoin.runtime.regular_join.state_views import (
    DictRecordStore,
    InputSideHasNoUniqueKey,
    InputSideHasUniqueKey,
    JoinKeyContainsUniqueKey,
    StateLayout,
    TwsRecordStore,
    choose_layout,
)
from streamjoin.runtime.regular_join.streaming_join import JoinSpec, JoinType, LocalRegularJoin
from streamjoin.runtime.two_input import LEFT, RIGHT, row_of

L, R = LEFT, RIGHT
N = None


def run(how, changes, *, condition=None, on=((0, 0),), unique_keys=(None, None)):
    """Feed ``(side, kind, row)`` changes of 2-column rows; return each one's output as (short kind, row)."""
    spec = JoinSpec(JoinType(how), [l for l, _ in on], [r for _, r in on], 2, 2, *unique_keys)
    join = LocalRegularJoin(spec, condition)
    return [
        [(k.short, row) for k, row in join.process(side, RowKind.from_short(kind), row)] for side, kind, row in changes
    ]


def final(outputs):
    return materialize((RowKind.from_short(k), row) for changes in outputs for k, row in changes)


def test_inner_forwards_update_rowkinds_and_keeps_duplicates():
    out = run(
        "inner",
        [
            (L, "+I", (1, "a")),
            (R, "+I", (1, "x")),
            (L, "-U", (1, "a")),
            (L, "+U", (1, "b")),
            (R, "-D", (1, "x")),
            (L, "+I", (2, "c")),
            (L, "+I", (2, "c")),
            (R, "+I", (2, "z")),
            (L, "-D", (2, "c")),
        ],
    )
    assert out == [
        [],
        [("+I", (1, "a", 1, "x"))],
        [("-U", (1, "a", 1, "x"))],
        [("+U", (1, "b", 1, "x"))],
        [("-D", (1, "b", 1, "x"))],
        [],
        [],
        [("+I", (2, "c", 2, "z")), ("+I", (2, "c", 2, "z"))],
        [("-D", (2, "c", 2, "z"))],
    ]
    assert final(out) == Counter({(2, "c", 2, "z"): 1})


def test_left_retracts_the_padded_row_on_first_match_and_resends_it_after_the_last():
    out = run(
        "left",
        [
            (L, "+I", (1, "a")),
            (R, "+I", (1, "x")),
            (R, "+I", (1, "y")),
            (R, "-D", (1, "x")),
            (R, "-U", (1, "y")),
            (L, "-D", (1, "a")),
        ],
    )
    assert out == [
        [("+I", (1, "a", N, N))],
        [("-D", (1, "a", N, N)), ("+I", (1, "a", 1, "x"))],
        [("+I", (1, "a", 1, "y"))],  # association count 2: nothing to retract
        [("-D", (1, "a", 1, "x"))],  # still matched by y
        [("-U", (1, "a", 1, "y")), ("+I", (1, "a", N, N))],  # the inner side keeps its -U
        [("-D", (1, "a", N, N))],
    ]
    assert final(out) == Counter()


def test_right_is_the_mirror_of_left():
    out = run("right", [(R, "+I", (1, "x")), (L, "+I", (1, "a")), (L, "-D", (1, "a")), (R, "-U", (1, "x"))])
    assert out == [
        [("+I", (N, N, 1, "x"))],
        [("-D", (N, N, 1, "x")), ("+I", (1, "a", 1, "x"))],
        [("-D", (1, "a", 1, "x")), ("+I", (N, N, 1, "x"))],
        [("-D", (N, N, 1, "x"))],  # an outer side retracts with -D
    ]


def test_full_pads_and_unpads_in_both_directions():
    out = run(
        "full",
        [
            (R, "+I", (1, "x")),
            (L, "+I", (1, "a")),
            (L, "+I", (1, "b")),
            (R, "+I", (1, "y")),
            (L, "-D", (1, "a")),
            (L, "-D", (1, "b")),
        ],
    )
    assert out == [
        [("+I", (N, N, 1, "x"))],
        [("-D", (N, N, 1, "x")), ("+I", (1, "a", 1, "x"))],
        [("+I", (1, "b", 1, "x"))],
        [("+I", (1, "a", 1, "y")), ("+I", (1, "b", 1, "y"))],
        [("-D", (1, "a", 1, "x")), ("-D", (1, "a", 1, "y"))],
        [("-D", (1, "b", 1, "x")), ("+I", (N, N, 1, "x")), ("-D", (1, "b", 1, "y")), ("+I", (N, N, 1, "y"))],
    ]
    assert final(out) == Counter({(N, N, 1, "x"): 1, (N, N, 1, "y"): 1})


def test_semi_sends_the_left_row_with_the_right_changes_rowkind():
    out = run(
        "semi",
        [
            (L, "+I", (1, "a")),
            (R, "+I", (1, "x")),
            (R, "+U", (1, "y")),
            (R, "-U", (1, "x")),
            (R, "-D", (1, "y")),
            (L, "+I", (1, "b")),
            (R, "+U", (1, "z")),
            (L, "-U", (1, "b")),
        ],
    )
    assert out == [
        [],
        [("+I", (1, "a"))],
        [],  # already matched
        [],  # still matched by y
        [("-D", (1, "a"))],
        [],
        [("+U", (1, "a")), ("+U", (1, "b"))],
        [("-U", (1, "b"))],  # a left change keeps its own RowKind
    ]
    assert final(out) == Counter({(1, "a"): 1})


def test_anti_inserts_unmatched_rows_and_deletes_them_when_matched():
    out = run(
        "anti",
        [
            (L, "+I", (1, "a")),
            (R, "+I", (1, "x")),
            (R, "+I", (1, "y")),
            (R, "-D", (1, "x")),
            (R, "-U", (1, "y")),
            (L, "-D", (1, "a")),
        ],
    )
    assert out == [[("+I", (1, "a"))], [("-D", (1, "a"))], [], [], [("+I", (1, "a"))], [("-D", (1, "a"))]]


def greater(left, right):
    return left[1] > right[1]


def test_left_with_residual_predicate():
    out = run(
        "left",
        [(L, "+I", (1, 5)), (R, "+I", (1, 7)), (R, "+I", (1, 3)), (L, "+I", (1, 9)), (R, "-D", (1, 3))],
        condition=greater,
    )
    assert out == [
        [("+I", (1, 5, N, N))],
        [],  # same key, 5 > 7 fails: no match
        [("-D", (1, 5, N, N)), ("+I", (1, 5, 1, 3))],
        [("+I", (1, 9, 1, 7)), ("+I", (1, 9, 1, 3))],
        [("-D", (1, 5, 1, 3)), ("+I", (1, 5, N, N)), ("-D", (1, 9, 1, 3))],
    ]
    assert final(out) == Counter({(1, 5, N, N): 1, (1, 9, 1, 7): 1})


def test_full_with_residual_predicate_both_directions():
    out = run(
        "full",
        [(R, "+I", (1, 7)), (L, "+I", (1, 5)), (L, "+I", (1, 9)), (R, "-D", (1, 7))],
        condition=greater,
    )
    assert out == [
        [("+I", (N, N, 1, 7))],
        [("+I", (1, 5, N, N))],
        [("-D", (N, N, 1, 7)), ("+I", (1, 9, 1, 7))],
        [("-D", (1, 9, 1, 7)), ("+I", (1, 9, N, N))],
    ]


def test_null_keys_never_match_and_are_not_stored():
    spec = JoinSpec(JoinType.FULL, [0], [0], 2, 2)
    join = LocalRegularJoin(spec)
    assert join.process(L, RowKind.INSERT, (N, "a")) == [(RowKind.INSERT, (N, "a", N, N))]
    assert join.process(R, RowKind.INSERT, (N, "x")) == [(RowKind.INSERT, (N, N, N, "x"))]
    assert join.process(L, RowKind.DELETE, (N, "a")) == [(RowKind.DELETE, (N, "a", N, N))]
    assert join.state_entries() == 0
    assert run("inner", [(L, "+I", (N, "a")), (R, "+I", (N, "x"))]) == [[], []]
    assert run("anti", [(L, "+I", (N, "a")), (R, "+I", (N, "x"))]) == [[("+I", (N, "a"))], []]
    assert run("semi", [(R, "+I", (N, "x")), (L, "+I", (N, "a"))]) == [[], []]


def test_without_equi_key_every_row_meets_every_row():
    out = run("inner", [(L, "+I", (1, "a")), (R, "+I", (2, "x")), (L, "+I", (3, "b"))], on=())
    assert out == [[], [("+I", (1, "a", 2, "x"))], [("+I", (3, "b", 2, "x"))]]


def test_unique_key_layouts_give_the_same_changelog():
    changes = [(L, "+I", (1, "a")), (R, "+I", (1, "x")), (L, "-U", (1, "a")), (L, "+U", (1, "b")), (R, "-D", (1, "x"))]
    plain = run("full", changes)
    assert run("full", changes, unique_keys=([0], [0])) == plain  # JoinKeyContainsUniqueKey
    assert run("full", changes, unique_keys=([1], [1])) == plain  # InputSideHasUniqueKey


# --- invalid changelogs (docs/semantics.md §1.9) -----------------------------------------------
# Flink 2.3.0's StreamingJoinOperator does not check that a retracted row is in state: the state views
# ignore it (JoinRecordStateViews / OuterJoinRecordStateViews) and the retraction still meets every
# match. Expected changes: Flink's outputs of the invalid_join_* cases of tests/data/flink-diff/cases.


def run_spec(spec, changes):
    join = LocalRegularJoin(spec)
    return [
        [(k.short, row) for k, row in join.process(side, RowKind.from_short(kind), row)] for side, kind, row in changes
    ]


def test_invalid_changelog_on_a_side_keyed_by_a_unique_key_outside_the_join_key():
    # L(id, k, v) keyed by id, joined on k: InputSideHasUniqueKey.
    spec = JoinSpec(JoinType.INNER, [1], [0], 3, 2, left_unique_key=[0])
    out = run_spec(
        spec,
        [
            (R, "+I", (1, "r")),
            (L, "+U", (1, 1, "a")),  # +U before its insert: an accumulate, forwarded as +U
            (L, "+I", (1, 1, "b")),  # duplicate +I of id 1: replaces the row in state
            (L, "-U", (1, 1, "b")),  # -U without its +U: removes id 1
            (L, "-D", (2, 9, "z")),  # -D of an id never inserted, no match
            (R, "+I", (1, "s")),  # the left state is empty now
        ],
    )
    assert out == [
        [],
        [("+U", (1, 1, "a", 1, "r"))],
        [("+I", (1, 1, "b", 1, "r"))],
        [("-U", (1, 1, "b", 1, "r"))],
        [],
        [],
    ]
    assert final(out) == Counter({(1, 1, "a", 1, "r"): 1})  # Flink's final row too: the stale +U stays


def test_invalid_changelog_on_the_inner_side_of_a_left_join_moves_association_counts():
    # R keyed by the join key (JoinKeyContainsUniqueKey) with anomalies; L is the outer side.
    spec = JoinSpec(JoinType.LEFT, [0], [0], 2, 2, right_unique_key=[0])
    out = run_spec(
        spec,
        [
            (L, "+I", (1, "x")),
            (R, "+U", (1, "a")),
            (R, "+I", (1, "b")),  # replaces (1, a) in state; L's association count 1 -> 2
            (R, "-U", (1, "b")),  # count 2 -> 1: no null-padded row
            (L, "+I", (1, "y")),  # R's state is empty
            (R, "-D", (2, "z")),
        ],
    )
    assert out == [
        [("+I", (1, "x", N, N))],
        [("-D", (1, "x", N, N)), ("+I", (1, "x", 1, "a"))],
        [("+I", (1, "x", 1, "b"))],
        [("-U", (1, "x", 1, "b"))],
        [("+I", (1, "y", N, N))],
        [],
    ]
    assert final(out) == Counter({(1, "x", 1, "a"): 1, (1, "y", N, N): 1})


def test_retracting_an_unknown_row_that_matches_drives_an_association_count_negative():
    # Flink emits the retraction of a joined row never sent and stores count -1, so the next
    # match does not retract the null-padded row (StreamingJoinOperator.processElement).
    spec = JoinSpec(JoinType.LEFT, [0], [0], 2, 2)
    join = LocalRegularJoin(spec)
    out = [
        join.process(side, RowKind.from_short(kind), row)
        for side, kind, row in [(L, "+I", (2, "q")), (R, "-D", (2, "z")), (R, "+I", (2, "w")), (R, "+I", (2, "v"))]
    ]
    assert [[(k.short, row) for k, row in changes] for changes in out] == [
        [("+I", (2, "q", N, N))],
        [("-D", (2, "q", 2, "z"))],
        [("+I", (2, "q", 2, "w"))],  # count -1 -> 0: the padded row stays
        [("-D", (2, "q", N, N)), ("+I", (2, "q", 2, "v"))],  # count 0 -> 1
    ]


def test_anti_join_retraction_of_an_unknown_right_row_leaves_the_left_row_unmatched_once_more():
    # StreamingSemiAntiJoinOperator: the left row's count goes 0 -> -1, so the next right match brings it to 0
    # without the -D; only a second match retracts it.
    out = run("anti", [(L, "+I", (1, "a")), (R, "-D", (1, "z")), (R, "+I", (1, "x")), (R, "+I", (1, "y"))])
    assert out == [[("+I", (1, "a"))], [], [], [("-D", (1, "a"))]]


def test_invalid_changelog_on_a_side_without_unique_key_never_goes_below_zero():
    # InputSideHasNoUniqueKey: row -> count; a retraction of an absent row does not store -1.
    out = run(
        "inner",
        [
            (L, "-D", (1, "x")),
            (L, "+I", (1, "x")),
            (L, "-U", (1, "x")),
            (L, "+U", (1, "y")),
            (L, "-D", (1, "q")),
            (R, "+I", (1, "r")),
        ],
    )
    assert out == [[], [], [], [], [], [("+I", (1, "y", 1, "r"))]]


class _SortedMapState:
    """A MapState that lists its keys sorted, as Spark's RocksDB state store lists them by their encoding."""

    def __init__(self, entries):
        self.data = dict(entries)
        self.scans = 0

    def iterator(self):
        self.scans += 1
        return iter(sorted(self.data.items()))

    def updateValue(self, key, value):
        self.data[key] = value

    def removeKey(self, key):
        del self.data[key]


def test_a_store_lists_an_entry_added_during_the_visit_in_the_states_order():
    # A row's matches must come in one order whatever the micro-batch holds: an entry added during the visit
    # takes its place in the state's order, as it would had it come in an earlier micro-batch.
    state = _SortedMapState({(2,): ("b",), (8,): ("h",)})
    store = TwsRecordStore(state, is_map=True)
    assert [k for k, _ in store.items()] == [(2,), (8,)]
    store.put((6,), ("f",))
    store.delete((2,))
    assert [k for k, _ in store.items()] == [(6,), (8,)]
    assert state.scans == 2 and state.data == {(6,): ("f",), (8,): ("h",)}  # written before listing again
    store.put((8,), ("H",))  # a stored key: listed from memory
    assert list(store.items()) == [((6,), ("f",)), ((8,), ("H",))] and state.scans == 2


def test_processor_keeps_flinks_state_on_invalid_changelogs():
    # The transformWithState processor (TwsRecordStore, MapState entries) on the same anomalies.
    spec = JoinSpec(JoinType.LEFT, [0], [0], 2, 2, right_unique_key=[0])
    schemas = tuple(
        StructType([StructField(c, IntegerType()), StructField(v, StringType())])
        for c, v in (("a1", "a2"), ("b1", "b2"))
    )
    names = [s.names for s in schemas]
    tester = TwsTester(
        KeyedProcessor(_RegularJoinLogic(spec, schemas, (True, True)), [*names[0], *names[1], "_rowkind", "_seq"])
    )
    changes = [
        (L, "+I", (1, "x")),
        (R, "+U", (1, "a")),
        (R, "+I", (1, "b")),
        (R, "-U", (1, "b")),
        (L, "+I", (1, "y")),
        (R, "-D", (1, "zz")),
        (R, "+I", (1, "c")),
    ]
    ours = [
        [
            (RowKind.from_short(r._rowkind), tuple(r)[:-2])
            for r in tester.test(row[0], [union_row(side, kind, row, seq, names)])
        ]
        for seq, (side, kind, row) in enumerate(changes)
    ]
    reference = LocalRegularJoin(spec)
    assert_same_changes_per_input(
        ours, [c for side, kind, row in changes for c in reference.process(side, RowKind.from_short(kind), row)]
    )


# --- state layouts ---------------------------------------------------------------------------


def test_layout_follows_the_unique_key():
    assert choose_layout([0], [0]) is StateLayout.JOIN_KEY_CONTAINS_UNIQUE_KEY
    assert choose_layout([0, 1], [1]) is StateLayout.JOIN_KEY_CONTAINS_UNIQUE_KEY
    assert choose_layout([0], [0, 1]) is StateLayout.INPUT_SIDE_HAS_UNIQUE_KEY
    assert choose_layout([0], None) is StateLayout.INPUT_SIDE_HAS_NO_UNIQUE_KEY
    assert choose_layout([], None) is StateLayout.INPUT_SIDE_HAS_NO_UNIQUE_KEY


def test_join_key_contains_unique_key_holds_one_row():
    view = JoinKeyContainsUniqueKey(store := DictRecordStore())
    view.add_record((1, "a"), 0)
    view.add_record((1, "b"), 2)  # same unique key: replaces
    assert view.records() == [((1, "b"), 2)]
    view.update_associations((1, "b"), 3)
    assert view.associations((1, "b")) == 3 and len(store) == 1
    view.retract_record((1, "b"))
    assert view.records() == [] and view.associations((1, "b")) == 0


def test_input_side_has_unique_key_is_keyed_by_it():
    view = InputSideHasUniqueKey(DictRecordStore(), unique_key=[1])
    view.add_record((1, "a", 10))
    view.add_record((1, "b", 20), 1)
    view.add_record((1, "a", 11))  # a new version of unique key "a"
    assert sorted(view.records()) == [((1, "a", 11), 0), ((1, "b", 20), 1)]
    view.retract_record((1, "a", 999))  # by unique key, whatever the other columns
    assert view.records() == [((1, "b", 20), 1)]


def test_input_side_has_no_unique_key_counts_identical_rows():
    view = InputSideHasNoUniqueKey(store := DictRecordStore())
    view.add_record((1, "a"))
    view.add_record((1, "a"), 2)
    assert view.records() == [((1, "a"), 2), ((1, "a"), 2)] and len(store) == 1
    view.retract_record((1, "a"))
    assert view.records() == [((1, "a"), 2)]
    view.retract_record((1, "zzz"))  # absent (expired or never added): ignored
    view.retract_record((1, "a"))
    assert view.records() == [] and len(store) == 0


def test_input_side_has_unique_key_needs_one():
    with pytest.raises(ValidationError, match="non-empty unique key"):
        InputSideHasUniqueKey(DictRecordStore(), unique_key=[])


# --- the Spark processor, in memory --------------------------------------------------------------


def union_row(side, kind, row, seq, names):
    struct = dict(zip(names[side], row))
    return Row(
        _key0=row[0],
        _side=side,
        _left=struct if side == L else None,
        _right=struct if side == R else None,
        _rowkind=kind,
        _seq=seq,
    )


@pytest.mark.parametrize("name", [n for n in case_names("join_") if QUERIES[n][2] is None])
def test_processor_with_transform_with_state_tester_equals_the_plain_python_run(name):
    # The StatefulProcessor (state variables, TwsRecordStore, ordering, flush) driven by
    # pyspark's in-memory TwsTester, one change per call, against LocalRegularJoin.
    case = load_case(name)
    spec = _spec(case)
    schemas = tuple(
        StructType([StructField(c, IntegerType() if t == "INT" else StringType()) for c, t in case.tables[n].columns])
        for n in ("A", "B")
    )
    names = [s.names for s in schemas]
    output = [*names[0], *names[1]] if spec.join_type.projects_right else names[0]
    tester = TwsTester(KeyedProcessor(_RegularJoinLogic(spec, schemas, (True, True)), [*output, "_rowkind", "_seq"]))
    reference = LocalRegularJoin(spec)
    ours, expected = [], []
    for seq, (table, kind, values) in enumerate(case.arrivals()):
        side = SIDES[table]
        rows = tester.test(values[0], [union_row(side, kind, values, seq, names)])
        ours.append([(RowKind.from_short(r._rowkind), tuple(r)[:-2]) for r in rows])
        assert [r._seq for r in rows] == [child_seq(seq.to_bytes(8, "big"), i) for i in range(len(rows))]
        expected.extend(reference.process(side, RowKind.from_short(kind), values))
    assert_same_changes_per_input(ours, expected)


def test_two_step_processors_equal_the_one_step_join_even_with_tied_seq():
    # Candidate step, the residual predicate (here in Python, standing in for Spark's
    # filter), association step; two left changes share a _seq, as changes from two
    # upstream keys may.
    spec = JoinSpec(JoinType.FULL, [0], [0], 2, 2)
    schema = StructType([StructField("k", IntegerType()), StructField("v", IntegerType())])
    schemas = (schema, schema)
    names = [["lk", "lv"], ["rk", "rv"]]
    candidate_columns = ["_key0", "_side", "_left", "_right", "_pair", "_rowkind", "_seq"]
    candidates = TwsTester(KeyedProcessor(_RegularJoinCandidateLogic(spec, schemas, (True, True)), candidate_columns))
    output_columns = ["lk", "lv", "rk", "rv", "_rowkind", "_seq"]
    associate = TwsTester(KeyedProcessor(_RegularJoinAssociateLogic(spec, schemas, (True, True)), output_columns))
    reference = LocalRegularJoin(spec, greater)
    batches = [
        [(R, "+I", (1, 3), 0)],
        [(L, "+I", (1, 5), 7), (L, "+I", (1, 1), 7), (R, "+I", (1, 4), 2)],
        [(R, "-D", (1, 3), 3), (L, "-D", (1, 5), 8)],
    ]
    for batch in batches:
        rows = [union_row(side, kind, row, seq, names) for side, kind, row, seq in batch]
        kept = [r for r in candidates.test(1, rows) if r._pair == 0 or greater(row_of(r._left), row_of(r._right))]
        ours = Counter((RowKind.from_short(r._rowkind), tuple(r)[:4]) for r in associate.test(1, kept))
        ordered = sorted(batch, key=lambda c: (c[3], c[0]))
        expected = Counter(
            c for side, kind, row, _ in ordered for c in reference.process(side, RowKind.from_short(kind), row)
        )
        assert ours == expected


def test_each_step_describes_its_scala_twin_for_the_jvm_engine():
    # The jvm engine's RegularJoin*Logic read these fields; the class follows the step.
    spec = JoinSpec(JoinType.LEFT, [0], [0], 2, 2, [0], [1])
    schema = StructType([StructField("k", IntegerType()), StructField("v", IntegerType())])
    steps = [
        _RegularJoinLogic(spec, (schema, schema), (True, True)),
        _RegularJoinCandidateLogic(spec, (schema, schema), (True, True)),
        _RegularJoinAssociateLogic(spec, (schema, schema), JoinType.LEFT.outer),
    ]
    twins = [step.jvm_logic() for step in steps]
    assert [t.logic_class for t in twins] == [
        "regular_join.RegularJoinLogic",
        "regular_join.RegularJoinCandidateLogic",
        "regular_join.RegularJoinAssociateLogic",
    ]
    assert twins[2].spec == RegularJoinSpec(
        join_type="left",
        layouts=("JoinKeyContainsUniqueKey", "InputSideHasUniqueKey"),
        unique_keys=((0,), (1,)),
        stored=(True, False),
        condition=None,
    )
    assert twins[0].spec.stored == (True, True)
    no_keys = _RegularJoinLogic(JoinSpec(JoinType.INNER, [0], [0], 2, 2), (schema, schema), (True, True)).jvm_logic()
    assert no_keys.spec.unique_keys == (None, None)
    assert no_keys.spec.layouts == ("InputSideHasNoUniqueKey",) * 2


# --- output keys -------------------------------------------------------------------------------


def test_lineitem_left_join_orders_keeps_the_lineitem_key_as_upsert_key():
    unique, upsert = derive_output_keys(
        JoinType.LEFT,
        ["l_orderkey", "l_linenumber", "l_qty"],
        ["o_orderkey", "o_status"],
        [("l_orderkey", "o_orderkey")],
        ["l_orderkey", "l_linenumber"],
        ["o_orderkey"],
    )
    assert ("l_orderkey", "l_linenumber") in upsert
    assert unique == upsert


def test_seed_003_sink_key_is_unique_but_no_upsert_key():
    unique, upsert = derive_output_keys(
        JoinType.INNER, ["id", "level"], ["s2_id", "attr"], [("level", "s2_id")], ["id"], ["s2_id"]
    )
    assert unique == (("id",), ("id", "s2_id"))
    assert upsert == ()


def test_keys_of_outer_semi_and_keyless_inputs():
    args = (["k", "a"], ["rk", "b"], [("k", "rk")], ["k"], ["rk"])
    # Both sides unique on the join key: each side's key survives unless that side is null-padded.
    assert derive_output_keys(JoinType.INNER, *args)[0] == (("k",), ("rk",), ("k", "rk"))
    assert derive_output_keys(JoinType.LEFT, *args)[0] == (("k",), ("k", "rk"))
    assert derive_output_keys(JoinType.FULL, *args)[0] == (("k", "rk"),)
    assert derive_output_keys(JoinType.SEMI, *args) == ((("k",),), (("k",),))
    assert derive_output_keys(JoinType.INNER, ["k", "a"], ["rk", "b"], [("k", "rk")], None, ["rk"]) == ((), ())


# --- arguments (analysis only; no query runs) ------------------------------------------------------

A = StructType([StructField("a1", IntegerType()), StructField("a2", IntegerType())])
B = StructType([StructField("b1", IntegerType()), StructField("b2", StringType())])


@pytest.fixture
def inputs(spark, tmp_path):
    return changelog_file_stream(spark, tmp_path / "a", A, [[]]), changelog_file_stream(spark, tmp_path / "b", B, [[]])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"how": "outer"}, "unknown join type 'outer'"),
        ({"on": [("a1", "nope")]}, r"right join key column\(s\) \['nope'\]"),
        ({"on": "a1"}, "on must be a list"),
        ({"condition": "a2 > nope"}, "not a valid Spark SQL predicate"),
        ({"condition": "a2 + 1"}, "is int, not boolean"),
        ({"state_ttl_ms": 0}, "state_ttl_ms must be a positive"),
        ({"left_unique_key": ["zz"]}, r"left_unique_key column\(s\) \['zz'\]"),
    ],
)
def test_bad_arguments_are_refused(inputs, kwargs, message):
    arguments = {"on": [("a1", "b1")], **kwargs}
    with pytest.raises(ValidationError, match=message):
        regular_join(*inputs, **arguments)


def test_shared_and_reserved_column_names_are_refused(inputs):
    left, right = inputs
    with pytest.raises(ValidationError, match=r"share the column name\(s\) \['a1'\]"):
        regular_join(left, right.withColumnRenamed("b1", "a1"), on=[("a1", "a1")])
    with pytest.raises(ValidationError, match="reserved"):
        regular_join(left.withColumnRenamed("a2", "_a2"), right, on=[("a1", "b1")])
    with pytest.raises(ValidationError, match="not a changelog"):
        regular_join(left.drop("_seq"), right, on=[("a1", "b1")])


def test_the_log_says_where_the_engine_evaluates_a_residual(inputs, caplog, engine):
    # The plan's EXPLAIN shows the join (streamjoin.planner.plan); the operator says only what the engine chose.
    caplog.set_level(logging.INFO, logger="streamjoin.runtime.regular_join")
    keyed = regular_join(*inputs, on=[("a1", "b1")], how="left", condition="a2 > b1", left_unique_key=["a1"])
    residual = (
        "in the join, on each equi-matching pair"
        if engine == "jvm"
        else "Spark filter on candidate pairs between two stateful steps"
    )
    assert caplog.messages[-1] == f"regular join residual predicate 'a2 > b1': {residual}"
    regular_join(*inputs, on=[], how="inner", condition="a2 > b1")
    inner = "in the join, on each equi-matching pair" if engine == "jvm" else "Spark filter on the joined rows"
    assert caplog.messages[-1].endswith(inner)
    assert keyed.columns == ["a1", "a2", "b1", "b2", "_rowkind", "_seq"]
    assert regular_join(*inputs, on=[("a1", "b1")], how="anti").columns == ["a1", "a2", "_rowkind", "_seq"]


@pytest.mark.parametrize("engine", ["jvm"], indirect=True)
def test_a_residual_the_jvm_join_cannot_evaluate_runs_as_a_spark_filter(spark, inputs, caplog, engine):
    # A Python UDF runs in Spark's own Python operator: the join leaves it to a Spark filter, as on the python engine.
    spark.udf.register("plus_one", lambda v: None if v is None else v + 1, IntegerType())
    caplog.set_level(logging.INFO, logger="streamjoin.runtime")
    regular_join(*inputs, on=[("a1", "b1")], how="left", condition="plus_one(a2) > b1")
    assert "holds" in caplog.messages[-2] and "a Spark filter evaluates it" in caplog.messages[-2]
    assert caplog.messages[-1].endswith(": Spark filter on candidate pairs between two stateful steps")
    regular_join(*inputs, on=[("a1", "b1")], how="left", condition="a2 + 1 > b1")
    assert caplog.messages[-1].endswith(": in the join, on each equi-matching pair")


@pytest.mark.parametrize("engine", ["jvm"], indirect=True)
@pytest.mark.parametrize(
    "clock", ["current_timestamp()", "now()", "localtimestamp()", "current_date()", "current_time(3)"]
)
def test_a_residual_reading_the_current_time_runs_as_a_spark_filter(spark, inputs, caplog, engine, clock):
    # Spark gives the current time the micro-batch's (each batch's plan); a predicate bound once with the join would
    # keep the query's start for every batch.
    caplog.set_level(logging.INFO, logger="streamjoin.runtime")
    regular_join(*inputs, on=[("a1", "b1")], how="left", condition=f"a2 > b1 OR {clock} IS NULL")
    assert "holds" in caplog.messages[-2] and "a Spark filter evaluates it" in caplog.messages[-2]
    assert caplog.messages[-1].endswith(": Spark filter on candidate pairs between two stateful steps")
