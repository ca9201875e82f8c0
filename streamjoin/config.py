"""Where the embedded default keeps its files.

Everything local lives under ``.local/`` at the project root (ignored by git);
``STREAMJOIN_LOCAL_DIR`` moves it. On a real cluster none of these paths are
used: Delta paths, checkpoints and Kafka servers come from configuration.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["PROJECT_ROOT", "java_executable", "local_dir", "spark_package_jars"]

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def local_dir(*parts: str) -> Path:
    """A folder under the local state root (``$STREAMJOIN_LOCAL_DIR`` or ``<project>/.local``), created."""
    root = Path(os.environ.get("STREAMJOIN_LOCAL_DIR", PROJECT_ROOT / ".local"))
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def spark_package_jars() -> list[Path]:
    """The Spark-side packages' jars ``make setup`` fetched into ``.local/jars/spark`` (Delta, Spark's Kafka
    connector, ...), sorted; empty before ``make setup``."""
    return sorted(local_dir("jars", "spark").glob("*.jar"))


def java_executable() -> str | None:
    """The java the local JVMs run (Spark's ``bin/spark-class`` and the embedded broker): ``$JAVA_HOME/bin/java``
    when it exists, else ``java`` on ``PATH``; ``None`` when there is neither."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")
