"""Replay stored cases through streamjoin on one operator engine, as the differential tests compare them."""

from __future__ import annotations

import json
import time
from pathlib import Path

from streamjoin.jvm import ENGINE_CONF
from streamjoin.testing.replay import replay_cases


def replay_on_engine(spark, engine: str, rows: int, paths: list[Path], work_dir: Path, what: str = "cases") -> dict:
    """Case name → streamjoin's result document for ``paths`` on ``engine`` at ``rows`` arrivals per micro-batch.

    The session's engine setting is restored afterwards; the replay's wall time is printed (``what`` names the cases).
    """
    before = spark.conf.get(ENGINE_CONF)
    spark.conf.set(ENGINE_CONF, engine)
    start = time.monotonic()
    try:
        results = replay_cases(spark, paths, work_dir, micro_batch_rows=rows)
    finally:
        spark.conf.set(ENGINE_CONF, before)
    print(
        f"\nreplayed {len(paths)} {what} on the {engine} engine at {rows} row(s) per micro-batch in "
        f"{time.monotonic() - start:.0f} s"
    )
    return results


def replay_documents(spark, engine: str, rows: int, cases: list[dict], work_dir: Path) -> dict:
    """Case name → result document for ``cases`` (case documents, written as files under ``work_dir``) replayed on
    ``engine`` at ``rows`` arrivals per micro-batch (:func:`replay_on_engine`, all in one call)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for case in cases:
        path = work_dir / f"{case['name']}.json"
        path.write_text(json.dumps(case))
        paths.append(path)
    return replay_on_engine(spark, engine, rows, sorted(paths), work_dir / "out", "property cases")


def sorted_final(result: dict, name: str) -> list:
    """A replayed case's final rows in a canonical order, after asserting that it ran."""
    assert "error" not in result, (name, result.get("error"))
    return sorted(result["final"], key=json.dumps)
