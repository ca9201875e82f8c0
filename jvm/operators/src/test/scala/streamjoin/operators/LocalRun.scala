package streamjoin.operators

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import com.fasterxml.jackson.databind.node.{ArrayNode, BooleanNode, DoubleNode, LongNode, NullNode, TextNode}

import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow
import org.apache.spark.sql.catalyst.util.{ArrayData, GenericArrayData}
import org.apache.spark.sql.streaming.{OutputMode, TwsTester}
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

/**
 * One [[KeyedOperator]] driven in process, row by row, by Spark's `TwsTester` (no streaming query):
 * the jvm half of the differential tests of `streamjoin.testing.engines`, which drives the Python
 * shell (`streamjoin.runtime.processor.KeyedProcessor`) by PySpark's `TwsTester` on the same rows.
 *
 * The operator is built as [[Operators.apply]] builds it ([[Operators.operator]]). Rows travel as
 * JSON in Spark's internal form ([[InternalJson]]) and pass through Spark's own row encoders, so
 * the logic sees the external values a query hands it, and an output value of the wrong type fails
 * as it would in a query. Spark's late-row filter is off (the operators apply Flink's rules). The
 * `instant` clock reads a wall clock set by [[setWallClock]], not the system's.
 *
 * @param inputJson  the prepared input's schema (Spark's JSON form)
 * @param keys       the grouping key columns
 * @param outputJson the output schema: output columns, `_rowkind`, `_seq`
 * @param logicClass the [[KeyedLogic]] subclass
 * @param spec       the logic's JSON description
 * @param clock      [[Clock]] name
 * @param stateTtlMs state TTL in ms, <= 0 for none
 */
final class LocalRun(
    inputJson: String,
    keys: java.util.List[String],
    outputJson: String,
    logicClass: String,
    spec: String,
    clock: String,
    stateTtlMs: Long
) {
  private val input = DataType.fromJson(inputJson).asInstanceOf[StructType]
  private val output = DataType.fromJson(outputJson).asInstanceOf[StructType]
  private val keySchema = StructType(keys.asScala.map(c => input(c)).toSeq)
  private val operator = Operators.operator(input, logicClass, spec, clock, stateTtlMs, assertions = true)
  private val packInput = PackedRows.packer(input, operator.logic.packedInput)
  private val readInput =
    ExpressionEncoder(PackedRows.packedSchema(input, operator.logic.packedInput)).resolveAndBind().createDeserializer()
  private val readKey = ExpressionEncoder(keySchema).resolveAndBind().createDeserializer()
  private val writeOutput = ExpressionEncoder(
    if (operator.logic.packedOutput) PackedRows.packedOutputSchema(output) else output
  ).resolveAndBind().createSerializer()
  private var wallClockMs = 0L
  operator.wallClock = () => wallClockMs
  private val tester = new TwsTester[Row, Row, Row](
    operator,
    List(),
    KeyedOperator.timeMode(clock, stateTtlMs),
    OutputMode.Append(),
    Some((_: Row) => Long.MaxValue)
  )

  /** One visit of a key (`keyJson`: its values) with rows `rowsJson`; the output rows, as JSON. */
  def test(keyJson: String, rowsJson: String): String = {
    val key = readKey(InternalJson.row(LocalRun.mapper.readTree(keyJson), keySchema))
    val rows = LocalRun.mapper
      .readTree(rowsJson)
      .elements()
      .asScala
      .map(n => readInput(packInput(InternalJson.row(n, input))))
      .toList
    changes(tester.test(key, rows))
  }

  /** Spark's watermark moves to `ms` (it must rise); the rows the expired timers emit, as JSON. */
  def setWatermark(ms: Long): String = changes(tester.setWatermark(ms))

  /** Spark's processing time moves to `ms` (it must rise); the rows the expired timers emit, as JSON. */
  def setProcessingTime(ms: Long): String = changes(tester.setProcessingTime(ms))

  /** The wall clock the `instant` clock reads is `ms` from now on (it runs in `timeMode` None, without the tester's time). */
  def setWallClock(ms: Long): Unit = wallClockMs = ms

  private def changes(rows: List[Row]): String = {
    val out = LocalRun.mapper.createArrayNode()
    rows.foreach { r =>
      val internal = writeOutput(r)
      out.add(
        InternalJson.rowJson(
          if (operator.logic.packedOutput) PackedRows.unpackRow(internal, output) else internal,
          output
        )
      )
    }
    LocalRun.mapper.writeValueAsString(out)
  }
}

