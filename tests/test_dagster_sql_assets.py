"""Dagster assets from SQL files: a new file in the pipelines folder is a new asset, with lineage from its plan."""

from dagster import AssetKey, Definitions

from assets.sql_pipelines import SQL_DIR, load_sql_pipelines, pipeline_assets, topic_specs

NEW_PIPELINE = """-- orders_per_customer: each euro customer's order count.
-- A second line of the description.

SET 'parallelism.default' = '4';

CREATE TABLE orders_per_customer (
  o_custkey BIGINT,
  orders    BIGINT,
  PRIMARY KEY (o_custkey) NOT ENFORCED
) WITH ('connector' = 'delta');

INSERT INTO orders_per_customer
SELECT o.o_custkey, COUNT(*)
FROM order_events AS o
JOIN customer_currencies FOR SYSTEM_TIME AS OF o.proc_time AS c ON o.o_custkey = c.c_custkey
WHERE o.op = 'c' AND c.currency = 'EUR'
GROUP BY o.o_custkey;
"""


def _specs(definitions):
    return {spec.key: spec for d in definitions for spec in d.specs}


def test_a_new_sql_file_adds_its_assets_with_lineage_from_the_plan(tmp_path):
    (tmp_path / "catalog").mkdir()
    (tmp_path / "catalog" / "tpch.sql").write_text((SQL_DIR / "catalog" / "tpch.sql").read_text())
    (tmp_path / "orders_per_customer.sql").write_text(NEW_PIPELINE)
    [pipeline] = load_sql_pipelines(tmp_path)
    specs = _specs([pipeline_assets(pipeline)])
    table, changelog = specs[AssetKey("orders_per_customer")], specs[AssetKey("orders_per_customer_changelog")]
    # Upstream: the topic the plan scans and the Delta table it looks up; not the tables it does not read.
    assert {d.asset_key for d in table.deps} == {AssetKey(["kafka", "order_events"]), AssetKey("customer_currencies")}
    assert {d.asset_key for d in changelog.deps} == {d.asset_key for d in table.deps}
    assert (
        table.description == "orders_per_customer: each euro customer's order count.\nA second line of the description."
    )
    assert table.metadata["primary_key"] == "o_custkey"
    assert "GroupAggregate(groupBy=[o_custkey]" in table.metadata["plan"].value
    assert table.metadata["parallelism"] == 4 and pipeline.pipeline.parallelism == 4
    [topic] = topic_specs([pipeline])
    assert topic.key == AssetKey(["kafka", "order_events"]) and topic.metadata["rowtime"] == "event_time"


def test_the_code_location_has_an_asset_per_sql_pipeline():
    from dagster_project.definitions import defs

    assert isinstance(defs, Definitions)
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    names = {p.pipeline.name for p in load_sql_pipelines()}
    assert names == {
        "orders_current",
        "lineitem_with_order",
        "orders_in_eur",
        "orders_shipped_fast",
        "orders_by_status",
        "part_price_over",
        "lineitem_revenue_by_status",
        "top_open_orders",
        "revenue_in_eur_daily",
    }
    assert names | {f"{n}_changelog" for n in names} <= keys
    assert {"kafka/orders", "kafka/lineitem", "kafka/order_events", "kafka/shipments", "kafka/rates"} <= keys
    upstream = {k.to_user_string() for k in graph.get(AssetKey("part_price_over")).parent_keys}
    assert upstream == {"kafka/shipments", "part"}


def test_every_sql_pipeline_has_a_backfill_and_a_streaming_job():
    from dagster_project.definitions import defs

    for name in {p.pipeline.name for p in load_sql_pipelines()}:
        backfill, streaming = defs.resolve_job_def(f"{name}_job"), defs.resolve_job_def(f"{name}_streaming_job")
        for job in (backfill, streaming):
            assert {k.to_user_string() for k in job.asset_layer.executable_asset_keys} == {name, f"{name}_changelog"}
        # A day-partitioned pipeline's jobs are partitioned: Dagster keeps their config per partition.
        config = streaming.run_config or streaming.partitioned_config.get_run_config_for_partition_key(
            streaming.partitions_def.get_first_partition_key()
        )
        assert config["ops"] == {name: {"config": {"available_now": False}}}
        assert not backfill.run_config  # the asset's default: available_now=True
