"""``streamjoin backfill`` on the real path: the demo topics on the test broker, Spark, Delta.

A 3-day backfill of ``orders_shipped_fast`` (partitioned by placement day) replaces exactly those days
with what one full run over all the input gave for them, leaves the other days alone, and a second run
changes nothing; a pipeline that needs a full rebuild is refused before anything runs.
"""

import datetime as dt

import pytest
from pyspark.sql import functions as F

from assets.sql_pipelines import SQL_DIR
from checks.expectations import table_difference
from streamjoin.backfill import BACKFILL_BATCH_ID
from streamjoin.cli import main

PIPELINE = "orders_shipped_fast"


def _cli(kafka_bootstrap, lake, *args) -> int:
    return main([*args, "--bootstrap-servers", kafka_bootstrap, "--lakehouse", str(lake)])


def _busiest_days(table) -> tuple[dt.date, dt.date]:
    """The 3 consecutive days with the most rows, both matched and null-padded ones among them."""
    per_day = {
        r.o_orderday: (r.rows, r.padded)
        for r in table.groupBy("o_orderday")
        .agg(F.count("*").alias("rows"), F.sum(F.when(F.col("l_linenumber") == 0, 1).otherwise(0)).alias("padded"))
        .collect()
    }

    def score(first):
        days = [per_day.get(first + dt.timedelta(days=i), (0, 0)) for i in range(3)]
        return sum(d[0] for d in days) if 0 < sum(d[1] for d in days) < sum(d[0] for d in days) else 0

    first = max(sorted(per_day)[len(per_day) // 4 : 3 * len(per_day) // 4], key=score)
    return first, first + dt.timedelta(days=2)


@pytest.mark.e2e
def test_a_three_day_backfill_equals_the_full_run_and_a_rerun_changes_nothing(
    spark, kafka_bootstrap, demo_topics, tmp_path
):
    lake = tmp_path / "lake"
    assert _cli(kafka_bootstrap, lake, "run", str(SQL_DIR / f"{PIPELINE}.sql"), "--available-now") == 0
    path, changelog_path = str(lake / PIPELINE), str(lake / f"{PIPELINE}_changelog")
    full = spark.read.format("delta").load(path).localCheckpoint()
    assert spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first().partitionColumns == ["o_orderday"]
    first, last = _busiest_days(full)
    days = F.col("o_orderday").between(F.lit(first), F.lit(last))
    expected_days = full.where(days)
    assert expected_days.count() >= 3

    # The days go stale: one row lost, one row that should not be there.
    table = spark.read.format("delta").load(path)
    stale = table.where(days).limit(1).localCheckpoint()
    table.where(~days).unionByName(table.where(days).exceptAll(stale)).unionByName(
        stale.withColumn("l_linenumber", F.lit(99))
    ).write.format("delta").mode("overwrite").save(path)
    assert table_difference(spark.read.format("delta").load(path), full).count() == 2

    stream_changes = spark.read.format("delta").load(changelog_path).count()
    for attempt in range(2):
        code = _cli(
            kafka_bootstrap, lake, "backfill", str(SQL_DIR / f"{PIPELINE}.sql"), "--from", str(first), "--to", str(last)
        )
        assert code == 0
        after = spark.read.format("delta").load(path)
        assert table_difference(after, full).count() == 0, f"attempt {attempt}"
        assert after.count() == full.count()
        changes = spark.read.format("delta").load(changelog_path)
        backfilled = changes.where(F.col("_batch_id") == BACKFILL_BATCH_ID)
        # The backfill's changes are the inserts of the days' rows, tagged, once however often it runs.
        assert backfilled.count() == expected_days.count() and changes.count() == stream_changes + expected_days.count()
        assert backfilled.where(~days).count() == 0
        assert (
            backfilled.where(F.col("_source_offsets").startswith(f'{{"backfill": ["{first}", "{last}"]')).count()
            == backfilled.count()
        )
    assert not (lake / "_backfill").exists() or not any((lake / "_backfill").iterdir())


REGULAR_JOIN = """CREATE TABLE shipped_orders (
  o_orderkey BIGINT, l_linenumber INT, l_shiptime TIMESTAMP(3), o_orderday DATE,
  PRIMARY KEY (o_orderkey, l_linenumber, o_orderday) NOT ENFORCED
) PARTITIONED BY (o_orderday) WITH ('connector' = 'delta');
INSERT INTO shipped_orders
SELECT o.o_orderkey, s.l_linenumber, s.l_shiptime, CAST(o.event_time AS DATE)
FROM order_events AS o JOIN shipments AS s ON o.o_orderkey = s.l_orderkey;
"""


@pytest.mark.e2e
def test_a_pipeline_that_needs_a_full_rebuild_is_refused_before_anything_runs(kafka_bootstrap, tmp_path, capsys):
    lake, sql = tmp_path / "lake", tmp_path / "shipped_orders.sql"
    sql.write_text(REGULAR_JOIN)
    code = _cli(
        kafka_bootstrap,
        lake,
        "backfill",
        "-i",
        str(SQL_DIR / "catalog" / "tpch.sql"),
        str(sql),
        "--from",
        "2002-03-01",
        "--to",
        "2002-03-03",
    )
    assert code == 4
    error = capsys.readouterr().err
    assert error.startswith(
        f"streamjoin: error: {sql}:5:13: pipeline 'shipped_orders' cannot be backfilled per day: "
        "operator Join(joinType=[InnerJoin]) matches rows of any time"
    ), error
    assert "[rule: backfill-bounded-time]" in error
    code = _cli(
        kafka_bootstrap,
        lake,
        "backfill",
        str(SQL_DIR / "orders_by_status.sql"),
        "--from",
        "2002-03-01",
        "--to",
        "2002-03-03",
    )
    assert code == 3
    error = capsys.readouterr().err
    assert (
        "pipeline 'orders_by_status' cannot be backfilled per day" in error and "[rule: backfill-day-column]" in error
    )
    assert not lake.exists()
