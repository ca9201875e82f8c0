package streamjoin.operators
package window_join

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.catalyst.{CatalystTypeConverters, InternalRow}
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TTLConfig}
import org.apache.spark.sql.types._

/** One side's rows of one window, in arrival order, and whether the join key has no NULL (read when it fires). */
final class WindowRows(val rows: ArrayBuffer[Array[Any]], val joinable: Boolean)

/**
 * Window join over insert-only rows that carry their window, Flink's `WindowJoinOperator` (docs/semantics.md
 * §11.4): the JVM twin of `streamjoin.runtime.window_join.operator.WindowJoinLogic`, same changes and `_seq`. Each
 * side's rowtime column ([[TwoInputSpec]]) is its window end.
 *
 * Per join key: a row whose window's end − 1 ms is at or before the watermark is dropped; else it is appended to its
 * side's rows of the window and a timer is registered at the window's end − 1 ms. The timer joins the window's rows
 * as Flink's `WindowJoinHelper` processors do — INNER/LEFT/FULL per left row its pairs then (outer) its padding,
 * FULL then the right rows that matched nothing, RIGHT per right row its pairs then its padding, SEMI/ANTI each
 * left row with / without a match (as `[left, NULL…]`) — and frees them. A pair matches when the key has no NULL
 * and the residual predicate, if any, holds. In candidate mode every equi pair and every outer row's expiry are
 * emitted with the rows' ids (their positions in the window), for the python engine's padding step.
 *
 * State per join key and side: a MapState `leftRecords` / `rightRecords` window end (ms) → the window's rows
 * (Flink's `left-records` / `right-records` list states namespaced by the window end).
 *
 * Built from a [[WindowJoinSpec]].
 */
class WindowJoinLogic(spec: WindowJoinSpec, input: StructType) extends TwoInputLogic(spec.inputs, input) {
  private val condition: JoinCondition =
    spec.condition.map(JoinCondition.bind(_, dataSchemas(0), dataSchemas(1))).orNull
  private val nulls = dataSchemas.map(s => new Array[Any](s.length))
  private val semiAnti = spec.how == "semi" || spec.how == "anti"
  private val padLeft = spec.how == "left" || spec.how == "full"
  private val padRight = spec.how == "right" || spec.how == "full"

  private def windowSchema(side: Int) = StructType(
    Seq(
      StructField("rows", ArrayType(dataSchemas(side), containsNull = false), nullable = false),
      StructField("joinable", BooleanType, nullable = false)
    )
  )

  @transient private lazy val toInternal = dataSchemas.map(CatalystTypeConverters.createToCatalystConverter(_))
  @transient private var windows: Array[CachedMapState[Long, WindowRows, Long, Row]] = _

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit =
    windows = Array(0, 1).map { side =>
      val state: MapState[Long, Row] = handle.getMapState(
        s"${WindowJoinLogic.Sides(side)}Records",
        Encoders.scalaLong,
        Encoders.row(windowSchema(side)),
        ttl
      )
      new CachedMapState[Long, WindowRows, Long, Row](state, identity, store, load)
    }

  private def store(w: WindowRows): Row = Row(w.rows.map(r => Row.fromSeq(r.toSeq)).toSeq, w.joinable)

  private def load(row: Row): WindowRows =
    new WindowRows(ArrayBuffer.from(row.getSeq[Row](0).map(_.toSeq.toArray[Any])), row.getBoolean(1))

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] = {
    if (e.kind != RowKind.Insert)
      throw new IllegalStateException(
        s"a window join consumes insert-only input; got ${e.kind}${e.row.mkString("[", ", ", "]")} on the " +
          s"${WindowJoinLogic.Sides(e.side)} input"
      )
    val endMs = e.time.asInstanceOf[Long]
    if (endMs - 1 <= ctx.timers.time) return Nil
    val side = windows(e.side)
    var w = side.get(endMs)
    if (w == null) w = new WindowRows(ArrayBuffer.empty, joinable)
    w.rows += e.row
    side.put(endMs, w)
    ctx.timers.register(endMs - 1)
    Nil
  }

  override def onTimer(ctx: KeyContext, timestamp: Long): Seq[Change] = {
    val endMs = timestamp + 1
    val found = windows.map(_.get(endMs))
    found.indices.foreach(side => if (found(side) != null) windows(side).remove(endMs))
    val joinable = found.forall(w => w == null || w.joinable)
    val rows = found.map(w => if (w == null) ArrayBuffer.empty[Array[Any]] else w.rows)
    join(rows(0), rows(1), joinable)
  }

  private def join(left: ArrayBuffer[Array[Any]], right: ArrayBuffer[Array[Any]], joinable: Boolean): Seq[Change] = {
    val out = ArrayBuffer.empty[Change]
    val internal =
      if (condition == null) null
      else
        Array(left, right).zipWithIndex.map { case (rows, side) =>
          rows.map(r => condition.internal(side, toInternal(side)(Row.fromSeq(r.toSeq)).asInstanceOf[InternalRow]))
        }
    def matches(i: Int, j: Int): Boolean =
      joinable && (condition == null || condition(internal(0)(i), internal(1)(j)))
    def emit(l: Array[Any], r: Array[Any], i: Any, j: Any): Unit = {
      val values = (if (l == null) nulls(0) else l) ++ (if (r == null) nulls(1) else r)
      out += Change(RowKind.Insert, if (spec.candidates) values ++ Array[Any](i, j) else values)
    }
    if (semiAnti) {
      left.indices.foreach { i =>
        if (right.indices.exists(matches(i, _)) == (spec.how == "semi")) emit(left(i), null, null, null)
      }
    } else if (spec.how == "right") {
      right.indices.foreach { j =>
        var matched = false
        left.indices.foreach(i => if (matches(i, j)) { emit(left(i), right(j), i.toLong, j.toLong); matched = true })
        if (spec.candidates || !matched) emit(null, right(j), null, j.toLong)
      }
    } else {
      val rightMatched = new Array[Boolean](right.length)
      left.indices.foreach { i =>
        var matched = false
        right.indices.foreach { j =>
          if (matches(i, j)) { emit(left(i), right(j), i.toLong, j.toLong); matched = true; rightMatched(j) = true }
        }
        if (padLeft && (spec.candidates || !matched)) emit(left(i), null, i.toLong, null)
      }
      if (padRight) right.indices.foreach { j =>
        if (spec.candidates || !rightMatched(j)) emit(null, right(j), null, j.toLong)
      }
    }
    out.toSeq
  }

  override def finish(ctx: KeyContext): Unit = windows.foreach(_.flush())
}

object WindowJoinLogic {
  private val Sides = Array("left", "right")
}
