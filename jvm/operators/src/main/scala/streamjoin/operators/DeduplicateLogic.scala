package streamjoin.operators

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.streaming.{StatefulProcessorHandle, TTLConfig, ValueState}
import org.apache.spark.sql.types._

/**
 * Deduplication, `ROW_NUMBER() OVER (PARTITION BY key ORDER BY t {ASC|DESC}) = 1`
 * (docs/semantics.md §6; Flink's `operators/deduplicate/`): the JVM twin of
 * `streamjoin.runtime.deduplicate`, same variants and outputs.
 *
 * State per key, as Flink keeps it: one value — the kept row (or, keeping the first row on event
 * time, the row waiting for the watermark), its order value, its input `_seq`, and `emitted`: keeping
 * the first row, whether it was emitted; keeping the last row on processing time, whether the key
 * emitted an update (its kept row went out as `+U`).
 *
 * Keeping the last row on processing time, a row equal to the kept one emits nothing only while the
 * key's first row is still the kept one, and only without state TTL: Flink's equaliser compares the
 * RowKind too, and its heap state holds the row it then emits as `+U` (the Python module's docstring).
 * `PROCTIME()` columns, which hold no value in Flink's row, take no part in the comparison.
 *
 * Built from a [[DeduplicateSpec]] (an ordered input's order value in `_order`; keeping the first row on
 * event time, it is held until the watermark passes it).
 */
class DeduplicateLogic(spec: DeduplicateSpec, input: StructType) extends KeyedLogic {
  private val keepFirst = spec.keep == "first"
  private val ordered = spec.ordered
  private val eventTime = spec.eventTime
  private val columns = spec.columns.map(KeyedLogic.index(input, _)).toArray
  private val seqIndex = KeyedLogic.index(input, KeyedLogic.SeqColumn)
  private val kindIndex = KeyedLogic.index(input, KeyedLogic.RowKindColumn)
  private val orderIndex = if (ordered) KeyedLogic.index(input, "_order") else -1
  private val watermarkIndex = spec.watermarkColumn.map(KeyedLogic.index(input, _)).getOrElse(-1)
  // The positions in a kept row that the comparison of keep-last on processing time looks at.
  private val compared: Array[Int] = {
    val proctime = spec.proctimeColumns.toSet
    spec.columns.zipWithIndex.collect { case (c, i) if !proctime(c) => i }.toArray
  }
  private val stateTtl = spec.stateTtl
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
  @transient private var row: Array[Any] = _
  @transient private var time: Any = _
  @transient private var seq: Array[Byte] = _
  @transient private var emitted: Boolean = _
  @transient private var loaded: Boolean = _

  override def countsLateRows: Boolean = true

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit = {
    state = handle.getValueState("deduplicateState", Encoders.row(stateSchema), ttl)
    loaded = false
  }

  private def load(): Unit = if (!loaded) {
    loaded = true
    val s = state.get() // null when absent: one state store read, where exists() then get() were two
    if (s != null) {
      row = if (s.isNullAt(0)) null else s.getStruct(0).toSeq.toArray
      time = if (s.isNullAt(1)) null else s.get(1)
      seq = if (s.isNullAt(2)) null else s.getAs[Array[Byte]](2)
      emitted = s.getBoolean(3)
    } else { row = null; time = null; seq = null; emitted = false }
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

  private def sameValues(kept: Array[Any], other: Array[Any]): Boolean = compared.forall(i => kept(i) == other(i))

  private def replace(newRow: Array[Any]): Seq[Change] = {
    val previous = row
    row = newRow
    if (previous == null) Seq(Change(RowKind.Insert, newRow))
    else Seq(Change(RowKind.UpdateBefore, previous), Change(RowKind.UpdateAfter, newRow))
  }

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] = {
    load()
    if (!ordered) {
      if (keepFirst) {
        if (emitted) Nil else { emitted = true; Seq(Change(RowKind.Insert, e.row)) }
      } else if (!stateTtl && !emitted && row != null && sameValues(row, e.row))
        Nil // the kept row stays the one emitted
      else {
        val changes = replace(e.row)
        emitted = changes.length > 1
        changes
      }
    } else if (!keepFirst) {
      if (row != null && Values.compare(e.time, time) < 0) Nil
      else { time = e.time; replace(e.row) }
    } else {
      val t = e.time.asInstanceOf[Long]
      if (t < ctx.timers.time) { ctx.lateDropped += 1; Nil }
      else if (emitted) Nil
      else {
        if (row == null || t < time.asInstanceOf[Long]) {
          if (row != null) ctx.timers.delete(time.asInstanceOf[Long])
          ctx.timers.register(t)
          row = e.row; time = t; seq = e.seq // the row now waiting for the watermark
        }
        Nil
      }
    }
  }

  override def onTimer(ctx: KeyContext, timestamp: Long): Seq[Change] = {
    load()
    val out = row
    row = null; time = null; emitted = true
    Seq(Change(RowKind.Insert, out))
  }

  override def timerSeq(ctx: KeyContext, timestamp: Long): Array[Byte] = { load(); seq }

  override def finish(ctx: KeyContext): Unit = if (loaded) {
    loaded = false
    state.update(Row(if (row == null) null else Row.fromSeq(row.toSeq), time, seq, emitted))
  }
}
