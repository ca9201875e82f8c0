"""Where the embedded default keeps its files, and the JVM artifacts it needs.

Everything local lives under ``.local/`` at the project root (ignored by git);
``STREAMJOIN_LOCAL_DIR`` moves it. On a real cluster none of these paths are
used: Delta paths, checkpoints and Kafka servers come from configuration.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PROJECT_ROOT", "local_dir", "DELTA_PACKAGE", "KAFKA_CONNECTOR_PACKAGE"]

PROJECT_ROOT = Path(__file__).resolve().parents[1]

#: Spark's Kafka source/sink, matching pyspark 4.2.0 (Scala 2.13).
KAFKA_CONNECTOR_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
#: The Delta jar for delta-spark 4.4.0 on Spark 4.2 (what configure_spark_with_delta_pip picks).
DELTA_PACKAGE = "io.delta:delta-spark_4.2_2.13:4.4.0"


def local_dir(*parts: str) -> Path:
    """A folder under the local state root (``$STREAMJOIN_LOCAL_DIR`` or ``<project>/.local``), created."""
    root = Path(os.environ.get("STREAMJOIN_LOCAL_DIR", PROJECT_ROOT / ".local"))
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
