"""The benchmark's operator queries: each as Flink SQL, as streamjoin's operator call, and as Spark's native query
where Spark has the operator.

Inputs are the tables of :mod:`bench.tpch_streams` (insert-only): ``orders`` (+ ``o_currency``),
``lineitem`` (+ ``p_type``) and ``rates``. The streamjoin call is what the planner makes of the SQL
(same keys, bounds, frame and aggregates); Spark's native query is the nearest Spark has:

- regular inner join: Spark's stream-stream inner join (no time bound, state kept forever);
- regular left join: none (Spark's outer stream-stream join needs a time bound);
- interval joins: Spark's stream-stream join with the same time-range condition and watermarks;
- temporal join: none (Spark has no event-time temporal join);
- OVER: none (Spark rejects a window function over a stream);
- group aggregate: Spark's streaming aggregation in output mode ``update`` (it pre-aggregates before the shuffle
  and emits one row per group and micro-batch); streamjoin and Flink per change, and in mini-batch mode
  (streamjoin: one change per group and micro-batch; Flink: its mini-batch settings of :data:`_FLINK_MINI_BATCH`);
- deduplication: ``dropDuplicates`` on the key (keeps the first row to arrive, state kept forever), for
  Flink's keep-first-on-rowtime deduplication of an input in rowtime order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN
from streamjoin.datagen.topics import LINEITEM, ORDERS
from streamjoin.runtime.deduplicate import deduplicate
from streamjoin.runtime.group_aggregate import group_aggregate
from streamjoin.runtime.interval_join import interval_join
from streamjoin.runtime.over_aggregate import over_aggregate
from streamjoin.runtime.regular_join import regular_join
from streamjoin.runtime.temporal_join import temporal_join

__all__ = ["CASES", "STATE_GROWTH", "Case"]

Streams = dict[str, Callable[[], DataFrame]]
_DAY_MS = 86_400_000
REGULAR_INNER = "regular inner join"
#: The regular inner join with 10× the rows per join key (:data:`COARSE_ORDERS`).
REGULAR_INNER_COARSE = "regular inner join, 10× rows per join key"
#: The OVER case, over ``p_type``'s 150 partitions, and the one with 10× the rows per partition
#: (:data:`COARSE_PARTITIONS`).
OVER = "OVER (RANGE 7 days)"
OVER_COARSE = "OVER (RANGE 7 days), 10× rows per partition"
_CHANGELOG = (ROWKIND_COLUMN, SEQ_COLUMN)


@dataclass(frozen=True)
class Case:
    """One operator query.

    Attributes:
        name: e.g. ``"regular inner join"``.
        tables: the input tables it reads (their rows are its input rows).
        sql: the Flink SQL query Flink runs.
        ours: builds streamjoin's query over fresh streams (on the engine the session's
            ``spark.streamjoin.engine`` names when it is called).
        native: builds Spark's native query, or ``None``.
        native_mode: the native query's output mode.
        no_native: why Spark has no native query, when ``native`` is ``None``.
        flink_settings: settings Flink runs the query with (``SET`` key → value).
    """

    name: str
    tables: tuple[str, ...]
    sql: str
    ours: Callable[[Streams], DataFrame]
    native: Callable[[Streams], DataFrame] | None = None
    native_mode: str = "append"
    no_native: str = ""
    flink_settings: tuple[tuple[str, str], ...] = ()


def _plain(streams: Streams, table: str) -> DataFrame:
    return streams[table]().drop(*_CHANGELOG)


def _regular(how: str):
    return lambda s: regular_join(
        s["lineitem"](),
        s["orders"](),
        on=[("l_orderkey", "o_orderkey")],
        how=how,
        left_unique_key=LINEITEM.primary_key,
        right_unique_key=ORDERS.primary_key,
    )


#: The coarse regular join's key is the order key rounded down to a multiple of this: TPC-H uses 8 of every 32 order
#: keys, so a join key holds ~10 orders and ~40 line items instead of 1 and ~4. The order key itself becomes the
#: residual ``l_orderkey - o_orderkey = 0`` (not an equality, so neither Flink nor streamjoin makes it a join key):
#: the same output rows, each found among 10× the rows of its key.
COARSE_ORDERS = 40
_L_GROUP, _O_GROUP = (f"{column} - MOD({column}, {COARSE_ORDERS})" for column in ("l_orderkey", "o_orderkey"))


def _regular_coarse(s: Streams) -> DataFrame:
    lineitem = s["lineitem"]().withColumn("l_group", F.expr(_L_GROUP))
    orders = s["orders"]().withColumn("o_group", F.expr(_O_GROUP))
    return regular_join(
        lineitem,
        orders,
        on=[("l_group", "o_group")],
        condition="l_orderkey - o_orderkey = 0",
        left_unique_key=LINEITEM.primary_key,
        right_unique_key=ORDERS.primary_key,
    )


def _native_regular_inner(s: Streams) -> DataFrame:
    lineitem, orders = _plain(s, "lineitem"), _plain(s, "orders")
    return lineitem.join(orders, lineitem.l_orderkey == orders.o_orderkey)


_INTERVAL_DAYS = 30
# Flink writes one rowtime column to a sink: l_shiptime is cast to a plain TIMESTAMP(3).
_INTERVAL_SQL = (
    "SELECT o.*, "
    + ", ".join(f"l.{c}" for c in [*LINEITEM.schema.names, "p_type"] if c != "l_shiptime")
    + ", CAST(l.l_shiptime AS TIMESTAMP(3)) AS l_shiptime FROM orders AS o {join} lineitem AS l "
    "ON o.o_orderkey = l.l_orderkey AND l.l_shiptime BETWEEN o.o_ordertime "
    f"AND o.o_ordertime + INTERVAL '{_INTERVAL_DAYS}' DAY"
)


def _interval(how: str):
    return lambda s: interval_join(
        s["orders"](),
        s["lineitem"](),
        on=[("o_orderkey", "l_orderkey")],
        left_time="o_ordertime",
        right_time="l_shiptime",
        lower_bound_ms=0,
        upper_bound_ms=_INTERVAL_DAYS * _DAY_MS,
        how=how,
    )


def _native_interval(how: str):
    def build(s: Streams) -> DataFrame:
        orders, lineitem = _plain(s, "orders"), _plain(s, "lineitem")
        condition = (
            (orders.o_orderkey == lineitem.l_orderkey)
            & (lineitem.l_shiptime >= orders.o_ordertime)
            & (lineitem.l_shiptime <= orders.o_ordertime + F.expr(f"INTERVAL {_INTERVAL_DAYS} DAYS"))
        )
        return orders.join(lineitem, condition, how)

    return build


_OVER_COLUMNS = ["l_orderkey", "l_linenumber", "l_partkey", "l_extendedprice", "l_shiptime", "p_type"]


#: The coarse OVER case partitions by ``l_partkey`` modulo this: 15 partitions against ``p_type``'s 150, so each
#: partition holds 10× the rows, frame and MAX view.
COARSE_PARTITIONS = 15
_OVER_SQL = (
    "SELECT {columns}, MAX(l_extendedprice) OVER (PARTITION BY {partition} ORDER BY l_shiptime "
    "RANGE BETWEEN INTERVAL '7' DAY PRECEDING AND CURRENT ROW) AS max_price FROM {source}"
)


def _over(partition: str):
    def build(s: Streams) -> DataFrame:
        items = s["lineitem"]().select(*_OVER_COLUMNS, *_CHANGELOG)
        if partition == "p_group":
            items = items.withColumn("p_group", F.col("l_partkey") % COARSE_PARTITIONS)
        return over_aggregate(
            items,
            partition_by=[partition],
            order_by="l_shiptime",
            frame="range",
            preceding_ms=7 * _DAY_MS,
            aggregates=[("max_price", "MAX", "l_extendedprice")],
        )

    return build


_GROUP_BY = ["l_returnflag", "l_linestatus"]
_GROUP_SQL = (
    "SELECT l_returnflag, l_linestatus, COUNT(*) AS cnt, SUM(l_extendedprice) AS sum_price, "
    "MAX(l_extendedprice) AS max_price FROM lineitem GROUP BY l_returnflag, l_linestatus"
)
#: Flink's mini-batch as its documentation sets it up (local-global aggregation by default).
_FLINK_MINI_BATCH = (
    ("table.exec.mini-batch.enabled", "true"),
    ("table.exec.mini-batch.allow-latency", "1 s"),
    ("table.exec.mini-batch.size", "5000"),
)
_AGGREGATES = [("cnt", "COUNT", None), ("sum_price", "SUM", "l_extendedprice"), ("max_price", "MAX", "l_extendedprice")]


def _native_group(s: Streams) -> DataFrame:
    return (
        _plain(s, "lineitem")
        .groupBy(*_GROUP_BY)
        .agg(
            F.count(F.lit(1)).alias("cnt"),
            F.sum("l_extendedprice").alias("sum_price"),
            F.max("l_extendedprice").alias("max_price"),
        )
    )


def _lineitem_columns() -> str:
    return ", ".join([*LINEITEM.schema.names, "p_type"])


CASES: tuple[Case, ...] = (
    Case(
        REGULAR_INNER,
        ("lineitem", "orders"),
        "SELECT * FROM lineitem AS l JOIN orders AS o ON l.l_orderkey = o.o_orderkey",
        _regular("inner"),
        _native_regular_inner,
    ),
    Case(
        REGULAR_INNER_COARSE,
        ("lineitem", "orders"),
        f"SELECT * FROM (SELECT *, {_L_GROUP} AS l_group FROM lineitem) AS l JOIN (SELECT *, {_O_GROUP} AS o_group "
        "FROM orders) AS o ON l.l_group = o.o_group AND l.l_orderkey - o.o_orderkey = 0",
        _regular_coarse,
        no_native="Spark would make the order keys' equality a join key: the fine query",
    ),
    Case(
        "regular left join",
        ("lineitem", "orders"),
        "SELECT * FROM lineitem AS l LEFT JOIN orders AS o ON l.l_orderkey = o.o_orderkey",
        _regular("left"),
        no_native="Spark's outer stream-stream join needs a time bound",
    ),
    Case(
        "interval inner join",
        ("orders", "lineitem"),
        _INTERVAL_SQL.format(join="JOIN"),
        _interval("inner"),
        _native_interval("inner"),
    ),
    Case(
        "interval left join",
        ("orders", "lineitem"),
        _INTERVAL_SQL.format(join="LEFT JOIN"),
        _interval("left"),
        _native_interval("left_outer"),
    ),
    Case(
        "temporal join",
        ("orders", "rates"),
        "SELECT * FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.o_ordertime AS r ON o.o_currency = r.currency",
        lambda s: temporal_join(
            s["orders"](),
            s["rates"](),
            on=[("o_currency", "currency")],
            probe_time="o_ordertime",
            version_time="rate_time",
        ),
        no_native="Spark has no event-time temporal join",
    ),
    Case(
        OVER,
        ("lineitem",),
        _OVER_SQL.format(columns=", ".join(_OVER_COLUMNS), partition="p_type", source="lineitem"),
        _over("p_type"),
        no_native="Spark rejects a window function over a stream",
    ),
    Case(
        OVER_COARSE,
        ("lineitem",),
        _OVER_SQL.format(
            columns=", ".join(_OVER_COLUMNS),
            partition="p_group",
            source=f"(SELECT *, MOD(l_partkey, {COARSE_PARTITIONS}) AS p_group FROM lineitem)",
        ),
        _over("p_group"),
        no_native="Spark rejects a window function over a stream",
    ),
    Case(
        "group aggregate",
        ("lineitem",),
        _GROUP_SQL,
        lambda s: group_aggregate(s["lineitem"](), group_by=_GROUP_BY, aggregates=_AGGREGATES, insert_only_input=True),
        _native_group,
        native_mode="update",
    ),
    Case(
        "group aggregate (mini-batch)",
        ("lineitem",),
        _GROUP_SQL,
        lambda s: group_aggregate(
            s["lineitem"](), group_by=_GROUP_BY, aggregates=_AGGREGATES, insert_only_input=True, mini_batch=True
        ),
        _native_group,
        native_mode="update",
        flink_settings=_FLINK_MINI_BATCH,
    ),
    Case(
        "deduplication (keep first)",
        ("lineitem",),
        f"SELECT {_lineitem_columns()} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY l_orderkey "
        "ORDER BY l_shiptime ASC) AS rn FROM lineitem) WHERE rn = 1",
        lambda s: deduplicate(s["lineitem"](), key=["l_orderkey"], order_by="l_shiptime", keep="first"),
        lambda s: _plain(s, "lineitem").dropDuplicates(["l_orderkey"]),
    ),
)

#: The cost per row as the state per key grows 10×: (query, the same query with 10× the rows per key, what grew).
STATE_GROWTH: tuple[tuple[str, str, str], ...] = (
    (
        REGULAR_INNER,
        REGULAR_INNER_COARSE,
        (
            f"order keys rounded down to multiples of {COARSE_ORDERS}: ~40 line items "
            "and ~10 orders per join key instead of ~4 and 1"
        ),
    ),
    (OVER, OVER_COARSE, f"{COARSE_PARTITIONS} OVER partitions instead of 150"),
)
