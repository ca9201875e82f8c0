"""Property: a window aggregate over a random changelog, in random micro-batches, ends as the batch query over the
final input (docs/semantics.md §11).

Each seeded case is a keyed changelog (inserts, updates that move a row to another key or time, deletes) of rows
spread over two hours, with a watermark delay longer than that, so that no row is late and every window fires at
the end of input: the materialised result must then equal the batch aggregate of the final rows per window. The
batch side is Spark SQL with Spark's own ``window()`` for TUMBLE and HOP and explicit window ends for CUMULATE,
so it shares no window assignment with the streaming side. All cases run in one ``replay_cases`` call.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta

import pytest
from flink_diff.engine_replay import replay_documents, sorted_final

from streamjoin.changelog import RowKind, materialize

COLUMNS = [["id", "INT"], ["k", "INT"], ["v", "INT"], ["ts", "TIMESTAMP(3)"]]
AGGREGATES = "COUNT(*) AS c, SUM(v) AS s, MIN(v) AS lo, MAX(v) AS hi, COUNT(DISTINCT v) AS d, COUNT(v) AS n"
#: (window table function, Spark batch windows of the final rows as ``w(k, v, window_start, window_end)``).
_SPARK_WINDOW = (
    "SELECT k, v, window.start AS window_start, window.end AS window_end FROM (SELECT *, {window} AS window "
)
_CUMULATIVE = (
    "SELECT k, v, window_start, window_end FROM (SELECT k, v, ts, window(ts, '30 minutes').start AS window_start "
    "FROM {T}) LATERAL VIEW explode(array(1, 2, 3)) AS i "
    "LATERAL VIEW explode(array(window_start + make_dt_interval(0, 0, 10 * i))) AS window_end WHERE window_end > ts"
)
QUERIES = [
    (
        "TUMBLE(TABLE T, DESCRIPTOR(ts), INTERVAL '10' MINUTES)",
        _SPARK_WINDOW.format(window="window(ts, '10 minutes')") + "FROM {T})",
    ),
    (
        "HOP(TABLE T, DESCRIPTOR(ts), INTERVAL '10' MINUTES, INTERVAL '30' MINUTES)",
        _SPARK_WINDOW.format(window="window(ts, '30 minutes', '10 minutes')") + "FROM {T})",
    ),
    ("CUMULATE(TABLE T, DESCRIPTOR(ts), INTERVAL '10' MINUTES, INTERVAL '30' MINUTES)", _CUMULATIVE),
]
SEEDS = [1, 2]
START = datetime(2024, 1, 1, 10, 0)


def _changelog(rng: random.Random, n: int) -> list[list]:
    live: dict[int, list] = {}
    out: list[list] = []

    def value_row(row_id: int) -> list:
        ts = START + timedelta(milliseconds=rng.randint(0, 2 * 3_600_000))
        k = None if rng.random() < 0.1 else rng.randint(1, 4)
        return [row_id, k, rng.choice([None, *range(0, 50, 5)]), ts.strftime("%Y-%m-%d %H:%M:%S.%f")[:23]]

    while len(out) < n:
        roll = rng.random()
        if not live or roll < 0.5:
            row = value_row(len(out) + 1000)
            live[row[0]] = row
            out.append(["+I", *row])
        elif roll < 0.85:
            old = live[rng.choice(sorted(live))]
            new = value_row(old[0])
            live[old[0]] = new
            out += [["-U", *old], ["+U", *new]]
        else:
            out.append(["-D", *live.pop(rng.choice(sorted(live)))])
    return out


def _case(seed: int, index: int, tvf: str, keyed: bool) -> dict:
    rng = random.Random(seed * 100 + index)
    keys = "k, " if keyed else ""
    return {
        "name": f"window_property_{seed}_{index}",
        "tables": [
            {
                "name": "T",
                "columns": COLUMNS,
                "primary_key": ["id"],
                "rowtime": {"column": "ts", "watermark_delay_ms": 3 * 3_600_000},
                "rows": _changelog(rng, rng.randint(120, 200)),
            }
        ],
        "query": f"SELECT {keys}window_start, window_end, {AGGREGATES} FROM TABLE({tvf}) "
        f"GROUP BY {keys}window_start, window_end",
    }


def _batch_result(spark, case: dict, windows: str, keyed: bool) -> list[list]:
    final = materialize((RowKind.from_short(r[0]), tuple(r[1:])) for r in case["tables"][0]["rows"])
    rows = [(i, k, v, datetime.fromisoformat(ts)) for (i, k, v, ts), n in final.items() for _ in range(n)]
    view = case["name"]
    spark.createDataFrame(rows, "id INT, k INT, v INT, ts TIMESTAMP").createOrReplaceTempView(view)
    keys = "k, " if keyed else ""
    query = (
        f"SELECT {keys}date_format(window_start, 'yyyy-MM-dd HH:mm:ss.SSS'), "
        f"date_format(window_end, 'yyyy-MM-dd HH:mm:ss.SSS'), {AGGREGATES} "
        f"FROM ({windows.format(T=view)}) GROUP BY {keys}window_start, window_end"
    )
    return sorted((list(r) for r in spark.sql(query).collect()), key=json.dumps)


@pytest.mark.parametrize("engine", ["jvm", pytest.param("python", marks=pytest.mark.slow)])
def test_window_aggregate_of_a_random_changelog_ends_as_the_batch_query(spark, tmp_path, engine):
    documents = {}
    for seed in SEEDS:
        for i, (tvf, windows) in enumerate(QUERIES):
            keyed = (seed + i) % 2 == 0
            case = _case(seed, i, tvf, keyed)
            documents[case["name"]] = (case, windows, keyed)
    rows_per_batch = random.Random(sum(SEEDS)).randint(20, 60)
    results = replay_documents(spark, engine, rows_per_batch, [d[0] for d in documents.values()], tmp_path)
    for name, (case, windows, keyed) in documents.items():
        final = sorted_final(results[name], name)
        assert {r[0] for r in results[name]["changelog"]} == {"+I"}, name  # one final row per window and key
        expected = _batch_result(spark, case, windows, keyed)
        assert expected, name
        assert final == expected, (name, rows_per_batch)
