package streamjoin.operators

import java.util.TreeSet

/**
 * One key's timers, with Flink's timer-service semantics (the JVM twin of
 * `streamjoin.runtime.timers.TimerService`): timers at or before a new time fire, in time order,
 * only when time strictly increases; registering a time twice gives one timer.
 *
 * @param time the latest time (epoch ms) the key has advanced to
 */
final class TimerService(var time: Long, val timers: TreeSet[java.lang.Long]) extends Serializable {
  def this() = this(Long.MinValue, new TreeSet[java.lang.Long]())

  def register(at: Long): Unit = timers.add(at)

  def delete(at: Long): Unit = timers.remove(at)

  /** Move to `to` and fire the due timers (including those `onTimer` registers at or before `to`). */
  def advance(to: Long)(onTimer: Long => Unit): Unit = {
    if (to > time) {
      time = to
      while (!timers.isEmpty && timers.first() <= to) onTimer(timers.pollFirst())
    }
  }

  /** The earliest time a timer can fire (a timer at or before `time` waits for `time + 1`), or null. */
  def nextWakeup: java.lang.Long =
    if (timers.isEmpty || time == Long.MaxValue) null else math.max(timers.first(), time + 1)
}
