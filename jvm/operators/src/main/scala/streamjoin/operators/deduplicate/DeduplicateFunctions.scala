package streamjoin.operators
package deduplicate

/**
 * A key's deduplication state during a visit (the JVM twin of `streamjoin.runtime.deduplicate.functions.DedupState`):
 * the kept row (or, keeping the first row on event time, the row waiting for the watermark), its order value, its input
 * `_seq`, and `emitted` — keeping the first row, whether it was emitted; keeping the last row on processing time,
 * whether the key emitted an update (its kept row went out as `+U`).
 */
final class DedupState {
  var row: Array[Any] = _
  var time: Any = _
  var seq: Array[Byte] = _
  var emitted: Boolean = false
}

/** One of Flink's deduplicate functions (`operators/deduplicate/`) over a key's [[DedupState]]. */
sealed abstract class DeduplicateFunction extends Serializable {

  /** The changes of the key's next row `e` (its order value in `e.time`). */
  def processElement(state: DedupState, ctx: KeyContext, e: Element): Seq[Change]

  /** The key's timer fires (only a function that registers timers has one). */
  def onTimer(state: DedupState): Seq[Change] =
    throw new IllegalStateException(s"${getClass.getSimpleName} registers no timers")
}

object DeduplicateFunction {

  /**
   * The function for `keepFirst` on an order column (`rowtime`) or on arrival (the twin of
   * `streamjoin.runtime.deduplicate.functions.deduplicate_function`); `compared` and `stateTtl` are those of
   * [[ProcTimeDeduplicateKeepLastRowFunction]].
   */
  def apply(keepFirst: Boolean, rowtime: Boolean, compared: Array[Int], stateTtl: Boolean): DeduplicateFunction =
    if (rowtime) {
      if (keepFirst) new RowTimeDeduplicateKeepFirstRowFunction else new RowTimeDeduplicateKeepLastRowFunction
    } else if (keepFirst) new ProcTimeDeduplicateKeepFirstRowFunction
    else new ProcTimeDeduplicateKeepLastRowFunction(compared, stateTtl)

  /** The kept row becomes `newRow`: `+I`, or `-U` of the old one and `+U` of the new. */
  private[deduplicate] def replace(state: DedupState, newRow: Array[Any]): Seq[Change] = {
    val previous = state.row
    state.row = newRow
    if (previous == null) Seq(Change(RowKind.Insert, newRow))
    else Seq(Change(RowKind.UpdateBefore, previous), Change(RowKind.UpdateAfter, newRow))
  }
}

/** Keep the first row to arrive; insert-only output. */
final class ProcTimeDeduplicateKeepFirstRowFunction extends DeduplicateFunction {
  def processElement(state: DedupState, ctx: KeyContext, e: Element): Seq[Change] =
    if (state.emitted) Nil else { state.emitted = true; Seq(Change(RowKind.Insert, e.row)) }
}

/**
 * Keep the last row to arrive. A row equal to the kept one (on the positions `compared`: `PROCTIME()` columns, which
 * hold no value in Flink's row, are left out) emits nothing only while the key's first row is still the kept one,
 * and only without state TTL: Flink's equaliser compares the RowKind too, and its heap state holds the row it then
 * emits as `+U` (the Python module's docstring).
 */
final class ProcTimeDeduplicateKeepLastRowFunction(compared: Array[Int], stateTtl: Boolean)
    extends DeduplicateFunction {
  def processElement(state: DedupState, ctx: KeyContext, e: Element): Seq[Change] =
    if (!stateTtl && !state.emitted && state.row != null && compared.forall(i => state.row(i) == e.row(i)))
      Nil // the kept row stays the one emitted
    else {
      val changes = DeduplicateFunction.replace(state, e.row)
      state.emitted = changes.length > 1
      changes
    }
}

/** Keep the row with the greatest order value; a row with an equal value replaces the kept one. */
final class RowTimeDeduplicateKeepLastRowFunction extends DeduplicateFunction {
  def processElement(state: DedupState, ctx: KeyContext, e: Element): Seq[Change] =
    if (state.row != null && Values.compare(e.time, state.time) < 0) Nil
    else { state.time = e.time; DeduplicateFunction.replace(state, e.row) }
}

/** Keep the row with the smallest rowtime, emitted once the watermark passes it; late rows dropped; insert-only. */
final class RowTimeDeduplicateKeepFirstRowFunction extends DeduplicateFunction {
  def processElement(state: DedupState, ctx: KeyContext, e: Element): Seq[Change] = {
    val t = e.time.asInstanceOf[Long]
    if (t < ctx.timers.time) { ctx.lateDropped += 1; Nil }
    else {
      if (!state.emitted && (state.row == null || t < state.time.asInstanceOf[Long])) {
        if (state.row != null) ctx.timers.delete(state.time.asInstanceOf[Long])
        ctx.timers.register(t)
        state.row = e.row; state.time = t; state.seq = e.seq // the row now waiting for the watermark
      }
      Nil
    }
  }

  override def onTimer(state: DedupState): Seq[Change] = {
    val out = state.row
    state.row = null; state.time = null; state.emitted = true
    Seq(Change(RowKind.Insert, out))
  }
}
