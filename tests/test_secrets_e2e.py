"""A secret named by ``${VAR}`` in a Kafka table's options, through the real path: the CLI's explain and run,
Dagster's ``materialize`` of the SQL assets, Spark's Kafka reader on the embedded broker, Delta. The value
shows up in none of what they print, log, record as metadata or write (tables, Delta logs, checkpoints).

The broker does not use SASL/SSL: the secret options are ones a PLAINTEXT consumer accepts and ignores.
"""

import pytest
from dagster import DagsterInstance, materialize

from assets.sql_pipelines import load_sql_pipelines, pipeline_assets, topic_specs
from resources import KafkaResource, LakehouseResource, SparkResource
from streamjoin.cli import main
from tests.sql_folders import orders_current_with_orders_options

SECRET = "jaas-secret-7f3a91"


def _files_holding(folder, text: bytes) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and text in p.read_bytes()]


@pytest.fixture
def secret_sql(tmp_path, monkeypatch):
    """``sql/orders_current.sql`` over a catalog whose ``orders`` table names two secrets from the environment."""
    monkeypatch.setenv(
        "SJ_TEST_JAAS",
        f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{SECRET}";',
    )
    monkeypatch.setenv("SJ_TEST_KEY_PASSWORD", SECRET)
    return orders_current_with_orders_options(
        tmp_path,
        (
            "  'properties.sasl.jaas.config' = '${SJ_TEST_JAAS}',\n  'properties.ssl.key.password' = '${SJ_TEST_KEY_PASSWORD}',\n"  # noqa: E501
        ),
    )


def test_a_secret_from_the_environment_stays_out_of_output_metadata_and_tables(
    spark, kafka_bootstrap, demo_topics, secret_sql, tmp_path, capsys
):
    pipeline_file = secret_sql / "orders_current.sql"
    assert main(["explain", str(pipeline_file)]) == 0
    assert (
        main(
            [
                "run",
                str(pipeline_file),
                "--available-now",
                "--bootstrap-servers",
                kafka_bootstrap,
                "--lakehouse",
                str(tmp_path / "cli-lake"),
            ]
        )
        == 0
    )
    printed = capsys.readouterr()
    assert "TableSourceScan" in printed.out and SECRET not in printed.out + printed.err

    [definition] = load_sql_pipelines(secret_sql)
    [source] = definition.pipeline.sources
    assert SECRET in source.options["kafka.sasl.jaas.config"] and source.options["kafka.ssl.key.password"] == SECRET
    lake = tmp_path / "dagster-lake"
    instance = DagsterInstance.ephemeral()
    result = materialize(
        [*topic_specs([definition]), pipeline_assets(definition)],
        instance=instance,
        resources={
            "spark": SparkResource(),
            "kafka": KafkaResource(bootstrap_servers=kafka_bootstrap),
            "lakehouse": LakehouseResource(root=str(lake)),
        },
    )
    assert result.success
    specs = [
        spec for d in (pipeline_assets(definition), *topic_specs([definition])) for spec in getattr(d, "specs", [d])
    ]
    assert "TableSourceScan" in str(specs[0].metadata["plan"].value)
    assert SECRET not in repr([s.metadata for s in specs])
    events = [m.metadata for m in result.get_asset_materialization_events() for m in [m.materialization]]
    assert events and SECRET not in repr(events)
    logs = instance.all_logs(result.run_id)
    assert len(logs) > 10 and not [e for e in logs if SECRET in repr(e)]

    # What the runs wrote: the sink and changelog tables (their rows and Delta history) and every file under the
    # lakehouses (Delta logs, checkpoints, dead letters).
    for root in (tmp_path / "cli-lake", lake):
        changelog = spark.read.format("delta").load(str(root / "orders_current_changelog"))
        assert changelog.count() > 0
        assert not [r for r in changelog.collect() if SECRET in repr(r)]
        history = spark.sql(f"DESCRIBE HISTORY delta.`{root / 'orders_current_changelog'}`").collect()
        assert history and SECRET not in repr(history)
        assert _files_holding(root, SECRET.encode()) == []
