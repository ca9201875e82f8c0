package streamjoin.operators
package over_aggregate

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.streaming.{StatefulProcessorHandle, TTLConfig, ValueState}
import org.apache.spark.sql.types._

/**
 * One partition key's OVER state, shaped as Flink's over functions keep it (the JVM twin of
 * `streamjoin.runtime.over_aggregate.functions.OverState`):
 *
 *  - `pending`: MapState time → the rows waiting for that time's timer, in arrival order
 *    (Flink's `MapState<Long, List<RowData>>`);
 *  - `frame` (bounded frames): MapState position → (time, aggregate arguments) of the emitted rows
 *    still inside the frame, oldest first; positions `head` until `tail` are in use, so taking the
 *    oldest out and adding a newest are point operations;
 *  - `overState`: one value with the accumulators, Flink's `lastTriggeringTs`, the clean-up timer's
 *    time (bounded RANGE) and `head`/`tail`; read on a key visit's first use, written in [[store]];
 *  - the aggregates' views as MapStates (see [[Aggregates.openViews]]).
 *
 * The MapStates are read and written through a key visit's [[CachedMapState]]: a visit buffers
 * hundreds of rows of a few times and fires a timer per time, each touching the same entries.
 */
final class OverState(
    aggregates: Aggregates,
    rowSchema: StructType,
    handle: StatefulProcessorHandle,
    ttl: TTLConfig,
    bounded: Boolean
) {
  private val argsSchema = StructType(aggregates.functions.indices.map { i =>
    val t = aggregates.functions(i).inputType
    StructField(s"arg_$i", if (t == null) BooleanType else t, nullable = true) // COUNT(*) has no argument
  })
  private val valueSchema = StructType(
    Seq(
      StructField("accs", aggregates.accSchema, nullable = false),
      StructField("lastTriggeringTs", LongType, nullable = false),
      StructField("cleanupTs", LongType, nullable = true),
      StructField("head", LongType, nullable = false),
      StructField("tail", LongType, nullable = false)
    )
  )
  private val rowsSchema = StructType(
    Seq(StructField("rows", ArrayType(rowSchema, containsNull = false), nullable = false))
  )
  private val frameSchema = StructType(
    Seq(StructField("time", LongType, nullable = false), StructField("args", argsSchema, nullable = false))
  )

  private val value: ValueState[Row] = handle.getValueState("overState", Encoders.row(valueSchema), ttl)
  private val pending = new CachedMapState[Long, ArrayBuffer[Array[Any]], Long, Row](
    handle.getMapState("pending", Encoders.scalaLong, Encoders.row(rowsSchema), ttl),
    identity,
    rows => Row(rows.map(r => Row.fromSeq(r.toSeq)).toSeq),
    stored => stored.getSeq[Row](0).iterator.map(_.toSeq.toArray).to(ArrayBuffer)
  )
  private val frame =
    if (!bounded) null
    else
      new CachedMapState[Long, OverState.FrameRow, Long, Row](
        handle.getMapState("frame", Encoders.scalaLong, Encoders.row(frameSchema), ttl),
        identity,
        f => Row(f.time, Row.fromSeq(f.args.toSeq)),
        stored => OverState.FrameRow(stored.getLong(0), stored.getStruct(1).toSeq.toArray)
      )
  val views: Array[AggregateView] = aggregates.openViews(handle, ttl)

  var accs: Array[Array[Any]] = _
  var lastTriggeringTs: Long = _
  var cleanupTs: java.lang.Long = _
  private var head: Long = _
  private var tail: Long = _
  private var loaded = false

  /** Read the key's value on its visit's first use. */
  def load(): Unit = if (!loaded) {
    loaded = true
    val s = value.get() // null when absent: one state store read, where exists() then get() were two
    if (s != null) {
      accs = aggregates.load(s.getStruct(0))
      lastTriggeringTs = s.getLong(1)
      cleanupTs = if (s.isNullAt(2)) null else s.getLong(2)
      head = s.getLong(3)
      tail = s.getLong(4)
    } else reset()
  }

  private def reset(): Unit = {
    accs = aggregates.create(); lastTriggeringTs = 0L; cleanupTs = null; head = 0L; tail = 0L
  }

  /** Write the key's value and the visit's changes of its MapStates back after its visit. */
  def store(): Unit = if (loaded) {
    loaded = false
    value.update(Row(aggregates.store(accs), lastTriggeringTs, cleanupTs, head, tail))
    pending.flush()
    if (frame != null) frame.flush()
    views.foreach(v => if (v != null) v.flush())
  }

  /** The rows waiting at `time`, or null. */
  def pendingAt(time: Long): Array[Array[Any]] = {
    val rows = pending.get(time)
    if (rows == null) null else rows.toArray
  }

  /** Add `row` to the rows waiting at `time`; returns whether it is the first. */
  def appendPending(time: Long, row: Array[Any]): Boolean = {
    val rows = pending.get(time)
    if (rows == null) { pending.put(time, ArrayBuffer(row)); true }
    else { rows += row; pending.put(time, rows); false }
  }

  def removePending(time: Long): Unit = pending.remove(time)

  def frameSize: Long = tail - head

  def frameAppend(time: Long, args: Array[Any]): Unit = {
    frame.putNew(tail, OverState.FrameRow(time, args))
    tail += 1
  }

  /** The oldest frame entry's time and arguments (the frame must not be empty). */
  def frameOldest: (Long, Array[Any]) = {
    val r = frame.get(head)
    (r.time, r.args)
  }

  def frameDropOldest(): Unit = { frame.remove(head); head += 1 }

  /** Forget everything but the timers (Flink's clean-up). */
  def clear(): Unit = {
    reset()
    views.foreach(v => if (v != null) v.clear())
    pending.clear()
    if (frame != null) frame.clear()
  }
}

