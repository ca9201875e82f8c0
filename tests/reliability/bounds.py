"""Resource bounds: one key with a very large state through the real path (Kafka broker, Spark, RocksDB state, Delta).

Two cases, each on every operator engine:

- ``lineitem_with_order`` (the regular LEFT join): one order with ``rows`` line items, beside the ordinary
  TPC-H orders. The first run reads the order and its line items (the join's state holds ``rows`` rows under one
  key); then the order is updated and a second run, restoring that state from the checkpoint, retracts and
  re-emits every one of its joined rows (``-U``/``+U`` for each of ``rows`` line items).
- ``part_price_over`` (OVER, ``PARTITION BY p_type``): ``rows`` shipments of one part type (100 new parts with
  their own prices, in the ``part`` lookup table), spaced evenly over the TPC-H period between the ordinary
  shipments; one partition of the two OVER aggregates holds them, each ``RANGE 7 DAYS`` frame a few thousand
  rows. A ``cap``: the case runs with fewer rows (the first ``cap`` of the same spacing, so a frame holds as
  many rows as at full size) and the table extrapolates its time to ``rows`` linearly.

Each case gets its own topics (``bounds_<pipeline>_<engine>_<topic>``: the catalog of ``sql/catalog/`` with its
topic names prefixed, so a shared broker is fine) and lakehouse, runs ``run_pipeline`` available-now (what
``streamjoin run --available-now`` runs) and checks with :func:`tests.reliability.verify.verify` that the Delta
table equals the batch query over the final input and the changelog holds each batch once.

Measured per case: wall time of the runs (not of producing), input records per second, the most state rows and
state memory of any micro-batch (Spark's ``stateOperators``: ``numRowsTotal``, ``memoryUsedBytes``, and RocksDB's
SST file bytes), the peak of the driver JVM's heap (the sum of its heap pools' peaks, an upper bound; local mode:
the executor's tasks run in it) and the peak resident memory of that JVM and its Python workers (sampled every
0.2 s; RocksDB's memory is off-heap, in the JVM's resident memory).

Run ``python -m tests.reliability.bounds`` (``make bounds``): the table, exit status 1 when a case's table is wrong.
"""

from __future__ import annotations

import argparse
import heapq
import os
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from pyspark.sql import SparkSession

from streamjoin.config import PROJECT_ROOT

__all__ = ["PIPELINES", "BoundsResult", "main", "report", "run_case"]

#: The pipeline of each case: the regular join and the OVER aggregate of ``sql/``.
PIPELINES = ("lineitem_with_order", "part_price_over")
#: Keys far above TPC-H's (its order keys stay below 6 * 10^7 at scale factor 10).
BIG_ORDER = 10**9
BIG_PART = 10**9
BIG_TYPE = "BOUNDS ONE PARTITION"
_PARTS = 100
_CATALOG = PROJECT_ROOT / "sql" / "catalog" / "tpch.sql"


@dataclass
class BoundsResult:
    """One case's figures.

    Attributes:
        rows: line items of the big order / shipments of the big partition the case ran with.
        target: the rows it stands for (``rows`` unless capped: the time is then extrapolated).
        records: Kafka records read by the runs (all topics, the ordinary ones included).
        seconds: wall time of the pipeline runs (s).
        state_rows / state_bytes / sst_bytes: the most of any micro-batch, over the stateful operators.
        heap_bytes: peak heap of the driver JVM (sum of its heap pools' peaks); rss_bytes: peak resident memory of the
            JVM and its Python workers.
        verdict: :class:`tests.reliability.verify.Verdict`; error: what failed, if anything did.
    """

    pipeline: str
    engine: str
    rows: int
    target: int
    records: int = 0
    delta_rows: int = 0
    seconds: float = 0.0
    state_rows: int = 0
    state_bytes: int = 0
    sst_bytes: int = 0
    heap_bytes: int = 0
    rss_bytes: int = 0
    verdict: object = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and self.verdict is not None and self.verdict.ok

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


