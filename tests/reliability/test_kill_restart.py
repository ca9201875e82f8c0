"""Kill/restart trials in the suite: the stateful ``sql/`` pipelines on the jvm engine, in four trials (``make chaos``
runs both engines and trials of each pipeline alone).

Each trial (``tests.reliability.chaos.run_trial``) runs its pipelines as one process against a fresh
embedded broker while a producer writes the TPC-H changelogs, SIGKILLs it during a micro-batch, during
the state store commit and between the sink's Delta commit and the checkpoint commit, restarts it, and
checks each final table against the batch query and its changelog table batch by batch.
"""

import datetime as dt
import json
import random

import pytest
from conftest import DAYS

from streamjoin.sink.delta import CHANGELOG_METADATA
from tests.reliability.chaos import MOMENTS, PIPELINES, CheckpointView, run_trial, trial_aims
from tests.reliability.verify import Verdict, changelog_batches_twice, offsets_going_back

#: (pipelines in the trial's process, engine, the (target pipeline, moment) of each kill, broker faults). A kill
#: stops the whole process: it also hits the pipelines it does not aim at, at whatever moment each is in.
#: ``make test`` runs the first of :data:`TRIALS`: the regular join alone, killed between its Delta commit and its
#: checkpoint commit, the window in which a replayed batch must still commit its state stores and the sink must
#: skip its writes (about 2 minutes of a worker). ``make test-all`` also runs the other :data:`TRIALS`, which aim
#: a kill at every other moment: the temporal join during a micro-batch, with a broker stop and restart on the same
#: data folder (``make chaos --broker-faults N``); the interval join during its state store commit, sharing a
#: process with the dedup + group aggregate and OVER; and :data:`TOGETHER`, every stateful pipeline in one process
#: killed once (9 minutes of a worker, a quarter of ``make test``'s budget). ``make chaos`` aims three kills at
#: each pipeline in every trial.
TOGETHER = (PIPELINES, "jvm", (("lineitem_with_order", "after_delta_commit"),), 0)
TRIALS = [
    (("lineitem_with_order",), "jvm", (("lineitem_with_order", "after_delta_commit"),), 0),
    (("orders_in_eur",), "jvm", (("orders_in_eur", "micro_batch"),), 1),
    (
        ("orders_shipped_fast", "orders_by_status", "part_price_over"),
        "jvm",
        (("orders_shipped_fast", "state_commit"),),
        0,
    ),
]


def test_the_trials_cover_every_pipeline_and_moment():
    assert set(TOGETHER[0]) == {name for pipelines, *_ in TRIALS for name in pipelines} == set(PIPELINES)
    assert {moment for _, _, aims, _ in TRIALS for _, moment in aims} == set(MOMENTS)
    assert all(target in pipelines for pipelines, _, aims, _ in [TOGETHER, *TRIALS] for target, _ in aims)
    assert any(broker_faults for *_, broker_faults in TRIALS)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("pipelines", "engine", "aims", "broker_faults"),
    [pytest.param(*TOGETHER, marks=[pytest.mark.xdist_group("kill_together"), pytest.mark.slow], id="together")]
    + [
        pytest.param(
            *t,
            marks=[pytest.mark.xdist_group(f"kill_{t[0][0]}"), *([pytest.mark.slow] if i else [])],
            id="+".join(t[0]),
        )
        for i, t in enumerate(TRIALS)
    ],
)
def test_killed_pipelines_restart_with_nothing_lost_or_doubled(pipelines, engine, aims, broker_faults, spark, tmp_path):
    results = run_trial(
        spark,
        list(pipelines),
        engine,
        seed=17,
        aims=list(aims),
        broker_faults=broker_faults,
        chunks=3,
        days=DAYS,
        work=tmp_path,
    )
    for result in results:
        assert not result.error and not result.restart_failures, (
            result.pipeline,
            result.error,
            result.restart_failures,
        )
        assert [hit for _, hit in result.kills if hit != "missed"], f"{result.pipeline}: no kill landed: {result.kills}"
        assert len(result.broker_faults) == broker_faults and "stalled" not in result.broker_faults, (
            result.broker_faults
        )
        verdict = result.verdict
        assert verdict.rows_expected > 0, result.pipeline
        assert verdict.ok, (result.pipeline, verdict)
        assert verdict.rows_in_delta == verdict.rows_expected, result.pipeline


