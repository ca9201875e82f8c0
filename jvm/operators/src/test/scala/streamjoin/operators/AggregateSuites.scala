package streamjoin.operators

import streamjoin.operators.group_aggregate.GroupAggregateLogic
import java.math.{BigDecimal => JBigDecimal}

import org.apache.spark.sql.Row
import org.apache.spark.sql.types._
import org.scalatest.funsuite.AnyFunSuite

import Changes._

/** A value → multiplicity map in memory (what a MapState gives a function within one visit). */
final class MemoryView extends AggregateView {
  val counts = scala.collection.mutable.LinkedHashMap[Any, Long]()
  def get(value: Any): Long = counts.getOrElse(value, 0L)
  def put(value: Any, count: Long): Unit = counts(value) = count
  def remove(value: Any): Unit = counts.remove(value)
  def keys: Iterator[Any] = counts.keys.iterator
  def clear(): Unit = counts.clear()
  def flush(): Unit = ()
}

/** The aggregate functions of `Aggregates` (docs/semantics.md §5.6, §6.1, §1.9). */
class AggregatesSuite extends AnyFunSuite {
  private val input = StructType(
    Seq(
      field("i", IntegerType),
      field("l", LongType),
      field("f", FloatType),
      field("d", DecimalType(10, 2)),
      field("s", StringType)
    )
  )
  private val columns = input.fieldNames

  private def aggregates(retractable: Boolean, calls: (String, String)*): Aggregates =
    new Aggregates(
      calls.map { case (f, c) => Changes.call(f, c, input) },
      input,
      columns,
      retractable
    )

  /** Feed `changes` (true: accumulate) of whole rows; the results after each. */
  private def run(a: Aggregates, changes: (Boolean, Array[Any])*): Seq[Seq[Any]] = {
    val accs = a.create()
    val views = a.functions.map(f => if (f.usesView) new MemoryView: AggregateView else null)
    changes.map { case (add, row) =>
      if (add) a.accumulate(accs, views, a.args(row)) else a.retract(accs, views, a.args(row))
      a.results(a.getValues(accs, views)).toSeq
    }
  }

  private def ints(values: Any*): Seq[(Boolean, Array[Any])] =
    values.map(v => (true, Array[Any](v, null, null, null, null)))

  test("SUM and AVG of an INT are INTs: the sum wraps as Java's does, AVG truncates toward zero") {
    val a = aggregates(false, "SUM" -> "i", "AVG" -> "i")
    assert(a.functions.map(_.resultType).toSeq == Seq(IntegerType, IntegerType))
    assert(run(a, ints(Int.MaxValue, 1): _*).last == Seq(Int.MinValue, 1 << 30)) // AVG sums in BIGINT
    assert(run(a, ints(20, 50, 30): _*).map(_(1)) == Seq(20, 35, 33)) // 100 / 3 = 33 (§5.4)
    assert(run(a, ints(-7, 0): _*).last == Seq(-7, -3)) // -3.5 truncated toward zero, not floored
  }

  test("SUM and AVG of a DECIMAL(p, s): DECIMAL(38, s) and DECIMAL(38, max(6, s)) rounded half up") {
    val a = aggregates(false, "SUM" -> "d", "AVG" -> "d")
    assert(a.functions.map(_.resultType).toSeq == Seq(DecimalType(38, 2), DecimalType(38, 6)))
    val rows = Seq("1.00", "2.00", "2.00").map(v => (true, Array[Any](null, null, null, new JBigDecimal(v), null)))
    assert(run(a, rows: _*).last == Seq(new JBigDecimal("5.00"), new JBigDecimal("1.666667")))
  }

  test("SUM of a FLOAT is computed in DOUBLE and emitted as FLOAT; over no values it is NULL") {
    val a = aggregates(true, "SUM" -> "f", "COUNT" -> "f")
    val row = Array[Any](null, null, 0.1f, null, null)
    val out = run(a, (true, row), (true, row), (false, row), (false, row))
    assert(out.head == Seq(0.1f, 1L))
    assert(out(1) == Seq((0.1f.toDouble + 0.1f.toDouble).toFloat, 2L))
    assert(out.last == Seq(null, 0L))
  }

  test("COUNT(col) skips NULLs, COUNT(*) does not") {
    val a = aggregates(false, "COUNT" -> "s", "COUNT" -> null)
    val out = run(a, (true, Array[Any](null, null, null, null, "x")), (true, Array[Any](null, null, null, null, null)))
    assert(out.last == Seq(1L, 2L))
  }

