package streamjoin.operators

import java.math.{BigDecimal => JBigDecimal, RoundingMode}

import com.fasterxml.jackson.databind.JsonNode

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TTLConfig}
import org.apache.spark.sql.types._

/**
 * A value → multiplicity map of one aggregate (Flink's `MapView`): MIN/MAX with retraction and
 * COUNT(DISTINCT) keep every value's multiplicity. Absent values have multiplicity 0.
 */
trait AggregateView {
  def get(value: Any): Long
  def put(value: Any, count: Long): Unit
  def remove(value: Any): Unit
  def keys: Iterator[Any]
  def clear(): Unit

  /** Write the visit's changes to the state: call before the key's visit ends ([[CachedMapState]]). */
  def flush(): Unit
}

/**
 * An [[AggregateView]] backed by a `MapState[Row(value), Row(count)]`, through a key visit's
 * [[CachedMapState]]: a value's count is read at most once and written at most once per visit.
 */
final class MapStateView(state: MapState[Row, Row]) extends AggregateView {
  // Binary values are arrays: compared by content in the cache through a ByteBuffer.
  private def cacheKey(value: Any): Any = value match {
    case bytes: Array[Byte] => java.nio.ByteBuffer.wrap(bytes)
    case other              => other
  }
  private val cached = new CachedMapState[Any, java.lang.Long, Row, Row](
    state,
    {
      case buffer: java.nio.ByteBuffer => Row(buffer.array())
      case other                       => Row(other)
    },
    count => Row(count.longValue()),
    row => java.lang.Long.valueOf(row.getLong(0))
  )

  def get(value: Any): Long = {
    val count = cached.get(cacheKey(value))
    if (count == null) 0L else count.longValue()
  }
  def put(value: Any, count: Long): Unit = cached.put(cacheKey(value), java.lang.Long.valueOf(count))
  def remove(value: Any): Unit = cached.remove(cacheKey(value))
  def keys: Iterator[Any] = cached.keys(row => cacheKey(row.get(0))).map {
    case buffer: java.nio.ByteBuffer => buffer.array()
    case other                       => other
  }
  def clear(): Unit = cached.clear()
  def flush(): Unit = cached.flush()
}

/**
 * A typed aggregate function with retraction, the JVM twin of one class of
 * `streamjoin.runtime.aggregates` (Flink's built-in functions and their `*WithRetractAggFunction`).
 * An accumulator is an `Array[Any]` laid out as [[accFields]] (stored as one struct); functions
 * with [[usesView]] also get their [[AggregateView]]. The result type comes with the spec
 * (`streamjoin.runtime.aggregates.result_type` decides it).
 */
abstract class AggregateFunction(val inputType: DataType, val resultType: DataType, val retractable: Boolean)
    extends Serializable {
  def usesView: Boolean = false
  def accFields: Seq[StructField]
  def create(): Array[Any]
  def accumulate(acc: Array[Any], value: Any, view: AggregateView): Unit
  def retract(acc: Array[Any], value: Any, view: AggregateView): Unit

  /** The current result; a FLOAT SUM or AVG is still the DOUBLE it is computed in (see [[result]]). */
  def getValue(acc: Array[Any], view: AggregateView): Any

  /** A [[getValue]] as a value of [[resultType]]. */
  def result(value: Any): Any = value

  /** The accumulator as it is stored, and back. */
  def store(acc: Array[Any]): Row = Row.fromSeq(acc.toSeq)
  def load(row: Row): Array[Any] = row.toSeq.toArray

  /** The Python logic's error for a retraction into an insert-only function (`StateError`). */
  protected def cannotRetract(pythonName: String, value: Any): Nothing =
    throw new IllegalStateException(
      s"$pythonName was built for insert-only input and cannot retract ${Aggregates.repr(value)}"
    )
}

