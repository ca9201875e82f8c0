package streamjoin.operators
package window_aggregate

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TTLConfig}
import org.apache.spark.sql.types._

/** One session of a group key during a visit (the JVM twin of `streamjoin.runtime.window_aggregate.function.Session`):
 * its bounds as epoch ms and as the output's values, and its changes (accumulate or not, the row's values). */
final class Session(
    val key: Array[Any],
    var startMs: Long,
    var endMs: Long,
    var start: Any,
    var end: Any,
    val changes: ArrayBuffer[(Boolean, Array[Any])]
)

/**
 * Session window aggregation, Flink's `UnsliceWindowAggProcessor` over SESSION windows (docs/semantics.md §11.2): the
 * JVM twin of `streamjoin.runtime.window_aggregate.function.SessionWindowAggFunction`, same changes and `_seq`.
 *
 * Each change comes with its own window `[t, t + gap)` (the SESSION table function's) and merges with every session
 * of the key it intersects (sessions that touch merge, Flink's `TimeWindow.intersects`) into one covering them all,
 * whose timer is at its end − 1 ms. A change that merges with none and whose window has fired by the key's watermark
 * is dropped and counted. Retractions join sessions like any change and retract from them. When the timer fires,
 * the session's changes are aggregated and `+I[key, aggregates, window_start, window_end]` is emitted unless they
 * cancel out.
 *
 * State per group key: a MapState `sessionWindowAggState` session end (ms) → its key values, bounds and changes.
 *
 * Built from a [[WindowAggregateSpec]] with a `sessionGapMs`.
 */
class SessionWindowAggregateLogic(spec: WindowAggregateSpec, input: StructType)
    extends WindowAggregateLogic(spec, input) {
  private val gapMs = spec.sessionGapMs.getOrElse(
    throw new IllegalArgumentException("SessionWindowAggregateLogic needs a WindowAggregateSpec with sessionGapMs")
  )
  private val keySchema = StructType(spec.groupBy.map(c => input(c).copy(nullable = true)))
  private val rowSchema = StructType(spec.columns.map(c => input(c).copy(nullable = true)))
  private val changeSchema = StructType(
    Seq(StructField("accumulate", BooleanType, nullable = false), StructField("row", rowSchema, nullable = false))
  )
  private val sessionSchema = StructType(
    Seq(
      StructField("key", keySchema, nullable = false),
      StructField("startMs", LongType, nullable = false),
      StructField("endMs", LongType, nullable = false),
      StructField("start", input(spec.windowStart).dataType, nullable = false),
      StructField("end", input(spec.windowEnd).dataType, nullable = false),
      StructField("changes", ArrayType(changeSchema, containsNull = false), nullable = false)
    )
  )

  @transient private var sessions: CachedMapState[Long, Session, Long, Row] = _

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit = {
    val state: MapState[Long, Row] =
      handle.getMapState("sessionWindowAggState", Encoders.scalaLong, Encoders.row(sessionSchema), ttl)
    sessions = new CachedMapState[Long, Session, Long, Row](state, identity, store, load)
  }

  private def store(s: Session): Row = Row(
    Row.fromSeq(s.key.toSeq),
    s.startMs,
    s.endMs,
    s.start,
    s.end,
    s.changes.map { case (accumulate, row) => Row(accumulate, Row.fromSeq(row.toSeq)) }.toSeq
  )

  private def load(row: Row): Session = new Session(
    row.getStruct(0).toSeq.toArray,
    row.getLong(1),
    row.getLong(2),
    row.get(3),
    row.get(4),
    ArrayBuffer.from(row.getSeq[Row](5).map(c => (c.getBoolean(0), c.getStruct(1).toSeq.toArray[Any])))
  )

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] = {
    val endMs = e.time.asInstanceOf[Long]
    val startMs = endMs - gapMs
    val merged = sessions
      .keys(identity)
      .map(sessions.get)
      .filter(s => s != null && s.startMs <= endMs && s.endMs >= startMs)
      .toSeq
      .sortBy(_.startMs)
    if (merged.isEmpty && endMs - 1 <= ctx.timers.time) {
      ctx.lateDropped += 1
      return Nil
    }
    val session = new Session(
      groupPositions.map(e.row(_)),
      startMs,
      endMs,
      e.row(startPosition),
      e.row(endPosition),
      ArrayBuffer.empty
    )
    merged.foreach { other =>
      sessions.remove(other.endMs)
      ctx.timers.delete(other.endMs - 1)
      if (other.startMs < session.startMs) { session.startMs = other.startMs; session.start = other.start }
      if (other.endMs > session.endMs) { session.endMs = other.endMs; session.end = other.end }
      session.changes ++= other.changes
    }
    session.changes += ((RowKind.isAccumulate(e.kind), e.row))
    sessions.put(session.endMs, session)
    ctx.timers.register(session.endMs - 1)
    Nil
  }

  override def onTimer(ctx: KeyContext, timestamp: Long): Seq[Change] = {
    val session = sessions.get(timestamp + 1)
    if (session == null) return Nil
    sessions.remove(timestamp + 1)
    val accs = aggregates.create()
    val views = freshViews()
    var count = 0L
    session.changes.foreach { case (accumulate, row) =>
      val args = aggregates.args(row)
      if (accumulate) { aggregates.accumulate(accs, views, args); count += 1 }
      else { aggregates.retract(accs, views, args); count -= 1 }
    }
    if (count == 0) Nil
    else {
      val values = aggregates.results(aggregates.getValues(accs, views))
      Seq(Change(RowKind.Insert, session.key ++ values ++ Array(session.start, session.end)))
    }
  }

  override def finish(ctx: KeyContext): Unit = sessions.flush()
}
