package streamjoin.operators
package group_aggregate

/**
 * A group's aggregation state during a visit (the JVM twin of `streamjoin.runtime.group_aggregate.function.GroupState`):
 * its row count, its accumulators (null while the group is empty) and the views of its map-backed functions.
 */
final class GroupState(var count: Long, var accs: Array[Array[Any]], val views: Array[AggregateView])

/**
 * Flink's `GroupAggFunction` (and, a micro-batch's changes of a group as one bundle, `MiniBatchGroupAggFunction`):
 * the JVM twin of `streamjoin.runtime.group_aggregate.function.GroupAggFunction`, docs/semantics.md §6.
 *
 * @param aggregates     the aggregates (built with `retractable` unless the input is insert-only)
 * @param groupPositions the grouping key's positions in an element's row
 */
final class GroupAggFunction(val aggregates: Aggregates, groupPositions: Array[Int]) extends Serializable {

  /**
   * The group's changes of one bundle applied at once (one change, or a micro-batch's in mini-batch mode):
   * leading retractions into a group without state are dropped (they may follow a state clean-up); the
   * group's count after the bundle decides what is emitted, against the values before it.
   */
  def processBundle(state: GroupState, changes: Array[Element]): Seq[Change] = {
    val first = state.accs == null
    var from = 0
    if (first) {
      while (from < changes.length && !RowKind.isAccumulate(changes(from).kind)) from += 1
      if (from == changes.length) return Nil
      state.accs = aggregates.create()
    }
    val key = groupPositions.map(changes(from).row(_))
    val previous = aggregates.getValues(state.accs, state.views)
    var i = from
    while (i < changes.length) {
      val e = changes(i)
      val args = aggregates.args(e.row)
      if (RowKind.isAccumulate(e.kind)) { aggregates.accumulate(state.accs, state.views, args); state.count += 1 }
      else { aggregates.retract(state.accs, state.views, args); state.count -= 1 }
      i += 1
    }
    if (state.count == 0) {
      state.accs = null
      state.views.foreach(v => if (v != null) v.clear())
      if (first) Nil else Seq(Change(RowKind.Delete, key ++ aggregates.results(previous)))
    } else {
      val current = aggregates.getValues(state.accs, state.views)
      if (first) Seq(Change(RowKind.Insert, key ++ aggregates.results(current)))
      else if (current.sameElements(previous)) Nil
      else
        Seq(
          Change(RowKind.UpdateBefore, key ++ aggregates.results(previous)),
          Change(RowKind.UpdateAfter, key ++ aggregates.results(current))
        )
    }
  }
}
