"""The demo's Kafka topics, as ``sql/catalog/tpch.sql`` declares them, and the loader that fills them.

The topics' columns, types, primary keys, formats and watermarks are read from that SQL catalog
(:data:`CATALOG_SQL`, planned when this module is imported), the declaration the pipelines of
``sql/`` read too: ``orders`` and ``lineitem`` (debezium-json) are CDC changelogs of the two
tables; ``order_events`` (placements, updates, cancellations, each with its own time) and
``shipments`` (each line item once, when it ships) are the same data as append-only json event
streams, the input of interval joins, temporal joins, OVER aggregations and deduplication, which
consume insert-only streams; ``rates`` are the ECB reference rates (json, insert-only).

The event topics' records carry their event time as Kafka timestamp (``event_time``, ``l_shiptime``,
``rate_time``), as Flink's Kafka sink stamps a record with its rowtime: a backfill finds a day's records by
timestamp (:mod:`streamjoin.backfill`). Records are keyed by ``o_orderkey`` (``orders``, ``order_events``),
``l_orderkey`` (``lineitem``, ``shipments``) or ``currency`` (``rates``), so every key's changes stay in one
partition and in order.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Iterable, Iterator
from decimal import Decimal

from streamjoin.changelog import ChangelogError, RowKind
from streamjoin.config import PROJECT_ROOT
from streamjoin.connectors.kafka import KafkaSource
from streamjoin.connectors.kafka_admin import ensure_topics, produce
from streamjoin.connectors.kafka_client import Cluster
from streamjoin.datagen.ecb_rates import ecb_rates
from streamjoin.datagen.tpch import Change, TpchChangelog
from streamjoin.planner.script import plan_script

__all__ = [
    "CATALOG_SQL",
    "LINEITEM",
    "ORDERS",
    "ORDER_EVENTS",
    "RATES",
    "RATE_MARGIN",
    "SHIPMENTS",
    "TOPICS",
    "create_topics",
    "debezium_record",
    "load_topics",
    "rate_rows",
    "topic_records",
]

#: The SQL catalog that declares the topics (columns, types, keys, watermarks, formats): the one
#: declaration the pipelines of ``sql/`` read too, so the generated records fit what they decode.
CATALOG_SQL = PROJECT_ROOT / "sql" / "catalog" / "tpch.sql"


def _catalog_sources(names: tuple[str, ...]) -> tuple[KafkaSource, ...]:
    catalog = plan_script(CATALOG_SQL.read_text(), str(CATALOG_SQL)).catalog
    return tuple(catalog.tables[name].kafka_source() for name in names)


ORDERS, LINEITEM, RATES, ORDER_EVENTS, SHIPMENTS = _catalog_sources(
    ("orders", "lineitem", "rates", "order_events", "shipments")
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


#: Days of rates before and after a changelog's period: a rate is valid on its period's first day (the ECB
#: publishes on business days only), and the last changes still find one.
RATE_MARGIN = dt.timedelta(days=31)


@functools.lru_cache(maxsize=4)
def rate_rows(period: tuple[dt.date, dt.date]) -> list[dict]:
    """The ECB rates the ``rates`` topic gets for a changelog's :attr:`~streamjoin.datagen.tpch.TpchChangelog.period`
    (and :data:`RATE_MARGIN` either side): ``currency`` / ``rate`` (Decimal) / ``rate_time`` (datetime, UTC)
    rows in time order; read once per process and period (callers must not modify them)."""
    first, last = period
    return list(ecb_rates(first - RATE_MARGIN, last + RATE_MARGIN))


def _epoch_ms(time: dt.datetime) -> int:
    """A naive UTC datetime as a Kafka record timestamp (ms since the epoch)."""
    return int(time.replace(tzinfo=dt.UTC).timestamp() * 1000)


def create_topics(cluster: Cluster, *, partitions: int = 2) -> None:
    """Create the demo topics (:data:`TOPICS`) unless they exist: ``partitions`` each, ``rates`` one."""
    ensure_topics(cluster, {t.topic: 1 if t is RATES else partitions for t in TOPICS})


def topic_records(changelog: TpchChangelog, rates: Iterable[dict] | None = None) -> dict[str, Iterator[tuple]]:
    """Topic → its records as :func:`load_topics` writes them, lazily, each topic in its own order.

    A record is ``(key, value)`` on the CDC topics (``orders``, ``lineitem``: Debezium JSON) and
    ``(key, value, timestamp ms)`` on the event topics (JSON, stamped with the rowtime).

    Args:
        changelog: anything with ``orders_changes()``, ``lineitem_changes()``, ``order_events`` and
            ``lineitems`` (and ``period`` without ``rates``) as :class:`~streamjoin.datagen.tpch.TpchChangelog`
            has them.
        rates: the ``rates`` rows (``currency`` / ``rate`` / ``rate_time``); by default :func:`rate_rows` of the
            changelog's period.
    """
    return {
        ORDERS.topic: ((str(c.row["o_orderkey"]), debezium_record(c)) for c in changelog.orders_changes()),
        LINEITEM.topic: ((str(c.row["l_orderkey"]), debezium_record(c)) for c in changelog.lineitem_changes()),
        ORDER_EVENTS.topic: (
            (str(e["o_orderkey"]), _encode(e), _epoch_ms(e["event_time"])) for e in changelog.order_events
        ),
        SHIPMENTS.topic: ((str(i["l_orderkey"]), _encode(i), _epoch_ms(i["l_shiptime"])) for i in changelog.lineitems),
        RATES.topic: (
            (r["currency"], _encode(r), _epoch_ms(r["rate_time"]))
            for r in (rate_rows(changelog.period) if rates is None else rates)
        ),
    }


def load_topics(cluster: Cluster, changelog: TpchChangelog, *, partitions: int = 2) -> dict[str, int]:
    """Create the demo topics and produce the TPC-H changelogs and the ECB rates into them.

    Rates are :func:`rate_rows` of the changelog's period. ``cluster`` is a
    :class:`~streamjoin.connectors.kafka_client.KafkaConnection` (servers and security settings) or bootstrap servers.

    Returns:
        Records produced per topic.
    """
    create_topics(cluster, partitions=partitions)
    return {topic: produce(cluster, topic, records) for topic, records in topic_records(changelog).items()}
