"""``make sustained``: the stateful ``sql/`` pipelines under a fixed input rate for MINUTES minutes.

    .venv/bin/python -m bench.sustained --minutes 30            # calibrate, then 75 % of the measured capacity
    .venv/bin/python -m bench.sustained --minutes 30 --rate 300  # a given rate (records/s, all topics)

What runs, in one process on a fresh embedded broker and lakehouse (``--workdir``):

- a producer thread writing the TPC-H changelogs pass after pass, new keys and later times each pass
  (:mod:`bench.sustained_feed`);
- the five stateful pipelines of ``sql/`` (:data:`PIPELINES`: regular join, temporal join, interval join,
  dedup + group aggregate, OVER), each a continuous run (:func:`streamjoin.pipeline.run_pipeline` without
  ``available_now``, as ``streamjoin run`` does) on its own thread, all in one Spark session: ten streaming
  queries (each pipeline's main and dead-letter query) sharing the driver's cores.

Phases: ``warmup`` writes ``--warmup-records`` at once and waits until every pipeline has committed them
(the first micro-batches plan and compile). Without ``--rate``, ``calibrate`` then waits until no query runs
a trigger (the no-data micro-batches that move the watermarks on after the warm-up's data), writes
``--calibrate-records`` at once and times how long the five pipelines take to commit them all: the
capacity (records/s, all topics) when each pipeline reads large micro-batches back to back; the rate is
``--fraction`` of it. ``sustained`` writes at that rate for ``--minutes``.

Every minute, per pipeline (:mod:`bench.sustained_report`): micro-batches, batch duration p50 and max,
input rows/s, state rows, memory and SST bytes (the progress' ``stateOperators`` after the minute's last batch) and
the Kafka lag (end offsets minus the offsets of the checkpoint's last committed batch,
:func:`streamjoin.connectors.kafka_lag.kafka_lag`). The samples go to ``<out>/sustained.csv`` and
``<out>/sustained.png`` (``--stem``), the sustained phase's table to ``--record`` (``bench/RESULTS.md``).

None of the ``sql/`` pipelines sets a state TTL (``SET 'table.exec.state.ttl'``): the regular join
(``lineitem_with_order``) keeps every order and line item, the dedup and ``COUNT(DISTINCT)`` of
``orders_by_status`` every order key, so their state grows by design, as in Flink without a TTL.
``--state-ttl '5 min'`` runs a copy of ``sql/`` with that ``SET`` before each ``INSERT``, as a user
bounds them: keys idle longer than the TTL are forgotten (earlier passes' keys do not come back).
The watermarked operators (interval and temporal join, OVER) free state as event time advances.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from assets.sql_pipelines import SQL_DIR, load_sql_pipelines
from bench.harness import load, machine
from bench.pipelines import write_dimensions
from bench.sustained_feed import Feed, PacedProducer
from bench.sustained_report import BatchStat, Sample, plot, results_table, summarize, total_lag, write_csv
from streamjoin.config import PROJECT_ROOT, local_dir
from streamjoin.connectors.embedded_kafka import EmbeddedKafka
from streamjoin.connectors.kafka_lag import end_offsets, kafka_lag
from streamjoin.datagen.topics import TOPICS, create_topics
from streamjoin.datagen.tpch import TpchChangelog, generate_tpch
from streamjoin.pipeline import Lakehouse, Pipeline, run_pipeline
from streamjoin.planner.script import parse_duration_ms
from streamjoin.progress import batch_figures

__all__ = ["PIPELINES", "main"]

#: The stateful pipelines of ``sql/`` (``orders_current`` only projects).
PIPELINES = ("lineitem_with_order", "orders_in_eur", "orders_shipped_fast", "orders_by_status", "part_price_over")

_SAMPLE_S = 60.0
_POLL_S = 5.0


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the sustained phase (default 30)")
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="records/s over all topics; default: --fraction of the calibrated capacity",
    )
    parser.add_argument("--fraction", type=float, default=0.75, help="share of the capacity to run at (default 0.75)")
    parser.add_argument("--warmup-records", type=int, default=5_000)
    parser.add_argument("--calibrate-records", type=int, default=40_000)
    parser.add_argument(
        "--scale-factor", type=float, default=0.01, help="TPC-H scale factor of one pass (default 0.01)"
    )
    parser.add_argument("--engine", choices=["jvm", "python"], default="jvm")
    parser.add_argument(
        "--state-ttl",
        default=None,
        help="'table.exec.state.ttl' for every pipeline, e.g. '5 min' (default: the pipelines as in sql/, no TTL)",
    )
    parser.add_argument(
        "--workdir", type=Path, default=None, help="broker and lakehouse folder (default .local/sustained)"
    )
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "bench", help="folder of the CSV and PNG")
    parser.add_argument("--stem", default="sustained", help="their file name without suffix (default sustained)")
    parser.add_argument(
        "--record",
        type=Path,
        default=PROJECT_ROOT / "bench" / "RESULTS.md",
        help="markdown file the sustained table is appended to",
    )
    return parser.parse_args(argv)


class _PipelineThread(threading.Thread):
    """One pipeline's continuous run (:func:`run_pipeline`), its micro-batches kept as :class:`BatchStat`."""

    def __init__(self, pipeline: Pipeline, spark, lake: Lakehouse, bootstrap: str) -> None:
        super().__init__(daemon=True, name=f"sustained-{pipeline.name}")
        self.pipeline, self._spark, self._lake, self._servers = pipeline, spark, lake, bootstrap
        self.checkpoint = lake.checkpoint(pipeline.name, "main")
        self.topics = sorted({s.topic for s in pipeline.sources})
        self.error: BaseException | None = None
        self._batches: list[BatchStat] = []
        self._lock = threading.Lock()

    def run(self) -> None:
        try:
            run_pipeline(
                self.pipeline, self._spark, self._lake, self._servers, available_now=False, on_progress=self._keep
            )
        except BaseException as e:  # noqa: BLE001 - reported by the benchmark
            self.error = e

    def _keep(self, progress) -> None:
        figures = batch_figures(progress)
        sst = sum(int(s.customMetrics.get("rocksdbSstFileSize", 0) or 0) for s in progress.stateOperators)
        with self._lock:
            self._batches.append(
                BatchStat(figures.duration_ms, figures.input_rows, figures.state_rows, figures.state_bytes, sst)
            )

    def take(self) -> list[BatchStat]:
        """The micro-batches ended since the last call, oldest first."""
        with self._lock:
            taken, self._batches = self._batches, []
        return taken


