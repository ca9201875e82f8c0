package streamjoin.operators

import streamjoin.operators.interval_join.IntervalJoinLogic
import streamjoin.operators.regular_join.{JoinRecordStateViews, RegularJoinLogic, RowBytes}
import org.apache.spark.sql.{Row, SparkSession}
import org.apache.spark.sql.types._
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import Changes._

/**
 * Residual predicates evaluated inside the joins ([[JoinCondition]], docs/semantics.md §2.6 and §3.5): Spark SQL
 * analysed by the driver's session, so this suite starts a local one (the other suites need none).
 */
class ResidualConditionSuite extends AnyFunSuite with BeforeAndAfterAll {
  private var spark: SparkSession = _

  override def beforeAll(): Unit = {
    spark = SparkSession
      .builder()
      .master("local[1]")
      .appName("streamjoin-operators-tests")
      .config("spark.ui.enabled", "false")
      .config("spark.driver.bindAddress", "127.0.0.1")
      .config("spark.driver.host", "127.0.0.1")
      .config("spark.sql.session.timeZone", "UTC")
      .getOrCreate()
  }

  override def afterAll(): Unit = if (spark != null) spark.stop()

  private val left = StructType(Seq(field("lk", IntegerType), field("lv", StringType)))
  private val right = StructType(Seq(field("rk", IntegerType), field("rv", StringType)))

  test("the regular join: a pair matches only where the predicate is true (null counts as false)") {
    val input = schema(
      Seq(field("_key0", IntegerType), field("_side", IntegerType), field("_left", left), field("_right", right))
        ++ changelogColumns: _*
    )
    val layouts = Seq(JoinRecordStateViews.InputSideHasNoUniqueKey, JoinRecordStateViews.InputSideHasNoUniqueKey)
    val h = new OperatorHarness(
      input,
      classOf[RegularJoinLogic],
      RegularJoinSpec(
        joinType = "left",
        layouts = layouts,
        uniqueKeys = Seq(None, None),
        stored = Seq(true, true),
        condition = Some("lv <> rv")
      ),
      outputData = StructType(left.fields ++ right.fields)
    )
    val k = Row(1)
    assert(show(h.visit(k, Row(1, 0, Row(1, "a"), null, "+I", 1L))) == Seq("+I(1, a, null, null)"))
    assert(h.visit(k, Row(1, 1, null, Row(1, "a"), "+I", 2L)).isEmpty) // fails: no match, the padding stays
    assert(show(h.visit(k, Row(1, 1, null, Row(1, "b"), "+I", 3L))) == Seq("-D(1, a, null, null)", "+I(1, a, 1, b)"))
    assert(h.visit(k, Row(1, 1, null, Row(1, null), "+I", 4L)).isEmpty) // NULL: no match
    assert(h.map[RowBytes, Row]("left_records", k).values.toSeq == Seq(Row(1, 1)))
  }

  test("the interval join: the example of §3.5 (LEFT, ±10 min, A.note <> B.tag)") {
    import Clocks._
    val a = StructType(Seq(field("id", IntegerType), field("ts", TimestampType), field("note", StringType)))
    val b = StructType(Seq(field("bid", IntegerType), field("bts", TimestampType), field("tag", StringType)))
    val input = schema(
      Seq(field("_key0", IntegerType), field("_side", IntegerType), field("_left", a), field("_right", b))
        ++ changelogColumns: _*
    )
    val h = new OperatorHarness(
      input,
      classOf[IntervalJoinLogic],
      IntervalJoinSpec(
        inputs = TwoInputSpec(Seq("_key0"), rowtime = Some(Seq(1, 1)), rowWatermark = None),
        how = "left",
        lowerMs = -600000L,
        upperMs = 600000L,
        candidates = false,
        condition = Some("note <> tag")
      ),
      Clock.Event,
      outputData = StructType(a.fields ++ b.fields)
    )
    val out = Seq(
      h.visit(Row(1), Row(1, 0, Row(1, ts(10, 0), "a"), null, "+I", 1L)),
      h.visit(Row(1), Row(1, 1, null, Row(1, ts(10, 1), "a"), "+I", 2L)), // fails
      h.visit(Row(1), Row(1, 1, null, Row(1, ts(10, 2), "b"), "+I", 3L)), // passes
      h.visit(Row(3), Row(3, 0, Row(3, ts(10, 0), null), null, "+I", 4L)),
      h.visit(Row(3), Row(3, 1, null, Row(3, ts(10, 4), "x"), "+I", 5L)), // NULL: no match
      h.watermark(ms(10, 10) + 1)
    ).map(_.map(_.values))
    assert(
      out == Seq(
        Nil,
        Nil,
        Seq(Seq(1, ts(10, 0), "a", 1, ts(10, 2), "b")),
        Nil,
        Nil,
        Seq(Seq(3, ts(10, 0), null, null, null, null)) // A 1 matched: it expires silently
      )
    )
  }

  test("what the join cannot evaluate itself is named, so that the planner leaves it to a Spark filter") {
    val (l, r) = (left.json, right.json)
    assert(JoinCondition.unevaluable("lv <> rv AND lk < rk + 1", l, r) == null)
    assert(JoinCondition.unevaluable("lv <> CAST(current_timestamp() AS STRING)", l, r) == "current_timestamp")
    val e = intercept[IllegalArgumentException](JoinCondition.bind("lk + rk", left, right))
    assert(e.getMessage.contains("not boolean"))
  }
}
