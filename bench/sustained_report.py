"""The sustained-load benchmark's figures: per-minute samples from progress events and Kafka lag, their CSV,
plot and ``bench/RESULTS.md`` table. Pure (no Spark, no Kafka), so that the aggregation is unit-tested.

A pipeline's micro-batches (:class:`BatchStat`, from its main query's progress events) that ended within a
minute become one :class:`Sample` with its Kafka lag at the minute's end (:func:`total_lag` of
:func:`streamjoin.connectors.kafka_lag.kafka_lag`). The verdicts (:func:`verdict`) fit a least-squares line
(:func:`slope`) through the sustained phase's samples.
"""

from __future__ import annotations

import csv
import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BatchStat", "Sample", "plot", "results_table", "slope", "summarize", "total_lag", "verdict", "write_csv"]

_MIB = 2**20


@dataclass(frozen=True)
class BatchStat:
    """One micro-batch of a pipeline's main query (``StreamingQueryProgress`` via
    :func:`streamjoin.progress.batch_figures`): trigger execution (ms), Kafka records read, and what its
    stateful operators hold after it: rows (``numRowsTotal``), memory (``memoryUsedBytes``, bytes) and
    RocksDB's SST files (the ``rocksdbSstFileSize`` custom metric, bytes)."""

    duration_ms: int
    input_rows: int
    state_rows: int
    state_bytes: int
    state_sst_bytes: int = 0


@dataclass(frozen=True)
class Sample:
    """One pipeline over one minute (a CSV row).

    Attributes:
        minute: minutes since the benchmark started, at the sample's end.
        phase: ``warmup``, ``calibrate`` or ``sustained``.
        batches: micro-batches that ended within the minute.
        batch_ms_p50 / batch_ms_max: their trigger execution times (ms); None without a batch.
        input_rows_per_s: Kafka records they read per second of the minute.
        state_rows / state_bytes / state_sst_bytes: after the minute's last batch (the previous sample's
            without a batch); see :class:`BatchStat`.
        lag: Kafka records on the pipeline's topics beyond its last committed batch, at the minute's end.
        produced: records written to all topics since the start.
        rate: the producer's rate then (records/s, all topics).
    """

    minute: float
    phase: str
    pipeline: str
    batches: int
    batch_ms_p50: float | None
    batch_ms_max: float | None
    input_rows_per_s: float
    state_rows: int
    state_bytes: int
    state_sst_bytes: int
    lag: int
    produced: int
    rate: float


def total_lag(lag: Mapping[str, Mapping[int, int]]) -> int:
    """The records of ``{topic: {partition: lag}}`` (:func:`~streamjoin.connectors.kafka_lag.kafka_lag`) summed."""
    return sum(n for partitions in lag.values() for n in partitions.values())


