"""Generated cases replayed through streamjoin equal what Apache Flink 2.3.0 produced for them, or differ as listed.

The cases of ``tests/data/flink-diff/cases`` come from ``tests/flink_diff/generate.py`` (fixed seed) or were
kept as regression cases (the chains of operators, ``chain_*``, are ``test_flink_diff_chains.py``'s); their Flink
outputs (``expected/``) from ``tests/flink_diff/run_flink.py`` (README
there). Every case is replayed as ``test_replay.py`` replays the shared cases (``streamjoin.testing.replay``),
at 1 and at 7 arrivals per micro-batch. At 1 arrival per micro-batch the final rows and the changelog are
compared with Flink's (for joins and event-time operators up to the order within runs of one RowKind,
``generate.ORDER_WITHIN_RUNS_FAMILIES``); at 7 the final rows. A case in ``known_differences.json`` must still differ in
the way
listed (``refused``, ``final`` or ``changelog``): a fixed difference fails the test until it leaves the list.

Every case runs on both operator engines, at a cost of about one second of Spark per micro-batch on the
reference machine (2 cores); the 114 generated cases of seed 13 have about 1,000 one-row micro-batches. So
``make test`` replays, on the ``jvm`` engine, every regression or hand-written case and the first
:data:`PER_FAMILY` generated cases of each family at one row per micro-batch, and every regression case and
the first generated case per family at 7; the other cases are marked ``slow`` (``make test-all`` replays
every stored case on ``jvm`` at 1 and 7, and on ``python`` the regression cases and one generated case per
family at one row; ``make test`` holds the python engine's changelogs equal to the jvm engine's with the
in-process differential tests, ``tests/test_engines_property.py`` and the ``*_engines`` tests).
``STREAMJOIN_FLINK_DIFF=all`` (``make test-flink-diff``) replays every stored case on both, at 1 and 7.
A group replays only the cases of its tests that were selected, once.
"""

import json
import os
from pathlib import Path

import pytest
from flink_diff.compare import difference
from flink_diff.engine_replay import replay_on_engine
from flink_diff.generate import (
    FAMILIES,
    ORDER_WITHIN_RUNS_FAMILIES,
    RANK_FAMILIES,
    WINDOW_CHAIN_FAMILIES,
    WINDOW_FAMILIES,
    WINDOW_GROUPING_FAMILIES,
    WINDOW_JOIN_FAMILIES,
    WINDOW_RANK_FAMILIES,
    WINDOW_SESSION_FAMILIES,
    family_of,
)

DIFF_DIR = Path(__file__).parent / "data" / "flink-diff"
#: Every stored case but the chains of operators (``chain_*``: ``test_flink_diff_chains.py`` replays those).
ALL_NAMES = sorted(p.stem for p in (DIFF_DIR / "cases").glob("*.json") if not p.stem.startswith("chain_"))
GENERATED_SEED = "13"  # the seed of the generated set (tests/data/flink-diff/README.md)
#: The families of the generated set: the single operators, the window aggregates, the window Top-N, the window
#: joins, the session window aggregates, the window aggregates with grouping sets, the chains of event-time operators
#: and the Top-N.
GENERATED_FAMILIES = [
    *FAMILIES,
    *WINDOW_FAMILIES,
    *WINDOW_RANK_FAMILIES,
    *WINDOW_JOIN_FAMILIES,
    *WINDOW_SESSION_FAMILIES,
    *WINDOW_GROUPING_FAMILIES,
    *WINDOW_CHAIN_FAMILIES,
    *RANK_FAMILIES,
]
KNOWN = json.loads((DIFF_DIR / "known_differences.json").read_text())
_RUNS: dict[tuple[str, int], dict] = {}


def _generated(name: str) -> bool:
    return name.rsplit("_", 2)[1:2] == [GENERATED_SEED] and family_of(name) in GENERATED_FAMILIES


#: Generated cases per family that ``make test`` replays on jvm at one row per micro-batch (module docstring).
PER_FAMILY = 1


def _suite_cases(names: list[str], per_family: int = 1) -> list[str]:
    """Every case that is not of the generated set, and the ``per_family`` generated cases of lowest index per
    family."""
    first: dict[str, list[str]] = {}
    for name in names:
        if _generated(name):
            first.setdefault(family_of(name), []).append(name)
    return sorted({n for n in names if not _generated(n)} | {n for group in first.values() for n in group[:per_family]})


