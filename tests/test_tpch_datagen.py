"""The generated TPC-H changelogs: ``days`` places the same orders over fewer days, each line item as long after
its order as in TPC-H, and the rates cover the changelog's period."""

import datetime as dt

import pytest
from conftest import SCALE_FACTOR

from streamjoin.config import local_dir
from streamjoin.datagen.topics import RATE_MARGIN, rate_rows
from streamjoin.datagen.tpch import TpchChangelog, generate_tpch
from streamjoin.errors import ValidationError


@pytest.fixture(scope="module")
def data_dir():
    return generate_tpch(local_dir("tpch"), SCALE_FACTOR)


def _distances(changelog: TpchChangelog) -> dict[tuple, tuple]:
    placed = {o["o_orderkey"]: o["o_orderdate"] for o in changelog.orders}
    return {
        (i["l_orderkey"], i["l_linenumber"]): tuple(
            i[c] - placed[i["l_orderkey"]] for c in ("l_shipdate", "l_commitdate", "l_receiptdate")
        )
        for i in changelog.lineitems
    }


def test_days_fold_the_placements_and_keep_each_line_items_distance_to_its_order(data_dir):
    years, folded = TpchChangelog(data_dir), TpchChangelog(data_dir, days=60)
    first = dt.date(2002, 1, 1)
    assert min(o["o_orderdate"] for o in years.orders) == first
    assert max(o["o_orderdate"] for o in years.orders) > first + dt.timedelta(days=6 * 365)
    assert {o["o_orderdate"] for o in folded.orders} == {first + dt.timedelta(days=d) for d in range(60)}
    assert sorted(o["o_orderkey"] for o in folded.orders) == sorted(o["o_orderkey"] for o in years.orders)
    assert _distances(folded) == _distances(years)
    # The times follow the dates, and the streams stay in event-time order.
    assert all(o["o_ordertime"].date() == o["o_orderdate"] for o in folded.orders)
    assert all(i["l_shiptime"].date() == i["l_shipdate"] for i in folded.lineitems)
    assert [i["l_shiptime"] for i in folded.lineitems] == sorted(i["l_shiptime"] for i in folded.lineitems)
    assert [e["event_time"] for e in folded.order_events] == sorted(e["event_time"] for e in folded.order_events)
    # The same changes: updates and cancellations of the same orders.
    assert folded.deleted_keys == years.deleted_keys
    assert sorted((c.kind.short, c.row["o_orderkey"]) for c in folded.orders_changes()) == sorted(
        (c.kind.short, c.row["o_orderkey"]) for c in years.orders_changes()
    )


def test_the_rates_cover_the_period_and_no_more(data_dir):
    folded = TpchChangelog(data_dir, days=60)
    start, end = folded.period
    assert start == dt.date(2002, 1, 1)
    latest = max(
        max(i["l_receiptdate"] for i in folded.lineitems), max(e["event_time"].date() for e in folded.order_events)
    )
    assert end == latest
    times = [r["rate_time"].date() for r in rate_rows(folded.period)]
    assert min(times) >= start - RATE_MARGIN and max(times) <= end + RATE_MARGIN
    # A rate for every currency is valid on the period's first day (published in the days before it).
    assert {r["currency"] for r in rate_rows(folded.period) if r["rate_time"].date() <= start} >= {"USD", "JPY", "GBP"}
    assert len(rate_rows(folded.period)) < len(rate_rows(TpchChangelog(data_dir).period)) / 5


def test_days_below_one_are_refused(data_dir):
    with pytest.raises(ValidationError, match="days must be at least 1, got 0"):
        TpchChangelog(data_dir, days=0)
