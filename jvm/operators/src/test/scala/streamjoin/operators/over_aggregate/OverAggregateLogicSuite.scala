package streamjoin.operators
package over_aggregate

import org.apache.spark.sql.Row
import org.apache.spark.sql.types._
import org.scalatest.funsuite.AnyFunSuite

import Changes._

/** OVER aggregation, docs/semantics.md §5. */
class OverAggregateLogicSuite extends AnyFunSuite {
  private val input = schema(
    Seq(
      field("itemID", StringType),
      field("itemType", StringType),
      field("price", IntegerType),
      field("_rowtime", LongType)
    )
      ++ changelogColumns: _*
  )

  /** 10:mm as epoch ms of the day. */
  private def at(minute: Int): Long = (10 * 60 + minute) * 60000L

  /** The items of §5.4: (itemID, itemType, minute after 10:00, price), in arrival order. */
  private val items = Seq(
    ("ITEM001", "Electronic", 1, 20),
    ("ITEM002", "Electronic", 2, 50),
    ("ITEM003", "Electronic", 3, 30),
    ("ITEM004", "Electronic", 3, 60),
    ("ITEM005", "Electronic", 5, 40),
    ("ITEM006", "Electronic", 6, 20),
    ("ITEM007", "Electronic", 7, 70),
    ("ITEM008", "Clothes", 8, 20)
  )

  private def harness(function: String, offset: Option[Long], aggregates: (String, String)*) = new OperatorHarness(
    input,
    classOf[OverAggregateLogic],
    OverAggregateSpec(
      function = function,
      offset = offset,
      columns = Seq("itemID", "price"),
      aggregates = aggregates.map { case (f, c) => Changes.call(f, c, input) },
      retractable = offset.isDefined,
      orderBy = Some("onSellTime"),
      rowtimeColumn = "_rowtime",
      watermarkColumn = None
    ),
    Clock.Event
  )

  /** A processing-time frame of `offset` (rows or ms) summing `price`. */
  private def procTimeSpec(function: String, offset: Long) = OverAggregateSpec(
    function = function,
    offset = Some(offset),
    columns = Seq("itemID", "price"),
    aggregates = Seq(Changes.call("SUM", "price", input)),
    retractable = true,
    orderBy = None,
    rowtimeColumn = "_rowtime",
    watermarkColumn = None
  )

  /** Feed the items one per visit, the watermark `delayMs` behind the largest time so far, then to the end; the
   * output rows (itemID, price, aggregates...) by itemID. */
  private def run(h: OperatorHarness, rows: Seq[(String, String, Int, Int)], delayMs: Long): Map[String, Seq[Any]] = {
    var watermark = Long.MinValue
    val out = rows.zipWithIndex.flatMap { case ((id, kind, minute, price), i) =>
      val emitted = h.visit(Row(kind), Row(id, kind, price, at(minute), "+I", i.toLong + 1))
      val next = math.max(watermark, at(minute) - delayMs)
      val fired = if (next > watermark) { watermark = next; h.watermark(next) }
      else Nil
      emitted ++ fired
    } ++ h.watermark(at(60))
    assert(out.forall(_.kind == RowKind.Insert))
    assert(out.map(_.values.head).distinct.length == out.length, out) // one output row per input row
    out.map(o => o.values.head.toString -> o.values).toMap
  }

  private def column(out: Map[String, Seq[Any]], i: Int): Seq[Any] = items.map(_._1).flatMap(out.get).map(_(i))

  test("MAX(price) ROWS BETWEEN 2 PRECEDING: the worked example of §5.4 (over_rows_bounded)") {
    val out = run(harness("RowTimeRowsBoundedPrecedingFunction", Some(3L), "MAX" -> "price"), items, delayMs = 1)
    assert(column(out, 2) == Seq(20, 50, 50, 60, 60, 60, 70, 20))
    assert(out("ITEM004") == Seq("ITEM004", 60, 60))
  }

  test("MAX(price) RANGE BETWEEN INTERVAL 2 MINUTE PRECEDING: peers share a frame (over_range_bounded)") {
    val out = run(harness("RowTimeRangeBoundedPrecedingFunction", Some(120000L), "MAX" -> "price"), items, delayMs = 1)
    assert(column(out, 2) == Seq(20, 50, 60, 60, 60, 40, 70, 20))
  }

