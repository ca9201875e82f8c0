"""Kill/restart trials: ``kill -9`` a running SQL pipeline at chosen moments, restart it, check nothing is lost or
doubled.

One trial, per operator engine, of one pipeline of ``sql/`` or of several at once (``--together``):

1. a fresh real broker (:class:`~streamjoin.connectors.embedded_kafka.EmbeddedKafka` on a temporary
   folder), the demo topics (1 partition each: a topic's records then become visible in the order they
   were produced, so no row is late only because of how the producer's batches landed in partitions),
   and the lookup tables (``customer_currencies``, ``part``) in a fresh lakehouse;
2. a producer thread writing the TPC-H changelogs (the records of :mod:`streamjoin.datagen.topics`, with
   its encoders) in ``chunks`` slices with pauses, every topic advancing together; it waits while the
   pipelines are down, so that there are micro-batches to kill;
3. the pipelines as one separate process, ``python -m streamjoin.cli run sql/<a>.sql sql/<b>.sql ...``
   (continuous; every pipeline's queries in one Spark application, as a user runs them together),
   killed with SIGKILL (its whole process group: the Python driver and Spark's JVM) ``kills`` times,
   and restarted from the checkpoints each time. Each kill aims at a moment of one pipeline (the
   *target*, in turn); the others are killed wherever they are, which is recorded too;
4. once the producer is done, a last kill as soon as the live run has read every record (or after
   120 s, and then ``run --available-now`` catches up), and :func:`tests.reliability.verify.verify`
   per pipeline (the table equals the batch query over the final inputs; the changelog holds each batch once).

How each moment is hit: no hooks in the engine; a watcher polls the file system every few ms
(:class:`CheckpointView`, one per pipeline). With ``N`` the newest ``<checkpoint>/offsets/N`` (Spark
writes it before running batch ``N``), a micro-batch of the target goes through

- ``micro_batch``: ``offsets/N`` exists, no state store has version ``N+1`` yet; the watcher kills a
  random 0–300 ms after it sees the batch start;
- ``state_commit``: a state store partition folder (``state/<operator>/<partition>/``) has gained its
  ``N+1.changelog``/``.zip`` (RocksDB commits batch ``N`` as version ``N+1``) before the sink's Delta
  table has batch ``N``: the state stores are committing or committed, the sink not written;
- ``after_delta_commit``: the sink table's ``_delta_log/`` has gained the version whose ``txn`` is
  batch ``N`` (``txnVersion``, :mod:`streamjoin.sink.delta`) and ``commits/N`` does not exist: a
  restart replays batch ``N`` and the sink must skip both its writes (the window where a replay could double them);

then ``commits/N``. The moment a kill actually hit is read from each pipeline's files after the process
is dead (:meth:`CheckpointView.moment`) and logged beside the one aimed at; an aimed moment the watcher
did not see within the producer's input is logged as missed (and nothing is killed).

Run ``python -m tests.reliability.chaos --trials N`` (``make chaos TRIALS=N``): a table per pipeline
and engine, exit status 1 on any loss, duplicate or failed restart. ``--together`` runs the five
pipelines in one process per trial: every kill then kills and restarts all five, at about a quarter of
the cost of five processes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from streamjoin.config import PROJECT_ROOT

__all__ = ["MOMENTS", "PIPELINES", "CheckpointView", "TrialResult", "main", "run_trial", "trial_aims"]

#: The moments a kill aims at (module docstring).
MOMENTS = ("micro_batch", "state_commit", "after_delta_commit")

#: The stateful TPC-H pipelines of ``sql/``: regular join, temporal join, interval join, dedup + group
#: aggregate, OVER.
PIPELINES = ("lineitem_with_order", "orders_in_eur", "orders_shipped_fast", "orders_by_status", "part_price_over")

_POLL_S = 0.003
_DELTA_VERSION = re.compile(r"^(\d{20})\.json$")
_STATE_VERSION = re.compile(r"^(\d+)\.(changelog|zip)$")
_TXN = re.compile(r'"txn":\{[^}]*"version":(\d+)')


class CheckpointView:
    """Read-only view of a pipeline's main checkpoint and sink table folders (local paths).

    Args:
        checkpoint: ``<lakehouse>/_checkpoints/<name>/main``.
        table: ``<lakehouse>/<name>``, the sink's upsert table.
    """

    def __init__(self, checkpoint: Path, table: Path) -> None:
        self.checkpoint = checkpoint
        self.table = table
        self._delta_version = -1
        self._delta_batch = -1

    def latest_batch(self) -> int | None:
        """The newest batch id in ``offsets/`` (started, maybe not finished), or None before the first."""
        ids = [int(n) for n in _names(self.checkpoint / "offsets") if n.isdigit()]
        return max(ids) if ids else None

    def batch_offsets(self, batch: int) -> dict[str, int]:
        """Topic → the sum over its partitions of the end offsets micro-batch ``batch`` reads up to
        (``offsets/<batch>``);
        where the query reads a topic in more than one source (``part_price_over`` reads ``shipments`` twice), the
        least of its sources' sums: the batch has read the topic up to there in every source."""
        try:
            lines = (self.checkpoint / "offsets" / str(batch)).read_text().splitlines()[2:]
        except FileNotFoundError:
            return {}
        ends: dict[str, int] = {}
        for line in lines:
            for topic, partitions in (json.loads(line) if line.startswith("{") else {}).items():
                ends[topic] = min(ends.get(topic, sys.maxsize), sum(partitions.values()))
        return ends

    def committed(self, batch: int) -> bool:
        """Whether ``commits/<batch>`` exists (Spark's end of the batch)."""
        return (self.checkpoint / "commits" / str(batch)).exists()

    def delta_batch(self) -> int:
        """The highest ``txnVersion`` (batch id) committed to the sink table's Delta log, -1 when none."""
        log = self.table / "_delta_log"
        while (log / f"{self._delta_version + 1:020d}.json").exists():
            self._delta_version += 1
            text = (log / f"{self._delta_version:020d}.json").read_text()
            for match in _TXN.finditer(text):
                self._delta_batch = max(self._delta_batch, int(match.group(1)))
        return self._delta_batch

    def state_partitions(self) -> list[Path]:
        """Every ``state/<operator>/<partition>/`` folder."""
        state = self.checkpoint / "state"
        return [p for op in _dirs(state) for p in _dirs(op) if p.name.isdigit()]

    def state_committed(self, batch: int, partitions: list[Path]) -> int:
        """How many of ``partitions`` hold state version ``batch + 1``."""
        version = str(batch + 1)
        return sum(any((p / f"{version}.{suffix}").exists() for suffix in ("changelog", "zip")) for p in partitions)

    def moment(self) -> str:
        """Where the newest batch stands: ``starting`` (none yet), ``between_batches``, or a :data:`MOMENTS` name."""
        batch = self.latest_batch()
        if batch is None:
            return "starting"
        if self.committed(batch):
            return "between_batches"
        if self.delta_batch() >= batch:
            return "after_delta_commit"
        if self.state_committed(batch, self.state_partitions()):
            return "state_commit"
        return "micro_batch"


