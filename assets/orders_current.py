"""``orders_current``: the TPC-H ``orders`` changelog upserted into Delta by ``o_orderkey``."""

from streamjoin.datagen.topics import ORDERS
from streamjoin.pipeline import Pipeline

from assets.pipeline_assets import pipeline_assets

ORDERS_CURRENT = Pipeline(
    name="orders_current",
    sources=[ORDERS],
    query=lambda tables: tables["orders"],
    primary_key=("o_orderkey",),
)

orders_current = pipeline_assets(
    ORDERS_CURRENT,
    description="The current version of every TPC-H order: the `orders` Debezium changelog (inserts, status "
    "updates, cancellations) upserted by `o_orderkey`.",
)