def _catalog(work: Path, prefix: str) -> Path:
    """``sql/catalog/tpch.sql`` with every topic name prefixed by ``prefix``, written under ``work``."""
    text = re.sub(r"'topic' = '([a-z_]+)'", lambda m: f"'topic' = '{prefix}{m[1]}'", _CATALOG.read_text())
    path = work / "catalog.sql"
    path.write_text(text)
    return path


def _big_order_records(changelog, rows: int) -> tuple[dict, dict]:
    """(first, second) topic → (key, value) records: the ordinary orders and line items with the big order and its
    ``rows`` line items; then the big order's update."""
    from streamjoin.changelog import RowKind
    from streamjoin.datagen.topics import LINEITEM, ORDERS, debezium_record
    from streamjoin.datagen.tpch import Change

    order = {**changelog.orders[0], "o_orderkey": BIG_ORDER, "o_orderstatus": "O"}
    updated = {**order, "o_orderstatus": "F", "o_totalprice": order["o_totalprice"] + Decimal("1.00")}
    item = {**changelog.lineitems[0], "l_orderkey": BIG_ORDER}
    key = str(BIG_ORDER)
    orders = [(str(c.row["o_orderkey"]), debezium_record(c)) for c in changelog.orders_changes()]
    lineitems = [(str(c.row["l_orderkey"]), debezium_record(c)) for c in changelog.lineitem_changes()]
    first = {
        ORDERS.topic: [*orders, (key, debezium_record(Change(RowKind.INSERT, order)))],
        LINEITEM.topic: [
            *lineitems,
            *((key, debezium_record(Change(RowKind.INSERT, {**item, "l_linenumber": n}))) for n in range(1, rows + 1)),
        ],
    }
    return first, {ORDERS.topic: [(key, debezium_record(Change(RowKind.UPDATE_AFTER, updated, order)))]}


def _big_partition(changelog, rows: int, target: int) -> tuple[dict, list[dict]]:
    """Topic → records: the ordinary shipments and ``rows`` shipments of :data:`BIG_TYPE` (spaced as ``target`` rows
    over
    the TPC-H period), merged in ship-time order; and the ``part`` table with the big type's parts."""
    import datetime as dt

    from streamjoin.datagen.topics import SHIPMENTS, _encode, _epoch_ms
    from streamjoin.datagen.tpch import parts

    ordinary = changelog.lineitems
    start, end = ordinary[0]["l_shiptime"], ordinary[-1]["l_shiptime"]
    step = (end - start) / target
    template = {**ordinary[0], "l_orderkey": BIG_ORDER}
    big = (
        {
            **template,
            "l_linenumber": i + 1,
            "l_partkey": BIG_PART + i * 7919 % _PARTS,
            "l_shiptime": start + step * i + dt.timedelta(milliseconds=1),
        }
        for i in range(rows)
    )
    merged = heapq.merge(ordinary, big, key=lambda s: s["l_shiptime"])
    records = [(str(s["l_orderkey"]), _encode(s), _epoch_ms(s["l_shiptime"])) for s in merged]
    part = [
        *parts(changelog.data_dir),
        *(
            {
                "p_partkey": BIG_PART + i,
                "p_name": f"bounds part {i}",
                "p_brand": "Brand#00",
                "p_type": BIG_TYPE,
                "p_size": 1,
                "p_retailprice": Decimal(1000 + i * 37 % 1000),
            }
            for i in range(_PARTS)
        ),
    ]
    return {SHIPMENTS.topic: records}, part


class _Peaks(threading.Thread):
    """Samples the resident memory of process ``pid`` and its descendants every ``every_s`` until stopped; keeps the
    peak."""

    def __init__(self, pid: int, every_s: float = 0.2) -> None:
        super().__init__(daemon=True, name="bounds-rss")
        self.pid = pid
        self.every_s = every_s
        self.peak = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every_s):
            self.peak = max(self.peak, sum(_rss(pid) for pid in _tree(self.pid)))

    def stop(self) -> int:
        self.done.set()
        self.join()
        return self.peak


