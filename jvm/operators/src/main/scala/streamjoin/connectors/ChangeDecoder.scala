package streamjoin.connectors

import java.math.{BigDecimal => JBigDecimal}
import java.nio.ByteBuffer
import java.nio.charset.{CodingErrorAction, StandardCharsets}
import java.time.{DateTimeException, LocalDate, LocalDateTime, ZoneId, ZonedDateTime}
import java.util.{HashMap => JHashMap}

import scala.util.control.{ControlThrowable, NonFatal}

import com.fasterxml.jackson.core.{JsonFactory, JsonFactoryBuilder, JsonParser, JsonToken, StreamReadFeature}
import org.apache.spark.sql.{Column, Row}
import org.apache.spark.sql.api.java.UDF2
import org.apache.spark.sql.catalyst.expressions.GenericRow
import org.apache.spark.sql.functions.udf
import org.apache.spark.sql.types._

import streamjoin.operators.ChangeDecoderSpec

/**
 * The jvm engine's decoder of `json` (upsert-kafka's too) and `debezium-json` Kafka records: one pass of
 * Jackson's streaming parser per record gives the record's changes, typed.
 *
 * It is a fast path, not a second specification. The Spark SQL decoder of `streamjoin/connectors/formats.py`
 * (over VARIANT, with every dead-letter reason) stays the definition; this one answers only for a record it is
 * sure of — valid UTF-8 JSON, no duplicate field anywhere, the envelope and op of its format, every declared
 * column absent, JSON null or of the plain JSON kind its type is read from (a string for STRING / DATE /
 * TIMESTAMP, a number for the integer types, a number or its string for DECIMAL, `true` / `false` for BOOLEAN)
 * with a value that converts exactly, and no primary-key column null — and gives null for any other record,
 * which the Spark SQL decoder then reads (`CASE WHEN fast IS NULL THEN …`). So a good record costs one parse
 * instead of a few variant operations per column, and a bad or unusual one gets exactly the Spark SQL decoder's
 * rows or dead-letter reason. `tests/test_change_decoder.py` checks the two agree on random records.
 *
 * The values it accepts, and why they equal the Spark SQL decoder's (Spark's casts from VARIANT):
 *  - integers: an integer token in the type's range (no float token: Spark casts `1.7` but the fast
 *    path leaves that to it);
 *  - DECIMAL(p, s): a number without exponent, or a string of one (Debezium's `decimal.handling.mode`
 *    `string`), `-?digits[.digits]`, whose scale is at most s and whose digits fit p (Spark's `parse_json`
 *    stores such a number as an exact decimal, and casts such a string exactly; a wider scale would be rounded);
 *  - DATE: `yyyy-MM-dd`; TIMESTAMP: `yyyy-MM-dd[ T]HH:mm:ss[.f{1,6}]` in the session time zone (TIMESTAMP_NTZ:
 *    as it is), a valid date and time of year 0–9999 — as Spark's `stringToTimestamp` reads them.
 *
 * An upsert-kafka source (format json) reads its primary key from the record key, a JSON object, as
 * `streamjoin/connectors/formats.py` describes; a tombstone (null value) is `-D` of the key's row.
 *
 * Built from the [[ChangeDecoderSpec]] of `streamjoin.connectors.formats._jvm_changes`.
 */
final class ChangeDecoder(spec: ChangeDecoderSpec) extends UDF2[Array[Byte], Array[Byte], Array[Row]] {
  import ChangeDecoder._

  private val format = spec.format
  private val rowkindField = spec.rowkindField.orNull
  private val columns = spec.columns
  private val primaryKey = spec.primaryKey.map(columns.fieldIndex).toArray
  private val zone = ZoneId.of(spec.timeZone)
  private val names = columns.fieldNames
  private val types = columns.fields.map(_.dataType)
  private val upsert = spec.upsert

  /** upsert-kafka: the primary-key columns' positions and their JSON fields in the record key. */
  private val keyColumns = primaryKey.zip(spec.keyFields)

  /** upsert-kafka `value.fields-include` EXCEPT_KEY: the key columns come from the key, not the value. */
  private val exceptKey = spec.exceptKey

  /** Whether column c is read from a row object: all but the key columns with EXCEPT_KEY (decided once, not per row). */
  private val inRow = names.indices.map(c => !(exceptKey && primaryKey.contains(c))).toArray

  require(format == "json" || format == "debezium-json", s"no fast decoder for format $format")
  require(!upsert || format == "json", "an upsert source reads format json")
  require(types.forall(supported), s"no fast decoder for columns $columns")

  @transient private lazy val factory: JsonFactory =
    new JsonFactoryBuilder().enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build()

