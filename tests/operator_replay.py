"""Replay inputs through the OVER / group-aggregate / dedup operators, in pure Python and on Spark.

Pure Python (:func:`replay_over`, :func:`replay_keyed`) mirrors how the Flink
reference cases were fed (``tests/data/flink-cases/README.md``): rows one at a
time; after each row of a table its watermark is ``max rowtime seen − delay``
and, when it rises, every key's due timers fire in time order; end of input
is a watermark of +∞.

Spark (:func:`changelog_stream`, :func:`collect_packed`) writes the rows as
Parquet micro-batches (``changelog_file_stream``), runs one streaming query and
collects its changelog. Timestamps travel in the files as epoch milliseconds
and become TIMESTAMPs in Spark. Several operator outputs can share one query
(:func:`pack`): each is reduced to ``(case, payload JSON)`` and unioned, which
saves a query's fixed cost per micro-batch.

End of input on Spark: a stream never ends, so an event-time run appends a
*sentinel* row (partition key :data:`SENTINEL`, rowtime year 9999) to the last
micro-batch; the watermark it raises makes Spark run one more micro-batch that
fires every timer, as Flink's +∞ watermark does. The rows of that last batch
see the watermark of the batches before, so the sentinel changes nothing for
them. Its own output is dropped.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind
from streamjoin.connectors.changelog_files import changelog_file_stream
from streamjoin.runtime.timers import MAX_TIME, MIN_TIME
from streamjoin.sink.collect import collect_changelog

SENTINEL = "~end-of-input~"
SENTINEL_MS = int(dt.datetime(9999, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
#: Hidden LONG column carrying Flink's per-row watermark (``watermark_column=``).
ROW_WATERMARK = "_row_watermark"

_SIMPLE_TYPES = {
    "STRING": StringType(),
    "INT": IntegerType(),
    "BIGINT": LongType(),
    "DOUBLE": DoubleType(),
    "BOOLEAN": BooleanType(),
}


def spark_type(flink_type: str) -> DataType:
    """Spark type of a Flink SQL type string of the cases (``TIMESTAMP(3)``, ``DECIMAL(p, s)``, ...)."""
    if flink_type in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[flink_type]
    if flink_type.startswith("TIMESTAMP"):
        return TimestampType()
    m = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", flink_type)
    if m:
        return DecimalType(int(m[1]), int(m[2]))
    raise ValueError(f"no Spark type for {flink_type!r}")


def epoch_ms(text: str) -> int:
    """``YYYY-MM-DD HH:MM:SS[.fff]`` (UTC) → epoch milliseconds."""
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp() * 1000)


def ts_text(ms: int) -> str:
    """Epoch milliseconds → ``YYYY-MM-DD HH:MM:SS.fff``, the format of the expected outputs."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def flink_watermarks(times: Sequence[int], delay_ms: int) -> list[int]:
    """The watermark in effect when each row arrives: ``max(earlier rowtimes) − delay`` (MIN_TIME first)."""
    marks, highest = [], None
    for t in times:
        marks.append(MIN_TIME if highest is None else highest - delay_ms)
        highest = t if highest is None else max(highest, t)
    return marks


def batch_watermarks(times: Sequence[int], delay_ms: int, rows_per_batch: int) -> list[int]:
    """Spark's watermark as each row sees it: ``max(rowtimes of earlier micro-batches) − delay``."""
    marks, highest = [], None
    for start in range(0, len(times), rows_per_batch):
        batch = times[start : start + rows_per_batch]
        marks += [MIN_TIME if highest is None else highest - delay_ms] * len(batch)
        highest = max(batch) if highest is None else max(highest, *batch)
    return marks


# --------------------------------------------------------------------------- pure Python


@dataclass
class Replay:
    """Outputs in emission order, and for each input row whether it was dropped as late."""

    outputs: list = field(default_factory=list)
    dropped: list[bool] = field(default_factory=list)
    states: dict = field(default_factory=dict)


def replay_over(fn, rows: Sequence[tuple[Hashable, tuple, int]], watermarks: Sequence[int]) -> Replay:
    """Feed ``(key, row, time)`` to an OVER function as Flink's ``KeyedProcessOperator`` does.

    Before row *i* the watermark moves to ``watermarks[i]``; each rise fires
    all keys' due timers in (time, first-seen key) order. At the end the
    watermark is +∞.
    """
    result = Replay()
    states = result.states
    watermark = MIN_TIME

    def rise(to: int) -> None:
        fired = []
        for rank, state in enumerate(states.values()):
            state.timers.advance(to, lambda t, s=state, r=rank: fired.append((t, r, fn.on_timer(s, t))) or [])
        for _, _, out in sorted(fired, key=lambda f: (f[0], f[1])):
            result.outputs += out

    for (key, row, time), mark in zip(rows, watermarks):
        if mark > watermark:
            watermark = mark
            rise(watermark)
        state = states.get(key)
        if state is None:
            state = states[key] = fn.create_state()
            state.timers.advance(watermark, lambda t: [])
        before = state.late_dropped
        result.outputs += fn.process_element(state, row, time)
        result.dropped.append(state.late_dropped > before)
    rise(MAX_TIME)
    return result