def test_a_trials_kills_take_the_pipelines_in_turn_and_each_moment_once():
    aims = trial_aims(PIPELINES, 5, random.Random(3))
    assert sorted(a[0] for a in aims) == sorted(PIPELINES)
    assert {a[1] for a in aims[:3]} == set(MOMENTS)


def _changelog(spark, rows):
    """A ``<table>_changelog`` frame with one sink column ``k`` (BIGINT)."""
    from pyspark.sql.types import LongType, StructField, StructType

    schema = StructType([StructField("k", LongType(), False), *CHANGELOG_METADATA.fields])
    return spark.createDataFrame(rows, schema)


def _row(k, kind, seq, batch, offset, second):
    return (
        k,
        kind,
        seq.to_bytes(8, "big"),
        batch,
        json.dumps([{"orders": {"0": offset}}]),
        dt.datetime(2026, 1, 1, 0, 0, second),
    )


def test_the_changelog_check_catches_a_batch_appended_twice(spark):
    batches = [_row(1, "+I", 0, 0, 10, 1), _row(2, "+I", 1, 0, 10, 1), _row(1, "+U", 0, 1, 20, 2)]
    assert changelog_batches_twice(_changelog(spark, batches)) == []
    replayed = batches + [_row(1, "+U", 0, 1, 20, 3)]  # batch 1 again, by a later attempt
    assert changelog_batches_twice(_changelog(spark, replayed)) == [1]


def test_the_changelog_check_catches_offsets_going_back(spark):
    batches = [_row(1, "+I", 0, 0, 10, 1), _row(2, "+I", 0, 1, 10, 2), _row(3, "+I", 0, 2, 30, 3)]
    assert offsets_going_back(_changelog(spark, batches)) == []  # a no-data batch keeps its offsets
    reread = batches + [_row(4, "+I", 0, 3, 20, 4)]
    assert offsets_going_back(_changelog(spark, reread)) == [3]


@pytest.mark.parametrize("defect", ["duplicates", "missing", "batches_twice", "offsets_back", "changelog_vs_table"])
def test_any_defect_fails_the_verdict(defect):
    clean = {"rows_expected": 3, "rows_in_delta": 3, "duplicates": 0, "missing": 0}
    assert Verdict(**clean).ok
    value = [1] if defect in ("batches_twice", "offsets_back") else 1
    assert not Verdict(**{**clean, defect: value}).ok


def test_the_moment_is_read_from_the_checkpoint_and_the_delta_log(tmp_path):
    checkpoint, table = tmp_path / "main", tmp_path / "table"
    view = CheckpointView(checkpoint, table)
    assert view.moment() == "starting"
    for folder in ("offsets", "commits", "state/0/0", "state/0/1", "state/0/_metadata", "../table/_delta_log"):
        (checkpoint / folder).mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / "0").write_text("v1")
    (checkpoint / "commits" / "0").write_text("v1")
    assert view.moment() == "between_batches"
    (checkpoint / "offsets" / "1").write_text("v1")
    assert view.moment() == "micro_batch"
    (checkpoint / "state/0/1" / "2.changelog").write_text("")
    assert view.moment() == "state_commit"
    assert view.state_committed(1, view.state_partitions()) == 1
    log = table / "_delta_log"
    (log / f"{0:020d}.json").write_text('{"protocol":{}}\n')
    (log / f"{1:020d}.json").write_text('{"txn":{"appId":"streamjoin-t-q","version":0,"lastUpdated":1}}\n')
    assert view.moment() == "state_commit"
    (log / f"{2:020d}.json").write_text('{"txn":{"appId":"streamjoin-t-q","version":1,"lastUpdated":2}}\n')
    assert view.moment() == "after_delta_commit"
    (checkpoint / "commits" / "1").write_text("v1")
    assert view.moment() == "between_batches"
    assert set(MOMENTS) == {"micro_batch", "state_commit", "after_delta_commit"}


def test_a_topic_read_by_two_sources_counts_as_read_where_both_are(tmp_path):
    view = CheckpointView(tmp_path / "main", tmp_path / "table")
    (tmp_path / "main" / "offsets").mkdir(parents=True)
    # offsets/N: the version, the batch metadata, then one line per source (part_price_over reads shipments twice).
    lines = ["v1", "{}", '{"shipments":{"0":6005}}', '{"shipments":{"0":5990}}', '{"order_events":{"0":70,"1":30}}']
    (tmp_path / "main" / "offsets" / "4").write_text("\n".join(lines))
    assert view.batch_offsets(4) == {"shipments": 5990, "order_events": 100}
    assert view.batch_offsets(5) == {}
