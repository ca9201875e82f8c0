"""SQL constructs beyond the Flink reference cases, run on Spark: the final result equals the batch query.

Expected results are worked out by hand from batch SQL semantics over the final inputs (docs/semantics.md §1);
each case is replayed seven arrivals per micro-batch through the planner and the operators.
"""

import json

import pytest

from streamjoin.testing import replay_cases

CASES = {
    # UNION ALL of a changelog and an insert-only table, then SELECT DISTINCT (a GroupAggregate without calls).
    "union_all_distinct": (
        {
            "tables": [
                {
                    "name": "A",
                    "columns": [["k", "INT"], ["v", "STRING"]],
                    "rows": [["+I", 1, "a"], ["+I", 2, "b"], ["-D", 1, "a"], ["+I", 3, "c"]],
                },
                {"name": "B", "columns": [["k", "INT"], ["v", "STRING"]], "rows": [["+I", 2, "b"], ["+I", 4, "d"]]},
            ],
            "arrival": ["A", "B", "A", "A", "B", "A"],
            "query": "SELECT DISTINCT k, v FROM (SELECT k, v FROM A UNION ALL SELECT k, v FROM B)",
        },
        [[2, "b"], [3, "c"], [4, "d"]],
    ),
    # A filter and an expression before an interval join: order 2 is filtered out, ship 3 is outside its window.
    "filtered_interval_join": (
        {
            "tables": [
                {
                    "name": "Orders",
                    "columns": [["id", "INT"], ["amt", "INT"], ["ts", "TIMESTAMP(3)"]],
                    "rowtime": {"column": "ts", "watermark_delay_ms": 0},
                    "rows": [
                        ["+I", 1, 10, "2024-01-01 10:00:00"],
                        ["+I", 2, 200, "2024-01-01 10:01:00"],
                        ["+I", 3, 30, "2024-01-01 10:02:00"],
                    ],
                },
                {
                    "name": "Ships",
                    "columns": [["id", "INT"], ["sts", "TIMESTAMP(3)"]],
                    "rowtime": {"column": "sts", "watermark_delay_ms": 0},
                    "rows": [
                        ["+I", 1, "2024-01-01 10:05:00"],
                        ["+I", 2, "2024-01-01 10:03:00"],
                        ["+I", 3, "2024-01-01 11:00:00"],
                    ],
                },
            ],
            "query": "SELECT o.id, o.amt * 2 AS dbl, s.sts FROM (SELECT * FROM Orders WHERE amt < 100) o JOIN Ships s "
            "ON o.id = s.id AND s.sts BETWEEN o.ts AND o.ts + INTERVAL '10' MINUTE",
        },
        [[1, 20, "2024-01-01 10:05:00.000"]],
    ),
    # GROUP BY an expression with HAVING over a changelog: a is updated, b deleted.
    "group_by_expression_having": (
        {
            "tables": [
                {
                    "name": "T",
                    "columns": [["k", "STRING"], ["n", "INT"]],
                    "rows": [
                        ["+I", "a", 1],
                        ["+I", "a", 2],
                        ["+I", "b", 5],
                        ["-U", "a", 1],
                        ["+U", "a", 10],
                        ["-D", "b", 5],
                        ["+I", "c", 3],
                        ["+I", "d", 1],
                    ],
                },
            ],
            "query": "SELECT UPPER(k) AS K, SUM(n) AS s, COUNT(*) AS c FROM T GROUP BY UPPER(k) HAVING SUM(n) > 2",
        },
        [["A", 12, 2], ["C", 3, 1]],
    ),
}


@pytest.fixture(scope="module")
def results(spark, tmp_path_factory):
    folder = tmp_path_factory.mktemp("constructs")
    paths = []
    for name, (case, _) in CASES.items():
        path = folder / f"{name}.json"
        path.write_text(json.dumps({"name": name, **case}))
        paths.append(path)
    return replay_cases(spark, paths, folder / "out", micro_batch_rows=7)


@pytest.mark.parametrize("name", list(CASES))
def test_final_result_equals_the_batch_query(results, name):
    result = results[name]
    assert "error" not in result, result.get("error")
    assert sorted(result["final"]) == sorted(CASES[name][1])