/** COUNT(col) / COUNT(*): nulls are not counted unless it is COUNT(*). Accumulator: count. */
final class CountFunction(inputType: DataType, resultType: DataType, retractable: Boolean, star: Boolean)
    extends AggregateFunction(inputType, resultType, retractable) {
  def accFields: Seq[StructField] = Seq(StructField("count", LongType, nullable = false))
  def create(): Array[Any] = Array(0L)
  def accumulate(acc: Array[Any], value: Any, view: AggregateView): Unit =
    if (star || value != null) acc(0) = acc(0).asInstanceOf[Long] + 1
  def retract(acc: Array[Any], value: Any, view: AggregateView): Unit =
    if (star || value != null) acc(0) = acc(0).asInstanceOf[Long] - 1
  def getValue(acc: Array[Any], view: AggregateView): Any = acc(0)
}

/** COUNT(DISTINCT col): the view's values with a multiplicity > 0. Accumulator: that count. */
final class CountDistinctFunction(inputType: DataType, resultType: DataType, retractable: Boolean)
    extends AggregateFunction(inputType, resultType, retractable) {
  override def usesView: Boolean = true
  def accFields: Seq[StructField] = Seq(StructField("count", LongType, nullable = false))
  def create(): Array[Any] = Array(0L)
  def accumulate(acc: Array[Any], value: Any, view: AggregateView): Unit = if (value != null) add(acc, view, value, 1)
  def retract(acc: Array[Any], value: Any, view: AggregateView): Unit = if (value != null) add(acc, view, value, -1)
  def getValue(acc: Array[Any], view: AggregateView): Any = acc(0)

  // A multiplicity may go below zero (a retraction before its accumulation, as Flink's MapView
  // functions tolerate); such a value is not counted until it is back above zero.
  private def add(acc: Array[Any], view: AggregateView, value: Any, delta: Long): Unit = {
    val before = view.get(value)
    val after = before + delta
    if (after == 0) view.remove(value) else view.put(value, after)
    acc(0) = acc(0).asInstanceOf[Long] + (if (after > 0) 1 else 0) - (if (before > 0) 1 else 0)
  }
}

/**
 * Numbers as SUM and AVG add them: integral types in a wrapping LONG (Java's overflow; the result
 * is narrowed to the input type, as Python's `_wrap`), FLOAT/DOUBLE in DOUBLE, DECIMAL exactly.
 */
private[operators] final class Arithmetic(inputType: DataType) extends Serializable {
  val integral: Boolean = inputType match {
    case ByteType | ShortType | IntegerType | LongType => true
    case _                                             => false
  }
  val decimal: Boolean = inputType.isInstanceOf[DecimalType]

  /** The type sums are kept in. */
  val sumType: DataType =
    if (integral) LongType else if (decimal) DecimalType(38, inputType.asInstanceOf[DecimalType].scale) else DoubleType

  val zero: Any = if (integral) 0L else if (decimal) JBigDecimal.ZERO else 0.0

  def widen(value: Any): Any =
    if (integral) value.asInstanceOf[Number].longValue()
    else if (decimal) value
    else value.asInstanceOf[Number].doubleValue()

  def plus(a: Any, b: Any): Any =
    if (integral) a.asInstanceOf[Long] + b.asInstanceOf[Long]
    else if (decimal) a.asInstanceOf[JBigDecimal].add(b.asInstanceOf[JBigDecimal])
    else a.asInstanceOf[Double] + b.asInstanceOf[Double]

  def negate(a: Any): Any =
    if (integral) -a.asInstanceOf[Long]
    else if (decimal) a.asInstanceOf[JBigDecimal].negate()
    else -a.asInstanceOf[Double]

  /** A LONG as a value of the integral input type (wrapping around). */
  def narrow(value: Any): Any = inputType match {
    case ByteType    => value.asInstanceOf[Long].toByte
    case ShortType   => value.asInstanceOf[Long].toShort
    case IntegerType => value.asInstanceOf[Long].toInt
    case _           => value
  }

  /** A FLOAT input's DOUBLE sum or average as a FLOAT (as Spark stores the Python engine's result). */
  def result(value: Any): Any =
    if (value != null && inputType == FloatType) value.asInstanceOf[Double].toFloat else value
}

