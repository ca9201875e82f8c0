"""``lineitem_with_order``: every TPC-H line item with its order, a LEFT regular join with retraction.

``lineitem LEFT JOIN orders ON l_orderkey = o_orderkey`` over both Debezium
changelogs: an order's update retracts and re-emits its line items' joined
rows; a line item whose order is not (or no longer) there carries nulls.
Sink key ``(l_orderkey, l_linenumber)``: an upsert key of the join output (the
line item's key contains the join key), so no SinkUpsertMaterializer is needed.
"""

from streamjoin.datagen.topics import LINEITEM, ORDERS
from streamjoin.pipeline import Pipeline
from streamjoin.runtime.regular_join import regular_join

from assets.pipeline_assets import pipeline_assets


def _query(tables):
    return regular_join(
        tables["lineitem"],
        tables["orders"],
        on=[("l_orderkey", "o_orderkey")],
        how="left",
        left_unique_key=LINEITEM.primary_key,
        right_unique_key=ORDERS.primary_key,
    ).changelog


LINEITEM_WITH_ORDER = Pipeline(
    name="lineitem_with_order",
    sources=[LINEITEM, ORDERS],
    query=_query,
    primary_key=LINEITEM.primary_key,
)

lineitem_with_order = pipeline_assets(
    LINEITEM_WITH_ORDER,
    description="Each TPC-H line item with its current order (LEFT regular join over the `lineitem` and `orders` "
    "changelogs, retracting and re-emitting on order updates and cancellations).",
)
