"""The data-quality checks: the changelog rules, the file-backed GX context, and generic checks from any ``sql/``
file."""

import json
import os
import shutil
import subprocess
import sys

import great_expectations as gx
from conftest import DAYS, SCALE_FACTOR
from dagster import AssetKey, Definitions

from assets.sql_pipelines import SQL_DIR, load_sql_pipelines, pipeline_assets
from checks import asset_checks, expectation_checks
from checks.expectations import expectation_metadata
from checks.generic import VIOLATION_COLUMN, changelog_violations
from checks.gx_project import GX_HOME_ENV, CheckSpec, context_root, open_context, run_checkpoint, write_definitions
from resources import KafkaResource, LakehouseResource, SparkResource
from streamjoin.config import PROJECT_ROOT

CHANGELOG = "k INT, v STRING, _rowkind STRING, _seq LONG, _batch_id LONG, _processing_time TIMESTAMP"


def _changelog(spark, changes):
    """``(key, rowkind)`` pairs in the order applied (one batch per change) as a changelog table."""
    import datetime as dt

    start = dt.datetime(2024, 1, 1)
    rows = [(k, f"v{i}", kind, 0, i, start + dt.timedelta(seconds=i)) for i, (k, kind) in enumerate(changes)]
    return spark.createDataFrame(rows, CHANGELOG)


def _violations(spark, changes):
    df = changelog_violations(_changelog(spark, changes), ["k"])
    return [(r.k, r._rowkind, r[VIOLATION_COLUMN]) for r in df.orderBy("_batch_id").collect() if r[VIOLATION_COLUMN]]


def test_a_well_formed_changelog_has_no_violation(spark):
    # Key 3: an outer join's update when the order side retracts: -U of the joined row, +I of the null-padded one.
    changes = [
        (1, "+I"),
        (2, "+I"),
        (1, "-U"),
        (1, "+U"),
        (1, "+U"),
        (2, "-D"),
        (2, "+I"),
        (1, "-D"),
        (3, "+I"),
        (3, "-U"),
        (3, "+I"),
    ]
    assert _violations(spark, changes) == []


def test_each_invalid_change_is_named(spark):
    changes = [
        (1, "+U"),  # never inserted
        (2, "+I"),
        (2, "+I"),  # already present
        (3, "-D"),  # not present
        (4, "+I"),
        (4, "-U"),
        (4, "-D"),  # -U not followed by +U; then -D of a key no longer present
        (5, "+I"),
        (5, "-D"),
        (5, "-U"),
        (5, "+U"),  # -U of a key not present (its +U is fine)
    ]
    assert _violations(spark, changes) == [
        (1, "+U", "+U of a key never inserted"),
        (2, "+I", "+I of a key already present"),
        (3, "-D", "-D of a key not present"),
        (4, "-U", "-U without its +U"),
        (4, "-D", "-D of a key not present"),
        (5, "-U", "-U of a key not present"),
    ]


def test_changes_are_ordered_by_processing_time_then_batch_then_seq(spark):
    import datetime as dt

    t0, t1 = dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2)
    # A new checkpoint starts its batch ids at 0 again: batch 0 of the second query comes after batch 5 of the first.
    rows = [
        (1, "a", "+I", 7, 5, t0),
        (1, "a", "-U", 0, 0, t1),
        (1, "b", "+U", 1, 0, t1),
        (2, "c", "+I", 1, 0, t0),
        (2, "c", "-D", 0, 0, t0),
    ]
    df = changelog_violations(spark.createDataFrame(rows, CHANGELOG), ["k"])
    assert {(r.k, r._rowkind): r[VIOLATION_COLUMN] for r in df.collect()} == {
        (1, "+I"): None,
        (1, "-U"): None,
        (1, "+U"): None,
        (2, "-D"): "-D of a key not present",
        (2, "+I"): None,
    }


def _spec(name="t_primary_key"):
    return CheckSpec(
        name,
        "k is unique and not null.",
        (
            gx.expectations.ExpectColumnValuesToNotBeNull(column="k"),
            gx.expectations.ExpectColumnValuesToBeUnique(column="k"),
            gx.expectations.ExpectTableRowCountToEqual(value=3),
        ),
    )


