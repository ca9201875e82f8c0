"""Property: a window join of two random insert-only tables, in random micro-batches, ends as the batch join of their
windows (docs/semantics.md §11.4).

Each seeded case is a pair of tables ``L``, ``R`` of rows spread over two hours, with a watermark delay longer than
that, so that no row is late and every window fires at the end of input; the join type (INNER, LEFT, RIGHT, FULL,
IN, NOT EXISTS) and the windows (TUMBLE, HOP, CUMULATE) vary by case. The batch side is Spark SQL: each table's
windows from Spark's own ``window()`` (explicit window ends for CUMULATE, as ``test_window_aggregate_property``),
joined by a regular batch join, so it shares neither window assignment nor join with the streaming side. All cases
run in one ``replay_cases`` call.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta

import pytest
from flink_diff.engine_replay import replay_documents, sorted_final
from test_window_aggregate_property import QUERIES, START

COLUMNS = [["id", "INT"], ["k", "INT"], ["v", "INT"], ["ts", "TIMESTAMP(3)"]]
HOWS = ["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "IN", "NOT EXISTS"]
SEEDS = [1, 2]
_TS = "'yyyy-MM-dd HH:mm:ss.SSS'"


def _rows(rng: random.Random, n: int, first_id: int) -> list[list]:
    out = []
    for i in range(n):
        ts = START + timedelta(milliseconds=rng.randint(0, 2 * 3_600_000))
        k = None if rng.random() < 0.1 else rng.randint(1, 5)
        out.append(["+I", first_id + i, k, rng.randint(0, 9), ts.strftime("%Y-%m-%d %H:%M:%S.%f")[:23]])
    return out


def _windowed(tvf: str, table: str) -> str:
    return f"(SELECT * FROM TABLE({tvf.replace('TABLE T', f'TABLE {table}')})) {table}"


def _query(tvf: str, how: str) -> str:
    left, right = _windowed(tvf, "L"), _windowed(tvf, "R")
    windows = "L.window_start = R.window_start AND L.window_end = R.window_end"
    if how == "IN":
        subquery = f"SELECT k FROM {right} WHERE {windows}"
        return f"SELECT L.k, L.v, L.window_start, L.window_end FROM {left} WHERE L.k IN ({subquery})"
    if how == "NOT EXISTS":
        return (
            f"SELECT L.k, L.v, L.window_start, L.window_end FROM {left} WHERE NOT EXISTS "
            f"(SELECT * FROM {right} WHERE L.k = R.k AND {windows})"
        )
    return (
        f"SELECT L.k, L.v, R.k, R.v, COALESCE(L.window_start, R.window_start), COALESCE(L.window_end, R.window_end) "
        f"FROM {left} {how} {right} ON L.k = R.k AND {windows}"
    )


def _case(seed: int, index: int, tvf: str, how: str) -> dict:
    rng = random.Random(seed * 100 + index)
    tables = [
        {
            "name": name,
            "columns": COLUMNS,
            "rowtime": {"column": "ts", "watermark_delay_ms": 3 * 3_600_000},
            "rows": _rows(rng, rng.randint(40, 90), first_id),
        }
        for name, first_id in (("L", 0), ("R", 1000))
    ]
    return {"name": f"window_join_property_{seed}_{index}", "tables": tables, "query": _query(tvf, how)}


def _batch_result(spark, case: dict, windows: str, how: str) -> list[list]:
    for table in case["tables"]:
        rows = [(k, v, datetime.fromisoformat(ts)) for _, _, k, v, ts in table["rows"]]
        view = f"{case['name']}_{table['name']}"
        spark.createDataFrame(rows, "k INT, v INT, ts TIMESTAMP").createOrReplaceTempView(view)
        spark.sql(windows.format(T=view)).createOrReplaceTempView(f"{view}_w")
    left, right = f"{case['name']}_L_w", f"{case['name']}_R_w"
    on = "l.k = r.k AND l.window_start = r.window_start AND l.window_end = r.window_end"
    fmt = f"date_format(window_start, {_TS}), date_format(window_end, {_TS})"
    if how in ("IN", "NOT EXISTS"):
        kind = "LEFT SEMI" if how == "IN" else "LEFT ANTI"
        query = f"SELECT l.k, l.v, {fmt.replace('window_', 'l.window_')} FROM {left} l {kind} JOIN {right} r ON {on}"
    else:
        join = how if how == "JOIN" else how.replace("JOIN", "OUTER JOIN")
        query = (
            f"SELECT l.k, l.v, r.k, r.v, date_format(coalesce(l.window_start, r.window_start), {_TS}), "
            f"date_format(coalesce(l.window_end, r.window_end), {_TS}) FROM {left} l {join} {right} r ON {on}"
        )
    return sorted((list(r) for r in spark.sql(query).collect()), key=json.dumps)


@pytest.mark.parametrize("engine", ["jvm", pytest.param("python", marks=pytest.mark.slow)])
def test_window_join_of_random_tables_ends_as_the_batch_join_of_their_windows(spark, tmp_path, engine):
    documents = {}
    for seed in SEEDS:
        for i, (tvf, windows) in enumerate(QUERIES):
            how = HOWS[(seed * len(QUERIES) + i) % len(HOWS)]
            case = _case(seed, i, tvf, how)
            documents[case["name"]] = (case, windows, how)
    rows_per_batch = random.Random(sum(SEEDS)).randint(20, 60)
    results = replay_documents(spark, engine, rows_per_batch, [d[0] for d in documents.values()], tmp_path)
    for name, (case, windows, how) in documents.items():
        final = sorted_final(results[name], name)
        assert {r[0] for r in results[name]["changelog"]} <= {"+I"}, name
        expected = _batch_result(spark, case, windows, how)
        assert expected, name
        assert final == expected, (name, how, rows_per_batch)