def summarize(pipeline: str, batches: Sequence[BatchStat], seconds: float, previous: Sample | None, **fields) -> Sample:
    """The :class:`Sample` of ``batches`` (oldest first), ended within a window of ``seconds``.

    Args:
        previous: the pipeline's previous sample, whose state figures stand when no batch ended.
        fields: ``minute``, ``phase``, ``lag``, ``produced``, ``rate`` (see :class:`Sample`).

    Raises:
        ValueError: ``seconds`` is not positive.
    """
    if seconds <= 0:
        raise ValueError(f"a sample's window must be positive, got {seconds} s")
    durations = sorted(b.duration_ms for b in batches)
    last = batches[-1] if batches else previous
    return Sample(
        pipeline=pipeline,
        batches=len(batches),
        batch_ms_p50=statistics.median(durations) if durations else None,
        batch_ms_max=durations[-1] if durations else None,
        input_rows_per_s=sum(b.input_rows for b in batches) / seconds,
        state_rows=last.state_rows if last else 0,
        state_bytes=last.state_bytes if last else 0,
        state_sst_bytes=last.state_sst_bytes if last else 0,
        **fields,
    )


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The least-squares slope of ``ys`` over ``xs`` (0 with fewer than two distinct ``xs``)."""
    if len(set(xs)) < 2:
        return 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def verdict(samples: Sequence[Sample], rate: float) -> dict[str, str]:
    """``state`` and ``lag`` verdicts of one pipeline's sustained samples (in minute order), as text.

    State is ``flat`` when its fitted change over the phase is under 10 % of its mean, else ``grows`` or
    ``falls`` with the rows per minute. Lag is ``sustained`` when its fitted growth over the phase is under one
    minute of input (``rate`` × 60 records), else ``grows`` with the records per minute and the share
    of the input that the pipeline fell behind.
    """
    if len(samples) < 2:
        return {"state": "n/a", "lag": "n/a"}
    minutes = [s.minute for s in samples]
    span = minutes[-1] - minutes[0]
    state = slope(minutes, [s.state_rows for s in samples])
    mean_state = statistics.fmean(s.state_rows for s in samples)
    lag = slope(minutes, [s.lag for s in samples])
    return {
        "state": "flat"
        if abs(state) * span <= 0.1 * mean_state
        else f"{'grows' if state > 0 else 'falls'} {state:+,.0f} rows/min",
        "lag": "sustained"
        if lag * span < rate * 60
        else f"grows {lag:+,.0f} records/min ({lag / 60 / rate:.0%} of input)",
    }


def write_csv(samples: Sequence[Sample], path: Path) -> None:
    """``samples`` as CSV, one row each, the columns of :class:`Sample` (empty for None)."""
    names = [f.name for f in dataclasses.fields(Sample)]
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(names)
        for s in samples:
            writer.writerow(["" if getattr(s, n) is None else getattr(s, n) for n in names])


def plot(samples: Sequence[Sample], path: Path, title: str) -> None:
    """A PNG of state rows, state memory and SST MiB, Kafka lag, batch duration p50 and input rows/s over
    minutes, a line per pipeline, the sustained phase's start marked."""
    import matplotlib

    matplotlib.use("Agg")  # no display: a file only
    import matplotlib.pyplot as plt

    panels = (
        ("state rows", lambda s: s.state_rows),
        ("Kafka lag (records)", lambda s: s.lag),
        ("state memory MiB (memoryUsedBytes)", lambda s: s.state_bytes / _MIB),
        ("state SST MiB (rocksdbSstFileSize)", lambda s: s.state_sst_bytes / _MIB),
        ("batch duration p50 (s)", lambda s: None if s.batch_ms_p50 is None else s.batch_ms_p50 / 1000),
        ("input rows/s", lambda s: s.input_rows_per_s),
    )
    fig, axes = plt.subplots(3, 2, figsize=(13, 11), sharex=True)
    start = next((s.minute for s in samples if s.phase == "sustained"), None)
    for ax, (label, value) in zip(axes.flat, panels):
        for pipeline in dict.fromkeys(s.pipeline for s in samples):
            points = [(s.minute, value(s)) for s in samples if s.pipeline == pipeline and value(s) is not None]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=pipeline)
        if start is not None:
            ax.axvline(start - 1, color="grey", linestyle="--", linewidth=0.8)
        ax.set_title(label)
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("minutes (dashed: sustained rate from here)")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def results_table(samples: Sequence[Sample], rate: float, settle_minutes: float = 0.0) -> str:
    """A markdown table over the sustained phase: per pipeline, state rows, memory and SST MiB and lag at
    start, end and max, batch duration p50 (median of the minutes), and the :func:`verdict`.

    ``settle_minutes``: the verdict judges the samples from that many minutes into the phase on (a state TTL:
    state only stops growing once the first keys can expire, one TTL in); the other columns cover the whole phase.
    """
    lines = [
        (
            "| pipeline | state rows start / end / max | state memory MiB start / end / max "
            "| state SST MiB start / end / max | lag start / end / max | batch p50 s | input rows/s | state | lag |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    sustained = [s for s in samples if s.phase == "sustained"]
    for pipeline in dict.fromkeys(s.pipeline for s in sustained):
        own = [s for s in sustained if s.pipeline == pipeline]
        first, last = own[0], own[-1]
        p50s = [s.batch_ms_p50 for s in own if s.batch_ms_p50 is not None]
        judged = verdict([s for s in own if s.minute >= first.minute + settle_minutes], rate)
        lines.append(
            f"| {pipeline} | {first.state_rows:,} / {last.state_rows:,} / {max(s.state_rows for s in own):,} | "
            f"{_mib(own, 'state_bytes')} | {_mib(own, 'state_sst_bytes')} | "
            f"{first.lag:,} / {last.lag:,} / {max(s.lag for s in own):,} | "
            f"{statistics.median(p50s) / 1000 if p50s else 0:.1f} | "
            f"{statistics.fmean(s.input_rows_per_s for s in own):,.0f} | "
            f"{judged['state']} | {judged['lag']} |"
        )
    return "\n".join(lines)


def _mib(samples: Sequence[Sample], name: str) -> str:
    values = [getattr(s, name) / _MIB for s in samples]
    return f"{values[0]:.1f} / {values[-1]:.1f} / {max(values):.1f}"