object OverState {

  /** A frame entry: the emitted row's time and its aggregate arguments. */
  final case class FrameRow(time: Long, args: Array[Any])
}

/**
 * A per-key OVER process function (Flink's `KeyedProcessFunction`s of `operators/over/`), the JVM
 * twin of `streamjoin.runtime.over_aggregate.functions.OverFunction` and its subclasses: rows are the input
 * columns' values, outputs the row followed by the aggregates over its frame.
 */
abstract class OverFunction(val aggregates: Aggregates) extends Serializable {
  def processElement(s: OverState, ctx: KeyContext, row: Array[Any], time: Long): Seq[Array[Any]]
  def onTimer(s: OverState, ctx: KeyContext, time: Long): Seq[Array[Any]] = Nil

  protected def value(s: OverState): Array[Any] = aggregates.results(aggregates.getValues(s.accs, s.views))

  /** Keep `row` with the rows of `time`; the first row of a time registers the timer at `timerAt`. Returns whether it was the first. */
  protected def buffer(s: OverState, ctx: KeyContext, row: Array[Any], time: Long, timerAt: Long): Boolean = {
    val first = s.appendPending(time, row)
    if (first) ctx.timers.register(timerAt)
    first
  }

  /** The rows waiting at `time`, taken out of the state (null when none). */
  protected def take(s: OverState, time: Long): Array[Array[Any]] = {
    val rows = s.pendingAt(time)
    if (rows != null) s.removePending(time)
    rows
  }

  /** ROWS frame: each row gets the aggregates over itself and the rows before it (at most `limit`, <= 0: all). */
  protected def emitRowsOneByOne(s: OverState, time: Long, rows: Array[Array[Any]], limit: Long): Seq[Array[Any]] = {
    val out = new ArrayBuffer[Array[Any]](rows.length)
    rows.foreach { row =>
      val args = aggregates.args(row)
      if (limit > 0) {
        if (s.frameSize >= limit) { aggregates.retract(s.accs, s.views, s.frameOldest._2); s.frameDropOldest() }
        s.frameAppend(time, args)
      }
      aggregates.accumulate(s.accs, s.views, args)
      out += row ++ value(s)
    }
    out.toSeq
  }