ALL_RUNS = os.environ.get("STREAMJOIN_FLINK_DIFF") == "all"
#: The cases each engine replays (on python at one row per micro-batch only, unless ALL_RUNS).
ENGINE_NAMES = {"jvm": ALL_NAMES, "python": ALL_NAMES if ALL_RUNS else _suite_cases(ALL_NAMES)}
CASES = [(engine, name) for engine, names in ENGINE_NAMES.items() for name in names]
#: The cases of ``make test`` (the others are ``slow``), per micro-batch size: all on python are ``slow``.
FAST = {1: set(_suite_cases(ALL_NAMES, PER_FAMILY)), 7: set(_suite_cases(ALL_NAMES))}


def _flink(name: str) -> dict:
    return json.loads((DIFF_DIR / "expected" / f"{name}.json").read_text())


def _within_runs(name: str) -> bool:
    # A hand-written regression case has no family: its changelog is compared in exact order, but for the window
    # cases: the windows of several keys that one watermark fires come in the order of Flink's timer queue.
    return family_of(name) in ORDER_WITHIN_RUNS_FAMILIES or name.startswith("window_agg_")


def _selected(request, engine: str) -> list[str]:
    """The cases of the selected tests of ``request``'s test function on ``engine`` (``-m``, ``-k`` and xdist
    applied)."""
    test = request.node.originalname
    return sorted(
        {
            item.callspec.params["name"]
            for item in request.session.items
            if getattr(item, "originalname", None) == test and item.callspec.params["engine"] == engine
        }
    )


def _replayed(engine: str, rows: int, request, spark, tmp_path_factory) -> dict:
    """Case name → streamjoin's result document on ``engine`` at ``rows`` arrivals per micro-batch (once per module)."""
    if (engine, rows) not in _RUNS:
        paths = [DIFF_DIR / "cases" / f"{n}.json" for n in _selected(request, engine)]
        _RUNS[engine, rows] = replay_on_engine(
            spark, engine, rows, paths, tmp_path_factory.mktemp(f"diff-{engine}-{rows}"), "cases"
        )
    return _RUNS[engine, rows]


def test_there_are_at_least_100_generated_cases_each_with_its_flink_output():
    assert sum(map(_generated, ALL_NAMES)) >= 100
    for names in [*ENGINE_NAMES.values(), *FAST.values()]:
        assert {family_of(n) for n in names if _generated(n)} == set(GENERATED_FAMILIES)  # each covers every family
    assert len(FAST[1]) == len(FAST[7]) + len(GENERATED_FAMILIES) * (PER_FAMILY - 1)
    assert (
        sorted(p.stem for p in (DIFF_DIR / "expected").glob("*.json") if not p.stem.startswith("chain_")) == ALL_NAMES
    )
    known = {n for n in KNOWN if not n.startswith("chain_")}
    assert known <= set(ALL_NAMES), known - set(ALL_NAMES)
    assert all(v["differs_in"] in ("refused", "final", "changelog") and v["reason"] for v in KNOWN.values())


def _grouped(cases: list[tuple[str, str]], rows: int) -> list:
    """``(engine, name)`` parameters, each in the xdist group that replays its engine at ``rows``
    (tests/conftest.py)."""
    return [
        pytest.param(
            e,
            n,
            marks=[
                pytest.mark.xdist_group(f"flink_diff_{e}_{rows}"),
                *([pytest.mark.slow] if e == "python" or n not in FAST[rows] else []),
            ],
        )
        for e, n in cases
    ]


@pytest.mark.parametrize("engine, name", _grouped(CASES, 1))
def test_case_equals_flink_or_differs_as_listed(request, spark, tmp_path_factory, engine, name):
    found = difference(
        _flink(name), _replayed(engine, 1, request, spark, tmp_path_factory)[name], within_runs=_within_runs(name)
    )
    kind = found.split(":")[0] if found else None
    if name in KNOWN:
        assert kind == KNOWN[name]["differs_in"], (
            f"listed as differing in {KNOWN[name]['differs_in']} ({KNOWN[name]['reason']}), now: "
            f"{found or 'equal to Flink'}"
        )
    else:
        assert kind is None, found


@pytest.mark.parametrize("engine, name", _grouped([(e, n) for e, n in CASES if e == "jvm" or ALL_RUNS], 7))
def test_final_rows_at_seven_rows_per_micro_batch_equal_flinks(request, spark, tmp_path_factory, engine, name):
    found = difference(_flink(name), _replayed(engine, 7, request, spark, tmp_path_factory)[name], changelog=False)
    if KNOWN.get(name, {}).get("differs_in") in ("refused", "final"):
        assert found is not None and found.split(":")[0] == KNOWN[name]["differs_in"]
    else:
        assert found is None, found
