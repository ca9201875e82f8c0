package streamjoin.operators
package interval_join

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{
  BoundReference,
  GenericInternalRow,
  JoinedRow,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TTLConfig}
import org.apache.spark.sql.types._

/**
 * Interval join, event or processing time (docs/semantics.md §3): the JVM twin of
 * `streamjoin.runtime.interval_join` (`TimeIntervalJoin` run by `IntervalJoinLogic`), after
 * Flink's `TimeIntervalJoin` / `RowTimeIntervalJoin` / `ProcTimeIntervalJoin`. Same rules: a
 * left row at `t` joins right rows in `[t + lower, t + upper]`; the operator time is the
 * watermark clamped at 0 (or the processing time); a row is cached while the operator time is
 * below its window's upper end, else it is late (joined, not stored, padded at once when outer);
 * one clean-up timer per cache and key; outer rows that never matched are padded when they leave.
 * A residual predicate (`condition`) is part of the match, as in Flink's generated join function: a
 * pair in the window that does not meet it is not emitted and does not mark its rows as joined
 * ([[JoinCondition]]). In candidate mode (an outer join with a residual that Spark evaluates, on the
 * python engine: `streamjoin.runtime.interval_join.residual`) every pair in the window and every outer
 * row's expiry are emitted with the rows' ids.
 *
 * Rows stay in Spark's internal form throughout ([[PackedRows]]): a side's row comes in as its
 * `UnsafeRow` bytes, is cached as those bytes, and the output row is projected from the two
 * `UnsafeRow`s, so no column is converted to a JVM object (Flink's operator, too, keeps `RowData`).
 *
 * State per key: per side a MapState `(rowtime ms, arrival)` → one cached row `(row, matched, id)`
 * (`row`: the side's row struct as `UnsafeRow` bytes, its per-row watermark field included), and
 * the key value the shell keeps with its timers ([[KeyedLogic.keyValueSchema]]): both clean-up timers
 * and the key's arrival counter. Flink keeps a
 * `MapState<Long, List<Tuple2<RowData, Boolean>>>` (rowtime → the rows of that time in arrival
 * order); the arrival in the map key gives the same order when a scan sorts by `(time, arrival)`, and
 * lets caching a row or setting its `matched` flag be one put of that row, where a list per time
 * costs a read and a re-encoding of the whole list through Spark's `Row` encoder. In candidate mode
 * a row's id is its arrival. Cleared when both caches are empty (arrivals then restart at 0). A key's
 * visit reads each side's cache from the state at most once and writes back what changed when it ends
 * ([[SideRows]]).
 *
 * Built from an [[IntervalJoinSpec]] (`lowerMs` / `upperMs`: the range of `right.t - left.t`, inclusive).
 */
class IntervalJoinLogic(spec: IntervalJoinSpec, input: StructType) extends TwoInputLogic(spec.inputs, input) {
  private val how = spec.how
  private val lower = spec.lowerMs
  private val upper = spec.upperMs
  private val candidates = spec.candidates
  private val outer = Array(how == "left" || how == "full", how == "right" || how == "full")

  /** How far after its own time a side's row can still match (Flink's `leftRelativeSize` / `rightRelativeSize`). */
  private val windowEnd = Array(upper, -lower)
  // The row of a side that did not match: every column null.
  private val nulls: Array[InternalRow] = structSchemas.map(s => new GenericInternalRow(s.length))
  // Bound here, on the driver that builds the operator; shipped to the executors with it.
  private val condition: JoinCondition =
    spec.condition.map(JoinCondition.bind(_, dataSchemas(0), dataSchemas(1))).orNull
  private val cacheSchema = StructType(
    Seq(
      StructField("row", BinaryType, nullable = false),
      StructField("matched", BooleanType, nullable = false),
      StructField("id", LongType, nullable = true)
    )
  )
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

  override def packedInput: Seq[String] = Seq(Contract.LeftRowColumn, Contract.RightRowColumn)
  override def packedOutput: Boolean = true
  override val keyValueSchema: StructType = StructType(
    Seq(
      StructField("leftCleanupTimer", LongType, nullable = true),
      StructField("rightCleanupTimer", LongType, nullable = true),
      StructField("nextArrival", LongType, nullable = false)
    )
  )

  @transient private var caches: Array[SideRows] = _
  // The key's timers and arrival counter during a visit: loaded on first use, written back in finish.
  @transient private var cleanupTimers: Array[java.lang.Long] = _
  @transient private var nextArrival: Long = _
  @transient private var loaded: Boolean = _

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit = {
    caches = Array(0, 1).map { side =>
      new SideRows(
        handle.getMapState[(Long, Long), Row](
          s"${IntervalJoinLogic.Sides(side)}Rows",
          Encoders.tuple(Encoders.scalaLong, Encoders.scalaLong),
          Encoders.row(cacheSchema),
          ttl
        ),
        side
      )
    }
    loaded = false
  }

  private def load(ctx: KeyContext): Unit = if (!loaded) {
    loaded = true
    val s = ctx.keyValue
    if (s != null) {
      cleanupTimers = Array(if (s.isNullAt(0)) null else s.getLong(0), if (s.isNullAt(1)) null else s.getLong(1))
      nextArrival = s.getLong(2)
    } else { cleanupTimers = Array(null, null); nextArrival = 0L }
  }