/** SUM: NULL over no values; integral sums wrap like Java; DECIMAL(p, s) sums as DECIMAL(38, s). Accumulator: sum, count. */
final class SumFunction(inputType: DataType, resultType: DataType, retractable: Boolean)
    extends AggregateFunction(inputType, resultType, retractable) {
  private val arithmetic = new Arithmetic(inputType)
  def accFields: Seq[StructField] =
    Seq(StructField("sum", arithmetic.sumType, nullable = true), StructField("count", LongType, nullable = false))
  def create(): Array[Any] = Array(null, 0L)
  def accumulate(acc: Array[Any], value: Any, view: AggregateView): Unit = if (value != null) {
    val v = arithmetic.widen(value)
    acc(0) = if (acc(0) == null) v else arithmetic.plus(acc(0), v)
    acc(1) = acc(1).asInstanceOf[Long] + 1
  }
  def retract(acc: Array[Any], value: Any, view: AggregateView): Unit = if (value != null) {
    val v = arithmetic.negate(arithmetic.widen(value))
    acc(0) = if (acc(0) == null) v else arithmetic.plus(acc(0), v)
    acc(1) = acc(1).asInstanceOf[Long] - 1
  }
  def getValue(acc: Array[Any], view: AggregateView): Any =
    if (acc(1).asInstanceOf[Long] == 0 || acc(0) == null) null else arithmetic.narrow(acc(0))
  override def result(value: Any): Any = arithmetic.result(value)
}

/**
 * AVG: sum / count in the input's type (Flink's `AvgAggFunction` family): integral AVG sums in
 * BIGINT and truncates toward zero; DECIMAL(p, s) gives DECIMAL(38, max(6, s)) rounded HALF_UP.
 * Accumulator: sum, count.
 */
final class AvgFunction(inputType: DataType, resultType: DataType, retractable: Boolean)
    extends AggregateFunction(inputType, resultType, retractable) {
  private val arithmetic = new Arithmetic(inputType)
  def accFields: Seq[StructField] =
    Seq(StructField("sum", arithmetic.sumType, nullable = false), StructField("count", LongType, nullable = false))
  def create(): Array[Any] = Array(arithmetic.zero, 0L)
  def accumulate(acc: Array[Any], value: Any, view: AggregateView): Unit = if (value != null) {
    acc(0) = arithmetic.plus(acc(0), arithmetic.widen(value))
    acc(1) = acc(1).asInstanceOf[Long] + 1
  }
  def retract(acc: Array[Any], value: Any, view: AggregateView): Unit = if (value != null) {
    acc(0) = arithmetic.plus(acc(0), arithmetic.negate(arithmetic.widen(value)))
    acc(1) = acc(1).asInstanceOf[Long] - 1
  }
  def getValue(acc: Array[Any], view: AggregateView): Any = {
    val count = acc(1).asInstanceOf[Long]
    if (count == 0) null
    else if (arithmetic.integral)
      arithmetic.narrow(acc(0).asInstanceOf[Long] / count) // Java's division truncates toward zero
    else if (arithmetic.decimal)
      acc(0)
        .asInstanceOf[JBigDecimal]
        .divide(JBigDecimal.valueOf(count), resultType.asInstanceOf[DecimalType].scale, RoundingMode.HALF_UP)
    else acc(0).asInstanceOf[Double] / count
  }
  override def result(value: Any): Any = arithmetic.result(value)
}

/**
 * MIN / MAX. Insert-only: the extreme alone. Retractable: Flink's `MaxWithRetractAggFunction` /
 * `MinWithRetractAggFunction` step for step, also on an invalid changelog (docs/semantics.md §1.9):
 * a view value → multiplicity and the number of values whose multiplicity went 0 → 1 and not yet
 * back (Flink's mapSize); the result is NULL when that number is 0. Accumulator: extreme, mapSize.
 */
