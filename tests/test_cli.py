"""The ``streamjoin`` command: explain (no Spark), replay (one case), run (real Kafka and Delta), exit statuses."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from flink_cases import CASES_DIR

from streamjoin import cli
from streamjoin.cli import main
from streamjoin.config import PROJECT_ROOT
from streamjoin.datagen.topics import ORDERS
from streamjoin.errors import (
    ChangelogError,
    ConnectorTimeoutError,
    EmbeddedKafkaError,
    EngineError,
    StateError,
    StreamJoinError,
)
from streamjoin.planner import load_script, sql_pipelines

ORDERS_CURRENT_SQL = PROJECT_ROOT / "sql" / "orders_current.sql"


def test_explain_prints_each_statements_plan(capsys):
    assert main(["explain", str(ORDERS_CURRENT_SQL)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("-- INSERT INTO orders_current SELECT * FROM orders\n== Optimized Physical Plan ==\n")
    assert "+- DropUpdateBefore(changelogMode=[I,UA,D], upsertKeys=[[o_orderkey]])" in out
    assert (
        "TableSourceScan(table=[[default_catalog, default_database, orders]]" in out
        and "changelogMode=[I,UB,UA,D]" in out
    )


def test_explain_warns_of_a_partitioned_sink_whose_merge_reads_the_whole_table(tmp_path, capsys):
    def explain(key: str) -> str:
        init = tmp_path / "tables.sql"
        init.write_text(
            "CREATE TABLE t (k BIGINT, d DATE, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', "
            "'topic' = 't', 'key.format' = 'json', 'value.format' = 'json');\n"
            f"CREATE TABLE s (k BIGINT, d DATE, PRIMARY KEY ({key}) NOT ENFORCED) PARTITIONED BY (d) WITH ('connector' = 'delta');\n"  # noqa: E501
        )
        job = tmp_path / "job.sql"
        job.write_text("INSERT INTO s SELECT k, d FROM t;\n")
        assert main(["explain", "-i", str(init), str(job)]) == 0, capsys.readouterr().err
        return capsys.readouterr().out

    out = explain("k")
    assert (
        "[WARNING] sink s: PARTITIONED BY (d) but its PRIMARY KEY (k) does not hold d: every micro-batch's MERGE "
        "reads every partition"
    ) in out
    assert out.index("== Optimized Physical Plan ==") < out.index("[WARNING]")
    assert "[WARNING]" not in explain("k, d")


def test_explain_of_invalid_sql_fails_with_the_location(tmp_path, capsys):
    bad = tmp_path / "bad.sql"
    bad.write_text("CREATE TABLE t (a INT) WITH ('connector' = 'values');\nSELECT b FROM t;\n")
    assert main(["explain", str(bad)]) == 3
    assert (
        capsys.readouterr().err
        == f"streamjoin: error: {bad}:2:8: unknown column 'b' in the FROM clause; columns: a [rule: column-exists]\n"
    )


def test_orders_current_sql_compiles_to_todays_pipeline():
    [pipeline] = sql_pipelines(load_script(ORDERS_CURRENT_SQL))
    assert pipeline.name == "orders_current" and pipeline.primary_key == ("o_orderkey",)
    assert pipeline.sources == [ORDERS]  # topic, schema, debezium-json, key, rowtime and its 1-day watermark delay


def test_replay_writes_one_result_per_case(spark, tmp_path, capsys):
    case = CASES_DIR / "cases" / "over_rows_bounded.json"
    assert main(["replay", str(case), "--out-dir", str(tmp_path), "--micro-batch-rows", "7"]) == 0
    assert capsys.readouterr().out.strip() == "over_rows_bounded: 8 final rows"
    result = json.loads((tmp_path / "over_rows_bounded.json").read_text())
    flink = json.loads((CASES_DIR / "expected" / "over_rows_bounded.json").read_text())
    assert result["columns"] == flink["columns"] and sorted(result["final"]) == sorted(flink["final"])
    assert result["changelog"][0] == ["+I", "ITEM001", "Electronic", "2017-11-11 10:01:00.000", 20, 20]


@pytest.mark.e2e
def test_run_orders_current_against_kafka_and_delta(spark, kafka_bootstrap, demo_topics, tpch, tmp_path):
    lake = tmp_path / "lake"
    code = main(
        [
            "run",
            str(ORDERS_CURRENT_SQL),
            "--available-now",
            "--bootstrap-servers",
            kafka_bootstrap,
            "--lakehouse",
            str(lake),
        ]
    )
    assert code == 0
    columns = ORDERS.schema.names
    expected = {tuple(o[c] for c in columns) for o in tpch.final_orders().values()}
    table = spark.read.format("delta").load(str(lake / "orders_current"))
    assert {tuple(r[c] for c in columns) for r in table.collect()} == expected  # the batch query over the final input
    kinds = {
        r["_rowkind"]: r["count"]
        for r in spark.read.format("delta")
        .load(str(lake / "orders_current_changelog"))
        .groupBy("_rowkind")
        .count()
        .collect()
    }
    updates = sum(1 for c in tpch.orders_changes() if c.kind.short == "+U")
    # DropUpdateBefore: the sink is keyed by the source's key, so -U never reaches it.
    assert kinds == {"+I": len(tpch.orders), "+U": updates, "-D": len(tpch.deleted_keys)}


@pytest.mark.e2e
def test_run_runs_the_pipelines_of_every_file_together(spark, kafka_bootstrap, demo_topics, tpch, tmp_path, capsys):
    copy = tmp_path / "orders_copy.sql"
    copy.write_text(ORDERS_CURRENT_SQL.read_text().replace("orders_current", "orders_copy"))
    lake = tmp_path / "lake"
    code = main(
        [
            "run",
            str(ORDERS_CURRENT_SQL),
            str(copy),
            "-i",
            str(PROJECT_ROOT / "sql" / "catalog" / "tpch.sql"),
            "--available-now",
            "--bootstrap-servers",
            kafka_bootstrap,
            "--lakehouse",
            str(lake),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "orders_current: " in out and "orders_copy: " in out
    columns = ORDERS.schema.names
    expected = {tuple(o[c] for c in columns) for o in tpch.final_orders().values()}
    for table in ("orders_current", "orders_copy"):
        rows = spark.read.format("delta").load(str(lake / table)).collect()
        assert {tuple(r[c] for c in columns) for r in rows} == expected, table


@pytest.mark.e2e
def test_a_failing_pipeline_stops_the_others_of_the_run(spark, kafka_bootstrap, demo_topics, tmp_path, capsys):
    # orders_in_eur fails (its lookup table is missing) while orders_current runs continuously: the run
    # stops orders_current's queries and exits with the failure's status.
    code = main(
        [
            "run",
            str(ORDERS_CURRENT_SQL),
            str(PROJECT_ROOT / "sql" / "orders_in_eur.sql"),
            "--bootstrap-servers",
            kafka_bootstrap,
            "--lakehouse",
            str(tmp_path / "lake"),
        ]
    )
    assert code == 3
    assert "streamjoin: error: lookup join: no Delta table 'customer_currencies'" in capsys.readouterr().err
    assert [q.name for q in spark.streams.active] == []


def test_initialization_scripts_declare_the_tables_a_pipeline_reads(tmp_path, capsys):
    init = tmp_path / "tables.sql"
    init.write_text(
        "CREATE TABLE t (a INT, b STRING) WITH ('connector' = 'values');\nSET 'table.exec.state.ttl' = '1 h';\n"
    )
    job = tmp_path / "job.sql"
    job.write_text("SELECT a FROM t;\n")
    assert main(["explain", "-i", str(init), str(job)]) == 0
    assert "TableSourceScan(table=[[default_catalog, default_database, t]], fields=[a, b]" in capsys.readouterr().out
    # Without -i, catalog/*.sql next to the pipeline is the default; here there is none.
    assert main(["explain", str(job)]) == 3
    assert (
        capsys.readouterr().err
        == f"streamjoin: error: {job}:1:15: unknown table or view 't'; declared: none [rule: table-exists]\n"
    )


def test_an_initialization_script_may_not_run_queries(tmp_path, capsys):
    init = tmp_path / "tables.sql"
    init.write_text("CREATE TABLE t (a INT) WITH ('connector' = 'values');\nSELECT a FROM t;\n")
    job = tmp_path / "job.sql"
    job.write_text("SELECT a FROM t;\n")
    assert main(["explain", "-i", str(init), str(job)]) == 4
    assert capsys.readouterr().err == (
        f"streamjoin: error: {init}:2:8: an initialization script may only hold CREATE and SET statements [rule: init-script]\n"  # noqa: E501
    )


def test_sql_pipelines_share_the_catalog_declarations():
    scripts = {p.name: load_script(p) for p in (PROJECT_ROOT / "sql").glob("*.sql")}
    assert len(scripts) >= 6
    for name, script in scripts.items():
        # Each pipeline file declares only its sink; its sources come from sql/catalog/.
        assert [s.sink_table.name for s in script.inserts] == [name.removesuffix(".sql")]
        assert "orders" in script.catalog.tables and "rates" in script.catalog.tables


def test_run_refuses_a_missing_lookup_table_before_anything_starts(spark, tmp_path, capsys):
    lake = tmp_path / "lake"
    code = main(
        [
            "run",
            str(PROJECT_ROOT / "sql" / "orders_in_eur.sql"),
            "--available-now",
            "--bootstrap-servers",
            "127.0.0.1:9",
            "--lakehouse",
            str(lake),
        ]
    )
    assert code == 3
    err = capsys.readouterr().err
    assert err.startswith(
        f"streamjoin: error: lookup join: no Delta table 'customer_currencies' at {lake}/customer_currencies ("
    )
    assert err.endswith("create it before the pipeline starts (the demo's Dagster asset 'customer_currencies' does)\n")
    assert not (lake / "orders_in_eur").exists()  # nothing was created: no sink, no checkpoint


STREAMJOIN = Path(sys.executable).with_name("streamjoin")  # the console script, as a user runs it
TABLES = "CREATE TABLE t (a INT, b STRING) WITH ('connector' = 'values');\n"


def streamjoin(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "STREAMJOIN_DEBUG"}
    return subprocess.run(
        [str(STREAMJOIN), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=PROJECT_ROOT,
        env={**base, **(env or {})},
    )


@pytest.mark.parametrize(
    "sql, code, message",
    [
        (
            TABLES + "SELECT c FROM t;\n",
            3,
            "{file}:2:8: unknown column 'c' in the FROM clause; columns: a, b [rule: column-exists]",
        ),
        (
            TABLES + "SELECT a FROM t ORDER BY a;\n",
            4,
            "{file}:2:26: ORDER BY is not supported in a streaming query: a streaming query has no order; sort when reading the sink table [rule: supported-clauses]",  # noqa: E501
        ),
        (
            TABLES
            + "CREATE TABLE s (b STRING, n BIGINT) WITH ('connector' = 'delta');\nINSERT INTO s SELECT b, COUNT(*) FROM t GROUP BY b;\n",  # noqa: E501
            5,
            "{file}:3:13: table sink 's' doesn't support consuming update changes which are produced by node GroupAggregate(",  # noqa: E501
        ),
    ],
    ids=["invalid-sql", "unsupported", "sink"],
)
def test_a_sql_error_is_one_line_with_its_exit_status(tmp_path, sql, code, message):
    file = tmp_path / "job.sql"
    file.write_text(sql)
    result = streamjoin("explain", str(file))
    assert result.returncode == code, result.stderr
    assert result.stderr.startswith("streamjoin: error: " + message.format(file=file)), result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    "args, message",
    [
        (["explain", "sql/no_such_pipeline.sql"], "argument file: sql/no_such_pipeline.sql: no such file"),
        (["explain", "sql"], "argument file: sql: is a directory"),
        (
            ["replay", "tests/data/flink-cases/cases/join_left.json", "--out-dir", "out", "--micro-batch-rows", "0"],
            "argument --micro-batch-rows: must be an integer >= 1, got '0'",
        ),
        (["plan", "x.sql"], "argument command: invalid choice: 'plan'"),
        ([], "the following arguments are required: command"),
    ],
    ids=["missing-file", "directory", "bad-option", "unknown-command", "no-command"],
)
def test_a_usage_error_names_what_is_wrong_in_one_line_with_status_2(args, message):
    result = streamjoin(*args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("streamjoin: error: " + message), result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("debug", [["--debug", "explain"], ["explain", "--debug"]], ids=["before", "after"])
def test_debug_adds_the_traceback(tmp_path, debug):
    file = tmp_path / "job.sql"
    file.write_text(TABLES + "SELECT c FROM t;\n")
    for result in (streamjoin(*debug, str(file)), streamjoin("explain", str(file), env={"STREAMJOIN_DEBUG": "1"})):
        assert result.returncode == 3
        assert result.stderr.startswith("Traceback (most recent call last):\n")
        assert "streamjoin.errors.ValidationError: " in result.stderr
        assert result.stderr.endswith(
            "streamjoin: error: "
            + f"{file}:2:8: unknown column 'c' in the FROM clause; columns: a, b [rule: column-exists]\n"
        )


def test_the_help_documents_the_exit_statuses():
    result = streamjoin("--help")
    assert result.returncode == 0
    for code, _ in {(0, ""), *((c, k) for k, c in cli.EXIT_CODES)}:
        assert f"\n  {code} " in result.stdout


@pytest.mark.parametrize(
    "error, code",
    [
        (ChangelogError("change #3 -D[1] retracts a row that is not present"), 6),
        (StateError("cannot retract"), 6),
        (EmbeddedKafkaError("the embedded Kafka broker died"), 7),
        (ConnectorTimeoutError("topic leaders within 30 s"), 7),
        (EngineError("streamjoin-operators.jar 0.1.0 was built for Spark 4.1.0; this is Spark 4.2.0"), 8),
        (StreamJoinError("an error of no narrower class"), 1),
        (KeyboardInterrupt(), 130),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_errors_the_subcommands_raise_at_run_time_map_to_their_status(monkeypatch, capsys, error, code):
    # Changelog, state and connector errors come from a running query: raised here in place of one.
    def fails(args):
        raise error

    monkeypatch.setattr(cli, "_explain", fails)
    assert main(["explain", str(ORDERS_CURRENT_SQL)]) == code
    assert capsys.readouterr().err == f"streamjoin: error: {str(error) or 'interrupted'}\n"


def test_an_unexpected_error_names_its_type_and_hints_at_debug(monkeypatch, capsys):
    def fails(args):
        raise RuntimeError("Query terminated with exception\n  at org.apache.spark...")

    monkeypatch.setattr(cli, "_explain", fails)
    assert main(["explain", str(ORDERS_CURRENT_SQL)]) == 1
    assert capsys.readouterr().err == (
        "streamjoin: error: unexpected RuntimeError: Query terminated with exception (--debug shows the traceback)\n"
    )


def test_run_without_a_kafka_cluster_says_how_to_start_one(tmp_path):
    """No --bootstrap-servers, no KAFKA_BOOTSTRAP_SERVERS, no local broker service, none declared: status 7, before
    Spark."""
    job = tmp_path / "job.sql"
    job.write_text(
        "CREATE TABLE src (k INT, v STRING) WITH ('connector' = 'kafka', 'topic' = 'src', 'format' = 'json');\n"
        "CREATE TABLE snk (k INT, v STRING, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'delta');\n"
        "INSERT INTO snk SELECT k, v FROM src;\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    result = subprocess.run(
        [str(STREAMJOIN), "run", str(job), "--available-now"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "STREAMJOIN_LOCAL_DIR": str(tmp_path / "local")},
    )
    assert result.returncode == 7, result.stderr
    assert result.stderr == (
        "streamjoin: error: no Kafka cluster to use: start the local broker with `make kafka` (or `streamjoin kafka "
        "start`), or set KAFKA_BOOTSTRAP_SERVERS to the bootstrap servers of a Kafka cluster\n"
    )
    assert not (tmp_path / "local" / "lakehouse" / "snk").exists()


def test_kafka_usage_errors_and_status_codes_are_documented(capsys):
    with pytest.raises(SystemExit) as usage:
        main(["kafka", "start", "--port", "70000"])
    assert usage.value.code == 2
    assert "must be a port in 1..65535, got '70000'" in capsys.readouterr().err
    docs = (PROJECT_ROOT / "docs" / "cli.md").read_text()
    for line in (
        "| 0 | running: the process is alive and answers a metadata request |",
        "| 1 | dead: the state file is left, its process is gone |",
        "| 3 | stopped: no state file |",
        "| 4 | unknown: the process is alive but answers no metadata request |",
    ):
        assert line in docs


def test_run_refuses_two_pipelines_writing_one_table():
    result = streamjoin("run", str(ORDERS_CURRENT_SQL), str(ORDERS_CURRENT_SQL), "--bootstrap-servers", "127.0.0.1:9")
    assert result.returncode == 3, result.stderr
    assert result.stderr == (
        "streamjoin: error: more than one INSERT INTO orders_current: each table is written by one "
        "pipeline, which keeps its checkpoints under _checkpoints/<table>/\n"
    )


def test_a_python_exception_in_the_sinks_foreach_batch_is_named_on_the_one_line(monkeypatch, capsys):
    # Spark's message for a foreachBatch function that raised (PySpark 4.2, abridged): the exception is on the
    # traceback's last line, far below the first; a chained traceback's first exception is not the one raised.
    spark_message = (
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR] An "
        "error occurred in the user provided function in foreach batch sink. Reason: An exception was raised by the "
        "Python Proxy. Return Message: Traceback (most recent call last):\n"
        '  File "/venv/py4j/clientserver.py", line 644, in _call_proxy\n'
        "    return_value = getattr(self.pool[obj_id], method)(*params)\n"
        "KeyError: 'x'\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/work/streamjoin/sink/delta.py", line 300, in __call__\n'
        "    raise ValueError('boom')\n"
        "ValueError: boom\n"
        "on two lines\n"
        " SQLSTATE: 39000 SQLSTATE: XXKST\n"
        "=== Streaming Query ===\n"
    )

    def fails(args):
        raise RuntimeError(spark_message)

    monkeypatch.setattr(cli, "_explain", fails)
    assert main(["explain", str(ORDERS_CURRENT_SQL)]) == 1
    assert capsys.readouterr().err == (
        "streamjoin: error: unexpected RuntimeError: [STREAM_FAILED] Query [id = 1, runId = 2] terminated with "
        "exception: [FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach "
        "batch sink. Reason: An exception was raised by the Python Proxy. Return Message: ValueError: boom "
        "(--debug shows the traceback)\n"
    )
