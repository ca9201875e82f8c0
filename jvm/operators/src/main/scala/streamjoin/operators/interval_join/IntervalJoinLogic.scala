package streamjoin.operators
package interval_join

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.streaming.{StatefulProcessorHandle, TTLConfig}
import org.apache.spark.sql.types._

/**
 * Interval join, event or processing time (docs/semantics.md §3): the JVM twin of
 * `streamjoin.runtime.interval_join.operator.IntervalJoinLogic`, the shell's per-key logic running a
 * [[TimeIntervalJoin]] — a [[RowTimeIntervalJoin]] on event time, a [[ProcTimeIntervalJoin]] on processing
 * time — over the key's [[IntervalJoinState]]. It opens the state, loads the key's timers and arrival counter
 * on a visit's first use and writes back what changed when the visit ends, and hands the join each element with
 * its rowtime (the processing time on processing time).
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
 * Built from an [[IntervalJoinSpec]].
 */
class IntervalJoinLogic(spec: IntervalJoinSpec, input: StructType) extends TwoInputLogic(spec.inputs, input) {
  private val join: TimeIntervalJoin = {
    // Bound here, on the driver that builds the operator; shipped to the executors with it.
    val condition = spec.condition.map(JoinCondition.bind(_, dataSchemas(0), dataSchemas(1))).orNull
    if (eventTime) new RowTimeIntervalJoin(spec, condition, structSchemas, structPositions)
    else new ProcTimeIntervalJoin(spec, condition, structSchemas, structPositions)
  }
  private val cacheSchema = StructType(
    Seq(
      StructField("row", BinaryType, nullable = false),
      StructField("matched", BooleanType, nullable = false),
      StructField("id", LongType, nullable = true)
    )
  )

  override def packedInput: Seq[String] = Seq(Contract.LeftRowColumn, Contract.RightRowColumn)
  override def packedOutput: Boolean = true
  override val keyValueSchema: StructType = StructType(
    Seq(
      StructField("leftCleanupTimer", LongType, nullable = true),
      StructField("rightCleanupTimer", LongType, nullable = true),
      StructField("nextArrival", LongType, nullable = false)
    )
  )

  @transient private var state: IntervalJoinState = _
  // Whether the state holds the visited key's timers and arrival counter: loaded on first use, written back in finish.
  @transient private var loaded: Boolean = _

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit = {
    state = new IntervalJoinState(Array(0, 1).map { side =>
      new SideRows(
        handle.getMapState[(Long, Long), Row](
          s"${IntervalJoinLogic.Sides(side)}Rows",
          Encoders.tuple(Encoders.scalaLong, Encoders.scalaLong),
          Encoders.row(cacheSchema),
          ttl
        ),
        structSchemas(side).length
      )
    })
    loaded = false
  }

  private def load(ctx: KeyContext): IntervalJoinState = {
    if (!loaded) {
      loaded = true
      val s = ctx.keyValue
      state.cleanupTimers(0) = if (s == null || s.isNullAt(0)) null else s.getLong(0)
      state.cleanupTimers(1) = if (s == null || s.isNullAt(1)) null else s.getLong(1)
      state.nextArrival = if (s == null) 0L else s.getLong(2)
    }
    state
  }

  override def finish(ctx: KeyContext): Unit = if (loaded) {
    loaded = false
    state.rows.foreach(_.flush())
    val timers = state.cleanupTimers
    // No timer means both caches are empty: the key's state is cleared (ids restart, as on python).
    ctx.keyValue = if (timers(0) == null && timers(1) == null) null else Row(timers(0), timers(1), state.nextArrival)
  }

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] = {
    if (e.kind != RowKind.Insert)
      throw new IllegalStateException(
        s"an interval join consumes insert-only input; got ${e.kind}${rowString(e.packed, e.side)} on the " +
          s"${if (e.side == 0) "left" else "right"} input"
      )
    join.processElement(load(ctx), e.packed, rowtime(e, now), e.side, joinable, ctx.timers)
  }

  /** The data columns of a side's row as `[v1, v2, …]` (an error message's). */
  private def rowString(row: UnsafeRow, side: Int): String =
    structPositions(side).map(i => row.get(i, structSchemas(side)(i).dataType)).mkString("[", ", ", "]")

  override def onTimer(ctx: KeyContext, timestamp: Long): Seq[Change] =
    join.onTimer(load(ctx), timestamp, ctx.timers)
}

object IntervalJoinLogic {
  private val Sides = Array("left", "right")
}
