"""The batch query of every ``sql/`` pipeline over the test broker's demo topics equals the hand-written
batch expectation of ``checks/`` (two independent computations of the same table).

``batch_query`` plans the pipeline's SQL as a Spark batch query over the topics' retained records
(read from the real broker, decoded, dead letters left out) and the lookup tables in Delta;
``expected_<name>`` computes the same table from the generator's rows with the DataFrame API. Neither
runs a streaming operator.
"""

from pathlib import Path

import pytest

from checks import DEMO_EXPECTED as EXPECTED
from checks.expectations import table_difference
from streamjoin.batch import batch_query
from streamjoin.connectors.kafka_admin import ensure_topics, produce
from streamjoin.pipeline import Lakehouse, run_pipeline
from streamjoin.planner import load_script, plan_script, sql_pipelines

SQL_DIR = Path(__file__).parent.parent / "sql"


@pytest.fixture(scope="module")
def lake(tmp_path_factory, tpch_inputs):
    """A lakehouse holding the dimension tables the lookup joins read."""
    root = tmp_path_factory.mktemp("lake")
    tpch_inputs.write_lookup_tables(str(root))
    return Lakehouse(str(root))


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(p.stem for p in SQL_DIR.glob("*.sql")))
def test_batch_query_equals_the_batch_expectation(name, spark, kafka_bootstrap, demo_topics, tpch_inputs, lake):
    [pipeline] = sql_pipelines(load_script(SQL_DIR / f"{name}.sql"))
    actual = batch_query(pipeline, spark, kafka_bootstrap, lake).cache()
    expected = EXPECTED[name](tpch_inputs)
    assert actual.columns == [c.name for c in pipeline.sink_table.physical_columns]
    assert expected.count() > 0
    difference = table_difference(actual, expected)
    assert difference.count() == 0, difference.limit(10).collect()
    assert actual.count() == expected.count()


UPSERTS = """
CREATE TABLE accounts (id BIGINT, owner STRING, PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'batch_accounts', 'key.format' = 'json', 'value.format' = 'json',
        'properties.bootstrap.servers' = 'unused:9092');
CREATE TABLE accounts_current (id BIGINT, owner STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'delta');
INSERT INTO accounts_current SELECT * FROM accounts;
"""


@pytest.mark.e2e
def test_batch_query_of_an_upsert_topic_equals_the_streaming_run(spark, kafka_bootstrap, tmp_path):
    ensure_topics(kafka_bootstrap, {"batch_accounts": 2})
    records = [
        ('{"id": 1}', '{"id": 1, "owner": "ann"}'), ('{"id": 2}', '{"id": 2, "owner": "bob"}'),
        ('{"id": 1}', '{"id": 1, "owner": "ann"}'),   # a duplicate upsert
        ('{"id": 3}', '{"id": 3, "owner": "cy"}'), ('{"id": 3}', None),  # a tombstone
        ('{"id": 2}', '{"id": 2, "owner": "bea"}'),   # an update
        ('{"id": 4}', '{"id": 4, "owner": '),         # malformed: a dead letter, left out
    ]
    produce(kafka_bootstrap, "batch_accounts", records)
    [pipeline] = sql_pipelines(plan_script(UPSERTS))
    lakehouse = Lakehouse(str(tmp_path / "lake"))
    batch = batch_query(pipeline, spark, kafka_bootstrap, lakehouse)
    assert sorted(tuple(r) for r in batch.collect()) == [(1, "ann"), (2, "bea")]

    run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)
    streamed = spark.read.format("delta").load(lakehouse.table_path("accounts_current"))
    assert table_difference(streamed, batch).count() == 0
