package streamjoin.operators

import scala.collection.mutable.ArrayBuffer
import scala.jdk.CollectionConverters._

import org.apache.spark.sql.Row
import org.apache.spark.sql.streaming.{MapState, ValueState}
import org.apache.spark.sql.types._

/**
 * One side's entries of the regular join for the current join key, during one visit of the key
 * (the JVM twin of `streamjoin.runtime.join_state.TwsRecordStore`): a point lookup reads one
 * entry, iterating reads the whole side once; changes stay in memory and each changed entry is
 * written once in [[flush]]. State TTL is the variable's: an entry expires `ttl` after its last write.
 *
 * Iteration order is the Python store's: the stored entries in the state's order, then the
 * entries added during the visit in the order they were added.
 *
 * @param value the side's `ValueState` (JoinKeyContainsUniqueKey: one entry, key [[JoinSideStore.Single]]), or null
 * @param map   the side's `MapState` (the other layouts), or null
 */
final class JoinSideStore(value: ValueState[Row], map: MapState[Row, Row]) {
  // Entries read or written during the visit; a null value is an entry removed during the visit.
  private var cache = new java.util.LinkedHashMap[Row, Row]()
  private val absent = new java.util.HashSet[Row]()
  private val dirty = new java.util.HashSet[Row]()
  private var complete = false

  def get(key: Row): Row =
    if (cache.containsKey(key)) cache.get(key)
    else if (complete || absent.contains(key)) null
    else {
      val stored = if (map != null) map.getValue(key) else value.get()
      if (stored == null) absent.add(key) else cache.put(key, stored)
      stored
    }

  def put(key: Row, entry: Row): Unit = {
    absent.remove(key)
    cache.put(key, entry)
    dirty.add(key)
  }

  def delete(key: Row): Unit = if (get(key) != null) {
    cache.put(key, null)
    dirty.add(key)
  }

  /** All present entries, read from the state at most once per visit. */
  def entries(): Array[(Row, Row)] = {
    if (!complete) {
      val loaded = new java.util.LinkedHashMap[Row, Row]()
      val stored =
        if (map != null) map.iterator()
        else if (cache.containsKey(JoinSideStore.Single) || absent.contains(JoinSideStore.Single)) Iterator.empty
        else Option(value.get()).iterator.map(v => (JoinSideStore.Single, v))
      stored.foreach { case (k, v) => loaded.put(k, if (cache.containsKey(k)) cache.get(k) else v) }
      cache.forEach((k, v) => if (!loaded.containsKey(k)) loaded.put(k, v))
      cache = loaded
      complete = true
      absent.clear()
    }
    cache.entrySet.asScala.iterator.filter(_.getValue != null).map(e => (e.getKey, e.getValue)).toArray
  }

  /** Write every changed entry to the state variable. */
  def flush(): Unit = dirty.forEach { key =>
    val entry = cache.get(key)
    if (map != null) { if (entry == null) map.removeKey(key) else map.updateValue(key, entry) }
    else if (entry == null) value.clear()
    else value.update(entry)
  }
}

object JoinSideStore {
  /** The key of a ValueState-backed side's one entry. */
  val Single: Row = Row.empty
}

/**
 * What one side of the regular join keeps for one join key (Flink's `JoinRecordStateView`; the JVM
 * twin of `streamjoin.runtime.join_state.JoinRecordStateView`). Rows are the side's structs.
 * `associations` is how many rows of the other side a row matches (outer sides only; 0 elsewhere).
 */
sealed abstract class JoinRecordView(protected val store: JoinSideStore) {
  /** Add `row`, recording that it matches `associations` rows of the other side. */
  def add(row: Row, associations: Int): Unit

  /** Remove one occurrence of `row` (by unique key where the layout has one); an unknown row is ignored. */
  def retract(row: Row): Unit

  /** All rows with their association counts, a row present n times listed n times. */
  def records(): Array[(Row, Int)] = records(null)

  /**
   * The rows that `where` accepts, with their association counts, a row present n times listed n times.
   * `where` is given the stored form of a row, whose first columns are the row's (a residual predicate reads
   * those), so that a row is copied out of its entry only when it is accepted; null accepts every row.
   */
  def records(where: Row => Boolean): Array[(Row, Int)]

  /** The association count of `row`; 0 when the state does not hold it (expired). */
  def associations(row: Row): Int

  /** Set the association count of `row` (re-adding it once if it had expired, as Flink does). */
  def updateAssociations(row: Row, associations: Int): Unit
}

object JoinRecordView {
  val JoinKeyContainsUniqueKey = "JoinKeyContainsUniqueKey"
  val InputSideHasUniqueKey = "InputSideHasUniqueKey"
  val InputSideHasNoUniqueKey = "InputSideHasNoUniqueKey"

  private val Associations = StructField("_associations", IntegerType, nullable = false)
  private val Count = StructField("_count", IntegerType, nullable = false)

