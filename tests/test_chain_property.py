"""Property: chains of operators — a join feeding a group aggregate, a Top-N over a changelog or over such an
aggregate —, over random changelogs in micro-batches of a few hundred changes, emit a changelog that materialises
in ``_seq`` order to the batch query over the final inputs.

A chain is where the order inside a micro-batch matters across operators: a group collects the changes of many
join keys, and an update's ``-U`` and ``+U`` can land in two join keys (docs/semantics.md §1.1, "Order inside a
micro-batch"). Each seeded case is two keyed changelogs (inserts, updates that move a row to another join key,
deletes, NULL join keys) with keys from a small range, so every micro-batch holds many changes per group. The
streaming side is the SQL replay (:mod:`streamjoin.testing.replay`) at a random batch size; the batch side is
Spark SQL over the materialised final tables. Every case runs as its own query, all in one ``replay_cases`` call.
The cost is a few micro-batches per case, run four at a time.
"""

from __future__ import annotations

import json
import random

import pytest

from streamjoin.changelog import RowKind, materialize
from streamjoin.jvm import ENGINE_CONF
from streamjoin.testing.replay import replay_cases

COLUMNS = {
    "A": [["id", "INT"], ["k", "INT"], ["s", "STRING"], ["v", "INT"]],
    "B": [["id", "INT"], ["k", "INT"], ["t", "STRING"], ["w", "INT"]],
}
SPARK_SCHEMA = {"A": "id INT, k INT, s STRING, v INT", "B": "id INT, k INT, t STRING, w INT"}

#: The chained queries, ``{A}`` / ``{B}`` the two tables (the batch side names its views).
QUERIES = [
    (
        "SELECT {B}.t, COUNT(*) AS c, COUNT(DISTINCT {A}.s) AS d, COUNT({B}.w) AS n, SUM({A}.v) AS sv "
        "FROM {A} LEFT JOIN {B} ON {A}.k = {B}.k GROUP BY {B}.t"
    ),
    (
        "SELECT {A}.s, {B}.t, COUNT(*) AS c, SUM({A}.v) AS sv, MIN({B}.w) AS mw, MAX({A}.v) AS xv "
        "FROM {A} JOIN {B} ON {A}.k = {B}.k GROUP BY {A}.s, {B}.t"
    ),
    (
        "SELECT {B}.t, COUNT(*) AS c, MAX({A}.v) AS xv, MIN({A}.v) AS nv "
        "FROM {A} FULL JOIN {B} ON {A}.k = {B}.k GROUP BY {B}.t"
    ),
    (
        # One side unique on the join key: the aggregate is split around the join (docs/semantics.md §6.1).
        "SELECT g.t, COUNT(*) AS c, SUM({A}.v) AS sv, MAX({A}.v) AS xv, MIN(g.w) AS nw "
        "FROM {A} JOIN (SELECT k, MIN(t) AS t, MAX(w) AS w FROM {B} GROUP BY k) g ON {A}.k = g.k GROUP BY g.t"
    ),
]
#: Top-N chains, run on the first seed only (a case costs its replay).
RANK_QUERIES = [
    # Top-N over a changelog (RetractableTopNFunction), with its rank and with an offset without it.
    (
        "SELECT id, k, v, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC, id) AS rn FROM {A}) "
        "WHERE rn <= 3"
    ),
    (
        "SELECT id, k, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v, id) AS rn FROM {A}) "
        "WHERE rn BETWEEN 2 AND 3"
    ),
    # A join into an aggregate into a Top-N: the most frequent values of A.s per B.t.
    (
        "SELECT t, s, c, rn FROM (SELECT t, s, c, ROW_NUMBER() OVER (PARTITION BY t ORDER BY c DESC, s) AS rn "
        "FROM (SELECT {B}.t, {A}.s, COUNT(*) AS c FROM {A} JOIN {B} ON {A}.k = {B}.k GROUP BY {B}.t, {A}.s)) "
        "WHERE rn <= 2"
    ),
]
SEEDS = [1, 2]


