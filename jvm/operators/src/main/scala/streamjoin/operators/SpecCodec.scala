package streamjoin.operators

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import org.apache.spark.sql.types.{DataType, StructType}

import scala.jdk.CollectionConverters._

/**
 * The decoder of the operator specs' JSON (written by `streamjoin.contract.encode`): what the generated
 * decoders of `OperatorSpecs.scala` call. Strict: a missing or unknown field, a value of another JSON
 * type or, for a `Literal` field, another value fails with an `IllegalArgumentException` naming the
 * field (`path`), so a spec that one side renamed never decodes silently.
 */
object SpecCodec {
  private val mapper = new ObjectMapper()

  def parse(json: String): JsonNode = mapper.readTree(json)

  /** Fail unless `node` is an object with exactly `fields` (in any order). */
  def requireFields(node: JsonNode, spec: String, fields: Seq[String]): Unit = {
    if (node == null || !node.isObject) throw new IllegalArgumentException(s"$spec: expected a JSON object, got $node")
    val present = node.fieldNames().asScala.toSet
    val missing = fields.filterNot(present)
    val unknown = present -- fields
    if (missing.nonEmpty || unknown.nonEmpty)
      throw new IllegalArgumentException(
        s"$spec: missing fields [${missing.mkString(", ")}], unknown fields [${unknown.toSeq.sorted.mkString(", ")}]" +
          s" (streamjoin.contract and OperatorSpecs.scala differ: run `make operator-specs`)"
      )
  }

  private def wrong(path: String, expected: String, node: JsonNode): Nothing =
    throw new IllegalArgumentException(s"$path: expected $expected, got $node")

  def string(node: JsonNode, path: String): String =
    if (node.isTextual) node.asText() else wrong(path, "a string", node)

  def bool(node: JsonNode, path: String): Boolean =
    if (node.isBoolean) node.asBoolean() else wrong(path, "a boolean", node)

  def long(node: JsonNode, path: String): Long =
    if (node.isIntegralNumber && node.canConvertToLong) node.asLong() else wrong(path, "an integer", node)

  def int(node: JsonNode, path: String): Int =
    if (node.isIntegralNumber && node.canConvertToInt) node.asInt() else wrong(path, "a 32-bit integer", node)

  def oneOf(node: JsonNode, path: String, values: Seq[String]): String = {
    val value = string(node, path)
    if (values.contains(value)) value else wrong(path, s"one of ${values.mkString(", ")}", node)
  }

  def dataType(node: JsonNode, path: String): DataType =
    if (node.isObject || node.isTextual) DataType.fromJson(node.toString) else wrong(path, "a Spark type", node)

  def structType(node: JsonNode, path: String): StructType =
    if (node.isObject) DataType.fromJson(node.toString).asInstanceOf[StructType] else wrong(path, "a StructType", node)

  def option[T](node: JsonNode)(decode: JsonNode => T): Option[T] =
    if (node.isNull) None else Some(decode(node))

  /** The array at `node` (of `size` elements; -1 for any number). */
  def seq[T](node: JsonNode, path: String, size: Int)(decode: JsonNode => T): Seq[T] = {
    if (!node.isArray || (size >= 0 && node.size != size))
      wrong(path, if (size >= 0) s"an array of $size" else "an array", node)
    node.elements().asScala.map(decode).toVector
  }
}

/** Comparison of column values of any orderable Spark type (numbers, strings, dates, timestamps). */
object Values {
  def compare(a: Any, b: Any): Int = a.asInstanceOf[Comparable[Any]].compareTo(b)
}
