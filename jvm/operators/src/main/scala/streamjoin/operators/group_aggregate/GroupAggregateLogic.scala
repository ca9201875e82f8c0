package streamjoin.operators
package group_aggregate

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.streaming.{StatefulProcessorHandle, TTLConfig, ValueState}
import org.apache.spark.sql.types._

/**
 * Group aggregate over any changelog, `SELECT key, agg(col), … GROUP BY key` (docs/semantics.md §6;
 * Flink's `operators/aggregate/GroupAggFunction`): the JVM twin of
 * `streamjoin.runtime.group_aggregate.operator._GroupAggregateLogic`, same changes and `_seq` (the input change's, then the index: [[SeqPath]]).
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
  private val columns = spec.columns.map(KeyedLogic.index(input, _)).toArray
  private val groupPositions = spec.groupBy.map(spec.columns.indexOf(_)).toArray
  private val aggregates = new Aggregates(spec.aggregates, input, spec.columns, spec.retractable)
  private val seqIndex = KeyedLogic.index(input, KeyedLogic.SeqColumn)
  private val kindIndex = KeyedLogic.index(input, KeyedLogic.RowKindColumn)
  private val miniBatch = spec.miniBatch
  private val stateSchema = StructType(
    Seq(StructField("count", LongType, nullable = false), StructField("accs", aggregates.accSchema, nullable = false))
  )

  @transient private var state: ValueState[Row] = _
  @transient private var views: Array[AggregateView] = _
  // The group's count and accumulators during a visit (accs null: empty group), written back in finish.
  @transient private var count: Long = _
  @transient private var accs: Array[Array[Any]] = _
  @transient private var loaded: Boolean = _
  // Mini-batch: the visited group's elements so far.
  @transient private lazy val bundle = scala.collection.mutable.ArrayBuffer[Element]()

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit = {
    state = handle.getValueState("groupAggState", Encoders.row(stateSchema), ttl)
    views = aggregates.openViews(handle, ttl)
    loaded = false
  }

  private def load(): Unit = if (!loaded) {
    loaded = true
    val s = state.get() // null when absent: one state store read, where exists() then get() were two
    if (s != null) {
      count = s.getLong(0)
      accs = aggregates.load(s.getStruct(1))
    } else { count = 0; accs = null }
  }

  override def elements(rows: Iterator[Row]): Iterator[Element] =
    KeyedLogic.changelog(rows, seqIndex, kindIndex, columns)

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] =
    if (miniBatch) { bundle += e; Nil }
    else process(Array(e))

  override def finishBundle(ctx: KeyContext): Seq[Change] =
    if (bundle.isEmpty) Nil else { val changes = process(bundle.toArray); bundle.clear(); changes }

  /** The group's changes of one bundle applied at once (one change, or a micro-batch's in mini-batch mode;
   * `GroupAggFunction.process_bundle`): leading retractions into a group without state are dropped; the
   * group's count after the bundle decides what is emitted, against the values before it. */
  private def process(changes: Array[Element]): Seq[Change] = {
    load()
    val first = accs == null
    var from = 0
    if (first) {
      while (from < changes.length && !RowKind.isAccumulate(changes(from).kind)) from += 1
      if (from == changes.length) return Nil // a retraction may follow a state clean-up (Flink)
      accs = aggregates.create()
    }
    val key = groupPositions.map(changes(from).row(_))
    val previous = aggregates.getValues(accs, views)
    var i = from
    while (i < changes.length) {
      val e = changes(i)
      val args = aggregates.args(e.row)
      if (RowKind.isAccumulate(e.kind)) { aggregates.accumulate(accs, views, args); count += 1 }
      else { aggregates.retract(accs, views, args); count -= 1 }
      i += 1
    }
    if (count == 0) {
      accs = null
      views.foreach(v => if (v != null) v.clear())
      if (first) Nil else Seq(Change(RowKind.Delete, key ++ aggregates.results(previous)))
    } else {
      val current = aggregates.getValues(accs, views)
      if (first) Seq(Change(RowKind.Insert, key ++ aggregates.results(current)))
      else if (current.sameElements(previous)) Nil
      else
        Seq(
          Change(RowKind.UpdateBefore, key ++ aggregates.results(previous)),
          Change(RowKind.UpdateAfter, key ++ aggregates.results(current))
        )
    }
  }

  override def finish(ctx: KeyContext): Unit = if (loaded) {
    loaded = false
    if (accs == null) state.clear() else state.update(Row(count, aggregates.store(accs)))
    views.foreach(v => if (v != null) v.flush())
  }
}
