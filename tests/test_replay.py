"""Every Flink reference case, planned from SQL and run on Spark, reproduces Flink 2.3.0's final result and changelog.

Each case runs as a streaming query through the planner and the runtime operators, fed as Flink was
(``streamjoin.testing.replay``): one, seven and a hundred arrivals per micro-batch (a hundred: every case in one
or two micro-batches) on the ``jvm`` engine, and a hundred on ``python``. All cases share one Spark session. At
one arrival per micro-batch every change is emitted when Flink emits it, so the changelogs are compared too;
at 7 and 100 only the final rows can be. The ``python`` engine's replays (about a second of Spark per
micro-batch) are marked ``slow``: ``make test-all`` runs them, ``make test`` leaves them to the engines' in-process
differential tests (``tests/test_engines_property.py`` and the ``*_engines`` tests: the two engines' changelogs
equal, row by row).
"""

import json
import time

import pytest
from flink_cases import CASES_DIR, case_names
from flink_diff.compare import difference

from streamjoin.jvm import ENGINE_CONF
from streamjoin.testing import replay_cases

NAMES = case_names()
_RUNS: dict[tuple[str, int], tuple] = {}
#: Cases where one input row matches several stored rows of the other join side: Flink emits those pairs in
#: the order of its MapState (a Java HashMap, by the rows' hash codes), streamjoin in its state's key order.
HASH_ORDER = {"join_inner", "join_left", "join_right", "join_full"}


def expected(name: str) -> dict:
    return json.loads((CASES_DIR / "expected" / f"{name}.json").read_text())


def _key(row) -> str:
    return json.dumps(row)


ENGINES = ["jvm", "python"]


def _replay(engine: str, rows: int, spark, tmp_path_factory) -> tuple:
    """All cases (plus one the planner must refuse) replayed at ``rows`` arrivals per micro-batch on ``engine``,
    once."""
    if (engine, rows) not in _RUNS:
        before = spark.conf.get(ENGINE_CONF)
        spark.conf.set(ENGINE_CONF, engine)
        try:
            _RUNS[engine, rows] = _run(engine, rows, spark, tmp_path_factory)
        finally:
            spark.conf.set(ENGINE_CONF, before)
    return _RUNS[engine, rows]


#: The replays the tests share; the python engine's are ``slow`` (module docstring).
RUNS = [("jvm", 1), ("jvm", 7), ("jvm", 100), ("python", 100)]


def _group(engine: str, rows: int):
    """The xdist group of the tests that share the replay of ``engine`` at ``rows`` (tests/conftest.py); the python
    engine's are ``slow`` (module docstring)."""
    return pytest.mark.xdist_group(f"replay_{engine}_{rows}")


def _marks(engine: str, rows: int) -> list:
    return [_group(engine, rows), *([pytest.mark.slow] if engine == "python" else [])]


@pytest.fixture(
    scope="module",
    params=[pytest.param(run, marks=_marks(*run)) for run in RUNS],
    ids=[f"{e}-{r}-row-batches" for e, r in RUNS],
)
def replayed(request, spark, tmp_path_factory):
    return _replay(*request.param, spark, tmp_path_factory)


@pytest.fixture(
    scope="module",
    params=[pytest.param(e, marks=_marks(e, 1), id=e) for e in ENGINES],
)
def replayed_one_row(request, spark, tmp_path_factory):
    return _replay(request.param, 1, spark, tmp_path_factory)


def _run(engine: str, rows: int, spark, tmp_path_factory) -> tuple:
    refused = tmp_path_factory.mktemp("refused") / "refused_unknown_column.json"
    refused.write_text(
        json.dumps(
            {
                "name": "refused_unknown_column",
                "tables": [{"name": "T", "columns": [["a", "INT"]], "rows": [["+I", 1]]}],
                "query": "SELECT b FROM T",
            }
        )
    )
    paths = [CASES_DIR / "cases" / f"{n}.json" for n in NAMES] + [refused]
    out = tmp_path_factory.mktemp(f"replay-{engine}-{rows}")
    start = time.monotonic()
    results = replay_cases(spark, paths, out, micro_batch_rows=rows)
    elapsed = time.monotonic() - start
    print(f"\nreplayed {len(paths)} cases at {rows} row(s) per micro-batch on the {engine} engine in {elapsed:.0f} s")
    return rows, results, out