  /** The record's changes, or null when the Spark SQL decoder must read it. `key` is read by an upsert source only. */
  override def call(key: Array[Byte], value: Array[Byte]): Array[Row] = {
    // A null value is a tombstone of an upsert source and skipped by the others; an empty one is skipped by all.
    if ((value == null && !upsert) || (value != null && value.length == 0)) return null
    if (upsert && (key == null || key.length == 0)) return null
    try {
      if (upsert) upsertChange(objectOf(key), if (value == null) null else objectOf(value))
      else changes(objectOf(value))
    } catch {
      // Any failure (a record it declines, JSON Jackson refuses, bytes that are not UTF-8, a date that does not
      // exist) leaves the record to the Spark SQL decoder: the fast path never fails a query.
      case Fallback | NonFatal(_) => null
    }
  }

  private def objectOf(bytes: Array[Byte]): JObject = parse(bytes) match {
    case o: JHashMap[_, _] => o.asInstanceOf[JObject]
    case _                 => throw Fallback
  }

  /** upsert-kafka (`DynamicKafkaDeserializationSchema` in upsert mode): `+I` of the value, or with a null value
   *  (a tombstone) `-D` of the key's row, the other columns null. With ALL the value's key columns win. */
  private def upsertChange(key: JObject, value: JObject): Array[Row] = {
    val fromKey = new Array[Any](names.length)
    for ((c, field) <- keyColumns) fromKey(c) = typed(types(c), key.get(field))
    val values =
      if (value == null) fromKey
      else {
        val fromValue = typedRow(value)
        if (exceptKey) for ((c, _) <- keyColumns) fromValue(c) = fromKey(c)
        fromValue
      }
    Array(checked(if (value == null) "-D" else "+I", 0, values))
  }

  private def changes(record: JObject): Array[Row] = format match {
    case "json" =>
      val kind =
        if (rowkindField == null) "+I"
        else
          record.get(rowkindField) match {
            case null | JsonNull                   => "+I"
            case k: String if RowKinds.contains(k) => k
            case _                                 => throw Fallback
          }
      Array(change(kind, 0, record))
    case _ =>
      val envelope = record.get("payload") match {
        case null | JsonNull         => record
        case payload: JHashMap[_, _] => payload.asInstanceOf[JObject]
        case _                       => throw Fallback
      }
      envelope.get("op") match {
        case "c" | "r" => Array(change("+I", 0, envelope.get("after")))
        case "u"       => Array(change("-U", 0, envelope.get("before")), change("+U", 1, envelope.get("after")))
        case "d"       => Array(change("-D", 0, envelope.get("before")))
        case _         => throw Fallback
      }
  }

  private def change(kind: String, i: Int, image: AnyRef): Row = image match {
    case row: JHashMap[_, _] => checked(kind, i, typedRow(row.asInstanceOf[JObject]))
    case _                   => throw Fallback
  }

  /** The declared columns read from the object `fields` (EXCEPT_KEY: the key columns are left null). */
  private def typedRow(fields: JObject): Array[Any] = {
    val values = new Array[Any](names.length)
    var c = 0
    while (c < names.length) {
      if (inRow(c)) values(c) = typed(types(c), fields.get(names(c)))
      c += 1
    }
    values
  }

  /** The change of `values`; a null primary-key column is a dead letter, which the Spark SQL decoder words. */
  private def checked(kind: String, i: Int, values: Array[Any]): Row = {
    for (k <- primaryKey if values(k) == null) throw Fallback
    new GenericRow(Array[Any](kind, i, new GenericRow(values)))
  }

  private def typed(dataType: DataType, json: AnyRef): Any = json match {
    case null | JsonNull => null
    case _               =>
      dataType match {
        case StringType     => json match { case s: String => s; case _ => throw Fallback }
        case BooleanType    => json match { case b: java.lang.Boolean => b; case _ => throw Fallback }
        case LongType       => integer(json, Long.MinValue, Long.MaxValue)
        case IntegerType    => integer(json, Int.MinValue, Int.MaxValue).toInt
        case ShortType      => integer(json, Short.MinValue, Short.MaxValue).toShort
        case ByteType       => integer(json, Byte.MinValue, Byte.MaxValue).toByte
        case d: DecimalType => decimal(json, d)
        case DateType       =>
          json match {
            case s: String if DatePattern.matcher(s).matches() =>
              try LocalDate.parse(s)
              catch { case _: DateTimeException => throw Fallback }
            case _ => throw Fallback
          }
        case TimestampType =>
          val zoned = ZonedDateTime.of(localTime(json), zone)
          if (zoned.getYear < 0 || zoned.getYear > 9999) throw Fallback
          zoned.toInstant
        case TimestampNTZType => localTime(json)
        case other            => throw new IllegalStateException(s"unsupported type $other")
      }
  }

  private def integer(json: AnyRef, min: Long, max: Long): Long = json match {
    case n: JsonNumber if n.integral && n.text.length <= 20 =>
      val v =
        try java.lang.Long.parseLong(n.text)
        catch { case _: NumberFormatException => throw Fallback }
      if (v < min || v > max) throw Fallback
      v
    case _ => throw Fallback
  }