  test("unbounded frames: SUM is 100 for ITEM003 with ROWS, 160 with RANGE (a peer); AVG of an INT truncates") {
    val rows = run(harness("RowTimeRowsUnboundedPrecedingFunction", None, "SUM" -> "price", "AVG" -> "price"), items, 1)
    assert(rows("ITEM003").drop(2) == Seq(100, 33))
    val range =
      run(harness("RowTimeRangeUnboundedPrecedingFunction", None, "SUM" -> "price", "AVG" -> "price"), items, 1)
    assert(range("ITEM003").drop(2) == Seq(160, 40))
    assert(range("ITEM004").drop(2) == Seq(160, 40))
    assert(range("ITEM008").drop(2) == Seq(20, 20)) // its own partition
  }

  test("a row at or before the last fired timer is late: dropped and counted (over_range_bounded_strict_wm)") {
    // Watermark delay 0: after ITEM003 the timer of 10:03 fires, and ITEM004 at 10:03 is late.
    for (
      (function, offset, item5) <- Seq(
        ("RowTimeRangeBoundedPrecedingFunction", Some(120000L), 40), // its frame: ITEM003, ITEM005
        ("RowTimeRowsBoundedPrecedingFunction", Some(3L), 50) // its frame: ITEM002, ITEM003, ITEM005
      )
    ) {
      val h = harness(function, offset, "MAX" -> "price")
      val out = run(h, items, delayMs = 0)
      assert(!out.contains("ITEM004"), function)
      assert(out("ITEM005") == Seq("ITEM005", 40, item5), function)
      assert(h.lateDropped(Row("Electronic")) == 1L, function)
      assert(h.lateDropped(Row("Clothes")) == 0L, function)
    }
  }

  test("the state: rows waiting per time until the watermark passes it, and the frame's rows") {
    val h = harness("RowTimeRowsBoundedPrecedingFunction", Some(2L), "COUNT" -> null)
    val k = Row("Electronic")
    h.visit(k, Row("A", "Electronic", 1, at(1), "+I", 1L), Row("B", "Electronic", 2, at(1), "+I", 2L))
    val pending = h.map[Long, Row]("pending", k)
    assert(pending.keySet == Set(at(1)) && pending(at(1)).getSeq[Row](0).map(_.getString(0)) == Seq("A", "B"))
    assert(h.timers(k).get._2 == Seq(at(1)))
    val out = h.watermark(at(1))
    assert(show(out) == Seq("+I(A, 1, 1)", "+I(B, 2, 2)")) // ROWS: each row is its own frame end
    assert(h.map[Long, Row]("pending", k).isEmpty)
    assert(h.map[Long, Row]("frame", k).size == 2)
    assert(h.value("overState", k).get.getLong(1) == at(1)) // lastTriggeringTs
  }

  test("processing time, RANGE: an instant's rows are emitted together once it is over; older rows leave the frame") {
    val h = new OperatorHarness(
      input,
      classOf[OverAggregateLogic],
      procTimeSpec("ProcTimeRangeBoundedPrecedingFunction", 2000L),
      Clock.Instant
    )
    val k = Row("t")
    h.wallClock(1000)
    assert(
      show(h.visit(k, Row("A", "t", 10, null, "+I", 1L), Row("B", "t", 20, null, "+I", 2L))) ==
        Seq("+I(A, 10, 30)", "+I(B, 20, 30)")
    )
    h.wallClock(5000)
    assert(show(h.visit(k, Row("C", "t", 5, null, "+I", 3L))) == Seq("+I(C, 5, 5)"))
  }

  test("processing time, ROWS BETWEEN 1 PRECEDING: each row on arrival") {
    val h = new OperatorHarness(
      input,
      classOf[OverAggregateLogic],
      procTimeSpec("ProcTimeRowsBoundedPrecedingFunction", 2L),
      Clock.Processing
    )
    val k = Row("t")
    h.processingTime(100)
    val out = h.visit(k, (1 to 3).map(i => Row(s"R$i", "t", i * 10, null, "+I", i.toLong)): _*)
    assert(show(out) == Seq("+I(R1, 10, 10)", "+I(R2, 20, 30)", "+I(R3, 30, 50)"))
  }
}
