package streamjoin.operators
package regular_join

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.catalyst.{CatalystTypeConverters, InternalRow}
import org.apache.spark.sql.catalyst.expressions.{
  BoundReference,
  GenericInternalRow,
  JoinedRow,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TTLConfig, ValueState}
import org.apache.spark.sql.types.{DataType, IntegerType, StructType}

/**
 * A step of the regular join with retraction (docs/semantics.md §2): the JVM twin of
 * `streamjoin.runtime.regular_join.operator._RegularJoinLogic`, run on the union of both inputs grouped by join key
 * (`streamjoin.runtime.two_input`: key columns, `_side`, `_left`, `_right`, `_rowkind`, `_seq`).
 * This class is the one-step join (no residual predicate, or INNER with one): each change, in
 * `(_seq, _side)` order, goes through [[AbstractStreamingJoin]]; the output is the left columns, then the
 * right columns (not for SEMI/ANTI), `_seq` numbering the key's changes of the micro-batch. A
 * residual predicate in the description is evaluated on each equi-matching pair inside the tree
 * ([[JoinCondition]]), as Flink does, so only the pairs that meet it are emitted.
 *
 * Rows stay in Spark's internal form ([[PackedRows]]): each side's row struct comes in as its `UnsafeRow` bytes,
 * is stored as those bytes, compared by them (as Flink compares `BinaryRowData`), and the output row is
 * projected from the two `UnsafeRow`s.
 *
 * State per join key and stored side, as Flink's `JoinRecordStateViews` shape it, named
 * `left_records` / `right_records`, with the state TTL given to [[open]] ([[JoinRecordStateView]]):
 * JoinKeyContainsUniqueKey: ValueState `(row BINARY, _associations)`; InputSideHasUniqueKey:
 * MapState `unique key's bytes ([[RowBytes]]) -> (row BINARY, _associations)`; InputSideHasNoUniqueKey:
 * MapState `row's bytes -> (_count, _associations)`.
 *
 * Built from a [[RegularJoinSpec]] (`stored`: whether this step keeps each side).
 */
class RegularJoinLogic(spec: RegularJoinSpec, input: StructType) extends KeyedLogic {
  protected val joinType: String = spec.joinType
  private val layouts = spec.layouts.toArray
  private val uniqueKeys: Array[Array[Int]] = spec.uniqueKeys.map(_.map(_.toArray).getOrElse(Array.empty[Int])).toArray
  private val stored: Array[Boolean] = spec.stored.toArray
  protected val keyIndexes: Array[Int] =
    input.fieldNames.indices.filter(input.fieldNames(_).startsWith(Contract.KeyColumnPrefix)).toArray
  protected val sideIndex: Int = KeyedLogic.index(input, Contract.SideColumn)
  protected val rowIndexes: Array[Int] =
    Array(KeyedLogic.index(input, Contract.LeftRowColumn), KeyedLogic.index(input, Contract.RightRowColumn))
  protected val kindIndex: Int = KeyedLogic.index(input, KeyedLogic.RowKindColumn)
  protected val seqIndex: Int = KeyedLogic.index(input, KeyedLogic.SeqColumn)
  protected val rowSchemas: Array[StructType] = rowIndexes.map(input(_).dataType.asInstanceOf[StructType])
  // Bound here, on the driver that builds the operator; shipped to the executors with it.
  private val condition: JoinCondition =
    spec.condition.map(JoinCondition.bind(_, rowSchemas(0), rowSchemas(1))).orNull
  private val projectsRight = AbstractStreamingJoin.projectsRight(joinType)
  // The row of a side that did not match: every column null.
  private val nulls: Array[InternalRow] = rowSchemas.map(s => new GenericInternalRow(s.length))
  // The output row from `left ++ right`: the left columns, then the right columns (not for SEMI/ANTI).
  private val outputColumns: Seq[BoundReference] = {
    val left = rowSchemas(0).fields.toSeq.zipWithIndex.map { case (f, i) =>
      BoundReference(i, f.dataType, nullable = true)
    }
    val right = rowSchemas(1).fields.toSeq.zipWithIndex.map { case (f, i) =>
      BoundReference(rowSchemas(0).length + i, f.dataType, nullable = true)
    }
    if (projectsRight) left ++ right else left
  }
  @transient private lazy val project: UnsafeProjection = UnsafeProjection.create(outputColumns)
  @transient private lazy val joined = new JoinedRow()
  @transient private lazy val rowKeys =
    Array(0, 1).map(side => JoinRecordStateViews.rowKey(layouts(side), rowSchemas(side), uniqueKeys(side)))

