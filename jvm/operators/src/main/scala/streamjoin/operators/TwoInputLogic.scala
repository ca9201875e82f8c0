package streamjoin.operators

import org.apache.spark.sql.Row
import org.apache.spark.sql.types.{StructType, TimestampType}

/**
 * A keyed two-input operator's logic over the union frame of `streamjoin.runtime.two_input`
 * (`_key0`…, `_side`, `_left`, `_right`, `_rowkind`, `_seq`): the JVM twin of
 * `streamjoin.runtime.keyed_two_input._KeyedTwoInputLogic`, as Flink runs a
 * `KeyedCoProcessOperator`. It turns a key's rows into elements in `(_seq, side)` order — the
 * side's data row (without the per-row watermark field; or, for a logic with a packed input, the
 * row struct as an `UnsafeRow`), its rowtime in epoch ms (null on processing time) and its per-row
 * watermark — and leaves the state and the decisions to the
 * operator (interval join, event-time temporal join).
 *
 * Where the key and each side's times are: a [[TwoInputSpec]]. Each change is numbered under the `_seq` of the element that caused it ([[SeqPath]]).
 */
abstract class TwoInputLogic(inputs: TwoInputSpec, input: StructType) extends KeyedLogic {
  private val keyIndexes = inputs.keyColumns.map(KeyedLogic.index(input, _)).toArray
  private val sideIndex = KeyedLogic.index(input, Contract.SideColumn)
  private val rowIndexes =
    Array(KeyedLogic.index(input, Contract.LeftRowColumn), KeyedLogic.index(input, Contract.RightRowColumn))
  private val kindIndex = KeyedLogic.index(input, KeyedLogic.RowKindColumn)
  private val seqIndex = KeyedLogic.index(input, KeyedLogic.SeqColumn)
  private val watermarkFields = inputs.rowWatermark.map(_.toArray).orNull
  private val rowtimes = inputs.rowtime.map(_.toArray).orNull

  /** Whether rows carry a rowtime (event time); else a row's time is the current processing time. */
  protected val eventTime: Boolean = rowtimes != null

  /** Each side's data columns (all nullable), without the per-row watermark field. */
  protected val dataSchemas: Array[StructType] = Array(0, 1).map { side =>
    val struct = input(rowIndexes(side)).dataType.asInstanceOf[StructType]
    val keep = struct.fields.indices.filter(i => watermarkFields == null || i != watermarkFields(side))
    StructType(keep.map(i => struct.fields(i).copy(nullable = true)))
  }

  /** Whether the key being visited has no null column (SQL's null never matches); set by [[elements]]. */
  @transient protected var joinable: Boolean = true

  /** Each side's row struct as the input has it (the per-row watermark field included): what a packed element holds. */
  protected val structSchemas: Array[StructType] = rowIndexes.map(input(_).dataType.asInstanceOf[StructType])

  /** Per side, the position in the row struct of each data column (the struct without the watermark field). */
  protected val structPositions: Array[Array[Int]] = Array(0, 1).map { side =>
    structSchemas(side).fields.indices.filter(i => watermarkFields == null || i != watermarkFields(side)).toArray
  }

  /** Whether the sides' row structs reach the logic packed ([[PackedRows]]); then elements carry `packed`, not `row`. */
  private def packed: Boolean = packedInput.nonEmpty

  if (packed && rowtimes != null) Array(0, 1).foreach { side =>
    val t = dataSchemas(side)(rowtimes(side)).dataType
    if (t != TimestampType) throw new IllegalArgumentException(s"rowtime of type ${t.simpleString}, expected TIMESTAMP")
  }

  override def elements(rows: Iterator[Row]): Iterator[Element] = {
    val ordered = rows.toArray.sortBy(r => (SeqPath.of(r, seqIndex), r.getInt(sideIndex)))(SeqPath.withSide)
    if (ordered.nonEmpty) joinable = keyIndexes.forall(i => !ordered(0).isNullAt(i))
    if (packed) return ordered.iterator.map(packedElement)
    ordered.iterator.map { r =>
      val side = r.getInt(sideIndex)
      val struct = r.getStruct(rowIndexes(side))
      var values = struct.toSeq.toArray[Any]
      var watermark: java.lang.Long = null
      if (watermarkFields != null) {
        val at = watermarkFields(side)
        if (!struct.isNullAt(at)) watermark = struct.getLong(at)
        values = values.patch(at, Nil, 1)
      }
      val time: Any = if (rowtimes == null) null else TwoInputLogic.millis(values(rowtimes(side)))
      Element(SeqPath.of(r, seqIndex), r.getString(kindIndex), values, side, time, watermark)
    }
  }

  private def packedElement(r: Row): Element = {
    val side = r.getInt(sideIndex)
    val row = PackedRows.point(r.getAs[Array[Byte]](rowIndexes(side)), structSchemas(side).length)
    val watermark: java.lang.Long =
      if (watermarkFields == null || row.isNullAt(watermarkFields(side))) null else row.getLong(watermarkFields(side))
    val time: Any =
      if (rowtimes == null) null
      else {
        val at = structPositions(side)(rowtimes(side))
        if (row.isNullAt(at)) throw new IllegalStateException("a rowtime is null; it must not be")
        Math.floorDiv(row.getLong(at), 1000L) // TIMESTAMP microseconds, floored to ms as [[TwoInputLogic.millis]]
      }
    Element(SeqPath.of(r, seqIndex), r.getString(kindIndex), null, side, time, watermark, packed = row)
  }

  /** The element's rowtime, or `now` (the processing time) for a processing-time operator. */
  protected def rowtime(e: Element, now: java.lang.Long): Long =
    if (e.time == null) now.longValue else e.time.asInstanceOf[Long]
}

object TwoInputLogic {

  /** A TIMESTAMP value as epoch ms, floored (`keyed_two_input._millis`, Spark's `unix_millis`). */
  def millis(value: Any): Long = value match {
    case t: java.sql.Timestamp => t.getTime // whole ms: sub-ms nanos are dropped, i.e. floored
    case i: java.time.Instant  => i.toEpochMilli
    case null                  => throw new IllegalStateException("a rowtime is null; it must not be")
    case other => throw new IllegalArgumentException(s"rowtime of type ${other.getClass.getName}, expected TIMESTAMP")
  }
}
