package streamjoin.operators

import java.nio.ByteBuffer

import org.apache.spark.sql.Row

/**
 * A change's `_seq`: a path of big-endian parts, compared as unsigned bytes (the JVM twin of
 * `streamjoin.runtime.processor.child_seq` / `timer_seq`, docs/semantics.md §1). A source's change has an
 * 8-byte root (its LONG `_seq`); each operator's change appends its 4-byte index among the changes that one
 * input change caused. Ordered so, the changes of a micro-batch come as Flink processes them at parallelism 1.
 */
object SeqPath {

  /** The root of the changes that a timer fires before a key's rows: the smallest, then the timer's time. */
  val TimerRoot: Array[Byte] = new Array[Byte](8)

  /** The `index`-th change caused by the change whose `_seq` is `prefix`. */
  def child(prefix: Array[Byte], index: Int): Array[Byte] =
    ByteBuffer.allocate(prefix.length + 4).put(prefix).putInt(index).array()

  /** The prefix of the changes a timer at `timestamp` (ms) fires before the key's rows. */
  def timer(timestamp: Long): Array[Byte] =
    ByteBuffer.allocate(16).put(TimerRoot).putLong(timestamp ^ Long.MinValue).array()

  /** The `_seq` of `row` at `index`: BINARY (the Python facade turns a source's LONG into its root first). */
  def of(row: Row, index: Int): Array[Byte] = row.getAs[Array[Byte]](index)

  /** Unsigned lexicographic order: a prefix before its extensions. */
  val ordering: Ordering[Array[Byte]] = (a: Array[Byte], b: Array[Byte]) => java.util.Arrays.compareUnsigned(a, b)

  /** A two-input operator's processing order: `(_seq, side)`, the left input first on equal `_seq`. */
  val withSide: Ordering[(Array[Byte], Int)] = Ordering.Tuple2(ordering, Ordering.Int)

  /** `seq` in hex, for messages. */
  def show(seq: Array[Byte]): String = seq.map("%02x".format(_)).mkString
}

/** A key's output changes of one visit, each numbered under the `_seq` of what caused it (`processor._Output`):
 *  changes added under equal prefixes one call after the other continue one numbering. */
final class SeqOutput {
  val changes = new scala.collection.mutable.ArrayBuffer[(Array[Byte], Change)]()
  private var prefix: Array[Byte] = Array.emptyByteArray
  private var count = 0

  def add(cause: Array[Byte], emitted: Seq[Change]): Unit = if (emitted.nonEmpty) {
    var i = if (java.util.Arrays.equals(cause, prefix)) count else 0
    prefix = cause
    emitted.foreach { c => changes += ((SeqPath.child(cause, i), c)); i += 1 }
    count = i
  }
}
