package streamjoin.operators
package interval_join

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{
  BoundReference,
  GenericInternalRow,
  JoinedRow,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.streaming.MapState
import org.apache.spark.sql.types.{LongType, StructType}

/**
 * A key's interval-join state during a visit (the JVM twin of
 * `streamjoin.runtime.interval_join.logic.IntervalJoinState`; Flink's `IntervalJoinLeftCache` /
 * `IntervalJoinRightCache` and timer states): per side its cached rows and its clean-up timer (null:
 * none), and the key's arrival counter, which orders rows of the same time and numbers them in
 * candidate mode. [[IntervalJoinLogic]] loads the timers and the counter from the key value and writes
 * them back.
 */
final class IntervalJoinState(val rows: Array[SideRows]) {
  val cleanupTimers: Array[java.lang.Long] = Array(null, null)
  var nextArrival: Long = 0L
}

/** A cached row: its side's row struct (its bytes and an `UnsafeRow` over them), whether it was joined, its id
 * (candidate mode, else null); whether the state holds it, whether the visit changed it. */
final class Entry(
    val bytes: Array[Byte],
    val row: UnsafeRow,
    var matched: Boolean,
    val id: java.lang.Long,
    var stored: Boolean = false,
    var dirty: Boolean = true
)

/**
 * A side's cached rows during one visit of the key, by `(time, arrival)`: read from the MapState at most once,
 * when first looked at, and written back (the rows the visit added or changed, and removed) in [[flush]].
 * Why: the key's rows of a micro-batch each looked at the other side's whole cache, a state store scan per row,
 * and each cached row was one write even when it left in the same visit: in a profile of the interval join's
 * benchmark the scans and the writes were a large share of the task time.
 *
 * @param state the side's MapState `(rowtime ms, arrival)` → `(row, matched, id)`
 * @param width the number of fields of the side's row struct
 */
final class SideRows(state: MapState[(Long, Long), Row], width: Int) {
  private val rows = new java.util.TreeMap[(Long, Long), Entry](SideRows.ByTimeAndArrival)
  private var read = false
  private val removed = new java.util.ArrayList[(Long, Long)]()

  /** Every row, oldest first and in arrival order within a time. */
  def all: java.util.TreeMap[(Long, Long), Entry] = {
    if (!read) {
      read = true
      state.iterator().foreach { case (at, stored) =>
        val entry = decode(stored)
        entry.stored = true
        entry.dirty = false
        rows.put(at, entry)
      }
    }
    rows
  }

  /** Add a row the state does not hold (a new arrival): no state read. */
  def add(at: (Long, Long), entry: Entry): Unit = rows.put(at, entry)

  def remove(at: (Long, Long)): Unit = {
    val entry = all.remove(at)
    if (entry != null && entry.stored) removed.add(at)
  }

  def flush(): Unit = {
    removed.forEach(at => state.removeKey(at))
    rows.forEach { (at, entry) => if (entry.dirty) state.updateValue(at, encode(entry)) }
    rows.clear()
    removed.clear()
    read = false
  }

  private def decode(stored: Row): Entry = {
    val bytes = stored.getAs[Array[Byte]](0)
    new Entry(
      bytes,
      PackedRows.point(bytes, width),
      stored.getBoolean(1),
      if (stored.isNullAt(2)) null else stored.getLong(2)
    )
  }

  private def encode(e: Entry): Row = Row(e.bytes, e.matched, e.id)
}

object SideRows {

  /** Cached rows' order: by time, then arrival (RocksDB returns the keys in the byte order of their encoding, not by value). */
  private val ByTimeAndArrival: Ordering[(Long, Long)] = Ordering.Tuple2(Ordering.Long, Ordering.Long)
}

/**
 * The interval join's rules for one key, shared by both time domains (docs/semantics.md §3): the JVM twin of
 * `streamjoin.runtime.interval_join.logic.TimeIntervalJoin`, after Flink's `TimeIntervalJoin`
 * (flink-table-runtime `operators/join/interval`), over the key's [[IntervalJoinState]]. A left row at `t`
 * joins right rows in `[t + lower, t + upper]`; a row is cached while the operator time is below its
 * window's upper end, else it is late (joined, not stored, padded at once when outer); one clean-up timer
 * per cache and key; outer rows that never matched are padded when they leave. A residual predicate
 * (`condition`) is part of the match, as in Flink's generated join function: a pair in the window that does
 * not meet it is not emitted and does not mark its rows as joined ([[JoinCondition]]). In candidate mode (an
 * outer join with a residual that Spark evaluates, on the python engine:
 * `streamjoin.runtime.interval_join.residual`) every pair in the window and every outer row's expiry are
 * emitted with the rows' ids.
 *
 * Each change is one `+I` whose value is the packed output row ([[PackedRows]]), projected from the two
 * sides' `UnsafeRow`s: each side's data columns, then the ids in candidate mode.
 *
 * @param spec            the join type, the bounds (`lowerMs` / `upperMs`: the range of `right.t - left.t`,
 *                        inclusive) and candidate mode
 * @param condition       `spec.condition` bound to the sides' data columns, or null
 * @param structSchemas   per side, its row struct (the per-row watermark field included)
 * @param structPositions per side, the positions in its row struct of the data columns
 */
abstract class TimeIntervalJoin(
    spec: IntervalJoinSpec,
    condition: JoinCondition,
    structSchemas: Array[StructType],
    structPositions: Array[Array[Int]]
) extends Serializable {
  private val how = spec.how
  private val lower = spec.lowerMs
  private val upper = spec.upperMs
  private val candidates = spec.candidates
  private val outer = Array(how == "left" || how == "full", how == "right" || how == "full")

  /** How far after its own time a side's row can still match (Flink's `leftRelativeSize` / `rightRelativeSize`). */
  private val windowEnd = Array(upper, -lower)
  // The row of a side that did not match: every column null.
  private val nulls: Array[InternalRow] = structSchemas.map(s => new GenericInternalRow(s.length))
  // The output row from `left struct ++ right struct ++ (left id, right id)`: each side's data columns (not its
  // watermark field), then the ids in candidate mode.
  private val outputColumns: Seq[BoundReference] = {
    val width = structSchemas(0).length
    val data = Seq(0, 1).flatMap { side =>
      structPositions(side).toSeq.map(i =>
        BoundReference(i + side * width, structSchemas(side)(i).dataType, nullable = true)
      )
    }
    val ids =
      if (candidates) Seq(0, 1).map(i => BoundReference(width + structSchemas(1).length + i, LongType, nullable = true))
      else Nil
    data ++ ids
  }
  @transient private lazy val project: UnsafeProjection = UnsafeProjection.create(outputColumns)
  @transient private lazy val joined = new JoinedRow()
  @transient private lazy val withIds = new JoinedRow()
  @transient private lazy val ids = new GenericInternalRow(2)

  /** The operator time at the key's current time (the watermark, or the processing time). */
  protected def operatorTime(time: Long): Long

  /** Rows at or before this time can match nothing still to come. */
  private def expirationTime(operatorTime: Long, windowEnd: Long): Long =
    if (operatorTime == Long.MaxValue) Long.MaxValue else operatorTime - windowEnd - 1

  /**
   * A row of `side` arrives at `rowTime` (Flink's `processElement1` / `processElement2`): joined with the
   * other side's cached rows in its window (expired ones met on the way leave), then cached, or, late, padded
   * at once when its side is outer. `joinable`: the key has no null column (SQL's null never matches).
   */
  def processElement(
      state: IntervalJoinState,
      row: UnsafeRow,
      rowTime: Long,
      side: Int,
      joinable: Boolean,
      timers: TimerService
  ): Seq[Change] = {
    val out = ArrayBuffer[Change]()
    val opTime = operatorTime(timers.time)
    val arrival = state.nextArrival
    state.nextArrival += 1
    val own = new Entry(row.getBytes, row, false, if (candidates) arrival else null)
    if (upper < lower) {
      // Flink plans no join at all: an outer side passes through null-padded.
      if (outer(side)) expired(Seq(own), side, out)
      return out.toSeq
    }
    val other = 1 - side
    val (from, to) = if (side == 0) (rowTime + lower, rowTime + upper) else (rowTime - upper, rowTime - lower)
    val otherExpiration = expirationTime(opTime, windowEnd(other))
    var matched = false
    // Flink skips the scan when the whole window is already expired (see streamjoin/runtime/interval_join/logic.py).
    if (otherExpiration < to) {
      val cache = state.rows(other)
      lazy val self = condition.internal(side, row, structPositions(side))
      def meets(entry: Entry): Boolean = condition == null || {
        val that = condition.internal(other, entry.row, structPositions(other))
        if (side == 0) condition(self, that) else condition(that, self)
      }
      val gone = ArrayBuffer[(Long, Long)]()
      cache.all.forEach { (at, entry) =>
        val time = at._1
        val inWindow = joinable && from <= time && time <= to
        val expiredNow = time <= otherExpiration
        if (inWindow && meets(entry)) {
          out += Change(RowKind.Insert, if (side == 0) pair(own, entry) else pair(entry, own))
          matched = true
          // Only an outer side reads its rows' flag (as Flink's TimeIntervalJoin): an inner side's
          // cache is not rewritten for it.
          if (outer(other) && !entry.matched) { entry.matched = true; entry.dirty = true }
        }
        if (expiredNow) {
          if (outer(other)) expired(Seq(entry), other, out)
          gone += at
        }
      }
      gone.foreach(cache.remove)
    }
    own.matched = matched
    if (opTime < to) {
      state.rows(side).add((rowTime, arrival), own)
      if (state.cleanupTimers(side) == null) registerCleanup(state, timers, rowTime, side)
    } else if (outer(side)) expired(Seq(own), side, out)
    out.toSeq
  }

  /** A timer of the key fires at `timestamp` (Flink's `onTimer`): the cache whose clean-up timer it is loses its
   * expired rows; a timer the state no longer records is ignored. */
  def onTimer(state: IntervalJoinState, timestamp: Long, timers: TimerService): Seq[Change] = {
    val out = ArrayBuffer[Change]()
    val opTime = operatorTime(timers.time)
    // The right cache first when both timers share the timestamp (Flink's order).
    for (side <- Seq(1, 0) if state.cleanupTimers(side) != null && state.cleanupTimers(side) == timestamp)
      removeExpired(state, timers, expirationTime(opTime, windowEnd(side)), side, out)
    out.toSeq
  }

  private def removeExpired(
      state: IntervalJoinState,
      timers: TimerService,
      expiration: Long,
      side: Int,
      out: ArrayBuffer[Change]
  ): Unit = {
    val cache = state.rows(side)
    // Copied out first: removing from a TreeMap can move another entry's key and value into the removed node.
    val gone = ArrayBuffer[((Long, Long), Entry)]()
    cache.all.headMap((expiration, Long.MaxValue), true).forEach((at, entry) => gone += ((at, entry)))
    gone.foreach { case (at, entry) =>
      if (outer(side)) expired(Seq(entry), side, out)
      cache.remove(at)
    }
    if (!cache.all.isEmpty) registerCleanup(state, timers, cache.all.firstKey._1, side)
    else state.cleanupTimers(side) = null
  }

  private def registerCleanup(state: IntervalJoinState, timers: TimerService, rowTime: Long, side: Int): Unit = {
    val at = rowTime + windowEnd(side) + 1
    timers.register(at)
    state.cleanupTimers(side) = at
  }

  /** The joined row of two entries (with their ids in candidate mode). */
  private def pair(left: Entry, right: Entry): Array[Any] = output(left.row, right.row, left.id, right.id)

  /** An output change's values: the packed output row of a left and a right row struct (either may be [[nulls]]). */
  private def output(
      left: InternalRow,
      right: InternalRow,
      leftId: java.lang.Long,
      rightId: java.lang.Long
  ): Array[Any] = {
    joined(left, right)
    val row =
      if (!candidates) joined
      else {
        ids.update(0, leftId); ids.update(1, rightId)
        withIds(joined, ids)
      }
    Array[Any](PackedRows.bytes(project(row)))
  }

  /** What rows of an outer side emit when they leave: the null-padded row of each that never
   * matched, or in candidate mode every row's expiry (whether a pair matched is not known here). */
  private def expired(entries: Seq[Entry], side: Int, out: ArrayBuffer[Change]): Unit =
    entries.foreach { e =>
      if (candidates) {
        val values = if (side == 0) output(e.row, nulls(1), e.id, null) else output(nulls(0), e.row, null, e.id)
        out += Change(RowKind.Insert, values)
      } else if (!e.matched) {
        out += Change(
          RowKind.Insert,
          if (side == 0) output(e.row, nulls(1), null, null) else output(nulls(0), e.row, null, null)
        )
      }
    }
}

/**
 * Event-time interval join (the JVM twin of `streamjoin.runtime.interval_join.logic.RowTimeIntervalJoin`; Flink's
 * `RowTimeIntervalJoin`, docs/semantics.md §3): rows carry their rowtime; the operator time is the combined
 * watermark, clamped at 0 as Flink's `updateOperatorTime` does.
 */
final class RowTimeIntervalJoin(
    spec: IntervalJoinSpec,
    condition: JoinCondition,
    structSchemas: Array[StructType],
    structPositions: Array[Array[Int]]
) extends TimeIntervalJoin(spec, condition, structSchemas, structPositions) {
  override protected def operatorTime(time: Long): Long = math.max(time, 0L)
}

/**
 * Processing-time interval join (the JVM twin of `streamjoin.runtime.interval_join.logic.ProcTimeIntervalJoin`;
 * Flink's `ProcTimeIntervalJoin`, docs/semantics.md §3): a row's time is its arrival's processing time; the
 * operator time and the timers are processing time.
 */
final class ProcTimeIntervalJoin(
    spec: IntervalJoinSpec,
    condition: JoinCondition,
    structSchemas: Array[StructType],
    structPositions: Array[Array[Int]]
) extends TimeIntervalJoin(spec, condition, structSchemas, structPositions) {
  override protected def operatorTime(time: Long): Long = time
}