def _definition_files(root):
    """Modification time of every committed file of a context (not ``uncommitted/``)."""
    return {
        p: p.stat().st_mtime_ns
        for p in root.rglob("*")
        if p.is_file() and "uncommitted" not in p.relative_to(root).parts
    }


def test_a_checkpoint_run_keeps_its_result_and_data_docs_with_history(spark, tmp_path):
    root = tmp_path / "gx"
    bad = spark.createDataFrame([(1, "a"), (1, "b"), (None, "c"), (2, "d")], "k INT, v STRING")
    first = run_checkpoint(_spec(), bad, run_name="run-1", root=root)
    definitions = _definition_files(root)
    good = spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "k INT, v STRING")
    second = run_checkpoint(_spec(), good, run_name="run-2", root=root)

    assert (
        not first.success
        and first.docs_path.is_file()
        and first.docs_path.is_relative_to(root / "uncommitted/data_docs/local_site")
    )
    assert "run-1" in first.docs_url
    not_null, unique, _count = first.results
    assert (not_null.result["unexpected_count"], unique.result["unexpected_count"]) == (1, 2)
    assert {r["v"] for r in unique.result["unexpected_rows"]} == {"a", "b"}
    metadata = expectation_metadata(first.results)
    entry = metadata["expect_column_values_to_be_unique(column=k)"].value
    assert entry["success"] is False and entry["unexpected_count"] == 2 and entry["unexpected_percent"] > 0
    assert sorted(r["v"] for r in entry["sample"]) == ["a", "b"]
    assert metadata["expect_table_row_count_to_equal(value=3)"].value == {"success": False, "observed_value": 4}

    # The second run: same definitions (not rewritten), its own page, both listed on the site's index.
    assert second.success and second.docs_path.is_file() and second.docs_path != first.docs_path
    assert definitions == _definition_files(root)
    index = (root / "uncommitted/data_docs/local_site/index.html").read_text()
    assert "run-1" in index and "run-2" in index


def test_the_context_root_is_gx_home_else_the_projects_gx(monkeypatch, tmp_path):
    monkeypatch.delenv(GX_HOME_ENV, raising=False)
    assert context_root() == PROJECT_ROOT / "gx"
    monkeypatch.setenv(GX_HOME_ENV, str(tmp_path))
    assert context_root() == tmp_path


ADD_CHECKS = """
import sys
from pathlib import Path
import great_expectations as gx
from checks.gx_project import CheckSpec, ensure_checkpoint, open_context
for name in sys.argv[2:]:
    # One context per check, as each asset check opens its own.
    with open_context(Path(sys.argv[1])) as context:
        ensure_checkpoint(context, CheckSpec(name, "", (gx.expectations.ExpectColumnValuesToNotBeNull(column="k"),)))
"""


def test_processes_adding_checks_at_once_keep_every_definition(tmp_path):
    root = tmp_path / "gx"
    batches = [[f"p{p}_c{c}" for c in range(3)] for p in range(3)]
    # Separate interpreters, as separate Dagster runs are; each rewrites great_expectations.yml to add its assets.
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    workers = [subprocess.Popen([sys.executable, "-c", ADD_CHECKS, str(root), *names], env=env) for names in batches]
    assert [w.wait(timeout=300) for w in workers] == [0] * len(workers)
    names = {n for b in batches for n in b}
    with open_context(root) as context:
        assert set(context.data_sources.get("spark").get_asset_names()) == names
        assert {s.name for s in context.suites.all()} == names
        assert {c.name for c in context.checkpoints.all()} == names


NEW_PIPELINE = """-- orders_per_status_count: a new pipeline nobody wrote checks for.
CREATE TABLE orders_per_status_count (
  o_orderstatus STRING,
  orders        BIGINT,
  PRIMARY KEY (o_orderstatus) NOT ENFORCED
) WITH ('connector' = 'delta');

INSERT INTO orders_per_status_count
SELECT o_orderstatus, COUNT(*) FROM orders GROUP BY o_orderstatus;
"""


