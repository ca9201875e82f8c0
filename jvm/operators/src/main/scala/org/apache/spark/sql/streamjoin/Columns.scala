package org.apache.spark.sql.streamjoin

import org.apache.spark.sql.Column
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.classic.ExpressionColumnNode

/**
 * A `Column` of a Catalyst expression of ours (`streamjoin.operators.PackRow`, `UnpackRow`). Spark keeps the
 * constructor `private[sql]`, so this one function lives in a package under `org.apache.spark.sql`, as Delta's
 * and GraphFrames' own bridges do.
 */
object Columns {
  def of(expression: Expression): Column = new Column(ExpressionColumnNode(expression))
}
