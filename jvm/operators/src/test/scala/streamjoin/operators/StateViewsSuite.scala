package streamjoin.operators

import streamjoin.operators.regular_join.{JoinRecordStateViews, RowBytes}
import scala.collection.mutable

import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.streaming.{MapState, ValueState}
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/** A MapState in memory that counts the state store calls. */
final class CountingMapState[K, V] extends MapState[K, V] {
  val data = mutable.LinkedHashMap[K, V]()
  var reads, writes, removes, scans = 0
  def exists(): Boolean = data.nonEmpty
  def getValue(key: K): V = { reads += 1; data.getOrElse(key, null.asInstanceOf[V]) }
  def containsKey(key: K): Boolean = { reads += 1; data.contains(key) }
  def updateValue(key: K, value: V): Unit = { writes += 1; data(key) = value }
  def iterator(): Iterator[(K, V)] = { scans += 1; data.toList.iterator }
  def keys(): Iterator[K] = { scans += 1; data.keys.toList.iterator }
  def values(): Iterator[V] = { scans += 1; data.values.toList.iterator }
  def removeKey(key: K): Unit = { removes += 1; data.remove(key) }
  def clear(): Unit = data.clear()
}

/** A ValueState in memory that counts the state store calls. */
final class CountingValueState[S] extends ValueState[S] {
  var stored: Option[S] = None
  var reads, writes, clears = 0
  def exists(): Boolean = stored.isDefined
  def get(): S = { reads += 1; stored.getOrElse(null.asInstanceOf[S]) }
  def update(value: S): Unit = { writes += 1; stored = Some(value) }
  def clear(): Unit = { clears += 1; stored = None }
}

/** [[CachedMapState]]: a key visit's write-back cache over a MapState. */
class CachedMapStateSuite extends AnyFunSuite {
  private def cached(state: CountingMapState[String, Int]) =
    new CachedMapState[String, java.lang.Integer, String, Int](state, identity, _.intValue, Int.box)

  test("an entry is read at most once and written at most once per visit, in flush") {
    val state = new CountingMapState[String, Int]()
    state.data("a") = 1
    val c = cached(state)
    assert(c.get("a") == 1 && c.get("a") == 1 && c.get("b") == null && c.get("b") == null)
    assert(state.reads == 2) // one per key, absent ones included
    c.put("a", 2)
    c.put("a", 3)
    assert(state.writes == 0)
    c.flush()
    assert(state.writes == 1 && state.data == Map("a" -> 3))
    assert(c.get("a") == 3 && state.reads == 3) // flush forgets the cache: the next visit reads again
  }

  test("a key new to the store costs no read, and nothing at all when removed again in the visit") {
    val state = new CountingMapState[String, Int]()
    val c = cached(state)
    c.putNew("n", 1)
    c.remove("n")
    c.putNew("m", 2)
    c.flush()
    assert(state.reads == 0 && state.removes == 0 && state.writes == 1 && state.data == Map("m" -> 2))
    c.remove("m") // may be stored: removed from the store at flush
    c.flush()
    assert(state.removes == 1 && state.data.isEmpty)
  }

  test("keys: the store's keys read once per visit, with the visit's changes") {
    val state = new CountingMapState[String, Int]()
    state.data ++= Seq("a" -> 1, "b" -> 2)
    val c = cached(state)
    c.remove("a")
    c.putNew("c", 3)
    assert(c.keys(identity).toSet == Set("b", "c"))
    assert(c.keys(identity).toSet == Set("b", "c"))
    assert(state.scans == 1 && state.writes == 0)
    assert(c.get("b") == 2 && state.reads == 0) // loaded by the scan
  }

  test("keys: over the limit, every call reads the store, the visit's changes written first") {
    val state = new CountingMapState[String, Int]()
    state.data ++= Seq("a" -> 1, "b" -> 2, "c" -> 3)
    System.setProperty(CachedMapState.CompleteLimitProperty, "2")
    try {
      val c = cached(state)
      c.putNew("d", 4)
      assert(c.keys(identity).toSet == Set("a", "b", "c", "d"))
      assert(state.writes == 1) // d was written before the store was read
      c.remove("a")
      assert(c.keys(identity).toSet == Set("b", "c", "d"))
      assert(state.scans == 3) // the cut-short load, then each call's read
    } finally System.clearProperty(CachedMapState.CompleteLimitProperty)
  }

