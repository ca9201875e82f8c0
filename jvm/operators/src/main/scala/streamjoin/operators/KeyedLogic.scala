package streamjoin.operators

import org.apache.spark.sql.Row
import org.apache.spark.sql.streaming.{StatefulProcessorHandle, TTLConfig}
import org.apache.spark.sql.types.StructType

/**
 * What a key's current time is (the JVM twin of `streamjoin.runtime.processor.Clock`):
 * `none` (no timers), `event` (Spark's watermark), `processing` (the batch's processing time),
 * `instant` (the wall clock, read once per key visit; the key's rows of one micro-batch are one
 * instant, over after them).
 */
object Clock {
  val None: String = Contract.ClockNone
  val Event: String = Contract.ClockEvent
  val Processing: String = Contract.ClockProcessing
  val Instant: String = Contract.ClockInstant
}

/** The shell's per-key context a logic works with: the key's timers, its late-row count and the logic's key
 * value ([[KeyedLogic.keyValueSchema]]; null when the logic has none or holds nothing for the key). */
final class KeyContext(val timers: TimerService, var lateDropped: Long) {
  var keyValue: Row = null
}

/**
 * An operator's per-key logic, as [[KeyedOperator]] runs it (Flink's `KeyedProcessFunction`; the
 * JVM twin of `streamjoin.runtime.processor.KeyedLogic`). The logic declares its own state
 * variables in [[open]] — shaped as Flink shapes the operator's state (value, list, map per key) —
 * and reads and writes them during a key's visit: Spark scopes them to the current grouping key.
 *
 * Subclasses have a constructor `(spec: String, input: StructType)`: `spec` is the operator's JSON
 * description built by the Python planner (see `streamjoin.runtime.engine`), `input` the schema of
 * the rows it is given.
 */
abstract class KeyedLogic extends Serializable {

  /** Mirror `KeyContext.lateDropped` into the `numLateRecordsDropped` state variable. */
  def countsLateRows: Boolean = false

  /** The output's upsert key is the grouping key, so a visit's changes are one upsert key's changelog (what
   * [[ChangelogAssertions]] check). */
  def outputKeyedByKey: Boolean = false

  /** Declare the state variables (once per partition and micro-batch). */
  def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit

  /** A key's input rows of one micro-batch as elements, in processing order. */
  def elements(rows: Iterator[Row]): Iterator[Element]

  /** Process one element; `now` is the key's current time (null without a clock). */
  def onElement(ctx: KeyContext, element: Element, now: java.lang.Long): Seq[Change]

  /** A timer of the key fires at `timestamp` (ms). */
  def onTimer(ctx: KeyContext, timestamp: Long): Seq[Change] = Nil

  /** After the key's elements of one micro-batch: the changes of a logic that emits once per bundle (Flink's
   * `MapBundleFunction.finishBundle`; the micro-batch is the bundle), numbered after the last element's
   * changes. Default: none. */
  def finishBundle(ctx: KeyContext): Seq[Change] = Nil

  /** The `_seq` prefix of the changes a timer at `timestamp` fires before the key's rows ([[SeqPath.timer]]; a
   *  logic whose timer releases a stored row gives that row's `_seq`). */
  def timerSeq(ctx: KeyContext, timestamp: Long): Array[Byte] = SeqPath.timer(timestamp)

  /** After the key's visit (write back what the visit cached). */
  def finish(ctx: KeyContext): Unit = ()

  /** The schema of a small per-key value of the logic (its clean-up timers, a counter) that the shell keeps in its
   * own per-key timer state, so that a key's visit reads and writes one value instead of two; null for none (the
   * default). Needs a clock. The shell puts the stored value, or null, in [[KeyContext.keyValue]] before the visit
   * and stores what the logic leaves there after [[finish]]. A logic that has one leaves null when it holds
   * nothing else for the key: the shell then forgets the key's time with its last timer, so a key that comes and
   * goes leaves no state row behind (python: `KeyedLogic.is_done` clears the key's whole state, time included).
   * Safe because the next visit advances to Spark's clock, which is not behind the forgotten time. */
  def keyValueSchema: StructType = null

  /** The input's STRUCT columns that reach the logic packed ([[PackedRows]]: one BINARY value of `UnsafeRow` bytes per
   * row, not a nested `Row`); none by default. The logic is constructed with the unpacked input schema. */
  def packedInput: Seq[String] = Nil

  /** Whether each [[Change]]'s values are one value, the output columns' `UnsafeRow` bytes ([[PackedRows]]), which
   * the query unpacks into the output columns after the operator. */
  def packedOutput: Boolean = false
}

/** Helpers for logics: column positions in an input schema, ordering a key's rows. */
object KeyedLogic {
  val RowKindColumn: String = Contract.RowKindColumn
  val SeqColumn: String = Contract.SeqColumn

  /** Position of `name` in `schema`, or an IllegalArgumentException naming the columns. */
  def index(schema: StructType, name: String): Int = {
    val i = schema.fieldNames.indexOf(name)
    if (i < 0) throw new IllegalArgumentException(s"no column $name in ${schema.fieldNames.mkString(", ")}")
    i
  }

  /** A key's rows of one micro-batch in changelog order (by `_seq`); Spark gives no order. */
  def inOrder(rows: Iterator[Row], seqIndex: Int): Array[Row] =
    rows.toArray.sortBy(SeqPath.of(_, seqIndex))(SeqPath.ordering)

  /** A key's changelog rows of one micro-batch as elements, by `_seq`: RowKind and the values at `columns`. */
  def changelog(rows: Iterator[Row], seqIndex: Int, kindIndex: Int, columns: Array[Int]): Iterator[Element] =
    inOrder(rows, seqIndex).iterator.map(r =>
      Element(SeqPath.of(r, seqIndex), r.getString(kindIndex), values(r, columns))
    )

  /** The values at `indexes` of `row`. */
  def values(row: Row, indexes: Array[Int]): Array[Any] = {
    val out = new Array[Any](indexes.length)
    var i = 0
    while (i < indexes.length) { out(i) = row.get(indexes(i)); i += 1 }
    out
  }
}