def _names(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except FileNotFoundError:
        return []


def _dirs(folder: Path) -> list[Path]:
    return [folder / n for n in _names(folder) if (folder / n).is_dir()]


class Producer(threading.Thread):
    """Writes every demo topic's records in ``chunks`` slices, each once the pipelines have caught up with the last.

    The records are :mod:`streamjoin.datagen.topics`' (its Debezium and JSON encoders), each topic's in
    its own order; slice ``i`` of every topic is written before slice ``i + 1`` of any. After a slice it
    waits until, in each of ``views``, a batch started later has committed, then ``pause_s``: each slice
    gives a live run at least one micro-batch to be killed in, and a killed run stops the input until it is back.
    The first wait (the run's start and first micro-batch) gives up after 600 s, a later one after 600 s or
    three times the first, whichever is longer: a restart costs what the first start cost, which grows with
    the pipelines in the process and the load of the machine.
    """

    def __init__(self, bootstrap: str, changelog, views: Sequence[CheckpointView], chunks: int, pause_s: float) -> None:
        super().__init__(daemon=True, name="chaos-producer")
        self.bootstrap = bootstrap
        self.changelog = changelog
        self.views = list(views)
        self.chunks = chunks
        self.pause_s = pause_s
        self.written = 0
        self.error: BaseException | None = None
        #: Held while a slice is written: a broker fault waits for it, so no slice is half-written.
        self.lock = threading.Lock()

    def records(self) -> dict[str, list[tuple]]:
        """Topic → its records, as ``load_topics`` writes them (:func:`~streamjoin.datagen.topics.topic_records`)."""
        from streamjoin.datagen.topics import topic_records

        return {topic: list(records) for topic, records in topic_records(self.changelog).items()}

    def run(self) -> None:
        from streamjoin.connectors.kafka_admin import produce

        try:
            topics = self.records()
            timeout_s = None
            for i in range(self.chunks):
                before = [view.latest_batch() for view in self.views]
                started = time.monotonic()
                with self.lock:
                    for topic, records in topics.items():
                        part = records[len(records) * i // self.chunks : len(records) * (i + 1) // self.chunks]
                        if part:
                            self.written += produce(self.bootstrap, topic, part)
                for view, batch in zip(self.views, before):
                    _wait_for_batch_after(view, -1 if batch is None else batch, timeout_s or _FIRST_WAIT_S)
                timeout_s = timeout_s or max(_FIRST_WAIT_S, 3 * (time.monotonic() - started))
                time.sleep(self.pause_s)
        except BaseException as e:  # noqa: BLE001 - reported by the trial
            self.error = e


#: The longest the producer waits for the pipelines' first micro-batch (s); later waits scale with it.
_FIRST_WAIT_S = 600.0


def _wait_for_batch_after(view: CheckpointView, batch: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        latest = view.latest_batch()
        if latest is not None and latest > batch and view.committed(latest):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{view.checkpoint}: no micro-batch after batch {batch} committed within {timeout_s:.0f} s"
            )
        time.sleep(0.05)


@dataclass
class TrialResult:
    """One trial's outcome.

    The pipelines of one trial share its process, so they share its kills, restarts, broker faults,
    error and duration; the verdict and the moments hit are the pipeline's own.

    Attributes:
        kills: (aimed moment, moment hit) per kill of the trial's process; the aim is ``-`` when the kill
            aimed at another pipeline, the hit ``missed`` when the aimed moment did not come (no kill then).
        restart_failures: the error line of each run that exited by itself (other than at a broker fault).
        broker_faults: per broker restart, ``survived`` or ``exited: <error line>``.
        verdict: the end check, None when the trial could not get that far.
        seconds: wall-clock duration.
    """

    pipeline: str
    engine: str
    seed: int
    kills: list[tuple[str, str]] = field(default_factory=list)
    restart_failures: list[str] = field(default_factory=list)
    broker_faults: list[str] = field(default_factory=list)
    verdict: object = None
    error: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return (
            not self.restart_failures
            and not self.error
            and "stalled" not in self.broker_faults
            and self.verdict is not None
            and self.verdict.ok
        )


class _Run:
    """The pipeline as a child process in its own process group, its output in ``log``."""

    def __init__(self, args: list[str], log: Path) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")]),
            "SPARK_DRIVER_MEMORY": os.environ.get("CHAOS_DRIVER_MEMORY", "2g"),
        }
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "streamjoin.cli", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=PROJECT_ROOT,
                start_new_session=True,
            )

    def kill(self) -> None:
        """SIGKILL to the driver and everything it started (Spark's JVM, Python workers)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()

    def error_details(self, limit: int = 20) -> list[str]:
        """Spark's ERROR log lines and their causes, the first ``limit``: what the one error line leaves out."""
        lines = self.log.read_text(errors="replace").splitlines()
        return [line[:300] for line in lines if " ERROR " in line or line.startswith("Caused by:")][:limit]

    def error_line(self) -> str:
        lines = self.log.read_text(errors="replace").splitlines()
        errors = [line for line in lines if line.startswith("streamjoin: error:")]
        line = (errors or lines[-1:] or [""])[-1]
        # The CLI's line ends with what was raised (streamjoin.cli.unexpected_error_summary): keep the end.
        return line if len(line) <= 400 else f"{line[:150]} … {line[-250:]}"


