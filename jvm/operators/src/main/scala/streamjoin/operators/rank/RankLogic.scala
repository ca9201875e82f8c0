package streamjoin.operators
package rank

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.streaming.{StatefulProcessorHandle, TTLConfig, ValueState}
import org.apache.spark.sql.types._

import streamjoin.operators.window_rank.SortOrder

/**
 * Top-N over a changelog, Flink's `operators/rank` functions (docs/semantics.md §6.4): the JVM twin of
 * `streamjoin.runtime.rank.function.TopNFunction`, same changes in the same order, statement by statement:
 * `first` is `AppendOnlyFirstNFunction`, `top1` `FastTop1Function`, `append` `AppendOnlyTopNFunction`, `update`
 * `UpdatableTopNFunction`, `retract` `RetractableTopNFunction`.
 *
 * State per partition key: one value `rankState`, the rows by sort key in sort order (a group per sort key, its
 * rows in arrival order; Flink's `TreeMap` of sort keys to their rows) and, for `first`, the count of rows seen;
 * loaded on the key's first element of a visit and written back at its end.
 *
 * Built from a [[RankSpec]].
 */
class RankLogic(spec: RankSpec, input: StructType) extends KeyedLogic {
  private type Rows = ArrayBuffer[Array[Any]]
  private val columns = spec.columns.map(KeyedLogic.index(input, _)).toArray
  private val seqIndex = KeyedLogic.index(input, KeyedLogic.SeqColumn)
  private val kindIndex = KeyedLogic.index(input, KeyedLogic.RowKindColumn)
  private val ordering = new SortOrder(spec.orderBy, spec.columns)
  private val rowKey = spec.rowKey.map(spec.columns.indexOf(_)).toArray
  private val rankStart = spec.rankStart
  private val rankEnd = spec.rankEnd
  // Flink's without-number algorithms cannot skip ranks below the start; an offset takes the numbered ones.
  private val numbered = spec.outputRank || rankStart > 1
  private val rowSchema = StructType(columns.map(i => input(i).copy(nullable = true)))
  private val stateSchema = StructType(
    Seq(
      StructField("groups", ArrayType(ArrayType(rowSchema, containsNull = false), containsNull = false)),
      StructField("count", LongType, nullable = false)
    )
  )

  @transient private var state: ValueState[Row] = _
  // The key's state during a visit: loaded on its first element, written back in finish.
  @transient private var groups: ArrayBuffer[Rows] = _
  @transient private var count: Long = 0L

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit = {
    state = handle.getValueState("rankState", Encoders.row(stateSchema), ttl)
    groups = null
  }

  private def load(): Unit =
    if (groups == null) {
      groups = ArrayBuffer.empty
      count = 0L
      val s = state.get()
      if (s != null) {
        s.getSeq[scala.collection.Seq[Row]](0).foreach(g => groups += ArrayBuffer.from(g.map(_.toSeq.toArray[Any])))
        count = s.getLong(1)
      }
    }

