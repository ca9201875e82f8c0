"""``make demo``: the whole path on the embedded default, launched through Dagster.

1. uses the local Kafka broker that ``make kafka`` started (or ``$KAFKA_BOOTSTRAP_SERVERS``) and
   deletes the demo's topics there,
2. runs the Dagster job ``load_tpch_topics_job``: TPC-H (tpchgen-cli) orders and
   line items as Debezium changelogs and as the event streams ``order_events`` and
   ``shipments``, ECB rates, into Kafka; then adds one
   malformed record to ``orders`` so that the dead-letter table has something to show,
3. runs ``lakehouse_job``: the dimension tables, then every SQL pipeline of
   ``sql/`` as a streaming query (``availableNow``) into its Delta table through
   the Delta upsert writer, each followed by its Great Expectations checks (the table
   against the batch query over the same input),
4. prints a summary: records per topic, and per pipeline the records read, rows,
   changes, dead letters and checks, whole at any width (:func:`format_table`),
   then where the Dagster UI and the Data Docs site are.

Spark's Python workers print start-up lines to the process's stderr (PySpark's
``transform_with_state_driver_worker`` prints unconditionally); :func:`quiet_python_workers`
keeps them out of the log. Runs are recorded in ``.local/dagster`` (``make dagster-ui``
shows them). Each demo starts from empty topics and tables, so running it twice gives
the same result.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from dagster import DagsterInstance
from rich.console import Console

from streamjoin.config import PROJECT_ROOT, local_dir
from streamjoin.connectors.kafka_admin import delete_topics, produce, topic_offsets
from streamjoin.connectors.kafka_service import resolve_bootstrap_servers
from streamjoin.datagen.topics import ORDERS, TOPICS

#: The instance settings of the embedded default (run queue, concurrency pools).
INSTANCE_CONFIG = Path(__file__).with_name("dagster.yaml")

#: Where ``make dagster-ui`` serves the UI.
DAGSTER_UI_URL = "http://127.0.0.1:3000"

#: The Data Docs site of the project's Great Expectations context (``gx/``), once a check has built it.
DATA_DOCS = PROJECT_ROOT / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"

#: What PySpark's Python workers print on start-up (``pyspark/sql/streaming/transform_with_state_driver_worker.py``).
WORKER_LINE = "TransformWithStateInPandas Python worker"

MALFORMED_RECORD = '{"before": null, "after": {"o_orderkey": "not-a-number"}, "op": "c"}'


def format_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]], width: int | None) -> str:
    """A plain-text table that never cuts a value: aligned columns if they fit in ``width``, else one block per row.

    Args:
        title: the line above the table.
        header: the column names; the first column is text (left-aligned), the others figures (right-aligned).
        rows: the cells, as text, ``len(header)`` per row.
        width: the terminal's columns; ``None`` for a stream without any (a file, a pipe): columns then
            take the width they need.

    Returns:
        The table's lines joined by newlines. In the block layout a row is its first cell on a line of
        its own, then one ``  <column>: <value>`` line per other column.
    """
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    table_width = sum(widths) + 2 * (len(widths) - 1)
    if width is None or table_width <= width:

        def line(cells: Sequence[str]) -> str:
            return "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
            ).rstrip()

        return "\n".join([title, line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])
    label = max(len(h) for h in header[1:])
    blocks = [
        f"{row[0]}\n" + "\n".join(f"  {h + ':':<{label + 1}} {c}" for h, c in zip(header[1:], row[1:])) for row in rows
    ]
    return "\n".join([title, *blocks])


def _width(stream: TextIO) -> int | None:
    return shutil.get_terminal_size().columns if stream.isatty() else None


def _filter(fd: int, patterns: Sequence[str]):
    """Put a pipe on ``fd`` whose lines a thread copies to the original target, but those containing a pattern
    (and the blank line after each); returns ``restore()``, which waits until everything written so far was copied."""
    original = os.dup(fd)
    read, write = os.pipe()
    os.dup2(write, fd)
    os.close(write)
    marker = f"\0quiet-python-workers-{os.getpid()}\n".encode()
    drained = threading.Event()

    def copy() -> None:
        dropped = False
        with os.fdopen(read, "rb") as lines:
            for raw in lines:
                if raw == marker:
                    drained.set()
                    continue
                matches = any(p in raw.decode(errors="replace") for p in patterns)
                if not (matches or (dropped and not raw.strip())):
                    os.write(original, raw)
                dropped = matches

    threading.Thread(target=copy, name=f"quiet-python-workers-{fd}", daemon=True).start()

    def restore() -> None:
        os.write(fd, marker)
        drained.wait(timeout=5)
        os.dup2(original, fd)

    return restore


@contextlib.contextmanager
def quiet_python_workers(patterns: Sequence[str] = (WORKER_LINE,)) -> Iterator[None]:
    """Drop the lines containing one of ``patterns``, and the blank line after each, from stdout and stderr.

    Spark's JVM and its Python workers write to file descriptors 1 and 2, which they inherit, so the
    filter is a pipe on each with a thread copying every other line to the original. On exit everything
    written so far has been copied and the descriptors are the original ones again (a traceback after it
    is not filtered); the JVM keeps the pipes, and the threads go on filtering what it writes later.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    restores = [_filter(fd, patterns) for fd in (1, 2)]
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for restore in restores:
            restore()


