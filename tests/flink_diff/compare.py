"""Compare two result documents of a case (``{"columns", "changelog", "final"}`` or ``{"error"}``).

Used to check the Flink runner against the stored ``tests/data/flink-cases/expected/`` and streamjoin's
replay against stored Flink outputs: the whole changelog in order (:func:`difference`), or each upsert key's
changes in order (:func:`per_key_difference`). Standard library only (runs in either venv).
"""

from __future__ import annotations

import json


def _key(row) -> str:
    return json.dumps(row)


def in_runs(changelog: list[list]) -> list[list]:
    """``changelog`` with each run of consecutive changes of one RowKind sorted.

    One input row of a regular join that matches several stored rows of the other side emits one change per
    match; Flink emits them in the order of its state's Java ``HashMap`` (by the rows' hash codes), streamjoin
    in arrival order. Rows of different keys that one watermark fires come in timer order, which in Flink is
    not stable from run to run. Compared this way, two changelogs are equal when they differ only in such order.
    """
    out: list[list] = []
    run: list[list] = []
    for change in changelog:
        if run and change[0] != run[0][0]:
            out += sorted(run, key=_key)
            run = []
        run.append(change)
    return out + sorted(run, key=_key)


def difference(expected: dict, actual: dict, *, changelog: bool = True, within_runs: bool = False) -> str | None:
    """What differs between ``expected`` and ``actual`` (``None`` when they are equal).

    Compares, in order: refusal (an ``error`` on one side only), column names and types, the final rows as a
    multiset, and (when ``changelog``) the changelog in emission order — with ``within_runs``, up to the order
    within runs of one RowKind (:func:`in_runs`). Returns the first difference as one line: ``"refused: …"``,
    ``"columns: …"``, ``"final: …"`` or ``"changelog: …"``.
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
    want, got = expected["changelog"], actual["changelog"]
    if within_runs:
        want, got = in_runs(want), in_runs(got)
    if changelog and want != got:
        first = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
        return (
            f"changelog: first difference at change {first}: "
            f"{want[first : first + 3]} != {got[first : first + 3]} ({len(want)} vs {len(got)} changes)"
        )
    return None


def per_key(changelog: list[list], columns: list[list], key: list[str]) -> dict[str, list[list]]:
    """``changelog`` split per upsert key: the key columns' values (as JSON) → the subsequence of the changes that
    have those values, in order. ``columns`` are the document's ``[name, type]`` pairs, ``key`` names some of them
    (``[]``: one subsequence, the whole changelog)."""
    names = [c[0] for c in columns]
    missing = [k for k in key if k not in names]
    if missing:
        raise ValueError(f"upsert key columns {missing} are not among the columns {names}")
    positions = [1 + names.index(k) for k in key]  # after the RowKind
    out: dict[str, list[list]] = {}
    for change in changelog:
        out.setdefault(json.dumps([change[i] for i in positions]), []).append(change)
    return out


def per_key_difference(expected: dict, actual: dict, key: list[str], *, within_runs: bool = False) -> str | None:
    """What differs between ``expected`` and ``actual`` when each upsert key's changes are compared on their own.

    As :func:`difference` without the changelog (refusal, columns, final rows), then, for every value of the
    ``key`` columns that either side has, the changes of that value in order (:func:`per_key`; with
    ``within_runs``, up to the order within runs of one RowKind of that subsequence, :func:`in_runs`). Changes
    of different keys may interleave in any way. Returns the first difference as one line, ``"changelog: key
    […]=[…]: …"`` for a key whose changes differ (keys in sorted order), ``None`` when equal.
    """
    found = difference(expected, actual, changelog=False)
    if found or expected.get("error"):
        return found
    want = per_key(expected["changelog"], expected["columns"], key)
    got = per_key(actual["changelog"], actual["columns"], key)
    for value in sorted(want.keys() | got.keys()):
        w, g = want.get(value, []), got.get(value, [])
        if within_runs:
            w, g = in_runs(w), in_runs(g)
        if w != g:
            first = next((i for i, (a, b) in enumerate(zip(w, g)) if a != b), min(len(w), len(g)))
            return (
                f"changelog: key {key}={value}: first difference at change {first} of the key's: "
                f"{w[first : first + 3]} != {g[first : first + 3]} ({len(w)} vs {len(g)} changes)"
            )
    return None