  test("clear forgets the cache and the store") {
    val state = new CountingMapState[String, Int]()
    state.data("a") = 1
    val c = cached(state)
    c.put("b", 2)
    c.clear()
    c.flush()
    assert(state.data.isEmpty && state.writes == 0)
  }
}

/** [[MapStateView]]: an aggregate's value → multiplicity view over a MapState. */
class MapStateViewSuite extends AnyFunSuite {
  test("BINARY values are compared by content, and stored as one-column rows") {
    val state = new CountingMapState[Row, Row]()
    val view = new MapStateView(state)
    view.put(Array[Byte](1, 2), 3L)
    assert(view.get(Array[Byte](1, 2)) == 3L)
    assert(view.get(Array[Byte](9)) == 0L)
    view.put("x", 1L)
    view.remove("x")
    view.flush()
    assert(state.data.size == 1)
    val (key, value) = state.data.head
    assert(key.getAs[Array[Byte]](0).toSeq == Seq[Byte](1, 2) && value == Row(3L))
    val next = new MapStateView(state)
    assert(next.keys.toSeq.map(_.asInstanceOf[Array[Byte]].toSeq) == Seq(Seq[Byte](1, 2)))
  }
}

/** [[JoinRecordStateView]] over a [[JoinSideStore]]: the regular join's state per join key and side. */
class JoinRecordStateViewsSuite extends AnyFunSuite {
  private val schema = StructType(Seq(StructField("k", IntegerType), StructField("v", StringType)))
  private val project = UnsafeProjection.create(schema)
  private def row(k: Int, v: String): UnsafeRow = project(InternalRow(k, UTF8String.fromString(v))).copy()
  private def shown(records: Array[(UnsafeRow, Int)]): Seq[(String, Int)] =
    records.toSeq.map { case (r, a) => (r.getUTF8String(1).toString, a) }

  private def noUniqueKey(map: CountingMapState[RowBytes, Row]) = {
    val store = JoinRecordStateViews.store(JoinRecordStateViews.InputSideHasNoUniqueKey, null, map, schema, Array())
    (
      store,
      JoinRecordStateViews(
        JoinRecordStateViews.InputSideHasNoUniqueKey,
        store,
        JoinRecordStateViews.rowKey(JoinRecordStateViews.InputSideHasNoUniqueKey, schema, Array())
      )
    )
  }

  test("without a unique key: a multiset of rows sharing one association count, written once per visit") {
    val map = new CountingMapState[RowBytes, Row]()
    val (store, view) = noUniqueKey(map)
    view.add(row(1, "a"), 0)
    view.add(row(1, "a"), 2)
    view.add(row(1, "b"), 0)
    assert(shown(view.records()) == Seq(("a", 2), ("a", 2), ("b", 0)))
    view.retract(row(1, "z")) // never added: ignored
    view.retract(row(1, "b"))
    view.updateAssociations(row(1, "a"), 5)
    assert(view.associations(row(1, "a")) == 5 && view.associations(row(1, "b")) == 0)
    store.flush()
    assert(map.writes == 1 && map.removes == 1) // a written once; b, added and removed, removed once
    assert(map.data.values.toSeq == Seq(Row(2, 5)))
    assert(map.data.keys.head == RowBytes(row(1, "a").getBytes))
  }

  test("a later visit reads the side once and lists it in key order, the entries it adds in their place") {
    val map = new CountingMapState[RowBytes, Row]()
    val (first, view) = noUniqueKey(map)
    view.add(row(1, "c"), 1)
    view.add(row(1, "bb"), 0)
    first.flush()
    val (_, next) = noUniqueKey(map)
    next.add(row(1, "a"), 0)
    // shorter keys first ("c" before "bb"), then by bytes: the order the state lists them in, whatever the visit added
    assert(shown(next.records()) == Seq(("a", 0), ("c", 1), ("bb", 0)))
    next.add(row(1, "d"), 2)
    assert(shown(next.records()) == Seq(("a", 0), ("c", 1), ("d", 2), ("bb", 0)))
    assert(shown(next.records(r => r.getUTF8String(1).toString == "c")) == Seq(("c", 1)))
    assert(map.scans == 1)
    next.retract(row(1, "c")) // one occurrence: the row goes
    assert(shown(next.records()) == Seq(("a", 0), ("d", 2), ("bb", 0)))
  }