def _changelog(rng: random.Random, table: str, n: int) -> list[list]:
    """``n`` random changes of a table keyed by ``id``: inserts, updates (often of the join key), deletes."""
    live: dict[int, list] = {}
    out: list[list] = []
    next_id = 0

    def value_row(row_id: int) -> list:
        k = None if rng.random() < 0.1 else rng.randint(1, 5)
        text = f"{table.lower()}{rng.randint(1, 3)}"
        return [row_id, k, text, rng.choice([None, *range(0, 50, 5)])]

    while len(out) < n:
        roll = rng.random()
        if not live or roll < 0.45:
            row = value_row(next_id)
            next_id += 1
            live[row[0]] = row
            out.append(["+I", *row])
        elif roll < 0.85:
            old = live[rng.choice(sorted(live))]
            new = value_row(old[0])
            live[old[0]] = new
            out += [["-U", *old], ["+U", *new]]
        else:
            old = live.pop(rng.choice(sorted(live)))
            out.append(["-D", *old])
    return out


def _case(seed: int, index: int, query: str) -> dict:
    rng = random.Random(seed * 100 + index)
    rows = {t: _changelog(rng, t, rng.randint(150, 250)) for t in ("A", "B")}
    arrival = [t for t in ("A", "B") for _ in rows[t]]
    rng.shuffle(arrival)
    return {
        "name": f"chain_property_{seed}_{index}",
        "tables": [{"name": t, "columns": COLUMNS[t], "rows": rows[t], "primary_key": ["id"]} for t in ("A", "B")],
        "arrival": arrival,
        "query": query.format(A="A", B="B"),
    }


def _batch_result(spark, case: dict, query: str) -> list[list]:
    """The query over the final inputs, in Spark SQL (views named after the case)."""
    names = {}
    for table in case["tables"]:
        final = materialize((RowKind.from_short(r[0]), tuple(r[1:])) for r in table["rows"])
        rows = [row for row, n in final.items() for _ in range(n)]
        names[table["name"]] = view = f"{case['name']}_{table['name']}"
        spark.createDataFrame(rows, SPARK_SCHEMA[table["name"]]).createOrReplaceTempView(view)
    return sorted((list(r) for r in spark.sql(query.format(**names)).collect()), key=json.dumps)


# The python engine's run is slow (make test-all): make test holds its changelogs equal to the jvm engine's,
# change by change, in tests/test_engines_property.py.
@pytest.mark.parametrize("engine", ["jvm", pytest.param("python", marks=pytest.mark.slow)])
def test_chain_at_batch_size_ends_as_the_batch_query(spark, tmp_path, engine):
    cases = [(seed, i, q) for seed in SEEDS for i, q in enumerate(QUERIES)]
    cases += [(SEEDS[0], len(QUERIES) + i, q) for i, q in enumerate(RANK_QUERIES)]
    documents = {}
    for seed, i, query in cases:
        case = _case(seed, i, query)
        documents[case["name"]] = (case, query)
        (tmp_path / f"{case['name']}.json").write_text(json.dumps(case))
    rows_per_batch = random.Random(sum(SEEDS)).randint(100, 300)
    before = spark.conf.get(ENGINE_CONF)
    spark.conf.set(ENGINE_CONF, engine)
    try:
        results = replay_cases(
            spark, sorted(tmp_path.glob("chain_property_*.json")), tmp_path / "out", micro_batch_rows=rows_per_batch
        )
    finally:
        spark.conf.set(ENGINE_CONF, before)
    for name, (case, query) in documents.items():
        result = results[name]
        assert "error" not in result, (name, result.get("error"))
        # "final" is an error text when the changelog does not materialise in _seq order.
        assert isinstance(result["final"], list), (name, rows_per_batch, result["final"])
        assert sorted(result["final"], key=json.dumps) == _batch_result(spark, case, query), (name, rows_per_batch)
