package streamjoin.operators

import java.nio.ByteBuffer

import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.CatalystTypeConverters
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection
import org.apache.spark.sql.streaming.{OutputMode, TwsTester}
import org.apache.spark.sql.types._

/** One change an operator emitted: its RowKind, its output values (unpacked), its `_seq` path. */
final case class Out(kind: String, values: Seq[Any], seq: Array[Byte]) {
  override def toString: String = s"$kind${values.mkString("(", ", ", ")")}@${SeqPath.show(seq)}"
}

/**
 * A [[KeyedLogic]] run as the jvm engine runs it — [[Operators.operator]]'s [[KeyedOperator]] — driven key visit by
 * key visit by Spark's in-memory `TwsTester`, without a SparkSession or a streaming query (as the tools jar's
 * `LocalRun` does for the differential tests, on external rows instead of JSON).
 *
 * Rows are given in the logic's input schema with external values; the harness turns a source `_seq` (a LONG)
 * into its 8-byte root path and packs the STRUCT columns the logic takes packed ([[KeyedLogic.packedInput]]), as
 * [[Operators.apply]] does. A packed output is unpacked with `outputData`, the output's data columns.
 *
 * @param input      the logic's input schema (`_seq` BINARY, as the operator reads it)
 * @param logic      the [[KeyedLogic]] class
 * @param spec       its spec (a case class of `OperatorSpecs.scala`)
 * @param clock      the [[Clock]]
 * @param stateTtlMs state TTL in ms, 0 for none
 * @param outputData for a logic with a packed output, the output's data columns
 */
final class OperatorHarness(
    input: StructType,
    logic: Class[_ <: KeyedLogic],
    spec: AnyRef,
    clock: String = Clock.None,
    stateTtlMs: Long = 0L,
    outputData: StructType = null
) {
  val operator: KeyedOperator = Operators.operator(input, logic, spec, clock, stateTtlMs, assertions = true)
  private var wallClockMs = 0L
  operator.wallClock = () => wallClockMs

  private val seqIndex = input.fieldIndex(KeyedLogic.SeqColumn)
  private val packers: Map[Int, Any => Array[Byte]] = operator.logic.packedInput.map { name =>
    val i = input.fieldIndex(name)
    val struct = input(i).dataType.asInstanceOf[StructType]
    val toInternal = CatalystTypeConverters.createToCatalystConverter(struct)
    val project = UnsafeProjection.create(struct)
    i -> ((v: Any) =>
      if (v == null) null
      else PackedRows.bytes(project(toInternal(v).asInstanceOf[org.apache.spark.sql.catalyst.InternalRow]))
    )
  }.toMap
  private val toScala =
    if (outputData == null) null else CatalystTypeConverters.createToScalaConverter(outputData)

  val tester = new TwsTester[Row, Row, Row](
    operator,
    List(),
    KeyedOperator.timeMode(clock, stateTtlMs),
    OutputMode.Append(),
    Some((_: Row) => Long.MaxValue) // no row is late to Spark: the operators apply Flink's rules
  )

  /** One visit of `key` with `rows` (a LONG `_seq` becomes its root path); the changes emitted. */
  def visit(key: Row, rows: Row*): Seq[Out] = {
    val prepared = rows.map { r =>
      val values = r.toSeq.toArray
      values(seqIndex) = values(seqIndex) match {
        case n: Long           => OperatorHarness.root(n)
        case n: Int            => OperatorHarness.root(n.toLong)
        case path: Array[Byte] => path
        case other             => throw new IllegalArgumentException(s"_seq $other")
      }
      packers.foreach { case (i, pack) => values(i) = pack(values(i)) }
      Row.fromSeq(values.toSeq)
    }
    changes(tester.test(key, prepared.toList))
  }

  /** Spark's watermark moves to `ms` (it must rise): the changes the expired timers emit. */
  def watermark(ms: Long): Seq[Out] = changes(tester.setWatermark(ms))

  /** Spark's processing time moves to `ms` (it must rise): the changes the expired timers emit. */
  def processingTime(ms: Long): Seq[Out] = changes(tester.setProcessingTime(ms))

  /** The wall clock the `instant` clock reads. */
  def wallClock(ms: Long): Unit = wallClockMs = ms

  def value(state: String, key: Row): Option[Row] = tester.peekValueState[Row](state, key)

  def map[K, V](state: String, key: Row): Map[K, V] = tester.peekMapState[K, V](state, key)

  def list(state: String, key: Row): List[Row] = tester.peekListState[Row](state, key)

  /** The key's timers as the shell keeps them: (time, registered timers), or None when it keeps none. */
  def timers(key: Row): Option[(Long, Seq[Long])] = value("timers", key).map(r => (r.getLong(0), r.getSeq[Long](1)))

  /** The key's late-row count (`numLateRecordsDropped`), 0 when none. */
  def lateDropped(key: Row): Long = value("numLateRecordsDropped", key).map(_.getLong(0)).getOrElse(0L)

  private def changes(rows: List[Row]): Seq[Out] = rows.map { r =>
    val n = r.length
    val values =
      if (toScala == null) r.toSeq.take(n - 2)
      else {
        val bytes = r.getAs[Array[Byte]](0)
        toScala(PackedRows.point(bytes, outputData.length)).asInstanceOf[Row].toSeq
      }
    Out(r.getString(n - 2), values, r.getAs[Array[Byte]](n - 1))
  }
}

object OperatorHarness {

  /** A source change's `_seq` path: its LONG as the 8-byte root. */
  def root(n: Long): Array[Byte] = ByteBuffer.allocate(8).putLong(n).array()
}

/** Helpers of the suites: schema building, kinds and values of changes. */
object Changes {

  /** The result type the Python side puts in an aggregate's spec (`streamjoin.runtime.aggregates.result_type`). */
  def call(function: String, column: String, input: StructType): AggregateCallSpec = {
    val t = Option(column).map(input(_).dataType)
    val result = (function, t) match {
      case ("COUNT" | "COUNT_DISTINCT", _) => LongType
      case ("SUM", Some(d: DecimalType))   => DecimalType(38, d.scale)
      case ("AVG", Some(d: DecimalType))   => DecimalType(38, math.max(6, d.scale))
      case (_, Some(other))                => other
      case (_, None)                       => LongType
    }
    AggregateCallSpec(function, Option(column), result)
  }
  def field(name: String, t: DataType): StructField = StructField(name, t, nullable = true)

  /** The changelog columns every logic reads after its own: `_rowkind`, `_seq`. */
  val changelogColumns: Seq[StructField] =
    Seq(field(KeyedLogic.RowKindColumn, StringType), field(KeyedLogic.SeqColumn, BinaryType))

  def schema(fields: StructField*): StructType = StructType(fields)

  /** The changes as `kind(values...)` strings, what the suites compare (values as Scala prints them). */
  def show(changes: Seq[Out]): Seq[String] =
    changes.map(c => s"${c.kind}${c.values.map(show).mkString("(", ", ", ")")}")

  private def show(v: Any): String = v match {
    case null  => "null"
    case other => other.toString
  }
}
