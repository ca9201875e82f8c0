"""State TTL: rows idle longer than the TTL are dropped, with the documented consequences.

transformWithState measures TTL in processing time: a state entry written in a
micro-batch expires ``ttl`` after that micro-batch's timestamp. With a 2 s
processing-time trigger and a 1 s TTL, everything stored in one micro-batch is
gone by the next one, whatever the machine's load, so the outcome is exact:

* micro-batch 0: left ``(1,a)`` and right ``(1,x)`` join: ``+I(1,a,1,x)``;
* micro-batch 1: right ``-D(1,x)``: both rows expired; the retraction is ignored and
  the joined row stays (it is not retracted);
* micro-batch 2: right ``+I(1,y)``: left ``(1,a)`` expired; the match is missed.

The result keeps ``(1,a,1,x)``; without TTL (and in the batch join) it is ``(1,a,1,y)``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter

from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from streamjoin.changelog import RowKind, materialize
from streamjoin.connectors.changelog_files import changelog_file_stream
from streamjoin.runtime.regular_join import regular_join
from streamjoin.runtime.streaming_join import JoinSpec, JoinType, LocalRegularJoin
from streamjoin.runtime.two_input import LEFT, RIGHT


I, D = RowKind.INSERT, RowKind.DELETE
A = StructType([StructField("a1", IntegerType()), StructField("a2", StringType())])
B = StructType([StructField("b1", IntegerType()), StructField("b2", StringType())])
LEFT_BATCHES = [[(I, (1, "a"))], [], []]
RIGHT_BATCHES = [[(I, (1, "x"))], [(D, (1, "x"))], [(I, (1, "y"))]]


def run_with_processing_time_trigger(stream, checkpoint, data_batches: int, interval: str, timeout_s: float = 600):
    """Run until ``data_batches`` micro-batches are done; return ``{batch_id: [(RowKind, values), ...]}``.

    (TTL needs the processing-time mode, in which an ``availableNow`` query keeps
    running empty micro-batches and never ends, so this uses a processing-time trigger.)
    """
    seen: dict[int, list] = {}
    columns = [c for c in stream.columns if c not in ("_rowkind", "_seq")]

    def on_batch(batch, batch_id):
        rows = sorted(batch.collect(), key=lambda r: r["_seq"])
        seen[batch_id] = [(RowKind.from_short(r["_rowkind"]), tuple(r[c] for c in columns)) for r in rows]

    query = stream.writeStream.foreachBatch(on_batch).option("checkpointLocation", str(checkpoint)).trigger(
        processingTime=interval
    ).start()
    deadline = time.monotonic() + timeout_s
    try:
        while not all(b in seen for b in range(data_batches)):
            if query.exception() is not None:
                raise query.exception()
            assert time.monotonic() < deadline, f"only micro-batches {sorted(seen)} done in {timeout_s} s"
            time.sleep(0.5)
    finally:
        query.stop()
    return seen


def test_rows_idle_longer_than_the_ttl_are_forgotten(spark, engine, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="streamjoin.runtime.regular_join")
    left = changelog_file_stream(spark, tmp_path / "a", A, LEFT_BATCHES)
    right = changelog_file_stream(spark, tmp_path / "b", B, RIGHT_BATCHES, first_seq=100)
    result = regular_join(left, right, on=[("a1", "b1")], how="left", state_ttl_ms=1000)
    assert "stateTtl=[1000 ms]" in caplog.messages[-1]
    seen = run_with_processing_time_trigger(result, tmp_path / "checkpoint", 3, "2 seconds")

    assert seen[0] == [(I, (1, "a", None, None)), (D, (1, "a", None, None)), (I, (1, "a", 1, "x"))]
    assert seen[1] == []  # the retraction of the expired right row is ignored
    assert seen[2] == []  # the expired left row no longer matches
    with_ttl = materialize(change for b in range(3) for change in seen[b])
    assert with_ttl == Counter({(1, "a", 1, "x"): 1})

    # The same input without TTL, and the batch join of the final inputs, end with (1,a,1,y).
    reference = LocalRegularJoin(JoinSpec(JoinType.LEFT, [0], [0], 2, 2))
    changes = [
        change
        for number in range(3)
        for side, batch in ((LEFT, LEFT_BATCHES[number]), (RIGHT, RIGHT_BATCHES[number]))
        for kind, row in batch
        for change in reference.process(side, kind, row)
    ]
    assert materialize(changes) == Counter({(1, "a", 1, "y"): 1})
