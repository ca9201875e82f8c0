package streamjoin.operators
package temporal_join

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.Row
import org.apache.spark.sql.streaming.MapState

/**
 * A key's temporal-join state during a visit (the JVM twin of
 * `streamjoin.runtime.temporal_join.logic.TemporalJoinState`), as Flink keeps it: `probes`, arrival index →
 * (rowtime ms, RowKind, row) (Flink's `left`); `versions`, version time (ms) → (RowKind, row) (Flink's `right`);
 * the next arrival index, the registered timer and the latest version time (Flink's `next-index` and `timer`),
 * which [[TemporalJoinLogic]] loads from the key value and writes back.
 */
final class TemporalJoinState(val probes: MapState[Long, Row], val versions: MapState[Long, Row]) {
  var nextIndex: Long = 0L
  var timer: java.lang.Long = _
  var latestVersion: java.lang.Long = _
}

/**
 * The event-time temporal join's rules for one key (docs/semantics.md §4): the JVM twin of
 * `streamjoin.runtime.temporal_join.logic.TemporalRowTimeJoin`, after Flink's `TemporalRowTimeJoinOperator`
 * (flink-table-runtime `operators/join/temporal`), over the key's [[TemporalJoinState]]. Probe rows wait until
 * the watermark reaches their time, then join the version valid at that time (the latest at or before it; a
 * `-D` version or none: INNER drops, LEFT pads) in arrival order with their own RowKind; `-U` versions are
 * ignored; with `appendOnlyVersions` a `+I` older than the key's latest version is ignored and any other
 * RowKind is an error; versions older than the newest one at or before the watermark are dropped when the
 * timer fires; one timer per key at the smallest pending time.
 *
 * @param how                `inner` or `left`
 * @param versionedArity     the number of data columns of the versioned table (for padding)
 * @param appendOnlyVersions the versioned side is an append-only stream deduplicated into versions
 */
final class TemporalRowTimeJoin(how: String, versionedArity: Int, appendOnlyVersions: Boolean) extends Serializable {
  private val left = how == "left"
  private val nulls = new Array[Any](versionedArity)

  /** Buffer a probe row until the watermark reaches `rowTime` (one at or behind it too: its timer is due). */
  def processProbe(
      state: TemporalJoinState,
      kind: String,
      row: Array[Any],
      rowTime: Long,
      timers: TimerService
  ): Unit = {
    state.probes.updateValue(state.nextIndex, Row(rowTime, kind, Row.fromSeq(row.toSeq)))
    state.nextIndex += 1
    registerSmallestTimer(state, timers, rowTime)
  }

  /** Record a change of the versioned table as the version at `versionTime`, unless it is one the join ignores. */
  def processVersion(
      state: TemporalJoinState,
      kind: String,
      row: Array[Any],
      versionTime: Long,
      timers: TimerService
  ): Unit =
    if (keepsVersion(state, kind, row, versionTime)) {
      state.versions.updateValue(versionTime, Row(kind, Row.fromSeq(row.toSeq)))
      if (state.latestVersion == null || versionTime > state.latestVersion) state.latestVersion = versionTime
      registerSmallestTimer(state, timers, versionTime)
    }

  private def keepsVersion(state: TemporalJoinState, kind: String, row: Array[Any], time: Long): Boolean =
    if (appendOnlyVersions) {
      if (kind != RowKind.Insert)
        throw new IllegalStateException(
          s"an append-only versioned input must contain only +I rows, got $kind${row.mkString("[", ", ", "]")}"
        )
      state.latestVersion == null || time >= state.latestVersion
    } else kind != RowKind.UpdateBefore

  /** The key's timer fires: emit every buffered probe row at or before the watermark (in arrival order), drop
   * versions no later probe row can use, set the next timer. */
  def onTimer(state: TemporalJoinState, timers: TimerService): Seq[Change] = {
    val watermark = timers.time
    state.timer = null
    val times = state.versions.keys().toArray.sorted
    val found = scala.collection.mutable.HashMap[Long, Row]()
    val out = ArrayBuffer[Change]()
    var nextTime: java.lang.Long = null
    state.probes.iterator().toArray.sortBy(_._1).foreach { case (index, probe) =>
      val rowTime = probe.getLong(0)
      if (rowTime <= watermark) {
        val row = probe.getStruct(2).toSeq.toArray[Any]
        val at = java.util.Arrays.binarySearch(times, rowTime)
        val position = if (at >= 0) at else -at - 2 // the last version time at or before rowTime
        val version =
          if (position < 0) null
          else found.getOrElseUpdate(times(position), state.versions.getValue(times(position)))
        if (version != null && RowKind.isAccumulate(version.getString(0)))
          out += Change(probe.getString(1), row ++ version.getStruct(1).toSeq)
        else if (left) out += Change(probe.getString(1), row ++ nulls)
        state.probes.removeKey(index)
      } else if (nextTime == null || rowTime < nextTime) nextTime = rowTime
    }
    // Keep the newest version at or before the watermark and everything after it.
    val atOrBefore = times.takeWhile(_ <= watermark)
    atOrBefore.dropRight(1).foreach(state.versions.removeKey)
    if (nextTime != null) register(state, timers, nextTime) else state.nextIndex = 0L
    out.toSeq
  }

  private def registerSmallestTimer(state: TemporalJoinState, timers: TimerService, time: Long): Unit =
    if (state.timer == null) register(state, timers, time)
    else if (state.timer > time) { timers.delete(state.timer); register(state, timers, time) }

  private def register(state: TemporalJoinState, timers: TimerService, time: Long): Unit = {
    state.timer = time
    timers.register(time)
  }
}
