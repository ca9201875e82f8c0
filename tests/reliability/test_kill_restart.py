"""Kill/restart trials in the suite: one per stateful ``sql/`` pipeline on the jvm engine, two of them in ``make test``
(``make chaos`` runs both engines).

Each trial (``tests.reliability.chaos.run_trial``) runs the pipeline as its own process against a fresh
embedded broker while a producer writes the TPC-H changelogs, SIGKILLs it during a micro-batch, during
the state store commit and between the sink's Delta commit and the checkpoint commit, restarts it, and
checks the final table against the batch query and the changelog table batch by batch.
"""

import datetime as dt
import json
import random

import pytest

from conftest import DAYS

from streamjoin.sink.delta import CHANGELOG_METADATA
from tests.reliability.chaos import MOMENTS, PIPELINES, CheckpointView, run_trial, trial_aims
from tests.reliability.verify import Verdict, changelog_batches_twice, offsets_going_back

#: One kill per trial, the three moments spread over the pipelines (``make chaos`` aims at each in every trial,
#: on both engines; the python engine's trials cost the suite ~9 minutes on the reference machine), and in one
#: trial a broker stop and restart on the same data folder (``make chaos --broker-faults N`` in every trial).
TRIALS = [
    ("lineitem_with_order", "jvm", "after_delta_commit", 0),
    ("orders_in_eur", "jvm", "micro_batch", 1),
    ("orders_shipped_fast", "jvm", "state_commit", 0),
    ("orders_by_status", "jvm", "after_delta_commit", 0),
    ("part_price_over", "jvm", "state_commit", 0),
]

#: The trials ``make test`` runs (5–7 minutes each on 2 cores): the regular join killed between the sink's Delta
#: commit and the checkpoint commit, the window in which a replayed batch must still commit its state stores
#: (issue 17), and the temporal join killed during a micro-batch, with a broker stop and restart. The others are
#: ``slow``: ``make test-all`` and ``make chaos TRIALS=1`` run them.
IN_MAKE_TEST = TRIALS[:2]


def test_the_trials_cover_every_pipeline_and_moment():
    assert {t[0] for t in TRIALS} == set(PIPELINES) and {t[2] for t in TRIALS} == set(MOMENTS)


@pytest.mark.e2e
@pytest.mark.parametrize(("pipeline", "engine", "moment", "broker_faults"), [
    pytest.param(*t, marks=[pytest.mark.xdist_group(f"kill_{t[0]}"), *([] if t in IN_MAKE_TEST else [pytest.mark.slow])])
    for t in TRIALS
])
def test_a_killed_pipeline_restarts_with_nothing_lost_or_doubled(pipeline, engine, moment, broker_faults, spark, tmp_path):
    [result] = run_trial(spark, [pipeline], engine, seed=17, aims=[(pipeline, moment)], broker_faults=broker_faults,
                         chunks=3, days=DAYS, work=tmp_path)
    assert not result.error and not result.restart_failures, (result.error, result.restart_failures)
    assert [hit for _, hit in result.kills if hit != "missed"], f"no kill landed: {result.kills}"
    assert len(result.broker_faults) == broker_faults and "stalled" not in result.broker_faults, result.broker_faults
    verdict = result.verdict
    assert verdict.rows_expected > 0
    assert verdict.ok, verdict
    assert verdict.rows_in_delta == verdict.rows_expected


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
    return (k, kind, seq, batch, json.dumps([{"orders": {"0": offset}}]), dt.datetime(2026, 1, 1, 0, 0, second))


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
    clean = dict(rows_expected=3, rows_in_delta=3, duplicates=0, missing=0)
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