  override def finish(ctx: KeyContext): Unit = if (loaded) {
    loaded = false
    caches.foreach(_.flush())
    // No timer means both caches are empty: the key's state is cleared (ids restart, as on python).
    ctx.keyValue =
      if (cleanupTimers(0) == null && cleanupTimers(1) == null) null
      else Row(cleanupTimers(0), cleanupTimers(1), nextArrival)
  }

  /** A cached row: its side's row struct (its bytes and an `UnsafeRow` over them), whether it was joined, its id
   * (candidate mode, else null); whether the state holds it, whether the visit changed it. */
  private final class Entry(
      val bytes: Array[Byte],
      val row: UnsafeRow,
      var matched: Boolean,
      val id: java.lang.Long,
      var stored: Boolean = false,
      var dirty: Boolean = true
  )

  /**
   * A side's cached rows during one visit of the key, by `(time, arrival)`: read from the MapState at most once,
   * when first looked at, and written back (the rows the visit added or changed, and removed) in [[finish]].
   * Why: the key's rows of a micro-batch each looked at the other side's whole cache, a state store scan per row,
   * and each cached row was one write even when it left in the same visit: in a profile of the interval join's
   * benchmark the scans and the writes were a large share of the task time.
   */
  private final class SideRows(state: MapState[(Long, Long), Row], side: Int) {
    private val rows = new java.util.TreeMap[(Long, Long), Entry](IntervalJoinLogic.ByTimeAndArrival)
    private var read = false
    private val removed = new java.util.ArrayList[(Long, Long)]()

    /** Every row, oldest first and in arrival order within a time. */
    def all: java.util.TreeMap[(Long, Long), Entry] = {
      if (!read) {
        read = true
        state.iterator().foreach { case (at, stored) =>
          val entry = decode(stored, side)
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
  }

  private def decode(stored: Row, side: Int): Entry = {
    val bytes = stored.getAs[Array[Byte]](0)
    new Entry(
      bytes,
      PackedRows.point(bytes, structSchemas(side).length),
      stored.getBoolean(1),
      if (stored.isNullAt(2)) null else stored.getLong(2)
    )
  }

  private def encode(e: Entry): Row = Row(e.bytes, e.matched, e.id)

  private def operatorTime(time: Long): Long = if (eventTime) math.max(time, 0L) else time

  /** Rows at or before this time can match nothing still to come. */
  private def expirationTime(operatorTime: Long, windowEnd: Long): Long =
    if (operatorTime == Long.MaxValue) Long.MaxValue else operatorTime - windowEnd - 1

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] = {
    if (e.kind != RowKind.Insert)
      throw new IllegalStateException(
        s"an interval join consumes insert-only input; got ${e.kind}${rowString(e.packed, e.side)} on the " +
          s"${if (e.side == 0) "left" else "right"} input"
      )
    load(ctx)
    process(ctx, e.packed, rowtime(e, now), operatorTime(ctx.timers.time), e.side)
  }

  /** The data columns of a side's row as `[v1, v2, …]` (an error message's). */
  private def rowString(row: UnsafeRow, side: Int): String =
    structPositions(side).map(i => row.get(i, structSchemas(side)(i).dataType)).mkString("[", ", ", "]")

  private def process(ctx: KeyContext, row: UnsafeRow, rowTime: Long, opTime: Long, side: Int): Seq[Change] = {
    val out = ArrayBuffer[Change]()
    val arrival = nextArrival
    nextArrival += 1
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
      val cache = caches(other)
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
      caches(side).add((rowTime, arrival), own)
      if (cleanupTimers(side) == null) registerCleanup(ctx, rowTime, side)
    } else if (outer(side)) expired(Seq(own), side, out)
    out.toSeq
  }

  override def onTimer(ctx: KeyContext, timestamp: Long): Seq[Change] = {
    load(ctx)
    val out = ArrayBuffer[Change]()
    val opTime = operatorTime(ctx.timers.time)
    // The right cache first when both timers share the timestamp (Flink's order).
    for (side <- Seq(1, 0) if cleanupTimers(side) != null && cleanupTimers(side) == timestamp)
      removeExpired(ctx, expirationTime(opTime, windowEnd(side)), side, out)
    out.toSeq
  }

  private def removeExpired(ctx: KeyContext, expiration: Long, side: Int, out: ArrayBuffer[Change]): Unit = {
    val cache = caches(side)
    // Copied out first: removing from a TreeMap can move another entry's key and value into the removed node.
    val gone = ArrayBuffer[((Long, Long), Entry)]()
    cache.all.headMap((expiration, Long.MaxValue), true).forEach((at, entry) => gone += ((at, entry)))
    gone.foreach { case (at, entry) =>
      if (outer(side)) expired(Seq(entry), side, out)
      cache.remove(at)
    }
    if (!cache.all.isEmpty) registerCleanup(ctx, cache.all.firstKey._1, side) else cleanupTimers(side) = null
  }

  private def registerCleanup(ctx: KeyContext, rowTime: Long, side: Int): Unit = {
    val at = rowTime + windowEnd(side) + 1
    ctx.timers.register(at)
    cleanupTimers(side) = at
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

object IntervalJoinLogic {
  private val Sides = Array("left", "right")

  /** Cached rows' order: by time, then arrival (RocksDB returns the keys in the byte order of their encoding, not by value). */
  private val ByTimeAndArrival: Ordering[(Long, Long)] = Ordering.Tuple2(Ordering.Long, Ordering.Long)
}
