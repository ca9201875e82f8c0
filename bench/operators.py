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
  Flink's keep-first-on-rowtime deduplication of an input in rowtime order;
- window aggregates: Spark's ``window()`` (TUMBLE, HOP) and ``session_window()`` (SESSION) aggregation in output mode
  ``append`` (one row per window once the watermark passes it, as Flink's);
- window join: Spark's stream-stream inner join on the key and the two sides' ``window()`` columns (Spark evicts its
  state by the windows' watermark);
- Top-N: none (Spark has no streaming Top-N).
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
from streamjoin.runtime.rank import rank
from streamjoin.runtime.regular_join import regular_join
from streamjoin.runtime.temporal_join import temporal_join
from streamjoin.runtime.window_aggregate import window_aggregate
from streamjoin.runtime.window_join import window_join
from streamjoin.runtime.window_table_function import assign_windows

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


_WINDOW_GROUP_SQL = (
    "SELECT {key}, window_start, window_end, COUNT(*) AS cnt, SUM(l_extendedprice) AS sum_price, "
    "MAX(l_extendedprice) AS max_price FROM TABLE({tvf}) GROUP BY {key}, window_start, window_end"
)
_TUMBLE = "TUMBLE(TABLE lineitem, DESCRIPTOR(l_shiptime), INTERVAL '1' DAY)"
_HOP = "HOP(TABLE lineitem, DESCRIPTOR(l_shiptime), INTERVAL '1' DAY, INTERVAL '7' DAY)"
_SESSION = "SESSION(TABLE lineitem PARTITION BY l_partkey, DESCRIPTOR(l_shiptime), INTERVAL '30' DAY)"
_SESSION_GAP_MS = 30 * _DAY_MS


def _window_group(key: str, kind: str, size_ms: int, step_ms: int | None = None):
    def build(s: Streams) -> DataFrame:
        items = s["lineitem"]().select(key, "l_extendedprice", "l_shiptime", *_CHANGELOG)
        windowed = assign_windows(items, kind=kind, time_column="l_shiptime", size_ms=size_ms, step_ms=step_ms)
        return window_aggregate(
            windowed,
            group_by=[key],
            window_start="window_start",
            window_end="window_end",
            aggregates=_AGGREGATES,
            session_gap_ms=size_ms if kind == "SESSION" else None,
        )

    return build


def _native_window_group(key: str, window) -> Callable[[Streams], DataFrame]:
    def build(s: Streams) -> DataFrame:
        return (
            _plain(s, "lineitem")
            .groupBy(key, window(F.col("l_shiptime")).alias("w"))
            .agg(
                F.count(F.lit(1)).alias("cnt"),
                F.sum("l_extendedprice").alias("sum_price"),
                F.max("l_extendedprice").alias("max_price"),
            )
            .select(
                key,
                F.col("w.start").alias("window_start"),
                F.col("w.end").alias("window_end"),
                "cnt",
                "sum_price",
                "max_price",
            )
        )

    return build


#: Each order with the rates of its currency in the same day window: orders ⋈ rates per currency and TUMBLE day. The
#: rowtimes are left out of the output: Spark's join refuses two event-time columns per side (the rowtime and its
#: window), Flink's sink two rowtime attributes.
_WINDOW_JOIN_SQL = (
    "SELECT o.o_orderkey, o.o_custkey, o.o_totalprice, o.o_currency, o.window_start, o.window_end, r.rate "
    "FROM (SELECT * FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(o_ordertime), INTERVAL '1' DAY))) AS o "
    "JOIN (SELECT * FROM TABLE(TUMBLE(TABLE rates, DESCRIPTOR(rate_time), INTERVAL '1' DAY))) AS r "
    "ON o.o_currency = r.currency AND o.window_start = r.window_start AND o.window_end = r.window_end"
)
_WINDOW_JOIN_COLUMNS = (["o_orderkey", "o_custkey", "o_totalprice", "o_currency"], ["currency", "rate"])


def _window_join(s: Streams) -> DataFrame:
    def windowed(table: str, time: str, columns: list[str], prefix: str) -> DataFrame:
        df = assign_windows(s[table](), kind="TUMBLE", time_column=time, size_ms=_DAY_MS)
        return df.select(
            *columns,
            F.col("window_start").alias(f"{prefix}window_start"),
            F.col("window_end").alias(f"{prefix}window_end"),
            *_CHANGELOG,
        )

    return window_join(
        windowed("orders", "o_ordertime", _WINDOW_JOIN_COLUMNS[0], ""),
        windowed("rates", "rate_time", _WINDOW_JOIN_COLUMNS[1], "r_"),
        on=[("o_currency", "currency")],
        left_window_end="window_end",
        right_window_end="r_window_end",
    )


def _native_window_join(s: Streams) -> DataFrame:
    orders = _plain(s, "orders").withColumn("o_window", F.window("o_ordertime", "1 day"))
    rates = _plain(s, "rates").withColumn("r_window", F.window("rate_time", "1 day"))
    orders = orders.select(*_WINDOW_JOIN_COLUMNS[0], "o_window")
    rates = rates.select(*_WINDOW_JOIN_COLUMNS[1], "r_window")
    return orders.join(rates, (orders.o_currency == rates.currency) & (orders.o_window == rates.r_window))


_TOP_N_SQL = (
    "SELECT o_custkey, o_orderkey, o_totalprice, rn FROM (SELECT o_custkey, o_orderkey, o_totalprice, ROW_NUMBER() "
    "OVER (PARTITION BY o_custkey ORDER BY o_totalprice DESC) AS rn FROM orders) WHERE rn <= 3"
)


def _top_n(s: Streams) -> DataFrame:
    orders = s["orders"]().select("o_custkey", "o_orderkey", "o_totalprice", *_CHANGELOG)
    return rank(
        orders,
        partition_by=["o_custkey"],
        order_by=[("o_totalprice", False, False)],
        rank_start=1,
        rank_end=3,
        rank_column="rn",
        strategy="append",
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

CASES += (
    Case(
        "window aggregate (TUMBLE 1 day)",
        ("lineitem",),
        _WINDOW_GROUP_SQL.format(key="l_returnflag", tvf=_TUMBLE),
        _window_group("l_returnflag", "TUMBLE", _DAY_MS),
        _native_window_group("l_returnflag", lambda t: F.window(t, "1 day")),
    ),
    Case(
        "window aggregate (HOP 7 days every day)",
        ("lineitem",),
        _WINDOW_GROUP_SQL.format(key="l_returnflag", tvf=_HOP),
        _window_group("l_returnflag", "HOP", 7 * _DAY_MS, _DAY_MS),
        _native_window_group("l_returnflag", lambda t: F.window(t, "7 days", "1 day")),
    ),
    Case(
        "window aggregate (SESSION 30 days per part)",
        ("lineitem",),
        _WINDOW_GROUP_SQL.format(key="l_partkey", tvf=_SESSION),
        _window_group("l_partkey", "SESSION", _SESSION_GAP_MS),
        _native_window_group("l_partkey", lambda t: F.session_window(t, "30 days")),
    ),
    Case(
        "window join (TUMBLE 1 day)",
        ("orders", "rates"),
        _WINDOW_JOIN_SQL,
        _window_join,
        _native_window_join,
    ),
    Case(
        "Top-N (3 per customer)",
        ("orders",),
        _TOP_N_SQL,
        _top_n,
        no_native="Spark has no streaming Top-N",
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