  override def elements(rows: Iterator[Row]): Iterator[Element] =
    KeyedLogic.inOrder(rows, seqIndex).iterator.map { r =>
      val seq = SeqPath.of(r, seqIndex)
      val kind = r.getString(kindIndex)
      if (spec.strategy == "update" || spec.strategy == "top1") {
        if (kind != RowKind.Insert && kind != RowKind.UpdateAfter)
          throw new IllegalStateException(
            s"rank consumes insert-only or upsert (no -U, -D) input here; got $kind at _seq=${SeqPath.show(seq)}"
          )
      } else if (spec.strategy != "retract" && kind != RowKind.Insert)
        throw new IllegalStateException(
          s"rank consumes an insert-only changelog; got $kind at _seq=${SeqPath.show(seq)}"
        )
      Element(seq, kind, KeyedLogic.values(r, columns))
    }

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] = {
    load()
    val out = ArrayBuffer.empty[Change]
    spec.strategy match {
      case "first"  => firstN(e.row, out)
      case "top1"   => top1(e.row, out)
      case "append" => appendOnly(e.row, out)
      case "update" => updatable(e.row, out)
      case _        =>
        if (e.kind == RowKind.Insert || e.kind == RowKind.UpdateAfter) accumulate(e.row, out)
        else retract(e.row, out)
    }
    out.toSeq
  }

  override def finish(ctx: KeyContext): Unit = {
    if (groups != null) {
      if (groups.isEmpty && count == 0L) state.clear()
      else state.update(Row(groups.map(g => g.map(r => Row.fromSeq(r.toSeq)).toSeq).toSeq, count))
    }
    groups = null
  }

  // ------------------------------------------------------------------ output (AbstractTopNFunction.collect*)

  /** `collectX(out, row, rank)` (only ranks in range); a negative `rank` is `collectX(out, row)`. */
  private def emit(out: ArrayBuffer[Change], kind: String, row: Array[Any], rank: Long = -1L): Unit =
    if (rank < 0 || (rankStart <= rank && rank <= rankEnd))
      out += Change(kind, if (spec.outputRank) row :+ rank else row)

  // ------------------------------------------------------------------ sort keys

  /** Where `row`'s sort key is in `groups` (binary search): its index and whether it is there. */
  private def locate(row: Array[Any]): (Int, Boolean) = {
    var lo = 0
    var hi = groups.length
    while (lo < hi) {
      val mid = (lo + hi) >>> 1
      val c = ordering.compare(groups(mid)(0), row)
      if (c == 0) return (mid, true)
      if (c < 0) lo = mid + 1 else hi = mid
    }
    (lo, false)
  }

  /** Append `row` to its sort key's rows (a new group where it has none); returns the group's index. */
  private def add(row: Array[Any]): Int = {
    val (at, found) = locate(row)
    if (found) groups(at) += row else groups.insert(at, ArrayBuffer(row))
    at
  }

  private def size: Long = groups.iterator.map(_.length.toLong).sum

  // ------------------------------------------------------------------ AppendOnlyFirstNFunction

  private def firstN(row: Array[Any], out: ArrayBuffer[Change]): Unit =
    if (count < rankEnd) {
      count += 1
      emit(out, RowKind.Insert, row, if (numbered) count else -1L)
    }

  // ------------------------------------------------------------------ FastTop1Function

  private def top1(row: Array[Any], out: ArrayBuffer[Change]): Unit = {
    val rank = if (spec.outputRank) 1L else -1L
    if (groups.isEmpty) {
      groups += ArrayBuffer(row)
      emit(out, RowKind.Insert, row, rank)
    } else if (ordering.compare(row, groups(0)(0)) < 0) {
      val prev = groups(0)(0)
      groups(0)(0) = row
      emit(out, RowKind.UpdateBefore, prev, rank)
      emit(out, RowKind.UpdateAfter, row, rank)
    }
  }

  // ------------------------------------------------------------------ AppendOnlyTopNFunction

  private def appendOnly(row: Array[Any], out: ArrayBuffer[Change]): Unit = {
    // TopNBuffer.checkSortKeyInBufferRange: room left, or a sort key before the last one
    if (size >= rankEnd && ordering.compare(row, groups.last(0)) >= 0) return
    val at = add(row)
    if (numbered) {
      val stop = shiftIn(at, row, out)
      groups.remove(stop, groups.length - stop) // sort keys the ranks no longer reach
    } else pushOut(row, out)
  }

  /** `processElementWithRowNumber` / `emitRecordsWithRowNumber`: `row` (just added to group `at`) takes its rank,
   * every row after it moves one rank down; returns the index of the first group not visited. */
  private def shiftIn(at: Int, row: Array[Any], out: ArrayBuffer[Change]): Int = {
    var rank = 0L
    var current = row
    var g = 0
    while (g < groups.length && rank <= rankEnd) {
      val rows = groups(g)
      if (g <= at) rank += rows.length
      else {
        val it = rows.iterator
        while (it.hasNext && rank <= rankEnd) {
          val prev = it.next()
          emit(out, RowKind.UpdateBefore, prev, rank)
          emit(out, RowKind.UpdateAfter, current, rank)
          current = prev
          rank += 1
        }
      }
      g += 1
    }
    if (rank <= rankEnd) emit(out, RowKind.Insert, current, rank)
    g
  }

  /** `processElementWithoutRowNumber`: over `rankEnd` rows, the last one leaves (`-D`) unless it is `row` itself;
   * `row` enters (`+I`). */
  private def pushOut(row: Array[Any], out: ArrayBuffer[Change]): Unit = {
    if (size > rankEnd) {
      val lastGroup = groups.last
      val last = lastGroup.remove(lastGroup.length - 1)
      if (lastGroup.isEmpty) groups.remove(groups.length - 1)
      if (last.sameElements(row)) return
      emit(out, RowKind.Delete, last)
    }
    emit(out, RowKind.Insert, row)
  }

  // ------------------------------------------------------------------ UpdatableTopNFunction

  private def sameKey(a: Array[Any], b: Array[Any]): Boolean = rowKey.forall(i => a(i) == b(i))

  /** The group and position of the row with `row`'s row key (Flink's `rowKeyMap`), or null. */
  private def find(row: Array[Any]): (Int, Int) = {
    var g = 0
    while (g < groups.length) {
      val j = groups(g).indexWhere(sameKey(_, row))
      if (j >= 0) return (g, j)
      g += 1
    }
    null
  }

  private def rankOf(g: Int, j: Int): Long = groups.iterator.take(g).map(_.length.toLong).sum + j + 1

  /** The row at `groups(g)(j)` leaves its sort key; `row` joins the end of its own. */
  private def move(g: Int, j: Int, row: Array[Any]): Unit = {
    groups(g).remove(j)
    if (groups(g).isEmpty) groups.remove(g)
    add(row)
  }

  private def updatable(row: Array[Any], out: ArrayBuffer[Change]): Unit = {
    val found = find(row)
    if (found != null) {
      val (g, j) = found
      val old = groups(g)(j)
      val compare = ordering.compare(row, old)
      if (!numbered) { // processElementWithoutRowNumber
        if (compare == 0) groups(g)(j) = row else move(g, j, row)
        emit(out, RowKind.UpdateBefore, old)
        emit(out, RowKind.UpdateAfter, row)
        return
      }
      val oldRank = rankOf(g, j)
      if (compare == 0) { // the same rank: the row only changes
        groups(g)(j) = row
        emit(out, RowKind.UpdateBefore, old, oldRank)
        emit(out, RowKind.UpdateAfter, row, oldRank)
        return
      }
      move(g, j, row)
      if (compare < 0) shiftUpdated(row, out, old, oldRank)
      else { // the sort key got worse, against the monotony the planner relied on (emitted as Flink does)
        val (ng, nj) = find(row)
        shiftBack(row, rankOf(ng, nj), old, oldRank, out)
      }
      return
    }
    if (size >= rankEnd && ordering.compare(row, groups.last(0)) >= 0) return // checkSortKeyInBufferRange
    add(row)
    if (numbered) {
      shiftUpdated(row, out, null, -1L)
      return
    }
    if (size > rankEnd) {
      val lastGroup = groups.last
      val last = lastGroup.remove(lastGroup.length - 1) // TopNBuffer.removeLast
      if (lastGroup.isEmpty) groups.remove(groups.length - 1)
      emit(out, RowKind.Delete, last)
    }
    emit(out, RowKind.Insert, row)
  }

  /** `emitRecordsWithRowNumber` of `UpdatableTopNFunction`: `row` (a new row, or `old` moved up from `oldRank`)
   * takes its rank, the rows between move one rank down. */
  private def shiftUpdated(row: Array[Any], out: ArrayBuffer[Change], old: Array[Any], oldRank: Long): Unit = {
    var rank = 0L
    var current = row
    var found = false
    var oldRetracted = false
    var g = 0
    var stopped = false
    while (g < groups.length && rank <= rankEnd && !stopped) {
      val rows = groups(g)
      if (!found && ordering.compare(rows(0), row) == 0) {
        rank += rows.length
        found = true
      } else if (found) {
        if (old != null && ordering.compare(rows(0), old) > 0) stopped = true // below the old sort key nothing moves
        else {
          val it = rows.iterator
          while (it.hasNext && (if (old == null) rank <= rankEnd else rank < oldRank)) {
            val prev = it.next()
            emit(out, RowKind.UpdateBefore, prev, rank)
            if ((current eq row) && old != null && !oldRetracted) {
              emit(out, RowKind.UpdateBefore, old, oldRank) // a row key retracts first
              oldRetracted = true
            }
            emit(out, RowKind.UpdateAfter, current, rank)
            current = prev
            rank += 1
          }
        }
      } else rank += rows.length
      g += 1
    }
    if (rank <= rankEnd) {
      if (old == null) emit(out, RowKind.Insert, current, rank)
      else {
        if (!oldRetracted) emit(out, RowKind.UpdateBefore, old, oldRank)
        emit(out, RowKind.UpdateAfter, current, rank)
      }
    } else groups.remove(g, groups.length - g) // sort keys the ranks no longer reach
  }

  /** `emitRecordsWithRowNumberIgnoreStateError`: `row` fell from `oldRank` to `newRank`; the rows between move one
   * rank up. */
  private def shiftBack(
      row: Array[Any],
      newRank: Long,
      old: Array[Any],
      oldRank: Long,
      out: ArrayBuffer[Change]
  ): Unit = {
    emit(out, RowKind.UpdateBefore, old, oldRank)
    var rank = 0L
    for (rows <- groups; current <- rows) {
      rank += 1
      if (rank == newRank) {
        emit(out, RowKind.UpdateAfter, row, newRank)
        return
      }
      if (oldRank <= rank) {
        emit(out, RowKind.UpdateBefore, current, rank + 1)
        emit(out, RowKind.UpdateAfter, current, rank)
      }
    }
    emit(out, RowKind.UpdateAfter, row, newRank)
  }

  // ------------------------------------------------------------------ RetractableTopNFunction

  private def accumulate(row: Array[Any], out: ArrayBuffer[Change]): Unit = {
    val at = add(row)
    if (numbered) {
      shiftIn(at, row, out)
      return
    }
    // emitRecordsWithoutRowNumber
    var rank = 0L
    var enters = false
    var leaves: Array[Any] = null
    var g = 0
    while (g < groups.length && rank <= rankEnd && leaves == null) {
      val rows = groups(g)
      if (g < at) rank += rows.length
      else if (g == at) {
        rank += rows.length
        enters = rankStart <= rank && rank <= rankEnd
      } else if (rank + rows.length <= rankEnd) rank += rows.length
      else leaves = rows((rankEnd - rank).toInt)
      g += 1
    }
    if (leaves != null) emit(out, RowKind.Delete, leaves)
    if (enters) emit(out, RowKind.Insert, row)
  }

  private def retract(row: Array[Any], out: ArrayBuffer[Change]): Unit = {
    val (at, found) = locate(row)
    if (!found) return // nothing of that sort key: stale state (Flink warns and skips)
    val removed = if (numbered) shiftOutNumbered(at, row, out) else shiftOut(at, row, out)
    val rows = groups(at)
    if (!removed) {
      val i = rows.indexWhere(_.sameElements(row)) // beyond the ranks the search reached
      if (i >= 0) rows.remove(i)
    }
    if (rows.isEmpty) groups.remove(at)
  }

  /** `retractRecordWithRowNumber`: every row after `row` moves one rank up, the last rank reached is deleted;
   * returns whether `row` was found (and removed) within the ranks searched. */
  private def shiftOutNumbered(at: Int, row: Array[Any], out: ArrayBuffer[Change]): Boolean = {
    var rank = 0L
    var prev: Array[Any] = null
    var found = false
    var g = 0
    while (g < groups.length && rank <= rankEnd) {
      val rows = groups(g)
      if (g < at) rank += rows.length
      else if (g == at) {
        var j = 0
        while (j < rows.length && rank <= rankEnd) {
          val current = rows(j)
          if (!found && current.sameElements(row)) {
            prev = current
            found = true
            rows.remove(j)
          } else {
            if (found) {
              emit(out, RowKind.UpdateBefore, prev, rank)
              emit(out, RowKind.UpdateAfter, current, rank)
              prev = current
            }
            j += 1
          }
          rank += 1
        }
      } else if (found) {
        val it = rows.iterator
        while (it.hasNext && rank <= rankEnd) {
          val current = it.next()
          emit(out, RowKind.UpdateBefore, prev, rank)
          emit(out, RowKind.UpdateAfter, current, rank)
          prev = current
          rank += 1
        }
      } else rank += rows.length
      g += 1
    }
    if (rank <= rankEnd && prev != null) emit(out, RowKind.Delete, prev, rank)
    found
  }

  /** `retractRecordWithoutRowNumber`: `row` leaves (`-D`), the row at rank `rankEnd + 1` enters (`+I`); returns
   * whether `row` was found (and removed) within the ranks searched. */
  private def shiftOut(at: Int, row: Array[Any], out: ArrayBuffer[Change]): Boolean = {
    var rank = 1L
    var found = false
    var g = 0
    var done = false
    while (g < groups.length && rank <= rankEnd && !done) {
      val rows = groups(g)
      if (g < at) rank += rows.length
      else if (g == at) {
        var j = 0
        while (j < rows.length && rank <= rankEnd) {
          val current = rows(j)
          if (!found && current.sameElements(row)) {
            emit(out, RowKind.Delete, current, rank)
            rank -= 1
            found = true
            rows.remove(j)
          } else {
            if (found && rank == rankEnd) emit(out, RowKind.Insert, current, rank)
            j += 1
          }
          rank += 1
        }
      } else if (found) {
        val last = rank + rows.length - 1
        if (last < rankEnd) rank = last + 1
        else {
          emit(out, RowKind.Insert, rows((rankEnd - rank).toInt))
          done = true
        }
      } else rank += rows.length
      g += 1
    }
    found
  }
}
