"""Property: chains of event-time operators over random in-order input, in random micro-batches, end as the batch
query over the final input (docs/semantics.md §11.6).

Each seeded case feeds rows whose times rise with jitter within the watermark delay (no row is late), so that the
upstream operator fires while the input still arrives: per-key 10-minute window aggregates windowed again by 20
minutes (a window's results reach the next window before the watermark that fired them), and an interval join into
a 10-minute TUMBLE aggregate (the join holds the watermark back by 5 minutes, so none of its rows is late for the
window; the tables arrive interleaved in time and in micro-batches of a few rows, where a window fired too early
would drop them). The batch side is Spark SQL over the final rows with Spark's own ``window()``. All cases run in
one ``replay_cases`` call.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta

import pytest
from flink_diff.engine_replay import replay_documents, sorted_final

START = datetime(2024, 1, 1, 10, 0)
SEEDS = [1, 2]
DELAY_MS = 60_000


def _times(rng: random.Random, n: int) -> list[str]:
    """``n`` times over about two hours that rise with a jitter of up to half the watermark delay."""
    out, t = [], 0
    for _ in range(n):
        t += rng.randint(0, 90_000)
        at = START + timedelta(milliseconds=max(0, t - rng.randint(0, DELAY_MS // 2)))
        out.append(at.strftime("%Y-%m-%d %H:%M:%S.%f")[:23])
    return out


def _table(name: str, columns: list[list[str]], rows: list[list]) -> dict:
    time = columns[-1][0]
    return {
        "name": name,
        "columns": columns,
        "rowtime": {"column": time, "watermark_delay_ms": DELAY_MS},
        "rows": [["+I", *r] for r in rows],
    }


def _cascaded(rng: random.Random, name: str) -> dict:
    rows = [[rng.randint(1, 3), rng.randint(0, 20), t] for t in _times(rng, rng.randint(50, 70))]
    return {
        "name": name,
        "tables": [_table("T", [["k", "INT"], ["v", "INT"], ["ts", "TIMESTAMP(3)"]], rows)],
        "setup": [
            (
                "CREATE VIEW per_k AS SELECT k, window_time AS rt, SUM(v) AS s, COUNT(*) AS n FROM "
                "TABLE(TUMBLE(TABLE T, DESCRIPTOR(ts), INTERVAL '10' MINUTES)) GROUP BY k, window_start, window_end, "
                "window_time"
            )
        ],
        "query": "SELECT window_start, window_end, SUM(s) AS s, SUM(n) AS n, COUNT(*) AS windows FROM "
        "TABLE(TUMBLE(TABLE per_k, DESCRIPTOR(rt), INTERVAL '20' MINUTES)) GROUP BY window_start, window_end",
    }


_CASCADED_BATCH = (
    "SELECT date_format(w.start, 'yyyy-MM-dd HH:mm:ss.SSS'), date_format(w.end, 'yyyy-MM-dd HH:mm:ss.SSS'), "
    "SUM(s), SUM(n), COUNT(*) FROM (SELECT window(rt, '20 minutes') AS w, s, n FROM (SELECT k, "
    "window(ts, '10 minutes').end - INTERVAL 1 MILLISECOND AS rt, SUM(v) AS s, COUNT(*) AS n FROM {T} "
    "GROUP BY k, window(ts, '10 minutes'))) GROUP BY w"
)


def _interval(rng: random.Random, name: str) -> dict:
    orders = [[i, rng.randint(1, 3), t] for i, t in enumerate(_times(rng, rng.randint(25, 35)))]
    ships = [[rng.randint(1, 3), t] for t in _times(rng, rng.randint(25, 35))]
    # The tables arrive interleaved in time, so that a shipment joins an order whose window the watermark is near.
    arrival = [name for _, name in sorted([(r[-1], "A") for r in orders] + [(r[-1], "B") for r in ships])]
    return {
        "name": name,
        "tables": [
            _table("A", [["id", "INT"], ["k", "INT"], ["ts", "TIMESTAMP(3)"]], orders),
            _table("B", [["k", "INT"], ["ts2", "TIMESTAMP(3)"]], ships),
        ],
        "arrival": arrival,
        "setup": [
            (
                "CREATE VIEW j AS SELECT a.id, a.ts FROM A a JOIN B b ON a.k = b.k AND b.ts2 BETWEEN a.ts - INTERVAL "
                "'2' MINUTE AND a.ts + INTERVAL '5' MINUTE"
            )
        ],
        "query": "SELECT window_start, window_end, COUNT(*) AS n, COUNT(DISTINCT id) AS orders FROM "
        "TABLE(TUMBLE(TABLE j, DESCRIPTOR(ts), INTERVAL '10' MINUTES)) GROUP BY window_start, window_end",
    }


_INTERVAL_BATCH = (
    "SELECT date_format(w.start, 'yyyy-MM-dd HH:mm:ss.SSS'), date_format(w.end, 'yyyy-MM-dd HH:mm:ss.SSS'), "
    "COUNT(*), COUNT(DISTINCT id) FROM (SELECT window(a.ts, '10 minutes') AS w, a.id FROM {A} a JOIN {B} b ON "
    "a.k = b.k AND b.ts2 BETWEEN a.ts - INTERVAL 2 MINUTES AND a.ts + INTERVAL 5 MINUTES) GROUP BY w"
)


def _batch_result(spark, case: dict, query: str) -> list[list]:
    views = {}
    for table in case["tables"]:
        columns = ", ".join(f"{c} {'TIMESTAMP' if t.startswith('TIMESTAMP') else t}" for c, t in table["columns"])
        rows = [tuple(datetime.fromisoformat(v) if isinstance(v, str) else v for v in r[1:]) for r in table["rows"]]
        view = f"{case['name']}_{table['name']}"
        spark.createDataFrame(rows, columns).createOrReplaceTempView(view)
        views[table["name"]] = view
    return sorted((list(r) for r in spark.sql(query.format(**views)).collect()), key=json.dumps)


@pytest.mark.parametrize("engine", ["jvm", pytest.param("python", marks=pytest.mark.slow)])
def test_chained_event_time_operators_end_as_the_batch_query(spark, tmp_path, engine):
    documents = {}
    for seed in SEEDS:
        rng = random.Random(seed)
        for shape, build, query in (("cascaded", _cascaded, _CASCADED_BATCH), ("interval", _interval, _INTERVAL_BATCH)):
            case = build(rng, f"window_chain_property_{shape}_{seed}")
            documents[case["name"]] = (case, query)
    rows_per_batch = random.Random(sum(SEEDS)).randint(2, 6)
    results = replay_documents(spark, engine, rows_per_batch, [d[0] for d in documents.values()], tmp_path)
    for name, (case, query) in documents.items():
        assert {r[0] for r in results[name]["changelog"]} == {"+I"}, name  # one final row per window
        expected = _batch_result(spark, case, query)
        assert len(expected) >= 2, name
        assert sorted_final(results[name], name) == expected, (name, rows_per_batch)
