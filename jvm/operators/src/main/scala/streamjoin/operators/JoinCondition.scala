package streamjoin.operators

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{
  Alias,
  BasePredicate,
  BindReferences,
  BoundReference,
  Expression,
  GenericInternalRow,
  JoinedRow,
  Predicate,
  Unevaluable
}
import org.apache.spark.sql.catalyst.optimizer.{ComputeCurrentTime, ReplaceExpressions}
import org.apache.spark.sql.catalyst.plans.logical.{LocalRelation, OneRowRelation, Project}
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.types.{BooleanType, DataType, StructType}

/**
 * A regular join's residual (non-equi) predicate evaluated inside the join, as Flink's
 * `StreamingJoinOperator` evaluates its `JoinCondition` on each pair of equi-matching rows: a pair
 * matches when the predicate is true; null counts as false.
 *
 * The predicate is Spark SQL, analysed by the driver's session against the joined row (the left
 * columns, then the right columns) and bound to it ([[JoinCondition.bind]]); an executor compiles
 * it once per task (`Predicate.create`: generated code, interpreted when that fails). Rows come in
 * as Spark's internal rows ([[PackedRows]]); the columns the predicate reads are taken out of a row once and
 * tested against every stored row of the key.
 *
 * @param predicate bound to the read columns: `columns(0)` of the left row, then `columns(1)` of the right row
 * @param columns   per side, the positions of the columns the predicate reads, in row order
 * @param schemas   per side, the row's schema
 */
final class JoinCondition private (predicate: Expression, columns: Array[Array[Int]], schemas: Array[StructType])
    extends Serializable {
  @transient private lazy val evaluator: BasePredicate = {
    val compiled = Predicate.create(predicate)
    compiled.initialize(0)
    compiled
  }
  private val identity = schemas.map(s => s.fields.indices.toArray)
  @transient private lazy val joined = new JoinedRow()

  /** The columns of `row` of `side` (0 left, 1 right) that the predicate reads, in the internal form [[apply]] takes:
   * `row` is the side's row in Spark's internal form (a packed row, [[PackedRows]]). */
  def internal(side: Int, row: InternalRow): InternalRow = internal(side, row, identity(side))

  /** [[internal]] of a row whose column `i` of the side's schema is at `positions(i)`. */
  def internal(side: Int, row: InternalRow, positions: Array[Int]): InternalRow = {
    val at = columns(side)
    val values = new Array[Any](at.length)
    var i = 0
    while (i < at.length) { values(i) = row.get(positions(at(i)), schemas(side)(at(i)).dataType); i += 1 }
    new GenericInternalRow(values)
  }

  /** Whether the pair matches (both rows from [[internal]]). */
  def apply(left: InternalRow, right: InternalRow): Boolean = evaluator.eval(joined(left, right))
}

object JoinCondition {

  /**
   * Analyse `sql` over the joined row `left ++ right` with the active session's parser, catalog and
   * settings (time zone, ANSI mode), as a filter on the joined rows would be analysed.
   *
   * @throws IllegalArgumentException when `sql` is not a boolean predicate over those columns, or
   *                                  holds an expression that only Spark's planner can run (a
   *                                  Python UDF, a subquery, the current time: see [[unevaluable]])
   */
  def bind(sql: String, left: StructType, right: StructType): JoinCondition = {
    val expression = analyse(sql, left, right)
    if (expression.dataType != BooleanType)
      throw new IllegalArgumentException(
        s"residual predicate '$sql' is ${expression.dataType.simpleString}, not boolean"
      )
    unevaluableIn(expression).foreach { name =>
      throw new IllegalArgumentException(
        s"residual predicate '$sql' holds $name, which the jvm engine's join cannot evaluate"
      )
    }
    val read = expression.collect { case b: BoundReference => b.ordinal }.distinct.sorted.toArray
    val (fromLeft, fromRight) = read.partition(_ < left.length)
    val position = read.zipWithIndex.toMap // in the joined row -> among the read columns
    val predicate = expression.transform { case b: BoundReference => b.copy(ordinal = position(b.ordinal)) }
    new JoinCondition(predicate, Array(fromLeft, fromRight.map(_ - left.length)), Array(left, right))
  }

  /**
   * The name of an expression in `sql` that the join cannot evaluate itself (a Python UDF, a
   * subquery: Spark's planner runs those in their own operators; the current time, which Spark fixes
   * per micro-batch), or null when there is none.
   * For the Python planner (`regular_join`), which runs such a predicate as a Spark filter instead.
   *
   * @param leftJson  the left columns (Spark's JSON form of a struct type)
   * @param rightJson the right columns
   */
  def unevaluable(sql: String, leftJson: String, rightJson: String): String = {
    val Seq(left, right) = Seq(leftJson, rightJson).map(DataType.fromJson(_).asInstanceOf[StructType])
    unevaluableIn(analyse(sql, left, right)).orNull
  }

  private def unevaluableIn(expression: Expression): Option[String] =
    expression.find(e => e.isInstanceOf[Unevaluable] || readsTheCurrentTime(e)).map(_.prettyName)

  /** Whether `e` is current_timestamp(), now(), current_date() or another of the functions whose value Spark fixes
   * per micro-batch (its optimizer's `ComputeCurrentTime` in each batch's plan): a predicate bound once with the
   * operator would keep one time for the whole query, so the planner leaves it to a Spark filter. Asked of
   * Spark's own rule, so that its list, not a copy of it, decides: `e` is one when the rule rewrites it and none of
   * its children (`current_time(3)` has its precision as a child). */
  private def readsTheCurrentTime(e: Expression): Boolean = {
    def rewritten(x: Expression): Boolean = {
      val plan = Project(Seq(Alias(x, "e")()), OneRowRelation())
      !ComputeCurrentTime(plan).fastEquals(plan)
    }
    rewritten(e) && !e.children.exists(rewritten)
  }

  /** `sql` analysed and bound to the joined row. */
  private def analyse(sql: String, left: StructType, right: StructType): Expression = {
    val session = SparkSession.active.asInstanceOf[org.apache.spark.sql.classic.SparkSession]
    val relation = LocalRelation(DataTypeUtils.toAttributes(StructType(left.fields ++ right.fields)))
    val plan = Project(Seq(Alias(session.sessionState.sqlParser.parseExpression(sql), "residual")()), relation)
    val analyzed = session.sessionState.executePlan(plan)
    analyzed.assertAnalyzed()
    // What the optimizer's first batch does to any plan: runtime-replaceable functions by their replacements.
    val finished = ReplaceExpressions(analyzed.analyzed)
    finished match {
      case Project(Seq(Alias(e, _)), child) => BindReferences.bindReference(e, child.output)
      case other                            =>
        throw new IllegalArgumentException(s"residual predicate '$sql' analysed to an unexpected plan: $other")
    }
  }
}
