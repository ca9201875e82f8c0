package streamjoin.operators
package regular_join

import org.apache.spark.sql.Row
import org.apache.spark.sql.types._
import org.scalatest.funsuite.AnyFunSuite

import Changes._

/** The regular join, docs/semantics.md §2 (and §1.9 for the layouts' handling of invalid changelogs). */
class RegularJoinLogicSuite extends AnyFunSuite {
  private val side = StructType(Seq(field("k", IntegerType), field("v", StringType)))
  private val input = schema(
    Seq(field("_key0", IntegerType), field("_side", IntegerType), field("_left", side), field("_right", side))
      ++ changelogColumns: _*
  )
  private val joined = StructType(
    Seq(field("lk", IntegerType), field("lv", StringType), field("rk", IntegerType), field("rv", StringType))
  )
  private val leftOnly = StructType(joined.fields.take(2))

  private def spec(
      joinType: String,
      layouts: Seq[String],
      uniqueKeys: Seq[Option[Seq[Int]]],
      stored: Seq[Boolean] = Seq(true, true)
  ) = RegularJoinSpec(joinType, layouts, uniqueKeys, stored, condition = None)

  private val noUniqueKey =
    Seq(JoinRecordStateViews.InputSideHasNoUniqueKey, JoinRecordStateViews.InputSideHasNoUniqueKey)

  private def harness(
      joinType: String,
      layouts: Seq[String] = noUniqueKey,
      uniqueKeys: Seq[Option[Seq[Int]]] = Seq(None, None)
  ) =
    new OperatorHarness(
      input,
      classOf[RegularJoinLogic],
      spec(joinType, layouts, uniqueKeys),
      outputData = if (AbstractStreamingJoin.projectsRight(joinType)) joined else leftOnly
    )

  private def l(kind: String, v: String, seq: Long, k: Integer = 1) = Row(k, 0, Row(k, v), null, kind, seq)
  private def r(kind: String, v: String, seq: Long, k: Integer = 1) = Row(k, 1, null, Row(k, v), kind, seq)

  /** The input of §2.5: one change per visit. */
  private val example =
    Seq(l("+I", "a", 1), r("+I", "x", 2), r("+I", "y", 3), r("-D", "x", 4), r("-U", "y", 5), l("-D", "a", 6))

  private def steps(joinType: String): Seq[Seq[String]] = {
    val h = harness(joinType)
    example.map(row => show(h.visit(Row(1), row)))
  }

  test("LEFT JOIN: the worked example of §2.5, association counts deciding the null padding") {
    assert(
      steps("left") == Seq(
        Seq("+I(1, a, null, null)"),
        Seq("-D(1, a, null, null)", "+I(1, a, 1, x)"),
        Seq("+I(1, a, 1, y)"), // the padded row is already gone
        Seq("-D(1, a, 1, x)"), // still matched by y
        Seq("-U(1, a, 1, y)", "+I(1, a, null, null)"), // the inner side keeps its -U
        Seq("-D(1, a, null, null)")
      )
    )
  }

  test("INNER, FULL, SEMI and ANTI on the same input (§2.5)") {
    assert(
      steps("inner") == Seq(
        Nil,
        Seq("+I(1, a, 1, x)"),
        Seq("+I(1, a, 1, y)"),
        Seq("-D(1, a, 1, x)"),
        Seq("-U(1, a, 1, y)"),
        Nil
      )
    )
    assert(
      steps("full") == Seq(
        Seq("+I(1, a, null, null)"),
        Seq("-D(1, a, null, null)", "+I(1, a, 1, x)"),
        Seq("+I(1, a, 1, y)"),
        Seq("-D(1, a, 1, x)"),
        Seq("-D(1, a, 1, y)", "+I(1, a, null, null)"), // both sides outer: a retraction is a -D
        Seq("-D(1, a, null, null)")
      )
    )
    assert(steps("semi") == Seq(Nil, Seq("+I(1, a)"), Nil, Nil, Seq("-U(1, a)"), Nil))
    assert(steps("anti") == Seq(Seq("+I(1, a)"), Seq("-D(1, a)"), Nil, Nil, Seq("+I(1, a)"), Seq("-D(1, a)")))
  }

