"""Kafka record decoding: ours (Flink's formats, bad records to dead letters) beside Spark's native ``from_json``.

    .venv/bin/python -m bench.decode                          # TPC-H scale factor 0.01, every demo topic
    .venv/bin/python -m bench.decode --scale-factor 0.1 --record bench/RESULTS.md

The records are those ``make demo`` writes (:func:`streamjoin.datagen.topics.topic_records`): Debezium JSON
on ``orders`` and ``lineitem``, JSON on the event topics. They are cached in Spark as Kafka's ``key`` and
``value`` columns (BINARY) in one partition, so a pass measures decoding on one core, not the broker.

- ours: the changelog rows a pipeline reads, :func:`streamjoin.connectors.kafka.changelog_rows` of
  :func:`streamjoin.connectors.formats.decode`: every check that makes a record a dead letter (UTF-8, JSON,
  values narrowed to Flink's JSON converters, null keys, unknown ops), then the good records' changes; on the
  ``jvm`` engine (the jar's fast decoder first, the Spark SQL decoder for what it declines) and on ``python``
  (the Spark SQL decoder alone);
- native: ``from_json`` of the record's envelope (Debezium: ``before``/``after``/``op``) into the declared
  types, what a Spark job without dead letters runs (a value that does not cast is a silent null).

Flink is not measured here: its JSON deserializer runs inside its Kafka source and has no figure of its own.
Prints, per topic, records and records/s (best of ``--passes``, after one warm-up pass) and the ratios;
``--record`` appends the table to a Markdown file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from bench.harness import load, machine
from streamjoin.config import local_dir
from streamjoin.connectors.formats import decode
from streamjoin.connectors.kafka import KafkaSource, changelog_rows
from streamjoin.datagen.topics import TOPICS, topic_records
from streamjoin.datagen.tpch import TpchChangelog, generate_tpch
from streamjoin.jvm import ENGINE_CONF, ENGINES
from streamjoin.session import spark_session

__all__ = ["main", "native"]

_RAW = StructType(
    [StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("offset", LongType())]
)


def native(raw: DataFrame, source: KafkaSource) -> DataFrame:
    """Spark's own decoding of ``raw`` (``key``/``value`` BINARY, ``offset`` LONG): ``from_json`` of the format's
    envelope, column ``j``."""
    row = source.schema
    envelope = (
        StructType([StructField("before", row), StructField("after", row), StructField("op", StringType())])
        if source.format == "debezium-json"
        else row
    )
    return raw.select(F.from_json(F.col("value").cast("string"), envelope).alias("j"))


def _best_seconds(frame: DataFrame, passes: int) -> float:
    """The fastest of ``passes`` full evaluations of every column of ``frame`` (one warm-up pass first)."""
    evaluate = frame.select(F.sum(F.hash(*frame.columns)))
    evaluate.collect()
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        evaluate.collect()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.decode", description=__doc__.splitlines()[0])
    parser.add_argument("--scale-factor", type=float, default=0.01)
    parser.add_argument("--passes", type=int, default=3, help="timed passes per topic and decoder (best counts)")
    parser.add_argument("--record", type=Path, default=None, help="a Markdown file the table is appended to")
    args = parser.parse_args(argv)
    spark = spark_session("streamjoin-bench-decode")
    changelog = TpchChangelog(generate_tpch(local_dir("tpch"), args.scale_factor))
    records = topic_records(changelog)
    lines = [
        (
            f"## Kafka decoding: ours beside Spark's from_json, sf {args.scale_factor:g} "
            f"({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)"
        ),
        "",
        (
            f"`python -m bench.decode --scale-factor {args.scale_factor:g} --passes {args.passes}`; "
            f"{machine()}, load {load()} at the start; one core per topic, records cached in Spark."
        ),
        "",
        (
            "| topic | format | records | jvm records/s | python records/s | from_json records/s "
            "| jvm / from_json | jvm / python |"
        ),
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for source in TOPICS:
        rows = [
            (str(r[0]).encode(), r[1].encode() if isinstance(r[1], str) else r[1], offset)
            for offset, r in enumerate(records[source.topic])
        ]
        raw = spark.createDataFrame(rows, _RAW).repartition(1).cache()
        raw.count()
        ours = {}
        for engine in ENGINES:
            spark.conf.set(ENGINE_CONF, engine)
            ours[engine] = _best_seconds(changelog_rows(decode(raw, source), source), args.passes)
        theirs = _best_seconds(native(raw, source), args.passes)
        lines.append(
            f"| {source.topic} | {source.format} | {len(rows):,} | {len(rows) / ours['jvm']:,.0f} | "
            f"{len(rows) / ours['python']:,.0f} | {len(rows) / theirs:,.0f} | {theirs / ours['jvm']:.2f}× | "
            f"{ours['python'] / ours['jvm']:.2f}× |"
        )
        print(lines[-1], flush=True)
        raw.unpersist()
    table = "\n".join(lines)
    print(table)
    if args.record:
        with open(args.record, "a") as out:
            out.write("\n" + table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
