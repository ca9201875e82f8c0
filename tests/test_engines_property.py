"""Every operator's hypothesis properties on both engines (issue 14): differential properties.

Each property draws its input with the strategy of the operator's own property tests, prepares it
with the operator function itself (``streamjoin.testing.engines.capture``) and runs it, one row per
micro-batch, through both shells in process (``run_engines``: PySpark's and Spark's ``TwsTester``).
The jvm engine's changelog must equal the python engine's change for change (RowKind, values,
``_seq``, step by step), and the python shell's result must equal the plain-Python driver's that the
operator's own properties check against their oracles — so each of those properties holds for the
Scala twin on the same inputs.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType, TimestampType

from operator_replay import flink_watermarks, replay_keyed
from streamjoin.changelog import RowKind, materialize
from streamjoin.runtime.deduplicate import DedupState, deduplicate, deduplicate_function
from streamjoin.runtime.timers import MIN_TIME
from streamjoin.testing.engines import Watermark, capture, run_engines, visits
from test_deduplicate import streams as dedup_streams

#: Rowtimes are drawn as small ints; on Spark they are ms after this (Spark's watermark starts at 0).
BASE_MS = 1_000_000
#: A watermark past every rowtime: the end of the input.
END_MS = 10**12
EXAMPLES = settings(max_examples=12, deadline=None)


def timestamp(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000)


def changelog(spark, schema: StructType, changes):
    """A static changelog DataFrame: ``(RowKind, values)`` changes, ``_seq`` their position."""
    fields = [*schema.fields, StructField("_rowkind", StringType(), False), StructField("_seq", LongType(), False)]
    rows = [(*values, kind.short, seq) for seq, (kind, values) in enumerate(changes)]
    return spark.createDataFrame(rows, StructType(fields))


def kinds(changes):
    return [(RowKind.from_short(kind), values) for kind, values, _ in changes]


# --------------------------------------------------------------------------- deduplicate

DEDUP_SCHEMA = StructType([StructField("k", StringType()), StructField("t", TimestampType()), StructField("v", IntegerType())])


@EXAMPLES
@given(dedup_streams, st.sampled_from([("first", None), ("last", None), ("last", "t"), ("first", "t")]), st.sampled_from([0, 1, 3]))
def test_deduplicate(spark, rows, variant, delay):
    keep, order_by = variant
    event_time = keep == "first" and order_by is not None
    source = changelog(spark, DEDUP_SCHEMA, [(RowKind.INSERT, (k, timestamp(BASE_MS + t), v)) for k, t, v in rows])
    [op] = capture(lambda: deduplicate(source, key=["k"], order_by=order_by, keep=keep))
    marks = flink_watermarks([BASE_MS + t for _, t, _ in rows], delay) if event_time else None
    steps = visits(op.rows(), marks) + ([Watermark(END_MS)] if event_time else [])
    run = run_engines(op, steps)
    run.assert_equal()
    ours = [(kind, (k, t // 1000 - BASE_MS, v)) for kind, (k, t, v) in kinds(run.changes())]
    fn = deduplicate_function(keep, rowtime=order_by is not None)
    if not event_time:
        expected = replay_keyed(lambda s, r: fn.process_element(s, r, r[1]), DedupState, [(r[0], r) for r in rows])
        assert ours == expected
        return
    # Flink's driver: per-row watermarks, every key's due timers fire when it rises, +inf at the end.
    states: dict = {}
    expected, watermark = [], MIN_TIME
    for (key, time, value), mark in zip(rows, [m - BASE_MS if m > MIN_TIME else m for m in marks]):
        if mark > watermark:
            watermark = mark
            for s in states.values():
                expected += s.timers.advance(watermark, lambda t, s=s: fn.on_timer(s, t))
        state = states.setdefault(key, DedupState())
        state.timers.advance(watermark, lambda t: [])
        expected += fn.process_element(state, (key, time, value), time)
    for s in states.values():
        expected += s.timers.advance(END_MS, lambda t, s=s: fn.on_timer(s, t))
    assert Counter(ours) == Counter(expected)
