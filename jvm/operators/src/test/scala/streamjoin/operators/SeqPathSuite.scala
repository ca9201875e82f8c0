package streamjoin.operators

import java.util.TreeSet

import org.scalatest.funsuite.AnyFunSuite

class SeqPathSuite extends AnyFunSuite {
  private def hex(b: Array[Byte]) = SeqPath.show(b)

  test("a child appends its 4-byte big-endian index to its cause's path") {
    val root = OperatorHarness.root(5)
    assert(hex(root) == "0000000000000005")
    assert(hex(SeqPath.child(root, 0)) == "000000000000000500000000")
    assert(hex(SeqPath.child(SeqPath.child(root, 1), 258)) == "00000000000000050000000100000102")
  }

  test("paths compare as unsigned bytes, a prefix before its extensions") {
    val a = OperatorHarness.root(1)
    val sorted =
      Seq(SeqPath.child(a, 1), OperatorHarness.root(0x80L << 56), SeqPath.child(a, 0), a, OperatorHarness.root(2))
        .sorted(SeqPath.ordering)
        .map(hex)
    assert(
      sorted == Seq(
        "0000000000000001",
        "000000000000000100000000",
        "000000000000000100000001",
        "0000000000000002",
        "8000000000000000" // unsigned: the high bit makes it the largest, not a negative number
      )
    )
  }

  test("a timer's changes come before every source change, in time order, negative times first") {
    val timers = Seq(5L, -3L, 0L).map(SeqPath.timer)
    val sorted = (timers :+ OperatorHarness.root(0)).sorted(SeqPath.ordering)
    assert(sorted.head.sameElements(OperatorHarness.root(0))) // the all-zero root sorts as a prefix of the timers
    assert(sorted.tail.map(hex) == Seq(-3L, 0L, 5L).map(t => hex(SeqPath.timer(t))))
    assert(SeqPath.timer(7).length == 16 && SeqPath.timer(7).take(8).forall(_ == 0))
  }

  test("two inputs: equal paths order the left side first") {
    val s = OperatorHarness.root(3)
    val ordered = Seq((s, 1), (OperatorHarness.root(2), 1), (s, 0)).sorted(SeqPath.withSide)
    assert(ordered.map { case (p, side) =>
      (hex(p), side)
    } == Seq((hex(OperatorHarness.root(2)), 1), (hex(s), 0), (hex(s), 1)))
  }

  test("SeqOutput numbers the changes of one cause on, across calls, and restarts for another cause") {
    val out = new SeqOutput()
    val a = OperatorHarness.root(1)
    val b = OperatorHarness.root(2)
    out.add(a, Seq(Change(RowKind.Insert, Array(1))))
    out.add(a, Nil)
    out.add(a, Seq(Change(RowKind.Insert, Array(2)), Change(RowKind.Insert, Array(3))))
    out.add(b, Seq(Change(RowKind.Delete, Array(4))))
    assert(
      out.changes.map { case (seq, c) => (hex(seq), c.values(0)) }.toSeq == Seq(
        (hex(SeqPath.child(a, 0)), 1),
        (hex(SeqPath.child(a, 1)), 2),
        (hex(SeqPath.child(a, 2)), 3),
        (hex(SeqPath.child(b, 0)), 4)
      )
    )
  }
}

class TimerServiceSuite extends AnyFunSuite {
  test("timers at or before a new time fire in time order, only when time strictly increases") {
    val timers = new TimerService()
    Seq(30L, 10L, 20L, 10L).foreach(timers.register) // registering 10 twice keeps one timer
    val fired = scala.collection.mutable.ArrayBuffer[Long]()
    timers.advance(20)(fired += _)
    assert(fired == Seq(10L, 20L))
    timers.register(15) // behind the time: due, but fires only when time rises again
    timers.advance(20)(fired += _)
    assert(fired == Seq(10L, 20L))
    assert(timers.nextWakeup == 21L) // a timer at or before `time` waits for time + 1
    timers.advance(21)(fired += _)
    assert(fired == Seq(10L, 20L, 15L))
    assert(timers.nextWakeup == 30L)
  }

  test("a timer that onTimer registers at or before the new time fires in the same advance; a deleted one never") {
    val timers = new TimerService(0L, new TreeSet[java.lang.Long]())
    timers.register(5)
    timers.register(8)
    timers.delete(8)
    val fired = scala.collection.mutable.ArrayBuffer[Long]()
    timers.advance(10) { t => fired += t; if (t == 5) timers.register(7) }
    assert(fired == Seq(5L, 7L))
    assert(timers.nextWakeup == null)
  }
}