def _tree(pid: int) -> list[int]:
    pids, i = [pid], 0
    while i < len(pids):
        try:
            for task in os.listdir(f"/proc/{pids[i]}/task"):
                pids += [int(c) for c in Path(f"/proc/{pids[i]}/task/{task}/children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            pass
        i += 1
    return pids


def _rss(pid: int) -> int:
    try:
        line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmRSS:"))
    except (FileNotFoundError, StopIteration, ProcessLookupError):
        return 0
    return int(line.split()[1]) * 1024


def _heap_pools(spark: SparkSession) -> list:
    jvm = spark.sparkContext._jvm
    pools = jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
    return [p for p in pools if p.getType().name() == "HEAP"]


def run_case(
    spark: SparkSession,
    pipeline: str,
    engine: str,
    rows: int,
    bootstrap: str,
    work: Path,
    changelog,
    *,
    target: int | None = None,
    restart: bool = True,
    log=print,
) -> BoundsResult:
    """Run one case (module docstring) on ``engine``; ``rows`` rows in the big key, standing for ``target`` (default
    ``rows``).

    Args:
        restart: ``lineitem_with_order``: the big order's update comes in a second run, which restores the key's state
            from the checkpoint; False: in the first run's input (one run, its micro-batch retracting the key's rows).
        bootstrap: a broker the case makes its own topics on.
        work: a folder for its catalog and lakehouse.
        changelog: the ordinary TPC-H input (:class:`~streamjoin.datagen.tpch.TpchChangelog`).

    Returns:
        A :class:`BoundsResult`; ``result.ok`` is False when the table is wrong or a run failed.
    """
    from streamjoin.connectors.kafka_admin import ensure_topics, produce
    from streamjoin.datagen.dimensions import PART_SCHEMA, rows_frame
    from streamjoin.jvm import ENGINE_CONF
    from streamjoin.pipeline import Lakehouse, run_pipeline
    from streamjoin.planner import load_script, sql_pipelines
    from tests.reliability.verify import verify

    result = BoundsResult(pipeline, engine, rows, target or rows)
    prefix = f"bounds_{pipeline}_{engine}_"
    root = Path(tempfile.mkdtemp(prefix=f"{pipeline}-{engine}-", dir=work))
    [compiled] = sql_pipelines(load_script(PROJECT_ROOT / "sql" / f"{pipeline}.sql", [_catalog(root, prefix)]))
    lakehouse = Lakehouse(str(root / "lake"))
    if pipeline == "lineitem_with_order":
        first, second = _big_order_records(changelog, rows)
        phases = (
            [first, second] if restart else [{t: first.get(t, []) + second.get(t, []) for t in {**first, **second}}]
        )
    else:
        topics, part = _big_partition(changelog, rows, result.target)
        rows_frame(spark, part, PART_SCHEMA).write.format("delta").save(lakehouse.table_path("part"))
        phases = [topics]
    ensure_topics(bootstrap, {prefix + t: 1 for phase in phases for t in phase})
    before = spark.conf.get(ENGINE_CONF)
    spark.conf.set(ENGINE_CONF, engine)
    pools = _heap_pools(spark)
    for p in pools:
        p.resetPeakUsage()
    peaks = _Peaks(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    peaks.start()

    def observe(progress) -> None:
        state = progress.stateOperators
        result.state_rows = max(result.state_rows, sum(s.numRowsTotal for s in state))
        result.state_bytes = max(result.state_bytes, sum(s.memoryUsedBytes for s in state))
        result.sst_bytes = max(
            result.sst_bytes, sum(int(s.customMetrics.get("rocksdbSstFileSize", 0) or 0) for s in state)
        )

    try:
        for i, phase in enumerate(phases):
            for topic, records in phase.items():
                produce(bootstrap, prefix + topic, records)
            started = time.monotonic()
            run = run_pipeline(compiled, spark, lakehouse, bootstrap, on_progress=observe)
            result.seconds += time.monotonic() - started
            result.records += run.figures.input_rows
            log(
                f"  {pipeline}/{engine}: run {i + 1}: {run.figures.input_rows} records in {run.batches} micro-batches, "
                f"{time.monotonic() - started:.1f} s"
            )
        result.heap_bytes = sum(p.getPeakUsage().getUsed() for p in pools)
        result.verdict = verify(spark, compiled, bootstrap, lakehouse)
        result.delta_rows = result.verdict.rows_in_delta
    except Exception as e:  # noqa: BLE001 - a case reports, the table summarises
        result.error = f"{type(e).__name__}: {str(e)[:500]}"
        log(f"  {pipeline}/{engine}: {result.error}")
    finally:
        result.rss_bytes = peaks.stop()
        spark.conf.set(ENGINE_CONF, before)
    return result


def _mb(n: int) -> str:
    return f"{n / 2**20:,.0f} MB"


def report(results: list[BoundsResult]) -> str:
    """The table ``make bounds`` prints, one line per case; a capped case's time extrapolated to its target."""
    header = (
        "pipeline",
        "engine",
        "key rows",
        "records",
        "rows in Delta",
        "wall s",
        "records/s",
        "state rows",
        "state memory",
        "state SST",
        "peak heap",
        "peak RSS",
        "result",
    )
    lines = [header]
    for r in results:
        seconds = f"{r.seconds:,.1f}"
        if r.target != r.rows:
            seconds += f" (x{r.target / r.rows:g}: ~{r.seconds * r.target / r.rows:,.0f} for {r.target:,})"
        lines.append(
            (
                r.pipeline,
                r.engine,
                f"{r.rows:,}",
                f"{r.records:,}",
                f"{r.delta_rows:,}",
                seconds,
                f"{r.records_per_second:,.0f}",
                f"{r.state_rows:,}",
                _mb(r.state_bytes),
                _mb(r.sst_bytes),
                _mb(r.heap_bytes),
                _mb(r.rss_bytes),
                "ok" if r.ok else f"FAIL {r.error or r.verdict}",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.reliability.bounds``: run the cases, print the table; 1 when any case is not ok."""
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.bounds", description=__doc__.splitlines()[0])
    parser.add_argument("--join-rows", type=int, default=100_000, help="line items of the big order")
    parser.add_argument("--over-rows", type=int, default=1_000_000, help="shipments of the big OVER partition")
    parser.add_argument(
        "--python-over-cap",
        type=int,
        default=None,
        help="run the python engine's OVER case with this many rows and extrapolate its time",
    )
    parser.add_argument("--pipelines", default=",".join(PIPELINES))
    parser.add_argument("--engines", default="jvm,python")
    parser.add_argument("--scale-factor", type=float, default=0.001, help="the ordinary TPC-H input beside the big key")
    parser.add_argument("--driver-memory", default="2g")
    options = parser.parse_args(argv)

    from streamjoin.config import local_dir
    from streamjoin.connectors.embedded_kafka import EmbeddedKafka
    from streamjoin.datagen.tpch import TpchChangelog, generate_tpch
    from streamjoin.session import spark_session

    spark = spark_session("streamjoin-bounds", conf={"spark.driver.memory": options.driver_memory})
    changelog = TpchChangelog(generate_tpch(local_dir("tpch"), options.scale_factor))
    results = []
    with tempfile.TemporaryDirectory(prefix="bounds-") as tmp, EmbeddedKafka(Path(tmp) / "kafka") as broker:
        for pipeline in options.pipelines.split(","):
            for engine in options.engines.split(","):
                target = options.join_rows if pipeline == "lineitem_with_order" else options.over_rows
                rows = (
                    min(target, options.python_over_cap or target)
                    if (engine, pipeline) == ("python", "part_price_over")
                    else target
                )
                print(f"{pipeline}/{engine}: {rows:,} rows in one key", flush=True)
                result = run_case(
                    spark,
                    pipeline,
                    engine,
                    rows,
                    broker.bootstrap_servers,
                    Path(tmp),
                    changelog,
                    target=target,
                    log=lambda line: print(line, flush=True),
                )
                results.append(result)
                print(f"  {'ok' if result.ok else 'FAIL'}: {result.verdict}", flush=True)
    print(report(results))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
