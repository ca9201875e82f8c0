package streamjoin.operators
package regular_join

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.streaming.{MapState, ValueState}
import org.apache.spark.sql.types._

/**
 * What one side of the regular join holds for one row (or unique key): the row as Spark's `UnsafeRow`
 * ([[PackedRows]]), how many times it is present (1 but in the layout without a unique key), and how many rows of
 * the other side it matches (`associations`: outer sides only; 0 elsewhere).
 */
final class JoinEntry(val row: UnsafeRow, val count: Int, val associations: Int)

/**
 * A map state key: an `UnsafeRow`'s bytes, equal when the bytes are. Spark's state store compares keys by their
 * encoding anyway; the in-memory state of Spark's `TwsTester` (the unit tests, the differential tests' `LocalRun`
 * of the tools jar) compares them as objects, where a bare `Array[Byte]` is equal only to itself.
 */
final case class RowBytes(bytes: Array[Byte]) {
  override def equals(other: Any): Boolean = other match {
    case o: RowBytes => java.util.Arrays.equals(bytes, o.bytes)
    case _           => false
  }
  override def hashCode: Int = java.util.Arrays.hashCode(bytes)
}

/**
 * One side's entries of the regular join for the current join key, during one visit of the key
 * (the JVM twin of `streamjoin.runtime.regular_join.state_views.TwsRecordStore`): a point lookup reads one
 * entry, iterating reads the whole side once; changes stay in memory and each changed entry is
 * written once in [[flush]]. State TTL is the variable's: an entry expires `ttl` after its last write.
 *
 * Entries are keyed by an `UnsafeRow` (the unique key, the row itself, or [[JoinSideStore.Single]]) and compared
 * by its bytes, as Flink's state compares `BinaryRowData`. Stored forms ([[JoinRecordStateViews.valueSchema]]): a
 * `ValueState` of `(row BINARY, _associations)`; a `MapState` from the unique key's bytes to
 * `(row BINARY, _associations)`; or, without a unique key (`rowInKey`), from the row's bytes to
 * `(_count, _associations)`.
 *
 * Iteration order is the entries' key order ([[JoinSideStore.KeyOrder]]: shorter keys first, then by their bytes
 * unsigned), which is the order Spark's RocksDB state store lists them in; an entry added during the visit takes its
 * place in that order, so a row's matches come in the same order whatever the micro-batch holds (the Python store
 * lists its state again for the same reason).
 *
 * @param value     the side's `ValueState` (JoinKeyContainsUniqueKey: one entry, key [[JoinSideStore.Single]]), or null
 * @param map       the side's `MapState` (the other layouts), or null
 * @param rowInKey  whether the map's key is the row (InputSideHasNoUniqueKey)
 * @param keyFields the number of columns of a map key (the unique key's, or the row's)
 * @param rowFields the number of columns of the side's row
 */
final class JoinSideStore(
    value: ValueState[Row],
    map: MapState[RowBytes, Row],
    rowInKey: Boolean,
    keyFields: Int,
    rowFields: Int
) {
  // Entries read or written during the visit; a null value is an entry removed during the visit.
  private var cache = new java.util.LinkedHashMap[UnsafeRow, JoinEntry]()
  private val absent = new java.util.HashSet[UnsafeRow]()
  private val dirty = new java.util.HashSet[UnsafeRow]()
  private var complete = false
  // Whether a key was added to the complete cache since it was last put in key order.
  private var appended = false

  private def decode(key: UnsafeRow, stored: Row): JoinEntry =
    if (rowInKey) new JoinEntry(key, stored.getInt(0), stored.getInt(1))
    else new JoinEntry(PackedRows.point(stored.getAs[Array[Byte]](0), rowFields), 1, stored.getInt(1))

  private def encode(entry: JoinEntry): Row =
    if (rowInKey) Row(entry.count, entry.associations) else Row(entry.row.getBytes, entry.associations)

  def get(key: UnsafeRow): JoinEntry =
    if (cache.containsKey(key)) cache.get(key)
    else if (complete || absent.contains(key)) null
    else {
      val stored = if (map != null) map.getValue(RowBytes(key.getBytes)) else value.get()
      val entry = if (stored == null) null else decode(key, stored)
      if (entry == null) absent.add(key) else cache.put(key, entry)
      entry
    }

  def put(key: UnsafeRow, entry: JoinEntry): Unit = {
    if (complete && !cache.containsKey(key)) appended = true
    absent.remove(key)
    cache.put(key, entry)
    dirty.add(key)
  }

  def delete(key: UnsafeRow): Unit = if (get(key) != null) {
    cache.put(key, null)
    dirty.add(key)
  }

  /** All present entries, read from the state at most once per visit. */
  def entries(): Array[JoinEntry] = {
    if (!complete) {
      val loaded = new java.util.LinkedHashMap[UnsafeRow, JoinEntry]()
      val stored: Iterator[(UnsafeRow, Row)] =
        if (map != null) map.iterator().map { case (k, v) => (PackedRows.point(k.bytes, keyFields), v) }
        else if (cache.containsKey(JoinSideStore.Single) || absent.contains(JoinSideStore.Single)) Iterator.empty
        else Option(value.get()).iterator.map(v => (JoinSideStore.Single, v))
      stored.foreach { case (k, v) => loaded.put(k, if (cache.containsKey(k)) cache.get(k) else decode(k, v)) }
      cache.forEach((k, v) => if (!loaded.containsKey(k)) loaded.put(k, v))
      cache = loaded
      complete = true
      absent.clear()
      appended = true
    }
    if (appended) {
      val keys = cache.keySet.toArray(new Array[UnsafeRow](cache.size))
      java.util.Arrays.sort(keys, JoinSideStore.KeyOrder) // near-linear: the state lists its keys in this order
      val sorted = new java.util.LinkedHashMap[UnsafeRow, JoinEntry]()
      keys.foreach(k => sorted.put(k, cache.get(k)))
      cache = sorted
      appended = false
    }
    val out = ArrayBuffer[JoinEntry]()
    cache.values.forEach(e => if (e != null) out += e)
    out.toArray
  }

  /** Write every changed entry to the state variable. */
  def flush(): Unit = dirty.forEach { key =>
    val entry = cache.get(key)
    if (map != null) {
      if (entry == null) map.removeKey(RowBytes(key.getBytes))
      else map.updateValue(RowBytes(key.getBytes), encode(entry))
    } else if (entry == null) value.clear()
    else value.update(encode(entry))
  }
}