  /**
   * The Spark types of a layout's entries (as `join_state.JoinRecordStateView.state_schema`):
   * `(key schema, value schema)`, the key schema null for the single-entry layout (a ValueState).
   */
  def stateSchema(layout: String, rowSchema: StructType, uniqueKey: Array[Int]): (StructType, StructType) =
    layout match {
      case JoinKeyContainsUniqueKey => (null, StructType(rowSchema.fields :+ Associations))
      case InputSideHasUniqueKey => (StructType(uniqueKey.map(rowSchema.fields(_))), StructType(rowSchema.fields :+ Associations))
      case InputSideHasNoUniqueKey => (rowSchema, StructType(Seq(Count, Associations)))
      case other => throw new IllegalArgumentException(s"unknown join state layout $other")
    }

  /** The view of `layout` over `store` (Flink's `JoinRecordStateViews.create`). */
  def apply(layout: String, store: JoinSideStore, uniqueKey: Array[Int]): JoinRecordView = layout match {
    case JoinKeyContainsUniqueKey => new JoinKeyContainsUniqueKeyView(store)
    case InputSideHasUniqueKey => new InputSideHasUniqueKeyView(store, uniqueKey)
    case InputSideHasNoUniqueKey => new InputSideHasNoUniqueKeyView(store)
    case other => throw new IllegalArgumentException(s"unknown join state layout $other")
  }

  private[operators] def withAssociations(row: Row, associations: Int): Row = Row.fromSeq(row.toSeq :+ associations)

  private[operators] def rowOf(entry: Row): Row = Row.fromSeq(entry.toSeq.dropRight(1))

  private[operators] def associationsOf(entry: Row): Int = if (entry == null) 0 else entry.getInt(entry.length - 1)

  /** The records of a layout whose entries are `(row..., associations)`. */
  private[operators] def entryRecords(store: JoinSideStore, where: Row => Boolean): Array[(Row, Int)] = {
    val out = ArrayBuffer[(Row, Int)]()
    store.entries().foreach { case (_, entry) => if (where == null || where(entry)) out += ((rowOf(entry), associationsOf(entry))) }
    out.toArray
  }
}

import JoinRecordView._

/** At most one row per join key: the single entry `(row..., associations)` (Flink: ValueState). */
final class JoinKeyContainsUniqueKeyView(store: JoinSideStore) extends JoinRecordView(store) {
  def add(row: Row, associations: Int): Unit = store.put(JoinSideStore.Single, withAssociations(row, associations))
  def retract(row: Row): Unit = store.delete(JoinSideStore.Single)
  def records(where: Row => Boolean): Array[(Row, Int)] = entryRecords(store, where)
  def associations(row: Row): Int = associationsOf(store.get(JoinSideStore.Single))
  def updateAssociations(row: Row, associations: Int): Unit = add(row, associations)
}

/** Rows by unique key: `unique key -> (row..., associations)` (Flink: MapState<UK, Record>). */
final class InputSideHasUniqueKeyView(store: JoinSideStore, uniqueKey: Array[Int]) extends JoinRecordView(store) {
  private def key(row: Row): Row = Row.fromSeq(uniqueKey.toSeq.map(row.get))
  def add(row: Row, associations: Int): Unit = store.put(key(row), withAssociations(row, associations))
  def retract(row: Row): Unit = store.delete(key(row))
  def records(where: Row => Boolean): Array[(Row, Int)] = entryRecords(store, where)
  def associations(row: Row): Int = associationsOf(store.get(key(row)))
  def updateAssociations(row: Row, associations: Int): Unit = add(row, associations)
}

/**
 * Rows with their number of occurrences: `row -> (count, associations)` (Flink: MapState<Record, count>).
 * Identical rows match the same rows of the other side, so they share one association count.
 */
final class InputSideHasNoUniqueKeyView(store: JoinSideStore) extends JoinRecordView(store) {
  def add(row: Row, associations: Int): Unit = {
    val entry = store.get(row)
    store.put(row, Row(if (entry == null) 1 else entry.getInt(0) + 1, associations))
  }

  def retract(row: Row): Unit = {
    val entry = store.get(row)
    if (entry != null) {
      if (entry.getInt(0) > 1) store.put(row, Row(entry.getInt(0) - 1, entry.getInt(1)))
      else store.delete(row)
    }
  }

  def records(where: Row => Boolean): Array[(Row, Int)] = {
    val out = ArrayBuffer[(Row, Int)]()
    store.entries().foreach { case (row, entry) =>
      if (where == null || where(row)) for (_ <- 0 until entry.getInt(0)) out += ((row, entry.getInt(1)))
    }
    out.toArray
  }

  def associations(row: Row): Int = { val entry = store.get(row); if (entry == null) 0 else entry.getInt(1) }

  def updateAssociations(row: Row, associations: Int): Unit = {
    val entry = store.get(row)
    store.put(row, Row(if (entry == null) 1 else entry.getInt(0), associations))
  }
}
