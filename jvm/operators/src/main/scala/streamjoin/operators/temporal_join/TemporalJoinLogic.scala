package streamjoin.operators
package temporal_join

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.streaming.{StatefulProcessorHandle, TTLConfig}
import org.apache.spark.sql.types._

/**
 * Event-time temporal join `probe JOIN versioned FOR SYSTEM_TIME AS OF probe.rowtime`, INNER or
 * LEFT (docs/semantics.md §4): the JVM twin of `streamjoin.runtime.temporal_join.operator.TemporalJoinLogic`,
 * the shell's per-key logic running a [[TemporalRowTimeJoin]] over the key's [[TemporalJoinState]]. Side 0 is
 * the probe input, side 1 the versioned table.
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
  private val join = new TemporalRowTimeJoin(spec.how, dataSchemas(1).length, spec.appendOnlyVersions)
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

  @transient private var state: TemporalJoinState = _
  // Whether the state holds the visited key's value: loaded on first use, written back in finish.
  @transient private var loaded: Boolean = _

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit = {
    state = new TemporalJoinState(
      handle.getMapState[Long, Row]("probeRows", Encoders.scalaLong, Encoders.row(probeSchema), ttl),
      handle.getMapState[Long, Row]("versions", Encoders.scalaLong, Encoders.row(versionSchema), ttl)
    )
    loaded = false
  }

  private def load(ctx: KeyContext): TemporalJoinState = {
    if (!loaded) {
      loaded = true
      val s = ctx.keyValue
      if (s != null) {
        state.nextIndex = s.getLong(0)
        state.timer = if (s.isNullAt(1)) null else s.getLong(1)
        state.latestVersion = if (s.isNullAt(2)) null else s.getLong(2)
      } else { state.nextIndex = 0L; state.timer = null; state.latestVersion = null }
    }
    state
  }

  override def finish(ctx: KeyContext): Unit = if (loaded) {
    loaded = false
    val s = state
    // Pending probe rows keep a timer and versions a latest time: otherwise the key holds nothing.
    ctx.keyValue =
      if (s.timer == null && s.latestVersion == null && s.nextIndex == 0L) null
      else Row(s.nextIndex, s.timer, s.latestVersion)
  }

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] = {
    val s = load(ctx)
    val time = rowtime(e, now)
    if (e.side == 0) join.processProbe(s, e.kind, e.row, time, ctx.timers)
    else join.processVersion(s, e.kind, e.row, time, ctx.timers)
    Nil
  }

  override def onTimer(ctx: KeyContext, timestamp: Long): Seq[Change] = join.onTimer(load(ctx), ctx.timers)
}
