"""The changelog assertions (docs/semantics.md §1.1): each rule on a key visit's changes, and a real query
whose operator breaks the invariant failing with the assertion's message."""

from __future__ import annotations

import sys

import pytest
from pyspark import cloudpickle
from pyspark.errors import StreamingQueryException
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

from streamjoin.changelog import RowKind
from streamjoin.errors import ChangelogAssertionError
from streamjoin.runtime.assertions import ASSERTIONS_CONF, assertions_on, check_visit
from streamjoin.runtime.processor import Element, KeyedLogic, KeyedProcessor, child_seq

I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE
ROOT = (7).to_bytes(8, "big")


def visit(*changes):
    """``(kind, values)`` numbered 0, 1, … under one input change."""
    return [(child_seq(ROOT, i), kind, values) for i, (kind, values) in enumerate(changes)]


@pytest.mark.parametrize(
    "changes",
    [
        visit((I, ("a", 1))),
        visit((UB, ("a", 1)), (UA, ("a", 2))),  # the row added in an earlier visit
        visit((I, ("a", 1)), (UB, ("a", 1)), (UA, ("a", 2)), (D, ("a", 2)), (I, ("a", 3))),
        visit((D, ("a", 1))),
        visit((I, ("a", 1)), (UA, ("a", 2))),  # an upsert changelog: +U without -U
    ],
)
def test_valid_visits_pass(changes):
    check_visit("Logic", ("a",), changes, one_upsert_key=True)


@pytest.mark.parametrize(
    ("changes", "rule"),
    [
        (visit((UB, ("a", 1)), (UB, ("a", 2))), "-U['a', 2] follows a -U, which its +U must follow"),
        (visit((UB, ("a", 1))), "the visit ends on a -U without its +U"),
        (visit((D, ("a", 1)), (D, ("a", 1))), "-D['a', 1] retracts after a retraction"),
        (visit((I, ("a", 1)), (D, ("a", 2))), "-D['a', 2] retracts another row than the one added, ['a', 1]"),
        (visit((I, ("a", 1)), (I, ("a", 2))), "+I['a', 2] follows the addition of ['a', 1], not retracted"),
    ],
)
def test_an_invalid_changelog_of_one_upsert_key_fails_naming_the_rule(changes, rule):
    with pytest.raises(ChangelogAssertionError, match="Logic for key \\['a'\\]: ") as raised:
        check_visit("Logic", ("a",), changes, one_upsert_key=True)
    assert rule in str(raised.value) and "the visit emitted " in str(raised.value)
    # The same changes are a valid part of a changelog of several upsert keys (a join's output).
    check_visit("Logic", ("a",), changes, one_upsert_key=False)


def test_seq_must_rise_in_emission_order_for_every_operator():
    crossed = [(child_seq(ROOT, 1), I, ("a", 1)), (child_seq(ROOT, 0), I, ("b", 2))]
    for one_upsert_key in (True, False):
        with pytest.raises(ChangelogAssertionError, match=r"_seq 0000000000000007\w* of \+I\['b', 2\] does not rise"):
            check_visit("Logic", ("k",), crossed, one_upsert_key=one_upsert_key)
    tie = [(child_seq(ROOT, 0), I, ("a", 1)), (child_seq(ROOT, 0), I, ("b", 2))]
    with pytest.raises(ChangelogAssertionError, match="does not rise"):
        check_visit("Logic", ("k",), tie, one_upsert_key=False)


class _InsertsTwice(KeyedLogic):
    """A broken logic: every row of a key inserted twice, as one upsert key."""

    output_keyed_by_key = True

    def new_state(self, key):
        return None

    def store(self, state):
        pass

    def elements(self, rows):
        for r in sorted(rows, key=lambda r: r["_seq"]):
            yield Element(seq=r["_seq"], kind=RowKind.from_short(r["_rowkind"]), row=(r["k"], r["v"]))

    def on_element(self, state, element, now):
        return [(I, element.row), (I, element.row)]


def test_a_query_whose_operator_breaks_the_invariant_fails_with_the_assertion(spark, tmp_path):
    assert assertions_on(spark)  # the tests' session has them on (conftest)
    source = tmp_path / "in"
    spark.createDataFrame([("a", 1, 0)], "k STRING, v INT, _seq LONG").write.parquet(str(source))
    stream = spark.readStream.schema("k STRING, v INT, _seq LONG").parquet(str(source))
    stream = stream.selectExpr("k", "v", "'+I' AS _rowkind", "_seq")
    output = StructType(
        [
            StructField("k", StringType()),
            StructField("v", IntegerType()),
            StructField("_rowkind", StringType()),
            StructField("_seq", BinaryType()),
        ]
    )
    # The broken logic lives here, which Spark's Python workers cannot import: it travels by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    result = KeyedProcessor(_InsertsTwice(), output.names).apply(stream, ["k"], output)
    query = result.writeStream.format("memory").queryName("assertions").trigger(availableNow=True).start()
    try:
        with pytest.raises(StreamingQueryException) as raised:
            query.awaitTermination(300)
        rule = "_InsertsTwice for key ['a']: +I['a', 1] follows the addition of ['a', 1], not retracted"
        assert "ChangelogAssertionError" in str(raised.value) and rule in str(raised.value)
    finally:
        query.stop()
    spark.conf.set(ASSERTIONS_CONF, "false")
    try:
        assert not assertions_on(spark)
    finally:
        spark.conf.set(ASSERTIONS_CONF, "true")
