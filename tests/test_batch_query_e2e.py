"""``batch_query`` through the real broker: an upsert-kafka topic's final table equals the streaming run's.

The batch query of every ``sql/`` pipeline over the demo topics is compared with its streaming table by
the generic check ``<sink>_equals_batch_query`` in ``tests/test_e2e_lakehouse.py``, where the same tables
also pass the hand-written batch expectations of ``checks/`` (``DEMO_EXPECTED``): the batch query and the
expectations, two computations independent of the streaming operators, agree through it.
"""

import pytest

from checks.expectations import table_difference
from streamjoin.batch import batch_query
from streamjoin.connectors.kafka_admin import ensure_topics, produce
from streamjoin.pipeline import Lakehouse, run_pipeline
from streamjoin.planner import plan_script, sql_pipelines

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
        ('{"id": 1}', '{"id": 1, "owner": "ann"}'),
        ('{"id": 2}', '{"id": 2, "owner": "bob"}'),
        ('{"id": 1}', '{"id": 1, "owner": "ann"}'),  # a duplicate upsert
        ('{"id": 3}', '{"id": 3, "owner": "cy"}'),
        ('{"id": 3}', None),  # a tombstone
        ('{"id": 2}', '{"id": 2, "owner": "bea"}'),  # an update
        ('{"id": 4}', '{"id": 4, "owner": '),  # malformed: a dead letter, left out
    ]
    produce(kafka_bootstrap, "batch_accounts", records)
    [pipeline] = sql_pipelines(plan_script(UPSERTS))
    lakehouse = Lakehouse(str(tmp_path / "lake"))
    batch = batch_query(pipeline, spark, kafka_bootstrap, lakehouse)
    assert sorted(tuple(r) for r in batch.collect()) == [(1, "ann"), (2, "bea")]

    run_pipeline(pipeline, spark, lakehouse, kafka_bootstrap)
    streamed = spark.read.format("delta").load(lakehouse.table_path("accounts_current"))
    assert table_difference(streamed, batch).count() == 0
