package streamjoin.operators
package window_aggregate

import java.sql.Timestamp

import org.apache.spark.sql.Row
import org.apache.spark.sql.types._
import org.scalatest.funsuite.AnyFunSuite

import Changes._

/** The window aggregate, docs/semantics.md §11.2: rows that carry their tumbling window of 10 minutes. */
class WindowAggregateLogicSuite extends AnyFunSuite {
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

  private def harness(retractable: Boolean, aggregates: Seq[AggregateCallSpec]) = new OperatorHarness(
    input,
    classOf[WindowAggregateLogic],
    WindowAggregateSpec(
      columns = Seq("k", "window_start", "window_end", "v"),
      groupBy = Seq("k"),
      windowStart = "window_start",
      windowEnd = "window_end",
      windowEndMs = "_window_end_ms",
      aggregates = aggregates,
      retractable = retractable,
      watermarkColumn = None,
      sessionGapMs = None
    ),
    Clock.Event
  )

  private val countAndSum = Seq(call("COUNT", null, input), call("SUM", "v", input))

  /** A change of key `k` at hh:mm, in its tumbling window of 10 minutes. */
  private def row(k: String, v: Int, hh: Int, mm: Int, kind: String, seq: Long): Row = {
    val start = ms(hh, mm - mm % 10)
    val end = start + 600000L
    Row(k, v, new Timestamp(start), new Timestamp(end), end, kind, seq)
  }

  private def window(hh: Int, mm: Int): Seq[Timestamp] = Seq(ts(hh, mm), ts(hh, mm + 10))

  test("a window emits one +I when the watermark reaches its end − 1 ms, and its state is freed") {
    val h = harness(retractable = false, countAndSum)
    assert(h.visit(Row("a"), row("a", 5, 10, 1, "+I", 1), row("a", 9, 10, 8, "+I", 2)).isEmpty)
    assert(h.watermark(ms(10, 10) - 2).isEmpty)
    assert(show(h.watermark(ms(10, 10) - 1)) == Seq(s"+I(a, 2, 14, ${ts(10, 0)}, ${ts(10, 10)})"))
    assert(h.map[Long, Row]("windowAggState", Row("a")).isEmpty)
    assert(h.watermark(ms(11, 0)).isEmpty, "a window fires once")
  }

  test("windows that one watermark fires come in the order of their ends, each once") {
    val h = harness(retractable = false, countAndSum)
    h.visit(Row("a"), row("a", 1, 10, 25, "+I", 1), row("a", 2, 10, 3, "+I", 2), row("a", 3, 10, 14, "+I", 3))
    val out = h.watermark(ms(11, 0))
    assert(out.map(_.values(4)) == Seq(ts(10, 10), ts(10, 20), ts(10, 30)))
    assert(out.map(_.values.take(3)) == Seq(Seq("a", 1L, 2), Seq("a", 1L, 3), Seq("a", 1L, 1)))
  }

  test("a change whose window has fired is dropped and counted; one behind the watermark in an open window counts") {
    val h = harness(retractable = false, countAndSum)
    h.visit(Row("a"), row("a", 5, 10, 1, "+I", 1))
    h.watermark(ms(10, 12))
    assert(show(h.watermark(ms(10, 12) + 1)).isEmpty)
    // 10:11 is behind the watermark 10:12 but its window [10:10, 10:20) has not fired.
    assert(h.visit(Row("a"), row("a", 7, 10, 4, "+I", 2), row("a", 3, 10, 11, "+I", 3)).isEmpty)
    assert(h.lateDropped(Row("a")) == 1)
    assert(show(h.watermark(ms(10, 30))) == Seq(s"+I(a, 1, 3, ${window(10, 10).mkString(", ")})"))
  }

  test("retractions: a window whose changes cancel out emits nothing; -U/+U update the aggregates") {
    val h = harness(retractable = true, Seq(call("COUNT", null, input), call("MAX", "v", input)))
    h.visit(Row("a"), row("a", 5, 10, 1, "+I", 1), row("a", 5, 10, 1, "-D", 2))
    h.visit(Row("b"), row("b", 9, 10, 2, "+I", 3), row("b", 9, 10, 2, "-U", 4), row("b", 4, 10, 2, "+U", 5))
    assert(h.visit(Row("b"), row("b", 6, 10, 5, "+I", 6)).isEmpty)
    val out = h.watermark(ms(10, 30))
    assert(show(out) == Seq(s"+I(b, 2, 6, ${window(10, 0).mkString(", ")})"))
    assert(h.map[Long, Row]("windowAggState", Row("a")).isEmpty)
  }

  test("COUNT(DISTINCT) with retraction keeps each value's multiplicity in the window's entry") {
    val h = harness(retractable = true, Seq(call("COUNT_DISTINCT", "v", input)))
    h.visit(Row("a"), row("a", 1, 10, 1, "+I", 1), row("a", 1, 10, 2, "+I", 2), row("a", 2, 10, 3, "+I", 3))
    h.visit(Row("a"), row("a", 1, 10, 1, "-D", 4), row("a", 2, 10, 3, "-D", 5))
    assert(show(h.watermark(ms(10, 30))) == Seq(s"+I(a, 1, ${window(10, 0).mkString(", ")})"))
  }
}