def _watch(view: CheckpointView, run: _Run, aim: str, rng: random.Random, producer: Producer, timeout_s: float) -> str:
    """Wait until ``aim`` comes (module docstring) and kill ``run`` then; ``missed`` when it did not come in time
    or the producer is done and the pipeline idle; ``exited`` when the run ended by itself."""
    deadline = time.monotonic() + timeout_s
    partitions: list[Path] = []
    seen_start = None
    while time.monotonic() < deadline:
        if run.process.poll() is not None:
            return "exited"
        batch = view.latest_batch()
        if batch is not None and not view.committed(batch):
            if aim == "micro_batch":
                seen_start = (
                    seen_start
                    if seen_start and seen_start[0] == batch
                    else (batch, time.monotonic() + rng.uniform(0, 0.3))
                )
                if time.monotonic() >= seen_start[1]:
                    run.kill()
                    return view.moment()
            elif aim == "after_delta_commit" and view.delta_batch() >= batch:
                run.kill()
                return view.moment()
            elif aim == "state_commit":
                partitions = partitions or view.state_partitions()
                if view.state_committed(batch, partitions) and view.delta_batch() < batch:
                    run.kill()
                    return view.moment()
        elif not producer.is_alive() and (batch is None or view.committed(batch)):
            deadline = min(deadline, time.monotonic() + 5)  # no more input: a few s for a last no-data batch
        time.sleep(_POLL_S)
    return "missed"


