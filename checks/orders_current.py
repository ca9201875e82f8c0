"""Great Expectations checks of ``orders_current``."""

from checks.batch_inputs import equals_batch_check


def expected_orders_current(inputs):
    """The batch query: the orders table after every change of the ``orders`` changelog."""
    return inputs.final_orders()


orders_current_checks = [
    equals_batch_check(
        "orders_current",
        name="orders_current_matches_batch",
        description="The table equals the orders table recomputed in batch from the same generated TPC-H "
        "changelog, after every update and delete (the difference, both ways, has 0 rows).",
        expected=expected_orders_current,
    ),
]
