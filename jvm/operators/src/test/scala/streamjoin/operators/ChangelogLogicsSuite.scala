package streamjoin.operators

import streamjoin.operators.changelog_normalize.ChangelogNormalizeLogic
import streamjoin.operators.upsert_materializer.SinkUpsertMaterializerLogic
import scala.jdk.CollectionConverters._

import org.apache.spark.sql.Row
import org.apache.spark.sql.types._
import org.scalatest.funsuite.AnyFunSuite

import Changes._

/** ChangelogNormalize, docs/semantics.md §1.8 and §1.9. */
class ChangelogNormalizeLogicSuite extends AnyFunSuite {
  private val input = schema(field("k", IntegerType) +: field("v", StringType) +: changelogColumns: _*)

  private def harness(updateBefore: Boolean = true, stateTtl: Boolean = false) = new OperatorHarness(
    input,
    classOf[ChangelogNormalizeLogic],
    ChangelogNormalizeSpec(columns = Seq("k", "v"), updateBefore = updateBefore, stateTtl = stateTtl)
  )

  test("an upsert changelog becomes a full one, deletes carrying the stored row (the table of §1.8)") {
    val h = harness()
    val k = Row(1)
    assert(show(h.visit(k, Row(1, "a", "+U", 1L))) == Seq("+I(1, a)")) // +U of an unknown key
    assert(show(h.visit(k, Row(1, "b", "+U", 2L))) == Seq("-U(1, a)", "+U(1, b)"))
    assert(h.visit(k, Row(1, "b", "+I", 3L)).isEmpty) // equal to the stored row, no state TTL
    assert(h.value("lastRow", k).contains(Row(1, "b")))
    assert(show(h.visit(k, Row(1, null, "-D", 4L))) == Seq("-D(1, b)")) // a tombstone: the stored row goes out
    assert(h.value("lastRow", k).isEmpty)
    assert(h.visit(k, Row(1, null, "-D", 5L)).isEmpty) // a delete of an unknown key
    assert(h.visit(k, Row(1, "x", "-U", 6L)).isEmpty)
  }

  test("a consumer that takes upserts gets +U alone; with state TTL an equal row is emitted again") {
    val h = harness(updateBefore = false, stateTtl = true)
    val k = Row(1)
    h.visit(k, Row(1, "a", "+I", 1L))
    assert(show(h.visit(k, Row(1, "b", "+U", 2L))) == Seq("+U(1, b)"))
    assert(show(h.visit(k, Row(1, "b", "+U", 3L))) == Seq("+U(1, b)"))
  }

  test("a key's changes of one visit are applied in _seq order; a -U without its +U deletes (§1.9)") {
    val h = harness()
    val k = Row(7)
    val out = h.visit(k, Row(7, "c", "+U", 3L), Row(7, "a", "+I", 1L), Row(7, "b", "-U", 2L))
    assert(show(out) == Seq("+I(7, a)", "-D(7, a)", "+I(7, c)"))
    assert(h.value("lastRow", k).contains(Row(7, "c")))
  }
}

/** SinkUpsertMaterializer, docs/semantics.md §7.2 and §1.9. */
class SinkUpsertMaterializerLogicSuite extends AnyFunSuite {
  private val input = schema(
    Seq(field("id", IntegerType), field("level", IntegerType), field("attr", StringType)) ++ changelogColumns: _*
  )

  private def harness(upsertKey: Seq[String] = Nil) = new OperatorHarness(
    input,
    classOf[SinkUpsertMaterializerLogic],
    SinkUpsertMaterializerSpec(columns = Seq("id", "level", "attr"), upsertKey = upsertKey)
  )

  private val first = Row(1, 10, "a1", "+I", 1L)
  private val retract = Row(1, 10, "a1", "-U", 2L)
  private val update = Row(1, 20, "b1", "+U", 3L)

  /** Each change in its own visit, in the given arrival order. */
  private def arrive(rows: Row*): Seq[String] = {
    val h = harness()
    rows.flatMap(r => show(h.visit(Row(1), r)))
  }

  test("the three arrival orders of §7.2 all end with (1, 20, b1)") {
    assert(arrive(first, retract, update) == Seq("+I(1, 10, a1)", "-D(1, 10, a1)", "+I(1, 20, b1)"))
    assert(arrive(first, update, retract) == Seq("+I(1, 10, a1)", "+U(1, 20, b1)")) // the -U emits nothing
    assert(arrive(update, first, retract) == Seq("+I(1, 20, b1)", "+U(1, 10, a1)", "+U(1, 20, b1)"))
  }

  test("the state is the sink key's rows, oldest first; a retraction of a row it does not hold is ignored") {
    val h = harness()
    val k = Row(1)
    h.visit(k, update)
    h.visit(k, first)
    assert(h.list("rows", k) == List(Row(1, 20, "b1"), Row(1, 10, "a1")))
    assert(h.visit(k, Row(1, 99, "zz", "-D", 4L)).isEmpty)
    assert(h.list("rows", k).length == 2)
    h.visit(k, Row(1, 20, "b1", "-D", 5L)) // not the newest: nothing emitted, the row goes
    assert(show(h.visit(k, Row(1, 10, "a1", "-D", 6L))) == Seq("-D(1, 10, a1)"))
    assert(h.list("rows", k).isEmpty)
  }

  test("with an upsert key a row replaces the row of its upsert key in place, and retractions compare on it") {
    val h = harness(upsertKey = Seq("level"))
    val k = Row(1)
    h.visit(k, Row(1, 10, "a1", "+I", 1L))
    h.visit(k, Row(1, 20, "b1", "+I", 2L))
    assert(show(h.visit(k, Row(1, 10, "a2", "+U", 3L))) == Seq("+U(1, 10, a2)"))
    assert(h.list("rows", k) == List(Row(1, 10, "a2"), Row(1, 20, "b1")))
    // The newest row (level 20) goes, by upsert key although attr differs: the new newest is sent.
    assert(show(h.visit(k, Row(1, 20, "other", "-D", 4L))) == Seq("+U(1, 10, a2)"))
  }
}
