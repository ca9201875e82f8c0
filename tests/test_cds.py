"""The local driver's class-data-sharing archive (streamjoin.cds): when it is used, and that a driver maps it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from streamjoin import cds


@pytest.fixture
def archive(tmp_path):
    """A stand-in archive file with the stamp of this machine's java and pyspark jars."""
    path = tmp_path / "spark-driver.jsa"
    path.write_bytes(b"archive")
    path.with_suffix(".json").write_text(json.dumps(cds._stamp()))
    return path


def test_a_fitting_archive_is_handed_to_the_driver(archive, monkeypatch):
    monkeypatch.delenv(cds.JAVA_OPTIONS_ENV, raising=False)
    assert cds.driver_java_options(archive=archive) == f"-XX:SharedArchiveFile={archive}"


def test_an_archive_of_other_jars_or_another_java_is_not_used(archive, monkeypatch):
    monkeypatch.delenv(cds.JAVA_OPTIONS_ENV, raising=False)
    stamp = json.loads(archive.with_suffix(".json").read_text())
    name, size, mtime = stamp["jar_files"][0]
    archive.with_suffix(".json").write_text(
        json.dumps({**stamp, "jar_files": [[name, size, mtime + 1], *stamp["jar_files"][1:]]})
    )
    assert cds.driver_java_options(archive=archive) == ""
    archive.with_suffix(".json").write_text(json.dumps({**stamp, "java": ["/opt/other-jdk/bin/java", 1, 1]}))
    assert cds.driver_java_options(archive=archive) == ""


def test_no_archive_or_no_stamp_means_no_option(archive, monkeypatch):
    monkeypatch.delenv(cds.JAVA_OPTIONS_ENV, raising=False)
    archive.with_suffix(".json").unlink()
    assert cds.driver_java_options(archive=archive) == ""
    assert cds.driver_java_options(archive=archive.with_name("missing.jsa")) == ""


@pytest.mark.parametrize(
    "choice", ["-Xshare:off", "-XX:SharedArchiveFile=/tmp/mine.jsa", "-XX:ArchiveClassesAtExit=/tmp/x.jsa"]
)
def test_the_users_own_sharing_options_win(archive, monkeypatch, choice):
    monkeypatch.setenv(cds.JAVA_OPTIONS_ENV, f"-Xmx2g {choice}")
    assert cds.driver_java_options(archive=archive) == ""
    monkeypatch.delenv(cds.JAVA_OPTIONS_ENV)
    assert cds.driver_java_options(f"-verbose:gc {choice}", archive=archive) == ""


def test_a_local_driver_loads_sparks_classes_from_the_archive_of_make_setup(tmp_path):
    """A real driver started by ``spark_session`` maps the archive ``make setup`` trained: the JVM's class-loading
    log names the archive (``shared objects file (top)``, the dynamic archive over the JDK's base one) as the
    source of Spark's classes."""
    assert cds.driver_java_options(), f"{cds.archive_path()} is missing or stale: `make setup` trains it"
    log = tmp_path / "class-load.log"
    script = (
        "from streamjoin.session import spark_session\n"
        "spark = spark_session('cds-test')\n"
        "assert spark.range(10).selectExpr('sum(id)').first()[0] == 45\n"
    )
    env = {**os.environ, cds.JAVA_OPTIONS_ENV: f"-Xlog:class+load=info:file={log}"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = log.read_text().splitlines()
    archived = [line for line in lines if line.endswith(" source: shared objects file (top)")]
    from_jars = [line for line in lines if f" source: file:{cds._spark_jars()}" in line]
    assert any("] org.apache.spark.sql.SparkSession source: shared objects file (top)" in line for line in archived)
    # What the archive cannot hold is loaded as before: classes of signed jars (Janino), ones the training never loaded.
    assert len(archived) > 0.9 * (len(archived) + len(from_jars)), (
        f"{len(archived)} classes archived, {len(from_jars)} read from jars"
    )
