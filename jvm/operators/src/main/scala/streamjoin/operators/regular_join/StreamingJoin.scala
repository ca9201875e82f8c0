package streamjoin.operators
package regular_join

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.catalyst.expressions.UnsafeRow

/** One output change of the regular join: RowKind, left row or null (padded), right row or null ([[PackedRows]]). */
final case class JoinedChange(kind: String, left: UnsafeRow, right: UnsafeRow)

/**
 * The regular join's decision tree for one change of one join key, over the state views of both
 * sides (the JVM twin of `streamjoin.runtime.regular_join.streaming_join`; Flink's `StreamingJoinOperator` and
 * `StreamingSemiAntiJoinOperator`). A view is null when the step does not store that side (the
 * inner side in the second step of a join with a residual predicate, where matches are given).
 *
 * @param views     per side, its state view or null
 * @param outer     per side, whether it keeps association counts
 * @param condition the residual predicate a stored row of the other side must also meet to match
 *                  (Flink's `JoinCondition`), or null for an equi-join
 */
sealed abstract class AbstractStreamingJoin(
    views: Array[JoinRecordStateView],
    outer: Array[Boolean],
    condition: JoinCondition
) {

  /** Apply one change of `side`; `given` are the other side's matching rows when an earlier step found them, else null. */
  def process(side: Int, kind: String, row: UnsafeRow, given: Seq[UnsafeRow]): Seq[JoinedChange]

  /** A row whose join key holds a null: it matches nothing and is not stored. */
  def processNullKey(side: Int, kind: String, row: UnsafeRow): Seq[JoinedChange]

  protected def matches(side: Int, row: UnsafeRow, given: Seq[UnsafeRow]): Array[(UnsafeRow, Int)] = {
    val other = views(1 - side)
    if (given == null) {
      if (condition == null) other.records()
      else {
        val self = condition.internal(side, row)
        other.records { stored =>
          val that = condition.internal(1 - side, stored)
          if (side == 0) condition(self, that) else condition(that, self)
        }
      }
    }
    // Every count is looked up before any is updated, as Flink's AssociatedRecords does.
    else if (outer(1 - side)) given.map(m => (m, other.associations(m))).toArray
    else given.map(m => (m, 0)).toArray
  }

  protected def add(side: Int, row: UnsafeRow, associations: Int): Unit =
    if (views(side) != null) views(side).add(row, associations)

  protected def retract(side: Int, row: UnsafeRow): Unit = if (views(side) != null) views(side).retract(row)

  protected def update(side: Int, row: UnsafeRow, associations: Int): Unit =
    views(side).updateAssociations(row, associations)
}

object AbstractStreamingJoin {

  /** Which sides keep association counts (`JoinType.outer`): the null-padded sides, and SEMI/ANTI's left side. */
  def outer(joinType: String): Array[Boolean] = joinType match {
    case "inner"                  => Array(false, false)
    case "left" | "semi" | "anti" => Array(true, false)
    case "right"                  => Array(false, true)
    case "full"                   => Array(true, true)
    case other                    => throw new IllegalArgumentException(s"unknown join type $other")
  }

  /** Whether the output carries the right columns (not for SEMI/ANTI). */
  def projectsRight(joinType: String): Boolean = joinType != "semi" && joinType != "anti"

  /** The decision tree for `joinType` over `views` (`streaming_join.join_logic`), `condition` as the class takes it. */
  def apply(
      joinType: String,
      views: Array[JoinRecordStateView],
      condition: JoinCondition = null
  ): AbstractStreamingJoin =
    if (projectsRight(joinType)) new StreamingJoin(views, outer(joinType), condition)
    else new StreamingSemiAntiJoin(views, joinType == "anti", condition)
}

/** INNER / LEFT / RIGHT / FULL join of one join key: `streaming_join.StreamingJoin.process`, step for step. */
final class StreamingJoin(views: Array[JoinRecordStateView], outer: Array[Boolean], condition: JoinCondition)
    extends AbstractStreamingJoin(views, outer, condition) {

  def process(side: Int, kind: String, row: UnsafeRow, given: Seq[UnsafeRow]): Seq[JoinedChange] = {
    val out = ArrayBuffer[JoinedChange]()
    def send(outKind: String, self: UnsafeRow, other: UnsafeRow): Unit =
      out += (if (side == 0) JoinedChange(outKind, self, other) else JoinedChange(outKind, other, self))
    val inputOuter = outer(side)
    val otherOuter = outer(1 - side)
    val found = matches(side, row, given)
    if (RowKind.isAccumulate(kind)) {
      if (inputOuter && found.isEmpty) {
        send(RowKind.Insert, row, null) // +I[record+null]
        add(side, row, 0)
        return out.toSeq
      }
      if (!inputOuter) add(side, row, 0)
      found.foreach { case (other, assoc) =>
        if (otherOuter) {
          if (assoc == 0) send(RowKind.Delete, null, other) // -D[null+other]
          update(1 - side, other, assoc + 1)
        }
        // Outer joins send +I; an inner join forwards the input's +I/+U.
        send(if (inputOuter || otherOuter) RowKind.Insert else kind, row, other)
      }
      if (inputOuter) add(side, row, found.length)
    } else {
      retract(side, row)
      if (found.isEmpty) {
        if (inputOuter) send(RowKind.Delete, row, null) // -D[record+null]
        return out.toSeq
      }
      found.foreach { case (other, assoc) =>
        send(if (inputOuter) RowKind.Delete else kind, row, other)
        if (otherOuter) {
          if (assoc == 1) send(RowKind.Insert, null, other) // +I[null+other]
          update(1 - side, other, assoc - 1)
        }
      }
    }
    out.toSeq
  }

  def processNullKey(side: Int, kind: String, row: UnsafeRow): Seq[JoinedChange] =
    if (!outer(side)) Nil
    else {
      val padded = if (RowKind.isAccumulate(kind)) RowKind.Insert else RowKind.Delete
      Seq(if (side == 0) JoinedChange(padded, row, null) else JoinedChange(padded, null, row))
    }
}

/** SEMI / ANTI join of one join key: `streaming_join.StreamingSemiAntiJoin.process`, step for step. */
final class StreamingSemiAntiJoin(views: Array[JoinRecordStateView], anti: Boolean, condition: JoinCondition)
    extends AbstractStreamingJoin(views, Array(true, false), condition) {

  def process(side: Int, kind: String, row: UnsafeRow, given: Seq[UnsafeRow]): Seq[JoinedChange] = {
    val found = matches(side, row, given)
    val out = ArrayBuffer[JoinedChange]()
    val accumulate = RowKind.isAccumulate(kind)
    if (side == 0) {
      if (found.nonEmpty != anti) out += JoinedChange(kind, row, null)
      if (accumulate) add(0, row, found.length) else retract(0, row)
    } else if (accumulate) {
      add(1, row, 0)
      found.foreach { case (left, assoc) =>
        if (assoc == 0) out += JoinedChange(if (anti) RowKind.Delete else kind, left, null)
        update(0, left, assoc + 1)
      }
    } else {
      retract(1, row)
      found.foreach { case (left, assoc) =>
        if (assoc == 1) out += JoinedChange(if (anti) RowKind.Insert else kind, left, null)
        update(0, left, assoc - 1)
      }
    }
    out.toSeq
  }

  def processNullKey(side: Int, kind: String, row: UnsafeRow): Seq[JoinedChange] =
    if (anti && side == 0) Seq(JoinedChange(kind, row, null)) else Nil
}
