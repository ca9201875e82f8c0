package streamjoin.operators

import org.apache.spark.sql.Row
import org.scalatest.funsuite.AnyFunSuite

/** The rules of [[ChangelogAssertions]], as `tests/test_changelog_assertions.py` checks the python twin's. */
class ChangelogAssertionsSuite extends AnyFunSuite {
  private val root = OperatorHarness.root(7)
  private val key = Row("a")

  /** `(kind, values)` numbered 0, 1, … under one input change. */
  private def visit(changes: (String, Seq[Any])*): Seq[(Array[Byte], Change)] =
    changes.zipWithIndex.map { case ((kind, values), i) => (SeqPath.child(root, i), Change(kind, values.toArray)) }

  private def failure(changes: Seq[(Array[Byte], Change)], oneUpsertKey: Boolean = true): String =
    intercept[IllegalStateException](ChangelogAssertions.checkVisit("Logic", key, changes, oneUpsertKey)).getMessage

  test("valid visits of one upsert key pass") {
    Seq(
      visit((RowKind.Insert, Seq("a", 1))),
      visit((RowKind.UpdateBefore, Seq("a", 1)), (RowKind.UpdateAfter, Seq("a", 2))),
      visit(
        (RowKind.Insert, Seq("a", 1)),
        (RowKind.UpdateBefore, Seq("a", 1)),
        (RowKind.UpdateAfter, Seq("a", 2)),
        (RowKind.Delete, Seq("a", 2)),
        (RowKind.Insert, Seq("a", 3))
      ),
      visit((RowKind.Delete, Seq("a", 1))),
      visit((RowKind.Insert, Seq("a", 1)), (RowKind.UpdateAfter, Seq("a", 2)))
    ).foreach(changes => ChangelogAssertions.checkVisit("Logic", key, changes, oneUpsertKey = true))
  }

  test("an invalid changelog of one upsert key fails naming the rule, valid among several upsert keys") {
    Seq(
      visit((RowKind.UpdateBefore, Seq("a", 1)), (RowKind.UpdateBefore, Seq("a", 2))) ->
        "-U[a, 2] follows a -U, which its +U must follow",
      visit((RowKind.UpdateBefore, Seq("a", 1))) -> "the visit ends on a -U without its +U",
      visit((RowKind.Delete, Seq("a", 1)), (RowKind.Delete, Seq("a", 1))) -> "-D[a, 1] retracts after a retraction",
      visit((RowKind.Insert, Seq("a", 1)), (RowKind.Delete, Seq("a", 2))) ->
        "-D[a, 2] retracts another row than the one added, [a, 1]",
      visit((RowKind.Insert, Seq("a", 1)), (RowKind.Insert, Seq("a", 2))) ->
        "+I[a, 2] follows the addition of [a, 1], not retracted"
    ).foreach { case (changes, rule) =>
      val message = failure(changes)
      assert(message.startsWith("ChangelogAssertionError: Logic for key [a]: ") && message.contains(rule), message)
      ChangelogAssertions.checkVisit("Logic", key, changes, oneUpsertKey = false)
    }
  }

  test("BINARY values are compared by content") {
    val bytes = (kind: String) => (kind, Seq[Any]("a", Array[Byte](1, 2)))
    ChangelogAssertions.checkVisit("Logic", key, visit(bytes(RowKind.Insert), bytes(RowKind.Delete)), true)
  }

  test("_seq must rise in emission order, for every operator") {
    val crossed = Seq(
      (SeqPath.child(root, 1), Change(RowKind.Insert, Array[Any]("a", 1))),
      (SeqPath.child(root, 0), Change(RowKind.Insert, Array[Any]("b", 2)))
    )
    Seq(true, false).foreach { one =>
      assert(failure(crossed, one).contains("_seq 000000000000000700000000 of +I[b, 2] does not rise"))
    }
  }

  test("the shell checks each visit when asked: a broken logic fails the visit") {
    val input =
      Changes.schema(Changes.field("k", org.apache.spark.sql.types.StringType) +: Changes.changelogColumns: _*)
    val harness =
      new OperatorHarness(input, classOf[ChangelogAssertionsSuite.InsertsTwice], ChangelogAssertionsSuite.Spec)
    val message = intercept[IllegalStateException](harness.visit(Row("a"), Row("a", RowKind.Insert, 1L))).getMessage
    assert(message.contains("InsertsTwice for key [a]: +I[a] follows the addition of [a], not retracted"), message)
  }
}

object ChangelogAssertionsSuite {
  val Spec: ChangelogNormalizeSpec = ChangelogNormalizeSpec(Seq("k"), updateBefore = true, stateTtl = false)

  /** A broken logic: every row of a key inserted twice, as one upsert key. */
  class InsertsTwice(spec: ChangelogNormalizeSpec, input: org.apache.spark.sql.types.StructType) extends KeyedLogic {
    override def outputKeyedByKey: Boolean = true
    override def open(
        handle: org.apache.spark.sql.streaming.StatefulProcessorHandle,
        ttl: org.apache.spark.sql.streaming.TTLConfig
    ): Unit = ()
    override def elements(rows: Iterator[Row]): Iterator[Element] =
      rows.map(r => Element(r.getAs[Array[Byte]](2), r.getString(1), Array[Any](r.getString(0))))
    override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] =
      Seq(Change(RowKind.Insert, e.row), Change(RowKind.Insert, e.row))
  }
}