def test_there_are_the_33_reference_cases():
    assert len(NAMES) == 33


@pytest.mark.parametrize("name", NAMES)
def test_case_reproduces_flinks_final_result(replayed, name):
    _, results, out = replayed
    result = results[name]
    assert json.loads((out / f"{name}.json").read_text()) == result  # what the CLI writes
    assert "error" not in result, result.get("error")
    flink = expected(name)
    assert [c[0] for c in result["columns"]] == [c[0] for c in flink["columns"]]
    assert [c[1] for c in result["columns"]] == [c[1] for c in flink["columns"]]
    assert isinstance(result["final"], list), result["final"]  # the changelog materialised without error
    assert sorted(result["final"], key=_key) == sorted(flink["final"], key=_key)


@pytest.mark.parametrize("name", NAMES)
def test_case_reproduces_flinks_changelog_at_one_row_per_micro_batch(replayed_one_row, name):
    _, results, _ = replayed_one_row
    flink = expected(name)
    assert difference(flink, results[name], within_runs=name in HASH_ORDER) is None
    if name in HASH_ORDER:
        # Listed because the order really differs: a case that starts matching exactly leaves the list.
        assert results[name]["changelog"] != flink["changelog"]


def test_a_refused_case_is_an_error_document_and_the_others_still_run(replayed):
    _, results, out = replayed
    error = json.loads((out / "refused_unknown_column.json").read_text())
    assert list(error) == ["error"]
    assert "unknown column 'b'" in error["error"] and "[rule: column-exists]" in error["error"]
    assert all("error" not in results[n] for n in NAMES)


def test_only_the_tables_an_event_time_operator_reads_get_sparks_watermark():
    # Spark has one watermark per query, the minimum over its watermarked inputs; Flink's operators follow their own
    # inputs'. A rowtime table that only a regular join reads would hold back the deduplication's timers
    # (case dedup_first_rowtime_left_join), so the replay gives it no watermark.
    from dataclasses import replace
    from pathlib import Path

    from streamjoin.planner import plan_script
    from streamjoin.planner.plan import watermarked_tables
    from streamjoin.testing.replay import case_script, load_case_file

    def tables(query: str) -> set[str]:
        case = load_case_file(
            Path(__file__).parent / "data" / "flink-diff" / "cases" / "dedup_first_rowtime_left_join.json"
        )
        case = replace(case, query=query)
        return watermarked_tables(plan_script(case_script(case), "<test>").statements[-1].sink)

    dedup = (
        "(SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts {}) AS rn FROM users) WHERE rn = 1)"
    )
    assert tables(f"SELECT o.oid, u.name FROM orders o LEFT JOIN {dedup.format('ASC')} u ON o.k = u.k") == {"users"}
    assert tables(f"SELECT o.oid, u.name FROM orders o LEFT JOIN {dedup.format('DESC')} u ON o.k = u.k") == set()
    assert tables(
        "SELECT o.oid, u.name FROM orders o JOIN users u ON o.k = u.k "
        "AND u.ts BETWEEN o.ots - INTERVAL '1' MINUTE AND o.ots"
    ) == {"orders", "users"}
    assert tables(
        "SELECT oid, COUNT(*) OVER (PARTITION BY k ORDER BY ots "
        "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS n FROM orders"
    ) == {"orders"}


def test_only_cases_without_event_or_processing_time_share_a_streaming_query():
    # Spark keeps one watermark per query, and processing time is the query's: such cases run alone.
    from streamjoin.testing.replay import _shareable, load_case_file

    def shareable(name: str) -> bool:
        return _shareable(load_case_file(CASES_DIR / "cases" / f"{name}.json"))

    assert shareable("join_full") and shareable("join_anti_not_in")
    assert not any(
        shareable(n)
        for n in ("interval_join_left", "temporal_join_inner", "over_rows_bounded", "changelog_group_proctime")
    )
