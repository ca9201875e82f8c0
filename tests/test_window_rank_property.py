"""Property: a window Top-N over random rows, in random micro-batches, ends as the batch query over the input
(docs/semantics.md §11.3).

Each seeded case is an insert-only table of rows spread over two hours (keys and values from small ranges, NULLs
among them, so that rows tie), with a watermark delay longer than that, so that no row is late and every window
fires at the end of input. Rows arrive in the order of their ``id``, so the streaming side's tie rule (arrival
order) is the batch side's ``ORDER BY v DESC NULLS LAST, id``. The batch side is Spark SQL's ``row_number()`` over
Spark's own ``window()`` for TUMBLE and HOP and explicit window ends for CUMULATE, so it shares no window
assignment and no ranking with the streaming side. All cases run in one ``replay_cases`` call.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta

import pytest
from flink_diff.engine_replay import replay_documents, sorted_final

COLUMNS = [["id", "INT"], ["k", "INT"], ["v", "INT"], ["ts", "TIMESTAMP(3)"]]
_SPARK_WINDOW = (
    "SELECT id, k, v, ts, window.start AS ws, window.end AS we FROM (SELECT *, {window} AS window FROM {{T}})"
)
_CUMULATIVE = (
    "SELECT id, k, v, ts, ws, we FROM (SELECT *, window(ts, '30 minutes').start AS ws FROM {T}) "
    "LATERAL VIEW explode(array(1, 2, 3)) AS i "
    "LATERAL VIEW explode(array(ws + make_dt_interval(0, 0, 10 * i))) AS we WHERE we > ts"
)
QUERIES = [
    ("TUMBLE(TABLE T, DESCRIPTOR(ts), INTERVAL '10' MINUTES)", _SPARK_WINDOW.format(window="window(ts, '10 minutes')")),
    (
        "HOP(TABLE T, DESCRIPTOR(ts), INTERVAL '10' MINUTES, INTERVAL '30' MINUTES)",
        _SPARK_WINDOW.format(window="window(ts, '30 minutes', '10 minutes')"),
    ),
    ("CUMULATE(TABLE T, DESCRIPTOR(ts), INTERVAL '10' MINUTES, INTERVAL '30' MINUTES)", _CUMULATIVE),
]
SEEDS = [1, 2]
START = datetime(2024, 1, 1, 10, 0)


def _rows(rng: random.Random, n: int) -> list[list]:
    rows = []
    for i in range(n):
        ts = START + timedelta(milliseconds=rng.randint(0, 2 * 3_600_000))
        k = None if rng.random() < 0.1 else rng.randint(1, 3)
        v = None if rng.random() < 0.1 else rng.randint(0, 8)
        rows.append(["+I", i, k, v, ts.strftime("%Y-%m-%d %H:%M:%S.%f")[:23]])
    return rows


def _case(seed: int, index: int, tvf: str, keyed: bool, low: int, high: int) -> dict:
    rng = random.Random(seed * 100 + index)
    keys = ", k" if keyed else ""
    return {
        "name": f"window_rank_property_{seed}_{index}",
        "tables": [
            {
                "name": "T",
                "columns": COLUMNS,
                "rowtime": {"column": "ts", "watermark_delay_ms": 3 * 3_600_000},
                "rows": _rows(rng, rng.randint(120, 200)),
            }
        ],
        "query": f"SELECT id, k, v, window_start, window_end, rn FROM (SELECT id, k, v, window_start, window_end, "
        f"ROW_NUMBER() OVER (PARTITION BY window_start, window_end{keys} ORDER BY v DESC) AS rn "
        f"FROM TABLE({tvf})) WHERE rn BETWEEN {low} AND {high}",
    }


def _batch_result(spark, case: dict, windows: str, keyed: bool, low: int, high: int) -> list[list]:
    rows = [(i, k, v, datetime.fromisoformat(ts)) for _, i, k, v, ts in case["tables"][0]["rows"]]
    view = case["name"]
    spark.createDataFrame(rows, "id INT, k INT, v INT, ts TIMESTAMP").createOrReplaceTempView(view)
    keys = ", k" if keyed else ""
    query = (
        "SELECT id, k, v, date_format(ws, 'yyyy-MM-dd HH:mm:ss.SSS'), date_format(we, 'yyyy-MM-dd HH:mm:ss.SSS'), rn "
        f"FROM (SELECT *, row_number() OVER (PARTITION BY ws, we{keys} ORDER BY v DESC NULLS LAST, id) AS rn "
        f"FROM ({windows.format(T=view)})) WHERE rn BETWEEN {low} AND {high}"
    )
    return sorted((list(r) for r in spark.sql(query).collect()), key=json.dumps)


@pytest.mark.parametrize("engine", ["jvm", pytest.param("python", marks=pytest.mark.slow)])
def test_window_rank_of_random_rows_ends_as_the_batch_query(spark, tmp_path, engine):
    documents = {}
    for seed in SEEDS:
        for i, (tvf, windows) in enumerate(QUERIES):
            keyed = (seed + i) % 2 == 0
            low, high = random.Random(seed * 10 + i).choice([(1, 1), (1, 3), (2, 4)])
            case = _case(seed, i, tvf, keyed, low, high)
            documents[case["name"]] = (case, windows, keyed, low, high)
    rows_per_batch = random.Random(sum(SEEDS)).randint(20, 60)
    results = replay_documents(spark, engine, rows_per_batch, [d[0] for d in documents.values()], tmp_path)
    for name, (case, windows, keyed, low, high) in documents.items():
        final = sorted_final(results[name], name)
        assert {r[0] for r in results[name]["changelog"]} == {"+I"}, name  # final rows only
        expected = _batch_result(spark, case, windows, keyed, low, high)
        assert expected, name
        assert final == expected, (name, rows_per_batch)
