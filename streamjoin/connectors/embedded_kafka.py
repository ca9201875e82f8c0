"""The embedded default's Kafka: a real single-node Apache Kafka broker in KRaft mode.

Apache Kafka's own broker (``kafka.Kafka``, from the jars ``make setup`` copies
into ``.local/jars/kafka-broker``) runs as a ``java`` child process: one node that
is both broker and controller (``process.roles=broker,controller``), listening on
127.0.0.1 only. Nothing is mocked: Spark's Kafka source, confluent_kafka clients
and Kafka's own tools talk to it as to any cluster.

A broker either lives as long as the Python process that started it (tests, the
benchmark) or, ``detached``, as the local service that ``streamjoin kafka start``
leaves running for the CLI, the Dagster code location and its sensors
(:mod:`streamjoin.connectors.kafka_service`). On a real deployment none of this
runs: ``KAFKA_BOOTSTRAP_SERVERS`` names the cluster.

Example:
    >>> with EmbeddedKafka(Path("/tmp/kafka")) as broker:           # doctest: +SKIP
    ...     ensure_topics(broker.bootstrap_servers, {"orders": 1})
"""

from __future__ import annotations

import atexit
import base64
import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO, Self

from streamjoin.config import java_executable, local_dir
from streamjoin.connectors.kafka_client import KafkaConnection, jaas_config
from streamjoin.errors import EmbeddedKafkaError, ValidationError

__all__ = ["BOOTSTRAP_ENV", "EmbeddedKafka", "EmbeddedKafkaError"]

#: Environment variable naming an existing cluster (``host:port[,host:port...]``).
BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"

_HOST = "127.0.0.1"
_NODE_ID = 1
_READY_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 30.0
_LOG_TAIL_LINES = 15
# Matches the layout in _LOG4J2_PROPERTIES: "[date] LEVEL message (logger)".
_LOG_ERROR_PATTERN = re.compile(r"^\[[^\]]+\] (ERROR|FATAL) ")

_HEAP_PATTERN = re.compile(r"^[1-9][0-9]*[kKmMgG]?$")
# User names and passwords go unquoted into server.properties and a JAAS line.
_SASL_WORD = re.compile(r"[A-Za-z0-9_.@+-]+")

# As Kafka's own kafka-run-class.sh starts the broker.
_JVM_OPTIONS = [
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]

_LOG4J2_PROPERTIES = """\
status = warn
# Log4j's own shutdown hook would race Kafka's and drop the controlled-shutdown lines.
shutdownHook = disable
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
# Every client connection's config dump would drown the broker's own lines.
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
"""

# Broker processes still running, killed when the interpreter exits normally
# (PR_SET_PDEATHSIG covers the other ways the parent can die, see _preexec).
_LIVE: set[subprocess.Popen] = set()
_LIVE_LOCK = threading.Lock()


def _kill_live_brokers() -> None:
    with _LIVE_LOCK:
        processes = list(_LIVE)
    for process in processes:
        _terminate(process, timeout_s=10.0)


atexit.register(_kill_live_brokers)


def _terminate(process: subprocess.Popen, *, timeout_s: float) -> None:
    """SIGTERM (Kafka's controlled shutdown), then SIGKILL if it takes longer than ``timeout_s``."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    with _LIVE_LOCK:
        _LIVE.discard(process)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_HOST, 0))
        return sock.getsockname()[1]


def _new_cluster_id() -> str:
    """A Kafka cluster id: a random UUID as unpadded URL-safe base64 (22 chars), like ``Uuid.randomUuid``."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        # Kafka's Uuid avoids a leading '-' too: a command line would read it as an option.
        if not text.startswith("-"):
            return text