  test("FULL: a left row leaving while two right rows match it re-sends each of them null-padded") {
    val h = harness("full")
    Seq(l("+I", "a", 1), r("+I", "x", 2), r("+I", "y", 3)).foreach(row => h.visit(Row(1), row))
    val out = show(h.visit(Row(1), l("-D", "a", 4)))
    // The order among the matches is the state's; each retraction comes with its padded row.
    assert(
      out.grouped(2).toSet == Set(
        Seq("-D(1, a, 1, x)", "+I(null, null, 1, x)"),
        Seq("-D(1, a, 1, y)", "+I(null, null, 1, y)")
      )
    )
  }

  test("the state: per side a map row -> (_count, _associations) without a unique key") {
    val h = harness("left")
    example.take(3).foreach(row => h.visit(Row(1), row))
    assert(h.map[RowBytes, Row]("left_records", Row(1)).values.toSeq == Seq(Row(1, 2))) // a matches x and y
    assert(h.map[RowBytes, Row]("right_records", Row(1)).values.toSet == Set(Row(1, 0)))
    h.visit(Row(1), r("+I", "x", 4)) // a duplicate: the multiset counts it
    assert(h.map[RowBytes, Row]("right_records", Row(1)).values.toSet == Set(Row(2, 0), Row(1, 0)))
    assert(h.map[RowBytes, Row]("left_records", Row(1)).values.toSeq == Seq(Row(1, 3)))
    h.visit(Row(1), l("-D", "a", 5))
    assert(h.map[RowBytes, Row]("left_records", Row(1)).isEmpty)
  }

  test("a duplicate row matches twice without a unique key, once when a unique key replaces it") {
    def matches(layouts: Seq[String], uniqueKeys: Seq[Option[Seq[Int]]]) = {
      val h = harness("inner", layouts, uniqueKeys)
      h.visit(Row(1), r("+I", "x", 1))
      h.visit(Row(1), r("+I", "x", 2))
      show(h.visit(Row(1), l("+I", "a", 3)))
    }
    assert(matches(noUniqueKey, Seq(None, None)) == Seq("+I(1, a, 1, x)", "+I(1, a, 1, x)"))
    val byV = Seq(JoinRecordStateViews.InputSideHasNoUniqueKey, JoinRecordStateViews.InputSideHasUniqueKey)
    assert(matches(byV, Seq(None, Some(Seq(1)))) == Seq("+I(1, a, 1, x)"))
  }

  test("JoinKeyContainsUniqueKey: one row per join key in a ValueState; a second +I replaces it (§1.9)") {
    val layouts = Seq(JoinRecordStateViews.InputSideHasNoUniqueKey, JoinRecordStateViews.JoinKeyContainsUniqueKey)
    val h = harness("inner", layouts)
    h.visit(Row(1), r("+I", "x", 1))
    assert(show(h.visit(Row(1), l("+I", "a", 2))) == Seq("+I(1, a, 1, x)"))
    assert(show(h.visit(Row(1), r("+I", "z", 3))) == Seq("+I(1, a, 1, z)")) // (a, x) is never retracted
    val stored = h.value("right_records", Row(1)).get
    assert(PackedRows.point(stored.getAs[Array[Byte]](0), 2).getUTF8String(1).toString == "z")
    // A retraction of a row never seen clears the key's row, and still meets the left row.
    assert(show(h.visit(Row(1), r("-D", "never", 4))) == Seq("-D(1, a, 1, never)"))
    assert(h.value("right_records", Row(1)).isEmpty)
  }

  test("a join key holding a null matches nothing and is not stored; an outer side still pads") {
    val left = harness("left")
    val nullKey = Row(null)
    assert(show(left.visit(nullKey, l("+I", "n", 1, k = null))) == Seq("+I(null, n, null, null)"))
    assert(left.visit(nullKey, r("+I", "m", 2, k = null)).isEmpty)
    assert(left.map[RowBytes, Row]("left_records", nullKey).isEmpty)
    assert(harness("inner").visit(nullKey, l("+I", "n", 1, k = null)).isEmpty)
    assert(show(harness("anti").visit(nullKey, l("+I", "n", 1, k = null))) == Seq("+I(null, n)"))
  }

