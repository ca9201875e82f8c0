package streamjoin.operators

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.streaming.MapState

/**
 * A key visit's write-back cache over one of the key's `MapState`s: an entry is read from the state
 * store (and decoded) at most once per visit, and written (encoded) at most once, in [[flush]].
 *
 * Why: an operator that touches the same few entries many times per visit — the OVER aggregation's
 * rows waiting for a time, its frame's oldest row, a MIN/MAX view's count of a value — paid a state
 * store read, an encode and a write per touch (a JFR profile of the jvm OVER: most of its time in
 * `MapState` gets, updates and removes of a handful of entries). Spark's `MapState` is scoped to the
 * grouping key of the current `handleInputRows`/`handleExpiredTimer` call, so the cache must be
 * flushed and emptied before the call returns ([[flush]] from the logic's `finish`).
 *
 * @param state     the MapState (user key `SK`, value `SV` as stored)
 * @param storeKey  a key as the state stores it
 * @param storeValue a value as the state stores it
 * @param readValue a stored value as the operator uses it
 */
final class CachedMapState[K, V <: AnyRef, SK, SV](
    state: MapState[SK, SV],
    storeKey: K => SK,
    storeValue: V => SV,
    readValue: SV => V
) {
  // key → (value or null for absent, whether the store may hold the key, whether it changed in this visit)
  private final class Entry(var value: V, var stored: Boolean, var dirty: Boolean)
  private val entries = new java.util.HashMap[K, Entry]()

  private def entry(key: K): Entry = {
    var e = entries.get(key)
    if (e == null) {
      val found = state.getValue(storeKey(key))
      e = if (found == null) new Entry(null.asInstanceOf[V], false, false) else new Entry(readValue(found), true, false)
      entries.put(key, e)
    }
    e
  }

  /** The key's value, or null when there is none. */
  def get(key: K): V = entry(key).value

  /** Set the key's value (written in [[flush]]). */
  def put(key: K, value: V): Unit = {
    val e = entries.get(key)
    if (e == null) entries.put(key, new Entry(value, true, true)) // the store may hold the key: written over at flush
    else { e.value = value; e.dirty = true }
  }

  /** Set the value of a key the store does not hold (e.g. a position past every used one): no read, and no write if removed again in this visit. */
  def putNew(key: K, value: V): Unit = entries.put(key, new Entry(value, false, true))

  /** Remove the key (from the store in [[flush]], if it may hold it). */
  def remove(key: K): Unit = {
    val e = entries.get(key)
    if (e == null) entries.put(key, new Entry(null.asInstanceOf[V], true, true))
    else { e.value = null.asInstanceOf[V]; e.dirty = true }
  }

  // Whether `entries` holds every key the store holds (after [[keys]] loaded them): then [[keys]] reads the cache.
  private var complete = false
  // Whether the store held too many entries to load in this visit: then [[keys]] reads the store.
  private var tooLarge = false

  /**
   * Every key with a value, this visit's changes included, as the operator uses it (`readKey` of the stored key).
   *
   * The first call of a visit reads the store's entries into the cache, unless there are more than
   * [[CachedMapState.completeLimit]] (then every call of the visit reads the store, with the visit's changes
   * written first); later calls of the visit iterate the cache. Why: a MIN/MAX with retraction looks for the
   * next extreme among all of its view's values each time the extreme leaves (as Flink's
   * `MaxWithRetractAggFunction` does), which in an OVER frame is many times per visit; each look was a scan
   * of the state store, and its length grows with the frame (so the cost per row grew with the state per key).
   */
  def keys(readKey: SK => K): Iterator[K] = {
    if (!complete && !tooLarge) {
      val limit = CachedMapState.completeLimit
      val stored = state.iterator()
      val loaded = new java.util.ArrayList[(K, SV)]()
      while (stored.hasNext && loaded.size < limit) {
        val (key, value) = stored.next()
        loaded.add((readKey(key), value))
      }
      if (stored.hasNext) tooLarge = true
      else {
        loaded.forEach { case (key, value) =>
          if (!entries.containsKey(key)) entries.put(key, new Entry(readValue(value), true, false))
        }
        complete = true
      }
    }
    if (tooLarge) { write(); return state.keys().map(readKey) }
    val present = new java.util.ArrayList[K]()
    entries.forEach((key, e) => if (e.value != null) present.add(key))
    present.iterator().asScala
  }

  /** Write this visit's changes to the store and forget the cached entries: call before the visit ends. */
  def flush(): Unit = { write(); entries.clear(); complete = false; tooLarge = false }

  private def write(): Unit = entries.forEach { (key, e) =>
    if (e.dirty) {
      if (e.value != null) { state.updateValue(storeKey(key), storeValue(e.value)); e.stored = true }
      else if (e.stored) { state.removeKey(storeKey(key)); e.stored = false }
      e.dirty = false
    }
  }

  /** Remove every entry of the key, stored or cached. */
  def clear(): Unit = { entries.clear(); state.clear(); complete = false; tooLarge = false }
}

object CachedMapState {

  /** The JVM system property that sets [[completeLimit]] (tests set a small one to take the store's path). */
  val CompleteLimitProperty = "streamjoin.cachedMapState.keysLimit"

  /** The most entries [[CachedMapState.keys]] loads into a visit's cache (about 150 bytes each): 100,000 by default. */
  def completeLimit: Int = Integer.getInteger(CompleteLimitProperty, 100000)
}
