package streamjoin.operators
package over_aggregate

import org.apache.spark.sql.Row
import org.apache.spark.sql.streaming.{StatefulProcessorHandle, TTLConfig}
import org.apache.spark.sql.types._

/**
 * OVER aggregation, `agg(col) OVER (PARTITION BY … ORDER BY time {ROWS|RANGE} BETWEEN … PRECEDING
 * AND CURRENT ROW)` (docs/semantics.md §5; Flink's `operators/over/`): the JVM twin of
 * `streamjoin.runtime.over_aggregate.operator._OverAggregateLogic`. Every output is `+I`: the input row followed by
 * the aggregates over its frame; late rows are counted in `numLateRecordsDropped`.
 *
 * State per partition key: [[OverState]] (rows waiting per time, the bounded frame's rows,
 * accumulators and Flink's bookkeeping).
 *
 * Built from an [[OverAggregateSpec]] (the rowtime's epoch ms in its `rowtimeColumn`).
 */
class OverAggregateLogic(spec: OverAggregateSpec, input: StructType) extends KeyedLogic {
  private val columns = spec.columns.map(KeyedLogic.index(input, _)).toArray
  private val bounded = spec.retractable
  private val function = OverFunction(
    spec.function,
    new Aggregates(spec.aggregates, input, spec.columns, bounded),
    if (bounded) spec.offset.getOrElse(0L) else 0L
  )
  private val orderBy = spec.orderBy.orNull
  private val rowtimeIndex = if (orderBy == null) -1 else KeyedLogic.index(input, spec.rowtimeColumn)
  private val watermarkIndex = spec.watermarkColumn.map(KeyedLogic.index(input, _)).getOrElse(-1)
  private val seqIndex = KeyedLogic.index(input, KeyedLogic.SeqColumn)
  private val kindIndex = KeyedLogic.index(input, KeyedLogic.RowKindColumn)
  private val rowSchema = StructType(columns.map(i => input(i).copy(nullable = true)))

  @transient private var state: OverState = _

  override def countsLateRows: Boolean = true

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit =
    state = new OverState(function.aggregates, rowSchema, handle, ttl, bounded)

  override def elements(rows: Iterator[Row]): Iterator[Element] =
    KeyedLogic.inOrder(rows, seqIndex).iterator.map { r =>
      val seq = SeqPath.of(r, seqIndex)
      val kind = r.getString(kindIndex)
      if (kind != RowKind.Insert)
        throw new IllegalStateException(
          s"over_aggregate consumes an insert-only changelog; got $kind at _seq=${SeqPath.show(seq)}"
        )
      val time: java.lang.Long =
        if (orderBy == null) null
        else {
          if (r.isNullAt(rowtimeIndex))
            throw new IllegalStateException(
              s"over_aggregate: $orderBy is null at _seq=${SeqPath.show(seq)}; it must not be"
            )
          r.getLong(rowtimeIndex)
        }
      val wm: java.lang.Long =
        if (watermarkIndex >= 0 && !r.isNullAt(watermarkIndex)) r.getLong(watermarkIndex) else null
      Element(seq, RowKind.Insert, KeyedLogic.values(r, columns), time = time, watermark = wm)
    }

  private def inserts(rows: Seq[Array[Any]]): Seq[Change] = rows.map(Change(RowKind.Insert, _))

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] = {
    state.load()
    val time: Long = if (orderBy == null) now.longValue() else e.time.asInstanceOf[java.lang.Long].longValue()
    inserts(function.processElement(state, ctx, e.row, time))
  }

  override def onTimer(ctx: KeyContext, timestamp: Long): Seq[Change] = {
    state.load()
    inserts(function.onTimer(state, ctx, timestamp))
  }

  override def finish(ctx: KeyContext): Unit = state.store()
}
