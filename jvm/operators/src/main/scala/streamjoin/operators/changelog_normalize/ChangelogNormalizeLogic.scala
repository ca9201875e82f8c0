package streamjoin.operators
package changelog_normalize

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.streaming.{StatefulProcessorHandle, TTLConfig, ValueState}
import org.apache.spark.sql.types.StructType

/**
 * ChangelogNormalize: an upsert changelog made a full changelog keyed by the primary key — the JVM
 * twin of `streamjoin.runtime.changelog_normalize` (docs/semantics.md §1; Flink's
 * `DeduplicateFunctionHelper.processLastRowOnChangelog`).
 *
 * State per key, as Flink's: the last full row (`lastRow`, a ValueState with the state TTL).
 *
 * Built from a [[ChangelogNormalizeSpec]] (with state TTL on, an identical row is emitted again).
 */
class ChangelogNormalizeLogic(spec: ChangelogNormalizeSpec, input: StructType) extends KeyedLogic {
  override def outputKeyedByKey: Boolean = true
  private val columns = spec.columns.map(KeyedLogic.index(input, _)).toArray
  private val updateBefore = spec.updateBefore
  private val stateTtl = spec.stateTtl
  private val seqIndex = KeyedLogic.index(input, KeyedLogic.SeqColumn)
  private val kindIndex = KeyedLogic.index(input, KeyedLogic.RowKindColumn)
  private val rowSchema = StructType(columns.map(i => input(i).copy(nullable = true)))

  @transient private var lastRow: ValueState[Row] = _
  @transient private var stored: Array[Any] = _
  @transient private var loaded: Boolean = false
  @transient private var changed: Boolean = false

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit = {
    lastRow = handle.getValueState("lastRow", Encoders.row(rowSchema), ttl)
    loaded = false
  }

  override def elements(rows: Iterator[Row]): Iterator[Element] =
    KeyedLogic.changelog(rows, seqIndex, kindIndex, columns)

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] = {
    if (!loaded) {
      loaded = true
      changed = false
      val last = lastRow.get() // null when absent: one state store read, where exists() then get() were two
      stored = if (last != null) last.toSeq.toArray else null
    }
    if (RowKind.isAccumulate(e.kind)) {
      if (stored == null) { stored = e.row; changed = true; Seq(Change(RowKind.Insert, e.row)) }
      else if (!stateTtl && stored.sameElements(e.row)) Nil
      else {
        val before = stored
        stored = e.row
        changed = true
        if (updateBefore) Seq(Change(RowKind.UpdateBefore, before), Change(RowKind.UpdateAfter, e.row))
        else Seq(Change(RowKind.UpdateAfter, e.row))
      }
    } else if (stored == null) Nil
    else {
      val before = stored
      stored = null
      changed = true
      Seq(Change(RowKind.Delete, before))
    }
  }

  override def finish(ctx: KeyContext): Unit = if (loaded) {
    loaded = false
    if (changed) {
      if (stored == null) lastRow.clear() else lastRow.update(Row.fromSeq(stored.toSeq))
    }
  }
}