def _caught_up(
    views: Sequence[CheckpointView], run: _Run, bootstrap: str, timeout_s: float, quiet_s: float = 5.0
) -> bool:
    """Once the producer is done: wait until, in every view, ``run``'s latest batch has read every record of the
    pipeline's topics, is committed and stays the latest for ``quiet_s`` (time for the no-data batch a moved
    watermark asks for); False if ``run`` exited or ``timeout_s`` ran out."""
    from streamjoin.connectors.kafka_admin import topic_offsets

    ends: dict[str, int] = {}  # the topics no longer grow: their end offsets are read once
    deadline = time.monotonic() + timeout_s
    # Per view: (batch, since when it is the latest, committed, with every record).
    settled: list[tuple[int, float] | None] = [None] * len(views)
    while time.monotonic() < deadline and run.process.poll() is None:
        for i, view in enumerate(views):
            batch = view.latest_batch()
            if settled[i] and settled[i][0] == batch:
                continue
            settled[i] = None
            if batch is not None and view.committed(batch):
                read = view.batch_offsets(batch)
                for topic in read.keys() - ends.keys():
                    ends[topic] = sum(high for _, high in topic_offsets(bootstrap, topic).values())
                if read and read == {t: ends[t] for t in read}:
                    settled[i] = (batch, time.monotonic())
        if all(settled) and all(time.monotonic() - since >= quiet_s for _, since in settled):
            return True
        time.sleep(0.2)
    return False


def _resumed(views: Sequence[CheckpointView], run: _Run, timeout_s: float) -> bool:
    """Wait until the restarted run has finished, in every view, the batch it resumes from (or its first);
    False if it exited."""
    pending = [view.latest_batch() for view in views]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if run.process.poll() is not None:
            return False
        batches = [view.latest_batch() for view in views]
        if all(
            b is not None and view.committed(p if p is not None else b) for view, p, b in zip(views, pending, batches)
        ):
            return True
        time.sleep(0.05)
    return run.process.poll() is None


def _restart_broker(broker, producer: Producer, down_s: float):
    """Stop ``broker`` between two slices of ``producer``, wait ``down_s``, start a broker on its data folder and
    port."""
    from streamjoin.connectors.embedded_kafka import EmbeddedKafka

    port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
    with producer.lock:
        broker.stop()
        time.sleep(down_s)
        restarted = EmbeddedKafka(broker.data_dir, port=port)
        restarted.start()
    return restarted


