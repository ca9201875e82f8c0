package streamjoin.operators

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute
import org.apache.spark.sql.catalyst.expressions.{
  BoundReference,
  Expression,
  GenericInternalRow,
  UnaryExpression,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.streamjoin.Columns
import org.apache.spark.sql.types.{BinaryType, DataType, StructField, StructType}
import org.apache.spark.unsafe.Platform

/**
 * Rows that cross the `transformWithState` boundary as Spark's own `UnsafeRow` bytes (a BINARY value)
 * instead of `Row`s of external values.
 *
 * Why: Spark hands a `StatefulProcessor` external `Row`s and takes them back, so a logic over `Row`s
 * pays a conversion per column per row three or four times — the input (`String`, `BigDecimal`,
 * `Timestamp` objects), each state write and read (through the state's `Row` encoder), the output —
 * where Spark's native join keeps `UnsafeRow`s throughout. Packing saves those conversions, and saves more
 * where a key holds more rows (the figures are in bench/RESULTS.md); the state store calls are most of what
 * is left. A packed struct column reaches the logic as one byte array, which the logic points an `UnsafeRow`
 * at and stores as it is; a packed output is the output columns' `UnsafeRow` bytes, which the query unpacks
 * into columns after the operator.
 *
 * A logic opts in with [[KeyedLogic.packedInput]] and [[KeyedLogic.packedOutput]]; [[Operators.apply]]
 * packs and unpacks with the expressions [[PackRow]] and [[UnpackRow]], the tests' harnesses (the tools jar's
 * `LocalRun`, the unit tests) with [[packer]] and [[unpackRow]] (the same encoding).
 */
object PackedRows {

  /** The packed output's row column: BINARY, the output columns (without `_rowkind`, `_seq`) as `UnsafeRow` bytes. */
  val RowColumn = "_row"

  private val changelogColumns = Set(KeyedLogic.RowKindColumn, KeyedLogic.SeqColumn)

  /** `input` with each of `columns` (STRUCT) as BINARY. */
  def packedSchema(input: StructType, columns: Seq[String]): StructType =
    StructType(input.fields.map(f => if (columns.contains(f.name)) f.copy(dataType = BinaryType) else f))

  /** The output columns that a packed output carries in [[RowColumn]]: every column but `_rowkind` and `_seq`. */
  def dataSchema(output: StructType): StructType = StructType(output.fields.filterNot(f => changelogColumns(f.name)))

  /** The schema of a packed output: [[RowColumn]], `_rowkind`, `_seq`. */
  def packedOutputSchema(output: StructType): StructType =
    StructType(
      StructField(RowColumn, BinaryType, nullable = false) +: output.fields.filter(f => changelogColumns(f.name))
    )

  /** `df` with each of `columns` packed ([[PackRow]]), in place. */
  def pack(df: DataFrame, columns: Seq[String]): DataFrame =
    if (columns.isEmpty) df
    else
      df.select(df.schema.fieldNames.toIndexedSeq.map { c =>
        if (columns.contains(c)) Columns.of(PackRow(UnresolvedAttribute.quoted(c))).as(c) else col(s"`$c`")
      }: _*)

  /** A packed output as `output`'s columns. */
  def unpack(df: DataFrame, output: StructType): DataFrame = {
    val row = Columns.of(UnpackRow(UnresolvedAttribute.quoted(RowColumn), dataSchema(output)))
    df.select(output.fieldNames.toIndexedSeq.map { c =>
      if (changelogColumns(c)) col(c) else row.getField(c).as(c)
    }: _*)
  }

  /** [[pack]] of internal rows of schema `input`, by the same [[PackRow]] expressions. */
  def packer(input: StructType, columns: Seq[String]): InternalRow => InternalRow = {
    val expressions = input.fields.toIndexedSeq.zipWithIndex.map { case (f, i) =>
      val column = BoundReference(i, f.dataType, f.nullable)
      if (columns.contains(f.name)) PackRow(column) else column
    }
    row => new GenericInternalRow(expressions.map(_.eval(row)).toArray[Any])
  }

  /** [[unpack]] of one internal row of schema [[packedOutputSchema]]`(output)`. */
  def unpackRow(row: InternalRow, output: StructType): InternalRow = {
    val data = dataSchema(output)
    val unpacked = point(row.getBinary(0), data.length)
    var changelog = 0
    val values = output.fields.map { f =>
      if (changelogColumns(f.name)) { changelog += 1; row.get(changelog, f.dataType) }
      else { val i = data.fieldIndex(f.name); unpacked.get(i, data(i).dataType) }
    }
    new GenericInternalRow(values)
  }

  /** A copy of `row`'s bytes (an `UnsafeProjection` reuses its buffer; `getBytes` may return it). */
  def bytes(row: UnsafeRow): Array[Byte] = {
    val out = new Array[Byte](row.getSizeInBytes)
    row.writeToMemory(out, Platform.BYTE_ARRAY_OFFSET)
    out
  }

  /** An `UnsafeRow` of `fields` columns over `bytes` (not copied). */
  def point(bytes: Array[Byte], fields: Int): UnsafeRow = {
    val row = new UnsafeRow(fields)
    row.pointTo(bytes, bytes.length)
    row
  }
}

/** A STRUCT value as its `UnsafeRow` bytes (BINARY): [[PackedRows]]. */
case class PackRow(child: Expression) extends UnaryExpression with CodegenFallback {
  override def dataType: DataType = BinaryType

  @transient private lazy val project = UnsafeProjection.create(child.dataType.asInstanceOf[StructType])

  override protected def nullSafeEval(input: Any): Any = PackedRows.bytes(project(input.asInstanceOf[InternalRow]))

  override protected def withNewChildInternal(newChild: Expression): PackRow = copy(child = newChild)
}

/** [[PackRow]]'s bytes as the STRUCT `schema` they encode. */
case class UnpackRow(child: Expression, schema: StructType) extends UnaryExpression with CodegenFallback {
  override def dataType: DataType = schema

  override protected def nullSafeEval(input: Any): Any =
    PackedRows.point(input.asInstanceOf[Array[Byte]], schema.length)

  override protected def withNewChildInternal(newChild: Expression): UnpackRow = copy(child = newChild)
}
