package streamjoin.operators
package group_aggregate

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.streaming.{StatefulProcessorHandle, TTLConfig, ValueState}
import org.apache.spark.sql.types._

/**
 * Group aggregate over any changelog, `SELECT key, agg(col), … GROUP BY key` (docs/semantics.md §6): the JVM
 * twin of `streamjoin.runtime.group_aggregate.operator._GroupAggregateLogic`, running a [[GroupAggFunction]] per
 * group, same changes and `_seq` (the input change's, then the index: [[SeqPath]]).
 *
 * State per group, as Flink keeps it: a value `groupAggState` (the group's row count and the
 * accumulators, one struct per aggregate; absent while the group is empty) and, per COUNT(DISTINCT)
 * and per retractable MIN/MAX, a MapState `{function}_{i}` value → multiplicity (Flink's `MapView`).
 *
 * In mini-batch mode a group's changes of one micro-batch are applied together and emitted once, in
 * [[finishBundle]] (Flink's `MiniBatchGroupAggFunction`).
 *
 * Built from a [[GroupAggregateSpec]].
 */
class GroupAggregateLogic(spec: GroupAggregateSpec, input: StructType) extends KeyedLogic {
  override def outputKeyedByKey: Boolean = true
  private val columns = spec.columns.map(KeyedLogic.index(input, _)).toArray
  private val groupPositions = spec.groupBy.map(spec.columns.indexOf(_)).toArray
  private val aggregates = new Aggregates(spec.aggregates, input, spec.columns, spec.retractable)
  private val seqIndex = KeyedLogic.index(input, KeyedLogic.SeqColumn)
  private val kindIndex = KeyedLogic.index(input, KeyedLogic.RowKindColumn)
  private val miniBatch = spec.miniBatch
  private val stateSchema = StructType(
    Seq(StructField("count", LongType, nullable = false), StructField("accs", aggregates.accSchema, nullable = false))
  )

  private val function = new GroupAggFunction(aggregates, groupPositions)

  @transient private var state: ValueState[Row] = _
  @transient private var views: Array[AggregateView] = _
  // The visited group's state, loaded on its first element and written back in finish.
  @transient private var group: GroupState = _
  // Mini-batch: the visited group's elements so far.
  @transient private lazy val bundle = scala.collection.mutable.ArrayBuffer[Element]()

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit = {
    state = handle.getValueState("groupAggState", Encoders.row(stateSchema), ttl)
    views = aggregates.openViews(handle, ttl)
    group = null
  }

  private def load(): GroupState = {
    if (group == null) {
      val s = state.get() // null when absent: one state store read, where exists() then get() were two
      group =
        if (s != null) new GroupState(s.getLong(0), aggregates.load(s.getStruct(1)), views)
        else new GroupState(0L, null, views)
    }
    group
  }

  override def elements(rows: Iterator[Row]): Iterator[Element] =
    KeyedLogic.changelog(rows, seqIndex, kindIndex, columns)

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] =
    if (miniBatch) { bundle += e; Nil }
    else function.processBundle(load(), Array(e))

  override def finishBundle(ctx: KeyContext): Seq[Change] =
    if (bundle.isEmpty) Nil
    else { val changes = function.processBundle(load(), bundle.toArray); bundle.clear(); changes }

  override def finish(ctx: KeyContext): Unit = if (group != null) {
    val g = group
    group = null
    if (g.accs == null) state.clear() else state.update(Row(g.count, aggregates.store(g.accs)))
    views.foreach(v => if (v != null) v.flush())
  }
}
