"""Every pipeline of ``sql/`` through ``streamjoin run`` on the real path (Kafka → Spark → Delta), against the batch
query.

Each run reads the test broker's demo topics (TPC-H at the tests' scale
factor) with ``--available-now`` into a fresh lakehouse that holds the
dimension tables the lookup joins read; the sink table must then equal the
batch query over the same input (the recomputation the pipeline's Great
Expectations check uses), and the input must exercise what the pipeline is
about. Every pipeline runs on both operator engines (one lakehouse each), so
the engines also agree with each other on the TPC-H pipelines. The ``jvm`` engine's runs are ``slow``
(``make test-all``): in ``make test`` every pipeline runs on that engine through Dagster in
``tests/test_e2e_lakehouse.py``, whose checks compare each table with the same batch queries. So are the
``python`` engine's but :data:`PYTHON_IN_MAKE_TEST`: a join into a group aggregate and an event-time temporal
join keep the python engine on the real path in ``make test``, where its operators are held equal to the jvm
engine's row by row by the engines' in-process differential tests.
"""

import pytest
from pyspark.sql import functions as F

from assets.sql_pipelines import SQL_DIR, load_sql_pipelines
from checks import DEMO_EXPECTED as EXPECTED
from checks.expectations import table_difference
from streamjoin.changelog import ROWKIND_COLUMN
from streamjoin.cli import main
from streamjoin.sink.delta import BATCH_ID_COLUMN

ENGINES = ["jvm", "python"]  # the `engine` fixture's (tests/conftest.py), which restores the session's setting
#: The pipelines ``make test`` runs on the python engine (module docstring); ``make test-all`` runs every one.
PYTHON_IN_MAKE_TEST = {"lineitem_revenue_by_status", "orders_in_eur"}


def test_every_sql_pipeline_has_a_batch_query():
    assert {d.pipeline.name for d in load_sql_pipelines()} == set(EXPECTED)


@pytest.fixture(scope="module")
def lake(tmp_path_factory, tpch_inputs):
    """A lakehouse per engine, each holding the dimension tables."""
    root = tmp_path_factory.mktemp("lake")
    for engine in ENGINES:
        tpch_inputs.write_lookup_tables(str(root / engine))
    return root


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("name", "engine"),
    [
        pytest.param(n, e, marks=[] if e == "python" and n in PYTHON_IN_MAKE_TEST else [pytest.mark.slow])
        for e in ENGINES
        for n in sorted(EXPECTED)
    ],
    indirect=["engine"],
)
def test_streamjoin_run_equals_the_batch_query(name, engine, spark, kafka_bootstrap, demo_topics, tpch_inputs, lake):
    code = main(
        [
            "run",
            str(SQL_DIR / f"{name}.sql"),
            "--available-now",
            "--bootstrap-servers",
            kafka_bootstrap,
            "--lakehouse",
            str(lake / engine),
            "--engine",
            engine,
        ]
    )
    assert code == 0
    actual = spark.read.format("delta").load(str(lake / engine / name))
    expected = EXPECTED[name](tpch_inputs)
    assert expected.count() > 0
    assert table_difference(actual, expected).count() == 0
    _assert_input_exercises(name, actual, tpch_inputs, str(lake / engine / name))


def _assert_input_exercises(name, table, tpch_inputs, lake_table):
    """What makes the comparison meaningful: the rows of the input the operator must get right are there.
    (orders_current and lineitem_with_order: test_e2e_orders.py and test_e2e_lakehouse.py.)"""
    if name == "orders_in_eur":
        # A euro order (rate 1), orders converted at an ECB rate, and orders in a currency the ECB does not quote.
        assert table.where("currency = 'EUR' AND amount_eur = o_totalprice").count() > 0
        assert (
            table.where("rate IS NOT NULL").count() > 0
            and table.where("rate IS NULL AND currency <> 'EUR'").count() > 0
        )
    elif name == "orders_shipped_fast":
        # Orders with no line item shipped within 30 days are there null-padded, once.
        assert table.where("l_linenumber = 0 AND l_shiptime IS NULL").count() > 0
        assert table.where("l_linenumber > 0").count() > 0
    elif name == "orders_by_status":
        # Updates moved orders between statuses and cancellations removed some: the counts are the final ones.
        assert (
            table.agg(F.sum("order_count")).first()[0]
            == tpch_inputs.final_orders().count()
            < len(tpch_inputs.changelog.orders)
        )
        # In mini-batch mode (the file's SET) a status emits at most one -U/+U pair per micro-batch.
        changelog = table.sparkSession.read.format("delta").load(f"{lake_table}_changelog")
        per_batch = changelog.groupBy(BATCH_ID_COLUMN, "o_orderstatus").count()
        assert per_batch.agg(F.max("count")).first()[0] <= 2
    elif name == "lineitem_revenue_by_status":
        # Every line item of an existing order is counted once; order updates moved line items between statuses
        # within a micro-batch: a status took several changes in one batch (a join's retractions into the aggregate).
        joined = tpch_inputs.final_lineitems().join(
            tpch_inputs.final_orders(), F.col("l_orderkey") == F.col("o_orderkey")
        )
        assert table.agg(F.sum("line_count")).first()[0] == joined.count() > 0
        changelog = table.sparkSession.read.format("delta").load(f"{lake_table}_changelog")
        assert changelog.groupBy(BATCH_ID_COLUMN, "o_orderstatus").count().agg(F.max("count")).first()[0] > 2
    elif name == "top_open_orders":
        # Customers with one, two and three open orders ranked; updates and deletes made ranks change hands: the
        # changelog replaced some rank's order (+U of a key that held another order) or emptied one (-D).
        per_customer = table.groupBy("o_custkey").count()
        assert {r[0] for r in per_customer.select("count").distinct().collect()} == {1, 2, 3}
        changelog = table.sparkSession.read.format("delta").load(f"{lake_table}_changelog")
        kinds = {r[0] for r in changelog.select(ROWKIND_COLUMN).distinct().collect()}
        assert {"+U", "-D"} <= kinds
    elif name == "revenue_in_eur_daily":
        # Days of several currencies, a day with several orders, and converted (non-EUR) revenue.
        assert table.select("currency").distinct().count() > 1
        assert table.where("order_count > 1").count() > 0
        assert table.where("currency <> 'EUR' AND revenue_eur IS NOT NULL").count() > 0
    elif name == "part_price_over":
        # Both frames, one row each per line item, and they differ (2 rows may span more or less than 7 days).
        rows = table.groupBy("l_orderkey", "l_linenumber").pivot("frame").agg(F.first("max_price"))
        assert rows.where("`RANGE 7 DAYS` IS NULL OR `ROWS 2 PRECEDING` IS NULL").count() == 0
        assert rows.where("`RANGE 7 DAYS` <> `ROWS 2 PRECEDING`").count() > 0
