package streamjoin.operators
package deduplicate

import org.apache.spark.sql.Row
import org.apache.spark.sql.types._
import org.scalatest.funsuite.AnyFunSuite

import Changes._

/** docs/semantics.md §6.2. */
class DeduplicateLogicSuite extends AnyFunSuite {
  private val input = schema(field("order_id", StringType) +: field("tms_company", StringType) +: changelogColumns: _*)
  private val ordered = schema(
    Seq(
      field("order_id", StringType),
      field("tms_company", StringType),
      field("_order", LongType)
    ) ++ changelogColumns: _*
  )

  private def spec(keep: String, ordered: Boolean = false, stateTtl: Boolean = false) =
    DeduplicateSpec(
      keep = keep,
      ordered = ordered,
      columns = Seq("order_id", "tms_company"),
      watermarkColumn = None,
      proctimeColumns = Seq(),
      stateTtl = stateTtl
    )

  test("keep last on processing time: the changelog of §6.2 (changelog_dedup_only_proctime)") {
    val h = new OperatorHarness(input, classOf[DeduplicateLogic], spec("last"))
    val out = Seq(
      h.visit(Row("001"), Row("001", "ZhongTong", "+I", 1L)),
      h.visit(Row("002"), Row("002", "YuanTong", "+I", 2L)),
      h.visit(Row("003"), Row("003", "ZhongTong", "+I", 3L)),
      h.visit(Row("001"), Row("001", "YuanTong", "+I", 4L))
    )
    assert(
      out.map(show) == Seq(
        Seq("+I(001, ZhongTong)"),
        Seq("+I(002, YuanTong)"),
        Seq("+I(003, ZhongTong)"),
        Seq("-U(001, ZhongTong)", "+U(001, YuanTong)")
      )
    )
    // The kept row and whether the key emitted an update.
    val state = h.value("deduplicateState", Row("001")).get
    assert(state.getStruct(0) == Row("001", "YuanTong") && state.getBoolean(3))
    // Each change is numbered under its input change's _seq.
    assert(
      out(3).map(c => SeqPath.show(c.seq)) == Seq(0, 1).map(i =>
        SeqPath.show(SeqPath.child(OperatorHarness.root(4), i))
      )
    )
  }

  test("keep last on processing time: a repeat of the first row emits nothing, until the key's first update") {
    val h = new OperatorHarness(input, classOf[DeduplicateLogic], spec("last"))
    val k = Row("1")
    assert(show(h.visit(k, Row("1", "a", "+I", 1L))) == Seq("+I(1, a)"))
    assert(h.visit(k, Row("1", "a", "+I", 2L)).isEmpty)
    assert(show(h.visit(k, Row("1", "b", "+I", 3L))) == Seq("-U(1, a)", "+U(1, b)"))
    // The kept row went out as +U: no +I equals it any more (Flink compares the RowKind too).
    assert(show(h.visit(k, Row("1", "b", "+I", 4L))) == Seq("-U(1, b)", "+U(1, b)"))
  }

  test("keep last with state TTL: an equal row emits its update") {
    val h = new OperatorHarness(input, classOf[DeduplicateLogic], spec("last", stateTtl = true), stateTtlMs = 60000L)
    val k = Row("1")
    h.visit(k, Row("1", "a", "+I", 1L))
    assert(show(h.visit(k, Row("1", "a", "+I", 2L))) == Seq("-U(1, a)", "+U(1, a)"))
  }

  test("keep first on processing time: the first row only, even within one visit") {
    val h = new OperatorHarness(input, classOf[DeduplicateLogic], spec("first"))
    val k = Row("1")
    // Rows come in _seq order whatever order Spark gives them in.
    assert(show(h.visit(k, Row("1", "b", "+I", 2L), Row("1", "a", "+I", 1L))) == Seq("+I(1, a)"))
    assert(h.visit(k, Row("1", "c", "+I", 3L)).isEmpty)
  }

  test("keep last on event time: a row at or after the kept one's time replaces it; an older one is ignored") {
    val h = new OperatorHarness(ordered, classOf[DeduplicateLogic], spec("last", ordered = true))
    val k = Row("1")
    assert(show(h.visit(k, Row("1", "a", 10L, "+I", 1L))) == Seq("+I(1, a)"))
    assert(h.visit(k, Row("1", "old", 9L, "+I", 2L)).isEmpty)
    assert(show(h.visit(k, Row("1", "tie", 10L, "+I", 3L))) == Seq("-U(1, a)", "+U(1, tie)"))
  }

  test("keep first on event time: the smallest time waits for the watermark; a late row is dropped and counted") {
    val h = new OperatorHarness(
      ordered,
      classOf[DeduplicateLogic],
      spec("first", ordered = true),
      Clock.Event
    )
    val k = Row("1")
    assert(h.visit(k, Row("1", "b", 20L, "+I", 1L), Row("1", "a", 15L, "+I", 2L), Row("1", "c", 15L, "+I", 3L)).isEmpty)
    assert(h.timers(k).get._2 == Seq(15L)) // one timer, at the row waiting
    assert(h.watermark(14).isEmpty)
    val fired = h.watermark(15)
    assert(show(fired) == Seq("+I(1, a)")) // ties: the earlier arrival
    // The timer releases the stored row: its change counts as caused by that row.
    assert(SeqPath.show(fired.head.seq) == SeqPath.show(SeqPath.child(OperatorHarness.root(2), 0)))
    assert(h.visit(k, Row("1", "d", 16L, "+I", 4L)).isEmpty) // after the emission: dropped, not late
    assert(h.visit(k, Row("1", "e", 3L, "+I", 5L)).isEmpty) // behind the watermark: late
    assert(h.lateDropped(k) == 1L)
  }

  test("an update is refused: deduplication takes insert-only input") {
    val h = new OperatorHarness(input, classOf[DeduplicateLogic], spec("last"))
    val e = intercept[IllegalStateException](h.visit(Row("1"), Row("1", "a", "-D", 1L)))
    assert(e.getMessage.contains("insert-only"))
  }
}