  test("JoinKeyContainsUniqueKey: one row per join key in a ValueState, replaced by the next one") {
    val value = new CountingValueState[Row]()
    val layout = JoinRecordStateViews.JoinKeyContainsUniqueKey
    val store = JoinRecordStateViews.store(layout, value, null, schema, Array())
    val view = JoinRecordStateViews(layout, store, JoinRecordStateViews.rowKey(layout, schema, Array()))
    view.add(row(1, "a"), 1)
    view.add(row(1, "b"), 0)
    assert(shown(view.records()) == Seq(("b", 0)))
    assert(view.associations(row(1, "zzz")) == 0) // any row of the key is the key's row
    store.flush()
    assert(value.writes == 1 && value.stored.get.getInt(1) == 0)
    val next = JoinRecordStateViews.store(layout, value, null, schema, Array())
    val again = JoinRecordStateViews(layout, next, JoinRecordStateViews.rowKey(layout, schema, Array()))
    again.retract(row(1, "whatever"))
    next.flush()
    assert(value.clears == 1 && value.stored.isEmpty)
  }

  test("InputSideHasUniqueKey: rows keyed by their unique key's bytes") {
    val map = new CountingMapState[RowBytes, Row]()
    val layout = JoinRecordStateViews.InputSideHasUniqueKey
    val store = JoinRecordStateViews.store(layout, null, map, schema, Array(1))
    val view = JoinRecordStateViews(layout, store, JoinRecordStateViews.rowKey(layout, schema, Array(1)))
    view.add(row(1, "a"), 0)
    view.add(row(2, "a"), 3) // same unique key (v): replaces the row
    view.add(row(1, "b"), 0)
    assert(shown(view.records()).toSet == Set(("a", 3), ("b", 0)))
    store.flush()
    assert(map.data.size == 2)
    val stored = map.data.values.map(v => PackedRows.point(v.getAs[Array[Byte]](0), 2).getInt(0)).toSet
    assert(stored == Set(1, 2)) // the a row now is (2, a)
    assert(JoinRecordStateViews.valueSchema(layout).fieldNames.toSeq == Seq("row", "_associations"))
    assert(
      JoinRecordStateViews.valueSchema(JoinRecordStateViews.InputSideHasNoUniqueKey).fieldNames.toSeq == Seq(
        "_count",
        "_associations"
      )
    )
  }
}

/** [[PackedRows]]: rows as `UnsafeRow` bytes across the operator's boundary. */
class PackedRowsSuite extends AnyFunSuite {
  test("packing a struct column and unpacking an output row give back the values") {
    val struct = StructType(Seq(StructField("a", IntegerType), StructField("b", StringType)))
    val input = StructType(Seq(StructField("s", struct), StructField("n", LongType)))
    assert(PackedRows.packedSchema(input, Seq("s")).map(_.dataType) == Seq(BinaryType, LongType))
    val packed = PackedRows.packer(input, Seq("s"))(InternalRow(InternalRow(7, UTF8String.fromString("x")), 9L))
    val point = PackedRows.point(packed.getBinary(0), 2)
    assert(point.getInt(0) == 7 && point.getUTF8String(1).toString == "x" && packed.getLong(1) == 9L)
    val output = StructType(
      Seq(
        StructField("a", IntegerType),
        StructField("_rowkind", StringType),
        StructField("b", StringType),
        StructField("_seq", BinaryType)
      )
    )
    assert(PackedRows.packedOutputSchema(output).fieldNames.toSeq == Seq("_row", "_rowkind", "_seq"))
    val unpacked =
      PackedRows.unpackRow(InternalRow(packed.getBinary(0), UTF8String.fromString("+I"), Array[Byte](1)), output)
    assert(
      unpacked.getInt(0) == 7 && unpacked.getUTF8String(1).toString == "+I" && unpacked.getUTF8String(2).toString == "x"
    )
  }
}
