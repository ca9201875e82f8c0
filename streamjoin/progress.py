"""Figures of a streaming run from Spark's progress events: what a pipeline read, changed and kept, per micro-batch.

:class:`ProgressQueue` is a ``StreamingQueryListener`` (``spark.streams.addListener``): Spark calls
it on its listener-bus thread, it only queues the events, and the caller's thread takes them
(:meth:`ProgressQueue.take`). :func:`batch_figures` turns one ``StreamingQueryProgress`` into a
:class:`Figures` record; records add up (``+``) over a window of batches or a whole run.

Two figures are not in Spark's progress by default; the pipeline adds them with
``DataFrame.observe``, so they arrive in the same progress event's ``observedMetrics``:
changes by RowKind (:func:`observe_changes`, on the changelog the sink writer receives) and
dead letters (:func:`observe_dead_letters`, on the dead-letter query).

:class:`StopOnInterrupt` turns an interrupt (SIGINT, SIGTERM: Ctrl-C, or an orchestrator terminating the
run) into a stop of the session's queries between two micro-batches, so the thread that follows them
sees them end and takes their last progress events, rather than a ``KeyboardInterrupt`` wherever it is.
"""

from __future__ import annotations

import json
import queue
import signal
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Self

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import JStreamingQueryListener, QueryProgressEvent, StreamingQueryProgress

from streamjoin.changelog import ROWKIND_COLUMN, RowKind

__all__ = ["Figures", "ProgressQueue", "StopOnInterrupt", "batch_figures", "observe_changes", "observe_dead_letters"]

CHANGES_METRIC = "streamjoin_changes"
DEAD_LETTERS_METRIC = "streamjoin_dead_letters"
ROWKINDS = tuple(kind.short for kind in RowKind)


def observe_changes(changelog: DataFrame) -> DataFrame:
    """``changelog`` (a ``_rowkind`` column) observed: each batch's count per RowKind in its progress event."""
    return changelog.observe(CHANGES_METRIC, *(F.count_if(F.col(ROWKIND_COLUMN) == k).alias(k) for k in ROWKINDS))


def observe_dead_letters(letters: DataFrame) -> DataFrame:
    """``letters`` observed: each batch's row count in its progress event."""
    return letters.observe(DEAD_LETTERS_METRIC, F.count(F.lit(1)).alias("rows"))


@dataclass(frozen=True)
class Figures:
    """What one or more micro-batches of a pipeline did, from Spark's progress events.

    Counts add up over batches; ``offsets``, ``lag`` and the state figures are the latest batch's.

    Attributes:
        batches: micro-batches of the main query.
        input_rows: Kafka records read (all sources).
        records_read: Kafka records read per topic (a topic scanned twice counts twice).
        duration_ms: the batches' trigger execution time, summed (ms).
        changes: rows of the output changelog per RowKind (``+I``, ``-U``, ``+U``, ``-D``).
        dead_letters: undecodable records written to ``<sink>_dead_letters``.
        offsets: ``"<topic>/<partition>"`` → the offset the next batch starts at.
        lag: ``"<topic>/<partition>"`` → records on the topic beyond ``offsets`` when the batch started.
        state_rows / state_bytes: rows and memory (bytes) held by the stateful operators.
    """

    batches: int = 0
    input_rows: int = 0
    records_read: Mapping[str, int] = field(default_factory=dict)
    duration_ms: int = 0
    changes: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(ROWKINDS, 0))
    dead_letters: int = 0
    offsets: Mapping[str, int] = field(default_factory=dict)
    lag: Mapping[str, int] = field(default_factory=dict)
    state_rows: int = 0
    state_bytes: int = 0

    @property
    def rows_per_second(self) -> float:
        """Input rows per second of batch execution (Spark's ``processedRowsPerSecond`` over the batches)."""
        return self.input_rows * 1000 / self.duration_ms if self.duration_ms else 0.0

    def __add__(self, later: Figures) -> Figures:
        """These batches, then ``later``'s."""
        latest = later if later.batches else self
        return Figures(
            batches=self.batches + later.batches,
            input_rows=self.input_rows + later.input_rows,
            records_read=_add(self.records_read, later.records_read),
            duration_ms=self.duration_ms + later.duration_ms,
            changes=_add(self.changes, later.changes),
            dead_letters=self.dead_letters + later.dead_letters,
            offsets={**self.offsets, **later.offsets},
            lag={**self.lag, **later.lag},
            state_rows=latest.state_rows,
            state_bytes=latest.state_bytes,
        )

    def metadata(self) -> dict[str, int | float]:
        """The figures as flat numeric values (e.g. asset metadata that a UI plots).

        Keys: ``micro_batches``, ``input_rows``, ``rows_per_second``, ``batch_duration_ms`` (mean per
        batch), ``changes[<RowKind>]``, ``dead_letters``, ``offset[<topic>/<partition>]``,
        ``lag[<topic>/<partition>]``, ``lag`` (all partitions), ``state_rows``, ``state_bytes``.
        """
        return {
            "micro_batches": self.batches,
            "input_rows": self.input_rows,
            "rows_per_second": round(self.rows_per_second, 1),
            "batch_duration_ms": round(self.duration_ms / self.batches, 1) if self.batches else 0.0,
            **{f"changes[{kind}]": n for kind, n in self.changes.items()},
            "dead_letters": self.dead_letters,
            **{f"offset[{p}]": n for p, n in sorted(self.offsets.items())},
            **{f"lag[{p}]": n for p, n in sorted(self.lag.items())},
            "lag": sum(self.lag.values()),
            "state_rows": self.state_rows,
            "state_bytes": self.state_bytes,
        }