def _after_broker_fault(views: Sequence[CheckpointView], run: _Run, timeout_s: float = 180.0) -> str:
    """``survived`` once, in every view, a batch started after the fault commits in the same run;
    ``exited: <error>`` if the run ended; ``stalled`` if neither came within ``timeout_s``."""
    before = [view.latest_batch() for view in views]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if run.process.poll() is not None:
            return f"exited: {run.error_line()}"
        latest = [view.latest_batch() for view in views]
        if all(
            b is not None and b > (-1 if a is None else a) and view.committed(b)
            for view, a, b in zip(views, before, latest)
        ):
            return "survived"
        time.sleep(0.05)
    return "stalled"


def trial_aims(pipelines: Sequence[str], kills: int, rng: random.Random) -> list[tuple[str, str]]:
    """``kills`` (target pipeline, moment) pairs: the targets in turn from a random one, the first
    ``len(MOMENTS)`` moments each once (shuffled), the others at random."""
    moments = rng.sample(MOMENTS, len(MOMENTS))[:kills] + [rng.choice(MOMENTS) for _ in range(kills - len(MOMENTS))]
    first = rng.randrange(len(pipelines))
    return [(pipelines[(first + i) % len(pipelines)], moment) for i, moment in enumerate(moments)]


def run_trial(
    spark,
    pipelines: Sequence[str],
    engine: str,
    *,
    seed: int,
    kills: int = 3,
    scale_factor: float = 0.001,
    days: int | None = None,
    broker_faults: int = 0,
    chunks: int = 8,
    pause_s: float = 0.5,
    work: Path | None = None,
    aims: Sequence[tuple[str, str]] | None = None,
    log=print,
) -> list[TrialResult]:
    """Run one kill/restart trial of ``pipelines``, all in one process (module docstring), and check each.

    Args:
        spark: the checking session (writes the lookup tables, runs the batch queries); the pipelines run
            in their own processes.
        pipelines: names of :data:`PIPELINES` (``sql/<pipeline>.sql``).
        engine: ``jvm`` or ``python``.
        seed: seeds the targets, the moments aimed at and the delays.
        kills: kills while the producer writes (:func:`trial_aims`).
        scale_factor: TPC-H scale factor of the input (0.001: 1,500 orders, 6,000 line items).
        days: the orders placed over this many days (``TpchChangelog(days=...)``); ``None``: TPC-H's seven years.
        broker_faults: times the broker is stopped (controlled shutdown) and started again on the same data
            folder and port between two slices of the producer, at points the RNG picks among the kills;
            the run must survive or exit with a clear error and resume from its checkpoints on restart.
        chunks, pause_s: the producer's slices (at least two per kill or broker fault, plus two) and the pause after
        each (s).
        work: folder for the broker, lakehouse and run logs; a temporary one (deleted after) when None.
        aims: the (target pipeline, :data:`MOMENTS` name) of each kill, in order, instead of :func:`trial_aims`.

    Returns:
        A :class:`TrialResult` per pipeline, in the order of ``pipelines``.
    """
    from checks.batch_inputs import BatchInputs
    from streamjoin.config import local_dir
    from streamjoin.connectors.embedded_kafka import EmbeddedKafka
    from streamjoin.connectors.kafka_admin import ensure_topics
    from streamjoin.datagen.topics import TOPICS
    from streamjoin.datagen.tpch import TpchChangelog, generate_tpch
    from streamjoin.pipeline import Lakehouse
    from streamjoin.planner import load_script, sql_pipelines
    from tests.reliability.verify import verify

    started = time.monotonic()
    rng = random.Random(seed)
    steps: list[tuple[str, str] | None] = list(aims if aims is not None else trial_aims(pipelines, kills, rng))
    for _ in range(broker_faults):
        steps.insert(rng.randint(0, len(steps)), None)  # a broker stop and restart
    results = {name: TrialResult(name, engine, seed) for name in pipelines}
    shared = TrialResult(",".join(pipelines), engine, seed)  # what the pipelines share: restarts, faults, error
    changelog = TpchChangelog(generate_tpch(local_dir("tpch"), scale_factor), days=days)
    sql = [PROJECT_ROOT / "sql" / f"{name}.sql" for name in pipelines]
    compiled = {pipeline.name: pipeline for path in sql for pipeline in sql_pipelines(load_script(path))}
    with tempfile.TemporaryDirectory(prefix=f"chaos-{engine}-", dir=work) as tmp:
        root = Path(tmp)
        lake = root / "lake"
        inputs = BatchInputs(spark, changelog)
        inputs.write_lookup_tables(str(lake))
        views = {name: CheckpointView(lake / "_checkpoints" / name / "main", lake / name) for name in pipelines}
        broker = EmbeddedKafka(root / "kafka")
        bootstrap = broker.start()
        ensure_topics(bootstrap, {t.topic: 1 for t in TOPICS})
        args = ["run", *map(str, sql), "--bootstrap-servers", bootstrap, "--lakehouse", str(lake), "--engine", engine]
        producer = Producer(bootstrap, changelog, list(views.values()), max(chunks, 2 * len(steps) + 2), pause_s)
        runs = 0
        caught_up = False

        def start(extra=()) -> _Run:
            nonlocal runs
            runs += 1
            return _Run([*args, *extra], root / f"run-{runs}.log")

        run = start()
        producer.start()
        try:
            for step in [*steps, "final"]:
                while not _resumed(list(views.values()), run, timeout_s=180):
                    shared.restart_failures.append(f"run {runs}: {run.error_line()}")
                    log(f"  {engine}: run {runs} exited (status {run.process.returncode}): {run.error_line()}")
                    for line in run.error_details():
                        log(f"    {line}")
                    if len(shared.restart_failures) > 3:
                        raise RuntimeError("the pipelines do not restart")
                    run = start()
                if step == "final":
                    producer.join(timeout=600)
                    # The live run reads the last records; a catch-up run (`--available-now`) only when it does not.
                    caught_up = _caught_up(list(views.values()), run, bootstrap, timeout_s=120)
                    run.kill()
                    log(f"  {engine}: the live run {'read every record' if caught_up else 'did not catch up'}")
                    break
                if step is None:
                    broker = _restart_broker(broker, producer, rng.uniform(1.0, 5.0))
                    outcome = _after_broker_fault(list(views.values()), run)
                    shared.broker_faults.append(outcome)
                    log(f"  {engine}: broker stopped and restarted; the run {outcome}")
                    if run.process.poll() is not None:
                        run = start()
                    continue
                target, aim = step
                hit = _watch(views[target], run, aim, rng, producer, timeout_s=120)
                if hit == "exited":
                    continue  # counted as a failed restart by _resumed on the next round
                if hit == "missed":
                    results[target].kills.append((aim, hit))
                    log(f"  {engine}: kill aimed at {target}/{aim}: missed")
                    continue
                hits = {name: hit if name == target else view.moment() for name, view in views.items()}
                for name, moment in hits.items():
                    results[name].kills.append((aim if name == target else "-", moment))
                log(f"  {engine}: kill aimed at {target}/{aim}; hit " + ", ".join(f"{n} {m}" for n, m in hits.items()))
                run = start()
            if producer.error:
                raise producer.error
            if not caught_up:
                final = start(["--available-now"])
                if final.process.wait(timeout=900) != 0:
                    shared.restart_failures.append(f"catch-up run: {final.error_line()}")
                    log(f"  {engine}: the catch-up run failed: {final.error_line()}")
                    final = start(["--available-now"])
                    if final.process.wait(timeout=900) != 0:
                        raise RuntimeError(f"the catch-up run fails twice: {final.error_line()}")
            for name in pipelines:
                results[name].verdict = verify(spark, compiled[name], bootstrap, Lakehouse(str(lake)))
        except Exception as e:  # noqa: BLE001 - a trial reports, the table summarises
            shared.error = f"{type(e).__name__}: {e}"
            log(f"  {engine}: {shared.error}")
        finally:
            run.kill()
            broker.stop()
    for result in results.values():
        result.restart_failures, result.broker_faults, result.error = (
            shared.restart_failures,
            shared.broker_faults,
            shared.error,
        )
        result.seconds = time.monotonic() - started
    return list(results.values())


