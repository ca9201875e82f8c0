"""The two operator engines and the switch between them (docs/architecture.md, "Operator engines").

Every stateful operator is a per-key logic run by a ``transformWithState``
processor. The ``python`` engine runs the plain-Python logic
(:class:`~streamjoin.runtime.processor.KeyedProcessor`): the executable
specification, and the engine where no jar can be loaded (Spark Connect,
serverless). The ``jvm`` engine runs the logic's Scala twin from
``jvm/operators`` (``streamjoin.operators.KeyedOperator``) inside Spark's JVM:
no Python worker, no socket round trip per state call.

The Python operator functions prepare the input DataFrame, choose keys,
columns, clock and state TTL — the planner's decisions stay in Python — and
hand both engines the same prepared input; the jvm engine receives them as a
:class:`JvmLogic` — a Scala class and its typed spec (:mod:`streamjoin.contract`) — through one facade,
``streamjoin.operators.Operators.apply(df._jdf, ...)``, the way Delta's Python
API reaches its JVM classes.

The engine setting and the jar are :mod:`streamjoin.jvm`'s.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from streamjoin.contract import encode
from streamjoin.jvm import engine, jvm_class

__all__ = ["JvmLogic", "apply_jvm", "residual_in_join"]

_log = logging.getLogger(__name__)

#: What a join logic's Python twin raises when handed a residual predicate only its Scala twin evaluates.
RESIDUAL_IN_JOIN_ONLY = "the python engine evaluates a join's residual predicate as a Spark filter, not in the join"


@dataclass(frozen=True)
class JvmLogic:
    """A per-key logic for the jvm engine: which Scala class runs it, built from which spec.

    Attributes:
        logic_class: the Scala ``KeyedLogic`` subclass, named within ``streamjoin.operators`` by its family
            package (e.g. ``"deduplicate.DeduplicateLogic"``), with a ``(spec, StructType)`` constructor taking
            ``spec``'s Scala twin.
        spec: one of :data:`streamjoin.contract.SPECS`.
    """

    logic_class: str
    spec: object


def apply_jvm(
    df: DataFrame,
    key: list[str],
    output: StructType,
    logic: JvmLogic,
    *,
    clock: str,
    state_ttl_ms: int | None,
    watermark_delay_ms: int = 0,
) -> DataFrame:
    """Run ``logic`` per ``key`` of ``df`` on the jvm engine; the output has ``output``'s columns.

    The same contract as :meth:`~streamjoin.runtime.processor.KeyedProcessor.apply`:
    ``df`` is the operator's prepared input, ``clock`` one of
    :data:`~streamjoin.runtime.processor.Clock`, ``watermark_delay_ms`` how far (ms) the input's watermark falls
    behind Spark's.

    Raises:
        EngineError: when the jar is missing or built for another Spark version.
    """
    spark = df.sparkSession
    operators = jvm_class(spark, "streamjoin.operators.Operators")
    jdf = operators.apply(
        df._jdf,
        list(key),
        output.json(),
        f"streamjoin.operators.{logic.logic_class}",
        encode(logic.spec),
        clock,
        int(state_ttl_ms or 0),
        int(watermark_delay_ms),
    )
    return DataFrame(jdf, spark)


def residual_in_join(spark: SparkSession, condition: str | None, left: StructType, right: StructType) -> bool:
    """Whether a join's residual predicate ``condition`` (Spark SQL over the ``left`` and ``right``
    columns) is evaluated inside the join, as Flink evaluates its join condition: on the jvm engine
    (``streamjoin.operators.JoinCondition``), unless it holds a Python UDF or a subquery, which Spark's
    planner runs in operators of their own, or reads the current time (``current_timestamp()``, which
    Spark fixes per micro-batch in each batch's plan). Otherwise the operator leaves it to a Spark filter
    (docs/semantics.md §2.6, §3.5). False without a condition.
    """
    if condition is None or engine(spark) != "jvm":
        return False
    try:
        unevaluable = jvm_class(spark, "streamjoin.operators.JoinCondition").unevaluable(
            condition, left.json(), right.json()
        )
    except Py4JJavaError:
        # Not a valid predicate over those columns: the Spark filter's own analysis reports it, as a
        # pyspark AnalysisException naming the column, where the caller has not checked it already.
        return False
    if unevaluable is not None:
        _log.info("residual predicate %r holds %s: a Spark filter evaluates it, not the join", condition, unevaluable)
    return unevaluable is None