  test("COUNT(DISTINCT): a multiplicity below zero is not counted until it is back above zero (§1.9)") {
    val a = aggregates(true, "COUNT_DISTINCT" -> "s")
    def s(v: String) = Array[Any](null, null, null, null, v)
    val out = run(a, (true, s("a")), (true, s("a")), (true, s("b")), (false, s("a")), (false, s("a")), (false, s("c")))
    assert(out.map(_.head) == Seq(1L, 1L, 2L, 2L, 1L, 1L))
    val accs = a.create()
    val view = new MemoryView
    a.retract(accs, Array(view), Array("c"))
    assert(view.counts == Map("c" -> -1L) && a.getValues(accs, Array(view)).head == 0L)
    a.accumulate(accs, Array(view), Array("c")) // back to 0: still not counted, and no longer in the view
    assert(view.counts.isEmpty && a.getValues(accs, Array(view)).head == 0L)
  }

  test("MAX with retraction finds the next extreme among every value of its view, -1 ones included (§1.9)") {
    val a = aggregates(true, "MAX" -> "i")
    def i(v: Int) = Array[Any](v, null, null, null, null)
    val out = run(a, (true, i(5)), (true, i(9)), (false, i(9)), (true, i(9)), (false, i(12)), (false, i(9)))
    // 12 was never accumulated: its multiplicity is -1, yet it is the next MAX once 9 leaves (Flink's behaviour).
    assert(out.map(_.head) == Seq(5, 9, 5, 9, 9, 12))
  }

  test("MIN with retraction is NULL once every value left; insert-only MIN cannot retract") {
    val a = aggregates(true, "MIN" -> "l")
    def l(v: Long) = Array[Any](null, v, null, null, null)
    assert(run(a, (true, l(3)), (true, l(1)), (false, l(1)), (false, l(3))).map(_.head) == Seq(3L, 1L, 3L, null))
    val insertOnly = aggregates(false, "MIN" -> "l")
    val e = intercept[IllegalStateException](run(insertOnly, (true, l(3)), (false, l(3))))
    assert(e.getMessage.contains("insert-only"))
  }

  test("FIRST_VALUE / LAST_VALUE of the non-null values; retraction drops the oldest equal value") {
    val a = aggregates(true, "FIRST_VALUE" -> "s", "LAST_VALUE" -> "s")
    def s(v: String) = Array[Any](null, null, null, null, v)
    val out = run(a, (true, s("x")), (true, s(null)), (true, s("y")), (true, s("x")), (false, s("x")))
    assert(out.map(_.toList) == Seq(List("x", "x"), List("x", "x"), List("x", "y"), List("x", "x"), List("y", "x")))
  }

  test("accumulators are stored as one struct per function and read back the same") {
    val a = aggregates(true, "SUM" -> "i", "LAST_VALUE" -> "s", "COUNT" -> null)
    val accs = a.create()
    a.accumulate(accs, Array(null, null, null), a.args(Array[Any](4, null, null, null, "z")))
    val stored = a.store(accs)
    assert(stored == Row(Row(4L, 1L), Row(Vector("z")), Row(1L)))
    assert(a.getValues(a.load(stored), Array(null, null, null)).toSeq == Seq(4, "z", 1L))
    assert(intercept[IllegalArgumentException](aggregates(false, "MEDIAN" -> "i")).getMessage.contains("MEDIAN"))
  }
}

/** The group aggregate, docs/semantics.md §6.1 and §1.6. */
class GroupAggregateLogicSuite extends AnyFunSuite {
  private val input = schema(field("k", StringType) +: field("v", IntegerType) +: changelogColumns: _*)

  private def harness(miniBatch: Boolean) = new OperatorHarness(
    input,
    classOf[GroupAggregateLogic],
    GroupAggregateSpec(
      columns = Seq("k", "v"),
      groupBy = Seq("k"),
      aggregates = Seq(AggregateCallSpec("COUNT", None, LongType), AggregateCallSpec("MAX", Some("v"), IntegerType)),
      retractable = true,
      miniBatch = miniBatch
    )
  )

  private val example = Seq(
    Row("a", 5, "+I", 1L),
    Row("a", 9, "+I", 2L),
    Row("a", 9, "-D", 3L),
    Row("a", 5, "-U", 4L),
    Row("a", 7, "+U", 5L),
    Row("a", 7, "-D", 6L)
  )

