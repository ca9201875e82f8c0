package streamjoin.operators
package upsert_materializer

import scala.collection.mutable.ArrayBuffer
import scala.jdk.CollectionConverters._

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.streaming.{ListState, StatefulProcessorHandle, TTLConfig}
import org.apache.spark.sql.types.StructType

/**
 * SinkUpsertMaterializer — the JVM twin of `streamjoin.runtime.upsert_materializer`
 * (docs/semantics.md §1; Flink's `SinkUpsertMaterializer`): per sink key, the rows currently added,
 * oldest first, and the upsert changes (`+I`, `+U`, `-D`) the sink should apply.
 *
 * State per sink key, as Flink's: the list of rows (`rows`, a ListState with the state TTL).
 *
 * Built from a [[SinkUpsertMaterializerSpec]].
 */
class SinkUpsertMaterializerLogic(spec: SinkUpsertMaterializerSpec, input: StructType) extends KeyedLogic {
  override def outputKeyedByKey: Boolean = true
  private val columns = spec.columns.map(KeyedLogic.index(input, _)).toArray
  private val upsertKey = spec.upsertKey.map(spec.columns.indexOf(_)).toArray
  private val seqIndex = KeyedLogic.index(input, KeyedLogic.SeqColumn)
  private val kindIndex = KeyedLogic.index(input, KeyedLogic.RowKindColumn)
  private val rowSchema = StructType(columns.map(i => input(i).copy(nullable = true)))

  @transient private var state: ListState[Row] = _
  @transient private var rows: ArrayBuffer[Array[Any]] = _
  @transient private var changed: Boolean = false

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit = {
    state = handle.getListState("rows", Encoders.row(rowSchema), ttl)
    rows = null
  }

  override def elements(rows: Iterator[Row]): Iterator[Element] =
    KeyedLogic.changelog(rows, seqIndex, kindIndex, columns)

  private def same(a: Array[Any], b: Array[Any]): Boolean =
    if (upsertKey.isEmpty) a.sameElements(b) else upsertKey.forall(i => a(i) == b(i))

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] = {
    if (rows == null) {
      rows = ArrayBuffer.from(state.get().map(_.toSeq.toArray[Any]))
      changed = false
    }
    if (RowKind.isAccumulate(e.kind)) {
      val kind = if (rows.isEmpty) RowKind.Insert else RowKind.UpdateAfter
      val index = if (upsertKey.nonEmpty) rows.indexWhere(same(_, e.row)) else -1
      if (index == -1) rows += e.row else rows(index) = e.row
      changed = true
      Seq(Change(kind, e.row))
    } else {
      val index = rows.indexWhere(same(_, e.row))
      if (index == -1) Nil
      else {
        val newest = index == rows.length - 1
        rows.remove(index)
        changed = true
        if (rows.isEmpty) Seq(Change(RowKind.Delete, e.row))
        else if (newest) Seq(Change(RowKind.UpdateAfter, rows.last))
        else Nil
      }
    }
  }

  override def finish(ctx: KeyContext): Unit = if (rows != null) {
    if (changed) {
      if (rows.isEmpty) state.clear() else state.put(rows.map(r => Row.fromSeq(r.toSeq)).toArray)
    }
    rows = null
  }
}