class _Bench:
    """The running benchmark: producer, pipeline threads, the samples so far and the current phase."""

    def __init__(self, spark, producer: PacedProducer, runs: list[_PipelineThread], bootstrap: str) -> None:
        self._spark, self.producer, self.runs, self.bootstrap = spark, producer, runs, bootstrap
        self.samples: list[Sample] = []
        self.phase = "warmup"
        self.start = self._last_sample = time.monotonic()
        self._previous: dict[str, Sample] = {}

    def lags(self) -> dict[str, int]:
        """Pipeline → its Kafka lag (records) now."""
        ends = end_offsets(self.bootstrap, [t.topic for t in TOPICS])
        return {r.pipeline.name: total_lag(kafka_lag(self.bootstrap, r.topics, r.checkpoint, ends)) for r in self.runs}

    def wait(self, done: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Sample every minute until ``done()``.

        Raises:
            RuntimeError: a pipeline or the producer failed.
            TimeoutError: ``done()`` still false after ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while not done():
            for thread in (*self.runs, self.producer):
                if thread.error is not None:
                    raise RuntimeError(f"{thread.name} failed: {thread.error}") from thread.error
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not done within {timeout_s:.0f} s")
            if time.monotonic() - self._last_sample >= _SAMPLE_S:
                self.sample()
            time.sleep(_POLL_S)

    def idle(self) -> bool:
        """No streaming query of the session runs a trigger, now and 2 s later (the no-data micro-batches after
        a burst have ended, not only one trigger and the next)."""
        for check in range(2):
            if any(q.status["isTriggerActive"] for q in self._spark.streams.active):
                return False
            time.sleep(2 * (1 - check))
        return True

    def caught_up(self) -> bool:
        """Every burst written and every pipeline's lag 0."""
        return self.producer.pending == 0 and not any(self.lags().values())

    def sample(self) -> None:
        now = time.monotonic()
        seconds, self._last_sample = now - self._last_sample, now
        lags = self.lags()
        for run in self.runs:
            name = run.pipeline.name
            sample = summarize(
                name,
                run.take(),
                seconds,
                self._previous.get(name),
                minute=round((now - self.start) / 60, 2),
                phase=self.phase,
                lag=lags[name],
                produced=self.producer.sent,
                rate=self.producer.rate,
            )
            self._previous[name] = sample
            self.samples.append(sample)
            print(
                f"[{sample.minute:5.1f} min {self.phase}] {name}: {sample.batches} batches, p50 "
                f"{(sample.batch_ms_p50 or 0) / 1000:.1f} s, {sample.input_rows_per_s:,.0f} rows/s, state "
                f"{sample.state_rows:,} rows {sample.state_bytes / 2**20:.1f} MiB, lag {sample.lag:,}",
                flush=True,
            )


def _sql_with_state_ttl(ttl: str, folder: Path) -> Path:
    """A copy of ``sql/`` in ``folder`` whose files set ``'table.exec.state.ttl' = ttl`` before their first INSERT."""
    shutil.copytree(SQL_DIR, folder)
    for path in folder.glob("*.sql"):
        text = path.read_text()
        at = text.index("INSERT INTO")
        path.write_text(f"{text[:at]}SET 'table.exec.state.ttl' = '{ttl}';\n\n{text[at:]}")
    return folder


def _run(args: argparse.Namespace, spark, bench_out: dict) -> None:
    workdir = args.workdir or local_dir("sustained")
    shutil.rmtree(workdir, ignore_errors=True)
    lake = Lakehouse(str(workdir / "lakehouse"))
    tpch = TpchChangelog(generate_tpch(local_dir("tpch"), args.scale_factor))
    write_dimensions(spark, tpch.data_dir, lake)
    sql = _sql_with_state_ttl(args.state_ttl, workdir / "sql") if args.state_ttl else SQL_DIR
    definitions = {d.pipeline.name: d.pipeline for d in load_sql_pipelines(sql)}
    with EmbeddedKafka(workdir / "kafka") as broker:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap)
        producer = PacedProducer(bootstrap, Feed(tpch).records())
        runs = [_PipelineThread(definitions[name], spark, lake, bootstrap) for name in PIPELINES]
        bench = bench_out["bench"] = _Bench(spark, producer, runs, bootstrap)
        producer.start()
        for run in runs:
            run.start()
        try:
            producer.burst(args.warmup_records)
            bench.wait(bench.caught_up, 1800, "warm-up")
            rate = args.rate
            if rate is None:
                bench.sample()  # the warm-up's last minute apart from the calibration's
                bench.phase = "calibrate"
                bench.wait(bench.idle, 600, "the warm-up's last micro-batches")
                started = time.monotonic()
                producer.burst(args.calibrate_records)
                bench.wait(bench.caught_up, 1800, "calibration")
                seconds = time.monotonic() - started
                bench_out["capacity"] = args.calibrate_records / seconds
                rate = round(args.fraction * bench_out["capacity"])
                print(
                    f"calibration: {args.calibrate_records:,} records in {seconds:.0f} s = "
                    f"{bench_out['capacity']:,.0f} records/s; running at {rate:,} records/s",
                    flush=True,
                )
            bench.sample()
            bench.phase = "sustained"
            bench_out["rate"] = rate
            producer.set_rate(rate)
            end = time.monotonic() + args.minutes * 60
            bench.wait(lambda: time.monotonic() >= end, args.minutes * 60 + 60, "sustained phase")
            bench.sample()
        finally:
            producer.stop()
            for query in spark.streams.active:
                query.stop()
            for run in runs:
                run.join(120)


