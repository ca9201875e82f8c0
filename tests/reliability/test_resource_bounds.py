"""A key with a large state through the real path, scaled down from ``make bounds`` (tests/reliability/bounds.py).

One order with 20,000 line items through ``lineitem_with_order`` (the regular join; the order's update in the
same input retracts and re-emits every joined row), and one OVER partition of 20,000 shipments through
``part_price_over``, beside the ordinary TPC-H input, on the jvm engine (``make bounds`` runs both engines; the
python engine's cases here cost the suite ~2.5 minutes, a fixed cost per case rather than the rows): the run ends and
the Delta table equals the
batch query over the final input, the changelog holding each batch once. ``make bounds`` runs 100,000 and
1,000,000 rows and measures time and memory.
"""

from __future__ import annotations

import pytest

from tests.reliability.bounds import run_case

pytestmark = pytest.mark.slow  # ~7 min on 2 cores; make bounds runs the full-size cases, make test-all these

ROWS = 20_000


@pytest.mark.e2e
@pytest.mark.parametrize("pipeline", ["lineitem_with_order", "part_price_over"])
def test_a_key_with_a_large_state_runs_through_and_equals_the_batch_query(
    pipeline, spark, kafka_bootstrap, tpch, tmp_path
):
    result = run_case(spark, pipeline, "jvm", ROWS, kafka_bootstrap, tmp_path, tpch, restart=False)
    assert result.ok, result.error or result.verdict
    # The big key's rows are in the table (OVER: both frames): the case is what it says.
    assert result.delta_rows > ROWS * (2 if pipeline == "part_price_over" else 1)
