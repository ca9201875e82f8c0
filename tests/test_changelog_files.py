"""The changelog file source delivers exactly the given micro-batches, in step across sources.

Each test runs on both sources ``read_changelog_files`` can choose: the operators jar's
``ChangelogBatchSource`` and Spark's Parquet file source (the fallback without the jar).
"""

import pytest
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from streamjoin.changelog import RowKind
from streamjoin.connectors import changelog_files
from streamjoin.connectors.changelog_files import changelog_file_stream, read_changelog_files, write_changelog_batches
from streamjoin.sink.collect import collect_changelog

SCHEMA = StructType([StructField("k", IntegerType()), StructField("v", StringType())])


@pytest.fixture(params=["batch-source", "file-source"])
def source(request, spark, monkeypatch):
    """The source under test; the jar's must be there (a missing jar fails, it does not fall back)."""
    assert changelog_files.has_batch_source(spark)
    if request.param == "file-source":
        monkeypatch.setattr(changelog_files, "has_batch_source", lambda _: False)
    return request.param


def test_one_file_per_micro_batch(spark, source, tmp_path):
    batches = [[("+I", (1, "a")), ("+I", (2, "b"))], [], [("-D", (1, "a"))], [("+U", (2, "c"))]]
    stream = changelog_file_stream(spark, tmp_path / "in", SCHEMA, batches)
    out = collect_changelog(stream, tmp_path / "cp")
    # Empty batch files still advance the stream: the delete lands in batch 2, the update in 3.
    assert out == [
        (0, RowKind.INSERT, (1, "a")),
        (0, RowKind.INSERT, (2, "b")),
        (2, RowKind.DELETE, (1, "a")),
        (3, RowKind.UPDATE_AFTER, (2, "c")),
    ]


def test_two_sources_stay_in_step(spark, source, tmp_path):
    left = changelog_file_stream(spark, tmp_path / "l", SCHEMA, [[("+I", (1, "l0"))], [], [("+I", (3, "l2"))]])
    right = changelog_file_stream(
        spark, tmp_path / "r", SCHEMA, [[], [("+I", (2, "r1"))], [("+I", (4, "r2"))]], first_seq=100
    )
    out = collect_changelog(left.unionByName(right), tmp_path / "cp")
    assert [(b, v) for b, _, v in out] == [(0, (1, "l0")), (1, (2, "r1")), (2, (3, "l2")), (2, (4, "r2"))]


def test_only_empty_batches(spark, source, tmp_path):
    stream = changelog_file_stream(spark, tmp_path / "in", SCHEMA, [[], [], []])
    assert collect_changelog(stream, tmp_path / "cp", batches=3, interval="100 milliseconds") == []


def test_restart_goes_on_with_the_next_file(spark, source, tmp_path):
    """A restarted query reads only the files added since its checkpoint, one per micro-batch, as
    ``tests/test_regular_join_ttl.py::run_in_phases`` feeds a running one: each file with one rename."""
    staged = tmp_path / "staged"
    write_changelog_batches(staged, SCHEMA, [[("+I", (1, "a"))], [("+I", (2, "b"))], [], [("-D", (1, "a"))]])
    folder = tmp_path / "in"
    folder.mkdir()

    def run(files: int):
        for file in sorted(staged.iterdir())[:files]:
            file.rename(folder / file.name)
        return collect_changelog(read_changelog_files(spark, folder, SCHEMA), tmp_path / "cp")

    assert run(0) == []
    assert run(2) == [(0, RowKind.INSERT, (1, "a")), (1, RowKind.INSERT, (2, "b"))]
    assert run(2) == [(3, RowKind.DELETE, (1, "a"))]
    assert run(0) == []
