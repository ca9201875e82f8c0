package streamjoin.operators
package window_aggregate

import java.sql.Timestamp

import org.apache.spark.sql.Row
import org.apache.spark.sql.types._
import org.scalatest.funsuite.AnyFunSuite

import Changes._

/**
 * The shell's rules for an event-time operator after another (docs/semantics.md §11.6), on a window aggregate over
 * rows of tumbling windows of 10 minutes that carry their event time in `wm` (the translator's row watermark column).
 */
class ChainedWindowSuite extends AnyFunSuite {
  import Clocks._

  private val input = schema(
    Seq(
      field("k", StringType),
      field("v", IntegerType),
      field("window_start", TimestampType),
      field("window_end", TimestampType),
      field("wm", LongType),
      field("_window_end_ms", LongType)
    ) ++ changelogColumns: _*
  )

  private def harness() = new OperatorHarness(
    input,
    classOf[WindowAggregateLogic],
    WindowAggregateSpec(
      columns = Seq("k", "window_start", "window_end", "v"),
      groupBy = Seq("k"),
      windowStart = "window_start",
      windowEnd = "window_end",
      windowEndMs = "_window_end_ms",
      aggregates = Seq(call("SUM", "v", input)),
      retractable = false,
      watermarkColumn = Some("wm"),
      sessionGapMs = None
    ),
    Clock.Event
  )

  /** A row of `k` at hh:mm in its 10-minute window; `upstream`: emitted by an operator (a path longer than a root,
   * carrying its window's start in `wm`), else a source's row without a per-row watermark. */
  private def row(k: String, v: Int, hh: Int, mm: Int, seq: Long, upstream: Boolean): Row = {
    val start = ms(hh, mm - mm % 10)
    val path = if (upstream) OperatorHarness.root(seq) ++ Array[Byte](0, 0, 0, 0) else OperatorHarness.root(seq)
    Row(
      k,
      v,
      new Timestamp(start),
      new Timestamp(start + 600000L),
      if (upstream) start else null,
      start + 600000L,
      "+I",
      path
    )
  }

  test("a row an upstream operator fired on the current watermark is taken before the key advances to it") {
    val h = harness()
    h.watermark(ms(10, 10)) // the upstream window [10:00, 10:10) fired on this watermark
    val out = h.visit(Row("a"), row("a", 4, 10, 5, 1, upstream = true), row("a", 2, 10, 7, 2, upstream = false))
    // The upstream row counts in its window, which then fires in the same visit; the source row after it is late.
    assert(show(out) == Seq(s"+I(a, 4, ${ts(10, 0)}, ${ts(10, 10)})"))
    assert(h.lateDropped(Row("a")) == 1)
  }

  test("the watermark delay of an interval join upstream holds the key's time back, and its Spark timer") {
    val h = harness()
    h.operator.watermarkDelayMs = 60000L
    assert(h.visit(Row("a"), row("a", 4, 10, 5, 1, upstream = false)).isEmpty)
    assert(h.watermark(ms(10, 10)).isEmpty, "the window's end − 1 ms is 10:09:59.999; the key's time is 10:09")
    assert(show(h.watermark(ms(10, 11))) == Seq(s"+I(a, 4, ${ts(10, 0)}, ${ts(10, 10)})"))
  }
}
