package streamjoin.operators

import streamjoin.operators.interval_join.{IntervalJoinLogic, ResidualPaddingLogic}
import streamjoin.operators.temporal_join.TemporalJoinLogic
import java.sql.Timestamp
import java.time.Instant

import org.apache.spark.sql.Row
import org.apache.spark.sql.types._
import org.scalatest.funsuite.AnyFunSuite

import Changes._

object Clocks {
  private val day = Instant.parse("2024-01-01T00:00:00Z").toEpochMilli

  /** hh:mm:ss of the test day, epoch ms. */
  def ms(hh: Int, mm: Int, ss: Int = 0): Long = day + ((hh * 60L + mm) * 60L + ss) * 1000L

  def ts(hh: Int, mm: Int, ss: Int = 0): Timestamp = new Timestamp(ms(hh, mm, ss))
}

/** The interval join, docs/semantics.md §3. */
class IntervalJoinLogicSuite extends AnyFunSuite {
  import Clocks._

  private val orders = StructType(Seq(field("id", IntegerType), field("ts", TimestampType)))
  private val shipments = StructType(Seq(field("id", IntegerType), field("ship_ts", TimestampType)))
  private val input = schema(
    Seq(field("_key0", IntegerType), field("_side", IntegerType), field("_left", orders), field("_right", shipments))
      ++ changelogColumns: _*
  )
  private val joined = StructType(orders.fields ++ shipments.fields.map(f => f.copy(name = "r_" + f.name)))

  private def harness(how: String, lowerMs: Long = -600000L, upperMs: Long = 600000L) = new OperatorHarness(
    input,
    classOf[IntervalJoinLogic],
    IntervalJoinSpec(
      inputs = TwoInputSpec(Seq("_key0"), rowtime = Some(Seq(1, 1)), rowWatermark = None),
      how = how,
      lowerMs = lowerMs,
      upperMs = upperMs,
      candidates = false,
      condition = None
    ),
    Clock.Event,
    outputData = joined
  )

  private def a(id: Int, t: Timestamp, seq: Long) = Row(id, 0, Row(id, t), null, "+I", seq)
  private def b(id: Int, t: Timestamp, seq: Long) = Row(id, 1, null, Row(id, t), "+I", seq)

  private def values(out: Seq[Out]): Seq[Seq[Any]] = out.map { o => assert(o.kind == RowKind.Insert); o.values }

  /** The four rows of §3.4, the watermark min(wm(A), wm(B)) moved after each, then to the end. */
  private def example(how: String): (Seq[Seq[Seq[Any]]], OperatorHarness) = {
    val h = harness(how)
    val steps = Seq(
      h.visit(Row(1001), a(1001, ts(10, 0), 1)), // operator time 0
      h.visit(Row(1002), b(1002, ts(10, 1, 2), 2)), // 0: B has no watermark yet
      h.watermark(ms(10, 0)),
      h.visit(Row(1002), a(1002, ts(10, 5), 3)), // 10:00
      h.watermark(ms(10, 1, 2)),
      h.visit(Row(1001), b(1001, ts(10, 12), 4)), // 10:01:02
      h.watermark(ms(10, 5)),
      h.watermark(ms(11, 0)) // past every clean-up timer
    )
    (steps.map(values), h)
  }

  private val pair = Seq(1002, ts(10, 5), 1002, ts(10, 1, 2))

  test("the worked example of §3.4: the pair at row 3, the unmatched outer rows when their timers fire") {
    val (inner, _) = example("inner")
    assert(inner == Seq(Nil, Nil, Nil, Seq(pair), Nil, Nil, Nil, Nil))
    val (left, _) = example("left")
    assert(left.last == Seq(Seq(1001, ts(10, 0), null, null)))
    val (right, _) = example("right")
    assert(right.last == Seq(Seq(null, null, 1001, ts(10, 12))))
    val (full, _) = example("full")
    assert(full(3) == Seq(pair))
    assert(full.last.toSet == Set(Seq(1001, ts(10, 0), null, null), Seq(null, null, 1001, ts(10, 12))))
  }

  test("a side's first cached row sets its clean-up timer at the end of its window + 1 ms; the state empties") {
    val h = harness("left")
    val k = Row(1001)
    h.visit(k, a(1001, ts(10, 0), 1))
    val keyValue = h.value("timers", k).get.getStruct(3)
    assert(keyValue == Row(ms(10, 10) + 1, null, 1L)) // left timer, no right timer, next arrival
    assert(h.timers(k).get._2 == Seq(ms(10, 10) + 1))
    assert(h.map[(Long, Long), Row]("leftRows", k).keySet == Set((ms(10, 0), 0L)))
    assert(values(h.watermark(ms(10, 10))).isEmpty)
    assert(values(h.watermark(ms(10, 10) + 1)) == Seq(Seq(1001, ts(10, 0), null, null)))
    assert(h.map[(Long, Long), Row]("leftRows", k).isEmpty)
    assert(h.value("timers", k).isEmpty) // both caches empty: the key keeps nothing
  }

