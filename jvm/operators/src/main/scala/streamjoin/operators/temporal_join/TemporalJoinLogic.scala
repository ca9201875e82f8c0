package streamjoin.operators
package temporal_join

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TTLConfig}
import org.apache.spark.sql.types._

/**
 * Event-time temporal join `probe JOIN versioned FOR SYSTEM_TIME AS OF probe.rowtime`, INNER or
 * LEFT (docs/semantics.md §4): the JVM twin of `streamjoin.runtime.temporal_join`
 * (`TemporalRowTimeJoin` run by `TemporalJoinLogic`), after Flink's
 * `TemporalRowTimeJoinOperator`. Side 0 is the probe input, side 1 the versioned table. Same
 * rules: probe rows wait until the watermark reaches their time, then join the version valid at
 * that time (the latest at or before it; a `-D` version or none: INNER drops, LEFT pads) in
 * arrival order with their own RowKind; `-U` versions are ignored; with `appendOnlyVersions` a
 * `+I` older than the key's latest version is ignored and any other RowKind is an error; versions
 * older than the newest one at or before the watermark are dropped when the timer fires; one
 * timer per key at the smallest pending time.
 *
 * State per key, as Flink keeps it: MapState `probeRows` arrival index → (rowtime ms, RowKind,
 * row) (Flink's `left`), MapState `versions` version time (ms) → (RowKind, row) (Flink's
 * `right`), and the key value the shell keeps with its timers ([[KeyedLogic.keyValueSchema]]): the
 * next arrival index, the registered timer and the latest version time (Flink's `next-index` and
 * `timer`), null when the key holds nothing.
 *
 * Built from a [[TemporalJoinSpec]].
 */
class TemporalJoinLogic(spec: TemporalJoinSpec, input: StructType) extends TwoInputLogic(spec.inputs, input) {
  private val left = spec.how == "left"
  private val appendOnlyVersions = spec.appendOnlyVersions
  private val nulls = new Array[Any](dataSchemas(1).length)
  private val probeSchema = StructType(
    Seq(
      StructField("rowtime", LongType, nullable = false),
      StructField("kind", StringType, nullable = false),
      StructField("row", dataSchemas(0), nullable = false)
    )
  )
  private val versionSchema = StructType(
    Seq(StructField("kind", StringType, nullable = false), StructField("row", dataSchemas(1), nullable = false))
  )
  override val keyValueSchema: StructType = StructType(
    Seq(
      StructField("nextIndex", LongType, nullable = false),
      StructField("timer", LongType, nullable = true),
      StructField("latestVersion", LongType, nullable = true)
    )
  )

  @transient private var probes: MapState[Long, Row] = _
  @transient private var versions: MapState[Long, Row] = _
  // The key's value during a visit: loaded on first use, written back in finish.
  @transient private var nextIndex: Long = _
  @transient private var timer: java.lang.Long = _
  @transient private var latestVersion: java.lang.Long = _
  @transient private var loaded: Boolean = _

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit = {
    probes = handle.getMapState[Long, Row]("probeRows", Encoders.scalaLong, Encoders.row(probeSchema), ttl)
    versions = handle.getMapState[Long, Row]("versions", Encoders.scalaLong, Encoders.row(versionSchema), ttl)
    loaded = false
  }

  private def load(ctx: KeyContext): Unit = if (!loaded) {
    loaded = true
    val s = ctx.keyValue
    if (s != null) {
      nextIndex = s.getLong(0)
      timer = if (s.isNullAt(1)) null else s.getLong(1)
      latestVersion = if (s.isNullAt(2)) null else s.getLong(2)
    } else { nextIndex = 0L; timer = null; latestVersion = null }
  }

  override def finish(ctx: KeyContext): Unit = if (loaded) {
    loaded = false
    // Pending probe rows keep a timer and versions a latest time: otherwise the key holds nothing.
    ctx.keyValue =
      if (timer == null && latestVersion == null && nextIndex == 0L) null else Row(nextIndex, timer, latestVersion)
  }

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] = {
    load(ctx)
    val time = rowtime(e, now)
    if (e.side == 0) {
      probes.updateValue(nextIndex, Row(time, e.kind, Row.fromSeq(e.row.toSeq)))
      nextIndex += 1
      registerSmallestTimer(ctx, time)
    } else if (keepsVersion(e, time)) {
      versions.updateValue(time, Row(e.kind, Row.fromSeq(e.row.toSeq)))
      if (latestVersion == null || time > latestVersion) latestVersion = time
      registerSmallestTimer(ctx, time)
    }
    Nil
  }

  private def keepsVersion(e: Element, time: Long): Boolean =
    if (appendOnlyVersions) {
      if (e.kind != RowKind.Insert)
        throw new IllegalStateException(
          s"an append-only versioned input must contain only +I rows, got ${e.kind}${e.row.mkString("[", ", ", "]")}"
        )
      latestVersion == null || time >= latestVersion
    } else e.kind != RowKind.UpdateBefore

  /** Emit every buffered probe row at or before the watermark (in arrival order), drop versions
   * no later probe row can use, set the next timer. */
  override def onTimer(ctx: KeyContext, timestamp: Long): Seq[Change] = {
    load(ctx)
    val watermark = ctx.timers.time
    timer = null
    val times = versions.keys().toArray.sorted
    val found = scala.collection.mutable.HashMap[Long, Row]()
    val out = ArrayBuffer[Change]()
    var nextTime: java.lang.Long = null
    probes.iterator().toArray.sortBy(_._1).foreach { case (index, probe) =>
      val rowTime = probe.getLong(0)
      if (rowTime <= watermark) {
        val row = probe.getStruct(2).toSeq.toArray[Any]
        val at = java.util.Arrays.binarySearch(times, rowTime)
        val position = if (at >= 0) at else -at - 2 // the last version time at or before rowTime
        val version =
          if (position < 0) null else found.getOrElseUpdate(times(position), versions.getValue(times(position)))
        if (version != null && RowKind.isAccumulate(version.getString(0)))
          out += Change(probe.getString(1), row ++ version.getStruct(1).toSeq)
        else if (left) out += Change(probe.getString(1), row ++ nulls)
        probes.removeKey(index)
      } else if (nextTime == null || rowTime < nextTime) nextTime = rowTime
    }
    // Keep the newest version at or before the watermark and everything after it.
    val atOrBefore = times.takeWhile(_ <= watermark)
    atOrBefore.dropRight(1).foreach(versions.removeKey)
    if (nextTime != null) register(ctx, nextTime) else nextIndex = 0L
    out.toSeq
  }

  private def registerSmallestTimer(ctx: KeyContext, time: Long): Unit =
    if (timer == null) register(ctx, time)
    else if (timer > time) { ctx.timers.delete(timer); register(ctx, time) }

  private def register(ctx: KeyContext, time: Long): Unit = {
    timer = time
    ctx.timers.register(time)
  }
}
