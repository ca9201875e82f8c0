package streamjoin.operators

import streamjoin.operators.changelog_normalize.ChangelogNormalizeLogic
import org.apache.spark.sql.types.{IntegerType, StructField, StructType}
import org.scalatest.funsuite.AnyFunSuite

/** The generated decoders of `OperatorSpecs.scala` are strict: a spec one side renamed never decodes. */
class SpecCodecSuite extends AnyFunSuite {
  private val normalize = """{"columns": ["k", "v"], "updateBefore": true, "stateTtl": false}"""

  test("a spec decodes into its case class") {
    assert(ChangelogNormalizeSpec.decode(normalize) == ChangelogNormalizeSpec(Seq("k", "v"), true, false))
    val nested = IntervalJoinSpec.decode(
      """{"inputs": {"keyColumns": ["_key0"], "rowtime": [1, 2], "rowWatermark": null}, "how": "left",
        | "lowerMs": -5, "upperMs": 9000000000, "candidates": false, "condition": "a <> b"}""".stripMargin
    )
    assert(nested.inputs == TwoInputSpec(Seq("_key0"), Some(Seq(1, 2)), None))
    assert(nested.upperMs == 9000000000L && nested.condition.contains("a <> b"))
    val decoder = ChangeDecoderSpec.decode(
      s"""{"format": "json", "rowkindField": null, "columns": ${StructType(Seq(StructField("k", IntegerType))).json},
         | "primaryKey": ["k"], "timeZone": "UTC", "upsert": false, "keyFields": [], "exceptKey": false}""".stripMargin
    )
    assert(decoder.columns.fieldNames.toSeq == Seq("k"))
  }

  test("a missing or an unknown field fails, naming both") {
    val renamed = normalize.replace("updateBefore", "emitUpdateBefore")
    val e = intercept[IllegalArgumentException](ChangelogNormalizeSpec.decode(renamed))
    assert(e.getMessage.contains("missing fields [updateBefore]"))
    assert(e.getMessage.contains("unknown fields [emitUpdateBefore]"))
  }

  test("a value of another type, or outside a Literal's values, fails naming the field") {
    val e = intercept[IllegalArgumentException](ChangelogNormalizeSpec.decode(normalize.replace("true", "1")))
    assert(e.getMessage.startsWith("ChangelogNormalizeSpec.updateBefore: expected a boolean"))
    val pairs = """{"columns": ["v"], "outer": [true]}"""
    assert(intercept[IllegalArgumentException](ResidualPaddingSpec.decode(pairs)).getMessage.contains("an array of 2"))
    val how = """{"inputs": {"keyColumns": [], "rowtime": null, "rowWatermark": null}, "how": "outer",
                | "appendOnlyVersions": false}""".stripMargin
    assert(intercept[IllegalArgumentException](TemporalJoinSpec.decode(how)).getMessage.contains("one of inner, left"))
  }

  test("a logic is built from the spec type its constructor takes") {
    val input =
      StructType(Seq(StructField("k", IntegerType), StructField("v", IntegerType)) ++ Changes.changelogColumns)
    val op =
      Operators.operator(input, classOf[ChangelogNormalizeLogic].getName, normalize, Clock.None, 0L, assertions = true)
    assert(op.logic.isInstanceOf[ChangelogNormalizeLogic])
    val wrong = """{"columns": ["k", "v"], "upsertKey": []}"""
    intercept[IllegalArgumentException](
      Operators.operator(input, classOf[ChangelogNormalizeLogic].getName, wrong, Clock.None, 0L, assertions = true)
    )
  }
}
