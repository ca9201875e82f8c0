"""The engine switch and the jvm engine's jar, below everything that uses them.

See docs/architecture.md, "Operator engines".

The engine is the Spark setting ``spark.streamjoin.engine`` (``jvm`` by default; ``spark_session`` takes it
from ``STREAMJOIN_ENGINE``); it is read when a query is built, so one session can build queries on both
engines. On ``jvm`` the operators (:mod:`streamjoin.runtime.engine`) and the Kafka decoding
(:mod:`streamjoin.connectors.formats`) reach the classes of one jar, built from ``jvm/operators`` by
``make setup``; this module finds the jar's classes and refuses a jar built for another Spark.
"""

from __future__ import annotations

from pathlib import Path

from py4j.java_gateway import JavaClass
from pyspark.sql import SparkSession

from streamjoin.config import local_dir
from streamjoin.errors import EngineError, ValidationError

__all__ = ["DEFAULT_ENGINE", "ENGINES", "ENGINE_CONF", "check_versions", "engine", "jvm_class", "operators_jar"]

#: The Spark setting naming the engine.
ENGINE_CONF = "spark.streamjoin.engine"
ENGINES = ("jvm", "python")
DEFAULT_ENGINE = "jvm"

_JAR = "streamjoin-operators.jar"


def engine(spark: SparkSession) -> str:
    """The engine queries of ``spark`` are built on: ``spark.streamjoin.engine``, ``jvm`` by default.

    Raises:
        ValidationError: for a value other than ``jvm`` or ``python``.
    """
    name = spark.conf.get(ENGINE_CONF, DEFAULT_ENGINE)
    if name not in ENGINES:
        raise ValidationError(f"{ENGINE_CONF}={name!r}: the engine is one of {', '.join(ENGINES)}")
    return name


def operators_jar() -> Path:
    """Where ``make setup`` puts the jvm engine's jar (``.local/jars/operators/streamjoin-operators.jar``)."""
    return local_dir("jars", "operators") / _JAR


def jvm_class(spark: SparkSession, name: str) -> JavaClass:
    """The class ``name`` (e.g. ``"streamjoin.operators.Operators"``) of the jvm engine's jar, through py4j.

    Raises:
        EngineError: when the session has no JVM here (Spark Connect), the jar is not on its classpath, or the jar was
            built for another Spark version.
    """
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # a Spark Connect session: no JVM in this process to reach
        raise EngineError(
            f"this Spark session (Spark Connect) cannot load the jvm engine's jar: set {ENGINE_CONF}=python"
        )
    # py4j names a class it cannot load a JavaPackage, not an error.
    operators, found = jvm.streamjoin.operators.Operators, jvm
    for part in name.split("."):
        found = getattr(found, part)
    if not isinstance(operators, JavaClass) or not isinstance(found, JavaClass):
        raise EngineError(
            f"the jvm engine's jar is not on this Spark session's classpath (expected {operators_jar()}, "
            f"built by `make setup` and put on spark.jars by streamjoin.spark_session); "
            f"build it, or set {ENGINE_CONF}=python"
        )
    check_versions(operators.version(), operators.builtForSpark(), operators.runningSpark())
    return found


def check_versions(jar_version: str, built_for: str, running: str) -> None:
    """Refuse a jar built for another Spark than the running one.

    Raises:
        EngineError: naming the jar, the Spark version it was built for and the running one.
    """
    if built_for != running:
        raise EngineError(
            f"{_JAR} {jar_version} was built for Spark {built_for}; this is Spark {running}: "
            f"rebuild it (`make setup`) against {running}, or set {ENGINE_CONF}=python"
        )