def _make_preexec(parent_pid: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes Linux SIGKILL the broker when its parent dies.

    The death signal fires when the *thread* that forked the child exits, so it
    is only armed when the broker is started from the main thread; brokers
    started from other threads rely on the ``atexit`` hook alone.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1

    def preexec() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl: then nobody would signal us.
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


def _java() -> str:
    java = java_executable()
    if java is None:
        raise EmbeddedKafkaError("no 'java' on PATH and no JAVA_HOME: the embedded Kafka broker needs a JDK 17+")
    return java


class EmbeddedKafka:
    """A single-node Apache Kafka broker (KRaft, broker and controller in one JVM) on 127.0.0.1.

    Its data (``logs/``, ``server.properties``, ``log4j2.properties``, ``broker.log``)
    lives in ``data_dir``. The storage is formatted (``kafka.tools.StorageTool format``)
    only when ``data_dir`` holds no ``meta.properties`` yet, so a broker restarted on
    the same ``data_dir`` keeps its topics and records, even on other ports: the
    controller quorum is the static ``controller.quorum.voters`` of the current config.

    Settings for one node on a small machine: no automatic topic creation; topics
    get 1 partition and replication factor 1 by default (internal topics too),
    ``group.initial.rebalance.delay.ms=0``, 8 MiB segments and at most 1 GiB kept per partition. Retention is
    by size only: records are often stamped with event times years in the past, which time-based
    retention would delete at once.

    Unless ``detached``, the broker never outlives the Python process that started
    it: it is killed at interpreter exit, and on Linux (started from the main
    thread) also when that process dies abruptly. A detached broker runs on in its
    own session after that process exits; whoever knows its pid stops it with
    SIGTERM (:func:`streamjoin.connectors.kafka_service.stop_service`).

    Args:
        data_dir: folder for the broker's data, config and log; created if missing.
        port: broker (PLAINTEXT) port on 127.0.0.1; a free port when ``None``. The
            controller port is always a free one.
        heap: JVM maximum heap, as for ``-Xmx`` (``"512m"``, ``"1g"``).
        detached: let the broker outlive this process (the local service).
        sasl_users: user → password: the client listener is then ``SASL_PLAINTEXT`` with mechanism
            ``PLAIN`` and accepts these users only (Kafka's ``PlainLoginModule`` ``user_<name>``
            options); the broker logs in to itself as the first. ``None``: ``PLAINTEXT``, no login.

    Raises:
        ValidationError: ``port`` outside 1..65535, ``heap`` not like ``512m``, or ``sasl_users`` empty or with
            other characters than letters, digits and ``_.@+-``.

    Example:
        >>> with EmbeddedKafka(Path("/tmp/kafka")) as broker:   # doctest: +SKIP
        ...     broker.bootstrap_servers
        '127.0.0.1:39117'
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        heap: str = "512m",
        detached: bool = False,
        sasl_users: Mapping[str, str] | None = None,
    ) -> None:
        if port is not None and not (isinstance(port, int) and 1 <= port <= 65535):
            raise ValidationError(f"EmbeddedKafka port must be None (a free port) or an int in 1..65535, got {port!r}")
        if not isinstance(heap, str) or not _HEAP_PATTERN.match(heap):
            raise ValidationError(f"EmbeddedKafka heap must be a JVM size like '512m' or '1g', got {heap!r}")
        if sasl_users is not None and not (
            sasl_users and all(_SASL_WORD.fullmatch(f"{u}{p}") for u, p in sasl_users.items())
        ):
            raise ValidationError(
                "EmbeddedKafka sasl_users must map at least one user to a password, both of letters, "
                "digits and _.@+- (or be None: no SASL)"
            )
        self._data_dir = Path(data_dir)
        self._requested_port = port
        self._heap = heap
        self._detached = detached
        self._sasl_users = dict(sasl_users) if sasl_users is not None else None
        self._process: subprocess.Popen | None = None
        self._log_file: BinaryIO | None = None
        self._bootstrap: str | None = None

    @property
    def data_dir(self) -> Path:
        """The folder holding the broker's data, config and ``broker.log``."""
        return self._data_dir

    @property
    def config_path(self) -> Path:
        """The broker's ``server.properties``, written at each start; its command line names it."""
        return self._data_dir / "server.properties"

    @property
    def log_path(self) -> Path:
        """The broker's own log (stdout and stderr of the JVM), rewritten at each start."""
        return self._data_dir / "broker.log"

    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:PORT"`` of the running broker.

        Raises:
            EmbeddedKafkaError: the broker is not running.
        """
        if self._bootstrap is None or not self.is_running():
            raise EmbeddedKafkaError(f"the embedded Kafka broker on {self._data_dir} is not running: call start()")
        return self._bootstrap

    @property
    def connection(self) -> KafkaConnection:
        """The running broker as its clients reach it: with ``sasl_users``, logged in as the first user.

        Raises:
            EmbeddedKafkaError: the broker is not running.
        """
        if self._sasl_users is None:
            return KafkaConnection(self.bootstrap_servers)
        user, password = next(iter(self._sasl_users.items()))
        return KafkaConnection(
            self.bootstrap_servers,
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": jaas_config("PLAIN", user, password),
            },
        )

    @property
    def pid(self) -> int | None:
        """The broker JVM's process id while started, else ``None``."""
        return self._process.pid if self._process is not None else None

    def is_running(self) -> bool:
        """Whether the broker JVM is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> str:
        """Format the storage if new, start the broker and wait until it serves metadata.

        Ready means: an AdminClient lists topics and sees the broker (registered and
        unfenced), within 60 s. Calling ``start`` on a running broker returns its
        bootstrap servers.

        Returns:
            The bootstrap servers, ``"127.0.0.1:PORT"``.

        Raises:
            EmbeddedKafkaError: the jars folder is empty (run ``make setup``), no
                ``java``, formatting failed, or the broker exited or was not ready in
                time; the message gives the first error logged in ``broker.log``
                and its last lines.
        """
        if self.is_running():
            return self.bootstrap_servers
        self.stop()  # a broker that died on its own leaves its log file open
        classpath = self._classpath()
        java = _java()
        self._data_dir.mkdir(parents=True, exist_ok=True)
        port = self._requested_port or _free_port()
        controller_port = _free_port()
        while controller_port == port:
            controller_port = _free_port()
        config = self._write_config(port, controller_port)
        log4j = self._data_dir / "log4j2.properties"
        log4j.write_text(_LOG4J2_PROPERTIES)
        jvm = [java, f"-Xmx{self._heap}", *_JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath]

        self._log_file = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        try:
            if not (self._log_dir / "meta.properties").exists():
                self._format(jvm, config)
            self._process = subprocess.Popen(
                [*jvm, "kafka.Kafka", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                # Its own process group: Ctrl-C reaches Python, which stops the broker
                # after whatever reads from it.
                start_new_session=True,
                # preexec_fn is thread-safe here: it only calls prctl, and is armed from the main thread only.
                preexec_fn=None if self._detached else _make_preexec(os.getpid()),  # noqa: PLW1509
            )
            if not self._detached:
                with _LIVE_LOCK:
                    _LIVE.add(self._process)
            self._bootstrap = f"{_HOST}:{port}"
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        if self._detached:
            # The JVM writes the log through its own descriptor; ours would only leak.
            self._log_file.close()
            self._log_file = None
        return self._bootstrap

    def stop(self) -> None:
        """Stop the broker: SIGTERM (controlled shutdown), wait up to 30 s, then SIGKILL.

        Safe to call any number of times, also when never started.
        """
        process, self._process = self._process, None
        if process is not None:
            _terminate(process, timeout_s=_STOP_TIMEOUT_S)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        self._bootstrap = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self._bootstrap if self.is_running() else "stopped"
        return f"EmbeddedKafka(data_dir={str(self._data_dir)!r}, {state})"

    @property
    def _log_dir(self) -> Path:
        return self._data_dir / "logs"

    def _classpath(self) -> str:
        jars_dir = local_dir("jars", "kafka-broker")
        if not any(jars_dir.glob("*.jar")):
            raise EmbeddedKafkaError(
                f"no Kafka broker jars in {jars_dir}: run `make setup` (it copies Apache Kafka's jars "
                f"there with mvn -f jvm/kafka-broker/pom.xml dependency:copy-dependencies), "
                f"or set {BOOTSTRAP_ENV} to use an existing Kafka cluster"
            )
        return str(jars_dir / "*")

    def _write_config(self, port: int, controller_port: int) -> Path:
        protocol = "PLAINTEXT" if self._sasl_users is None else "SASL_PLAINTEXT"
        settings = {
            "process.roles": "broker,controller",
            "node.id": _NODE_ID,
            "controller.quorum.voters": f"{_NODE_ID}@{_HOST}:{controller_port}",
            "listeners": f"{protocol}://{_HOST}:{port},CONTROLLER://{_HOST}:{controller_port}",
            "advertised.listeners": f"{protocol}://{_HOST}:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": protocol,
            "listener.security.protocol.map": f"{protocol}:{protocol},CONTROLLER:PLAINTEXT",
            **self._sasl_settings(),
            "log.dirs": self._log_dir,
            # Topics come from ensure_topics with the partition count a pipeline asks
            # for; a misspelt topic name must fail, not appear with 1 partition.
            "auto.create.topics.enable": "false",
            "num.partitions": 1,
            "default.replication.factor": 1,
            "min.insync.replicas": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "log.segment.bytes": 8 * 1024 * 1024,
            "log.retention.ms": -1,
            "log.retention.bytes": 1024 * 1024 * 1024,
            "num.network.threads": 2,
            "num.io.threads": 2,
            "num.recovery.threads.per.data.dir": 1,
        }
        path = self.config_path
        # The file may hold the users' passwords: readable by its owner only.
        path.touch(mode=0o600)
        path.chmod(0o600)
        path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        return path

    def _sasl_settings(self) -> dict[str, str]:
        """The SASL/PLAIN settings of the client listener.

        That is Kafka's ``listener.name.<listener>.plain.sasl.jaas.config``.
        """
        if self._sasl_users is None:
            return {}
        user, password = next(iter(self._sasl_users.items()))
        users = " ".join(f'user_{name}="{secret}"' for name, secret in self._sasl_users.items())
        return {
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas_config("PLAIN", user, password).removesuffix(
                ";"
            )
            + f" {users};",
        }

    def _format(self, jvm: list[str], config: Path) -> None:
        command = [*jvm, "kafka.tools.StorageTool", "format", "-t", _new_cluster_id(), "-c", str(config)]
        result = subprocess.run(
            command, stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT, check=False
        )
        if result.returncode != 0:
            raise EmbeddedKafkaError(
                f"formatting Kafka storage in {self._log_dir} failed (exit code {result.returncode})"
                f"{self._log_excerpt()}"
            )

    def _wait_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + _READY_TIMEOUT_S
        assert self._bootstrap is not None  # set by start() before it waits
        host, port = self._bootstrap.rsplit(":", 1)
        # Wait for the listener first: librdkafka would print a connection error per retry.
        while not self._accepts_connections(host, int(port)):
            self._check_alive()
            if time.monotonic() > deadline:
                self._raise_not_ready()
            time.sleep(0.2)
        admin = AdminClient({**self.connection.client_config()})
        while True:
            self._check_alive()
            try:
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:  # noqa: BLE001, S110 - any metadata failure means: not ready yet
                pass
            if time.monotonic() > deadline:
                self._raise_not_ready()
            time.sleep(0.2)

    @staticmethod
    def _accepts_connections(host: str, port: int) -> bool:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            return False

    def _check_alive(self) -> None:
        if self._process is not None and self._process.poll() is not None:
            raise EmbeddedKafkaError(
                f"the embedded Kafka broker exited with code {self._process.returncode} while starting"
                f"{self._log_excerpt()}"
            )

    def _raise_not_ready(self) -> None:
        raise EmbeddedKafkaError(
            f"the embedded Kafka broker at {self._bootstrap} was not ready within {_READY_TIMEOUT_S:.0f} s"
            f"{self._log_excerpt()}"
        )

    def _log_excerpt(self) -> str:
        """The first ERROR/FATAL entry of ``broker.log`` (its stack trace without frames), then the last lines.

        The cause of a failed start is usually logged well before the end: the
        shutdown that follows it writes dozens of lines.
        """
        if self._log_file is not None:
            self._log_file.flush()
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        first_error: list[str] = []
        for index, line in enumerate(lines):
            if _LOG_ERROR_PATTERN.match(line):
                first_error.append(line)
                for cause in lines[index + 1 :]:
                    if cause.startswith("["):  # the next log entry
                        break
                    if not cause.lstrip().startswith(("at ", "...")):
                        first_error.append(cause)
                break
        text = f"; see {self.log_path}"
        if first_error:
            text += "\nfirst error logged:\n" + "\n".join(first_error)
        return text + f"\nlast {_LOG_TAIL_LINES} lines:\n" + "\n".join(lines[-_LOG_TAIL_LINES:])
