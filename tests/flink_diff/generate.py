"""Seeded generator of streaming-SQL test cases in the ``flink-cases`` format, one family per operator.

    python tests/flink_diff/generate.py --n 114 --seed 13 --out-dir DIR

writes ``DIR/NAME.json`` (format: ``tests/data/flink-cases/README.md``). Case ``i`` belongs to family
``FAMILIES[i % len(FAMILIES)]`` and is drawn from its own ``random.Random(f"{seed}-{i}")``, so one case
can be made again from ``(seed, i)`` alone and adding families does not change the others' rows.

The inputs exercise: inserts, updates (``-U``/``+U`` pairs, adjacent in the table), deletes, duplicate
rows and keys, equal timestamps, out-of-order rows, rows behind the watermark (late), empty inputs,
null keys and values, watermark delays of 0 (strictly ascending), 1 ms and seconds; the queries: regular
joins of every type (with and without primary keys and a residual predicate), semi joins (``IN``,
``EXISTS``), anti joins (``NOT EXISTS``, ``NOT IN``), interval joins of every type, event-time temporal
joins (INNER/LEFT), OVER (ROWS/RANGE, bounded/unbounded, partitioned or not), deduplication (keep
first/last, on rowtime and proctime) and group aggregates over changelogs. Standard library only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
from pathlib import Path

FAMILIES = [
    "join_inner", "join_left", "join_right", "join_full",
    "semi_in", "semi_exists", "anti_not_exists", "anti_not_in",
    "interval_inner", "interval_left", "interval_right", "interval_full",
    "temporal_inner", "temporal_left",
    "over_rows", "over_range",
    "dedup_first", "dedup_last",
    "group_agg",
]
#: Families whose changelogs are compared up to the order within runs of one RowKind (``compare.in_runs``):
#: a regular join emits one input row's matches in its state's order (Flink: a Java HashMap's), and an
#: event-time operator emits the rows of different keys that one watermark fires in its timers' order
#: (Flink's timer heap gives them in an order that is not even stable from run to run).
ORDER_WITHIN_RUNS_FAMILIES = {"join_inner", "join_left", "join_right", "join_full",
                              "semi_in", "semi_exists", "anti_not_exists", "anti_not_in",
                              "interval_inner", "interval_left", "interval_right", "interval_full",
                              "temporal_inner", "temporal_left", "over_rows", "over_range"}

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
            if key_index is not None:
                if any(r[key_index] == row[key_index] for r in live):
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
    kind = {"join_inner": "JOIN", "join_left": "LEFT JOIN", "join_right": "RIGHT JOIN", "join_full": "FULL JOIN"}[family]
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
        tables.append({
            "name": name,
            "columns": [["order_id", "INT"], [column, "TIMESTAMP(3)"]],
            "rowtime": {"column": column, "watermark_delay_ms": _delay(rng)},
            "rows": [["+I", _maybe_null(rng, rng.randint(1, 3)), _ts(t)] for t in times],
        })
    lower, upper = rng.choice([0, 1, 2, 5]), rng.choice([0, 1, 2, 5])
    condition = rng.choice([
        f"b.ship_ts BETWEEN a.ts - INTERVAL '{lower}' MINUTE AND a.ts + INTERVAL '{upper}' MINUTE",
        f"b.ship_ts >= a.ts - INTERVAL '{lower}' MINUTE AND b.ship_ts < a.ts + INTERVAL '{upper + 1}' MINUTE",
        f"a.ts > b.ship_ts - INTERVAL '{upper + 1}' MINUTE AND a.ts <= b.ship_ts + INTERVAL '{lower}' MINUTE",
    ])
    residual = " AND b.order_id <> 2" if rng.random() < 0.15 else ""  # neither equality nor time bound
    kind = {"interval_inner": "JOIN", "interval_left": "LEFT JOIN", "interval_right": "RIGHT JOIN",
            "interval_full": "FULL JOIN"}[family]
    query = (f"SELECT a.order_id, a.ts, b.order_id AS ship_order_id, b.ship_ts FROM Orders a {kind} Shipments b "
             f"ON a.order_id = b.order_id AND {condition}{residual}")
    return {"tables": tables, "query": query}


def _temporal_join(rng: random.Random, family: str) -> dict:
    currencies = ["EUR", "USD", "JPY"]
    n_orders = 0 if rng.random() < 0.08 else rng.randint(1, 8)
    order_times = _event_times(rng, n_orders, 60_000, rng.choice([0, 0, 45_000]), 0.15)
    orders = {
        "name": "Orders",
        "columns": [["order_id", "INT"], ["currency", "STRING"], ["amount", "INT"], ["order_time", "TIMESTAMP(3)"]],
        "rowtime": {"column": "order_time", "watermark_delay_ms": _delay(rng)},
        "rows": [["+I", i + 1, _maybe_null(rng, rng.choice(currencies)), rng.randint(1, 100), _ts(t)]
                 for i, t in enumerate(order_times)],
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
    query = ("SELECT o.order_id, o.order_time, o.currency, o.amount, r.rate, r.update_time FROM Orders AS o "
             f"{kind} RatesHistory FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency")
    return {"tables": [orders, rates], "query": query}


# -- OVER, deduplication, group aggregate ----------------------------------------------------------------------

def _items(rng: random.Random, n: int, disorder_ms: int, late_p: float, delay: int) -> dict:
    times = _event_times(rng, n, 60_000, disorder_ms, late_p)
    return {
        "name": "items",
        "columns": [["item_id", "STRING"], ["item_type", "STRING"], ["ts", "TIMESTAMP(3)"], ["price", "INT"]],
        "rowtime": {"column": "ts", "watermark_delay_ms": delay},
        "rows": [["+I", f"I{i:02d}", _maybe_null(rng, rng.choice(["x", "y"]), 0.05), _ts(t),
                  _maybe_null(rng, rng.randint(1, 60))] for i, t in enumerate(times)],
    }


def _over(rng: random.Random, family: str) -> dict:
    n = 0 if rng.random() < 0.05 else rng.randint(1, 10)
    table = _items(rng, n, rng.choice([0, 90_000]), 0.15, _delay(rng))
    partition = rng.choice(["PARTITION BY item_type ", ""])
    if family == "over_rows":
        frame = rng.choice(["ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
                            f"ROWS BETWEEN {rng.randint(0, 3)} PRECEDING AND CURRENT ROW"])
    else:
        frame = rng.choice(["RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
                            f"RANGE BETWEEN INTERVAL '{rng.choice([1, 2, 5])}' MINUTE PRECEDING AND CURRENT ROW"])
    aggregates = rng.sample(["MAX(price)", "MIN(price)", "SUM(price)", "COUNT(*)", "COUNT(price)", "AVG(price)",
                             "FIRST_VALUE(price)", "LAST_VALUE(price)", "COUNT(DISTINCT price)"], rng.randint(1, 3))
    columns = ", ".join(f"{a} OVER w AS agg{i}" for i, a in enumerate(aggregates))
    query = (f"SELECT item_id, item_type, ts, price, {columns} FROM items "
             f"WINDOW w AS ({partition}ORDER BY ts {frame})")
    return {"tables": [table], "query": query}


def _dedup(rng: random.Random, family: str) -> dict:
    n = 0 if rng.random() < 0.05 else rng.randint(1, 10)
    table = _items(rng, n, rng.choice([0, 90_000]), 0.1, _delay(rng))
    order = rng.choice(["ts", "ts", "pt"])
    if order == "pt":
        table["proctime"] = "pt"
    direction = "ASC" if family == "dedup_first" else "DESC"
    query = (f"SELECT item_id, item_type, ts, price FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY item_type "
             f"ORDER BY {order} {direction}) AS rn FROM items) WHERE rn = 1")
    return {"tables": [table], "query": query}


def _group_agg(rng: random.Random, family: str, max_ops: int = 12) -> dict:
    with_pk = rng.random() < 0.4

    def make_row(key):
        return [key if key is not None else rng.randint(1, 6), _maybe_null(rng, rng.choice(["x", "y", "z"])),
                _maybe_null(rng, rng.randint(0, 30))]

    n_ops = 0 if rng.random() < 0.05 else rng.randint(1, max_ops)
    table = {"name": "src", "columns": [["id", "INT"], ["k", "STRING"], ["v", "INT"]],
             "rows": _changelog(rng, make_row, n_ops, 0 if with_pk else None)}
    if with_pk:
        table["primary_key"] = ["id"]
    aggregates = rng.sample(["COUNT(*)", "SUM(v)", "MIN(v)", "MAX(v)", "AVG(v)", "COUNT(v)", "COUNT(DISTINCT v)"],
                            rng.randint(1, 3))
    having = rng.choice(["", "", " HAVING COUNT(*) > 1"])
    columns = ", ".join(f"{a} AS agg{i}" for i, a in enumerate(aggregates))
    return {"tables": [table], "query": f"SELECT k, {columns} FROM src GROUP BY k{having}"}


_BUILDERS = {
    **{f: _regular_join for f in ("join_inner", "join_left", "join_right", "join_full")},
    **{f: _semi_anti for f in ("semi_in", "semi_exists", "anti_not_exists", "anti_not_in")},
    **{f: _interval_join for f in ("interval_inner", "interval_left", "interval_right", "interval_full")},
    **{f: _temporal_join for f in ("temporal_inner", "temporal_left")},
    "over_rows": _over, "over_range": _over,
    "dedup_first": _dedup, "dedup_last": _dedup,
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
        "description": f"generated: group_agg in mini-batch mode, seed {seed}, index {index} (tests/flink_diff/generate.py)",
        "tables": case["tables"],
        "arrival": _interleave(rng, case["tables"]),
        "setup": [MINI_BATCH_SETUP],
        "query": case["query"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=len(FAMILIES) * 6)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--mini-batch", action="store_true", help="group-aggregate cases in mini-batch mode instead")
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    cases = ([generate_mini_batch_case(args.seed, i) for i in range(args.n)] if args.mini_batch
             else generate_cases(args.n, args.seed))
    for case in cases:
        (args.out_dir / f"{case['name']}.json").write_text(json.dumps(case, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