  test("COUNT(*), MAX(v) GROUP BY k over a changelog: the example of §6.1, one change per visit") {
    val h = harness(miniBatch = false)
    val k = Row("a")
    val out = example.map(r => show(h.visit(k, r)))
    assert(
      out == Seq(
        Seq("+I(a, 1, 5)"),
        Seq("-U(a, 1, 5)", "+U(a, 2, 9)"),
        Seq("-U(a, 2, 9)", "+U(a, 1, 5)"), // retracting the max finds the next one
        Seq("-D(a, 1, 5)"), // the group is empty for a moment
        Seq("+I(a, 1, 7)"),
        Seq("-D(a, 1, 7)")
      )
    )
    assert(h.value("groupAggState", k).isEmpty) // an empty group's state is cleared
    assert(h.map[Row, Row]("max_1", k).isEmpty)
  }

  test("the state: the row count, the accumulators, and MAX's view of value multiplicities") {
    val h = harness(miniBatch = false)
    val k = Row("a")
    example.take(2).foreach(r => h.visit(k, r))
    val state = h.value("groupAggState", k).get
    assert(state.getLong(0) == 2L)
    assert(state.getStruct(1) == Row(Row(2L), Row(9, 2L))) // COUNT: count; MAX: extreme, values with count > 0
    assert(h.map[Row, Row]("max_1", k) == Map(Row(5) -> Row(1L), Row(9) -> Row(1L)))
  }

  test("a retraction into a group without state is skipped") {
    val h = harness(miniBatch = false)
    assert(h.visit(Row("b"), Row("b", 1, "-D", 1L)).isEmpty)
    assert(h.value("groupAggState", Row("b")).isEmpty)
    assert(show(h.visit(Row("b"), Row("b", 1, "+U", 2L))) == Seq("+I(b, 1, 1)"))
  }

  test("mini-batch: a visit's changes are applied together and emitted once, against the values before them") {
    val whole = harness(miniBatch = true)
    assert(whole.visit(Row("a"), example: _*).isEmpty) // the group ends empty, as it began
    val twoRows = harness(miniBatch = true)
    val out = twoRows.visit(Row("a"), example.take(2): _*)
    assert(show(out) == Seq("+I(a, 2, 9)"))
    // Numbered after the bundle's last change, as Flink's finishBundle emits.
    assert(SeqPath.show(out.head.seq) == SeqPath.show(SeqPath.child(OperatorHarness.root(2), 0)))
    // Through zero inside a bundle: an update, not a -D and an +I.
    assert(show(twoRows.visit(Row("a"), example.slice(2, 5): _*)) == Seq("-U(a, 2, 9)", "+U(a, 1, 7)"))
  }

  test("the worked example of §1.6: COUNT(DISTINCT order_id) per carrier over the deduplicated changes") {
    val carriers = schema(field("order_id", StringType) +: field("tms_company", StringType) +: changelogColumns: _*)
    val h = new OperatorHarness(
      carriers,
      classOf[GroupAggregateLogic],
      GroupAggregateSpec(
        columns = Seq("order_id", "tms_company"),
        groupBy = Seq("tms_company"),
        aggregates = Seq(AggregateCallSpec("COUNT_DISTINCT", Some("order_id"), LongType)),
        retractable = true,
        miniBatch = false
      )
    )
    val (zt, yt) = (Row("ZhongTong"), Row("YuanTong"))
    val out = Seq(
      h.visit(zt, Row("001", "ZhongTong", "+I", 1L)),
      h.visit(yt, Row("002", "YuanTong", "+I", 2L)),
      h.visit(zt, Row("003", "ZhongTong", "+I", 3L)),
      h.visit(zt, Row("001", "ZhongTong", "-U", 4L)),
      h.visit(yt, Row("001", "YuanTong", "+U", 5L))
    ).flatMap(show)
    assert(
      out == Seq(
        "+I(ZhongTong, 1)",
        "+I(YuanTong, 1)",
        "-U(ZhongTong, 1)",
        "+U(ZhongTong, 2)",
        "-U(ZhongTong, 2)",
        "+U(ZhongTong, 1)",
        "-U(YuanTong, 1)",
        "+U(YuanTong, 2)"
      )
    )
    assert(h.map[Row, Row]("count_distinct_0", zt) == Map(Row("003") -> Row(1L)))
  }
}
