"""Chains of operators replayed through streamjoin equal what Apache Flink 2.3.0 produced for them.

The ``chain_*`` cases of ``tests/data/flink-diff`` (``generate.py --chains``, README there) feed one stateful
operator's changelog into another: regular joins into group aggregates (over keyed, unkeyed and upsert
inputs), an aggregate into a join, two joins into an aggregate, a deduplication into a join into an aggregate,
UNION ALL into an aggregate, a LEFT join's padded rows into a global aggregate, temporal and interval joins into
an aggregate. Each is replayed (``streamjoin.testing.replay``) at 1, 7 and 100 arrivals per micro-batch on
both engines, and compared with Flink's output:

- at every size the final rows;
- at 1 arrival per micro-batch the whole changelog (up to the order within runs of one RowKind for the families
  with a join, ``generate.ORDER_WITHIN_RUNS_FAMILIES``: a join emits one row's matches in Flink's HashMap order;
  key by key for ``generate.PER_KEY_FAMILIES``, whose order across keys Flink does not keep from run to run);
- at 7 and 100 each upsert key's changes in order (the case's ``upsert_key``, ``compare.per_key_difference``):
  the changes of one micro-batch are one bundle, but every operator still emits per change, so each key's
  changes must be Flink's; different keys may interleave otherwise. A case without an upsert key: final rows.

A case in ``known_differences.json`` must still differ as listed there (``differs_in``; an optional
``micro_batch_rows`` limits the listing to those sizes).

``make test`` replays on the ``jvm`` engine one short case of each family (:func:`_fast`) at 7 (but the
~100-change family: 25 micro-batches) and at 100 arrivals per micro-batch (one or two micro-batches each), and
:data:`ONE_ROW_FAST` at one; every other case, size and engine is marked ``slow`` (``make test-all``).
``STREAMJOIN_FLINK_DIFF=all`` (``make test-flink-diff``) runs them all. A group (engine, size) replays only
the cases of its selected tests, once.
"""

import json
import os
from pathlib import Path

import pytest
from flink_diff.compare import difference, per_key_difference
from flink_diff.engine_replay import replay_on_engine
from flink_diff.generate import (
    CHAIN_CASES,
    CHAIN_FAMILIES,
    FAMILIES,
    ORDER_WITHIN_RUNS_FAMILIES,
    PER_KEY_FAMILIES,
    family_of,
    generate_cases,
    generate_chain_case,
    generate_chain_cases,
)

DIFF_DIR = Path(__file__).parent / "data" / "flink-diff"
NAMES = sorted(p.stem for p in (DIFF_DIR / "cases").glob("chain_*.json"))
CASES = {name: json.loads((DIFF_DIR / "cases" / f"{name}.json").read_text()) for name in NAMES}
KNOWN = json.loads((DIFF_DIR / "known_differences.json").read_text())
SIZES = (1, 7, 100)
ENGINES = ("jvm", "python")
ALL_RUNS = os.environ.get("STREAMJOIN_FLINK_DIFF") == "all"
_RUNS: dict[tuple[str, int], dict] = {}


def _flink(name: str) -> dict:
    return json.loads((DIFF_DIR / "expected" / f"{name}.json").read_text())


def _fast(family: str) -> str:
    """The family's case for ``make test``: of those not in ``known_differences.json`` (any, when all are) and of at
    most three micro-batches of seven rows (any, when none is), the one with the most changes from Flink per arrival."""
    names = [n for n in NAMES if family_of(n) == family]
    names = [n for n in names if n not in KNOWN] or names
    short = [n for n in names if len(CASES[n]["arrival"]) <= 21] or names
    return max(short, key=lambda n: (len(_flink(n).get("changelog") or []) / len(CASES[n]["arrival"]), n))


#: The one-row replays of ``make test``: a LEFT join grouped by its padded side, and a LEFT join's padded rows into a
#: global aggregate.
ONE_ROW_FAST = (_fast("chain_left_agg_by_right"), _fast("chain_left_null_agg"))
#: The cases of ``make test`` per micro-batch size (jvm only; everything else is ``slow``): one per family at 7
#: (but the ~100-change family) and at 100.
FAST = {
    1: set(ONE_ROW_FAST),
    7: {_fast(f) for f in CHAIN_FAMILIES if f != "chain_join_agg_large"},
    100: {_fast(f) for f in CHAIN_FAMILIES},
}