  override def packedInput: Seq[String] = Seq(Contract.LeftRowColumn, Contract.RightRowColumn)
  override def packedOutput: Boolean = true

  @transient private var values: Array[ValueState[Row]] = _
  @transient private var maps: Array[MapState[RowBytes, Row]] = _
  // The current key's visit: its values, whether one is null, its stores (flushed in finish).
  @transient protected var key: Array[Any] = _
  @transient protected var nullKey: Boolean = _
  @transient private var stores: Array[JoinSideStore] = _
  @transient private var tree: AbstractStreamingJoin = _

  override def open(handle: StatefulProcessorHandle, ttl: TTLConfig): Unit = {
    values = new Array(2)
    maps = new Array(2)
    for (side <- 0 to 1 if stored(side)) {
      val name = RegularJoinLogic.StateNames(side)
      val valueEncoder = Encoders.row(JoinRecordStateViews.valueSchema(layouts(side)))
      if (JoinRecordStateViews.keyed(layouts(side)))
        maps(side) = handle.getMapState(name, Encoders.product[RowBytes], valueEncoder, ttl)
      else values(side) = handle.getValueState(name, valueEncoder, ttl)
    }
    stores = null
  }

  /** The decision tree over the views of this step (the candidate step joins inner). */
  protected def decisionTree(views: Array[JoinRecordStateView]): AbstractStreamingJoin =
    AbstractStreamingJoin(joinType, views, condition)

  /** The decision tree of the current key's visit, over stores opened on first use. */
  protected def visitTree(): AbstractStreamingJoin = {
    if (stores == null) {
      stores = Array(0, 1).map { side =>
        if (stored(side))
          JoinRecordStateViews.store(layouts(side), values(side), maps(side), rowSchemas(side), uniqueKeys(side))
        else null
      }
      tree = decisionTree(
        Array(0, 1).map(side =>
          if (stored(side)) JoinRecordStateViews(layouts(side), stores(side), rowKeys(side)) else null
        )
      )
    }
    tree
  }

  protected def kindOf(r: Row): String = RegularJoinLogic.kind(r.getString(kindIndex))

  /** The packed row struct of `side` in input row `r`, as an `UnsafeRow` ([[PackedRows]]). */
  protected def sideRow(r: Row, side: Int): UnsafeRow =
    PackedRows.point(r.getAs[Array[Byte]](rowIndexes(side)), rowSchemas(side).length)

  /** Remember the visited key (all rows of a visit share it). */
  protected def visitKey(rows: Array[Row]): Unit = if (rows.nonEmpty) {
    key = KeyedLogic.values(rows(0), keyIndexes)
    nullKey = key.contains(null)
  }

  override def elements(rows: Iterator[Row]): Iterator[Element] = {
    val all = rows.toArray
    visitKey(all)
    all
      .map { r =>
        val side = r.getInt(sideIndex)
        Element(SeqPath.of(r, seqIndex), kindOf(r), null, side = side, packed = sideRow(r, side))
      }
      .sortBy(e => (e.seq, e.side))(SeqPath.withSide)
      .iterator
  }

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] = {
    val produced =
      if (nullKey) visitTree().processNullKey(e.side, e.kind, e.packed)
      else visitTree().process(e.side, e.kind, e.packed, e.matches)
    produced.map { c =>
      joined(if (c.left == null) nulls(0) else c.left, if (c.right == null) nulls(1) else c.right)
      Change(c.kind, Array[Any](PackedRows.bytes(project(joined))))
    }
  }

  override def finish(ctx: KeyContext): Unit = if (stores != null) {
    stores.foreach(s => if (s != null) s.flush())
    stores = null
    tree = null
  }
}

object RegularJoinLogic {

