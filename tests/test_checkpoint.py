"""The checkpoint reader (``streamjoin.checkpoint``) on a file system other than ``file:``.

Hadoop's ``viewfs://`` (a mount table over other file systems, in every Hadoop client) stands for an object
store here: the checkpoint a real streaming query wrote in a local folder is read through a ``viewfs://``
URI whose mount table falls back to that folder, in the driver and in a process without Spark (as a Dagster
sensor reads it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from streamjoin.checkpoint import Checkpoint, HadoopFiles, committed_kafka_offsets


def _viewfs(folder, name: str) -> dict[str, str]:
    """Spark settings mounting ``folder`` as ``viewfs://<name>/`` (a name per test: Hadoop caches a file system
    per scheme and authority, whatever the settings it was made with)."""
    return {f"spark.hadoop.fs.viewfs.mounttable.{name}.linkFallback": f"file://{folder}"}


def _file_source_query(spark, tmp_path) -> str:
    """A checkpoint with two committed batches of a file source, written by a real streaming query."""
    source = tmp_path / "in"
    source.mkdir()
    checkpoint = tmp_path / "lake" / "cp"
    for batch in range(2):
        (source / f"{batch}.json").write_text(json.dumps({"k": batch}) + "\n")
        query = (
            spark.readStream.schema("k INT")
            .json(str(source))
            .writeStream.format("noop")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    return str(checkpoint)


def test_a_checkpoint_reads_the_same_through_another_file_system(spark, tmp_path):
    local = Checkpoint(_file_source_query(spark, tmp_path), HadoopFiles.of_session(spark))
    remote = Checkpoint("viewfs://driverlake/cp", HadoopFiles.standalone(_viewfs(tmp_path / "lake", "driverlake")))
    assert local.batches("commits") == remote.batches("commits") == [0, 1]
    assert remote.batch_offsets(1) == local.batch_offsets(1) == [{"logOffset": 1}]
    assert remote.query_id() == local.query_id() is not None
    assert remote.shuffle_partitions() == int(spark.conf.get("spark.sql.shuffle.partitions"))
    assert remote.kafka_offsets() == {}  # a file source only
    assert remote.read("offsets/7") is None and remote.batches("nothing") == []

    remote.write("streamjoin/probe.json", '{"a": 1}')
    assert (tmp_path / "lake" / "cp" / "streamjoin" / "probe.json").read_text() == '{"a": 1}'


def test_the_offsets_of_kafka_sources_keep_the_lower_offset_of_a_topic_read_twice():
    text = 'v1\n{"batchWatermarkMs":0}\n{"a":{"0":5,"1":7}}\n-\n{"a":{"0":3},"b":{"0":1}}\n{"logOffset":4}\n'
    assert committed_kafka_offsets(text) == {"a": {0: 3, 1: 7}, "b": {0: 1}}


def test_a_process_without_spark_reads_a_checkpoint_on_another_file_system(tmp_path):
    """What a Dagster sensor does: no Spark session in the process; one JVM for Hadoop's file systems."""
    checkpoint = tmp_path / "lake" / "_checkpoints" / "p" / "main"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "commits").mkdir()
    (checkpoint / "offsets" / "0").write_text('v1\n{"conf":{}}\n{"orders":{"0":5,"1":7}}\n')
    (checkpoint / "commits" / "0").write_text("v1\n{}\n")
    (checkpoint / "offsets" / "1").write_text('v1\n{"conf":{}}\n{"orders":{"0":9,"1":9}}\n')  # not committed
    script = textwrap.dedent(
        f"""
        import json
        from streamjoin.checkpoint import Checkpoint, HadoopFiles
        files = HadoopFiles.standalone({_viewfs(tmp_path / "lake", "lake")!r})
        print(json.dumps(Checkpoint("viewfs://lake/_checkpoints/p/main", files).kafka_offsets()))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"orders": {"0": 5, "1": 7}}