def _found(name: str, rows: int, ours: dict) -> str | None:
    """The first difference from Flink's output of ``ours`` (streamjoin's at ``rows`` per micro-batch), as the
    module docstring says it is compared at that size."""
    within_runs = family_of(name) in ORDER_WITHIN_RUNS_FAMILIES
    key = CASES[name].get("upsert_key")
    if rows == 1 and family_of(name) not in PER_KEY_FAMILIES:
        return difference(_flink(name), ours, within_runs=within_runs)
    if key is None:
        return difference(_flink(name), ours, changelog=False)
    return per_key_difference(_flink(name), ours, key, within_runs=within_runs)


def _selected(request, engine: str, rows: int) -> list[str]:
    """The cases of the selected tests of ``request``'s test function on ``engine`` at ``rows`` (``-m``, ``-k``,
    xdist)."""
    test = request.node.originalname
    return sorted(
        {
            item.callspec.params["name"]
            for item in request.session.items
            if getattr(item, "originalname", None) == test
            and item.callspec.params["engine"] == engine
            and item.callspec.params["rows"] == rows
        }
    )


def _replayed(engine: str, rows: int, request, spark, tmp_path_factory) -> dict:
    """Case name → streamjoin's result document on ``engine`` at ``rows`` arrivals per micro-batch (once per module)."""
    if (engine, rows) not in _RUNS:
        paths = [DIFF_DIR / "cases" / f"{n}.json" for n in _selected(request, engine, rows)]
        _RUNS[engine, rows] = replay_on_engine(
            spark, engine, rows, paths, tmp_path_factory.mktemp(f"chains-{engine}-{rows}"), "chain cases"
        )
    return _RUNS[engine, rows]


def _params() -> list:
    """``(engine, rows, name)``, each in the xdist group that replays its engine at its size (tests/conftest.py)."""
    return [
        pytest.param(
            engine,
            rows,
            name,
            id=f"{engine}-{rows}-{name}",
            marks=[
                pytest.mark.xdist_group(f"flink_diff_chains_{engine}_{rows}"),
                *([] if engine == "jvm" and name in FAST[rows] or ALL_RUNS else [pytest.mark.slow]),
            ],
        )
        for engine in ENGINES
        for rows in SIZES
        for name in NAMES
    ]


def test_there_are_chain_cases_of_every_family_each_with_its_flink_output():
    assert len(NAMES) >= 30 and {family_of(n) for n in NAMES} == set(CHAIN_FAMILIES)
    assert sorted(p.stem for p in (DIFF_DIR / "expected").glob("chain_*.json")) == NAMES
    for name in NAMES:
        flink = _flink(name)
        assert not flink.get("error"), f"{name}: Flink refuses it: {flink['error']}"
        names = [c for c, _ in flink["columns"]]
        assert set(CASES[name].get("upsert_key", [])) <= set(names), name
        assert len(names) == len(set(names)), name
    for rows, names in FAST.items():
        assert names <= set(NAMES) and all(len(CASES[n]["arrival"]) <= 3 * rows or rows == 1 for n in names), rows
    for name, entry in KNOWN.items():
        if name.startswith("chain_"):
            assert name in CASES and entry["differs_in"] in ("refused", "final", "changelog") and entry["reason"]
            assert set(entry.get("micro_batch_rows", SIZES)) <= set(SIZES)


def test_the_generator_still_gives_the_stored_cases_byte_for_byte():
    """Regenerating seed 13 (README) must not change a stored case: the chain families and the operator families;
    nor regenerating a chain kept from another seed's run (``<family>_<seed>_<index>``)."""
    stored = DIFF_DIR / "cases"
    kept = [n for n in NAMES if not n.endswith(tuple(f"_13_{i:04d}" for i in range(CHAIN_CASES)))]
    others = [generate_chain_case(int(n.split("_")[-2]), int(n.split("_")[-1])) for n in kept]
    for case in [*generate_cases(len(FAMILIES) * 6, 13), *generate_chain_cases(CHAIN_CASES, 13), *others]:
        assert (stored / f"{case['name']}.json").read_text() == json.dumps(case, indent=1) + "\n", case["name"]
    assert len(NAMES) == CHAIN_CASES + len(kept)


@pytest.mark.parametrize("engine, rows, name", _params())
def test_chain_case_equals_flink_or_differs_as_listed(request, spark, tmp_path_factory, engine, rows, name):
    found = _found(name, rows, _replayed(engine, rows, request, spark, tmp_path_factory)[name])
    kind = found.split(":")[0] if found else None
    entry = KNOWN.get(name)
    if entry and rows in entry.get("micro_batch_rows", SIZES):
        assert kind == entry["differs_in"], (
            f"now {found or 'equal to Flink'}; listed as differing in {entry['differs_in']} ({entry['reason']})"
        )
    else:
        assert kind is None, found
