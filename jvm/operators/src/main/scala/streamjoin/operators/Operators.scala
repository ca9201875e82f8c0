package streamjoin.operators

import java.util.Properties

import scala.jdk.CollectionConverters._

import org.apache.spark.SPARK_VERSION
import org.apache.spark.sql.{DataFrame, Encoder, Encoders, Row}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.streaming.OutputMode
import org.apache.spark.sql.types.{DataType, StructType}

/**
 * The jvm engine's one entry point from Python (reached as Delta's Python API reaches its JVM
 * classes: `df._jdf` in, a `Dataset[Row]` out; see `streamjoin.runtime.engine`).
 *
 * The Python planner decides everything — the operator, its keys, columns, layout, clock and
 * state TTL — and hands over a plain description; this side only runs it.
 */
object Operators {

  /** The Spark version this jar was built for (from the Maven build). */
  lazy val builtForSpark: String = properties.getProperty("spark.version")

  /** This jar's version. */
  lazy val version: String = properties.getProperty("version")

  /** The Spark version running now. */
  def runningSpark: String = SPARK_VERSION

  private lazy val properties: Properties = {
    val p = new Properties()
    val in = getClass.getResourceAsStream("/streamjoin/operators.properties")
    try p.load(in)
    finally in.close()
    p
  }

  /**
   * Run a [[KeyedLogic]] per key of `df` on Spark's `transformWithState`.
   *
   * @param df         the operator's prepared input (columns as the Python operator prepares them,
   *                   `_rowkind` STRING and `_seq` LONG among them)
   * @param keyColumns the grouping key columns
   * @param outputJson the output schema (Spark's JSON form): output columns, `_rowkind`, `_seq`
   * @param logicClass the [[KeyedLogic]] subclass, with a `(String, StructType)` constructor
   * @param spec       the logic's JSON description
   * @param clock      [[Clock]] name
   * @param stateTtlMs state TTL in ms, <= 0 for none
   * @return the output changelog, `outputJson`'s columns
   */
  def apply(
      df: DataFrame,
      keys: java.util.List[String],
      outputJson: String,
      logicClass: String,
      spec: String,
      clock: String,
      stateTtlMs: Long
  ): DataFrame = {
    val keyColumns = keys.asScala.toArray
    val output = DataType.fromJson(outputJson).asInstanceOf[StructType]
    val keySchema = StructType(keyColumns.map(c => df.schema(c)))
    val processor = operator(df.schema, logicClass, spec, clock, stateTtlMs)
    val input = PackedRows.pack(df, processor.logic.packedInput)
    val packedOutput = processor.logic.packedOutput
    implicit val outputEncoder: Encoder[Row] =
      Encoders.row(if (packedOutput) PackedRows.packedOutputSchema(output) else output)
    val changes = input
      .groupBy(keyColumns.map(c => col(s"`$c`")).toIndexedSeq: _*)
      .as[Row, Row](Encoders.row(keySchema), Encoders.row(input.schema))
      .transformWithState(processor, KeyedOperator.timeMode(clock, stateTtlMs), OutputMode.Append())
      .toDF()
    if (packedOutput) PackedRows.unpack(changes, output) else changes
  }

  /**
   * The [[KeyedOperator]] running `logicClass` over prepared input rows of schema `input` — what
   * [[apply]] runs per key, and what the tools jar's `LocalRun` drives in process (and the unit tests).
   */
  def operator(input: StructType, logicClass: String, spec: String, clock: String, stateTtlMs: Long): KeyedOperator = {
    val logic = Class
      .forName(logicClass)
      .getConstructor(classOf[String], classOf[StructType])
      .newInstance(spec, input)
      .asInstanceOf[KeyedLogic]
    new KeyedOperator(logic, clock, stateTtlMs)
  }
}
