package streamjoin.operators
package window_aggregate

import scala.collection.mutable

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TTLConfig}
import org.apache.spark.sql.types._

/** A window's value → multiplicity view in memory (a COUNT(DISTINCT) or retractable MIN/MAX of one window), stored
 * with the window's entry. */
final class HeapView(val counts: mutable.HashMap[Any, Long]) extends AggregateView {
  def get(value: Any): Long = counts.getOrElse(value, 0L)
  def put(value: Any, count: Long): Unit = counts.put(value, count)
  def remove(value: Any): Unit = counts.remove(value)
  def keys: Iterator[Any] = counts.keysIterator
  def clear(): Unit = counts.clear()
  def flush(): Unit = ()
}

/** One window of a group key during a visit (the JVM twin of
 * `streamjoin.runtime.window_aggregate.function.WindowAccumulator`). */
final class WindowAccumulator(
    val key: Array[Any],
    val start: Any,
    val end: Any,
    var count: Long,
    val accs: Array[Array[Any]],
    val views: Array[AggregateView]
)

/**
 * Window aggregation over rows that carry their window, Flink's `WindowAggOperator` (docs/semantics.md §11): the
 * JVM twin of `streamjoin.runtime.window_aggregate.operator._WindowAggregateLogic`, same changes and `_seq`.
 *
 * Per group key and window not yet fired: a change whose window's end − 1 ms is at or before the key's watermark is
 * dropped and counted in `numLateRecordsDropped`; else it is accumulated (`+I`/`+U`) or retracted (`-U`/`-D`) and a
 * timer is registered at the window's end − 1 ms. The timer emits `+I[key, aggregates, window_start, window_end]`
 * unless the window's count is 0, and frees the window.
 *
 * State per group key: a MapState `windowAggState` window end (ms) → the window's key values, bounds, row count,
 * accumulators and views (value → multiplicity, in the entry), read and written through a visit's
 * [[CachedMapState]].
 *
 * Built from a [[WindowAggregateSpec]].
 */
class WindowAggregateLogic(spec: WindowAggregateSpec, input: StructType) extends KeyedLogic {
  private val columns = spec.columns.map(KeyedLogic.index(input, _)).toArray
  protected val groupPositions = spec.groupBy.map(spec.columns.indexOf(_)).toArray
  protected val startPosition = spec.columns.indexOf(spec.windowStart)
  protected val endPosition = spec.columns.indexOf(spec.windowEnd)
  private val endMsIndex = KeyedLogic.index(input, spec.windowEndMs)
  private val watermarkIndex = spec.watermarkColumn.map(KeyedLogic.index(input, _)).getOrElse(-1)
  private val seqIndex = KeyedLogic.index(input, KeyedLogic.SeqColumn)
  private val kindIndex = KeyedLogic.index(input, KeyedLogic.RowKindColumn)
  protected val aggregates = new Aggregates(spec.aggregates, input, spec.columns, spec.retractable)
  protected val functions = aggregates.functions

  private val keySchema = StructType(spec.groupBy.map(c => input(c).copy(nullable = true)))
  private val viewsSchema = StructType(functions.indices.map { i =>
    val t = if (functions(i).inputType == null) BooleanType else functions(i).inputType
    val entry = StructType(Seq(StructField("value", t, nullable = true), StructField("count", LongType, false)))
    StructField(s"view_$i", ArrayType(entry, containsNull = false), nullable = true)
  })
  private val windowSchema = StructType(
    Seq(
      StructField("key", keySchema, nullable = false),
      StructField("start", input(spec.windowStart).dataType, nullable = false),
      StructField("end", input(spec.windowEnd).dataType, nullable = false),
      StructField("count", LongType, nullable = false),
      StructField("accs", aggregates.accSchema, nullable = false),
      StructField("views", viewsSchema, nullable = false)
    )
  )

  @transient private var windows: CachedMapState[Long, WindowAccumulator, Long, Row] = _

  override def countsLateRows: Boolean = true

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit = {
    val state: MapState[Long, Row] =
      handle.getMapState("windowAggState", Encoders.scalaLong, Encoders.row(windowSchema), ttl)
    windows = new CachedMapState[Long, WindowAccumulator, Long, Row](state, identity, store, load)
  }

  private def store(w: WindowAccumulator): Row = {
    val views = functions.indices.map { i =>
      w.views(i) match {
        case v: HeapView => v.counts.iterator.map { case (value, count) => Row(value, count) }.toSeq
        case _           => null
      }
    }
    Row(Row.fromSeq(w.key.toSeq), w.start, w.end, w.count, aggregates.store(w.accs), Row.fromSeq(views))
  }

  private def load(row: Row): WindowAccumulator = {
    val stored = row.getStruct(5)
    val views = functions.indices.map { i =>
      if (!functions(i).usesView) null
      else {
        val counts = mutable.HashMap[Any, Long]()
        stored.getSeq[Row](i).foreach(e => counts.put(e.get(0), e.getLong(1)))
        new HeapView(counts).asInstanceOf[AggregateView]
      }
    }.toArray
    new WindowAccumulator(
      row.getStruct(0).toSeq.toArray,
      row.get(1),
      row.get(2),
      row.getLong(3),
      aggregates.load(row.getStruct(4)),
      views
    )
  }

  protected def freshViews(): Array[AggregateView] =
    functions.map(f => if (f.usesView) new HeapView(mutable.HashMap[Any, Long]()) else null)

  override def elements(rows: Iterator[Row]): Iterator[Element] =
    KeyedLogic.inOrder(rows, seqIndex).iterator.map { r =>
      val seq = SeqPath.of(r, seqIndex)
      if (r.isNullAt(endMsIndex))
        throw new IllegalStateException(
          s"window_aggregate: ${spec.windowEnd} is null at _seq=${SeqPath.show(seq)}; it must not be"
        )
      val wm: java.lang.Long =
        if (watermarkIndex >= 0 && !r.isNullAt(watermarkIndex)) r.getLong(watermarkIndex) else null
      Element(seq, r.getString(kindIndex), KeyedLogic.values(r, columns), time = r.getLong(endMsIndex), watermark = wm)
    }

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] = {
    val endMs = e.time.asInstanceOf[Long]
    if (endMs - 1 <= ctx.timers.time) {
      ctx.lateDropped += 1
      return Nil
    }
    var window = windows.get(endMs)
    if (window == null) {
      window = new WindowAccumulator(
        groupPositions.map(e.row(_)),
        e.row(startPosition),
        e.row(endPosition),
        0L,
        aggregates.create(),
        freshViews()
      )
      ctx.timers.register(endMs - 1)
    }
    val args = aggregates.args(e.row)
    if (RowKind.isAccumulate(e.kind)) { aggregates.accumulate(window.accs, window.views, args); window.count += 1 }
    else { aggregates.retract(window.accs, window.views, args); window.count -= 1 }
    windows.put(endMs, window)
    Nil
  }

  override def onTimer(ctx: KeyContext, timestamp: Long): Seq[Change] = {
    val window = windows.get(timestamp + 1)
    if (window == null) return Nil
    windows.remove(timestamp + 1)
    if (window.count == 0) Nil
    else {
      val values = aggregates.results(aggregates.getValues(window.accs, window.views))
      Seq(Change(RowKind.Insert, window.key ++ values ++ Array(window.start, window.end)))
    }
  }

  override def finish(ctx: KeyContext): Unit = windows.flush()
}