def main() -> int:
    console = Console(soft_wrap=True)  # a path stays on one line at any width
    if "DAGSTER_HOME" not in os.environ:
        os.environ["DAGSTER_HOME"] = str(local_dir("dagster"))
        shutil.copy(INSTANCE_CONFIG, local_dir("dagster") / "dagster.yaml")
    shutil.rmtree(local_dir("lakehouse"))
    # The running local service (`make kafka`) or KAFKA_BOOTSTRAP_SERVERS; the runs resolve it the same way.
    bootstrap = resolve_bootstrap_servers()
    delete_topics(bootstrap, [t.topic for t in TOPICS])
    from dagster_project.definitions import defs  # after DAGSTER_HOME is set

    instance = DagsterInstance.get()
    console.rule(f"Kafka at {bootstrap}, operator engine {os.environ.get('STREAMJOIN_ENGINE', 'jvm')}")
    with quiet_python_workers():
        load = defs.get_job_def("load_tpch_topics_job").execute_in_process(instance=instance)
        produce(bootstrap, ORDERS.topic, [("bad", MALFORMED_RECORD)])
        run = defs.get_job_def("lakehouse_job").execute_in_process(instance=instance, raise_on_error=False)
    offsets = {
        t: sum(high - low for low, high in topic_offsets(bootstrap, t).values()) for t in (t.topic for t in TOPICS)
    }

    width = _width(sys.stdout)
    print(format_table("Kafka topics", ("topic", "records"), [(t, f"{n:,}") for t, n in offsets.items()], width))
    events = [e.event_specific_data.materialization for e in run.get_asset_materialization_events()]
    materialized = {m.asset_key.to_user_string(): m.metadata for m in events}
    checks = run.get_asset_check_evaluations()
    rows = []
    for name, meta in materialized.items():
        if "micro_batches" not in meta:
            continue  # a changelog or dimension table
        records = sum(meta["records_read"].value.values())
        changes = materialized.get(f"{name}_changelog", {}).get("changes")
        verdicts = [c for c in checks if c.asset_key.to_user_string() == name]
        passed = sum(c.passed for c in verdicts)
        rows.append(
            (
                name,
                f"{records:,}",
                f"{meta['rows'].value:,}",
                f"{changes.value:,}" if changes else "",
                str(meta["dead_letters"].value),
                f"{passed}/{len(verdicts)} passed",
            )
        )
    print()
    print(
        format_table(
            "The SQL pipelines of sql/ (Delta tables in .local/lakehouse)",
            ("pipeline", "records read", "rows", "changes", "dead letters", "checks"),
            rows,
            width,
        ),
        flush=True,
    )
    for check in checks:
        if not check.passed:
            console.print(f"[red]check {check.check_name} on {check.asset_key.to_user_string()} FAILED[/red]")
    console.print(f"Dagster runs: {os.environ['DAGSTER_HOME']}")
    console.print(f"Dagster UI: `make dagster-ui`, then {DAGSTER_UI_URL}")
    if DATA_DOCS.exists():
        console.print(f"Data Docs: {DATA_DOCS}")
    ok = load.success and run.success and checks and all(c.passed for c in checks)
    if not ok:
        console.print("[red]demo failed[/red]")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
