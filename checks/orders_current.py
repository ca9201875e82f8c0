"""Great Expectations checks of ``orders_current``."""

import great_expectations as gx

from checks.batch_inputs import RESOURCES, equals_batch_check, read_table
from checks.expectations import expectation_check


def expected_orders_current(inputs):
    """The batch query: the orders table after every change of the ``orders`` changelog."""
    return inputs.final_orders()


def _key(context):
    return read_table(context, "orders_current"), [
        gx.expectations.ExpectColumnValuesToNotBeNull(column="o_orderkey"),
        gx.expectations.ExpectColumnValuesToBeUnique(column="o_orderkey"),
    ]


orders_current_checks = [
    equals_batch_check(
        "orders_current", name="orders_current_matches_batch",
        description="The table equals the orders table recomputed in batch from the same generated TPC-H "
        "changelog, after every update and delete (the difference, both ways, has 0 rows).",
        expected=expected_orders_current,
    ),
    expectation_check(
        "orders_current", name="orders_current_key_unique",
        description="o_orderkey is not null and unique.",
        build=_key, required_resource_keys=RESOURCES,
    ),
]
