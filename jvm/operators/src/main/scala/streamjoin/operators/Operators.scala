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
   * @param logicClass the [[KeyedLogic]] subclass, with a `(spec, StructType)` constructor whose spec is one of
   *                   the types of `OperatorSpecs.scala`
   * @param spec       the spec's JSON (`streamjoin.contract.encode`)
   * @param clock      [[Clock]] name
   * @param stateTtlMs state TTL in ms, <= 0 for none
   * @param watermarkDelayMs how far (ms) the watermark of the operator's input falls behind Spark's (interval joins
   *                   upstream hold it back; [[KeyedOperator.watermarkDelayMs]])
   * @return the output changelog, `outputJson`'s columns; each key visit's changes checked by
   *         [[ChangelogAssertions]] when the session's `Contract.AssertionsConf` is `true`
   */
  def apply(
      df: DataFrame,
      keys: java.util.List[String],
      outputJson: String,
      logicClass: String,
      spec: String,
      clock: String,
      stateTtlMs: Long,
      watermarkDelayMs: Long
  ): DataFrame = {
    val keyColumns = keys.asScala.toArray
    val output = DataType.fromJson(outputJson).asInstanceOf[StructType]
    val keySchema = StructType(keyColumns.map(c => df.schema(c)))
    val assertions = df.sparkSession.conf.get(Contract.AssertionsConf, "false").equalsIgnoreCase("true")
    val processor = operator(df.schema, logicClass, spec, clock, stateTtlMs, assertions)
    processor.watermarkDelayMs = watermarkDelayMs
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
   * The [[KeyedOperator]] running `logicClass` over prepared input rows of schema `input`, built from the spec
   * JSON `spec` — what [[apply]] runs per key, and what the tools jar's `LocalRun` drives in process.
   */
  def operator(
      input: StructType,
      logicClass: String,
      spec: String,
      clock: String,
      stateTtlMs: Long,
      assertions: Boolean
  ): KeyedOperator = {
    val logic = Class.forName(logicClass).asSubclass(classOf[KeyedLogic])
    val specType = constructor(logic).getParameterTypes()(0)
    val decode = OperatorSpecs.decoders.getOrElse(
      specType,
      throw new IllegalArgumentException(s"$logicClass takes a ${specType.getName}, not an operator spec")
    )
    operator(input, logic, decode(spec), clock, stateTtlMs, assertions)
  }

  /** The [[KeyedOperator]] running `logic` built from `spec`, one of the spec types of `OperatorSpecs.scala`
   * (the unit tests build logics so). */
  def operator(
      input: StructType,
      logic: Class[_ <: KeyedLogic],
      spec: AnyRef,
      clock: String,
      stateTtlMs: Long,
      assertions: Boolean
  ): KeyedOperator =
    new KeyedOperator(
      constructor(logic).newInstance(spec, input).asInstanceOf[KeyedLogic],
      clock,
      stateTtlMs,
      assertions
    )

  private def constructor(logic: Class[_ <: KeyedLogic]): java.lang.reflect.Constructor[_] = logic.getConstructors
    .find(c => c.getParameterCount == 2 && c.getParameterTypes()(1) == classOf[StructType])
    .getOrElse(throw new IllegalArgumentException(s"${logic.getName} has no (spec, StructType) constructor"))
}