def test_a_new_sql_file_gets_the_generic_checks(tmp_path):
    (tmp_path / "catalog").mkdir()
    (tmp_path / "catalog" / "tpch.sql").write_text((SQL_DIR / "catalog" / "tpch.sql").read_text())
    (tmp_path / "orders_per_status_count.sql").write_text(NEW_PIPELINE)
    [definition] = load_sql_pipelines(tmp_path)
    checks = asset_checks([definition.pipeline])
    specs = {s.key.name: s for c in checks for s in c.check_specs}
    assert set(specs) == {
        "orders_per_status_count_primary_key",
        "orders_per_status_count_changelog_well_formed",
        "orders_per_status_count_equals_batch_query",
    }
    assert specs["orders_per_status_count_primary_key"].asset_key == AssetKey("orders_per_status_count")
    assert specs["orders_per_status_count_changelog_well_formed"].asset_key == AssetKey(
        "orders_per_status_count_changelog"
    )
    assert [name for name, s in specs.items() if not s.blocking] == ["orders_per_status_count_equals_batch_query"]
    assert specs["orders_per_status_count_equals_batch_query"].asset_key == AssetKey("orders_per_status_count")
    [primary_key, *_] = expectation_checks([definition.pipeline])
    assert [e.expectation_type for e in primary_key.spec.expectations] == [
        "expect_column_values_to_not_be_null",
        "expect_column_values_to_be_unique",
    ]
    # They load with the pipeline's assets.
    Definitions(
        assets=[pipeline_assets(definition)],
        asset_checks=checks,
        resources={"spark": SparkResource(), "kafka": KafkaResource(), "lakehouse": LakehouseResource()},
    ).resolve_job_def("__ASSET_JOB")


def test_the_committed_gx_folder_holds_every_check_of_the_code_location(tmp_path):
    from dagster_project.definitions import SQL_PIPELINES

    root = tmp_path / "gx"
    shutil.copytree(PROJECT_ROOT / "gx", root, ignore=shutil.ignore_patterns("uncommitted"))
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    write_definitions([c.spec for c in expectation_checks([p.pipeline for p in SQL_PIPELINES])], root)
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and "uncommitted" not in p.parts}
    assert after == before, (
        "gx/ is out of date: regenerate it with checks.gx_project.write_definitions over "
        "checks.expectation_checks of dagster_project.definitions.SQL_PIPELINES"
    )
    assert (
        json.loads((root / "checkpoints" / "orders_current_primary_key.json").read_text())["actions"][0]["type"]
        == "update_data_docs"
    )


def test_a_backfills_restated_days_are_not_changes_of_the_stream(spark):
    import datetime as dt

    t0, t1 = dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2)
    # The stream inserted key 1; a later backfill restated its day as +I (tagged _batch_id -1, docs/backfill.md).
    rows = [(1, "a", "+I", 0, 0, t0), (1, "a", "+I", 0, -1, t1), (2, "b", "+I", 0, 1, t1), (2, "b", "+I", 1, 1, t1)]
    df = changelog_violations(spark.createDataFrame(rows, CHANGELOG), ["k"])
    assert sorted((r.k, r._batch_id, r[VIOLATION_COLUMN] or "") for r in df.collect()) == [
        (1, 0, ""),
        (2, 1, ""),
        (2, 1, "+I of a key already present"),
    ]


def test_a_check_whose_other_table_is_missing_is_a_warning_not_evaluated(spark, tmp_path):
    """Launching one pipeline alone is normal: its check that compares with another pipeline's table, which no run
    has written yet, reports a WARN naming the missing table instead of failing the run."""
    from dagster import AssetCheckSeverity, build_asset_check_context

    from checks.lineitem_with_order import lineitem_with_order_checks
    from resources import TpchResource

    [check] = [c for c in lineitem_with_order_checks if c.spec.name == "lineitem_with_order_matches_current_orders"]
    context = build_asset_check_context(
        resources={
            "spark": SparkResource(),
            "lakehouse": LakehouseResource(root=str(tmp_path)),
            "tpch": TpchResource(scale_factor=SCALE_FACTOR, days=DAYS),
        }
    )
    result = check.definition()(context)
    assert not result.passed and result.severity == AssetCheckSeverity.WARN
    assert result.metadata["not evaluated"].text.startswith(
        f"orders_current has no Delta table at {tmp_path / 'orders_current'}"
    )
