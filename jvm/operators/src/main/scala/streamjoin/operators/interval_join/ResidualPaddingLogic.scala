package streamjoin.operators
package interval_join

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TTLConfig}
import org.apache.spark.sql.types.StructType

/**
 * Step 3 of an outer interval join with a residual predicate (docs/semantics.md §3): the JVM twin
 * of `streamjoin.runtime.interval_join.residual.ResidualPaddingLogic`. Input: the kept candidate pairs and
 * the outer rows' expiries of one join key (data columns, `_left_id`, `_right_id`), in `_seq`
 * order. A kept pair is emitted and marks its outer rows as matched; an expiry is emitted (the
 * null-padded row) unless its row matched — Flink's `!tuple.f1` test when `TimeIntervalJoin`
 * cleans up — and the row is forgotten.
 *
 * State per key and outer side: a MapState row id → true, the rows a kept pair matched whose
 * expiry has not come yet (so bounded like the join's caches). Changes are numbered by their
 * position in the key's visit.
 *
 * Built from a [[ResidualPaddingSpec]].
 */
class ResidualPaddingLogic(spec: ResidualPaddingSpec, input: StructType) extends KeyedLogic {
  private val columns = spec.columns.map(KeyedLogic.index(input, _)).toArray
  private val ids = Array("_left_id", "_right_id").map(KeyedLogic.index(input, _))
  private val outer = spec.outer.toArray
  private val seqIndex = KeyedLogic.index(input, KeyedLogic.SeqColumn)

  @transient private var matched: Array[MapState[Long, Boolean]] = _

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit =
    matched = Array("left", "right").map { side =>
      handle.getMapState[Long, Boolean](s"${side}MatchedRows", Encoders.scalaLong, Encoders.scalaBoolean, ttl)
    }

  /** Elements' rows are the data values followed by the left and right ids (null: none). */
  override def elements(rows: Iterator[Row]): Iterator[Element] =
    KeyedLogic.inOrder(rows, seqIndex).iterator.map { r =>
      Element(SeqPath.of(r, seqIndex), RowKind.Insert, KeyedLogic.values(r, columns ++ ids))
    }

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] = {
    val n = columns.length
    val values = e.row.take(n)
    val (leftId, rightId) = (e.row(n), e.row(n + 1))
    if (leftId != null && rightId != null) {
      Seq(leftId, rightId).zipWithIndex.foreach { case (id, side) =>
        if (outer(side)) matched(side).updateValue(id.asInstanceOf[Long], true)
      }
      Seq(Change(RowKind.Insert, values))
    } else {
      val (side, id) = if (rightId == null) (0, leftId.asInstanceOf[Long]) else (1, rightId.asInstanceOf[Long])
      if (matched(side).containsKey(id)) { matched(side).removeKey(id); Nil }
      else Seq(Change(RowKind.Insert, values))
    }
  }
}
