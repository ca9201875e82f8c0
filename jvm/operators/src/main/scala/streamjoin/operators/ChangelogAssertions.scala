package streamjoin.operators

import org.apache.spark.sql.Row

/**
 * The changelog assertions of the jvm engine (docs/semantics.md §1.1): the JVM twin of
 * `streamjoin.runtime.assertions.check_visit`, the same rules. A key visit's changes rise strictly
 * in `_seq` in emission order; when the logic's output is keyed by its grouping key
 * ([[KeyedLogic.outputKeyedByKey]]) they are one upsert key's valid changelog: a `-U` is followed by its `+U`,
 * a retraction follows an addition (or starts the visit) and retracts the row last added, no `+I` follows an
 * addition not retracted. [[KeyedOperator]] runs them when the session's `Contract.AssertionsConf` is `true`.
 */
object ChangelogAssertions {

  /** @throws IllegalStateException naming the logic, the key, the rule and the visit's changes */
  def checkVisit(logic: String, key: Row, changes: Seq[(Array[Byte], Change)], oneUpsertKey: Boolean): Unit = {
    def show(values: Array[Any]): String = values.map(v => if (v == null) "None" else v).mkString("[", ", ", "]")
    def fail(rule: String): Nothing = {
      val shown = changes.map { case (seq, c) => s"${c.kind}${show(c.values)} @${SeqPath.show(seq)}" }
      throw new IllegalStateException(
        s"ChangelogAssertionError: $logic for key ${show(key.toSeq.toArray)}: $rule; the visit emitted " +
          shown.mkString(", ")
      )
    }
    changes.sliding(2).foreach {
      case Seq((before, _), (after, c)) if SeqPath.ordering.compare(before, after) >= 0 =>
        fail(s"_seq ${SeqPath.show(after)} of ${c.kind}${show(c.values)} does not rise after ${SeqPath.show(before)}")
      case _ =>
    }
    if (!oneUpsertKey) return
    var added: Row = null // the row the visit last added and did not retract
    var pendingUpdate = false // a -U waits for its +U
    changes.zipWithIndex.foreach { case ((_, c), index) =>
      val values = Row.fromSeq(c.values.toSeq) // Row's equality compares BINARY values by content
      if (pendingUpdate && c.kind != RowKind.UpdateAfter)
        fail(s"${c.kind}${show(c.values)} follows a -U, which its +U must follow")
      if (!RowKind.isAccumulate(c.kind)) {
        if (index > 0 && added == null) fail(s"${c.kind}${show(c.values)} retracts after a retraction")
        if (added != null && values != added)
          fail(s"${c.kind}${show(c.values)} retracts another row than the one added, ${show(added.toSeq.toArray)}")
        added = null
        pendingUpdate = c.kind == RowKind.UpdateBefore
      } else {
        if (c.kind == RowKind.Insert && added != null)
          fail(s"+I${show(c.values)} follows the addition of ${show(added.toSeq.toArray)}, not retracted")
        added = values
        pendingUpdate = false
      }
    }
    if (pendingUpdate) fail("the visit ends on a -U without its +U")
  }
}