object LocalRun {
  private val mapper = new ObjectMapper()
}

/**
 * Spark's internal row values as JSON, the form `streamjoin.testing.engines` writes and reads: a row
 * or struct is an array of its values; DATE days and TIMESTAMP microseconds are numbers, DECIMAL a
 * string, BINARY a hex string, a non-finite FLOAT/DOUBLE the string `NaN`, `Infinity` or `-Infinity`.
 */
private[operators] object InternalJson {
  def row(node: JsonNode, schema: StructType): InternalRow =
    new GenericInternalRow(schema.fields.indices.map(i => read(node.get(i), schema(i).dataType)).toArray[Any])

  def read(node: JsonNode, t: DataType): Any = if (node == null || node.isNull) null
  else
    t match {
      case BooleanType                                 => node.asBoolean()
      case ByteType                                    => node.asInt().toByte
      case ShortType                                   => node.asInt().toShort
      case IntegerType | DateType                      => node.asInt()
      case LongType | TimestampType | TimestampNTZType => node.asLong()
      case FloatType                                   => double(node).toFloat
      case DoubleType                                  => double(node)
      case d: DecimalType        => Decimal(new java.math.BigDecimal(node.asText()), d.precision, d.scale)
      case _: StringType         => UTF8String.fromString(node.asText())
      case BinaryType            => org.apache.commons.codec.binary.Hex.decodeHex(node.asText())
      case ArrayType(element, _) => new GenericArrayData(node.elements().asScala.map(read(_, element)).toArray[Any])
      case s: StructType         => row(node, s)
      case other                 => throw new IllegalArgumentException(s"LocalRun does not read $other values")
    }

  private def double(node: JsonNode): Double =
    if (node.isTextual) java.lang.Double.parseDouble(node.asText()) else node.asDouble()

  def rowJson(row: InternalRow, schema: StructType): ArrayNode = {
    val out = new ArrayNode(com.fasterxml.jackson.databind.node.JsonNodeFactory.instance)
    schema.fields.indices.foreach { i =>
      val t = schema(i).dataType
      out.add(if (row.isNullAt(i)) NullNode.instance else write(row.get(i, t), t))
    }
    out
  }

  private def write(v: Any, t: DataType): JsonNode = if (v == null) NullNode.instance
  else
    t match {
      case BooleanType => BooleanNode.valueOf(v.asInstanceOf[Boolean])
      case ByteType | ShortType | IntegerType | LongType | DateType | TimestampType | TimestampNTZType =>
        LongNode.valueOf(v.asInstanceOf[Number].longValue())
      case FloatType | DoubleType =>
        val d = v.asInstanceOf[Number].doubleValue()
        if (d.isNaN || d.isInfinite) TextNode.valueOf(d.toString) else DoubleNode.valueOf(d)
      case _: DecimalType => TextNode.valueOf(v.asInstanceOf[Decimal].toJavaBigDecimal.toPlainString)
      case _: StringType  => TextNode.valueOf(v.toString)
      case BinaryType     =>
        TextNode.valueOf(org.apache.commons.codec.binary.Hex.encodeHexString(v.asInstanceOf[Array[Byte]]))
      case ArrayType(element, _) =>
        val a = v.asInstanceOf[ArrayData]
        val out = new ArrayNode(com.fasterxml.jackson.databind.node.JsonNodeFactory.instance)
        (0 until a.numElements())
          .foreach(i => out.add(if (a.isNullAt(i)) NullNode.instance else write(a.get(i, element), element)))
        out
      case s: StructType => rowJson(v.asInstanceOf[InternalRow], s)
      case other         => throw new IllegalArgumentException(s"LocalRun does not write $other values")
    }
}
