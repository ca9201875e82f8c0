"""The changelog file source delivers exactly the given micro-batches, in step across sources."""

from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from streamjoin.changelog import RowKind
from streamjoin.connectors.changelog_files import changelog_file_stream
from streamjoin.sink.collect import collect_changelog

SCHEMA = StructType([StructField("k", IntegerType()), StructField("v", StringType())])


def test_one_file_per_micro_batch(spark, tmp_path):
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


def test_two_sources_stay_in_step(spark, tmp_path):
    left = changelog_file_stream(spark, tmp_path / "l", SCHEMA, [[("+I", (1, "l0"))], [], [("+I", (3, "l2"))]])
    right = changelog_file_stream(
        spark, tmp_path / "r", SCHEMA, [[], [("+I", (2, "r1"))], [("+I", (4, "r2"))]], first_seq=100
    )
    out = collect_changelog(left.unionByName(right), tmp_path / "cp")
    assert [(b, v) for b, _, v in out] == [(0, (1, "l0")), (1, (2, "r1")), (2, (3, "l2")), (2, (4, "r2"))]