  /** RANGE frame: the rows of one time are peers and share one value. */
  protected def emitPeers(s: OverState, time: Long, rows: Array[Array[Any]], keep: Boolean): Seq[Array[Any]] = {
    rows.foreach { row =>
      val args = aggregates.args(row)
      aggregates.accumulate(s.accs, s.views, args)
      if (keep) s.frameAppend(time, args)
    }
    val v = value(s)
    rows.map(_ ++ v).toSeq
  }

  /** Retract the frame's rows whose time is before `limit`. */
  protected def retractOlderThan(s: OverState, limit: Long): Unit = {
    var more = true
    while (more && s.frameSize > 0) {
      val (time, args) = s.frameOldest
      if (time < limit) { aggregates.retract(s.accs, s.views, args); s.frameDropOldest() }
      else more = false
    }
  }

  /** Flink's bounded-RANGE clean-up timer: at most `1.5 × offset` after the key's last row. */
  protected def registerCleanup(s: OverState, ctx: KeyContext, time: Long, offset: Long): Unit = {
    val earliest = time + offset + 1
    if (s.cleanupTs == null || s.cleanupTs < earliest) {
      s.cleanupTs = time + (offset * 1.5).toLong + 1
      ctx.timers.register(s.cleanupTs)
    }
  }
}

object OverFunction {

  /**
   * The function named as its Python twin (`streamjoin.runtime.over_aggregate.functions`); `offset` is the
   * frame's rows (current row counted) or milliseconds, ignored for unbounded frames.
   */
  def apply(name: String, aggregates: Aggregates, offset: Long): OverFunction = name match {
    case "RowTimeRowsBoundedPrecedingFunction"    => new RowTimeRowsBoundedPrecedingFunction(aggregates, offset)
    case "RowTimeRangeBoundedPrecedingFunction"   => new RowTimeRangeBoundedPrecedingFunction(aggregates, offset)
    case "RowTimeRowsUnboundedPrecedingFunction"  => new RowTimeRowsUnboundedPrecedingFunction(aggregates)
    case "RowTimeRangeUnboundedPrecedingFunction" => new RowTimeRangeUnboundedPrecedingFunction(aggregates)
    case "ProcTimeRowsBoundedPrecedingFunction"   => new ProcTimeRowsBoundedPrecedingFunction(aggregates, offset)
    case "ProcTimeUnboundedPrecedingFunction"     => new ProcTimeUnboundedPrecedingFunction(aggregates)
    case "ProcTimeRangeBoundedPrecedingFunction"  => new ProcTimeRangeBoundedPrecedingFunction(aggregates, offset)
    case other                                    => throw new IllegalArgumentException(s"unknown OVER function $other")
  }
}

/** Event time, ROWS BETWEEN n PRECEDING (`offset` = n + 1 rows); late at or before the last fired timer. */
final class RowTimeRowsBoundedPrecedingFunction(aggregates: Aggregates, offset: Long) extends OverFunction(aggregates) {
  def processElement(s: OverState, ctx: KeyContext, row: Array[Any], time: Long): Seq[Array[Any]] = {
    if (time > s.lastTriggeringTs) buffer(s, ctx, row, time, time) else ctx.lateDropped += 1
    Nil
  }
  override def onTimer(s: OverState, ctx: KeyContext, time: Long): Seq[Array[Any]] = {
    val rows = take(s, time)
    val out = if (rows != null && rows.nonEmpty) emitRowsOneByOne(s, time, rows, offset) else Nil
    s.lastTriggeringTs = time
    out
  }
}

/** Event time, RANGE BETWEEN INTERVAL `offset` ms PRECEDING, with Flink's clean-up timer. */
final class RowTimeRangeBoundedPrecedingFunction(aggregates: Aggregates, offset: Long)
    extends OverFunction(aggregates) {
  def processElement(s: OverState, ctx: KeyContext, row: Array[Any], time: Long): Seq[Array[Any]] = {
    if (time > s.lastTriggeringTs) { buffer(s, ctx, row, time, time); registerCleanup(s, ctx, time, offset) }
    else ctx.lateDropped += 1
    Nil
  }
  override def onTimer(s: OverState, ctx: KeyContext, time: Long): Seq[Array[Any]] = {
    if (s.cleanupTs != null && s.cleanupTs <= time) { s.clear(); return Nil }
    val rows = take(s, time)
    val out = if (rows != null && rows.nonEmpty) {
      retractOlderThan(s, time - offset); emitPeers(s, time, rows, keep = true)
    } else Nil
    s.lastTriggeringTs = time
    out
  }
}

