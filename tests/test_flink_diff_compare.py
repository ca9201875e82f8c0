"""Comparing a changelog key by key (``tests/flink_diff/compare.py``): small in-memory documents, no Flink or Spark."""

import pytest
from flink_diff.compare import difference, per_key, per_key_difference

COLUMNS = [["t", "VARCHAR"], ["n", "BIGINT"], ["s", "INT"]]


def _doc(changelog: list[list], final: list[list]) -> dict:
    return {"columns": COLUMNS, "changelog": changelog, "final": final}


# Two groups, x and y: Flink's order, and the same changes with the groups interleaved otherwise.
FLINK = _doc(
    [["+I", "x", 1, 5], ["+I", "y", 1, 7], ["-U", "x", 1, 5], ["+U", "x", 2, 9], ["-D", "y", 1, 7]], [["x", 2, 9]]
)
INTERLEAVED = _doc(
    [["+I", "x", 1, 5], ["-U", "x", 1, 5], ["+U", "x", 2, 9], ["+I", "y", 1, 7], ["-D", "y", 1, 7]], [["x", 2, 9]]
)
# One group's own changes out of order: the same final rows, but x's +U comes before its -U.
SWAPPED = _doc(
    [["+I", "x", 1, 5], ["+I", "y", 1, 7], ["+U", "x", 2, 9], ["-U", "x", 1, 5], ["-D", "y", 1, 7]], [["x", 2, 9]]
)


def test_per_key_splits_the_changelog_into_each_keys_changes_in_order():
    groups = per_key(FLINK["changelog"], COLUMNS, ["t"])
    assert groups == {
        '["x"]': [["+I", "x", 1, 5], ["-U", "x", 1, 5], ["+U", "x", 2, 9]],
        '["y"]': [["+I", "y", 1, 7], ["-D", "y", 1, 7]],
    }
    assert list(per_key(FLINK["changelog"], COLUMNS, [])) == ["[]"]  # a global aggregate: one key
    assert per_key(FLINK["changelog"], COLUMNS, ["n", "t"])['[1, "y"]'] == [["+I", "y", 1, 7], ["-D", "y", 1, 7]]
    with pytest.raises(ValueError, match="not among the columns"):
        per_key(FLINK["changelog"], COLUMNS, ["region"])


def test_other_interleavings_of_the_keys_are_equal_per_key_but_not_as_a_whole():
    assert per_key_difference(FLINK, INTERLEAVED, ["t"]) is None
    assert difference(FLINK, INTERLEAVED).startswith("changelog: first difference at change 1")
    assert per_key_difference(FLINK, INTERLEAVED, []) is not None  # one key: the whole changelog


def test_a_keys_own_changes_out_of_order_differ():
    found = per_key_difference(FLINK, SWAPPED, ["t"])
    assert found == (
        "changelog: key ['t']=[\"x\"]: first difference at change 1 of the key's: "
        "[['-U', 'x', 1, 5], ['+U', 'x', 2, 9]] != [['+U', 'x', 2, 9], ['-U', 'x', 1, 5]] "
        "(3 vs 3 changes)"
    )


def test_a_missing_change_of_a_key_or_other_final_rows_differ():
    fewer = _doc(FLINK["changelog"][:2] + FLINK["changelog"][4:], [])
    assert per_key_difference(FLINK, fewer, ["t"]).startswith("final: ")
    # Same final rows, but an extra retraction and re-insertion of y: only y's changes differ.
    extra = _doc(FLINK["changelog"] + [["+I", "y", 1, 7], ["-D", "y", 1, 7]], [["x", 2, 9]])
    assert per_key_difference(FLINK, extra, ["t"]).startswith(
        "changelog: key ['t']=[\"y\"]: first difference at change 2"
    )


def test_within_runs_absorbs_the_order_of_one_keys_run_of_one_rowkind():
    flink = _doc([["+I", "x", 1, 5], ["+I", "x", 2, 6]], [["x", 1, 5], ["x", 2, 6]])
    ours = _doc([["+I", "x", 2, 6], ["+I", "x", 1, 5]], [["x", 1, 5], ["x", 2, 6]])
    assert per_key_difference(flink, ours, ["t"]) is not None
    assert per_key_difference(flink, ours, ["t"], within_runs=True) is None


def test_a_refusal_is_a_difference_and_two_refusals_are_not():
    refused = {"error": "UnsupportedPlanError: no"}
    assert per_key_difference(FLINK, refused, ["t"]).startswith("refused: only actual refuses")
    assert per_key_difference(refused, refused, ["t"]) is None
