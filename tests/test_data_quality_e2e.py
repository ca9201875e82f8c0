"""A blocking generic check on a real pipeline: passes on what the pipeline wrote, fails on a corrupted sink
table with its unexpected count, a sample and its Data Docs page, and stops the downstream asset in that run.

Real parts: the embedded broker's demo topics, the ``orders_current`` SQL pipeline through Dagster's
``materialize``, Delta, and the file-backed GX context (in a temporary ``$GX_HOME``).
"""

from dagster import AssetKey, DagsterInstance, asset, materialize

from assets.sql_pipelines import load_sql_pipelines, pipeline_assets, topic_specs
from checks.generic import generic_checks
from checks.gx_project import GX_HOME_ENV
from resources import KafkaResource, LakehouseResource, SparkResource


@asset(deps=["orders_current"])
def orders_report() -> None:
    """Downstream of ``orders_current``: runs only when its blocking checks pass."""


def _run(definition, checks, resources):
    return materialize(
        [*topic_specs([definition]), pipeline_assets(definition), orders_report, *checks],
        resources=resources,
        instance=DagsterInstance.ephemeral(),
        raise_on_error=False,
    )


def test_a_corrupted_sink_table_fails_its_blocking_check_and_stops_downstream(
    spark, kafka_bootstrap, demo_topics, tmp_path, monkeypatch
):
    monkeypatch.setenv(GX_HOME_ENV, str(tmp_path / "gx"))
    [definition] = [d for d in load_sql_pipelines() if d.pipeline.name == "orders_current"]
    checks = [c.definition() for c in generic_checks([definition.pipeline])]
    lake = tmp_path / "lake"
    resources = {
        "spark": SparkResource(),
        "kafka": KafkaResource(bootstrap_servers=kafka_bootstrap),
        "lakehouse": LakehouseResource(root=str(lake)),
    }

    clean = _run(definition, checks, resources)
    assert clean.success
    verdicts = {c.check_name: c for c in clean.get_asset_check_evaluations()}
    assert set(verdicts) == {
        "orders_current_primary_key",
        "orders_current_changelog_well_formed",
        "orders_current_equals_batch_query",
    }
    assert all(c.passed for c in verdicts.values()), verdicts
    assert AssetKey("orders_report") in {m.asset_key for m in clean.get_asset_materialization_events()}

    # A duplicate key row appended to the real sink table, behind the upsert writer's back.
    table = spark.read.format("delta").load(str(lake / "orders_current"))
    duplicate = table.orderBy("o_orderkey").limit(1)
    [key] = [r.o_orderkey for r in duplicate.collect()]
    duplicate.write.format("delta").mode("append").save(str(lake / "orders_current"))

    corrupted = _run(definition, checks, resources)
    verdicts = {c.check_name: c for c in corrupted.get_asset_check_evaluations()}
    failed = verdicts["orders_current_primary_key"]
    assert not failed.passed and verdicts["orders_current_changelog_well_formed"].passed
    unique = failed.metadata["expect_column_values_to_be_unique(column=o_orderkey)"].value
    assert unique["success"] is False and unique["unexpected_count"] == 2 and unique["unexpected_percent"] > 0
    assert [r["o_orderkey"] for r in unique["sample"]] == [key, key]
    assert failed.metadata["expect_column_values_to_not_be_null(column=o_orderkey)"].value["unexpected_count"] == 0
    page = failed.metadata["data_docs"].value
    assert page.startswith(f"file://{tmp_path / 'gx' / 'uncommitted' / 'data_docs' / 'local_site' / 'validations'}")
    assert (tmp_path / "gx" / page.removeprefix(f"file://{tmp_path / 'gx'}/")).is_file()
    # The table no longer equals the pipeline's SQL run in batch over the topics: the extra row is the sample.
    batch = verdicts["orders_current_equals_batch_query"]
    difference = batch.metadata["expect_column_values_to_be_null(column=_where)"].value
    assert not batch.passed and difference["unexpected_count"] == 1
    assert [(r["o_orderkey"], r["_where"]) for r in difference["sample"]] == [(key, "only in actual")]
    # Blocking: the downstream asset of the failed check did not run.
    assert AssetKey("orders_report") not in {m.asset_key for m in corrupted.get_asset_materialization_events()}
    assert AssetKey("orders_current") in {m.asset_key for m in corrupted.get_asset_materialization_events()}
