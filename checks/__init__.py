"""Great Expectations asset checks, each run through its Checkpoint in the project's GX context (``gx/``).

Every SQL pipeline gets the generic checks of :mod:`checks.generic` from its plan; the TPC-H demo
tables also get the checks of their module here (``checks/<table>.py``), which compare with the
generated input.
"""

from collections.abc import Sequence

from checks.expectations import ExpectationCheck
from checks.generic import generic_checks
from checks.lineitem_revenue_by_status import expected_lineitem_revenue_by_status, lineitem_revenue_by_status_checks
from checks.lineitem_with_order import expected_lineitem_with_order, lineitem_with_order_checks
from checks.orders_by_status import expected_orders_by_status, orders_by_status_checks
from checks.orders_current import expected_orders_current, orders_current_checks
from checks.orders_in_eur import expected_orders_in_eur, orders_in_eur_checks
from checks.orders_shipped_fast import expected_orders_shipped_fast, orders_shipped_fast_checks
from checks.part_price_over import expected_part_price_over, part_price_over_checks
from checks.revenue_in_eur_daily import expected_revenue_in_eur_daily, revenue_in_eur_daily_checks
from checks.top_open_orders import expected_top_open_orders, top_open_orders_checks
from streamjoin.planner import SqlPipeline

#: The TPC-H demo's checks, for the tables of ``sql/`` when they are loaded.
DEMO_CHECKS = [
    *orders_current_checks,
    *lineitem_with_order_checks,
    *orders_in_eur_checks,
    *orders_shipped_fast_checks,
    *orders_by_status_checks,
    *part_price_over_checks,
    *lineitem_revenue_by_status_checks,
    *top_open_orders_checks,
    *revenue_in_eur_daily_checks,
]

#: Each TPC-H demo table's batch recomputation from the generated input (``expected(BatchInputs) -> DataFrame``).
DEMO_EXPECTED = {
    "orders_current": expected_orders_current,
    "lineitem_with_order": expected_lineitem_with_order,
    "orders_in_eur": expected_orders_in_eur,
    "orders_shipped_fast": expected_orders_shipped_fast,
    "orders_by_status": expected_orders_by_status,
    "part_price_over": expected_part_price_over,
    "lineitem_revenue_by_status": expected_lineitem_revenue_by_status,
    "top_open_orders": expected_top_open_orders,
    "revenue_in_eur_daily": expected_revenue_in_eur_daily,
}


def expectation_checks(pipelines: Sequence[SqlPipeline]) -> list[ExpectationCheck]:
    """The generic checks of ``pipelines`` and the demo checks of those of their tables that have some."""
    tables = {p.name for p in pipelines}
    return [*generic_checks(pipelines), *(c for c in DEMO_CHECKS if c.asset in tables)]


def asset_checks(pipelines: Sequence[SqlPipeline]) -> list:
    """The Dagster asset checks of :func:`expectation_checks`."""
    return [c.definition() for c in expectation_checks(pipelines)]


__all__ = ["DEMO_CHECKS", "DEMO_EXPECTED", "asset_checks", "expectation_checks"]
