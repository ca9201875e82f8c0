"""Mini-batch group aggregation (``SET 'table.exec.mini-batch.enabled' = 'true'``, docs/semantics.md §6.1).

Planned from SQL and replayed through Spark: at one arrival per micro-batch a bundle is one change, so
on the group-aggregate cases of ``tests/data/flink-diff`` (generated and invalid-changelog ones) the
changelog must still be Flink's per-change one; at seven arrivals per micro-batch the cases of
``tests/data/flink-mini-batch`` must give what Flink gave for them in mini-batch mode with bundles of
seven rows: the final rows, and each group's changes in order.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import jvm_only
from flink_diff.compare import difference
from flink_diff.generate import MINI_BATCH_SETUP

from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner.script import plan_script
from streamjoin.testing.replay import load_case_file, replay_case

DIFF_DIR = Path(__file__).parent / "data" / "flink-diff"
CASES = sorted(p.stem for p in (DIFF_DIR / "cases").glob("*group_agg*.json"))
MINI_BATCH_DIR = Path(__file__).parent / "data" / "flink-mini-batch"
MINI_BATCH_CASES = sorted(p.stem for p in (MINI_BATCH_DIR / "cases").glob("*.json"))
DDL = "CREATE TABLE t (k STRING, v INT) WITH ('connector' = 'values');\n"


def test_the_setting_marks_the_group_aggregate_in_explain():
    explain = plan_script(DDL + MINI_BATCH_SETUP + ";\nSELECT k, SUM(v) FROM t GROUP BY k;").statements[0].explain
    [agg] = [line for line in explain.splitlines() if "GroupAggregate(" in line]
    assert "miniBatch=[true]" in agg
    off = plan_script(DDL + "SET 'table.exec.mini-batch.enabled' = 'FALSE';\nSELECT k, SUM(v) FROM t GROUP BY k;")
    assert "miniBatch" not in off.statements[0].explain and not off.mini_batch


def test_a_bad_value_or_a_mini_batch_option_we_do_not_have_fails_naming_the_line():
    with pytest.raises(
        ValidationError,
        match=r"<sql>:2:.*'table.exec.mini-batch.enabled' takes 'true' or 'false', not 'yes' \[rule: settings\]",
    ):
        plan_script(DDL + "SET 'table.exec.mini-batch.enabled' = 'yes';\nSELECT k, SUM(v) FROM t GROUP BY k;")
    with pytest.raises(UnsupportedPlanError, match=r"'table.exec.mini-batch.allow-latency' is not supported"):
        plan_script(DDL + "SET 'table.exec.mini-batch.allow-latency' = '1 s';\nSELECT k, SUM(v) FROM t GROUP BY k;")


def _replayed(spark, name: str, rows: int, work: Path) -> tuple[dict, dict]:
    case = load_case_file(DIFF_DIR / "cases" / f"{name}.json")
    case = dataclasses.replace(case, setup=[MINI_BATCH_SETUP, *case.setup])
    flink = json.loads((DIFF_DIR / "expected" / f"{name}.json").read_text())
    return flink, replay_case(spark, case, work, micro_batch_rows=rows)


@jvm_only  # the python engine's mini-batch changelog equals the jvm one's: test_group_aggregate_engines.py
@pytest.mark.parametrize("name", CASES)
def test_one_arrival_per_micro_batch_gives_flinks_changelog(spark, engine, tmp_path, name):
    flink, ours = _replayed(spark, name, 1, tmp_path)
    assert difference(flink, ours) is None


def _per_group(changelog: list[list]) -> dict:
    """Each group's changes in order (the first output column is the group key). Flink emits a bundle's groups
    in its HashMap's order, streamjoin in the order of their last row: only each group's own order is kept."""
    groups: dict = {}
    for change in changelog:
        groups.setdefault(json.dumps(change[1]), []).append(change)
    return groups


def test_there_are_cases_and_flink_mini_batch_references():
    assert len(CASES) >= 6 and len(MINI_BATCH_CASES) >= 8
    assert sorted(p.stem for p in (MINI_BATCH_DIR / "expected").glob("*.json")) == MINI_BATCH_CASES


@pytest.mark.parametrize("name", MINI_BATCH_CASES)
def test_seven_arrivals_per_micro_batch_give_flinks_seven_row_mini_batches(spark, engine, tmp_path, name):
    """Flink ran these with ``table.exec.mini-batch.size`` 7 (bundles of 7 rows; README there)."""
    case = load_case_file(MINI_BATCH_DIR / "cases" / f"{name}.json")
    flink = json.loads((MINI_BATCH_DIR / "expected" / f"{name}.json").read_text())
    ours = replay_case(spark, case, tmp_path, micro_batch_rows=7)
    assert difference(flink, ours, changelog=False) is None
    assert _per_group(ours["changelog"]) == _per_group(flink["changelog"])
