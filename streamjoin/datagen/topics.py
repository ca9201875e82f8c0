"""The demo's Kafka topics: their schemas, formats and keys, and the loader that fills them.

| topic | format | key | rowtime (watermark delay) |
| --- | --- | --- | --- |
| ``orders`` | debezium-json | ``o_orderkey`` | ``o_ordertime`` (1 day) |
| ``lineitem`` | debezium-json | ``l_orderkey``, ``l_linenumber`` (records keyed by ``l_orderkey``) | ``l_shiptime`` (1 day) |
| ``rates`` | json, insert-only | ``currency`` | ``rate_time`` (0) |
| ``order_events`` | json, insert-only | none (records keyed by ``o_orderkey``) | ``event_time`` (1 day) |
| ``shipments`` | json, insert-only | none (records keyed by ``l_orderkey``) | ``l_shiptime`` (1 day) |

``orders`` and ``lineitem`` are CDC changelogs of the two tables;
``order_events`` (placements, updates, cancellations, each with its own time)
and ``shipments`` (each line item once, when it ships) are the same data as
append-only event streams, the input of interval joins, temporal joins, OVER
aggregations and deduplication, which consume insert-only streams.

Records are keyed by the primary key (line items by their order), so every
key's changes stay in one partition and in order.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from decimal import Decimal

from pyspark.sql.types import (
    DateType, DecimalType, IntegerType, LongType, StringType, StructField, StructType, TimestampType,
)

from streamjoin.changelog import ChangelogError, RowKind
from streamjoin.connectors.kafka import KafkaSource
from streamjoin.connectors.kafka_admin import ensure_topics, produce
from streamjoin.datagen.ecb_rates import ecb_rates
from streamjoin.datagen.tpch import DATE_SHIFT_DAYS, Change, TpchChangelog

__all__ = ["ORDERS", "LINEITEM", "RATES", "ORDER_EVENTS", "SHIPMENTS", "TOPICS", "rate_rows", "load_topics", "debezium_record"]

_DAY_MS = 86_400_000

ORDERS = KafkaSource(
    name="orders",
    topic="orders",
    format="debezium-json",
    schema=StructType([
        StructField("o_orderkey", LongType()),
        StructField("o_custkey", LongType()),
        StructField("o_orderstatus", StringType()),
        StructField("o_totalprice", DecimalType(15, 2)),
        StructField("o_orderdate", DateType()),
        StructField("o_ordertime", TimestampType()),
        StructField("o_orderpriority", StringType()),
        StructField("o_clerk", StringType()),
        StructField("o_shippriority", IntegerType()),
        StructField("o_comment", StringType()),
    ]),
    primary_key=("o_orderkey",),
    rowtime="o_ordertime",
    watermark_delay_ms=_DAY_MS,
)

LINEITEM = KafkaSource(
    name="lineitem",
    topic="lineitem",
    format="debezium-json",
    schema=StructType([
        StructField("l_orderkey", LongType()),
        StructField("l_partkey", LongType()),
        StructField("l_suppkey", LongType()),
        StructField("l_linenumber", IntegerType()),
        StructField("l_quantity", DecimalType(15, 2)),
        StructField("l_extendedprice", DecimalType(15, 2)),
        StructField("l_discount", DecimalType(15, 2)),
        StructField("l_tax", DecimalType(15, 2)),
        StructField("l_returnflag", StringType()),
        StructField("l_linestatus", StringType()),
        StructField("l_shipdate", DateType()),
        StructField("l_commitdate", DateType()),
        StructField("l_receiptdate", DateType()),
        StructField("l_shipinstruct", StringType()),
        StructField("l_shipmode", StringType()),
        StructField("l_comment", StringType()),
        StructField("l_shiptime", TimestampType()),
    ]),
    primary_key=("l_orderkey", "l_linenumber"),
    rowtime="l_shiptime",
    watermark_delay_ms=_DAY_MS,
)

RATES = KafkaSource(
    name="rates",
    topic="rates",
    format="json",
    rowkind_field=None,
    schema=StructType([
        StructField("currency", StringType()),
        StructField("rate", DecimalType(18, 6)),
        StructField("rate_time", TimestampType()),
    ]),
    primary_key=("currency",),
    rowtime="rate_time",
)

ORDER_EVENTS = KafkaSource(
    name="order_events",
    topic="order_events",
    format="json",
    rowkind_field=None,
    schema=StructType([
        *ORDERS.schema.fields,
        StructField("op", StringType()),
        StructField("event_time", TimestampType()),
    ]),
    rowtime="event_time",
    watermark_delay_ms=_DAY_MS,
)

SHIPMENTS = KafkaSource(
    name="shipments",
    topic="shipments",
    format="json",
    rowkind_field=None,
    schema=LINEITEM.schema,
    rowtime="l_shiptime",
    watermark_delay_ms=_DAY_MS,
)

#: Every topic :func:`load_topics` fills.
TOPICS = (ORDERS, LINEITEM, RATES, ORDER_EVENTS, SHIPMENTS)


def _json_value(value):
    # json.dumps' default= hook: TypeError is its protocol for "not serialisable".
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (dt.date, Decimal)):
        return str(value)
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def _encode(document: dict) -> str:
    return json.dumps(document, default=_json_value, separators=(",", ":"))


def debezium_record(change: Change) -> str:
    """A Debezium change event (``op`` c/u/d with ``before``/``after``) for one change, as JSON text.

    Raises:
        ChangelogError: for a ``-U`` (Debezium carries an update as one ``u`` event, from the ``+U``).
    """
    if change.kind is RowKind.INSERT:
        event = {"before": None, "after": change.row, "op": "c"}
    elif change.kind is RowKind.UPDATE_AFTER:
        event = {"before": change.before, "after": change.row, "op": "u"}
    elif change.kind is RowKind.DELETE:
        event = {"before": change.row, "after": None, "op": "d"}
    else:
        raise ChangelogError(f"Debezium has no event for a lone {change.kind.short}")
    return _encode(event)


@functools.lru_cache(maxsize=1)
def rate_rows() -> list[dict]:
    """The ECB rates the ``rates`` topic gets: the shifted TPC-H period (2001-12-01 … 2009-01-31),
    ``currency`` / ``rate`` (Decimal) / ``rate_time`` (datetime, UTC) rows in time order; read once
    per process (callers must not modify them)."""
    first = dt.date(1992, 1, 1) + dt.timedelta(days=DATE_SHIFT_DAYS)
    return list(ecb_rates(first - dt.timedelta(days=31), dt.date(2009, 1, 31)))


def load_topics(bootstrap_servers: str, changelog: TpchChangelog, *, partitions: int = 2) -> dict[str, int]:
    """Create the demo topics and produce the TPC-H changelogs and the ECB rates into them.

    Rates are :func:`rate_rows`.

    Returns:
        Records produced per topic.
    """
    ensure_topics(bootstrap_servers, {t.topic: 1 if t is RATES else partitions for t in TOPICS})
    counts = {}
    counts[ORDERS.topic] = produce(
        bootstrap_servers, ORDERS.topic,
        ((str(c.row["o_orderkey"]), debezium_record(c)) for c in changelog.orders_changes()),
    )
    counts[LINEITEM.topic] = produce(
        bootstrap_servers, LINEITEM.topic,
        ((str(c.row["l_orderkey"]), debezium_record(c)) for c in changelog.lineitem_changes()),
    )
    counts[ORDER_EVENTS.topic] = produce(
        bootstrap_servers, ORDER_EVENTS.topic, ((str(e["o_orderkey"]), _encode(e)) for e in changelog.order_events),
    )
    counts[SHIPMENTS.topic] = produce(
        bootstrap_servers, SHIPMENTS.topic, ((str(i["l_orderkey"]), _encode(i)) for i in changelog.lineitems),
    )
    counts[RATES.topic] = produce(bootstrap_servers, RATES.topic, ((r["currency"], _encode(r)) for r in rate_rows()))
    return counts
