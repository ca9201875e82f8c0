package streamjoin.operators
package window_rank

import java.sql.Timestamp

import org.apache.spark.sql.Row
import org.apache.spark.sql.types._
import org.scalatest.funsuite.AnyFunSuite

import Changes._

/** The window Top-N, docs/semantics.md §11.3: rows that carry their tumbling window of 10 minutes. */
class WindowRankLogicSuite extends AnyFunSuite {
  import Clocks._

  private val input = schema(
    Seq(
      field("k", StringType),
      field("v", IntegerType),
      field("window_start", TimestampType),
      field("window_end", TimestampType),
      field("_window_end_ms", LongType)
    ) ++ changelogColumns: _*
  )

  private def harness(rankStart: Long, rankEnd: Long, order: Seq[SortFieldSpec], newestFirst: Boolean = false) =
    new OperatorHarness(
      input,
      classOf[WindowRankLogic],
      WindowRankSpec(
        columns = Seq("k", "v", "window_start", "window_end"),
        windowEnd = "window_end",
        windowEndMs = "_window_end_ms",
        orderBy = order,
        rankStart = rankStart,
        rankEnd = rankEnd,
        newestFirstOnTies = newestFirst,
        watermarkColumn = None
      ),
      Clock.Event
    )

  private val byValueDesc = Seq(SortFieldSpec("v", ascending = false, nullsFirst = false))

  private def row(k: String, v: Any, mm: Int, seq: Long): Row = {
    val start = ms(10, mm - mm % 10)
    Row(k, v, new Timestamp(start), new Timestamp(start + 600000L), start + 600000L, "+I", seq)
  }

  private def ranked(out: Seq[Out]): Seq[(Any, Any, Any)] = out.map { o =>
    assert(o.kind == RowKind.Insert)
    (o.values.head, o.values(1), o.values.last)
  }

  test("the worked example: the top two by price when the watermark passes the window's end, ties by arrival") {
    val h = harness(1, 2, byValueDesc)
    val p = Row(0)
    assert(h.visit(p, row("a", 4, 1, 1), row("b", 7, 3, 2), row("c", 7, 5, 3), row("d", 9, 8, 4)).isEmpty)
    assert(h.watermark(ms(10, 10) - 2).isEmpty)
    assert(ranked(h.watermark(ms(10, 10) - 1)) == Seq(("d", 9, 1L), ("b", 7, 2L)))
    assert(h.map[Long, Row]("windowRankState", p).isEmpty)
  }

  test("a rank range emits only its ranks; NULLs sort where the field says") {
    val order = Seq(SortFieldSpec("v", ascending = true, nullsFirst = false))
    val h = harness(2, 3, order)
    val p = Row(0)
    h.visit(p, row("a", null, 1, 1), row("b", 3, 2, 2), row("c", 1, 3, 3), row("d", 2, 4, 4))
    assert(ranked(h.watermark(ms(11, 0))) == Seq(("d", 2, 2L), ("b", 3, 3L)))
  }

  test("a row of a fired window is dropped and counted; windows fire in end order") {
    val h = harness(1, 1, byValueDesc)
    val p = Row(0)
    h.visit(p, row("a", 1, 1, 1), row("b", 2, 12, 2))
    assert(ranked(h.watermark(ms(10, 10))) == Seq(("a", 1, 1L)))
    assert(h.visit(p, row("c", 5, 9, 3)).isEmpty)
    assert(h.lateDropped(p) == 1)
    assert(ranked(h.watermark(ms(11, 0))) == Seq(("b", 2, 1L)))
  }

  test("newest first on ties: the deduplication keeping the last row keeps the last of equal values") {
    val last = harness(1, 1, byValueDesc, newestFirst = true)
    last.visit(Row(0), row("a", 5, 1, 1), row("b", 5, 2, 2), row("c", 3, 3, 3))
    assert(ranked(last.watermark(ms(11, 0))) == Seq(("b", 5, 1L)))
    val first = harness(1, 1, byValueDesc)
    first.visit(Row(0), row("a", 5, 1, 1), row("b", 5, 2, 2), row("c", 3, 3, 3))
    assert(ranked(first.watermark(ms(11, 0))) == Seq(("a", 5, 1L)))
  }

  test("an update is refused: the window rank consumes insert-only input") {
    val h = harness(1, 1, byValueDesc)
    val update = Row("a", 1, ts(10, 0), ts(10, 10), ms(10, 10), "-U", 1L)
    val error = intercept[IllegalStateException](h.visit(Row(0), update))
    assert(error.getMessage.contains("window_rank consumes insert-only input"))
  }
}
