"""The code location's resources from the environment: ``dagster.EnvVar`` when a variable is set (read at
launch, kept out of the run config), the embedded default when it is not."""

import json
import os
import subprocess
import sys

from streamjoin.config import PROJECT_ROOT

VARIABLES = (
    "SPARK_MASTER",
    "SPARK_PACKAGES",
    "SPARK_SHUFFLE_PARTITIONS",
    "KAFKA_BOOTSTRAP_SERVERS",
    "STREAMJOIN_LAKEHOUSE",
)

PROBE = """
import json
from dagster import EnvVar, build_resources
from dagster_project.definitions import defs
r = {k: defs.resources[k] for k in ("spark", "kafka", "lakehouse")}
declared = {f"{k}.{f}": isinstance(getattr(r[k], f), EnvVar)
            for k, f in (("spark", "master"), ("spark", "packages"), ("spark", "shuffle_partitions"),
                         ("kafka", "bootstrap_servers"), ("lakehouse", "root"))}
# Kafka's resource looks the local service up at start: build it only when it names a cluster.
built = r if declared["kafka.bootstrap_servers"] else {k: v for k, v in r.items() if k != "kafka"}
with build_resources(built) as res:
    kafka = res.kafka if "kafka" in built else r["kafka"]
    values = {"master": res.spark.master, "packages": res.spark.packages,
              "shuffle_partitions": res.spark.shuffle_partitions,
              "bootstrap_servers": kafka.bootstrap_servers, "root": res.lakehouse.root}
print(json.dumps({"env_backed": declared, "values": values}))
"""


def _load(**env) -> dict:
    """Load the code location in a fresh interpreter with exactly ``env`` of :data:`VARIABLES` set."""
    environ = {k: v for k, v in os.environ.items() if k not in VARIABLES} | env
    environ["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), environ.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=environ, cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_set_variables_are_env_backed_and_reach_the_resources():
    loaded = _load(
        SPARK_MASTER="spark://head:7077",
        SPARK_PACKAGES="org.example:extra:1.0",
        SPARK_SHUFFLE_PARTITIONS="16",
        KAFKA_BOOTSTRAP_SERVERS="kafka-1:9093,kafka-2:9093",
        STREAMJOIN_LAKEHOUSE="s3a://bucket/lake",
    )
    assert all(loaded["env_backed"].values()), loaded
    assert loaded["values"] == {
        "master": "spark://head:7077",
        "packages": "org.example:extra:1.0",
        "shuffle_partitions": "16",
        "bootstrap_servers": "kafka-1:9093,kafka-2:9093",
        "root": "s3a://bucket/lake",
    }


def test_unset_variables_keep_the_embedded_default():
    loaded = _load()
    assert not any(loaded["env_backed"].values()), loaded
    assert loaded["values"] == {
        "master": "local[2]",
        "packages": "",
        "shuffle_partitions": "",
        "bootstrap_servers": None,
        "root": "",
    }