  private def decimal(json: AnyRef, d: DecimalType): JBigDecimal = {
    val text = json match {
      case n: JsonNumber if n.text.length <= 80 && PlainNumber.matcher(n.text).matches() => n.text
      case s: String if s.length <= 80 && PlainNumber.matcher(s).matches()               => s
      case _                                                                             => throw Fallback
    }
    val v = new JBigDecimal(text)
    if (v.scale > d.scale) throw Fallback
    val scaled = v.setScale(d.scale)
    if (scaled.precision > d.precision) throw Fallback
    scaled
  }

  private def localTime(json: AnyRef): LocalDateTime = json match {
    case s: String =>
      val m = TimestampPattern.matcher(s)
      if (!m.matches()) throw Fallback
      val fraction = Option(m.group(7)).getOrElse("")
      val nanos = if (fraction.isEmpty) 0 else (fraction + "000000000").substring(0, 9).toInt
      try
        LocalDateTime.of(
          m.group(1).toInt,
          m.group(2).toInt,
          m.group(3).toInt,
          m.group(4).toInt,
          m.group(5).toInt,
          m.group(6).toInt,
          nanos
        )
      catch { case _: DateTimeException => throw Fallback }
    case _ => throw Fallback
  }

  private def parse(value: Array[Byte]): AnyRef = {
    // Spark reads invalid UTF-8 as U+FFFD; the Spark SQL decoder makes such a record a dead letter.
    val text = StandardCharsets.UTF_8
      .newDecoder()
      .onMalformedInput(CodingErrorAction.REPORT)
      .onUnmappableCharacter(CodingErrorAction.REPORT)
      .decode(ByteBuffer.wrap(value))
    val parser = factory.createParser(text.array(), text.arrayOffset() + text.position(), text.remaining())
    try {
      val root = read(parser, parser.nextToken())
      if (parser.nextToken() != null) throw Fallback
      root
    } finally parser.close()
  }

  /** The JSON value starting at `token`: a JObject, String, JsonNumber, Boolean, JsonNull, or JsonArray
   *  (whose elements are read, for the duplicate check, and dropped). */
  private def read(parser: JsonParser, token: JsonToken): AnyRef = token match {
    case JsonToken.START_OBJECT =>
      val fields = new JObject()
      var t = parser.nextToken()
      while (t == JsonToken.FIELD_NAME) {
        val name = parser.currentName()
        fields.put(name, read(parser, parser.nextToken()))
        t = parser.nextToken()
      }
      fields
    case JsonToken.START_ARRAY =>
      var t = parser.nextToken()
      while (t != JsonToken.END_ARRAY) {
        read(parser, t)
        t = parser.nextToken()
      }
      JsonArray
    case JsonToken.VALUE_STRING       => parser.getText
    case JsonToken.VALUE_NUMBER_INT   => JsonNumber(integral = true, parser.getText)
    case JsonToken.VALUE_NUMBER_FLOAT => JsonNumber(integral = false, parser.getText)
    case JsonToken.VALUE_TRUE         => java.lang.Boolean.TRUE
    case JsonToken.VALUE_FALSE        => java.lang.Boolean.FALSE
    case JsonToken.VALUE_NULL         => JsonNull
    case _                            => throw Fallback
  }
}

object ChangeDecoder {
  private type JObject = JHashMap[String, AnyRef]
  private final case class JsonNumber(integral: Boolean, text: String)
  private case object JsonNull
  private case object JsonArray
  private case object Fallback extends ControlThrowable

  private val RowKinds = Set("+I", "-U", "+U", "-D")
  private val PlainNumber = java.util.regex.Pattern.compile("-?\\d+(\\.\\d+)?")
  private val DatePattern = java.util.regex.Pattern.compile("\\d{4}-\\d{2}-\\d{2}")
  private val TimestampPattern =
    java.util.regex.Pattern.compile("(\\d{4})-(\\d{2})-(\\d{2})[ T](\\d{2}):(\\d{2}):(\\d{2})(?:\\.(\\d{1,6}))?")

  private def supported(t: DataType): Boolean = t match {
    case StringType | BooleanType | LongType | IntegerType | ShortType | ByteType | DateType | TimestampType |
        TimestampNTZType =>
      true
    case _: DecimalType => true
    case _              => false
  }

  /** Whether a fast decoder can be built for this format and these columns (else the Spark SQL decoder reads every record). */
  def supports(format: String, columnsJson: String): Boolean =
    (format == "json" || format == "debezium-json") &&
      DataType.fromJson(columnsJson).asInstanceOf[StructType].fields.forall(f => supported(f.dataType))

  /**
   * The column of the changes of the record `key`, `value` (BINARY): ARRAY<STRUCT<kind STRING, i INT, values STRUCT<columns>>>,
   * null where the Spark SQL decoder must read the record. `description`: a [[ChangeDecoderSpec]]'s JSON.
   */
  def column(key: Column, value: Column, description: String): Column = {
    val spec = ChangeDecoderSpec.decode(description)
    val changeType = ArrayType(
      StructType(
        Seq(StructField("kind", StringType), StructField("i", IntegerType), StructField("values", spec.columns))
      )
    )
    udf(new ChangeDecoder(spec), changeType).apply(key, value)
  }
}