  test("a late partner (interval_join_left_late): the shipment after the watermark matches nothing") {
    val h = harness("left")
    val out = Seq(
      h.visit(Row(1), a(1, ts(10, 0), 1)),
      h.visit(Row(2), a(2, ts(10, 30), 2)),
      h.visit(Row(9), b(9, ts(10, 40), 3)),
      h.watermark(ms(10, 30)), // min(10:30, 10:40) passes order 1's clean-up timer
      h.visit(Row(1), b(1, ts(10, 2), 4)), // late: its own window is behind the watermark
      h.visit(Row(2), b(2, ts(10, 31), 5))
    ).map(values)
    assert(out == Seq(Nil, Nil, Nil, Seq(Seq(1, ts(10, 0), null, null)), Nil, Seq(Seq(2, ts(10, 30), 2, ts(10, 31)))))
    assert(h.map[(Long, Long), Row]("rightRows", Row(1)).isEmpty) // the late row is not stored
  }

  test("upper < lower: no pair can match, an outer side's rows pass through null-padded at once") {
    val h = harness("left", lowerMs = 10, upperMs = 5)
    assert(values(h.visit(Row(1), a(1, ts(10, 0), 1))) == Seq(Seq(1, ts(10, 0), null, null)))
    assert(values(h.visit(Row(1), b(1, ts(10, 0), 2))).isEmpty)
  }

  test("an interval join takes insert-only input") {
    val e =
      intercept[IllegalStateException](harness("inner").visit(Row(1), Row(1, 0, Row(1, ts(10, 0)), null, "-D", 1L)))
    assert(e.getMessage.contains("insert-only"))
  }
}

/** The outer interval join's third step with a residual Spark evaluates (§3.5). */
class ResidualPaddingLogicSuite extends AnyFunSuite {
  private val input = schema(
    Seq(field("v", StringType), field("_left_id", LongType), field("_right_id", LongType)) ++ changelogColumns: _*
  )

  test("a kept pair marks its outer row matched; an expiry is emitted only for a row nothing matched") {
    val h = new OperatorHarness(
      input,
      classOf[ResidualPaddingLogic],
      ResidualPaddingSpec(columns = Seq("v"), outer = Seq(true, false))
    )
    val k = Row(1)
    assert(show(h.visit(k, Row("pair", 0L, 0L, "+I", 1L))) == Seq("+I(pair)"))
    assert(h.map[Long, Boolean]("leftMatchedRows", k) == Map(0L -> true))
    val out = h.visit(k, Row("expired-0", 0L, null, "+I", 2L), Row("expired-1", 1L, null, "+I", 3L))
    assert(show(out) == Seq("+I(expired-1)"))
    assert(h.map[Long, Boolean]("leftMatchedRows", k).isEmpty) // row 0 is forgotten with its expiry
  }
}

/** The event-time temporal join, docs/semantics.md §4. */
class TemporalJoinLogicSuite extends AnyFunSuite {
  import Clocks._

  private val orders = StructType(
    Seq(
      field("order", IntegerType),
      field("currency", StringType),
      field("amount", IntegerType),
      field("time", TimestampType)
    )
  )
  private val rates = StructType(
    Seq(field("currency", StringType), field("rate", IntegerType), field("vtime", TimestampType))
  )
  private val input = schema(
    Seq(field("_key0", StringType), field("_side", IntegerType), field("_left", orders), field("_right", rates))
      ++ changelogColumns: _*
  )

  private def harness(how: String, appendOnly: Boolean = false) = new OperatorHarness(
    input,
    classOf[TemporalJoinLogic],
    TemporalJoinSpec(
      inputs = TwoInputSpec(Seq("_key0"), rowtime = Some(Seq(3, 2)), rowWatermark = None),
      how = how,
      appendOnlyVersions = appendOnly
    ),
    Clock.Event
  )

  private def order(n: Int, currency: String, amount: Int, t: Timestamp) =
    Row(currency, 0, Row(n, currency, amount, t), null, "+I", 0L)
  private def rate(kind: String, currency: String, rate: Int, t: Timestamp) =
    Row(currency, 1, null, Row(currency, rate, t), kind, 0L)

