"""State TTL: rows idle longer than the TTL are dropped, with the documented consequences.

transformWithState measures TTL in processing time: a state entry written in a
micro-batch expires ``ttl`` after that micro-batch's timestamp (the time it was
planned). Each phase's files are moved into the source folders only after the
previous phase's micro-batch has finished and the TTL has passed, so the phase's
micro-batch is planned more than the TTL after the previous one, whatever the
machine's load, and the outcome is exact:

* phase 0: left ``(1,a)`` and right ``(1,x)`` join: ``+I(1,a,1,x)``;
* phase 1: right ``-D(1,x)``: both rows expired; the retraction is ignored and
  the joined row stays (it is not retracted);
* phase 2: right ``+I(1,y)``: left ``(1,a)`` expired; the match is missed.

The result keeps ``(1,a,1,x)``; without TTL (and in the batch join) it is ``(1,a,1,y)``.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from streamjoin.changelog import RowKind, materialize
from streamjoin.connectors.changelog_files import read_changelog_files, write_changelog_batches
from streamjoin.runtime.regular_join import regular_join
from streamjoin.runtime.regular_join.streaming_join import JoinSpec, JoinType, LocalRegularJoin
from streamjoin.runtime.two_input import LEFT, RIGHT

I, D = RowKind.INSERT, RowKind.DELETE
A = StructType([StructField("a1", IntegerType()), StructField("a2", StringType())])
B = StructType([StructField("b1", IntegerType()), StructField("b2", StringType())])
LEFT_BATCHES = [[(I, (1, "a"))], [], []]
RIGHT_BATCHES = [[(I, (1, "x"))], [(D, (1, "x"))], [(I, (1, "y"))]]
TTL_MS = 1000


def stage_sources(tmp_path: Path, tables) -> list[tuple[Path, Path]]:
    """``(name, schema, batches, first _seq)`` tables as staged files (one per phase) under ``tmp_path``;
    returns the ``(staged folder, source folder)`` pairs ``run_in_phases`` takes."""
    pairs = []
    for name, schema, batches, first_seq in tables:
        write_changelog_batches(tmp_path / f"{name}-staged", schema, batches, first_seq=first_seq)
        (tmp_path / name).mkdir()
        pairs.append((tmp_path / f"{name}-staged", tmp_path / name))
    return pairs


def run_in_phases(
    stream, sources: list[tuple[Path, Path]], phases: int, checkpoint: Path, pause_s: float, timeout_s: float = 600
) -> list[list]:
    """Feed file ``i`` of every ``(staged, source)`` folder pair as phase ``i``; return each phase's changes.

    Phase ``i + 1`` starts ``pause_s`` after the micro-batches that read phase
    ``i``'s rows have finished. The query runs on a processing-time trigger: TTL
    needs the processing-time mode, in which Spark runs a no-data micro-batch at
    every trigger, so an ``availableNow`` query never ends and
    ``processAllAvailable`` never returns; the rows read are counted from the
    query's progress instead. Phase 0's files are in place before the query
    starts, so its first micro-batch reads every source's first rows: fed one
    folder at a time, a loaded machine could plan a micro-batch between the two
    renames and run the next one more than the TTL later.
    """
    changes: list = []
    columns = [c for c in stream.columns if c not in ("_rowkind", "_seq")]

    def on_batch(batch, batch_id):
        rows = sorted(batch.collect(), key=lambda r: r["_seq"])
        changes.extend((RowKind.from_short(r["_rowkind"]), tuple(r[c] for c in columns)) for r in rows)

    def feed() -> int:
        rows = 0
        for staged, source in sources:
            file = min(staged.iterdir())
            rows += pq.read_metadata(file).num_rows
            file.rename(source / file.name)  # one rename: the source never lists a half-written file
        return rows

    fed = feed()
    query = (
        stream.writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    rows_read: dict[int, int] = {}  # batch id -> input rows, from the query's progress
    per_phase = []
    try:
        for phase in range(phases):
            before = len(changes)
            if phase:
                time.sleep(pause_s)
                fed += feed()
            deadline = time.monotonic() + timeout_s
            while sum(rows_read.values()) < fed:
                if query.exception() is not None:
                    raise query.exception()
                assert time.monotonic() < deadline, f"phase {phase}: {sum(rows_read.values())} of {fed} rows read"
                # A no-data micro-batch every trigger: read the progress often enough to see every batch.
                rows_read.update((p["batchId"], p["numInputRows"]) for p in query.recentProgress)
                time.sleep(0.1)
            per_phase.append(changes[before:])
    finally:
        query.stop()
    return per_phase


def test_rows_idle_longer_than_the_ttl_are_forgotten(spark, engine, tmp_path):
    sources = stage_sources(tmp_path, [("a", A, LEFT_BATCHES, 0), ("b", B, RIGHT_BATCHES, 100)])
    left, right = (read_changelog_files(spark, tmp_path / n, s) for n, s in (("a", A), ("b", B)))
    result = regular_join(left, right, on=[("a1", "b1")], how="left", state_ttl_ms=TTL_MS)
    seen = run_in_phases(result, sources, 3, tmp_path / "checkpoint", pause_s=2 * TTL_MS / 1000)

    assert seen[0] == [(I, (1, "a", None, None)), (D, (1, "a", None, None)), (I, (1, "a", 1, "x"))]
    assert seen[1] == []  # the retraction of the expired right row is ignored
    assert seen[2] == []  # the expired left row no longer matches
    with_ttl = materialize(change for phase in seen for change in phase)
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
