package streamjoin.operators

/** Flink's RowKind as the changelog column `_rowkind` spells it (docs/semantics.md §1). */
object RowKind {
  val Insert: String = Contract.Insert
  val UpdateBefore: String = Contract.UpdateBefore
  val UpdateAfter: String = Contract.UpdateAfter
  val Delete: String = Contract.Delete

  /** Whether `kind` adds a row (`+I`, `+U`): Flink's `RowDataUtil.isAccumulateMsg`. */
  def isAccumulate(kind: String): Boolean = kind == Insert || kind == UpdateAfter

  /** Whether `kind` is a valid RowKind short string. */
  def isValid(kind: String): Boolean =
    kind == Insert || kind == UpdateBefore || kind == UpdateAfter || kind == Delete
}

/** One output change: its RowKind and the output row's values in column order. */
final case class Change(kind: String, values: Array[Any])

/**
 * One input change of a key, as [[KeyedOperator]] hands it to a [[KeyedLogic]]
 * (the JVM twin of `streamjoin.runtime.processor.Element`).
 *
 * @param seq       its `_seq` in its input (a path, [[SeqPath]])
 * @param kind      its RowKind short string
 * @param row       its values, in the logic's column order
 * @param side      0 (left/probe) or 1 (right/build) for two-input operators, else 0
 * @param time      the row's own time (epoch ms rowtime, or an ORDER BY value), or null
 * @param watermark for a source's row (an 8-byte `_seq`), the watermark (epoch ms) in effect when it arrived; for a
 *                  row an upstream operator emitted, its rowtime (a windowed row: its window's start)
 *                  (`KeyedOperator.isFiredUpstream`); or null
 * @param matches   the other side's rows the element matches, when an earlier step found them
 *                  (the regular join's residual predicate; packed as `packed` is), else null
 * @param packed    for a logic whose input is packed ([[KeyedLogic.packedInput]]): the row as Spark's `UnsafeRow`
 *                  (its struct's columns, the per-row watermark field included), with `row` null; else null
 */
final case class Element(
    seq: Array[Byte],
    kind: String,
    row: Array[Any],
    side: Int = 0,
    time: Any = null,
    watermark: java.lang.Long = null,
    matches: Seq[org.apache.spark.sql.catalyst.expressions.UnsafeRow] = null,
    packed: org.apache.spark.sql.catalyst.expressions.UnsafeRow = null
)