object JoinSideStore {

  /** The key of a ValueState-backed side's one entry. */
  val Single: UnsafeRow = PackedRows.point(Array.emptyByteArray, 0)

  /**
   * The order of a side's keys: shorter first, then by their bytes unsigned. Spark's RocksDB state store lists a
   * `MapState`'s keys by their encoding, which for a key of fewer than 256 bytes is this order.
   */
  val KeyOrder: java.util.Comparator[UnsafeRow] = (a: UnsafeRow, b: UnsafeRow) => {
    val (x, y) = (a.getBytes, b.getBytes)
    if (x.length != y.length) Integer.compare(x.length, y.length) else java.util.Arrays.compareUnsigned(x, y)
  }
}

/**
 * What one side of the regular join keeps for one join key (Flink's `JoinRecordStateView`; the JVM
 * twin of `streamjoin.runtime.regular_join.state_views.JoinRecordStateView`). Rows are the side's structs as `UnsafeRow`s,
 * equal when their bytes are (Flink: `BinaryRowData`).
 * `associations` is how many rows of the other side a row matches (outer sides only; 0 elsewhere).
 */
sealed abstract class JoinRecordStateView(protected val store: JoinSideStore) {

  /** Add `row`, recording that it matches `associations` rows of the other side. */
  def add(row: UnsafeRow, associations: Int): Unit

  /** Remove one occurrence of `row` (by unique key where the layout has one); an unknown row is ignored. */
  def retract(row: UnsafeRow): Unit

  /** Set the association count of `row` (re-adding it once if it had expired, as Flink does). */
  def updateAssociations(row: UnsafeRow, associations: Int): Unit

  /** The entry of `row` (by unique key where the layout has one), or null. */
  protected def entry(row: UnsafeRow): JoinEntry

  /** The association count of `row`; 0 when the state does not hold it (expired). */
  def associations(row: UnsafeRow): Int = { val e = entry(row); if (e == null) 0 else e.associations }

  /** All rows with their association counts, a row present n times listed n times. */
  def records(): Array[(UnsafeRow, Int)] = records(null)

  /** The rows that `where` accepts (null: every row), with their association counts, a row present n times listed n times. */
  def records(where: UnsafeRow => Boolean): Array[(UnsafeRow, Int)] = {
    val out = ArrayBuffer[(UnsafeRow, Int)]()
    store.entries().foreach { e =>
      if (where == null || where(e.row)) for (_ <- 0 until e.count) out += ((e.row, e.associations))
    }
    out.toArray
  }
}

object JoinRecordStateViews {
  val JoinKeyContainsUniqueKey = "JoinKeyContainsUniqueKey"
  val InputSideHasUniqueKey = "InputSideHasUniqueKey"
  val InputSideHasNoUniqueKey = "InputSideHasNoUniqueKey"

  private val RowField = StructField("row", BinaryType, nullable = false)
  private val Associations = StructField("_associations", IntegerType, nullable = false)
  private val Count = StructField("_count", IntegerType, nullable = false)