  /** The rates and orders of §4.4 in arrival order (each row numbered by its position). */
  private val arrivals = Seq(
    rate("+I", "US Dollar", 102, ts(9, 0)),
    rate("+I", "Euro", 114, ts(9, 0)),
    rate("+I", "Yen", 1, ts(9, 0)),
    order(1, "Euro", 2, ts(9, 30)),
    order(2, "US Dollar", 1, ts(10, 0)),
    rate("-U", "Euro", 114, ts(10, 45)),
    rate("+U", "Euro", 116, ts(10, 45)),
    order(3, "Euro", 3, ts(10, 45)),
    order(4, "Euro", 1, ts(11, 0)),
    rate("-U", "Euro", 116, ts(11, 15)),
    rate("+U", "Euro", 119, ts(11, 15)),
    order(5, "Pounds", 2, ts(11, 30)),
    order(6, "Yen", 50, ts(11, 40)),
    rate("+I", "Pounds", 108, ts(11, 49)),
    order(7, "Euro", 2, ts(11, 50)),
    order(8, "Pounds", 1, ts(11, 55)),
    order(9, "Franc", 4, ts(12, 0))
  ).zipWithIndex.map { case (r, i) => Row.fromSeq(r.toSeq.dropRight(1) :+ (i + 1).toLong) }

  /** Every row in its own visit, then the watermark past every order: (order, rate) per emitted row. */
  private def run(h: OperatorHarness): Seq[(Any, Any)] = {
    arrivals.foreach(r => assert(h.visit(Row(r.getString(0)), r).isEmpty)) // probe rows wait for the watermark
    h.watermark(ms(12, 0))
      .map { o => assert(o.kind == RowKind.Insert); (o.values.head, o.values(5)) }
      .sortBy(_._1.toString)
  }

  test("LEFT: each order joins the version valid at its time, exactly at it included (§4.4)") {
    assert(
      run(harness("left")) == Seq(
        1 -> 114,
        2 -> 102,
        3 -> 116,
        4 -> 116,
        5 -> null,
        6 -> 1,
        7 -> 119,
        8 -> 108,
        9 -> null
      )
    )
  }

  test("INNER drops the orders without a valid version; the versions a later order can use are kept") {
    val h = harness("inner")
    assert(run(h) == Seq(1 -> 114, 2 -> 102, 3 -> 116, 4 -> 116, 6 -> 1, 7 -> 119, 8 -> 108))
    assert(h.map[Long, Row]("versions", Row("Euro")).keySet == Set(ms(11, 15))) // older ones dropped at the timer
    assert(h.map[Long, Row]("probeRows", Row("Euro")).isEmpty)
  }

  test("a probe row is never late: behind the watermark it waits for the next rise") {
    val h = harness("left")
    h.watermark(ms(10, 0))
    assert(h.visit(Row("USD"), Row("USD", 0, Row(3, "USD", 1, ts(9, 59)), null, "+I", 1L)).isEmpty)
    assert(h.map[Long, Row]("probeRows", Row("USD")).size == 1)
    val out = h.watermark(ms(10, 0) + 1)
    assert(out.map(o => (o.kind, o.values)) == Seq(("+I", Seq(3, "USD", 1, ts(9, 59), null, null, null))))
  }

  test("a -D version means no row from its time on; probe rows keep their own RowKind") {
    val h = harness("left")
    val k = Row("Euro")
    h.visit(k, rate("+I", "Euro", 114, ts(9, 0)))
    h.visit(k, rate("-D", "Euro", 114, ts(10, 0)))
    h.visit(k, Row("Euro", 0, Row(1, "Euro", 2, ts(9, 30)), null, "-U", 3L))
    h.visit(k, Row("Euro", 0, Row(2, "Euro", 2, ts(10, 30)), null, "+U", 4L))
    val out = h.watermark(ms(11, 0)).map(o => (o.kind, o.values.head, o.values(5)))
    assert(out == Seq(("-U", 1, 114), ("+U", 2, null)))
  }

  test("append-only versions: an older +I is ignored, any other RowKind is an error") {
    val h = harness("inner", appendOnly = true)
    val k = Row("Euro")
    h.visit(k, rate("+I", "Euro", 114, ts(10, 0)))
    h.visit(k, rate("+I", "Euro", 999, ts(9, 0))) // older than the latest version
    h.visit(k, Row("Euro", 0, Row(1, "Euro", 2, ts(10, 30)), null, "+I", 3L))
    assert(h.watermark(ms(11, 0)).map(_.values(5)) == Seq(114))
    val e = intercept[IllegalStateException](h.visit(k, rate("-D", "Euro", 114, ts(11, 0))))
    assert(e.getMessage.contains("append-only"))
  }
}
