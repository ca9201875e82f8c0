"""How ``make flink-diff`` (tests/flink_diff/run_diff.py) counts a case against ``known_differences.json``.

Small in-memory documents; neither Flink nor Spark runs.
"""

from collections import Counter

import pytest
from flink_diff.run_diff import classify, listed, outcome, reference, reusable, summary_table

CASE = {
    "name": "semi_exists_7_0001",
    "tables": [{"name": "A", "columns": [["a", "INT"]], "rows": [["+I", 1]]}],
    "arrival": ["A"],
    "query": "SELECT a FROM A",
}
FLINK = {"columns": [["a", "INT"]], "changelog": [["+I", 1]], "final": [[1]]}
REORDERED = {"columns": [["a", "INT"]], "changelog": [["+I", 1], ["-D", 1], ["+I", 1]], "final": [[1]]}
LOST = {"columns": [["a", "INT"]], "changelog": [], "final": []}
REFUSED = {"error": "UnsupportedPlanError: no"}


@pytest.mark.parametrize(
    "ours_1, ours_7, kind",
    [
        (FLINK, FLINK, "equal"),
        (REORDERED, FLINK, "changelog"),
        (FLINK, LOST, "final"),
        (REFUSED, FLINK, "refused"),
    ],
)
def test_outcome_of_a_case(ours_1, ours_7, kind):
    assert outcome(FLINK, ours_1, ours_7)[0] == kind


def test_outcome_of_a_chain_compares_each_keys_changes_at_the_larger_batch_sizes():
    columns = [["t", "VARCHAR"], ["n", "BIGINT"]]
    flink = {
        "columns": columns,
        "changelog": [["+I", "x", 1], ["+I", "y", 1], ["-U", "x", 1], ["+U", "x", 2]],
        "final": [["x", 2], ["y", 1]],
    }
    interleaved = dict(flink, changelog=[["+I", "x", 1], ["-U", "x", 1], ["+U", "x", 2], ["+I", "y", 1]])
    swapped = dict(flink, changelog=[["+I", "y", 1], ["+I", "x", 1], ["+U", "x", 2], ["-U", "x", 1]])
    assert outcome(flink, flink, interleaved, upsert_key=["t"], more={100: interleaved}) == ("equal", None)
    kind, detail = outcome(flink, flink, interleaved, upsert_key=["t"], more={100: swapped})
    assert kind == "changelog" and detail.startswith("at 100 rows per micro-batch: changelog: key ['t']=[\"x\"]")
    assert outcome(flink, flink, swapped)[0] == "equal"  # without an upsert key: final rows only at 7
    assert outcome(flink, flink, flink, more={100: LOST})[0] == "final"
    assert outcome(flink, interleaved, flink, upsert_key=["t"])[0] == "changelog"  # at one row: the whole changelog
    assert outcome(flink, interleaved, flink, upsert_key=["t"], per_key_at_one=True) == ("equal", None)
    kind, detail = outcome(flink, swapped, flink, upsert_key=["t"], per_key_at_one=True)
    assert kind == "changelog" and detail.startswith("at 1 row per micro-batch: changelog: key")


@pytest.mark.parametrize(
    "kind, entry, expected",
    [
        ("equal", None, ("equal", False)),
        ("flink-refused", None, ("flink-refused", False)),
        ("changelog", None, ("changelog", True)),
        ("final", None, ("final", True)),
        ("refused", None, ("refused", True)),
        ("changelog", {"differs_in": "changelog"}, ("documented", False)),
        ("final", {"differs_in": "final"}, ("documented", False)),
        ("final", {"differs_in": "changelog"}, ("final", True)),  # listed, now differs otherwise
        ("refused", {"differs_in": "changelog"}, ("refused", True)),
        ("equal", {"differs_in": "changelog"}, ("equal", True)),  # fixed: it must leave the list
    ],
)
def test_classify(kind, entry, expected):
    assert classify(kind, entry) == expected


def test_a_listing_applies_only_to_the_stored_case_of_that_name():
    known = {
        CASE["name"]: {"differs_in": "changelog", "reason": "r"},
        "gone_7_0002": {"differs_in": "final", "reason": "r"},
    }
    stored = {CASE["name"]: dict(CASE, description="kept as a regression case")}
    assert listed(known, {CASE["name"]: CASE}, stored) == {CASE["name"]: known[CASE["name"]]}
    other = dict(CASE, query="SELECT a + 1 FROM A")  # same name, another case (the generator changed)
    assert listed(known, {CASE["name"]: other}, stored) == {}
    assert listed(known, {}, stored) == {}


def test_summary_has_a_documented_column_and_a_total():
    text = summary_table({"semi_exists": Counter(equal=5, documented=1), "join_full": Counter(changelog=2)})
    header, *rows, total = text.splitlines()
    assert header.split() == ["family", "equal", "documented", "changelog", "final", "refused", "flink-refused"]
    assert total.split() == ["total", "5", "1", "2", "0", "0", "0"]
    assert [r.split()[0] for r in rows] == ["join_full", "semi_exists"]


def test_a_flink_output_is_reused_only_for_the_unchanged_case_it_was_written_after(tmp_path):
    import os

    case, output = tmp_path / "c.json", tmp_path / "flink" / "c.json"
    assert not reusable(case, "{}\n", output)  # nothing yet
    case.write_text("{}\n")
    output.parent.mkdir()
    output.write_text("{}\n")
    os.utime(case, (1_000, 1_000))
    os.utime(output, (2_000, 2_000))
    assert reusable(case, "{}\n", output)
    assert not reusable(case, '{"query": "other"}\n', output)  # the generator changed the case
    os.utime(output, (500, 500))
    assert not reusable(case, "{}\n", output)  # written before the case file: another case's output


def test_a_failing_case_is_judged_by_flinks_rerun_only_when_flinks_output_changed():
    # The first run let a row of one input overtake the other input's (the machine was loaded): the slower
    # rerun's changelog differs, so it is the reference.
    assert reference(REORDERED, FLINK) == (FLINK, True)
    # Flink gives the same changelog again: the difference stands against the first run.
    again = dict(REORDERED, flink_version="2.3.0")
    assert reference(REORDERED, again) == (REORDERED, False)
    # A rerun that fails where the first ran is a changed output too.
    assert reference(FLINK, REFUSED) == (REFUSED, True)
