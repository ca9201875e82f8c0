package streamjoin.operators

import java.time.Duration

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.catalyst.expressions.GenericRow
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types._

/**
 * The `StatefulProcessor` of the jvm engine that runs a [[KeyedLogic]] per grouping key — the JVM
 * twin of `streamjoin.runtime.processor.KeyedProcessor`, with the same contract, so both engines
 * give the same changelog:
 *
 * per visit of a key: advance its timers to the current time ([[Clock]]) and fire the due ones — after the rows an
 * upstream event-time operator fired on the watermark that made it current ([[KeyedOperator.isFiredUpstream]]),
 * before any other; for each element, advance to its per-row watermark, then call [[KeyedLogic.onElement]]; then
 * [[KeyedLogic.finishBundle]]; with the `instant` clock, end the instant; keep one Spark timer at the
 * key's next wake-up; mirror the late-row count; emit the changes as rows `output columns + _rowkind
 * + _seq`. An expired Spark timer advances the key to the current time the same way.
 *
 * A key's timers live in its state (`timers`: time, registered times, the Spark timer standing for
 * them, and the logic's [[KeyedLogic.keyValueSchema]] value when it has one), advanced lazily as Flink's timer service would have fired them: Spark runs a batch's input
 * before its expired timers, Flink fires a watermark's timers before the rows after it.
 *
 * @param logic      the operator's logic
 * @param clock      what the current time is ([[Clock]])
 * @param stateTtlMs state TTL in ms for the logic's state variables, or <= 0 for none
 * @param assertions check each visit's changes ([[ChangelogAssertions]]) before emitting them
 */
class KeyedOperator(val logic: KeyedLogic, clock: String, stateTtlMs: Long, assertions: Boolean = false)
    extends StatefulProcessor[Row, Row, Row] {

  @transient private var timerState: ValueState[Row] = _
  private val keyValueSchema = logic.keyValueSchema
  @transient private var lateState: ValueState[Row] = _

  /** The wall clock of the `instant` clock, epoch ms (the tests set it: the tools jar's `LocalRun`, the unit tests). */
  private[operators] var wallClock: () => Long = () => System.currentTimeMillis()

  /**
   * How far (ms) the watermark of the operator's input falls behind Spark's: the interval joins upstream hold it back
   * (Flink's `KeyedCoProcessOperatorWithWatermarkDelay`); the `event` clock's time is Spark's watermark minus it.
   */
  private[operators] var watermarkDelayMs: Long = 0L

  private def hasTimers: Boolean = clock != Clock.None

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    val handle = getHandle
    if (keyValueSchema != null && !hasTimers)
      throw new IllegalArgumentException(
        s"${logic.getClass.getSimpleName} keeps a key value with the timers, but the clock is $clock"
      )
    if (hasTimers) {
      val schema =
        if (keyValueSchema == null) KeyedOperator.TimerSchema
        else KeyedOperator.TimerSchema.add(StructField("keyValue", keyValueSchema, nullable = true))
      timerState = handle.getValueState("timers", Encoders.row(schema), TTLConfig.NONE)
    }
    if (logic.countsLateRows)
      lateState = handle.getValueState(Contract.LateState, Encoders.row(KeyedOperator.LateSchema), TTLConfig.NONE)
    val ttl = if (stateTtlMs > 0) TTLConfig(Duration.ofMillis(stateTtlMs)) else TTLConfig.NONE
    logic.open(handle, ttl)
  }

  private def now(ctx: KeyContext, timerValues: TimerValues): java.lang.Long = clock match {
    case Clock.Event      => timerValues.getCurrentWatermarkInMs - watermarkDelayMs
    case Clock.Processing => timerValues.getCurrentProcessingTimeInMs
    case Clock.Instant    => math.max(wallClock(), ctx.timers.time)
    case _                => null
  }

  /** The key's context, its registered Spark timer, and whether it has a timer row. */
  private def load(): (KeyContext, java.lang.Long, Boolean) = {
    // One state store read per variable: get() is null where exists() is false (exists() then get() read twice).
    val lateRow = if (lateState != null) lateState.get() else null
    val late: Long = if (lateRow != null) lateRow.getLong(0) else 0L
    if (!hasTimers) return (new KeyContext(null, late), null, false)
    val stored = timerState.get()
    if (stored == null) return (new KeyContext(new TimerService(), late), null, false)
    val timers = new java.util.TreeSet[java.lang.Long]()
    stored.getSeq[Long](1).foreach(t => timers.add(t))
    val spark: java.lang.Long = if (stored.isNullAt(2)) null else stored.getLong(2)
    val ctx = new KeyContext(new TimerService(stored.getLong(0), timers), late)
    if (keyValueSchema != null && !stored.isNullAt(3)) ctx.keyValue = stored.getStruct(3)
    (ctx, spark, true)
  }

  override def handleInputRows(key: Row, inputRows: Iterator[Row], timerValues: TimerValues): Iterator[Row] = {
    val (ctx, sparkTimer, hasTimerRow) = load()
    val lateBefore = ctx.lateDropped
    val out = new SeqOutput()
    val current = now(ctx, timerValues)
    // The key advances to the current time before its first row, unless that row is one an upstream event-time
    // operator fired on the watermark that made this current time: Flink delivers those before the watermark.
    var pendingNow = current != null
    var lastSeq: Array[Byte] = null
    var lastFired: Array[Byte] = null
    logic.elements(inputRows).foreach { element =>
      val fired = KeyedOperator.isFiredUpstream(element, current)
      if (pendingNow && !fired) {
        advance(ctx, current, out, lastFired)
        pendingNow = false
      }
      if (element.watermark != null && !KeyedOperator.isChained(element))
        advance(ctx, element.watermark, out, element.seq)
      out.add(element.seq, logic.onElement(ctx, element, current))
      lastSeq = element.seq
      if (fired) lastFired = element.seq
    }
    if (pendingNow) advance(ctx, current, out, lastFired)
    if (lastSeq != null) out.add(lastSeq, logic.finishBundle(ctx))
    if (clock == Clock.Instant) advance(ctx, current + 1, out, lastSeq) // every row of this key's instant has arrived
    finish(key, ctx, sparkTimer, hasTimerRow, out, lateBefore, current)
  }

  override def handleExpiredTimer(
      key: Row,
      timerValues: TimerValues,
      expiredTimerInfo: ExpiredTimerInfo
  ): Iterator[Row] = {
    val (ctx, _, hasTimerRow) = load()
    val out = new SeqOutput()
    val current = now(ctx, timerValues)
    advance(ctx, current, out, null)
    finish(key, ctx, null, hasTimerRow, out, ctx.lateDropped, current) // Spark deleted the timer that just expired
  }

  /** Fire the key's timers up to `to`; their changes are numbered under `seq`, or, when null, [[KeyedLogic.timerSeq]]. */
  private def advance(ctx: KeyContext, to: Long, out: SeqOutput, seq: Array[Byte]): Unit =
    ctx.timers.advance(to) { timestamp =>
      val cause = if (seq != null) seq else logic.timerSeq(ctx, timestamp)
      out.add(cause, logic.onTimer(ctx, timestamp))
    }

  private def finish(
      key: Row,
      ctx: KeyContext,
      registered: java.lang.Long,
      hasTimerRow: Boolean,
      out: SeqOutput,
      lateBefore: Long,
      current: java.lang.Long
  ): Iterator[Row] = {
    logic.finish(ctx)
    if (hasTimers) {
      val wakeup = ctx.timers.nextWakeup
      val wanted: java.lang.Long =
        if (wakeup == null) null
        else if (clock == Clock.Event) wakeup + watermarkDelayMs // in Spark's watermark
        else if (clock == Clock.Processing) wakeup
        else null
      if (registered != wanted) {
        if (registered != null) getHandle.deleteTimer(registered)
        if (wanted != null) getHandle.registerTimer(wanted)
      }
      val keyCleared = keyValueSchema != null && ctx.keyValue == null
      // With no timer pending, a time no later than the clock's current one is not kept: the key's next visit
      // advances to the clock's time then, at least as late (the watermark and the batch's processing time only
      // move forward), before anything reads it. Without this, every key ever seen keeps a timer row.
      val restoredOnNextVisit =
        keyValueSchema == null && current != null && clock != Clock.Instant && ctx.timers.time <= current
      if (ctx.timers.timers.isEmpty && (ctx.timers.time == Long.MinValue || keyCleared || restoredOnNextVisit)) {
        if (hasTimerRow) timerState.clear() // a clear is a write (a RocksDB tombstone) even where nothing is stored
      } else {
        val times = new Array[Long](ctx.timers.timers.size)
        var i = 0
        ctx.timers.timers.forEach { t => times(i) = t; i += 1 }
        timerState.update(
          if (keyValueSchema == null) Row(ctx.timers.time, times.toSeq, wanted)
          else Row(ctx.timers.time, times.toSeq, wanted, ctx.keyValue)
        )
      }
    }
    if (lateState != null && ctx.lateDropped != lateBefore) lateState.update(Row(ctx.lateDropped))
    if (assertions)
      ChangelogAssertions.checkVisit(logic.getClass.getSimpleName, key, out.changes.toSeq, logic.outputKeyedByKey)
    out.changes.iterator.map { case (seq, c) =>
      val values = new Array[Any](c.values.length + 2)
      System.arraycopy(c.values, 0, values, 0, c.values.length)
      values(c.values.length) = c.kind
      values(c.values.length + 1) = seq
      new GenericRow(values): Row // wraps the array as is (Row.fromSeq would copy it twice per output row)
    }
  }
}

