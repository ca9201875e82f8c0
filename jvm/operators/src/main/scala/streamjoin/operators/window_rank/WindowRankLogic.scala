package streamjoin.operators
package window_rank

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TTLConfig}
import org.apache.spark.sql.types._

/** The order of a rank's `ORDER BY` fields over rows of `columns`' values. */
final class SortOrder(fields: Seq[SortFieldSpec], columns: Seq[String]) extends Serializable {
  private val positions = fields.map(f => columns.indexOf(f.column)).toArray
  private val ascending = fields.map(_.ascending).toArray
  private val nullsFirst = fields.map(_.nullsFirst).toArray

  /** Negative when `a` ranks before `b`, 0 when they tie (NULLs where `nullsFirst` puts them, in any direction). */
  def compare(a: Array[Any], b: Array[Any]): Int = {
    var i = 0
    while (i < positions.length) {
      val x = a(positions(i))
      val y = b(positions(i))
      if (x == null || y == null) {
        if (!(x == null && y == null)) return (if (nullsFirst(i)) -1 else 1) * (if (x == null) 1 else -1)
      } else {
        val c = Values.compare(x, y)
        if (c != 0) return if (ascending(i)) c else -c
      }
      i += 1
    }
    0
  }
}

/**
 * Window Top-N over insert-only rows that carry their window, Flink's `WindowRankOperator` (docs/semantics.md
 * §11.3): the JVM twin of `streamjoin.runtime.window_rank.operator._WindowRankLogic`, same changes and `_seq`.
 *
 * Per partition key and window not yet fired: a row whose window's end − 1 ms is at or before the key's watermark
 * is dropped and counted in `numLateRecordsDropped`; else it is placed after every kept row that does not sort
 * after it (ties keep their arrival order, as Flink's `TopNBuffer`; with `newestFirstOnTies`, before the rows it
 * ties with, as Flink's window deduplication keeping the last row), the window keeps its first `rankEnd` rows, and
 * a timer is registered at the window's end − 1 ms. The timer emits `+I[row…, rank]` for ranks `rankStart` …
 * `rankEnd` and frees the window.
 *
 * State per partition key: a MapState `windowRankState` window end (ms) → the window's kept rows, in rank order.
 *
 * Built from a [[WindowRankSpec]].
 */
class WindowRankLogic(spec: WindowRankSpec, input: StructType) extends KeyedLogic {
  private val columns = spec.columns.map(KeyedLogic.index(input, _)).toArray
  private val endMsIndex = KeyedLogic.index(input, spec.windowEndMs)
  private val watermarkIndex = spec.watermarkColumn.map(KeyedLogic.index(input, _)).getOrElse(-1)
  private val seqIndex = KeyedLogic.index(input, KeyedLogic.SeqColumn)
  private val kindIndex = KeyedLogic.index(input, KeyedLogic.RowKindColumn)
  private val ordering = new SortOrder(spec.orderBy, spec.columns)
  private val rankEnd = spec.rankEnd.toInt
  private val after = if (spec.newestFirstOnTies) 0 else 1

  private val rowSchema = StructType(spec.columns.map(c => input(c).copy(nullable = true)))
  private val windowSchema =
    StructType(Seq(StructField("rows", ArrayType(rowSchema, containsNull = false), nullable = false)))

  @transient private var windows: CachedMapState[Long, ArrayBuffer[Array[Any]], Long, Row] = _

  override def countsLateRows: Boolean = true

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit = {
    val state: MapState[Long, Row] =
      handle.getMapState("windowRankState", Encoders.scalaLong, Encoders.row(windowSchema), ttl)
    windows = new CachedMapState[Long, ArrayBuffer[Array[Any]], Long, Row](state, identity, store, load)
  }

  private def store(rows: ArrayBuffer[Array[Any]]): Row = Row(rows.map(r => Row.fromSeq(r.toSeq)).toSeq)

  private def load(row: Row): ArrayBuffer[Array[Any]] =
    ArrayBuffer.from(row.getSeq[Row](0).map(_.toSeq.toArray[Any]))

  override def elements(rows: Iterator[Row]): Iterator[Element] =
    KeyedLogic.inOrder(rows, seqIndex).iterator.map { r =>
      val seq = SeqPath.of(r, seqIndex)
      val kind = r.getString(kindIndex)
      if (kind != RowKind.Insert)
        throw new IllegalStateException(
          s"window_rank consumes insert-only input; got $kind at _seq=${SeqPath.show(seq)}"
        )
      if (r.isNullAt(endMsIndex))
        throw new IllegalStateException(
          s"window_rank: ${spec.windowEnd} is null at _seq=${SeqPath.show(seq)}; it must not be"
        )
      val wm: java.lang.Long =
        if (watermarkIndex >= 0 && !r.isNullAt(watermarkIndex)) r.getLong(watermarkIndex) else null
      Element(seq, kind, KeyedLogic.values(r, columns), time = r.getLong(endMsIndex), watermark = wm)
    }

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] = {
    val endMs = e.time.asInstanceOf[Long]
    if (endMs - 1 <= ctx.timers.time) {
      ctx.lateDropped += 1
      return Nil
    }
    var rows = windows.get(endMs)
    if (rows == null) {
      rows = ArrayBuffer.empty[Array[Any]]
      ctx.timers.register(endMs - 1)
    }
    var at = rows.length
    while (at > 0 && ordering.compare(rows(at - 1), e.row) >= after) at -= 1
    if (at < rankEnd) {
      rows.insert(at, e.row)
      if (rows.length > rankEnd) rows.remove(rankEnd, rows.length - rankEnd)
    }
    windows.put(endMs, rows)
    Nil
  }

  override def onTimer(ctx: KeyContext, timestamp: Long): Seq[Change] = {
    val rows = windows.get(timestamp + 1)
    if (rows == null) return Nil
    windows.remove(timestamp + 1)
    rows.iterator.zipWithIndex.collect {
      case (row, i) if i + 1 >= spec.rankStart => Change(RowKind.Insert, row ++ Array[Any]((i + 1).toLong))
    }.toSeq
  }

  override def finish(ctx: KeyContext): Unit = windows.flush()
}
