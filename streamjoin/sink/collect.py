"""A sink that brings a changelog stream's output back to the driver, in order.

For replaying test cases and for tests: ``collect_changelog`` runs the query
with ``trigger(availableNow=True)`` until every input is consumed and returns
each emitted change with its micro-batch id, ordered by batch then ``_seq``.
A query with state TTL runs in Spark's processing-time mode, where an ``availableNow`` query keeps
running empty micro-batches and never ends: ``collect_changelog(..., batches=n)`` runs it with a
processing-time trigger and stops it after its first ``n`` micro-batches.
"""

from __future__ import annotations

import time
from pathlib import Path

from pyspark.sql import DataFrame

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind

__all__ = ["collect_changelog"]


def collect_changelog(
    stream: DataFrame,
    checkpoint: Path,
    *,
    timeout_s: float = 600,
    batches: int | None = None,
    interval: str = "2 seconds",
) -> list[tuple[int, RowKind, tuple]]:
    """Run ``stream`` to the end of its input and return its changelog.

    Args:
        stream: a streaming DataFrame carrying ``_rowkind`` and ``_seq``.
        checkpoint: the query's checkpoint folder.
        timeout_s: seconds to wait for the query to finish.
        batches: None: run with ``trigger(availableNow=True)`` until the query ends; else run with a
            processing-time trigger every ``interval`` and stop after micro-batches ``0 .. batches - 1``
            (for a query with state TTL, which an ``availableNow`` trigger never ends).

    Returns:
        ``(batch_id, RowKind, values)`` per change, ``values`` being the
        non-changelog columns in the stream's column order; sorted by
        ``(batch_id, _seq)``.

    Raises:
        TimeoutError: when the query does not finish in time.
        pyspark.errors.StreamingQueryException: when the query fails.
    """
    columns = [c for c in stream.columns if c not in (ROWKIND_COLUMN, SEQ_COLUMN)]
    collected: list[tuple[int, int, RowKind, tuple]] = []

    def on_batch(batch: DataFrame, batch_id: int) -> None:
        for row in batch.collect():
            values = tuple(row[c] for c in columns)
            collected.append((batch_id, row[SEQ_COLUMN], RowKind.from_short(row[ROWKIND_COLUMN]), values))
        done.add(batch_id)

    done: set[int] = set()
    trigger = {"availableNow": True} if batches is None else {"processingTime": interval}
    query = (
        stream.writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )
    deadline = time.monotonic() + timeout_s
    try:
        while not query.awaitTermination(1):
            if batches is not None and set(range(batches)) <= done:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"query did not finish within {timeout_s} s")
    finally:
        query.stop()
    collected.sort(key=lambda c: (c[0], c[1]))
    return [(batch_id, kind, values) for batch_id, _, kind, values in collected]