  test("the changes of one visit follow (_seq, side) and are numbered under their cause") {
    val h = harness("inner")
    val out = h.visit(Row(1), r("+I", "x", 2), l("+I", "a", 2), r("+I", "y", 3))
    assert(show(out) == Seq("+I(1, a, 1, x)", "+I(1, a, 1, y)")) // on a tie the left row goes first
    assert(
      out.map(o => SeqPath.show(o.seq)) == Seq(2L, 3L).map(s => SeqPath.show(SeqPath.child(OperatorHarness.root(s), 0)))
    )
  }

  test("an unknown RowKind is refused") {
    val e = intercept[IllegalStateException](harness("inner").visit(Row(1), l("+X", "a", 1)))
    assert(e.getMessage.contains("unknown RowKind"))
  }
}

/** The two steps of an outer join whose residual predicate Spark evaluates (the python engine's plan, §2.6). */
class RegularJoinTwoStepSuite extends AnyFunSuite {
  private val side = StructType(Seq(field("k", IntegerType), field("v", StringType)))
  private val layouts = Seq(JoinRecordStateViews.InputSideHasNoUniqueKey, JoinRecordStateViews.InputSideHasNoUniqueKey)

  test("first step: each change, then its equi-matching candidate pairs") {
    val input = schema(
      Seq(field("_key0", IntegerType), field("_side", IntegerType), field("_left", side), field("_right", side))
        ++ changelogColumns: _*
    )
    val output = StructType(
      Seq(
        field("_key0", IntegerType),
        field("_side", IntegerType),
        field("_left", side),
        field("_right", side),
        field("_pair", IntegerType)
      )
    )
    val h = new OperatorHarness(
      input,
      classOf[RegularJoinCandidateLogic],
      RegularJoinSpec("left", layouts, Seq(None, None), Seq(true, true), condition = None),
      outputData = output
    )
    assert(
      h.visit(Row(1), Row(1, 0, Row(1, "a"), null, "+I", 1L)).map(o => (o.kind, o.values)) ==
        Seq(("+I", Seq(1, 0, Row(1, "a"), null, 0)))
    )
    assert(
      h.visit(Row(1), Row(1, 1, null, Row(1, "x"), "-U", 2L)).map(o => (o.kind, o.values)) ==
        Seq(("-U", Seq(1, 1, null, Row(1, "x"), 0)), ("-U", Seq(1, 1, Row(1, "a"), Row(1, "x"), 1)))
    )
  }

  test("second step: a change with the pairs that passed the filter as its matches; only outer sides stored") {
    val input = schema(
      Seq(
        field("_key0", IntegerType),
        field("_side", IntegerType),
        field("_left", side),
        field("_right", side),
        field("_pair", IntegerType)
      )
        ++ changelogColumns: _*
    )
    val joined = StructType(
      Seq(field("lk", IntegerType), field("lv", StringType), field("rk", IntegerType), field("rv", StringType))
    )
    val h = new OperatorHarness(
      input,
      classOf[RegularJoinAssociateLogic],
      RegularJoinSpec("left", layouts, Seq(None, None), Seq(true, false), condition = None),
      outputData = joined
    )
    assert(show(h.visit(Row(1), Row(1, 0, Row(1, "a"), null, 0, "+I", 1L))) == Seq("+I(1, a, null, null)"))
    // A right row whose one candidate pair passed, then one whose pair was filtered out.
    val out = h.visit(
      Row(1),
      Row(1, 1, null, Row(1, "x"), 0, "+I", SeqPath.child(OperatorHarness.root(2), 0)),
      Row(1, 1, Row(1, "a"), Row(1, "x"), 1, "+I", SeqPath.child(OperatorHarness.root(2), 1)),
      Row(1, 1, null, Row(1, "y"), 0, "+I", SeqPath.child(OperatorHarness.root(3), 0))
    )
    assert(show(out) == Seq("-D(1, a, null, null)", "+I(1, a, 1, x)"))
    assert(h.map[RowBytes, Row]("left_records", Row(1)).values.toSeq == Seq(Row(1, 1))) // the outer side only
  }
}
