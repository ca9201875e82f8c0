package streamjoin.operators
package deduplicate

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.streaming.{StatefulProcessorHandle, TTLConfig, ValueState}
import org.apache.spark.sql.types._

/**
 * Deduplication, `ROW_NUMBER() OVER (PARTITION BY key ORDER BY t {ASC|DESC}) = 1`
 * (docs/semantics.md §6; Flink's `operators/deduplicate/`): the JVM twin of
 * `streamjoin.runtime.deduplicate.operator._DeduplicateLogic`, running the [[DeduplicateFunction]] the spec
 * names (the same four as the Python engine's, same outputs).
 *
 * State per key, as Flink keeps it: one value `deduplicateState`, a [[DedupState]] (the kept row, its order
 * value, its input `_seq`, `emitted`), loaded on the key's first element of a visit and written back at its end.
 *
 * Built from a [[DeduplicateSpec]] (an ordered input's order value in `_order`).
 */
class DeduplicateLogic(spec: DeduplicateSpec, input: StructType) extends KeyedLogic {
  override def outputKeyedByKey: Boolean = true
  private val ordered = spec.ordered
  private val columns = spec.columns.map(KeyedLogic.index(input, _)).toArray
  private val seqIndex = KeyedLogic.index(input, KeyedLogic.SeqColumn)
  private val kindIndex = KeyedLogic.index(input, KeyedLogic.RowKindColumn)
  private val orderIndex = if (ordered) KeyedLogic.index(input, "_order") else -1
  private val watermarkIndex = spec.watermarkColumn.map(KeyedLogic.index(input, _)).getOrElse(-1)
  private val function: DeduplicateFunction = {
    val proctime = spec.proctimeColumns.toSet
    val compared = spec.columns.zipWithIndex.collect { case (c, i) if !proctime(c) => i }.toArray
    DeduplicateFunction(spec.keep == "first", rowtime = ordered, compared, spec.stateTtl)
  }
  private val rowSchema = StructType(columns.map(i => input(i).copy(nullable = true)))
  private val stateSchema = StructType(
    Seq(
      StructField("row", rowSchema, nullable = true),
      StructField("time", if (ordered) input(orderIndex).dataType else LongType, nullable = true),
      StructField("seq", BinaryType, nullable = true),
      StructField("emitted", BooleanType, nullable = false)
    )
  )

  @transient private var state: ValueState[Row] = _
  // The key's state during a visit: loaded on its first element, written back in finish.
  @transient private var kept: DedupState = _

  override def countsLateRows: Boolean = true

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit = {
    state = handle.getValueState("deduplicateState", Encoders.row(stateSchema), ttl)
    kept = null
  }

  private def load(): DedupState = {
    if (kept == null) {
      kept = new DedupState
      val s = state.get() // null when absent: one state store read, where exists() then get() were two
      if (s != null) {
        kept.row = if (s.isNullAt(0)) null else s.getStruct(0).toSeq.toArray
        kept.time = if (s.isNullAt(1)) null else s.get(1)
        kept.seq = if (s.isNullAt(2)) null else s.getAs[Array[Byte]](2)
        kept.emitted = s.getBoolean(3)
      }
    }
    kept
  }

  override def elements(rows: Iterator[Row]): Iterator[Element] =
    KeyedLogic.inOrder(rows, seqIndex).iterator.map { r =>
      val s = SeqPath.of(r, seqIndex)
      if (r.getString(kindIndex) != RowKind.Insert)
        throw new IllegalStateException(
          s"deduplicate consumes an insert-only changelog; got ${r.getString(kindIndex)} at _seq=${SeqPath.show(s)}"
        )
      val t = if (ordered) {
        if (r.isNullAt(orderIndex))
          throw new IllegalStateException(s"deduplicate: ORDER BY is null at _seq=${SeqPath.show(s)}; it must not be")
        r.get(orderIndex)
      } else null
      val wm: java.lang.Long =
        if (watermarkIndex >= 0 && !r.isNullAt(watermarkIndex)) r.getLong(watermarkIndex) else null
      Element(s, RowKind.Insert, KeyedLogic.values(r, columns), time = t, watermark = wm)
    }

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] =
    function.processElement(load(), ctx, e)

  override def onTimer(ctx: KeyContext, timestamp: Long): Seq[Change] = function.onTimer(load())

  override def timerSeq(ctx: KeyContext, timestamp: Long): Array[Byte] = load().seq

  override def finish(ctx: KeyContext): Unit = if (kept != null) {
    val k = kept
    kept = null
    state.update(Row(if (k.row == null) null else Row.fromSeq(k.row.toSeq), k.time, k.seq, k.emitted))
  }
}
