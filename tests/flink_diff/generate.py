"""Seeded generator of streaming-SQL test cases in the ``flink-cases`` format, one family per operator.

    python tests/flink_diff/generate.py --n 114 --seed 13 --out-dir DIR
    python tests/flink_diff/generate.py --chains --n 44 --seed 13 --out-dir DIR   # chains of operators

writes ``DIR/NAME.json`` (format: ``tests/data/flink-cases/README.md``). Case ``i`` belongs to family
``FAMILIES[i % len(FAMILIES)]`` and is drawn from its own ``random.Random(f"{seed}-{i}")``, so one case
can be made again from ``(seed, i)`` alone and adding families does not change the others' rows.

The inputs exercise: inserts, updates (``-U``/``+U`` pairs, adjacent in the table), deletes, duplicate
rows and keys, equal timestamps, out-of-order rows, rows behind the watermark (late), empty inputs,
null keys and values, watermark delays of 0 (strictly ascending), 1 ms and seconds; the queries: regular
joins of every type (with and without primary keys and a residual predicate), semi joins (``IN``,
``EXISTS``), anti joins (``NOT EXISTS``, ``NOT IN``), interval joins of every type, event-time temporal
joins (INNER/LEFT), OVER (ROWS/RANGE, bounded/unbounded, partitioned or not), deduplication (keep
first/last, on rowtime and proctime) and group aggregates over changelogs. With ``--chains``, chains of
operators instead (:data:`CHAIN_FAMILIES`: joins into aggregates, an aggregate into a join, and more; each case
with the ``upsert_key`` of its output). Standard library only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
from pathlib import Path

FAMILIES = [
    "join_inner",
    "join_left",
    "join_right",
    "join_full",
    "semi_in",
    "semi_exists",
    "anti_not_exists",
    "anti_not_in",
    "interval_inner",
    "interval_left",
    "interval_right",
    "interval_full",
    "temporal_inner",
    "temporal_left",
    "over_rows",
    "over_range",
    "dedup_first",
    "dedup_last",
    "group_agg",
]
#: Families whose changelogs are compared up to the order within runs of one RowKind (``compare.in_runs``):
#: a regular join emits one input row's matches in its state's order (Flink: a Java HashMap's), and an
#: event-time operator emits the rows of different keys that one watermark fires in its timers' order
#: (Flink's timer heap gives them in an order that is not even stable from run to run).
ORDER_WITHIN_RUNS_FAMILIES = {
    "join_inner",
    "join_left",
    "join_right",
    "join_full",
    "semi_in",
    "semi_exists",
    "anti_not_exists",
    "anti_not_in",
    "interval_inner",
    "interval_left",
    "interval_right",
    "interval_full",
    "temporal_inner",
    "temporal_left",
    "over_rows",
    "over_range",
}

_BASE = dt.datetime(2024, 1, 1, 10, 0, 0)


def _ts(ms: int) -> str:
    return (_BASE + dt.timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:23]


def _maybe_null(rng: random.Random, value, p: float = 0.1):
    return None if rng.random() < p else value


def _changelog(rng: random.Random, make_row, n_ops: int, key_index: int | None) -> list[list]:
    """A changelog of ``n_ops`` operations: inserts (some duplicating a live row), ``-U``/``+U`` updates, deletes.

    ``make_row(key)`` gives a new row (``key`` None: any key); with ``key_index`` (a primary key), an insert uses
    a key not live, and an update keeps the key.
    """
    live: list[list] = []
    out: list[list] = []
    for _ in range(n_ops):
        op = rng.random()
        if live and op < 0.2:
            old = rng.choice(live)
            new = make_row(old[key_index] if key_index is not None else None)
            live[live.index(old)] = new
            out += [["-U", *old], ["+U", *new]]
        elif live and op < 0.35:
            old = rng.choice(live)
            live.remove(old)
            out.append(["-D", *old])
        elif key_index is None and live and op < 0.45:
            row = list(rng.choice(live))  # a duplicate row
            live.append(row)
            out.append(["+I", *row])
        else:
            row = make_row(None)
            if key_index is not None and any(r[key_index] == row[key_index] for r in live):
                continue
            live.append(row)
            out.append(["+I", *row])
    return out


def _interleave(rng: random.Random, tables: list[dict]) -> list[str]:
    """A random arrival order across tables that keeps each ``-U`` right before its ``+U`` of the same table."""
    units = {t["name"]: [] for t in tables}
    for t in tables:
        rows = t["rows"]
        i = 0
        while i < len(rows):
            size = 2 if rows[i][0] == "-U" and i + 1 < len(rows) and rows[i + 1][0] == "+U" else 1
            units[t["name"]].append(size)
            i += size
    arrival: list[str] = []
    while any(units.values()):
        name = rng.choice([n for n, u in units.items() if u])
        arrival += [name] * units[name].pop(0)
    return arrival


def _event_times(rng: random.Random, n: int, step_ms: int, disorder_ms: int, late_p: float) -> list[int]:
    """``n`` rowtimes (ms after the base) that mostly increase, with ties, jitter and some far-behind (late) ones."""
    times, t = [], 0
    for _ in range(n):
        t += rng.choice([0, step_ms, step_ms, 2 * step_ms])
        value = t - rng.randint(0, disorder_ms) if disorder_ms else t
        if times and rng.random() < late_p:
            value = max(0, min(times) - rng.randint(1, 3) * step_ms)
        times.append(max(0, value))
    return times


# -- regular joins, semi and anti joins ------------------------------------------------------------------------


def _ab_tables(rng: random.Random, with_pk: bool) -> list[dict]:
    tables = []
    for prefix in "ab":
        keys = [1, 2, 3, 4] if with_pk else [1, 2, 3, None]

        def make_row(key, prefix=prefix, keys=keys):
            k = key if key is not None else rng.choice(keys)
            return [k, _maybe_null(rng, rng.randrange(0, 60, 5)), _maybe_null(rng, f"{prefix}-{rng.randint(1, 9)}")]

        n_ops = 0 if rng.random() < 0.08 else rng.randint(1, 9)
        t = {
            "name": prefix.upper(),
            "columns": [[f"{prefix}1", "INT"], [f"{prefix}2", "INT"], [f"{prefix}3", "STRING"]],
            "rows": _changelog(rng, make_row, n_ops, 0 if with_pk else None),
        }
        if with_pk:
            t["primary_key"] = [f"{prefix}1"]
            if rng.random() < 0.25:  # an upsert changelog: no -U, Flink normalises it (ChangelogNormalize)
                t["rows"] = [r for r in t["rows"] if r[0] != "-U"]
                t["changelog_mode"] = "upsert"
        tables.append(t)
    return tables


def _regular_join(rng: random.Random, family: str) -> dict:
    tables = _ab_tables(rng, with_pk=rng.random() < 0.4)
    residual = rng.choice(["", "", " AND a2 > b2", " AND a3 <> b3"])
    kind = {"join_inner": "JOIN", "join_left": "LEFT JOIN", "join_right": "RIGHT JOIN", "join_full": "FULL JOIN"}[
        family
    ]
    query = f"SELECT a1, a2, a3, b1, b2, b3 FROM A {kind} B ON a1 = b1{residual}"
    return {"tables": tables, "query": query}


def _semi_anti(rng: random.Random, family: str) -> dict:
    tables = _ab_tables(rng, with_pk=rng.random() < 0.3)
    residual = rng.choice(["", " AND a2 > b2"])
    filter_b = rng.choice(["", " WHERE b2 < 40"])
    query = {
        "semi_in": f"SELECT a1, a2, a3 FROM A WHERE a1 IN (SELECT b1 FROM B{filter_b})",
        "semi_exists": f"SELECT a1, a2, a3 FROM A WHERE EXISTS (SELECT 1 FROM B WHERE a1 = b1{residual})",
        "anti_not_exists": f"SELECT a1, a2, a3 FROM A WHERE NOT EXISTS (SELECT 1 FROM B WHERE a1 = b1{residual})",
        "anti_not_in": f"SELECT a1, a2, a3 FROM A WHERE a1 NOT IN (SELECT b1 FROM B{filter_b})",
    }[family]
    return {"tables": tables, "query": query}


# -- event time: interval and temporal joins -------------------------------------------------------------------


def _delay(rng: random.Random) -> int:
    return rng.choice([0, 0, 1, 30_000, 120_000])


def _interval_join(rng: random.Random, family: str) -> dict:
    tables = []
    for name, column in (("Orders", "ts"), ("Shipments", "ship_ts")):
        n = 0 if rng.random() < 0.08 else rng.randint(1, 8)
        times = _event_times(rng, n, 60_000, rng.choice([0, 0, 90_000]), 0.15)
        tables.append(
            {
                "name": name,
                "columns": [["order_id", "INT"], [column, "TIMESTAMP(3)"]],
                "rowtime": {"column": column, "watermark_delay_ms": _delay(rng)},
                "rows": [["+I", _maybe_null(rng, rng.randint(1, 3)), _ts(t)] for t in times],
            }
        )
    lower, upper = rng.choice([0, 1, 2, 5]), rng.choice([0, 1, 2, 5])
    condition = rng.choice(
        [
            f"b.ship_ts BETWEEN a.ts - INTERVAL '{lower}' MINUTE AND a.ts + INTERVAL '{upper}' MINUTE",
            f"b.ship_ts >= a.ts - INTERVAL '{lower}' MINUTE AND b.ship_ts < a.ts + INTERVAL '{upper + 1}' MINUTE",
            f"a.ts > b.ship_ts - INTERVAL '{upper + 1}' MINUTE AND a.ts <= b.ship_ts + INTERVAL '{lower}' MINUTE",
        ]
    )
    residual = " AND b.order_id <> 2" if rng.random() < 0.15 else ""  # neither equality nor time bound
    kind = {
        "interval_inner": "JOIN",
        "interval_left": "LEFT JOIN",
        "interval_right": "RIGHT JOIN",
        "interval_full": "FULL JOIN",
    }[family]
    query = (
        f"SELECT a.order_id, a.ts, b.order_id AS ship_order_id, b.ship_ts FROM Orders a {kind} Shipments b "
        f"ON a.order_id = b.order_id AND {condition}{residual}"
    )
    return {"tables": tables, "query": query}


def _temporal_join(rng: random.Random, family: str) -> dict:
    currencies = ["EUR", "USD", "JPY"]
    n_orders = 0 if rng.random() < 0.08 else rng.randint(1, 8)
    order_times = _event_times(rng, n_orders, 60_000, rng.choice([0, 0, 45_000]), 0.15)
    orders = {
        "name": "Orders",
        "columns": [["order_id", "INT"], ["currency", "STRING"], ["amount", "INT"], ["order_time", "TIMESTAMP(3)"]],
        "rowtime": {"column": "order_time", "watermark_delay_ms": _delay(rng)},
        "rows": [
            ["+I", i + 1, _maybe_null(rng, rng.choice(currencies)), rng.randint(1, 100), _ts(t)]
            for i, t in enumerate(order_times)
        ],
    }
    rate_rows, live, t = [], {}, -60_000
    for _ in range(rng.randint(0, 7)):
        t += rng.choice([0, 30_000, 60_000, 120_000])
        currency = rng.choice(currencies)
        new = [currency, rng.randint(1, 9), _ts(max(0, t - (rng.randint(0, 60_000) if rng.random() < 0.15 else 0)))]
        if currency in live and rng.random() < 0.15:
            rate_rows.append(["-D", *live.pop(currency)])
        elif currency in live:
            rate_rows += [["-U", *live[currency]], ["+U", *new]]
            live[currency] = new
        else:
            rate_rows.append(["+I", *new])
            live[currency] = new
    rates = {
        "name": "RatesHistory",
        "columns": [["currency", "STRING"], ["rate", "INT"], ["update_time", "TIMESTAMP(3)"]],
        "primary_key": ["currency"],
        "rowtime": {"column": "update_time", "watermark_delay_ms": rng.choice([0, 0, 1, 30_000])},
        "rows": rate_rows,
    }
    kind = "JOIN" if family == "temporal_inner" else "LEFT JOIN"
    query = (
        "SELECT o.order_id, o.order_time, o.currency, o.amount, r.rate, r.update_time FROM Orders AS o "
        f"{kind} RatesHistory FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency"
    )
    return {"tables": [orders, rates], "query": query}


# -- OVER, deduplication, group aggregate ----------------------------------------------------------------------


def _items(rng: random.Random, n: int, disorder_ms: int, late_p: float, delay: int) -> dict:
    times = _event_times(rng, n, 60_000, disorder_ms, late_p)
    return {
        "name": "items",
        "columns": [["item_id", "STRING"], ["item_type", "STRING"], ["ts", "TIMESTAMP(3)"], ["price", "INT"]],
        "rowtime": {"column": "ts", "watermark_delay_ms": delay},
        "rows": [
            [
                "+I",
                f"I{i:02d}",
                _maybe_null(rng, rng.choice(["x", "y"]), 0.05),
                _ts(t),
                _maybe_null(rng, rng.randint(1, 60)),
            ]
            for i, t in enumerate(times)
        ],
    }


def _over(rng: random.Random, family: str) -> dict:
    n = 0 if rng.random() < 0.05 else rng.randint(1, 10)
    table = _items(rng, n, rng.choice([0, 90_000]), 0.15, _delay(rng))
    partition = rng.choice(["PARTITION BY item_type ", ""])
    if family == "over_rows":
        frame = rng.choice(
            [
                "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
                f"ROWS BETWEEN {rng.randint(0, 3)} PRECEDING AND CURRENT ROW",
            ]
        )
    else:
        frame = rng.choice(
            [
                "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
                f"RANGE BETWEEN INTERVAL '{rng.choice([1, 2, 5])}' MINUTE PRECEDING AND CURRENT ROW",
            ]
        )
    aggregates = rng.sample(
        [
            "MAX(price)",
            "MIN(price)",
            "SUM(price)",
            "COUNT(*)",
            "COUNT(price)",
            "AVG(price)",
            "FIRST_VALUE(price)",
            "LAST_VALUE(price)",
            "COUNT(DISTINCT price)",
        ],
        rng.randint(1, 3),
    )
    columns = ", ".join(f"{a} OVER w AS agg{i}" for i, a in enumerate(aggregates))
    query = f"SELECT item_id, item_type, ts, price, {columns} FROM items WINDOW w AS ({partition}ORDER BY ts {frame})"
    return {"tables": [table], "query": query}


def _dedup(rng: random.Random, family: str) -> dict:
    n = 0 if rng.random() < 0.05 else rng.randint(1, 10)
    table = _items(rng, n, rng.choice([0, 90_000]), 0.1, _delay(rng))
    order = rng.choice(["ts", "ts", "pt"])
    if order == "pt":
        table["proctime"] = "pt"
    direction = "ASC" if family == "dedup_first" else "DESC"
    query = (
        f"SELECT item_id, item_type, ts, price FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY item_type "
        f"ORDER BY {order} {direction}) AS rn FROM items) WHERE rn = 1"
    )
    return {"tables": [table], "query": query}


def _group_agg(rng: random.Random, family: str, max_ops: int = 12) -> dict:
    with_pk = rng.random() < 0.4

    def make_row(key):
        return [
            key if key is not None else rng.randint(1, 6),
            _maybe_null(rng, rng.choice(["x", "y", "z"])),
            _maybe_null(rng, rng.randint(0, 30)),
        ]

    n_ops = 0 if rng.random() < 0.05 else rng.randint(1, max_ops)
    table = {
        "name": "src",
        "columns": [["id", "INT"], ["k", "STRING"], ["v", "INT"]],
        "rows": _changelog(rng, make_row, n_ops, 0 if with_pk else None),
    }
    if with_pk:
        table["primary_key"] = ["id"]
    aggregates = rng.sample(
        ["COUNT(*)", "SUM(v)", "MIN(v)", "MAX(v)", "AVG(v)", "COUNT(v)", "COUNT(DISTINCT v)"], rng.randint(1, 3)
    )
    having = rng.choice(["", "", " HAVING COUNT(*) > 1"])
    columns = ", ".join(f"{a} AS agg{i}" for i, a in enumerate(aggregates))
    return {"tables": [table], "query": f"SELECT k, {columns} FROM src GROUP BY k{having}"}


_BUILDERS = {
    **{f: _regular_join for f in ("join_inner", "join_left", "join_right", "join_full")},
    **{f: _semi_anti for f in ("semi_in", "semi_exists", "anti_not_exists", "anti_not_in")},
    **{f: _interval_join for f in ("interval_inner", "interval_left", "interval_right", "interval_full")},
    **{f: _temporal_join for f in ("temporal_inner", "temporal_left")},
    "over_rows": _over,
    "over_range": _over,
    "dedup_first": _dedup,
    "dedup_last": _dedup,
    "group_agg": _group_agg,
}


def family_of(name: str) -> str:
    """The family of a generated case from its name ``<family>_<seed>_<index>``."""
    return name.rsplit("_", 2)[0]


def generate_case(seed: int, index: int) -> dict:
    """Case ``index`` of ``seed``: ``{"name", "description", "tables", "arrival", "query"}``."""
    family = FAMILIES[index % len(FAMILIES)]
    rng = random.Random(f"{seed}-{index}")
    case = _BUILDERS[family](rng, family)
    return {
        "name": f"{family}_{seed}_{index:04d}",
        "description": f"generated: family {family}, seed {seed}, index {index} (tests/flink_diff/generate.py)",
        "tables": case["tables"],
        "arrival": _interleave(rng, case["tables"]),
        "query": case["query"],
    }


def generate_cases(n: int, seed: int) -> list[dict]:
    """Cases ``0 … n-1`` of ``seed``."""
    return [generate_case(seed, i) for i in range(n)]


#: The setting a mini-batch case runs with, on Flink and on streamjoin.
MINI_BATCH_SETUP = "SET 'table.exec.mini-batch.enabled' = 'true'"


def generate_mini_batch_case(seed: int, index: int) -> dict:
    """Group-aggregate case ``index`` of ``seed`` in mini-batch mode: longer changelogs (up to 40 operations over
    three groups), so that a bundle of seven rows holds several changes of one group."""
    rng = random.Random(f"mini-batch-{seed}-{index}")
    case = _group_agg(rng, "group_agg", max_ops=40)
    return {
        "name": f"group_agg_mini_batch_{seed}_{index:04d}",
        "description": (
            f"generated: group_agg in mini-batch mode, seed {seed}, index {index} (tests/flink_diff/generate.py)"
        ),
        "tables": case["tables"],
        "arrival": _interleave(rng, case["tables"]),
        "setup": [MINI_BATCH_SETUP],
        "query": case["query"],
    }


# -- chains of operators ---------------------------------------------------------------------------------------
#
# Each chain case feeds the output of one stateful operator into another: joins into aggregates, an aggregate into
# a join, a deduplication, a UNION ALL or an event-time join into an aggregate. Their names are
# ``<family>_<seed>_<index>`` with families starting with ``chain_``; case ``i`` of a seed is of family
# ``CHAIN_FAMILIES[i % len(CHAIN_FAMILIES)]`` and variant ``i // len(CHAIN_FAMILIES)`` of it (a join type, a
# deduplication), drawn from its own ``random.Random(f"chain-{seed}-{i}")``. A case whose output has an upsert key
# (the GROUP BY columns; ``[]`` for a global aggregate) records it as ``"upsert_key"``: its changes can be compared
# key by key (``compare.per_key_difference``).

CHAIN_FAMILIES = [
    "chain_join_agg",  # regular join (variant: inner, left, right, full) -> GROUP BY
    "chain_left_agg_by_right",  # A LEFT JOIN B -> GROUP BY B.t (the padded side's column)
    "chain_join_agg_large",  # unkeyed A JOIN keyed B, ~100 changes each -> GROUP BY A.s, B.t
    "chain_orders_region",  # two upsert sources, an order's +U moves it to another customer -> GROUP BY region
    "chain_agg_join",  # GROUP BY -> joined to a table keyed by the group key or by its own id
    "chain_join_join_agg",  # A JOIN B [LEFT] JOIN C -> GROUP BY
    "chain_dedup_join_agg",  # deduplication (variant: keep first/last on rowtime/proctime) -> JOIN -> GROUP BY
    "chain_union_agg",  # UNION ALL of two changelogs -> GROUP BY
    "chain_left_null_agg",  # A LEFT JOIN B WHERE <B's column> IS NULL -> global aggregate
    "chain_temporal_agg",  # event-time temporal join (variant: inner, left) -> GROUP BY
    "chain_interval_agg",  # interval join (variant: inner, left, right, full) -> GROUP BY
]
#: Stored chain cases of seed 13 (tests/data/flink-diff/README.md): four variants of each family.
CHAIN_CASES = len(CHAIN_FAMILIES) * 4
#: The chain families whose changelogs are compared up to the order within runs of one RowKind: every one with a
#: join before its last operator (one input row's matches come in Flink's HashMap order).
ORDER_WITHIN_RUNS_FAMILIES |= set(CHAIN_FAMILIES) - {"chain_union_agg"}
#: The chain families whose changelogs are compared key by key even at one row per micro-batch, as Flink's own order
#: across keys changes from run to run: an event-time temporal join emits the probe rows of several keys that one
#: watermark fires in its timers' order (in three runs of the stored cases, three of the four had the groups' updates
#: interleaved otherwise at least once, each group's own in the same order); an aggregate's change reaching a LEFT join
#: with several matches emits their retractions and insertions in an order that changed in one of four runs of
#: chain_agg_join_13_0004 (each row's own changes in the same order).
PER_KEY_FAMILIES = {"chain_temporal_agg", "chain_agg_join"}

_JOIN_KINDS = ["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"]


def _chain_table(
    rng: random.Random,
    name: str,
    columns: list[list[str]],
    make_row,
    n_ops: int,
    key: str | None = None,
    upsert: bool = False,
) -> dict:
    """A changelog table; with ``key`` its primary key (column name), ``upsert``: an upsert changelog (no ``-U``)."""
    names = [c for c, _ in columns]
    rows = _changelog(rng, make_row, n_ops, names.index(key) if key else None)
    table = {"name": name, "columns": columns, "rows": rows}
    if key:
        table["primary_key"] = [key]
        if upsert:
            table["rows"] = [r for r in rows if r[0] != "-U"]
            table["changelog_mode"] = "upsert"
    return table


def _keyed(rng: random.Random, choices: list) -> tuple[str | None, bool]:
    """A primary key drawn from ``choices`` (None: no key) and whether the table is then an upsert changelog."""
    key = rng.choice(choices)
    return key, key is not None and rng.random() < 0.35


def _ab_chain_tables(
    rng: random.Random,
    n_ops: tuple[int, int],
    n_keys: int = 3,
    a_keys=(None, None, "id", "k"),
    b_keys=(None, "k", "k", "id"),
    b_upsert: bool | None = None,
) -> list[dict]:
    """``A(id, k, s, v)`` and ``B(id, k, t, w)``, joined on ``k`` (NULL in an unkeyed table now and then); each
    without a primary key or keyed by one of ``a_keys``/``b_keys`` (an upsert changelog at random, or as
    ``b_upsert`` says for B)."""
    tables = []
    for name, text, number, keys in (("A", "s", "v", a_keys), ("B", "t", "w", b_keys)):
        key, upsert = _keyed(rng, list(keys))
        if name == "B" and b_upsert is not None:
            upsert = b_upsert
        prefix = name.lower()

        def make_row(pk, key=key, prefix=prefix):
            row = [
                rng.randint(1, 8),
                _maybe_null(rng, rng.randint(1, n_keys), 0.0 if key == "k" else 0.1),
                _maybe_null(rng, f"{prefix}{rng.randint(1, 3)}"),
                _maybe_null(rng, rng.randrange(0, 50, 5)),
            ]
            if pk is not None:
                row[0 if key == "id" else 1] = pk
            return row

        columns = [["id", "INT"], ["k", "INT"], [text, "STRING"], [number, "INT"]]
        tables.append(_chain_table(rng, name, columns, make_row, rng.randint(*n_ops), key, upsert))
    return tables


def _select(keys: list[str], aggregates: list[str]) -> str:
    return ", ".join([*keys, *(f"{a} AS agg{i}" for i, a in enumerate(aggregates))])


def _chain_join_agg(rng: random.Random, variant: int) -> dict:
    tables = _ab_chain_tables(rng, (4, 12))
    kind = _JOIN_KINDS[variant % 4]
    group = rng.choice([["A.s"], ["B.t"], ["A.s", "B.t"], ["A.k"], ["B.k"]])
    aggregates = [
        "COUNT(*)",
        *rng.sample(
            [
                "COUNT(DISTINCT A.s)",
                "COUNT(DISTINCT B.w)",
                "SUM(A.v)",
                "SUM(B.w)",
                "MIN(B.w)",
                "MAX(A.v)",
                "MIN(A.v)",
                "MAX(B.t)",
                "COUNT(B.w)",
            ],
            3,
        ),
    ]
    query = f"SELECT {_select(group, aggregates)} FROM A {kind} B ON A.k = B.k GROUP BY {', '.join(group)}"
    return {
        "tables": tables,
        "query": query,
        "upsert_key": [g.split(".")[1] for g in group],
        "links": [("A", 1, "B", 1)],
    }


def _chain_left_agg_by_right(rng: random.Random, variant: int) -> dict:
    tables = _ab_chain_tables(rng, (4, 12))
    query = (
        "SELECT B.t, COUNT(*) AS agg0, COUNT(DISTINCT A.s) AS agg1, COUNT(B.w) AS agg2, SUM(A.v) AS agg3 "
        "FROM A LEFT JOIN B ON A.k = B.k GROUP BY B.t"
    )
    return {"tables": tables, "query": query, "upsert_key": ["t"], "links": [("A", 1, "B", 1)]}


def _chain_join_agg_large(rng: random.Random, variant: int) -> dict:
    # A has no key; B is keyed (on the join key in even variants, on its id in odd ones), an upsert changelog in
    # variants 2 and 3.
    b_key = "k" if variant % 2 == 0 else "id"
    tables = _ab_chain_tables(rng, (85, 100), n_keys=6, a_keys=(None,), b_keys=(b_key,), b_upsert=variant >= 2)
    query = (
        "SELECT A.s, B.t, COUNT(*) AS agg0, SUM(A.v) AS agg1, MIN(B.w) AS agg2, MAX(A.v) AS agg3, "
        "COUNT(DISTINCT A.k) AS agg4 FROM A JOIN B ON A.k = B.k GROUP BY A.s, B.t"
    )
    return {"tables": tables, "query": query, "upsert_key": ["s", "t"], "links": [("A", 1, "B", 1)]}


def _chain_orders_region(rng: random.Random, variant: int) -> dict:
    def order(oid):
        return [
            oid if oid is not None else rng.randint(1, 8),
            _maybe_null(rng, rng.randint(1, 4), 0.1),
            rng.randrange(5, 100, 5),
        ]

    def customer(cid):
        return [cid if cid is not None else rng.randint(1, 4), _maybe_null(rng, rng.choice(["EU", "US", "ASIA"]), 0.1)]

    orders = _chain_table(
        rng,
        "orders",
        [["oid", "INT"], ["cid", "INT"], ["amount", "INT"]],
        order,
        rng.randint(6, 16),
        "oid",
        upsert=True,
    )
    customers = _chain_table(
        rng, "customers", [["cid", "INT"], ["region", "STRING"]], customer, rng.randint(3, 9), "cid", upsert=True
    )
    query = (
        "SELECT c.region, COUNT(*) AS agg0, SUM(o.amount) AS agg1, MAX(o.amount) AS agg2 "
        "FROM orders o JOIN customers c ON o.cid = c.cid GROUP BY c.region"
    )
    return {
        "tables": [orders, customers],
        "query": query,
        "upsert_key": ["region"],
        "links": [("orders", 1, "customers", 0)],
    }


def _chain_agg_join(rng: random.Random, variant: int) -> dict:
    aggregates = ["COUNT(*)", *rng.sample(["SUM(v)", "MAX(v)", "MIN(v)", "COUNT(DISTINCT s)"], 2)]
    inner = f"(SELECT k, {_select([], aggregates)} FROM A GROUP BY k) g"
    sums = ", ".join(f"g.agg{i} AS agg{i}" for i in range(len(aggregates)))
    if variant % 2 == 0:
        # Joined to a table keyed by its id: each of its rows meets one group at most, so its id is the output's upsert
        # key. (Not joined back to A itself: A's row and the group's change that row causes reach Flink's join on two
        # paths, in an order that changes from run to run.)
        tables = _ab_chain_tables(rng, (5, 14), a_keys=(None, "id"), b_keys=("id",))
        kind = rng.choice(["JOIN", "LEFT JOIN"])
        query = f"SELECT B.id, B.k, B.w, {sums} FROM B {kind} {inner} ON B.k = g.k"
        return {"tables": tables, "query": query, "upsert_key": ["id"], "links": [("A", 1, "B", 1)]}
    tables = _ab_chain_tables(rng, (5, 14), a_keys=(None, "id"), b_keys=("k",))
    kind = rng.choice(["JOIN", "LEFT JOIN"])
    query = f"SELECT g.k, {sums}, B.t, B.w FROM {inner} {kind} B ON g.k = B.k"
    return {"tables": tables, "query": query, "upsert_key": ["k"], "links": [("A", 1, "B", 1)]}


def _chain_join_join_agg(rng: random.Random, variant: int) -> dict:
    tables = _ab_chain_tables(rng, (3, 9))

    def make_c(key):
        return [key if key is not None else f"b{rng.randint(1, 3)}", _maybe_null(rng, rng.choice(["g1", "g2"]))]

    key, upsert = _keyed(rng, [None, "t"])
    tables.append(_chain_table(rng, "C", [["t", "STRING"], ["g", "STRING"]], make_c, rng.randint(2, 6), key, upsert))
    first, second = rng.choice(_JOIN_KINDS[:2]), rng.choice(_JOIN_KINDS[:3])
    group = rng.choice([["C.g"], ["A.s", "C.g"]])
    aggregates = [
        "COUNT(*)",
        *rng.sample(["SUM(A.v)", "MAX(B.w)", "MIN(A.v)", "COUNT(DISTINCT B.id)", "COUNT(C.t)"], 3),
    ]
    query = (
        f"SELECT {_select(group, aggregates)} FROM A {first} B ON A.k = B.k {second} C ON B.t = C.t "
        f"GROUP BY {', '.join(group)}"
    )
    return {
        "tables": tables,
        "query": query,
        "upsert_key": [g.split(".")[1] for g in group],
        "links": [("A", 1, "B", 1), ("B", 2, "C", 0)],
    }


def _chain_dedup_join_agg(rng: random.Random, variant: int) -> dict:
    direction = "ASC" if variant % 2 == 0 else "DESC"
    order = "ts" if variant < 2 else "pt"
    n = rng.randint(6, 16)
    times = _event_times(rng, n, 60_000, rng.choice([0, 90_000]), 0.1 if order == "ts" else 0.0)
    events = {
        "name": "events",
        "columns": [["id", "STRING"], ["k", "INT"], ["v", "INT"], ["ts", "TIMESTAMP(3)"]],
        "rowtime": {"column": "ts", "watermark_delay_ms": _delay(rng)},
        "rows": [
            [
                "+I",
                f"e{rng.randint(1, 5)}",
                _maybe_null(rng, rng.randint(1, 4)),
                _maybe_null(rng, rng.randint(0, 30)),
                _ts(t),
            ]
            for t in times
        ],
    }
    if order == "pt":
        events["proctime"] = "pt"
    [b] = _ab_chain_tables(rng, (3, 10), b_keys=(None, "k", "k"))[1:]
    kind = rng.choice(["JOIN", "LEFT JOIN"])
    group = rng.choice([["B.t"], ["d.id"]])
    aggregates = [
        "COUNT(*)",
        *rng.sample(["SUM(d.v)", "MAX(d.v)", "MIN(B.w)", "COUNT(DISTINCT d.id)", "COUNT(DISTINCT B.t)"], 2),
    ]
    dedup = (
        f"(SELECT id, k, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY {order} {direction}) "
        "AS rn FROM events) WHERE rn = 1) d"
    )
    query = f"SELECT {_select(group, aggregates)} FROM {dedup} {kind} B ON d.k = B.k GROUP BY {', '.join(group)}"
    return {
        "tables": [events, b],
        "query": query,
        "upsert_key": [g.split(".")[1] for g in group],
        "links": [("events", 1, "B", 1)],
    }


def _chain_union_agg(rng: random.Random, variant: int) -> dict:
    tables = _ab_chain_tables(rng, (5, 14))
    where = rng.choice(["", " WHERE w > 10", " WHERE t <> 'b1'"])
    aggregates = [
        "COUNT(*)",
        *rng.sample(["SUM(v)", "MIN(v)", "MAX(v)", "COUNT(DISTINCT v)", "COUNT(DISTINCT s)", "COUNT(v)"], 3),
    ]
    query = (
        f"SELECT {_select(['k'], aggregates)} FROM (SELECT k, s, v FROM A UNION ALL SELECT k, t, w FROM B{where}) "
        "GROUP BY k"
    )
    return {"tables": tables, "query": query, "upsert_key": ["k"]}


def _chain_left_null_agg(rng: random.Random, variant: int) -> dict:
    tables = _ab_chain_tables(rng, (4, 14))
    padded = rng.choice(["B.k", "B.k", "B.t", "B.id"])
    aggregates = ["COUNT(*)", *rng.sample(["SUM(A.v)", "COUNT(DISTINCT A.k)", "MAX(A.v)", "MIN(A.s)", "COUNT(A.v)"], 2)]
    query = f"SELECT {_select([], aggregates)} FROM A LEFT JOIN B ON A.k = B.k WHERE {padded} IS NULL"
    return {"tables": tables, "query": query, "upsert_key": [], "links": [("A", 1, "B", 1)]}


def _chain_rates(rng: random.Random) -> list[list]:
    """Versions of ``RatesHistory(currency, rate, update_time)`` in time order: most currencies valid from about the
    first order on, then updated (``-U``/``+U``) or deleted and inserted again every minute or few."""
    events = []
    for currency in ["EUR", "USD", "JPY"]:
        if rng.random() < 0.15:
            continue  # no version at all: INNER drops its orders, LEFT pads them
        t = rng.choice([-60_000, 0, 0, 60_000])
        events.append((t, currency))
        for _ in range(rng.randint(0, 3)):
            t += rng.choice([30_000, 60_000, 120_000, 180_000])
            events.append((t, currency))
    rows, live = [], {}
    for t, currency in sorted(events, key=lambda e: e[0]):
        new = [currency, rng.randint(1, 9), _ts(max(0, t))]
        if currency not in live:
            rows.append(["+I", *new])
        elif rng.random() < 0.15:
            rows += [["-D", *live[currency]], ["+I", *new]]
        else:
            rows += [["-U", *live[currency]], ["+U", *new]]
        live[currency] = new
    return rows


def _chain_temporal_agg(rng: random.Random, variant: int) -> dict:
    times = _event_times(rng, rng.randint(8, 20), 30_000, rng.choice([0, 0, 45_000]), 0.1)
    orders = {
        "name": "Orders",
        "columns": [["order_id", "INT"], ["currency", "STRING"], ["amount", "INT"], ["order_time", "TIMESTAMP(3)"]],
        "rowtime": {"column": "order_time", "watermark_delay_ms": _delay(rng)},
        "rows": [
            ["+I", i + 1, _maybe_null(rng, rng.choice(["EUR", "USD", "JPY"])), rng.randint(1, 100), _ts(t)]
            for i, t in enumerate(times)
        ],
    }
    rates = {
        "name": "RatesHistory",
        "columns": [["currency", "STRING"], ["rate", "INT"], ["update_time", "TIMESTAMP(3)"]],
        "primary_key": ["currency"],
        "rowtime": {"column": "update_time", "watermark_delay_ms": rng.choice([0, 0, 1, 30_000])},
        "rows": _chain_rates(rng),
    }
    kind = "JOIN" if variant % 2 == 0 else "LEFT JOIN"
    group = rng.choice([["o.currency"], ["r.rate"]])
    aggregates = [
        "COUNT(*)",
        *rng.sample(
            [
                "SUM(o.amount)",
                "SUM(o.amount * r.rate)",
                "MAX(r.rate)",
                "MIN(o.amount)",
                "COUNT(DISTINCT r.update_time)",
                "COUNT(r.rate)",
            ],
            2,
        ),
    ]
    query = (
        f"SELECT {_select(group, aggregates)} FROM Orders AS o {kind} RatesHistory FOR SYSTEM_TIME AS OF "
        f"o.order_time AS r ON o.currency = r.currency GROUP BY {', '.join(group)}"
    )
    return {
        "tables": [orders, rates],
        "query": query,
        "upsert_key": [g.split(".")[1] for g in group],
        "links": [("Orders", 1, "RatesHistory", 0)],
    }


def _chain_interval_agg(rng: random.Random, variant: int) -> dict:
    tables = []
    for name, column in (("Orders", "ts"), ("Shipments", "ship_ts")):
        times = _event_times(rng, rng.randint(5, 14), 60_000, rng.choice([0, 0, 90_000]), 0.1)
        tables.append(
            {
                "name": name,
                "columns": [["order_id", "INT"], [column, "TIMESTAMP(3)"], ["qty", "INT"]],
                "rowtime": {"column": column, "watermark_delay_ms": _delay(rng)},
                "rows": [["+I", _maybe_null(rng, rng.randint(1, 3)), _ts(t), rng.randint(1, 9)] for t in times],
            }
        )
    lower, upper = rng.choice([0, 1, 2]), rng.choice([2, 5, 10])
    kind = _JOIN_KINDS[variant % 4]
    group = {
        "JOIN": "a.order_id",
        "LEFT JOIN": "a.order_id",
        "RIGHT JOIN": "b.order_id",
        "FULL JOIN": rng.choice(["a.order_id", "b.order_id"]),
    }[kind]
    aggregates = [
        "COUNT(*)",
        *rng.sample(["COUNT(b.ship_ts)", "SUM(b.qty)", "MAX(a.qty)", "MIN(b.qty)", "COUNT(DISTINCT a.ts)"], 2),
    ]
    query = (
        f"SELECT {_select([group], aggregates)} FROM Orders a {kind} Shipments b ON a.order_id = b.order_id AND "
        f"b.ship_ts BETWEEN a.ts - INTERVAL '{lower}' MINUTE AND a.ts + INTERVAL '{upper}' MINUTE GROUP BY {group}"
    )
    return {"tables": tables, "query": query, "upsert_key": ["order_id"], "links": [("Orders", 0, "Shipments", 0)]}


_CHAIN_BUILDERS = {
    "chain_join_agg": _chain_join_agg,
    "chain_left_agg_by_right": _chain_left_agg_by_right,
    "chain_join_agg_large": _chain_join_agg_large,
    "chain_orders_region": _chain_orders_region,
    "chain_agg_join": _chain_agg_join,
    "chain_join_join_agg": _chain_join_join_agg,
    "chain_dedup_join_agg": _chain_dedup_join_agg,
    "chain_union_agg": _chain_union_agg,
    "chain_left_null_agg": _chain_left_null_agg,
    "chain_temporal_agg": _chain_temporal_agg,
    "chain_interval_agg": _chain_interval_agg,
}


#: Arrivals per chain case: small ones (a few micro-batches of seven rows), and the ~100 changes per table of
#: ``chain_join_agg_large``.
CHAIN_ARRIVALS = {"chain_join_agg_large": (150, 240)}
_SMALL_CHAIN = (10, 40)


def _chain_fits(family: str, case: dict, arrival: list[str]) -> bool:
    """Whether a drawn chain case is one to keep: its size in range, every table with two rows or more, every table
    that is no event-time input (a changelog) with an update or a delete in it, its joins with something to join
    (the case's ``links``, :func:`_matches`) after three arrivals or more, and an order that moves."""
    tables = case["tables"]
    low, high = CHAIN_ARRIVALS.get(family, _SMALL_CHAIN)
    if family == "chain_orders_region" and not _moves_an_order(tables[0]["rows"]):
        return False
    if case.get("links") and _matches(tables, arrival, case["links"]) < 3:
        return False
    return (
        low <= len(arrival) <= high
        and all(len(t["rows"]) >= 2 for t in tables)
        and all(t.get("rowtime") or any(r[0] != "+I" for r in t["rows"]) for t in tables)
    )


def _matches(tables: list[dict], arrival: list[str], links: list[tuple[str, int, str, int]]) -> int:
    """After how many arrivals the live rows hold a path along ``links`` — ``(table, column, other table, column)``,
    each link's first table the one before's other table, columns as positions in a row's values — with equal
    non-NULL values at each link: the joins of the case have something to join."""
    live: dict[str, dict] = {t["name"]: {} for t in tables}
    cursor = {t["name"]: 0 for t in tables}
    by_name = {t["name"]: t for t in tables}
    count = 0
    for n, name in enumerate(arrival):
        table = by_name[name]
        kind, *values = table["rows"][cursor[name]]
        cursor[name] += 1
        rows = live[name]
        # keyed: one row per primary key (an upsert +U replaces it); else a row per arrival
        columns = [c for c, _ in table["columns"]]
        slot = values[columns.index(table["primary_key"][0])] if table.get("primary_key") else None
        if kind in ("+I", "+U"):
            rows[slot if slot is not None else n] = values
        else:
            gone = slot if slot is not None else next((i for i, r in rows.items() if r == values), None)
            rows.pop(gone, None)
        reached = list(live[links[0][0]].values())
        for left, left_column, right, right_column in links:
            values_left = {r[left_column] for r in reached} - {None}
            reached = [r for r in live[right].values() if r[right_column] in values_left]
        count += bool(reached)
    return count


def _moves_an_order(rows: list[list]) -> bool:
    """Whether an upsert changelog of ``orders(oid, cid, amount)`` has a ``+U`` that gives an order another customer."""
    customer = {}
    for kind, oid, cid, _ in rows:
        if kind == "+U" and oid in customer and customer[oid] != cid:
            return True
        customer[oid] = cid if kind != "-D" else None
    return False


def generate_chain_case(seed: int, index: int) -> dict:
    """Chain case ``index`` of ``seed``: family ``CHAIN_FAMILIES[index % len]``, variant ``index // len``; with
    ``"upsert_key"`` (the output's upsert key: its GROUP BY columns, ``[]`` for a global aggregate) when it has one."""
    family = CHAIN_FAMILIES[index % len(CHAIN_FAMILIES)]
    rng = random.Random(f"chain-{seed}-{index}")
    for _ in range(1000):  # drawn again (same rng) until it fits
        case = _CHAIN_BUILDERS[family](rng, index // len(CHAIN_FAMILIES))
        arrival = _interleave(rng, case["tables"])
        if _chain_fits(family, case, arrival):
            break
    out = {
        "name": f"{family}_{seed}_{index:04d}",
        "description": f"generated: chain family {family}, seed {seed}, index {index} (tests/flink_diff/generate.py)",
        "tables": case["tables"],
        "arrival": arrival,
        "query": case["query"],
    }
    if case.get("upsert_key") is not None:
        out["upsert_key"] = case["upsert_key"]
    return out


# -- window aggregates -----------------------------------------------------------------------------------------
#
# Window aggregates over the window table functions and the legacy group windows (docs/semantics.md §11): several
# keys (NULL among them), rows out of order within the watermark delay, late rows, empty windows, offsets, and an
# updating input (``-U``/``+U``/``-D``; not for the legacy group windows). Case ``i`` of a seed is of family
# ``WINDOW_FAMILIES[i % len(WINDOW_FAMILIES)]``, drawn from its own ``random.Random(f"window-{seed}-{i}")``; its
# output's upsert key is the grouping key with ``window_start`` and ``window_end``.

WINDOW_FAMILIES = ["window_tumble", "window_hop", "window_cumulate", "window_group"]
#: Window Top-N and window deduplication, generated on their own (``--window-ranks``).
WINDOW_RANK_FAMILIES = ["window_topn"]
#: Windows of several keys that one watermark fires come in the order of Flink's timer queue.
ORDER_WITHIN_RUNS_FAMILIES |= set(WINDOW_FAMILIES) | set(WINDOW_RANK_FAMILIES)
_WINDOW_AGGREGATES = [
    "COUNT(*)",
    "SUM(price)",
    "MIN(price)",
    "MAX(price)",
    "AVG(price)",
    "COUNT(price)",
    "COUNT(DISTINCT price)",
]


def _bids(rng: random.Random, updating: bool) -> dict:
    """``bids(item, price, bidtime)``, ``bidtime`` a rowtime: mostly increasing times with ties, jitter and late
    rows; with ``updating``, some rows later updated (``-U``/``+U``, same rowtime, new price) or deleted."""
    n = 0 if rng.random() < 0.05 else rng.randint(1, 14)
    step = rng.choice([20_000, 60_000, 150_000])
    times = _event_times(rng, n, step, rng.choice([0, step, 3 * step]), 0.15)
    rows: list[list] = []
    live: list[list] = []
    for t in times:
        row = [_maybe_null(rng, rng.choice(["x", "y", "z"]), 0.08), _maybe_null(rng, rng.randint(1, 30)), _ts(t)]
        rows.append(["+I", *row])
        live.append(row)
        if updating and rng.random() < 0.3:
            old = rng.choice(live)
            if rng.random() < 0.5:
                new = [old[0], _maybe_null(rng, rng.randint(1, 30)), old[2]]
                live[live.index(old)] = new
                rows += [["-U", *old], ["+U", *new]]
            else:
                live.remove(old)
                rows.append(["-D", *old])
    return {
        "name": "bids",
        "columns": [["item", "STRING"], ["price", "INT"], ["bidtime", "TIMESTAMP(3)"]],
        "rowtime": {"column": "bidtime", "watermark_delay_ms": rng.choice([0, 0, 5_000, 60_000])},
        "rows": rows,
    }


def _window_topn(rng: random.Random) -> dict:
    """A window Top-N (or, ordered by the rowtime with one rank, a window deduplication) over a window table
    function; prices from a small range so that rows tie."""
    table = _bids(rng, updating=False)
    for row in table["rows"]:
        row[2] = _maybe_null(rng, rng.randint(1, 6), 0.1)
    tvf = rng.choice(
        [
            "TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES)",
            "TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)",
            "HOP(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '2' MINUTES, INTERVAL '4' MINUTES)",
            "CUMULATE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '2' MINUTES, INTERVAL '6' MINUTES)",
        ]
    )
    keyed = rng.random() < 0.5
    partition = "window_start, window_end" + (", item" if keyed else "")
    if rng.random() < 0.25:
        order, bound = f"bidtime {rng.choice(['ASC', 'DESC'])}", rng.choice(["rn = 1", "rn <= 1"])
    else:
        order = rng.choice(
            ["price DESC", "price ASC", "price DESC, bidtime", "price ASC NULLS LAST", "item, price DESC"]
        )
        n = rng.randint(1, 3)
        bound = rng.choice([f"rn <= {n}", f"rn < {n + 1}", f"rn BETWEEN 2 AND {n + 1}", f"rn > 1 AND rn <= {n + 1}"])
    select = rng.choice(["*", "item, price, bidtime, window_start, window_end"])
    query = (
        f"SELECT {select} FROM (SELECT item, price, bidtime, window_start, window_end, ROW_NUMBER() OVER "
        f"(PARTITION BY {partition} ORDER BY {order}) AS rn FROM TABLE({tvf})) WHERE {bound}"
    )
    return {"tables": [table], "query": query}


def _window_case(rng: random.Random, family: str) -> dict:
    keyed = rng.random() < 0.7
    table = _bids(rng, updating=family != "window_group" and rng.random() < 0.3)
    aggregates = rng.sample(_WINDOW_AGGREGATES, rng.randint(1, 3))
    columns = ", ".join(f"{a} AS agg{i}" for i, a in enumerate(aggregates))
    where = rng.choice(["", "", "", " WHERE price > 10"])
    key = "item, " if keyed else ""
    if family == "window_group":
        size = rng.choice([2, 4, 10])
        if rng.random() < 0.5:
            window, name = f"TUMBLE(bidtime, INTERVAL '{size}' MINUTE)", "TUMBLE"
        else:
            window, name = f"HOP(bidtime, INTERVAL '{size // 2}' MINUTE, INTERVAL '{size}' MINUTE)", "HOP"
        args = window[window.index("(") + 1 : -1]
        start, end = rng.choice([("window_start", "window_end"), ("ws", "we")])
        query = (
            f"SELECT {key}{name}_START({args}) AS {start}, {name}_END({args}) AS {end}, {columns} "
            f"FROM bids{where} GROUP BY {key}{window}"
        )
    else:
        if family == "window_tumble":
            size = rng.choice([2, 5, 10])
            offset = rng.choice(["", "", f", INTERVAL '{rng.randint(1, size - 1)}' MINUTES"])
            tvf = f"TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '{size}' MINUTES{offset})"
        else:
            step, size = rng.choice([(1, 3), (2, 4), (2, 6), (5, 10)])
            kind = "HOP" if family == "window_hop" else "CUMULATE"
            tvf = f"{kind}(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '{step}' MINUTES, INTERVAL '{size}' MINUTES)"
        query = (
            f"SELECT {key}window_start, window_end, {columns} FROM TABLE({tvf}){where} "
            f"GROUP BY {key}window_start, window_end"
        )
        start, end = "window_start", "window_end"
    return {"tables": [table], "query": query, "upsert_key": [*(["item"] if keyed else []), start, end]}


#: Window joins, generated on their own (``--window-joins``): one family, its join type drawn per case.
WINDOW_JOIN_FAMILIES = ["window_join"]
ORDER_WITHIN_RUNS_FAMILIES |= set(WINDOW_JOIN_FAMILIES)
_WINDOW_JOIN_TVFS = [
    "TUMBLE(TABLE {t}, DESCRIPTOR(rt), INTERVAL '5' MINUTES)",
    "TUMBLE(TABLE {t}, DESCRIPTOR(rt), INTERVAL '2' MINUTES, INTERVAL '1' MINUTES)",
    "HOP(TABLE {t}, DESCRIPTOR(rt), INTERVAL '2' MINUTES, INTERVAL '4' MINUTES)",
    "CUMULATE(TABLE {t}, DESCRIPTOR(rt), INTERVAL '2' MINUTES, INTERVAL '6' MINUTES)",
]


def _window_join_table(rng: random.Random, name: str, delay: int) -> dict:
    """``name(id, num, rt)``, ``rt`` a rowtime: ids unique per table, ``num`` from 1–3 (NULL among them), times
    mostly increasing with jitter and late rows."""
    n = 0 if rng.random() < 0.08 else rng.randint(1, 12)
    step = rng.choice([20_000, 60_000, 90_000])
    times = _event_times(rng, n, step, rng.choice([0, step, 2 * step]), 0.12)
    rows = [
        ["+I", i + (100 if name == "R" else 0), _maybe_null(rng, rng.randint(1, 3)), _ts(t)]
        for i, t in enumerate(times)
    ]
    return {
        "name": name,
        "columns": [["id", "INT"], ["num", "INT"], ["rt", "TIMESTAMP(3)"]],
        "rowtime": {"column": "rt", "watermark_delay_ms": delay},
        "rows": rows,
    }


def _window_join(rng: random.Random) -> dict:
    """A window join of two window table functions of the same windows: INNER/LEFT/RIGHT/FULL (on ``num`` or on
    the window alone, some with a residual ``L.id < R.id - 100``), or a semi/anti join (``IN``, ``EXISTS``,
    ``NOT EXISTS``) on the window columns."""
    delay = rng.choice([0, 0, 10_000, 60_000])
    tables = [_window_join_table(rng, "L", delay), _window_join_table(rng, "R", rng.choice([delay, 0]))]
    tvf = rng.choice(_WINDOW_JOIN_TVFS)
    left, right = (f"(SELECT * FROM TABLE({tvf.format(t=t)})) {t}" for t in "LR")
    windows = "L.window_start = R.window_start AND L.window_end = R.window_end"
    kind = rng.choice(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "IN", "EXISTS", "NOT EXISTS"])
    if kind in ("IN", "EXISTS", "NOT EXISTS"):
        if kind == "IN":
            where = f"L.num IN (SELECT num FROM {right} WHERE {windows})"
        else:
            where = f"{kind} (SELECT * FROM {right} WHERE L.num = R.num AND {windows})"
        query = f"SELECT L.id, L.num, L.rt, L.window_start, L.window_end FROM {left} WHERE {where}"
    else:
        on = ("L.num = R.num AND " if rng.random() < 0.8 else "") + windows
        if rng.random() < 0.25:
            on += " AND L.id < R.id - 100"
        query = (
            "SELECT L.id AS l_id, L.num AS l_num, R.id AS r_id, R.num AS r_num, COALESCE(L.window_start, "
            f"R.window_start) AS window_start, COALESCE(L.window_end, R.window_end) AS window_end FROM {left} "
            f"{kind} {right} ON {on}"
        )
    return {"tables": tables, "query": query}


#: Session window aggregates, generated on their own (``--window-sessions``): the SESSION table function (with and
#: without PARTITION BY) and the legacy ``GROUP BY SESSION(…)``.
WINDOW_SESSION_FAMILIES = ["window_session"]
ORDER_WITHIN_RUNS_FAMILIES |= set(WINDOW_SESSION_FAMILIES)


def _window_session(rng: random.Random) -> dict:
    """A session window aggregate of ``bids``: gaps of 1, 2 or 5 minutes over rows 20 s to 2.5 min apart, so that
    sessions open, grow, merge and close; per item or global; a quarter with an updating input (not for the legacy
    group window)."""
    legacy = rng.random() < 0.3
    table = _bids(rng, updating=not legacy and rng.random() < 0.25)
    gap = rng.choice([1, 2, 5])
    aggregates = rng.sample(_WINDOW_AGGREGATES, rng.randint(1, 3))
    columns = ", ".join(f"{a} AS agg{i}" for i, a in enumerate(aggregates))
    where = rng.choice(["", "", "", " WHERE price > 10"])
    keyed = rng.random() < 0.7
    key = "item, " if keyed else ""
    if legacy:
        args = f"bidtime, INTERVAL '{gap}' MINUTE"
        query = (
            f"SELECT {key}SESSION_START({args}) AS ws, SESSION_END({args}) AS we, {columns} FROM bids{where} "
            f"GROUP BY {key}SESSION({args})"
        )
        start, end = "ws", "we"
    else:
        partition = " PARTITION BY item" if keyed else ""
        tvf = f"SESSION(TABLE bids{partition}, DESCRIPTOR(bidtime), INTERVAL '{gap}' MINUTES)"
        query = (
            f"SELECT {key}window_start, window_end, {columns} FROM TABLE({tvf}){where} "
            f"GROUP BY {key}window_start, window_end"
        )
        start, end = "window_start", "window_end"
    return {"tables": [table], "query": query, "upsert_key": [*(["item"] if keyed else []), start, end]}


#: Window aggregates with GROUPING SETS, ROLLUP and CUBE, generated on their own (``--window-grouping-sets``).
WINDOW_GROUPING_FAMILIES = ["window_grouping_sets"]
ORDER_WITHIN_RUNS_FAMILIES |= set(WINDOW_GROUPING_FAMILIES)


def _window_grouping(rng: random.Random) -> dict:
    """A window aggregate over TUMBLE or HOP grouped by ``window_start, window_end`` and GROUPING SETS, ROLLUP or
    CUBE of ``supplier`` and ``item`` (NULLs among them), with ``GROUPING(…)`` sometimes selected."""
    table = _bids(rng, updating=False)
    table["columns"] = [["item", "STRING"], ["supplier", "STRING"], ["price", "INT"], ["bidtime", "TIMESTAMP(3)"]]
    table["rows"] = [[r[0], r[1], _maybe_null(rng, rng.choice(["s1", "s2"]), 0.1), *r[2:]] for r in table["rows"]]
    tvf = rng.choice(
        [
            "TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES)",
            "HOP(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)",
        ]
    )
    sets = rng.choice(
        [
            "ROLLUP (supplier, item)",
            "CUBE (supplier, item)",
            "GROUPING SETS ((supplier), (item), ())",
            "GROUPING SETS ((supplier, item), (supplier))",
        ]
    )
    aggregates = rng.sample(_WINDOW_AGGREGATES, rng.randint(1, 2))
    columns = ", ".join(f"{a} AS agg{i}" for i, a in enumerate(aggregates))
    grouping = ", GROUPING(supplier, item) AS g" if rng.random() < 0.5 else ""
    query = (
        f"SELECT window_start, window_end, supplier, item{grouping}, {columns} FROM TABLE({tvf}) "
        f"GROUP BY window_start, window_end, {sets}"
    )
    return {"tables": [table], "query": query}


#: The window case kinds: their families and the builder of one case (``rng``, family).
#: Event-time operators that follow one another (``--window-chains``): a window aggregate over a window aggregate
#: (a window table function over its ``window_time``, Flink's legacy ``TUMBLE_ROWTIME``, or the same windows by
#: ``window_start``/``window_end``), an interval join or a temporal join into a window aggregate, a window aggregate
#: into an interval join or a temporal join, a window Top-N of window aggregates, a window join of two. The views of
#: each case are its ``setup``.
WINDOW_CHAIN_FAMILIES = [
    "window_chain_windows",
    "window_chain_interval",
    "window_chain_temporal",
    "window_chain_join",
    "window_chain_topn",
    "window_chain_window_join",
]
ORDER_WITHIN_RUNS_FAMILIES |= set(WINDOW_CHAIN_FAMILIES)
_CHAIN_SUMS = ["SUM(s)", "COUNT(*)", "MAX(s)", "MIN(n)", "SUM(n)"]


def _bids_view(rng: random.Random, name: str, size: int, legacy: bool = False) -> tuple[str, str]:
    """A view ``name(item, ws, we, rt, s, n)`` of per-item window results of ``bids`` every ``size`` minutes, ``rt``
    its rowtime (``window_time``, or, ``legacy``, sometimes the legacy ``TUMBLE_ROWTIME``: its ``ws`` and ``we`` are
    plain timestamps, an operator over them no window operator), and a filter for the query over it."""
    if legacy and rng.random() < 0.3:
        window = f"TUMBLE(bidtime, INTERVAL '{size}' MINUTE)"
        view = (
            f"CREATE VIEW {name} AS SELECT item, TUMBLE_START({window[7:-1]}) AS ws, TUMBLE_END({window[7:-1]}) AS we, "
            f"TUMBLE_ROWTIME({window[7:-1]}) AS rt, SUM(price) AS s, COUNT(*) AS n FROM bids GROUP BY item, {window}"
        )
    else:
        tvf = rng.choice(
            [
                f"TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '{size}' MINUTES)",
                f"HOP(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '{size}' MINUTES, INTERVAL '{2 * size}' MINUTES)",
                f"CUMULATE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '{size}' MINUTES, INTERVAL '{2 * size}' MINUTES)",
            ]
        )
        view = (
            f"CREATE VIEW {name} AS SELECT item, window_start AS ws, window_end AS we, window_time AS rt, "
            f"SUM(price) AS s, COUNT(*) AS n FROM TABLE({tvf}) GROUP BY item, window_start, window_end, window_time"
        )
    return view, rng.choice(["", "", " WHERE s > 10"])


def _items_versions(rng: random.Random) -> dict:
    """``Prices(item, rate, ptime)``, a versioned table (primary key ``item``) of ``bids``' items."""
    events = []
    for item in ["x", "y", "z"]:
        if rng.random() < 0.15:
            continue
        t = rng.choice([0, 0, 120_000])
        events.append((t, item))
        for _ in range(rng.randint(0, 3)):
            t += rng.choice([60_000, 180_000, 300_000])
            events.append((t, item))
    rows, live = [], {}
    for t, item in sorted(events, key=lambda e: e[0]):
        new = [item, rng.randint(1, 9), _ts(t)]
        rows += [["+I", *new]] if item not in live else [["-U", *live[item]], ["+U", *new]]
        live[item] = new
    return {
        "name": "Prices",
        "columns": [["item", "STRING"], ["rate", "INT"], ["ptime", "TIMESTAMP(3)"]],
        "primary_key": ["item"],
        "rowtime": {"column": "ptime", "watermark_delay_ms": rng.choice([0, 0, 30_000])},
        "rows": rows,
    }


def _window_chain(rng: random.Random, family: str) -> dict:
    """A chain of event-time operators of ``family`` (:data:`WINDOW_CHAIN_FAMILIES`)."""
    aggregates = ", ".join(f"{a} AS agg{i}" for i, a in enumerate(rng.sample(_CHAIN_SUMS, rng.randint(1, 3))))
    keyed = rng.random() < 0.5
    key = "item, " if keyed else ""
    if family == "window_chain_windows":
        size = rng.choice([2, 5])
        kind = rng.choice(["TUMBLE", "TUMBLE", "HOP", "LEGACY", "SAME"])
        view, where = _bids_view(rng, "w1", size, legacy=kind != "SAME")
        if kind == "SAME":
            query = f"SELECT {key}ws, we, {aggregates} FROM w1{where} GROUP BY {key}ws, we"
            upsert = [*(["item"] if keyed else []), "ws", "we"]
        elif kind == "LEGACY":
            window = f"TUMBLE(rt, INTERVAL '{2 * size}' MINUTE)"
            query = (
                f"SELECT {key}TUMBLE_START({window[7:-1]}) AS window_start, {aggregates} FROM w1{where} "
                f"GROUP BY {key}{window}"
            )
            upsert = [*(["item"] if keyed else []), "window_start"]
        else:
            big = 2 * size if kind == "TUMBLE" else 3 * size
            tvf = (
                f"TUMBLE(TABLE w1, DESCRIPTOR(rt), INTERVAL '{big}' MINUTES)"
                if kind == "TUMBLE"
                else f"HOP(TABLE w1, DESCRIPTOR(rt), INTERVAL '{size}' MINUTES, INTERVAL '{big}' MINUTES)"
            )
            query = (
                f"SELECT {key}window_start, window_end, {aggregates} FROM TABLE({tvf}){where} "
                f"GROUP BY {key}window_start, window_end"
            )
            upsert = [*(["item"] if keyed else []), "window_start", "window_end"]
        return {
            "tables": [_bids(rng, updating=rng.random() < 0.2)],
            "setup": [view],
            "query": query,
            "upsert_key": upsert,
        }
    if family == "window_chain_interval":
        tables = _chain_interval_agg(rng, 0)["tables"]
        lower, upper = rng.choice([0, 1, 2]), rng.choice([1, 2, 5])
        kind, time = rng.choice([("JOIN", "a.ts"), ("JOIN", "b.ship_ts"), ("LEFT JOIN", "a.ts")])
        view = (
            f"CREATE VIEW shipped AS SELECT a.order_id, a.qty, b.qty AS ship_qty, {time} FROM Orders a {kind} "
            f"Shipments b ON a.order_id = b.order_id AND b.ship_ts BETWEEN a.ts - INTERVAL '{lower}' MINUTE AND "
            f"a.ts + INTERVAL '{upper}' MINUTE"
        )
        size = rng.choice([2, 5, 10])
        group = "order_id, " if rng.random() < 0.5 else ""
        query = (
            f"SELECT {group}window_start, window_end, COUNT(*) AS n, COUNT(ship_qty) AS shipped, SUM(qty) AS "
            f"total FROM TABLE(TUMBLE(TABLE shipped, DESCRIPTOR({time[2:]}), INTERVAL '{size}' MINUTES)) "
            f"GROUP BY {group}window_start, window_end"
        )
        upsert = [*(["order_id"] if group else []), "window_start", "window_end"]
        return {"tables": tables, "setup": [view], "query": query, "upsert_key": upsert}
    if family == "window_chain_temporal":
        tables = _temporal_join(rng, "temporal_inner")["tables"]
        kind = rng.choice(["JOIN", "LEFT JOIN"])
        view = (
            "CREATE VIEW valued AS SELECT o.currency, o.order_time, o.amount * r.rate AS v FROM Orders AS o "
            f"{kind} RatesHistory FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency"
        )
        size = rng.choice([2, 5])
        tvf = rng.choice(
            [
                f"TUMBLE(TABLE valued, DESCRIPTOR(order_time), INTERVAL '{size}' MINUTES)",
                f"HOP(TABLE valued, DESCRIPTOR(order_time), INTERVAL '{size}' MINUTES, INTERVAL '{2 * size}' MINUTES)",
            ]
        )
        group = "currency, " if rng.random() < 0.5 else ""
        query = (
            f"SELECT {group}window_start, window_end, COUNT(*) AS n, SUM(v) AS total, MAX(v) AS top FROM TABLE({tvf}) "
            f"GROUP BY {group}window_start, window_end"
        )
        upsert = [*(["currency"] if group else []), "window_start", "window_end"]
        return {"tables": tables, "setup": [view], "query": query, "upsert_key": upsert}
    if family == "window_chain_join":
        view, where = _bids_view(rng, "w1", rng.choice([2, 5]), legacy=True)
        if rng.random() < 0.5:
            alerts = _window_join_table(rng, "Alerts", rng.choice([0, 0, 30_000]))
            alerts["columns"] = [["item", "STRING"], ["level", "INT"], ["alert_time", "TIMESTAMP(3)"]]
            alerts["rowtime"]["column"] = "alert_time"
            for row in alerts["rows"]:
                row[1] = rng.choice(["x", "y", "z"])
            kind = rng.choice(["JOIN", "LEFT JOIN"])
            lower, upper = rng.choice([0, 2, 5]), rng.choice([0, 2, 5])
            query = (
                f"SELECT w.item, w.ws, w.s, a.level, a.alert_time FROM (SELECT * FROM w1{where}) w {kind} Alerts a "
                f"ON w.item = a.item AND a.alert_time BETWEEN w.rt - INTERVAL '{lower}' MINUTE AND w.rt + "
                f"INTERVAL '{upper}' MINUTE"
            )
            other = alerts
        else:
            kind = rng.choice(["JOIN", "LEFT JOIN"])
            query = (
                f"SELECT w.item, w.ws, w.s, w.s * p.rate AS cost FROM (SELECT * FROM w1{where}) w {kind} Prices FOR "
                "SYSTEM_TIME AS OF w.rt AS p ON w.item = p.item"
            )
            other = _items_versions(rng)
        return {"tables": [_bids(rng, updating=False), other], "setup": [view], "query": query}
    view, where = _bids_view(rng, "w1", rng.choice([2, 5]))
    if family == "window_chain_topn":
        n = rng.randint(1, 2)
        order = rng.choice(["s DESC", "n DESC, s", "s ASC NULLS LAST"])
        query = (
            f"SELECT * FROM (SELECT item, ws, we, s, n, ROW_NUMBER() OVER (PARTITION BY ws, we ORDER BY {order}) AS "
            f"rn FROM w1{where}) WHERE rn <= {n}"
        )
        return {"tables": [_bids(rng, updating=False)], "setup": [view], "query": query}
    view2 = view.replace("VIEW w1", "VIEW w2").replace("SUM(price)", "MAX(price)")
    kind = rng.choice(["JOIN", "LEFT JOIN", "FULL JOIN"])
    query = (
        f"SELECT a.item, b.item AS item2, COALESCE(a.ws, b.ws) AS ws, a.s, b.s AS top FROM w1 a {kind} w2 b ON "
        "a.ws = b.ws AND a.we = b.we AND a.item = b.item"
    )
    return {"tables": [_bids(rng, updating=False)], "setup": [view, view2], "query": query}


_WINDOW_KINDS = {
    "aggregates": (WINDOW_FAMILIES, _window_case),
    "ranks": (WINDOW_RANK_FAMILIES, lambda rng, family: _window_topn(rng)),
    "joins": (WINDOW_JOIN_FAMILIES, lambda rng, family: _window_join(rng)),
    "sessions": (WINDOW_SESSION_FAMILIES, lambda rng, family: _window_session(rng)),
    "grouping": (WINDOW_GROUPING_FAMILIES, lambda rng, family: _window_grouping(rng)),
    "chains": (WINDOW_CHAIN_FAMILIES, _window_chain),
}


def generate_window_case(seed: int, index: int, *, kind: str = "aggregates") -> dict:
    """Window case ``index`` of ``seed`` of ``kind``: window aggregates (``WINDOW_FAMILIES``), window Top-N
    (``"ranks"``, ``WINDOW_RANK_FAMILIES``), window joins (``"joins"``) or session window aggregates
    (``"sessions"``)."""
    families, build = _WINDOW_KINDS[kind]
    family = families[index % len(families)]
    rng = random.Random(f"{'window' if kind == 'aggregates' else family}-{seed}-{index}")
    case = build(rng, family)
    return {
        "name": f"{family}_{seed}_{index:04d}",
        "description": f"generated: family {family}, seed {seed}, index {index} (tests/flink_diff/generate.py)",
        "tables": case["tables"],
        "arrival": _interleave(rng, case["tables"]),
        **({"setup": case["setup"]} if "setup" in case else {}),
        "query": case["query"],
        **({"upsert_key": case["upsert_key"]} if "upsert_key" in case else {}),
    }


def generate_window_cases(n: int, seed: int, *, kind: str = "aggregates") -> list[dict]:
    """Window cases ``0 … n-1`` of ``seed`` of ``kind`` (:func:`generate_window_case`)."""
    return [generate_window_case(seed, i, kind=kind) for i in range(n)]


# -- Top-N over a changelog: Flink's Rank (AppendOnlyFirstN, FastTop1, AppendOnlyTopN, RetractableTopN) ------------
#
# ``products(id, cat, price, name)``: prices from 1–6 and few names so that rows tie, NULL categories and prices.
# ``topn_append`` is insert-only (some ordered by a PROCTIME() ascending: the first N by arrival); ``topn_retract``
# a changelog with updates and deletes, with or without a primary key; ``topn_agg`` a Top-N over a GROUP BY's
# updates. Each selects the rank number or not (Flink's outputRankNumber), and bounds it as ``rn <= N``, ``rn < N``,
# ``rn = 1``, ``rn BETWEEN 2 AND N`` or ``rn > 1 AND rn <= N``.

RANK_FAMILIES = ["topn_append", "topn_retract", "topn_agg"]


def _products(rng: random.Random, updating: bool, with_pk: bool) -> dict:
    def make_row(key):
        return [
            key if key is not None else rng.randint(1, 8),
            _maybe_null(rng, rng.choice(["a", "b"]), 0.08),
            _maybe_null(rng, rng.randint(1, 6), 0.08),
            rng.choice(["p", "q", "r"]),
        ]

    n_ops = 0 if rng.random() < 0.05 else rng.randint(1, 14)
    if updating:
        rows = _changelog(rng, make_row, n_ops, 0 if with_pk else None)
    else:
        rows = [["+I", *make_row(None)] for _ in range(n_ops)]
    table = {
        "name": "products",
        "columns": [["id", "INT"], ["cat", "STRING"], ["price", "INT"], ["name", "STRING"]],
        "rows": rows,
    }
    if with_pk:
        table["primary_key"] = ["id"]
    return table


def _rank_bound(rng: random.Random) -> str:
    n = rng.randint(1, 3)
    bounds = [f"rn <= {n}", f"rn < {n + 1}", "rn = 1", f"rn BETWEEN 2 AND {n + 1}", f"rn > 1 AND rn <= {n + 1}"]
    return rng.choice(bounds)


def _topn(rng: random.Random, family: str) -> dict:
    bound = _rank_bound(rng)
    with_rank = rng.random() < 0.6
    if family == "topn_agg":
        table = _products(rng, updating=rng.random() < 0.4, with_pk=False)
        inner = "SELECT cat, name, COUNT(*) AS cnt, SUM(price) AS total FROM products GROUP BY cat, name"
        order = rng.choice(["cnt DESC", "total DESC", "total ASC", "cnt DESC, name", "total DESC NULLS FIRST"])
        columns = "cat, name, cnt, total"
    else:
        updating = family == "topn_retract"
        table = _products(rng, updating=updating, with_pk=updating and rng.random() < 0.5)
        inner = "SELECT * FROM products"
        order = rng.choice(
            [
                "price DESC",
                "price ASC",
                "price DESC, id",
                "price ASC NULLS LAST",
                "name, price DESC",
                "price DESC, name",
            ]
        )
        if not updating and rng.random() < 0.2:
            table["proctime"] = "pt"
            order = "pt ASC"
        columns = "id, cat, price, name"
    query = (
        f"SELECT {columns}{', rn' if with_rank else ''} FROM (SELECT {columns}, ROW_NUMBER() OVER "
        f"(PARTITION BY cat ORDER BY {order}) AS rn FROM ({inner})) WHERE {bound}"
    )
    return {"tables": [table], "query": query, **({"upsert_key": ["cat", "rn"]} if with_rank else {})}


def generate_rank_case(seed: int, index: int) -> dict:
    """Top-N case ``index`` of ``seed`` (``RANK_FAMILIES``)."""
    family = RANK_FAMILIES[index % len(RANK_FAMILIES)]
    rng = random.Random(f"{family}-{seed}-{index}")
    case = _topn(rng, family)
    return {
        "name": f"{family}_{seed}_{index:04d}",
        "description": f"generated: family {family}, seed {seed}, index {index} (tests/flink_diff/generate.py)",
        "tables": case["tables"],
        "arrival": _interleave(rng, case["tables"]),
        "query": case["query"],
        **({"upsert_key": case["upsert_key"]} if "upsert_key" in case else {}),
    }


def generate_rank_cases(n: int, seed: int) -> list[dict]:
    """Top-N cases ``0 … n-1`` of ``seed``."""
    return [generate_rank_case(seed, i) for i in range(n)]


def generate_chain_cases(n: int, seed: int) -> list[dict]:
    """Chain cases ``0 … n-1`` of ``seed``."""
    return [generate_chain_case(seed, i) for i in range(n)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=len(FAMILIES) * 6)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--mini-batch", action="store_true", help="group-aggregate cases in mini-batch mode instead")
    parser.add_argument("--chains", action="store_true", help="chains of operators (CHAIN_FAMILIES) instead")
    parser.add_argument("--windows", action="store_true", help="window aggregates (WINDOW_FAMILIES) instead")
    parser.add_argument("--window-ranks", action="store_true", help="window Top-N (WINDOW_RANK_FAMILIES) instead")
    parser.add_argument("--window-joins", action="store_true", help="window joins (WINDOW_JOIN_FAMILIES) instead")
    parser.add_argument(
        "--window-sessions", action="store_true", help="session window aggregates (WINDOW_SESSION_FAMILIES) instead"
    )
    parser.add_argument(
        "--window-grouping-sets",
        action="store_true",
        help="window aggregates with GROUPING SETS, ROLLUP, CUBE (WINDOW_GROUPING_FAMILIES) instead",
    )
    parser.add_argument(
        "--window-chains", action="store_true", help="chains of event-time operators (WINDOW_CHAIN_FAMILIES) instead"
    )
    parser.add_argument("--ranks", action="store_true", help="Top-N over changelogs (RANK_FAMILIES) instead")
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if args.mini_batch:
        cases = [generate_mini_batch_case(args.seed, i) for i in range(args.n)]
    elif args.chains:
        cases = generate_chain_cases(args.n, args.seed)
    elif args.ranks:
        cases = generate_rank_cases(args.n, args.seed)
    elif (
        args.windows
        or args.window_ranks
        or args.window_joins
        or args.window_sessions
        or args.window_grouping_sets
        or args.window_chains
    ):
        flags = {"ranks": args.window_ranks, "joins": args.window_joins, "sessions": args.window_sessions}
        flags["grouping"] = args.window_grouping_sets
        flags["chains"] = args.window_chains
        kind = next((k for k, on in flags.items() if on), "aggregates")
        cases = generate_window_cases(args.n, args.seed, kind=kind)
    else:
        cases = generate_cases(args.n, args.seed)
    for case in cases:
        (args.out_dir / f"{case['name']}.json").write_text(json.dumps(case, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
