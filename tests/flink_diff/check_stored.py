"""Replay stored cases (the shared Flink cases and the differential ones) on one engine and compare with Flink.

    .venv/bin/python -m tests.flink_diff.check_stored --engine jvm 'over_*' 'interval_*'

Each pattern selects case names (shell-style) in ``tests/data/flink-cases/cases`` and
``tests/data/flink-diff/cases``; every selected case is replayed at 1 and 7 rows per micro-batch on the
engine (``spark.streamjoin.engine``) and compared with Flink 2.3.0's stored output as ``run_diff`` does.
Prints one line per case; exits 1 when any case is not equal. A developer's tool while porting an
operator between engines; the suite's own comparisons are ``tests/test_replay.py`` and
``tests/test_flink_diff.py``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import tempfile
from pathlib import Path

from tests.flink_diff.generate import ORDER_WITHIN_RUNS_FAMILIES, PER_KEY_FAMILIES, family_of
from tests.flink_diff.run_diff import outcome

DATA = Path(__file__).resolve().parents[1] / "data"
SETS = (DATA / "flink-cases", DATA / "flink-diff")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("patterns", nargs="+", help="case name patterns, e.g. 'over_*'")
    parser.add_argument("--engine", choices=["jvm", "python"], default="jvm")
    args = parser.parse_args(argv)
    selected = {
        path.stem: (path, root / "expected" / path.name)
        for root in SETS
        for path in sorted((root / "cases").glob("*.json"))
        if any(fnmatch.fnmatch(path.stem, p) for p in args.patterns)
    }
    if not selected:
        parser.error(f"no stored case matches {args.patterns}")

    from streamjoin.jvm import ENGINE_CONF
    from streamjoin.session import spark_session
    from streamjoin.testing.replay import replay_cases

    spark = spark_session("streamjoin-check-stored")
    spark.conf.set(ENGINE_CONF, args.engine)
    paths = [path for path, _ in selected.values()]
    with tempfile.TemporaryDirectory() as work:
        ours = {rows: replay_cases(spark, paths, Path(work) / str(rows), micro_batch_rows=rows) for rows in (1, 7)}
    failed = 0
    for name, (_, expected_path) in selected.items():
        within_runs = name.startswith("join_") or family_of(name) in ORDER_WITHIN_RUNS_FAMILIES
        upsert_key = json.loads(selected[name][0].read_text()).get("upsert_key")  # a chain case's: per key at 7
        kind, detail = outcome(
            json.loads(expected_path.read_text()),
            ours[1][name],
            ours[7][name],
            within_runs=within_runs,
            upsert_key=upsert_key,
            per_key_at_one=family_of(name) in PER_KEY_FAMILIES,
        )
        failed += kind not in ("equal", "flink-refused")
        print(f"{name:40} {kind:14} {detail or ''}")
    print(f"{len(selected) - failed}/{len(selected)} equal to Flink on the {args.engine} engine")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