def _record(args: argparse.Namespace, argv: list[str], out: dict, loads: tuple[str, str], started: str) -> None:
    samples = out["bench"].samples
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(samples, args.out / f"{args.stem}.csv")
    rate = out.get("rate", 0)
    ttl = f", state TTL {args.state_ttl}" if args.state_ttl else ""
    settle = parse_duration_ms(args.state_ttl) / 60_000 if args.state_ttl else 0.0
    title = f"sql/ pipelines under {rate:,} records/s ({args.engine} engine{ttl}, {machine()})"
    plot(samples, args.out / f"{args.stem}.png", title)
    calibration = (
        f"calibrated capacity {out['capacity']:,.0f} records/s ({args.calibrate_records:,} records at once), "
        f"run at {args.fraction:.0%} of it"
        if "capacity" in out
        else "rate given"
    )
    section = "\n".join(
        [
            "",
            f"## Sustained load, {started}",
            "",
            f"Command: `python -m bench.sustained {' '.join(argv)}`".rstrip()
            + f" (`make sustained`); engine {args.engine}; "
            f"TPC-H passes of scale factor {args.scale_factor:g}.",
            f"Machine: {machine()}; load (1/5/15 min) {loads[0]} at start, {loads[1]} at end.",
            f"Rate: {rate:,} records/s over the five topics for {args.minutes:g} min ({calibration}).",
            (
                f"Samples: `{_shown(args.out / args.stem)}.csv`; plot: `{_shown(args.out / args.stem)}.png`. "
                "Figures over the sustained phase, one sample per minute;"
            ),
            "state is `flat` when its fitted growth is under 10 % of its mean, lag `sustained` when its fitted growth "
            "is under one minute of input. "
            + (
                f"Every pipeline with `SET 'table.exec.state.ttl' = '{args.state_ttl}'` (`--state-ttl`): "
                "the regular join's and the dedup/group aggregate's keys idle longer than that are forgotten; "
                f"the state and lag verdicts are fitted from {settle:g} min (one TTL) into the sustained phase, "
                "once the first keys can expire."
                if args.state_ttl
                else (
                    "No sql/ pipeline sets a state TTL: "
                    "the regular join's and the dedup/group aggregate's state grow by design."
                )
            ),
            "",
            results_table(samples, rate, settle),
            "",
        ]
    )
    with args.record.open("a") as results:
        results.write(section)
    print(section)


def _shown(path: Path) -> str:
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (module docstring).

    Returns 1 when a pipeline or the producer failed (the figures so far are still written).
    """
    from streamjoin.jvm import ENGINE_CONF
    from streamjoin.session import spark_session

    argv = sys.argv[1:] if argv is None else argv
    args = _arguments(argv)
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    first_load = load()
    spark = spark_session("streamjoin-sustained")
    spark.conf.set(ENGINE_CONF, args.engine)
    out: dict = {}
    status = 0
    try:
        _run(args, spark, out)
    except (RuntimeError, TimeoutError) as e:
        print(f"benchmark stopped: {e}", file=sys.stderr, flush=True)
        status = 1
    if "bench" in out and out["bench"].samples:
        _record(args, argv, out, (first_load, load()), started)
    return status


if __name__ == "__main__":
    sys.exit(main())