  /**
   * The Spark type of a layout's stored values: `(row BINARY, _associations INT)`, or without a unique key
   * `(_count INT, _associations INT)` (the row is the map's key).
   */
  def valueSchema(layout: String): StructType = layout match {
    case JoinKeyContainsUniqueKey | InputSideHasUniqueKey => StructType(Seq(RowField, Associations))
    case InputSideHasNoUniqueKey                          => StructType(Seq(Count, Associations))
    case other => throw new IllegalArgumentException(s"unknown join state layout $other")
  }

  /** Whether a layout's state is a MapState (keyed by the unique key's or the row's bytes); else a ValueState. */
  def keyed(layout: String): Boolean = layout != JoinKeyContainsUniqueKey

  /**
   * The store of `layout` over the side's state variable.
   *
   * @param rowSchema the side's row
   * @param uniqueKey the unique key's positions in the row (InputSideHasUniqueKey)
   */
  def store(
      layout: String,
      value: ValueState[Row],
      map: MapState[RowBytes, Row],
      rowSchema: StructType,
      uniqueKey: Array[Int]
  ): JoinSideStore = {
    val keyFields = if (layout == InputSideHasUniqueKey) uniqueKey.length else rowSchema.length
    new JoinSideStore(value, map, layout == InputSideHasNoUniqueKey, keyFields, rowSchema.length)
  }

  /**
   * The key of a row in a layout with one row per key: for InputSideHasUniqueKey the unique key's columns (a
   * generated projection: make it once per task, not per key visit), else [[JoinSideStore.Single]].
   */
  def rowKey(layout: String, rowSchema: StructType, uniqueKey: Array[Int]): UnsafeRow => UnsafeRow =
    if (layout != InputSideHasUniqueKey) _ => JoinSideStore.Single
    else {
      val project =
        UnsafeProjection.create(uniqueKey.toSeq.map(i => BoundReference(i, rowSchema(i).dataType, nullable = true)))
      row => project(row).copy()
    }

  /** The view of `layout` over `store` (Flink's `JoinRecordStateViews.create`); `rowKey` from [[rowKey]]. */
  def apply(layout: String, store: JoinSideStore, rowKey: UnsafeRow => UnsafeRow): JoinRecordStateView =
    layout match {
      case JoinKeyContainsUniqueKey => new JoinKeyContainsUniqueKey(store)
      case InputSideHasUniqueKey    => new InputSideHasUniqueKey(store, rowKey)
      case InputSideHasNoUniqueKey  => new InputSideHasNoUniqueKey(store)
      case other                    => throw new IllegalArgumentException(s"unknown join state layout $other")
    }
}

/**
 * At most one row per key of the view (Flink: `JoinKeyContainsUniqueKey`, a ValueState per join key, where `key`
 * is constant; `InputSideHasUniqueKey`, a `MapState<UK, Record>`, where `key` projects the unique key): the entry
 * `(row, associations)`.
 */
sealed abstract class UniqueRowStateView(store: JoinSideStore, key: UnsafeRow => UnsafeRow)
    extends JoinRecordStateView(store) {
  def add(row: UnsafeRow, associations: Int): Unit = store.put(key(row), new JoinEntry(row, 1, associations))
  def retract(row: UnsafeRow): Unit = store.delete(key(row))
  protected def entry(row: UnsafeRow): JoinEntry = store.get(key(row))
  def updateAssociations(row: UnsafeRow, associations: Int): Unit = add(row, associations)
}

/** Flink's `JoinKeyContainsUniqueKey`: the join key contains the unique key, one row per join key (a ValueState). */
final class JoinKeyContainsUniqueKey(store: JoinSideStore) extends UniqueRowStateView(store, _ => JoinSideStore.Single)

/** Flink's `InputSideHasUniqueKey`: rows by their unique key, projected by `uniqueKey` (a MapState). */
final class InputSideHasUniqueKey(store: JoinSideStore, uniqueKey: UnsafeRow => UnsafeRow)
    extends UniqueRowStateView(store, uniqueKey)

/**
 * Rows with their number of occurrences: `row -> (count, associations)` (Flink: `InputSideHasNoUniqueKey`,
 * `MapState<Record, count>`). Identical rows match the same rows of the other side, so they share one association
 * count.
 */
final class InputSideHasNoUniqueKey(store: JoinSideStore) extends JoinRecordStateView(store) {
  def add(row: UnsafeRow, associations: Int): Unit = {
    val e = store.get(row)
    store.put(row, new JoinEntry(row, if (e == null) 1 else e.count + 1, associations))
  }

  def retract(row: UnsafeRow): Unit = {
    val e = store.get(row)
    if (e != null) {
      if (e.count > 1) store.put(row, new JoinEntry(e.row, e.count - 1, e.associations))
      else store.delete(row)
    }
  }

  protected def entry(row: UnsafeRow): JoinEntry = store.get(row)

  def updateAssociations(row: UnsafeRow, associations: Int): Unit = {
    val e = store.get(row)
    store.put(row, new JoinEntry(row, if (e == null) 1 else e.count, associations))
  }
}
