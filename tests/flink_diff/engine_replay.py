"""Replay stored cases through streamjoin on one operator engine, as the differential tests compare them."""

from __future__ import annotations

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