/** Event time, UNBOUNDED PRECEDING (Flink 2.3.0's `RowTimeUnboundedPrecedingOverFunctionV2`): late at or behind the key's watermark. */
sealed abstract class RowTimeUnbounded(aggregates: Aggregates, rows: Boolean) extends OverFunction(aggregates) {
  def processElement(s: OverState, ctx: KeyContext, row: Array[Any], time: Long): Seq[Array[Any]] = {
    if (time > ctx.timers.time) buffer(s, ctx, row, time, time) else ctx.lateDropped += 1
    Nil
  }
  override def onTimer(s: OverState, ctx: KeyContext, time: Long): Seq[Array[Any]] = {
    val waiting = take(s, time)
    if (waiting == null || waiting.isEmpty) Nil
    else if (rows) emitRowsOneByOne(s, time, waiting, 0L)
    else emitPeers(s, time, waiting, keep = false)
  }
}

/** Event time, ROWS BETWEEN UNBOUNDED PRECEDING: each row emitted with its own frame. */
final class RowTimeRowsUnboundedPrecedingFunction(aggregates: Aggregates)
    extends RowTimeUnbounded(aggregates, rows = true)

/** Event time, RANGE BETWEEN UNBOUNDED PRECEDING: the rows of one time emitted together, peers sharing values. */
final class RowTimeRangeUnboundedPrecedingFunction(aggregates: Aggregates)
    extends RowTimeUnbounded(aggregates, rows = false)

/** Processing time, ROWS BETWEEN n PRECEDING (`offset` = n + 1): each row emitted on arrival. */
final class ProcTimeRowsBoundedPrecedingFunction(aggregates: Aggregates, offset: Long)
    extends OverFunction(aggregates) {
  def processElement(s: OverState, ctx: KeyContext, row: Array[Any], time: Long): Seq[Array[Any]] =
    emitRowsOneByOne(s, time, Array(row), offset)
}

/** Processing time, UNBOUNDED PRECEDING (ROWS or RANGE, as Flink runs both): each row emitted on arrival. */
final class ProcTimeUnboundedPrecedingFunction(aggregates: Aggregates) extends OverFunction(aggregates) {
  def processElement(s: OverState, ctx: KeyContext, row: Array[Any], time: Long): Seq[Array[Any]] =
    emitRowsOneByOne(s, time, Array(row), 0L)
}

/** Processing time, RANGE BETWEEN INTERVAL `offset` ms PRECEDING: an instant's rows are emitted together, 1 ms later. */
final class ProcTimeRangeBoundedPrecedingFunction(aggregates: Aggregates, offset: Long)
    extends OverFunction(aggregates) {
  def processElement(s: OverState, ctx: KeyContext, row: Array[Any], time: Long): Seq[Array[Any]] = {
    if (buffer(s, ctx, row, time, time + 1)) registerCleanup(s, ctx, time, offset)
    Nil
  }
  override def onTimer(s: OverState, ctx: KeyContext, time: Long): Seq[Array[Any]] = {
    val instant = time - 1
    val rows = s.pendingAt(instant)
    // With a zero interval the clean-up timer falls on the emission timer; Flink then clears the
    // instant's rows unemitted. Emitting them first is the one place this operator departs from it.
    if (s.cleanupTs != null && s.cleanupTs <= time && rows == null) { s.clear(); return Nil }
    if (rows == null || rows.isEmpty) return Nil
    s.removePending(instant)
    retractOlderThan(s, instant - offset)
    emitPeers(s, instant, rows, keep = true)
  }
}
