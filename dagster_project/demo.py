"""``make demo``: the whole path on the embedded default, launched through Dagster.

1. starts a fresh embedded Kafka broker (or uses ``$KAFKA_BOOTSTRAP_SERVERS``),
2. runs the Dagster job ``load_tpch_topics_job``: TPC-H (tpchgen-cli) orders and
   line items as Debezium changelogs, ECB rates, into Kafka; then adds one
   malformed record to ``orders`` so that the dead-letter table has something to show,
3. runs ``orders_current_job``: the streaming query (``availableNow``) upserts the
   ``orders`` changelog into the Delta table ``orders_current`` and its Great
   Expectations check compares it with the batch recomputation,
4. prints a summary.

Runs are recorded in ``.local/dagster`` (``make dagster-ui`` shows them). Each
demo starts from empty topics and tables, so running it twice gives the same result.
"""

from __future__ import annotations

import os
import shutil
import sys

from dagster import DagsterInstance
from rich.console import Console
from rich.table import Table

from streamjoin.config import local_dir
from streamjoin.connectors.embedded_kafka import BOOTSTRAP_ENV, kafka_cluster
from streamjoin.connectors.kafka_admin import delete_topics, produce, topic_offsets
from streamjoin.datagen.topics import ORDERS, TOPICS

MALFORMED_RECORD = '{"before": null, "after": {"o_orderkey": "not-a-number"}, "op": "c"}'


def main() -> int:
    console = Console()
    os.environ.setdefault("DAGSTER_HOME", str(local_dir("dagster")))
    external = bool(os.environ.get(BOOTSTRAP_ENV))
    for folder in ("lakehouse",) + (() if external else ("kafka",)):
        shutil.rmtree(local_dir(folder))
    from dagster_project.definitions import defs  # after DAGSTER_HOME is set

    instance = DagsterInstance.get()
    with kafka_cluster() as bootstrap:
        os.environ[BOOTSTRAP_ENV] = bootstrap
        if external:
            delete_topics(bootstrap, [t.topic for t in TOPICS])
        console.rule(f"Kafka at {bootstrap}")
        load = defs.get_job_def("load_tpch_topics_job").execute_in_process(instance=instance)
        produce(bootstrap, ORDERS.topic, [("bad", MALFORMED_RECORD)])
        run = defs.get_job_def("orders_current_job").execute_in_process(instance=instance, raise_on_error=False)
        offsets = {t: sum(high - low for low, high in topic_offsets(bootstrap, t).values()) for t in (t.topic for t in TOPICS)}
        if not external:
            del os.environ[BOOTSTRAP_ENV]

    table = Table(title="streamjoin demo: orders → orders_current")
    table.add_column("what")
    table.add_column("value", justify="right")
    for topic, count in offsets.items():
        table.add_row(f"records in topic {topic}", str(count))
    meta = next((m.metadata for m in run.asset_materializations_for_node("orders_current")
                 if m.asset_key.to_user_string() == "orders_current"), {})
    for key, label in (("records_read", "records read by the query"), ("micro_batches", "micro-batches"),
                       ("rows", "rows in orders_current"), ("dead_letters", "dead letters"),
                       ("path", "Delta table"), ("dead_letter_table", "dead-letter table")):
        if key in meta:
            table.add_row(label, str(meta[key].value))
    checks = run.get_asset_check_evaluations()
    for check in checks:
        table.add_row(f"check {check.check_name}", "passed" if check.passed else "FAILED")
    console.print(table)
    console.print(f"Dagster runs: {os.environ['DAGSTER_HOME']} (see them with `make dagster-ui`)")
    ok = load.success and run.success and checks and all(c.passed for c in checks)
    if not ok:
        console.print("[red]demo failed[/red]")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
