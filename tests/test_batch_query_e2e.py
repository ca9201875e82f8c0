"""The batch query of every ``sql/`` pipeline over the test broker's demo topics equals the hand-written
batch expectation of ``checks/`` (two independent computations of the same table).

``batch_query`` plans the pipeline's SQL as a Spark batch query over the topics' retained records
(read from the real broker, decoded, dead letters left out) and the lookup tables in Delta;
``expected_<name>`` computes the same table from the generator's rows with the DataFrame API. Neither
runs a streaming operator.
"""

from pathlib import Path

import pytest

from checks.batch_inputs import BatchInputs
from checks.expectations import table_difference
from checks.lineitem_with_order import expected_lineitem_with_order
from checks.orders_by_status import expected_orders_by_status
from checks.orders_current import expected_orders_current
from checks.orders_in_eur import expected_orders_in_eur
from checks.orders_shipped_fast import expected_orders_shipped_fast
from checks.part_price_over import expected_part_price_over
from streamjoin.batch import batch_query
from streamjoin.pipeline import Lakehouse
from streamjoin.planner import load_script, sql_pipelines

SQL_DIR = Path(__file__).parent.parent / "sql"

EXPECTED = {
    "orders_current": expected_orders_current,
    "lineitem_with_order": expected_lineitem_with_order,
    "orders_in_eur": expected_orders_in_eur,
    "orders_shipped_fast": expected_orders_shipped_fast,
    "orders_by_status": expected_orders_by_status,
    "part_price_over": expected_part_price_over,
}


@pytest.fixture(scope="module")
def inputs(spark, tpch):
    return BatchInputs(spark, tpch)


@pytest.fixture(scope="module")
def lake(tmp_path_factory, inputs):
    """A lakehouse holding the dimension tables the lookup joins read."""
    root = tmp_path_factory.mktemp("lake")
    inputs.customer_currencies().write.format("delta").save(str(root / "customer_currencies"))
    inputs.part().write.format("delta").save(str(root / "part"))
    return Lakehouse(str(root))


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(p.stem for p in SQL_DIR.glob("*.sql")))
def test_batch_query_equals_the_batch_expectation(name, spark, kafka_bootstrap, demo_topics, inputs, lake):
    [pipeline] = sql_pipelines(load_script(SQL_DIR / f"{name}.sql"))
    actual = batch_query(pipeline, spark, kafka_bootstrap, lake).cache()
    expected = EXPECTED[name](inputs)
    assert actual.columns == [c.name for c in pipeline.sink_table.physical_columns]
    assert expected.count() > 0
    difference = table_difference(actual, expected)
    assert difference.count() == 0, difference.limit(10).collect()
    assert actual.count() == expected.count()
