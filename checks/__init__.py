"""Great Expectations asset checks: one module per sink table, built with :func:`checks.expectations.expectation_check`."""

from checks.lineitem_with_order import lineitem_with_order_checks
from checks.orders_by_status import orders_by_status_checks
from checks.orders_current import orders_current_checks
from checks.orders_in_eur import orders_in_eur_checks
from checks.orders_shipped_fast import orders_shipped_fast_checks
from checks.part_price_over import part_price_over_checks

#: Every check of the code location.
ALL_CHECKS = [
    *orders_current_checks, *lineitem_with_order_checks, *orders_in_eur_checks, *orders_shipped_fast_checks,
    *orders_by_status_checks, *part_price_over_checks,
]

__all__ = ["ALL_CHECKS"]
