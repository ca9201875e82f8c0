"""A cold driver with and without the class-data-sharing archive of ``make setup`` (:mod:`streamjoin.cds`).

    .venv/bin/python -m bench.cold_start                                  # lineitem_with_order, 3 rounds
    .venv/bin/python -m bench.cold_start --rounds 5 sql/orders_shipped_fast.sql

One embedded broker (a temporary folder) is loaded once with the TPC-H changelogs at ``--scale-factor``; then,
each round, every SQL file runs once as ``streamjoin run --available-now`` into a new lakehouse with the archive
and once without it (``SPARK_SUBMIT_OPTS=-Xshare:auto``: the JVM's own default, which tells ``spark_session`` to
add nothing), alternating so that both see the same machine. Seconds are the whole command, as a user waits for it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from streamjoin.cds import JAVA_OPTIONS_ENV, driver_java_options
from streamjoin.config import PROJECT_ROOT, local_dir
from streamjoin.connectors.embedded_kafka import EmbeddedKafka
from streamjoin.datagen.topics import load_topics
from streamjoin.datagen.tpch import TpchChangelog, generate_tpch

#: label → SPARK_SUBMIT_OPTS of the run (None: unset).
VARIANTS = {"archive": None, "no archive": "-Xshare:auto"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, default=[PROJECT_ROOT / "sql" / "lineitem_with_order.sql"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scale-factor", type=float, default=0.001)
    args = parser.parse_args(argv)
    if not driver_java_options():
        sys.exit("no usable class-data-sharing archive: run `make setup`")
    rows = []
    with tempfile.TemporaryDirectory(prefix="cold-start-") as tmp, EmbeddedKafka(Path(tmp) / "kafka") as broker:
        load_topics(
            broker.bootstrap_servers, TpchChangelog(generate_tpch(local_dir("tpch"), args.scale_factor), seed=1)
        )
        for round_ in range(1, args.rounds + 1):
            for file in args.files:
                seconds = {
                    label: _run(broker.bootstrap_servers, file, Path(tmp) / f"lake-{round_}-{i}", options)
                    for i, (label, options) in enumerate(VARIANTS.items())
                }
                rows.append((file.stem, round_, *seconds.values()))
                print(
                    f"{file.stem} round {round_}: " + ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items()),
                    flush=True,
                )
    print("\n| pipeline | round | " + " | ".join(f"{label} s" for label in VARIANTS) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in VARIANTS) + " |")
    for name, round_, *seconds in rows:
        print(f"| {name} | {round_} | " + " | ".join(f"{s:.1f}" for s in seconds) + " |")
    return 0


def _run(bootstrap: str, file: Path, lakehouse: Path, options: str | None) -> float:
    env = {k: v for k, v in os.environ.items() if k != JAVA_OPTIONS_ENV}
    if options is not None:
        env[JAVA_OPTIONS_ENV] = options
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamjoin.cli",
            "run",
            "--available-now",
            "--bootstrap-servers",
            bootstrap,
            "--lakehouse",
            str(lakehouse),
            str(file),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"streamjoin run {file} exited {done.returncode}: {done.stderr[-2000:]}")
    return time.monotonic() - started


if __name__ == "__main__":
    sys.exit(main())