  /** State variable names per side, as the Python engine names them. */
  val StateNames: Array[String] = Array("left_records", "right_records")

  /** A `_rowkind` value, checked as `RowKind.from_short` checks it. */
  def kind(short: String): String = {
    if (!RowKind.isValid(short))
      throw new IllegalStateException(s"unknown RowKind '$short'; expected one of ['+I', '+U', '-D', '-U']")
    short
  }
}

/**
 * First step of a join with a residual predicate (the JVM twin of `regular_join._RegularJoinCandidateLogic`):
 * each change, then its equi-matching pairs, found by an INNER join over both sides' state (same
 * state as [[RegularJoinLogic]]). Output: the key columns, `_side`, `_left`, `_right`, `_pair`
 * (0 for the change, 1… for its candidate pairs), `_rowkind` (the change's), `_seq` (position in
 * the key's output of the micro-batch, so the second step takes each change followed by its pairs).
 */
class RegularJoinCandidateLogic(spec: RegularJoinSpec, input: StructType) extends RegularJoinLogic(spec, input) {
  // The output row: the key columns, `_side`, `_left`, `_right`, `_pair`.
  private val outputTypes: Seq[DataType] =
    keyIndexes.toSeq.map(input(_).dataType) ++ Seq(IntegerType, rowSchemas(0), rowSchemas(1), IntegerType)
  @transient private lazy val project =
    UnsafeProjection.create(outputTypes.zipWithIndex.map { case (t, i) => BoundReference(i, t, nullable = true) })
  @transient private lazy val toInternal =
    keyIndexes.map(i => CatalystTypeConverters.createToCatalystConverter(input(i).dataType))
  // The visited key's values in Spark's internal form.
  @transient private var internalKey: Array[Any] = _

  override protected def decisionTree(views: Array[JoinRecordStateView]): AbstractStreamingJoin =
    AbstractStreamingJoin("inner", views)

  override protected def visitKey(rows: Array[Row]): Unit = if (rows.nonEmpty) {
    super.visitKey(rows)
    internalKey = key.indices.map(i => toInternal(i)(key(i))).toArray
  }

  override def onElement(ctx: KeyContext, e: Element, now: java.lang.Long): Seq[Change] = {
    def change(left: UnsafeRow, right: UnsafeRow, pair: Int): Change = {
      val row = new GenericInternalRow(internalKey ++ Array[Any](e.side, left, right, pair))
      Change(e.kind, Array[Any](PackedRows.bytes(project(row))))
    }
    val out = ArrayBuffer(if (e.side == 0) change(e.packed, null, 0) else change(null, e.packed, 0))
    if (!nullKey) visitTree().process(e.side, e.kind, e.packed, null).zipWithIndex.foreach { case (c, i) =>
      out += change(c.left, c.right, i + 1)
    }
    out.toSeq
  }
}

/**
 * Second step of a join with a residual predicate (the JVM twin of `regular_join._RegularJoinAssociateLogic`):
 * its input is the first step's output filtered by the predicate; each change (`_pair` 0) comes
 * followed by the pairs that passed, its matches. Only the outer sides are stored, with their
 * association counts (description `stored`); the output is [[RegularJoinLogic]]'s.
 */
class RegularJoinAssociateLogic(spec: RegularJoinSpec, input: StructType) extends RegularJoinLogic(spec, input) {
  private val pairIndex = KeyedLogic.index(input, Contract.PairColumn)

  override def elements(rows: Iterator[Row]): Iterator[Element] = {
    val all = KeyedLogic.inOrder(rows, seqIndex)
    visitKey(all)
    val events = ArrayBuffer[(Row, ArrayBuffer[UnsafeRow])]()
    all.foreach { r =>
      if (r.getInt(pairIndex) == 0) events += ((r, ArrayBuffer[UnsafeRow]()))
      else events.last._2 += sideRow(r, 1 - r.getInt(sideIndex))
    }
    events.iterator.map { case (r, matches) =>
      val side = r.getInt(sideIndex)
      Element(SeqPath.of(r, seqIndex), kindOf(r), null, side = side, matches = matches.toSeq, packed = sideRow(r, side))
    }
  }
}
