"""Compare two result documents of a case (``{"columns", "changelog", "final"}`` or ``{"error"}``).

Used to check the Flink runner against the stored ``tests/data/flink-cases/expected/`` and streamjoin's
replay against stored Flink outputs. Standard library only (runs in either venv).
"""

from __future__ import annotations

import json


def _key(row) -> str:
    return json.dumps(row)


def difference(expected: dict, actual: dict, *, changelog: bool = True) -> str | None:
    """What differs between ``expected`` and ``actual`` (``None`` when they are equal).

    Compares, in order: refusal (an ``error`` on one side only), column names and types, the final rows as a
    multiset, and (when ``changelog``) the changelog in emission order. Returns the first difference as one
    line: ``"refused: …"``, ``"columns: …"``, ``"final: …"`` or ``"changelog: …"``.
    """
    # The stored Flink outputs carry "error": null when Flink ran the query.
    if bool(expected.get("error")) != bool(actual.get("error")):
        side, doc = ("expected", expected) if expected.get("error") else ("actual", actual)
        return f"refused: only {side} refuses: {doc['error'][:300]}"
    if expected.get("error"):
        return None
    if [list(c) for c in expected["columns"]] != [list(c) for c in actual["columns"]]:
        return f"columns: {expected['columns']} != {actual['columns']}"
    if not isinstance(actual["final"], list) or not isinstance(expected["final"], list):
        return f"final: {expected['final']} != {actual['final']}"
    want, got = sorted(expected["final"], key=_key), sorted(actual["final"], key=_key)
    if want != got:
        missing = [r for r in want if r not in got]
        extra = [r for r in got if r not in want]
        return f"final: missing {missing[:5]}, extra {extra[:5]} ({len(want)} vs {len(got)} rows)"
    if changelog and expected["changelog"] != actual["changelog"]:
        first = next((i for i, (a, b) in enumerate(zip(expected["changelog"], actual["changelog"])) if a != b),
                     min(len(expected["changelog"]), len(actual["changelog"])))
        return (f"changelog: first difference at change {first}: "
                f"{expected['changelog'][first:first + 3]} != {actual['changelog'][first:first + 3]} "
                f"({len(expected['changelog'])} vs {len(actual['changelog'])} changes)")
    return None
