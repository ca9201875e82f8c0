"""``make demo``: the whole path on the embedded default, launched through Dagster.

1. starts a fresh embedded Kafka broker (or uses ``$KAFKA_BOOTSTRAP_SERVERS``),
2. runs the Dagster job ``load_tpch_topics_job``: TPC-H (tpchgen-cli) orders and
   line items as Debezium changelogs and as the event streams ``order_events`` and
   ``shipments``, ECB rates, into Kafka; then adds one
   malformed record to ``orders`` so that the dead-letter table has something to show,
3. runs ``lakehouse_job``: the dimension tables, then every SQL pipeline of
   ``sql/`` as a streaming query (``availableNow``) into its Delta table through
   the Delta upsert writer, each followed by its Great Expectations checks (the table
   against the batch query over the same input),
4. prints a summary: records per topic, and per pipeline the records read, rows,
   changes, dead letters and checks.

Runs are recorded in ``.local/dagster`` (``make dagster-ui`` shows them). Each
demo starts from empty topics and tables, so running it twice gives the same result.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from dagster import DagsterInstance
from rich.console import Console
from rich.table import Table

from streamjoin.config import local_dir
from streamjoin.connectors.embedded_kafka import BOOTSTRAP_ENV, kafka_cluster
from streamjoin.connectors.kafka_admin import delete_topics, produce, topic_offsets
from streamjoin.datagen.topics import ORDERS, TOPICS

#: The instance settings of the embedded default (run queue, concurrency pools).
INSTANCE_CONFIG = Path(__file__).with_name("dagster.yaml")

MALFORMED_RECORD = '{"before": null, "after": {"o_orderkey": "not-a-number"}, "op": "c"}'


def main() -> int:
    console = Console()
    if "DAGSTER_HOME" not in os.environ:
        os.environ["DAGSTER_HOME"] = str(local_dir("dagster"))
        shutil.copy(INSTANCE_CONFIG, local_dir("dagster") / "dagster.yaml")
    external = bool(os.environ.get(BOOTSTRAP_ENV))
    for folder in ("lakehouse",) + (() if external else ("kafka",)):
        shutil.rmtree(local_dir(folder))
    from dagster_project.definitions import defs  # after DAGSTER_HOME is set

    instance = DagsterInstance.get()
    with kafka_cluster() as bootstrap:
        os.environ[BOOTSTRAP_ENV] = bootstrap
        if external:
            delete_topics(bootstrap, [t.topic for t in TOPICS])
        console.rule(f"Kafka at {bootstrap}, operator engine {os.environ.get('STREAMJOIN_ENGINE', 'jvm')}")
        load = defs.get_job_def("load_tpch_topics_job").execute_in_process(instance=instance)
        produce(bootstrap, ORDERS.topic, [("bad", MALFORMED_RECORD)])
        run = defs.get_job_def("lakehouse_job").execute_in_process(instance=instance, raise_on_error=False)
        offsets = {t: sum(high - low for low, high in topic_offsets(bootstrap, t).values()) for t in (t.topic for t in TOPICS)}
        if not external:
            del os.environ[BOOTSTRAP_ENV]

    topics = Table(title="Kafka topics")
    topics.add_column("topic")
    topics.add_column("records", justify="right")
    for topic, count in offsets.items():
        topics.add_row(topic, f"{count:,}")
    console.print(topics)

    events = [e.event_specific_data.materialization for e in run.get_asset_materialization_events()]
    materialized = {m.asset_key.to_user_string(): m.metadata for m in events}
    checks = run.get_asset_check_evaluations()
    pipelines = Table(title="streamjoin demo: the SQL pipelines of sql/ (Delta tables in .local/lakehouse)")
    for column in ("pipeline", "records read", "rows", "changes", "dead letters", "checks"):
        pipelines.add_column(column, justify="left" if column in ("pipeline", "checks") else "right", no_wrap=True)
    for name, meta in materialized.items():
        if "micro_batches" not in meta:
            continue  # a changelog or dimension table
        records = sum(meta["records_read"].value.values())
        changes = materialized.get(f"{name}_changelog", {}).get("changes")
        verdicts = [c for c in checks if c.asset_key.to_user_string() == name]
        passed = sum(c.passed for c in verdicts)
        pipelines.add_row(name, f"{records:,}", f"{meta['rows'].value:,}", f"{changes.value:,}" if changes else "",
                          str(meta["dead_letters"].value), f"{passed} of {len(verdicts)} passed")
    console.print(pipelines)
    for check in checks:
        if not check.passed:
            console.print(f"[red]check {check.check_name} on {check.asset_key.to_user_string()} FAILED[/red]")
    console.print(f"Dagster runs: {os.environ['DAGSTER_HOME']} (see them with `make dagster-ui`)")
    ok = load.success and run.success and checks and all(c.passed for c in checks)
    if not ok:
        console.print("[red]demo failed[/red]")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