object KeyedOperator {

  /** The length of a source change's `_seq` (its root). */
  val RootBytes = 8

  /**
   * Whether `element` carries an upstream operator's event time rather than a source's per-row watermark (a longer
   * `_seq` than a root; [[Element.watermark]]).
   */
  def isChained(element: Element): Boolean = element.watermark != null && element.seq.length > RootBytes

  /**
   * Whether `element` is a row that an upstream event-time operator emitted when the watermark reached `now` (ms) — a
   * window's result, a temporal join's released row: Flink's operator emits such rows before it forwards that
   * watermark, so the key takes them before it advances to `now` (docs/semantics.md §11.6). An operator's output is
   * never late for the watermark it forwards, so a chained row at or before `now` is one of them.
   */
  def isFiredUpstream(element: Element, now: java.lang.Long): Boolean =
    now != null && isChained(element) && element.watermark <= now
  val TimerSchema: StructType = StructType(
    Seq(
      StructField("time", LongType, nullable = false),
      StructField("timers", ArrayType(LongType, containsNull = false), nullable = false),
      StructField("sparkTimer", LongType, nullable = true)
    )
  )

  val LateSchema: StructType = StructType(Seq(StructField("count", LongType, nullable = false)))

  /** The `timeMode` of `transformWithState` for a clock (state TTL needs processing time). */
  def timeMode(clock: String, stateTtlMs: Long): TimeMode = clock match {
    case Clock.Event      => TimeMode.EventTime()
    case Clock.Processing => TimeMode.ProcessingTime()
    case Clock.Instant    => TimeMode.None()
    case _                => if (stateTtlMs > 0) TimeMode.ProcessingTime() else TimeMode.None()
  }
}
