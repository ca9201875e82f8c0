"""Generated cases replayed through streamjoin equal what Apache Flink 2.3.0 produced for them, or differ as listed.

The cases of ``tests/data/flink-diff/cases`` come from ``tests/flink_diff/generate.py`` (fixed seed) or were
kept as regression cases; their Flink outputs (``expected/``) from ``tests/flink_diff/run_flink.py`` (README
there). Every case is replayed as ``test_replay.py`` replays the shared cases (``streamjoin.testing.replay``),
at 1 and at 7 arrivals per micro-batch. At 1 arrival per micro-batch the final rows and the changelog are
compared with Flink's (for joins and event-time operators up to the order within runs of one RowKind,
``generate.ORDER_WITHIN_RUNS_FAMILIES``); at 7 the final rows. A case in ``known_differences.json`` must still differ in the way
listed (``refused``, ``final`` or ``changelog``): a fixed difference fails the test until it leaves the list.

Every replayed case costs Spark about one second per micro-batch on the reference machine (2 cores), and the
114 generated cases of seed 13 have about 1,000 one-row micro-batches: all of them take 9–15 minutes. So the
suite replays every regression or hand-written case and one generated case per family (the lowest index);
``STREAMJOIN_FLINK_DIFF=all`` (``make test-flink-diff``) replays every stored case.
"""

import json
import os
import time
from pathlib import Path

import pytest

from flink_diff.compare import difference
from flink_diff.generate import FAMILIES, ORDER_WITHIN_RUNS_FAMILIES, family_of
from streamjoin.testing.replay import replay_cases

DIFF_DIR = Path(__file__).parent / "data" / "flink-diff"
ALL_NAMES = sorted(p.stem for p in (DIFF_DIR / "cases").glob("*.json"))
GENERATED_SEED = "13"  # the seed of the generated set (tests/data/flink-diff/README.md)
KNOWN = json.loads((DIFF_DIR / "known_differences.json").read_text())
_RUNS: dict[int, dict] = {}


def _generated(name: str) -> bool:
    return name.rsplit("_", 2)[1:2] == [GENERATED_SEED] and family_of(name) in FAMILIES


def _suite_cases(names: list[str]) -> list[str]:
    """Every case that is not of the generated set, and the generated case of lowest index per family."""
    first: dict[str, str] = {}
    for name in names:
        if _generated(name):
            first.setdefault(family_of(name), name)
    return sorted({n for n in names if not _generated(n)} | set(first.values()))


NAMES = ALL_NAMES if os.environ.get("STREAMJOIN_FLINK_DIFF") == "all" else _suite_cases(ALL_NAMES)


def _flink(name: str) -> dict:
    return json.loads((DIFF_DIR / "expected" / f"{name}.json").read_text())


def _within_runs(name: str) -> bool:
    # A hand-written regression case has no family: its changelog is compared in exact order.
    return family_of(name) in ORDER_WITHIN_RUNS_FAMILIES


def _replayed(rows: int, spark, tmp_path_factory) -> dict:
    """Case name → streamjoin's result document at ``rows`` arrivals per micro-batch (once per module)."""
    if rows not in _RUNS:
        paths = [DIFF_DIR / "cases" / f"{n}.json" for n in NAMES]
        start = time.monotonic()
        _RUNS[rows] = replay_cases(spark, paths, tmp_path_factory.mktemp(f"diff-{rows}"), micro_batch_rows=rows)
        print(f"\nreplayed {len(paths)} generated cases at {rows} row(s) per micro-batch in "
              f"{time.monotonic() - start:.0f} s")
    return _RUNS[rows]


@pytest.fixture(scope="module")
def one_row(spark, tmp_path_factory):
    return _replayed(1, spark, tmp_path_factory)


@pytest.fixture(scope="module")
def seven_rows(spark, tmp_path_factory):
    return _replayed(7, spark, tmp_path_factory)


def test_there_are_at_least_100_generated_cases_each_with_its_flink_output():
    assert sum(map(_generated, ALL_NAMES)) >= 100
    assert {family_of(n) for n in NAMES if _generated(n)} == set(FAMILIES)  # the suite covers every family
    assert sorted(p.stem for p in (DIFF_DIR / "expected").glob("*.json")) == ALL_NAMES
    assert set(KNOWN) <= set(ALL_NAMES), set(KNOWN) - set(ALL_NAMES)
    assert all(v["differs_in"] in ("refused", "final", "changelog") and v["reason"] for v in KNOWN.values())


@pytest.mark.parametrize("name", NAMES)
def test_case_equals_flink_or_differs_as_listed(one_row, name):
    found = difference(_flink(name), one_row[name], within_runs=_within_runs(name))
    kind = found.split(":")[0] if found else None
    if name in KNOWN:
        assert kind == KNOWN[name]["differs_in"], (
            f"listed as differing in {KNOWN[name]['differs_in']} ({KNOWN[name]['reason']}), now: "
            f"{found or 'equal to Flink'}")
    else:
        assert kind is None, found


@pytest.mark.parametrize("name", NAMES)
def test_final_rows_at_seven_rows_per_micro_batch_equal_flinks(seven_rows, name):
    found = difference(_flink(name), seven_rows[name], changelog=False)
    if KNOWN.get(name, {}).get("differs_in") in ("refused", "final"):
        assert found is not None and found.split(":")[0] == KNOWN[name]["differs_in"]
    else:
        assert found is None, found