def replay_keyed(process: Callable, make_state: Callable, rows: Sequence[tuple[Hashable, tuple]]) -> list:
    """Feed ``(key, change)`` pairs to a per-key function ``process(state, change) -> outputs``."""
    states: dict = {}
    outputs: list = []
    for key, change in rows:
        state = states.get(key)
        if state is None:
            state = states[key] = make_state()
        outputs += process(state, change)
    return outputs


# --------------------------------------------------------------------------- Spark

#: Settings that halve the time of these tiny stateful queries: one shuffle partition (one Python
#: worker and one state store per operator and micro-batch instead of two) and RocksDB changelog
#: checkpointing (a commit writes a change log, not a snapshot).
SMALL_QUERY_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}


@pytest.fixture
def small_queries(spark):
    """The shared session with :data:`SMALL_QUERY_CONF` for the test, restored afterwards."""
    previous = {key: spark.conf.get(key, None) for key in SMALL_QUERY_CONF}
    for key, value in SMALL_QUERY_CONF.items():
        spark.conf.set(key, value)
    yield spark
    for key, value in previous.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


def changelog_stream(
    spark: SparkSession,
    folder: Path,
    columns: Sequence[tuple[str, DataType]],
    changes: Sequence[tuple[str, tuple]],
    rows_per_batch: int,
    *,
    rowtime: str | None = None,
    watermark_delay_ms: int | None = None,
    row_watermarks: Sequence[int] | None = None,
    sentinel: tuple | None = None,
) -> DataFrame:
    """A streaming changelog DataFrame delivering ``changes`` in micro-batches of ``rows_per_batch``.

    TIMESTAMP values are given as epoch ms and converted in Spark. With
    ``rowtime`` the stream gets ``withWatermark(rowtime, delay)``. With
    ``row_watermarks`` it carries :data:`ROW_WATERMARK`. ``sentinel`` (a row,
    its rowtime at :data:`SENTINEL_MS`) is appended to the last micro-batch.
    """
    timestamps = [name for name, t in columns if isinstance(t, TimestampType)]
    file_columns = [StructField(n, LongType() if n in timestamps else t) for n, t in columns]
    if row_watermarks is not None:
        file_columns.append(StructField(ROW_WATERMARK, LongType()))
        changes = [(k, (*v, None if w == MIN_TIME else w)) for (k, v), w in zip(changes, row_watermarks)]
    batches = [list(changes[i : i + rows_per_batch]) for i in range(0, len(changes), rows_per_batch)]
    if sentinel is not None:
        end = sentinel + ((MAX_TIME,) if row_watermarks is not None else ())
        batches[-1].append(("+I", end))
    stream = changelog_file_stream(spark, folder, StructType(file_columns), batches)
    for name in timestamps:
        stream = stream.withColumn(name, F.timestamp_millis(name))
    if rowtime is not None:
        stream = stream.withWatermark(rowtime, f"{watermark_delay_ms} milliseconds")
    return stream


def pack(df: DataFrame, case: str, columns: Sequence[str]) -> DataFrame:
    """Reduce an operator's changelog to ``case``, ``payload`` (JSON of ``columns``), ``_rowkind``, ``_seq``.

    TIMESTAMPs become ``YYYY-MM-DD HH:MM:SS.SSS`` strings and DECIMALs strings, so
    that :func:`unpack` gives exactly comparable values.
    """
    types = {f.name: f.dataType for f in df.schema.fields}
    values = []
    for c in columns:
        if isinstance(types[c], TimestampType):
            values.append(F.date_format(c, "yyyy-MM-dd HH:mm:ss.SSS").alias(c))
        elif isinstance(types[c], DecimalType):
            values.append(F.col(c).cast("string").alias(c))
        else:
            values.append(F.col(c))
    return df.select(
        F.lit(case).alias("case"),
        F.to_json(F.struct(*values), {"ignoreNullFields": "false"}).alias("payload"),
        ROWKIND_COLUMN,
        SEQ_COLUMN,
    )


def collect_packed(streams: Sequence[DataFrame], checkpoint: Path) -> dict[str, list[tuple[int, RowKind, tuple]]]:
    """Run the union of packed streams as one query; per case, ``(batch, RowKind, values)`` in order."""
    union = streams[0]
    for s in streams[1:]:
        union = union.unionByName(s)
    by_case: dict[str, list] = {}
    for batch, kind, (case, payload) in collect_changelog(union, checkpoint):
        by_case.setdefault(case, []).append((batch, kind, tuple(json.loads(payload).values())))
    return by_case
