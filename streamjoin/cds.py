"""A class-data-sharing (CDS) archive for local Spark drivers: a cold driver starts faster.

A cold local driver loads ~32,000 classes (Spark, Delta, the Kafka connector, the operators) and verifies most
of them before its first micro-batch; on 2 cores that is a good part of a short run (bench/RESULTS.md, "A cold
driver"). HotSpot's dynamic CDS (JDK 13+, JEP 350) writes the classes one run loaded, parsed and verified, into
an archive that later JVMs map instead (``-XX:ArchiveClassesAtExit`` / ``-XX:SharedArchiveFile``). Peak speed is
unchanged: only class loading is skipped.

``make setup`` trains the archive once (:func:`build_archive`: a real ``streamjoin run --available-now`` of one
pipeline against a throw-away embedded broker); :func:`driver_java_options` hands it to every driver that
:func:`streamjoin.session.spark_session` starts on a ``local`` master. An archive only fits the JVM and the
class path it was written with; a stamp beside it records both, and an archive that no longer fits is not
used (the driver then starts as without one) until ``make setup`` trains it again.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from streamjoin.config import java_executable, local_dir
from streamjoin.jvm import operators_jar

__all__ = ["JAVA_OPTIONS_ENV", "archive_path", "build_archive", "driver_java_options"]

#: The environment variable spark-submit adds to the driver JVM's options (client mode).
JAVA_OPTIONS_ENV = "SPARK_SUBMIT_OPTS"

#: What makes up the driver's class path besides pyspark's ``jars/`` (Spark's ``AbstractCommandBuilder``).
_CLASS_PATH_ENV = ("SPARK_CONF_DIR", "SPARK_CLASSPATH", "SPARK_DIST_CLASSPATH", "HADOOP_CONF_DIR", "YARN_CONF_DIR")

#: Options by which a user already chose what the JVM shares: then none is added.
_USER_CHOICES = ("-Xshare", "-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit", "-XX:DumpLoadedClassList")


def archive_path() -> Path:
    """The archive of the local driver, ``.local/cds/spark-driver.jsa`` (``$STREAMJOIN_LOCAL_DIR`` moves it)."""
    return local_dir("cds") / "spark-driver.jsa"


def _stamp_path(archive: Path) -> Path:
    return archive.with_suffix(".json")


def _spark_jars() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home()) / "jars"


def _stamp() -> dict:
    """What the JVM checks an archive against: its own build, and each jar of the class path with its size and time
    (pyspark's, and the jvm engine's jar that :func:`streamjoin.session.spark_session` puts first on it)."""
    executable, jars, operators = java_executable(), _spark_jars(), operators_jar()
    java = Path(executable).resolve() if executable else None
    return {
        "java": [str(java), java.stat().st_size, java.stat().st_mtime_ns] if java else None,
        "jars": str(jars),
        "jar_files": sorted([p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in jars.glob("*.jar"))
        if jars.is_dir()
        else [],
        "operators_jar": [str(operators), operators.stat().st_size, operators.stat().st_mtime_ns]
        if operators.is_file()
        else None,
        "env": {name: os.environ.get(name) for name in _CLASS_PATH_ENV},
    }


def driver_java_options(user_options: str = "", archive: Path | None = None) -> str:
    """The Java options a local driver starts with to map ``archive``: ``-XX:SharedArchiveFile=<path>``.

    Empty when there is no archive (``make setup`` not run), when its stamp no longer matches the java or
    pyspark's jars (another JDK, pyspark reinstalled: the JVM would refuse it with a warning and start without),
    or when ``user_options`` or ``$SPARK_SUBMIT_OPTS`` already say what the JVM shares (``-Xshare:off``, another
    archive, a training run).

    Args:
        user_options: the driver's Java options the caller sets (``spark.driver.extraJavaOptions``).
        archive: the archive; :func:`archive_path` by default.
    """
    archive = archive or archive_path()
    if any(choice in f"{user_options} {os.environ.get(JAVA_OPTIONS_ENV, '')}" for choice in _USER_CHOICES):
        return ""
    try:
        stamp = json.loads(_stamp_path(archive).read_text())
    except (OSError, ValueError):
        return ""
    if not archive.is_file() or stamp != _stamp():
        return ""
    return f"-XX:SharedArchiveFile={archive}"


def build_archive(sql_file: Path, archive: Path | None = None, *, scale_factor: float = 0.001) -> Path:
    """Train the archive: run ``sql_file`` once with ``streamjoin run --available-now`` and archive its classes.

    The run is real: an embedded Kafka broker in a temporary folder holds the TPC-H changelogs at ``scale_factor``
    (0.001: 7,784 records), the pipeline runs on the default engine into a temporary lakehouse, and its driver
    writes the classes it loaded when it exits (``-XX:ArchiveClassesAtExit``: ~220 MB, ~20 s after the run). The
    archive and its stamp replace the old ones only once both are complete.

    Args:
        sql_file: a pipeline of ``sql/`` (its catalog next to it).
        archive: where to write; :func:`archive_path` by default.
        scale_factor: TPC-H scale factor of the training input.

    Returns:
        The archive's path.

    Raises:
        RuntimeError: the training run failed, or its driver did not write the archive.
    """
    from pyspark import SparkContext

    from streamjoin import cli
    from streamjoin.connectors.embedded_kafka import EmbeddedKafka
    from streamjoin.datagen.topics import load_topics
    from streamjoin.datagen.tpch import TpchChangelog, generate_tpch

    archive = archive or archive_path()
    archive.parent.mkdir(parents=True, exist_ok=True)  # the JVM writes no archive into a missing folder
    written = archive.with_name(archive.name + ".tmp")
    written.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="streamjoin-cds-") as tmp, EmbeddedKafka(Path(tmp) / "kafka") as broker:
        load_topics(broker.bootstrap_servers, TpchChangelog(generate_tpch(Path(tmp) / "tpch", scale_factor), seed=1))
        # -Xlog:cds=error: the dump lists every class it skips (signed jars, classes never linked) as a warning.
        options = os.environ.get(JAVA_OPTIONS_ENV)
        os.environ[JAVA_OPTIONS_ENV] = f"{options or ''} -XX:ArchiveClassesAtExit={written} -Xlog:cds=error".strip()
        try:
            status = cli.main(
                [
                    "run",
                    "--available-now",
                    "--bootstrap-servers",
                    broker.bootstrap_servers,
                    "--lakehouse",
                    str(Path(tmp) / "lakehouse"),
                    str(sql_file),
                ]
            )
        finally:
            if options is None:
                del os.environ[JAVA_OPTIONS_ENV]
            else:
                os.environ[JAVA_OPTIONS_ENV] = options
        if status != 0:
            raise RuntimeError(f"the training run of {sql_file} failed with exit status {status}")
        # The driver JVM exits when its stdin closes (pyspark's gateway server) and writes the archive on the way
        # out; its shutdown hook stops the Spark context.
        gateway = SparkContext._gateway
        assert gateway is not None  # started by the run's session, which cli.main leaves up
        driver = gateway.proc
        driver.stdin.close()
        driver.wait(timeout=600)
    if not written.is_file():
        raise RuntimeError(f"the training driver exited ({driver.returncode}) without writing {written}")
    _stamp_path(archive).unlink(missing_ok=True)
    written.replace(archive)
    _stamp_path(archive).write_text(json.dumps(_stamp()))
    return archive


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m streamjoin.cds SQL_FILE  (trains .local/cds/spark-driver.jsa)")
    print(f"class-data-sharing archive: {build_archive(Path(sys.argv[1]))}")
