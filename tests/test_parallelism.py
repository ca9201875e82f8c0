"""A pipeline's parallelism: Flink's ``SET 'parallelism.default'`` / ``'table.exec.resource.default-parallelism'``
as the shuffle partitions of its queries (the parallel instances and state partitions of its stateful operators).

The planner reads the settings as Flink resolves them; the real path (broker, Spark, Delta) shows two pipelines
started together each getting their own number, the session's own setting left alone, and a checkpoint keeping
the number it started with, with a warning, when the setting changes.
"""

import json
import logging
from pathlib import Path

import pytest

from streamjoin.connectors.kafka_admin import ensure_topics, produce
from streamjoin.datagen.topics import debezium_record
from streamjoin.errors import ValidationError
from streamjoin.pipeline import Lakehouse, run_pipelines
from streamjoin.planner import sql_pipelines
from streamjoin.planner.script import plan_script

DDL = "CREATE TABLE t (k INT, v INT) WITH ('connector' = 'values');\n"


def _parallelism(settings: str) -> int | None:
    return plan_script(settings + DDL + "SELECT k, SUM(v) FROM t GROUP BY k;").parallelism


def test_the_settings_resolve_as_in_flink():
    assert _parallelism("") is None
    assert _parallelism("SET 'parallelism.default' = '3';\n") == 3
    assert _parallelism("SET 'table.exec.resource.default-parallelism' = '4';\n") == 4
    # The table setting wins over the environment's; its -1 means "not set" and falls back.
    both = "SET 'parallelism.default' = '3';\nSET 'table.exec.resource.default-parallelism' = '{}';\n"
    assert _parallelism(both.format(5)) == 5
    assert _parallelism(both.format(-1)) == 3
    # The last SET of a key counts, as in Flink's SQL client.
    assert _parallelism("SET 'parallelism.default' = '3';\nSET 'parallelism.default' = '1';\n") == 1


def test_an_init_script_sets_it_for_the_pipeline():
    script = plan_script(
        DDL + "SELECT k, SUM(v) FROM t GROUP BY k;", init=[("catalog.sql", "SET 'parallelism.default' = '6';")]
    )
    assert script.parallelism == 6


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("parallelism.default", "0"),
        ("parallelism.default", "-1"),
        ("parallelism.default", "two"),
        ("table.exec.resource.default-parallelism", "0"),
    ],
)
def test_a_value_that_is_not_a_parallelism_fails_naming_the_line(key, value):
    with pytest.raises(
        ValidationError, match=rf"<sql>:1:.*'{key}' takes a positive integer .*not '{value}' \[rule: settings\]"
    ):
        _parallelism(f"SET '{key}' = '{value}';\n")


def _script(name: str, topic: str, parallelism: int) -> str:
    return f"""
SET 'parallelism.default' = '{parallelism}';
CREATE TABLE orders (
  o_orderkey BIGINT, o_orderstatus STRING, o_totalprice DECIMAL(15, 2),
  PRIMARY KEY (o_orderkey) NOT ENFORCED
) WITH ('connector' = 'kafka', 'topic' = '{topic}', 'format' = 'debezium-json', 'scan.startup.mode' = 'earliest-offset');
CREATE TABLE {name} (o_orderstatus STRING, orders BIGINT, PRIMARY KEY (o_orderstatus) NOT ENFORCED) WITH ('connector' = 'delta');
INSERT INTO {name} SELECT o_orderstatus, COUNT(*) FROM orders GROUP BY o_orderstatus;
"""  # noqa: E501


def _pipeline(name: str, topic: str, parallelism: int):
    [pipeline] = sql_pipelines(plan_script(_script(name, topic, parallelism), f"{name}.sql"))
    return pipeline


def _offsets_conf(checkpoint: Path) -> list[str]:
    """The shuffle partitions in each batch's offset log entry, in batch order."""
    batches = sorted((p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    return [json.loads(p.read_text().splitlines()[1])["conf"]["spark.sql.shuffle.partitions"] for p in batches]


def _state_partitions(checkpoint: Path) -> set[str]:
    return {p.name for p in (checkpoint / "state" / "0").iterdir() if p.name.isdigit()}


def test_pipelines_started_together_keep_their_own_parallelism_in_their_checkpoints(
    spark, kafka_bootstrap, tpch, tmp_path, caplog
):
    topic = "orders_for_parallelism"
    ensure_topics(kafka_bootstrap, {topic: 1})
    changes = list(tpch.orders_changes())
    produce(kafka_bootstrap, topic, [(None, debezium_record(c)) for c in changes[:40]])
    lakehouse = Lakehouse(str(tmp_path / "lake"))
    session_partitions = spark.conf.get("spark.sql.shuffle.partitions")
    wide, narrow = _pipeline("by_status_wide", topic, 3), _pipeline("by_status_narrow", topic, 1)
    assert (wide.parallelism, narrow.parallelism) == (3, 1)

    runs = run_pipelines([wide, narrow], spark, lakehouse, kafka_bootstrap)
    assert all(run.warnings == [] for run in runs.values())
    main = {p.name: Path(lakehouse.checkpoint(p.name, "main")) for p in (wide, narrow)}
    assert _offsets_conf(main["by_status_wide"])[-1] == "3" and _state_partitions(main["by_status_wide"]) == {
        "0",
        "1",
        "2",
    }
    assert _offsets_conf(main["by_status_narrow"])[-1] == "1" and _state_partitions(main["by_status_narrow"]) == {"0"}
    assert spark.conf.get("spark.sql.shuffle.partitions") == session_partitions
    # Both count every order, whatever their parallelism.
    counts = {
        name: {r[0]: r[1] for r in spark.read.format("delta").load(lakehouse.table_path(name)).collect()}
        for name in main
    }
    assert counts["by_status_wide"] == counts["by_status_narrow"] and sum(counts["by_status_wide"].values()) > 0

    # Another parallelism on the same checkpoint: Spark keeps the state's 3 partitions; the run says so.
    produce(kafka_bootstrap, topic, [(None, debezium_record(c)) for c in changes[40:60]])
    with caplog.at_level(logging.WARNING, logger="streamjoin"):
        [run] = run_pipelines([_pipeline("by_status_wide", topic, 2)], spark, lakehouse, kafka_bootstrap).values()
    [warning] = run.warnings
    assert warning.startswith(
        f"pipeline by_status_wide: parallelism 2 is set, but its checkpoint {main['by_status_wide']} "
        "started with 3 shuffle partitions, which it keeps"
    )
    assert warning in [r.getMessage() for r in caplog.records if r.name == "streamjoin"]
    assert set(_offsets_conf(main["by_status_wide"])) == {"3"} and _state_partitions(main["by_status_wide"]) == {
        "0",
        "1",
        "2",
    }
