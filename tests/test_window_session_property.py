"""Property: a session window aggregate of a random insert-only table, in random micro-batches, ends as Spark's batch
``session_window()`` aggregate of the table (docs/semantics.md §11.2).

Each seeded case is a table of rows spread over two hours, with a watermark delay longer than that, so that no row
is late and every session fires at the end of input; the gap (3 to 10 minutes) and whether sessions are per key
vary by case. The batch side is Spark's own session windows, sharing no code with the streaming side. (An updating
input is left out: its retractions join sessions as Flink's do, so the result is not the batch query of the final
rows.) All cases run in one ``replay_cases`` call.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta

import pytest
from flink_diff.engine_replay import replay_documents, sorted_final
from test_window_aggregate_property import AGGREGATES, COLUMNS, START

SEEDS = [1, 2, 3]
_TS = "'yyyy-MM-dd HH:mm:ss.SSS'"


def _case(seed: int) -> tuple[dict, int, bool]:
    rng = random.Random(f"session-{seed}")
    gap, keyed = rng.randint(3, 10), seed % 2 == 1
    rows = []
    for i in range(rng.randint(100, 200)):
        ts = START + timedelta(milliseconds=rng.randint(0, 2 * 3_600_000))
        k = None if rng.random() < 0.1 else rng.randint(1, 4)
        rows.append(["+I", i, k, rng.choice([None, *range(0, 50, 5)]), ts.strftime("%Y-%m-%d %H:%M:%S.%f")[:23]])
    partition, keys = (" PARTITION BY k", "k, ") if keyed else ("", "")
    tvf = f"SESSION(TABLE T{partition}, DESCRIPTOR(ts), INTERVAL '{gap}' MINUTES)"
    case = {
        "name": f"window_session_property_{seed}",
        "tables": [
            {
                "name": "T",
                "columns": COLUMNS,
                "rowtime": {"column": "ts", "watermark_delay_ms": 3 * 3_600_000},
                "rows": rows,
            }
        ],
        "query": f"SELECT {keys}window_start, window_end, {AGGREGATES} FROM TABLE({tvf}) "
        f"GROUP BY {keys}window_start, window_end",
    }
    return case, gap, keyed


def _batch_result(spark, case: dict, gap: int, keyed: bool) -> list[list]:
    rows = [(i, k, v, datetime.fromisoformat(ts)) for _, i, k, v, ts in case["tables"][0]["rows"]]
    view = case["name"]
    spark.createDataFrame(rows, "id INT, k INT, v INT, ts TIMESTAMP").createOrReplaceTempView(view)
    keys = "k, " if keyed else ""
    query = (
        f"SELECT {keys}date_format(w.start, {_TS}), date_format(w.end, {_TS}), {AGGREGATES} FROM (SELECT *, "
        f"session_window(ts, '{gap} minutes') AS w FROM {view}) GROUP BY {keys}w"
    )
    return sorted((list(r) for r in spark.sql(query).collect()), key=json.dumps)


@pytest.mark.parametrize("engine", ["jvm", pytest.param("python", marks=pytest.mark.slow)])
def test_session_window_aggregate_of_a_random_table_ends_as_sparks_session_windows(spark, tmp_path, engine):
    documents = {}
    for seed in SEEDS:
        case, gap, keyed = _case(seed)
        documents[case["name"]] = (case, gap, keyed)
    rows_per_batch = random.Random(sum(SEEDS)).randint(20, 60)
    results = replay_documents(spark, engine, rows_per_batch, [d[0] for d in documents.values()], tmp_path)
    for name, (case, gap, keyed) in documents.items():
        final = sorted_final(results[name], name)
        assert {r[0] for r in results[name]["changelog"]} == {"+I"}, name
        expected = _batch_result(spark, case, gap, keyed)
        assert expected, name
        assert final == expected, (name, gap, rows_per_batch)