final class ExtremeFunction(inputType: DataType, resultType: DataType, retractable: Boolean, largest: Boolean)
    extends AggregateFunction(inputType, resultType, retractable) {
  override def usesView: Boolean = retractable
  def accFields: Seq[StructField] =
    Seq(StructField("extreme", inputType, nullable = true), StructField("mapSize", LongType, nullable = false))
  def create(): Array[Any] = Array(null, 0L)

  private def better(a: Any, b: Any): Boolean = {
    val c = Values.compare(a, b)
    if (largest) c > 0 else c < 0
  }

  def accumulate(acc: Array[Any], value: Any, view: AggregateView): Unit = if (value != null) {
    if (acc(0) == null || (retractable && acc(1).asInstanceOf[Long] == 0) || better(value, acc(0))) acc(0) = value
    if (retractable) {
      val count = view.get(value) + 1
      if (count == 0) view.remove(value) else view.put(value, count)
      if (count == 1) acc(1) = acc(1).asInstanceOf[Long] + 1
    }
  }

  def retract(acc: Array[Any], value: Any, view: AggregateView): Unit = {
    if (!retractable) cannotRetract("_Extreme", value)
    if (value != null) {
      val count = view.get(value) - 1
      if (count != 0) view.put(value, count)
      else {
        view.remove(value)
        acc(1) = acc(1).asInstanceOf[Long] - 1
        if (acc(1).asInstanceOf[Long] == 0) acc(0) = null
        else if (Values.compare(value, acc(0)) == 0) {
          // The extreme left: the next one is the best of every value in the view (as Flink does).
          var next: Any = null
          view.keys.foreach { v => if (next == null || better(v, next)) next = v }
          acc(0) = next
          if (next == null) acc(1) = 0L
        }
      }
    }
  }

  def getValue(acc: Array[Any], view: AggregateView): Any =
    if (!retractable || acc(1).asInstanceOf[Long] > 0) acc(0) else null
}

/**
 * FIRST_VALUE / LAST_VALUE of the non-null values, in arrival order. Retractable (bounded OVER
 * frames, whose rows leave in arrival order): keeps the frame's non-null values and drops the
 * oldest equal one on retraction. Accumulator: the values (a `Vector`, stored as an array).
 */
final class PositionalFunction(inputType: DataType, resultType: DataType, retractable: Boolean, first: Boolean)
    extends AggregateFunction(inputType, resultType, retractable) {
  def accFields: Seq[StructField] = Seq(
    StructField("values", ArrayType(inputType, containsNull = false), nullable = false)
  )
  def create(): Array[Any] = Array(Vector.empty[Any])
  override def store(acc: Array[Any]): Row = Row(acc(0))
  override def load(row: Row): Array[Any] = Array(row.getSeq[Any](0).toVector)

  def accumulate(acc: Array[Any], value: Any, view: AggregateView): Unit = if (value != null) {
    val values = acc(0).asInstanceOf[Vector[Any]]
    acc(0) = if (retractable || values.isEmpty) values :+ value else if (!first) Vector(value) else values
  }

  def retract(acc: Array[Any], value: Any, view: AggregateView): Unit = {
    if (!retractable) cannotRetract("_Positional", value)
    if (value != null) {
      val values = acc(0).asInstanceOf[Vector[Any]]
      val i = values.indexWhere(_ == value)
      if (i < 0) throw new IllegalStateException(s"list.remove(x): x not in list") // Python's list.remove
      acc(0) = values.patch(i, Nil, 1)
    }
  }

  def getValue(acc: Array[Any], view: AggregateView): Any = {
    val values = acc(0).asInstanceOf[Vector[Any]]
    if (values.isEmpty) null else if (first) values.head else values.last
  }
}

/**
 * Several aggregate functions evaluated together over one row shape (the JVM twin of
 * `streamjoin.runtime.aggregates.Aggregates`).
 *
 * @param calls       the aggregates, in output order
 * @param input       the schema the argument columns are looked up in
 * @param columns     the row's columns, in the order rows are given (arrays of values)
 * @param retractable whether values will be retracted (a changelog GROUP BY input, a bounded OVER frame)
 */
