"""The benchmark's figures from Spark's progress reports, and the jvm/python ratio over the same micro-batches."""

from types import SimpleNamespace

from bench.harness import from_progress


def _progress(rows: int, ms: float, state_rows: int = 0):
    return SimpleNamespace(
        numInputRows=rows,
        durationMs={"triggerExecution": ms},
        stateOperators=[SimpleNamespace(numRowsTotal=state_rows, memoryUsedBytes=0)],
    )


def test_rows_per_second_over_a_prefix_use_those_micro_batches_own_durations():
    # A no-data micro-batch (0 rows) is no micro-batch of the input: it is neither counted nor timed.
    progress = [_progress(100, 1000), _progress(0, 50), _progress(300, 500), _progress(600, 3000, state_rows=7)]
    m = from_progress("q", progress, seconds=10.0)
    assert m.per_batch == ((100, 1000.0), (300, 500.0), (600, 3000.0))
    assert (m.input_rows, m.batches, m.state_rows) == (1000, 3, 7)
    assert m.rows_per_second == 100.0  # the whole run's wall clock
    assert m.rows_per_second_over(1) == 100.0
    assert m.rows_per_second_over(2) == 400 / 1.5
    assert m.rows_per_second_over(10) == 1000 / 4.5  # fewer micro-batches than asked: all of them


def test_a_run_without_micro_batches_has_no_rate():
    assert from_progress("q", [], seconds=1.0).rows_per_second_over(2) == 0.0


def test_the_cost_per_row_lines_compare_each_coarse_case_with_its_fine_one():
    from bench.operators import CASES, STATE_GROWTH
    from bench.run import _state_growth

    cases = {c.name: c for c in CASES}
    fine = {
        "jvm": (from_progress("f", [_progress(600, 1000)], seconds=10.0), ""),
        "python": (from_progress("f", [_progress(100, 1000), _progress(100, 1000)], seconds=30.0), ""),
    }
    coarse = {
        "jvm": (from_progress("c", [_progress(600, 1000)], seconds=5.0), ""),
        "python": (from_progress("c", [_progress(100, 500), _progress(100, 500)], seconds=30.0), ""),
    }
    operators = [(cases[name], figures) for pair in STATE_GROWTH for name, figures in zip(pair, (fine, coarse))]
    flink = {name: {"ms": ms} for pair in STATE_GROWTH for name, ms in zip(pair, (4000, 8000))}
    tables = {"lineitem": SimpleNamespace(rows=600), "orders": SimpleNamespace(rows=150)}
    lines = _state_growth(operators, flink, tables, prefix=2)
    assert len(lines) == 2 * len(STATE_GROWTH)
    for (fine_name, _, _), line in zip(STATE_GROWTH, lines[1::2]):
        # jvm over its whole runs (120 against 60 rows/s), python over its first 2 micro-batches, Flink over its net
        # runtimes.
        assert fine_name in line and line.endswith("jvm 2.00×, python 2.00×, Flink 0.50×."), line
    assert _state_growth(operators[:1], flink, tables, prefix=2) == []


def test_the_pipeline_profile_puts_each_stage_in_its_part():
    from bench.pipeline_profile import classify

    main = "lineitem_with_order\nid = 8b25\nrunId = 8034\nbatch = 0"
    assert classify(main, "lineitem_with_order", ["MapPartitionsRDD", "DataSourceRDD"], 78137) == "read + decode"
    assert (
        classify(main, "lineitem_with_order", ["ShuffledRowRDD", "StateStoreRDD", "MapPartitionsRDD"], 0) == "operators"
    )
    assert classify("Delta: " + main, "lineitem_with_order", ["MapPartitionsRDD"], 0) == "sink"
    assert classify(main, "lineitem_with_order", ["MapPartitionsRDD"], 0) == "sink"
    dead = "lineitem_with_order_dead_letters\nid = 7905\nrunId = 83dd"
    assert classify(dead, "lineitem_with_order", ["DataSourceRDD"], 78137) == "dead-letter query"
    assert classify("", "lineitem_with_order", ["MapPartitionsRDD"], 0) == "outside the queries"
    assert classify("orders_current\nid = 1", "lineitem_with_order", ["DataSourceRDD"], 5) == "outside the queries"
