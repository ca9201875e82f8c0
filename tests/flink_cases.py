"""Load the Apache Flink 2.3.0 reference cases in ``tests/data/flink-cases``.

A case (``cases/NAME.json``) has tables with RowKind-tagged rows, an optional
``arrival`` order across tables and a query; its expected output
(``expected/NAME.json``) has the changelog in emission order and the final
materialised rows. Format: ``tests/data/flink-cases/README.md``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

CASES_DIR = Path(__file__).parent / "data" / "flink-cases"


@dataclass(frozen=True)
class Table:
    name: str
    columns: list[tuple[str, str]]
    rows: list[tuple[str, tuple]]  # (RowKind short string, values as in the JSON)
    primary_key: tuple[str, ...] = ()
    rowtime: str | None = None
    watermark_delay_ms: int | None = None
    raw: dict | None = None


@dataclass(frozen=True)
class Case:
    name: str
    tables: dict[str, Table]
    arrival: list[str]
    query: str
    setup: list[str]
    expected_columns: list[tuple[str, str]]
    expected_changelog: list[tuple[str, tuple]]
    expected_final: list[tuple]

    def arrivals(self):
        """Yield ``(table_name, rowkind, values)`` in the order Flink was fed."""
        cursor = {name: 0 for name in self.tables}
        for name in self.arrival:
            kind, values = self.tables[name].rows[cursor[name]]
            cursor[name] += 1
            yield name, kind, values


def case_names(prefix: str = "") -> list[str]:
    return sorted(p.stem for p in (CASES_DIR / "cases").glob(f"{prefix}*.json"))


def load_case(name: str) -> Case:
    case = json.loads((CASES_DIR / "cases" / f"{name}.json").read_text())
    expected = json.loads((CASES_DIR / "expected" / f"{name}.json").read_text())
    tables = {}
    for t in case["tables"]:
        rowtime = t.get("rowtime") or {}
        tables[t["name"]] = Table(
            name=t["name"],
            columns=[tuple(c) for c in t["columns"]],
            rows=[(r[0], tuple(r[1:])) for r in t["rows"]],
            primary_key=tuple(t.get("primary_key", ())),
            rowtime=rowtime.get("column"),
            watermark_delay_ms=rowtime.get("watermark_delay_ms"),
            raw=t,
        )
    # Without an arrival list, tables arrive one after the other, in declaration order.
    arrival = case.get("arrival") or [t["name"] for t in case["tables"] for _ in t["rows"]]
    return Case(
        name=name,
        tables=tables,
        arrival=arrival,
        query=case["query"],
        setup=case.get("setup", []),
        expected_columns=[tuple(c) for c in expected["columns"]],
        expected_changelog=[(r[0], tuple(r[1:])) for r in expected["changelog"]],
        expected_final=[tuple(r) for r in expected["final"]],
    )
