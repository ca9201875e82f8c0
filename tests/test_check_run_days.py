"""``checks.expectations.run_days``: the days a partition run replaced, as its asset checks see them (no Spark)."""

import datetime as dt

from dagster import (
    AssetCheckResult,
    BackfillPolicy,
    DagsterInstance,
    DailyPartitionsDefinition,
    asset,
    asset_check,
    materialize,
)
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from checks.expectations import run_days

DAYS = DailyPartitionsDefinition(start_date="2024-03-01", timezone="UTC")
seen = []


@asset(partitions_def=DAYS, backfill_policy=BackfillPolicy.single_run())
def daily_table() -> None:
    return None


@asset_check(asset=daily_table)
def daily_table_days(context) -> AssetCheckResult:
    seen.append(run_days(context))
    return AssetCheckResult(passed=True)


@asset
def plain_table() -> None:
    return None


@asset_check(asset=plain_table)
def plain_table_days(context) -> AssetCheckResult:
    seen.append(run_days(context))
    return AssetCheckResult(passed=True)


def test_a_partition_run_has_its_days_a_run_without_partition_none():
    seen.clear()
    instance = DagsterInstance.ephemeral()
    assert materialize([daily_table, daily_table_days], partition_key="2024-03-04", instance=instance).success
    # A backfill of a range run as one run (BackfillPolicy.single_run) is tagged with the range's ends.
    tags = {ASSET_PARTITION_RANGE_START_TAG: "2024-03-02", ASSET_PARTITION_RANGE_END_TAG: "2024-03-05"}
    assert materialize([daily_table, daily_table_days], tags=tags, instance=instance).success
    assert materialize([plain_table, plain_table_days], instance=instance).success
    assert seen == [(dt.date(2024, 3, 4), dt.date(2024, 3, 4)), (dt.date(2024, 3, 2), dt.date(2024, 3, 5)), None]