final class Aggregates(calls: Seq[AggregateCallSpec], input: StructType, columns: Seq[String], retractable: Boolean)
    extends Serializable {
  private val argPositions: Array[Int] = calls.map(_.column.map(columns.indexOf(_)).getOrElse(-1)).toArray
  val functions: Array[AggregateFunction] = calls.toArray.map { c =>
    val (t, r) = (c.column.map(input(_).dataType).orNull, c.resultType)
    c.function match {
      case "COUNT"          => new CountFunction(t, r, retractable, star = c.column.isEmpty)
      case "COUNT_DISTINCT" => new CountDistinctFunction(t, r, retractable)
      case "SUM"            => new SumFunction(t, r, retractable)
      case "AVG"            => new AvgFunction(t, r, retractable)
      case "MIN"            => new ExtremeFunction(t, r, retractable, largest = false)
      case "MAX"            => new ExtremeFunction(t, r, retractable, largest = true)
      case "FIRST_VALUE"    => new PositionalFunction(t, r, retractable, first = true)
      case "LAST_VALUE"     => new PositionalFunction(t, r, retractable, first = false)
      case other            => throw new IllegalArgumentException(s"unknown aggregate function $other")
    }
  }

  /** The accumulators' stored form: one struct per function. */
  val accSchema: StructType = StructType(
    functions.indices.map(i => StructField(s"acc_$i", StructType(functions(i).accFields), nullable = false))
  )

  def create(): Array[Array[Any]] = functions.map(_.create())

  def store(accs: Array[Array[Any]]): Row = Row.fromSeq(functions.indices.map(i => functions(i).store(accs(i))))

  def load(row: Row): Array[Array[Any]] = functions.indices.map(i => functions(i).load(row.getStruct(i))).toArray

  /**
   * The views as MapStates `{function}_{i}` (value → count), as the Python operator names them;
   * null where a function keeps none.
   */
  def openViews(handle: StatefulProcessorHandle, ttl: TTLConfig): Array[AggregateView] = functions.indices.map { i =>
    val f = functions(i)
    if (!f.usesView) null
    else {
      val key = StructType(Seq(StructField("value", f.inputType, nullable = true)))
      val value = StructType(Seq(StructField("count", LongType, nullable = false)))
      new MapStateView(
        handle.getMapState(s"${calls(i).function.toLowerCase}_$i", Encoders.row(key), Encoders.row(value), ttl)
      )
        .asInstanceOf[AggregateView]
    }
  }.toArray

  /** The aggregates' argument values in `row` (null for `COUNT(*)`), in call order. */
  def args(row: Array[Any]): Array[Any] = argPositions.map(p => if (p < 0) null else row(p))

  def accumulate(accs: Array[Array[Any]], views: Array[AggregateView], args: Array[Any]): Unit = {
    var i = 0
    while (i < functions.length) { functions(i).accumulate(accs(i), args(i), views(i)); i += 1 }
  }

  def retract(accs: Array[Array[Any]], views: Array[AggregateView], args: Array[Any]): Unit = {
    var i = 0
    while (i < functions.length) { functions(i).retract(accs(i), args(i), views(i)); i += 1 }
  }

  /** The current results, as [[AggregateFunction.getValue]] gives them (compare these). */
  def getValues(accs: Array[Array[Any]], views: Array[AggregateView]): Array[Any] =
    functions.indices.map(i => functions(i).getValue(accs(i), views(i))).toArray

  /** [[getValues]] as values of the result types (emit these). */
  def results(values: Array[Any]): Array[Any] = functions.indices.map(i => functions(i).result(values(i))).toArray
}

object Aggregates {

  /** A value as Python's `repr` shows it in error messages. */
  def repr(value: Any): String = value match {
    case null                 => "None"
    case s: String            => s"'$s'"
    case d: JBigDecimal       => s"Decimal('${d.toPlainString}')"
    case b: java.lang.Boolean => if (b) "True" else "False"
    case other                => other.toString
  }
}
