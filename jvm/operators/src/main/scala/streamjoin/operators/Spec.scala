package streamjoin.operators

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}

import scala.jdk.CollectionConverters._

/** Reading an operator's JSON description (built by `streamjoin.runtime.engine` in Python). */
final class Spec(json: String) extends Serializable {
  @transient private lazy val root: JsonNode = Spec.mapper.readTree(json)

  private def field(name: String): JsonNode = {
    val node = root.get(name)
    if (node == null) throw new IllegalArgumentException(s"operator description has no field '$name': $json")
    node
  }

  def string(name: String): String = field(name).asText()

  /** The string at `name`, or null when it is missing or JSON null. */
  def optString(name: String): String = {
    val node = root.get(name)
    if (node == null || node.isNull) null else node.asText()
  }

  def bool(name: String): Boolean = field(name).asBoolean()

  def long(name: String): Long = field(name).asLong()

  def strings(name: String): Array[String] = field(name).elements().asScala.map(_.asText()).toArray

  /** The raw JSON node at `name` (nested descriptions). */
  def node(name: String): JsonNode = field(name)
}

object Spec {
  private val mapper = new ObjectMapper()
}

/** Comparison of column values of any orderable Spark type (numbers, strings, dates, timestamps). */
object Values {
  def compare(a: Any, b: Any): Int = a.asInstanceOf[Comparable[Any]].compareTo(b)
}