def report(results: list[TrialResult]) -> str:
    """The table ``make chaos`` prints: per pipeline and engine, trials, kills by moment hit, rows, duplicates,
    missing."""
    groups: dict[tuple[str, str], list[TrialResult]] = {}
    for r in results:
        groups.setdefault((r.pipeline, r.engine), []).append(r)
    header = (
        "pipeline",
        "engine",
        "trials",
        "kills (moment hit)",
        "rows expected",
        "rows in Delta",
        "duplicates",
        "missing",
        "changelog",
        "failed restarts",
        "broker restarts",
        "s/trial",
        "result",
    )
    rows = [header]
    for (pipeline, engine), group in groups.items():
        hits = Counter(hit for r in group for _, hit in r.kills)
        verdicts = [r.verdict for r in group if r.verdict is not None]
        changelog_defects = sum(len(v.batches_twice) + len(v.offsets_back) + v.changelog_vs_table for v in verdicts)
        rows.append(
            (
                pipeline,
                engine,
                str(len(group)),
                " ".join(f"{m}={hits[m]}" for m in sorted(hits)) or "-",
                str(sum(v.rows_expected for v in verdicts)),
                str(sum(v.rows_in_delta for v in verdicts)),
                str(sum(v.duplicates for v in verdicts)),
                str(sum(v.missing for v in verdicts)),
                "ok" if not changelog_defects else f"{changelog_defects} defects",
                str(sum(len(r.restart_failures) for r in group)),
                " ".join(
                    f"{k}={v}"
                    for k, v in sorted(Counter(f.split(":")[0] for r in group for f in r.broker_faults).items())
                )
                or "-",
                f"{sum(r.seconds for r in group) / len(group):.0f}",
                "ok" if all(r.ok for r in group) else "FAIL",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows)


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.reliability.chaos``: run the trials, print the table; 1 when any trial is not ok."""
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10, help="trials per pipeline and engine")
    parser.add_argument("--pipelines", default=",".join(PIPELINES), help="comma-separated names of sql/ pipelines")
    parser.add_argument(
        "--together",
        action="store_true",
        help="run the pipelines in one process per trial (one `streamjoin run` of every file), "
        "each kill aimed at one of them in turn; default: a process and trials per pipeline",
    )
    parser.add_argument("--engines", default="jvm,python")
    parser.add_argument("--kills", type=int, default=3, help="kills per trial while the producer writes")
    parser.add_argument("--broker-faults", type=int, default=0, help="broker stops and restarts per trial")
    parser.add_argument("--chunks", type=int, default=8, help="producer slices per trial (at least 2 per kill + 2)")
    parser.add_argument("--scale-factor", type=float, default=0.001)
    parser.add_argument(
        "--days", type=int, default=None, help="place the orders over this many days (default: TPC-H's seven years)"
    )
    parser.add_argument("--seed", type=int, default=17, help="trial i of a pipeline and engine uses seed + i")
    options = parser.parse_args(argv)
    # A SIGTERM (timeout, CI) unwinds through run_trial's cleanup: the pipeline runs in their own sessions.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    from streamjoin.session import spark_session

    spark = spark_session("streamjoin-chaos", conf={"spark.driver.memory": "1g"})
    pipelines = options.pipelines.split(",")
    groups = [pipelines] if options.together else [[name] for name in pipelines]
    results = []
    for group in groups:
        for engine in options.engines.split(","):
            for i in range(options.trials):
                print(
                    f"{', '.join(group)}/{engine}: trial {i + 1}/{options.trials} (seed {options.seed + i})", flush=True
                )
                trial = run_trial(
                    spark,
                    group,
                    engine,
                    seed=options.seed + i,
                    kills=options.kills,
                    broker_faults=options.broker_faults,
                    chunks=options.chunks,
                    scale_factor=options.scale_factor,
                    days=options.days,
                    log=lambda line: print(line, flush=True),
                )
                results += trial
                for result in trial:
                    outcome = "ok" if result.ok else "FAIL"
                    print(f"  {result.pipeline}: {outcome} in {result.seconds:.0f} s: {result.verdict}", flush=True)
    print(report(results))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
