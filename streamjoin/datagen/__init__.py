"""The demo's input: TPC-H as changelogs, the ECB reference rates, and the Kafka topics they fill.

Public API (each name is imported from its module on first use):

- :class:`TpchChangelog`, :func:`generate_tpch`, :func:`customer_currencies`, :func:`parts`,
  :func:`change_delay`, :data:`DATE_SHIFT_DAYS`, :data:`NATION_CURRENCY` (:mod:`~streamjoin.datagen.tpch`);
- :func:`ecb_rates`, :data:`ECB_HISTORY` (:mod:`~streamjoin.datagen.ecb_rates`);
- :data:`ORDERS`, :data:`LINEITEM`, :data:`RATES`, :data:`ORDER_EVENTS`, :data:`SHIPMENTS`, :data:`TOPICS`,
  :func:`create_topics`, :func:`load_topics`, :func:`topic_records`, :func:`rate_rows`, :func:`debezium_record`
  (:mod:`~streamjoin.datagen.topics`);
- :data:`CUSTOMER_CURRENCIES_SCHEMA`, :data:`PART_SCHEMA`, :func:`rows_frame` (:mod:`~streamjoin.datagen.dimensions`).
"""

from streamjoin._lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(
        [
            "TpchChangelog",
            "generate_tpch",
            "customer_currencies",
            "parts",
            "change_delay",
            "DATE_SHIFT_DAYS",
            "NATION_CURRENCY",
        ],
        "streamjoin.datagen.tpch",
    ),
    **dict.fromkeys(["ecb_rates", "ECB_HISTORY"], "streamjoin.datagen.ecb_rates"),
    **dict.fromkeys(
        [
            "ORDERS",
            "LINEITEM",
            "RATES",
            "ORDER_EVENTS",
            "SHIPMENTS",
            "TOPICS",
            "create_topics",
            "load_topics",
            "topic_records",
            "rate_rows",
            "debezium_record",
        ],
        "streamjoin.datagen.topics",
    ),
    **dict.fromkeys(["CUSTOMER_CURRENCIES_SCHEMA", "PART_SCHEMA", "rows_frame"], "streamjoin.datagen.dimensions"),
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