def _add(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {k: a.get(k, 0) + b.get(k, 0) for k in {**a, **b}}


def _partition_offsets(text: str | None) -> dict[str, int]:
    """Spark's Kafka offset JSON ``{"<topic>": {"<partition>": offset}}`` as ``{"<topic>/<partition>": offset}``."""
    try:
        offsets = json.loads(text) if text else None
    except ValueError:  # a source without offsets ("None" from a Java null)
        return {}
    if not isinstance(offsets, dict):
        return {}
    return {
        f"{topic}/{p}": int(o) for topic, parts in offsets.items() if isinstance(parts, dict) for p, o in parts.items()
    }


def batch_figures(progress: StreamingQueryProgress) -> Figures:
    """The figures of one progress event of a pipeline's main query or of its dead-letter query.

    A dead-letter query's event (it carries the dead-letter observation) gives only ``dead_letters``:
    its input rows are the same Kafka records the main query reads.
    """
    observed = progress.observedMetrics
    if DEAD_LETTERS_METRIC in observed:
        return Figures(dead_letters=int(observed[DEAD_LETTERS_METRIC]["rows"]))
    records: dict[str, int] = {}
    offsets: dict[str, int] = {}
    lag: dict[str, int] = {}
    for source in progress.sources:
        if not source.description.startswith("KafkaV2"):
            continue  # an end-of-input control stream
        # Spark describes a Kafka source as "KafkaV2[Subscribe[<topic>]]".
        topic = source.description.split("[")[-1].rstrip("]")
        records[topic] = records.get(topic, 0) + source.numInputRows
        end, latest = _partition_offsets(source.endOffset), _partition_offsets(source.latestOffset)
        offsets.update(end)
        lag.update({p: max(latest[p] - o, 0) for p, o in end.items() if p in latest})
    changes = observed.get(CHANGES_METRIC)
    return Figures(
        batches=1,
        input_rows=progress.numInputRows,
        records_read=records,
        duration_ms=int(progress.durationMs.get("triggerExecution", 0)),
        changes={k: int(changes[k]) for k in ROWKINDS} if changes else dict.fromkeys(ROWKINDS, 0),
        offsets=offsets,
        lag=lag,
        state_rows=sum(s.numRowsTotal for s in progress.stateOperators),
        state_bytes=sum(s.memoryUsedBytes for s in progress.stateOperators),
    )


class ProgressQueue(StreamingQueryListener):
    """A ``StreamingQueryListener`` that hands progress events to the thread that reads them.

    Spark calls listeners on its listener-bus thread (in PySpark through the py4j callback
    server); nothing is done there but queueing. The reader calls :meth:`take` on its own thread.
    It sees the events of every query of the session: :meth:`take` keeps those of the given queries.

    Example:
        >>> events = ProgressQueue()
        >>> spark.streams.addListener(events)
        >>> query = df.writeStream...start()
        >>> for progress in events.take({query.id}): ...
        >>> spark.streams.removeListener(events)
    """

    def __init__(self) -> None:
        self._events: queue.Queue = queue.Queue()
        self._terminated: set[str] = set()

    @property
    def _jlistener(self):
        # PySpark's own wrapper builds each event from its Java object field by field; every Java map
        # it copies ends in a py4j exception whose translation searches the classpath: listener-bus CPU
        # a small machine's micro-batch cannot spare. The event's JSON is one call.
        if not hasattr(self, "_jlistenerobj"):
            from pyspark import SparkContext

            jvm = SparkContext._jvm
            assert jvm is not None  # listeners are added to a running session
            self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(_JsonProgressListener(self))
        return self._jlistenerobj

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        self._events.put(("progress", event.progress))

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        self._events.put(("terminated", str(event.id)))

    def take(self, query_ids: Iterable[str], timeout_s: float = 0) -> list[StreamingQueryProgress]:
        """The progress events of ``query_ids`` received so far, oldest first; waits up to ``timeout_s`` for one."""
        ids = set(map(str, query_ids))
        taken = []
        try:
            kind, value = self._events.get(timeout=timeout_s) if timeout_s > 0 else self._events.get_nowait()
            while True:
                if kind == "terminated":
                    self._terminated.add(value)
                elif str(value.id) in ids:
                    taken.append(value)
                kind, value = self._events.get_nowait()
        except queue.Empty:
            return taken

    def take_until_terminated(self, query_ids: Iterable[str], timeout_s: float = 60) -> list[StreamingQueryProgress]:
        """The remaining progress events of stopped queries ``query_ids``: until each one's termination event.

        Spark's listener bus delivers a query's events in order and the termination event last, so
        none is missed; after ``timeout_s`` (a lost event) what came so far is returned.
        """
        ids = set(map(str, query_ids))
        taken = []
        deadline = time.monotonic() + timeout_s
        while not ids <= self._terminated and time.monotonic() < deadline:
            taken += self.take(ids, timeout_s=1)
        return taken + self.take(ids)


class _JsonProgressListener(JStreamingQueryListener):
    """PySpark's py4j listener proxy, reading a progress event from its JSON (``StreamingQueryProgress.fromJson``)."""

    def onQueryProgress(self, jevent) -> None:
        progress = StreamingQueryProgress.fromJson(json.loads(jevent.progress().json()))
        self.pylistener.onQueryProgress(QueryProgressEvent(progress))


class StopOnInterrupt:
    """While entered, SIGINT and SIGTERM stop every streaming query of ``spark`` instead of raising.

    PySpark's own SIGINT handler cancels every Spark job, a micro-batch's included, and raises
    ``KeyboardInterrupt`` into whatever the main thread runs (a py4j call, a wait for progress
    events). Here a helper thread stops the queries instead, each once its micro-batch in progress
    has ended (up to ``batch_timeout_s``, then at once): the query ends without an error, and the
    thread following it sees it end and takes its last progress events. A second signal raises
    ``KeyboardInterrupt`` as before, for a stop that hangs.

    Signal handlers belong to the main thread: entered on another, it does nothing. The previous
    handlers come back on exit.

    Example:
        >>> with StopOnInterrupt(spark) as stop:
        ...     run = run_pipeline(...)  # returns once the queries have stopped
        >>> stop.requested  # whether they stopped for a signal
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, spark: SparkSession, batch_timeout_s: float = 60) -> None:
        self.spark = spark
        self.batch_timeout_s = batch_timeout_s
        self.signal: int | None = None
        self._previous: dict[int, object] = {}
        self._stopper: threading.Thread | None = None

    @property
    def requested(self) -> bool:
        """Whether a signal asked the queries to stop."""
        return self.signal is not None

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self._previous.clear()
        if self._stopper is not None:
            self._stopper.join()

    def _handle(self, signum: int, frame: object) -> None:
        if self.signal is not None:
            raise KeyboardInterrupt
        self.signal = signum
        # py4j calls block: the handler must return at once to the main thread it interrupted.
        self._stopper = threading.Thread(target=self._stop_queries, name="stop-on-interrupt", daemon=True)
        self._stopper.start()

    def _stop_queries(self) -> None:
        for query in self.spark.streams.active:
            # A query stopped inside its foreachBatch function can end with that batch's cancelled jobs as
            # its error; between batches it stops cleanly, and the batch's commit is not left half done.
            deadline = time.monotonic() + self.batch_timeout_s
            while time.monotonic() < deadline and query.isActive and _running_a_batch(query.status):
                time.sleep(0.05)
            query.stop()


def _running_a_batch(status: Mapping[str, object]) -> bool:
    # An idle query's trigger is active too, between its polls of the sources: no batch to wait for then.
    return bool(status["isTriggerActive"] and status["isDataAvailable"])
