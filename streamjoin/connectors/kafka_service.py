"""The local Kafka service: one embedded broker that the CLI, the Dagster code location, its sensors and tests share.

``streamjoin kafka start`` (``make kafka``) starts an :class:`~streamjoin.connectors.embedded_kafka.EmbeddedKafka`
detached on ``.local/kafka`` and writes its state file, ``.local/kafka/broker.json``::

    {"pid": 4242, "bootstrap_servers": "127.0.0.1:39117", "data_dir": "/…/.local/kafka",
     "log_path": "/…/.local/kafka/broker.log", "started_at": "2026-11-24T04:37:57+00:00"}

Runs never start a broker: :func:`resolve_bootstrap_servers` finds the cluster to use, an
explicit setting, else ``$KAFKA_BOOTSTRAP_SERVERS``, else the running local service. Status
codes follow the LSB init-script convention that ``systemctl status`` uses too
(:class:`ServiceStatus`).

Example:
    >>> state, started = start_service()     # doctest: +SKIP
    >>> resolve_bootstrap_servers()          # doctest: +SKIP
    '127.0.0.1:39117'
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from streamjoin.config import local_dir
from streamjoin.connectors.embedded_kafka import BOOTSTRAP_ENV, EmbeddedKafka
from streamjoin.errors import EmbeddedKafkaError

__all__ = [
    "STATE_FILE",
    "ServiceState",
    "ServiceStatus",
    "read_state",
    "resolve_bootstrap_servers",
    "service_status",
    "start_service",
    "stop_service",
]

#: The state file's name inside the broker's data folder.
STATE_FILE = "broker.json"

_STOP_TIMEOUT_S = 30.0
_HOW_TO_START = (
    f"start the local broker with `make kafka` (or `streamjoin kafka start`), "
    f"or set {BOOTSTRAP_ENV} to the bootstrap servers of a Kafka cluster"
)


@dataclass(frozen=True)
class ServiceState:
    """What ``broker.json`` records about the running local broker.

    Attributes:
        pid: process id of the broker JVM.
        bootstrap_servers: ``"127.0.0.1:PORT"``.
        data_dir: the broker's data folder (topics, config, log, this state file).
        log_path: the broker's log, ``<data_dir>/broker.log``.
        started_at: ISO-8601 UTC time of the start.
    """

    pid: int
    bootstrap_servers: str
    data_dir: str
    log_path: str
    started_at: str


class ServiceStatus(enum.IntEnum):
    """The health of the local broker, valued as the LSB init-script status codes (``systemctl status``)."""

    RUNNING = 0
    """The broker process is alive and answers a metadata request."""
    DEAD = 1
    """A state file is left, but its process is gone (a stale state file)."""
    STOPPED = 3
    """No state file: the service is not running."""
    NOT_ANSWERING = 4
    """The process is alive but answers no metadata request (starting, hung, or its port taken): unknown."""


def _data_dir(data_dir: Path | None) -> Path:
    return Path(data_dir) if data_dir is not None else local_dir("kafka")


def read_state(data_dir: Path | None = None) -> ServiceState | None:
    """The state file of the service on ``data_dir`` (default ``.local/kafka``), ``None`` when there is none."""
    path = _data_dir(data_dir) / STATE_FILE
    try:
        return ServiceState(**json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as e:
        raise EmbeddedKafkaError(f"{path} is not a broker state file ({e}): remove it, then `make kafka`") from e


def _alive(state: ServiceState) -> bool:
    """Whether ``state.pid`` is still the broker of ``state.data_dir`` (not a zombie, not a reused pid)."""
    proc = Path("/proc")
    if not proc.is_dir():  # no procfs (macOS): the pid alone
        with contextlib.suppress(ChildProcessError):
            os.waitpid(state.pid, os.WNOHANG)
        try:
            os.kill(state.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        command = (proc / str(state.pid) / "cmdline").read_bytes().split(b"\0")
        process_state = (proc / str(state.pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    config = str(EmbeddedKafka(Path(state.data_dir)).config_path).encode()
    return process_state != "Z" and b"kafka.Kafka" in command and config in command


def _answers(bootstrap: str, timeout_s: float) -> bool:
    """Whether the broker at ``bootstrap`` answers a metadata request (lists itself) within ``timeout_s``."""
    from confluent_kafka.admin import AdminClient

    host, port = bootstrap.rsplit(":", 1)
    try:
        # The port first: librdkafka would log a connection error per retry against a closed one.
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
        return bool(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=timeout_s).brokers)
    except Exception:  # noqa: BLE001 - any failure means: not answering
        return False


def service_status(
    data_dir: Path | None = None, *, timeout_s: float = 5.0
) -> tuple[ServiceStatus, ServiceState | None]:
    """The health check: is the broker process alive, and does it answer a metadata request?

    Returns:
        ``(status, state)``; ``state`` is ``None`` only with :attr:`ServiceStatus.STOPPED`.
    """
    state = read_state(data_dir)
    if state is None:
        return ServiceStatus.STOPPED, None
    if not _alive(state):
        return ServiceStatus.DEAD, state
    if not _answers(state.bootstrap_servers, timeout_s):
        return ServiceStatus.NOT_ANSWERING, state
    return ServiceStatus.RUNNING, state


@contextlib.contextmanager
def _lock(data_dir: Path) -> Iterator[None]:
    # Two `start`s at once would launch two brokers on one folder: the second waits and finds the first.
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / "broker.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def start_service(
    data_dir: Path | None = None, *, port: int | None = None, heap: str = "512m"
) -> tuple[ServiceState, bool]:
    """Start the local broker detached on ``data_dir`` (default ``.local/kafka``), unless it already runs.

    Idempotent: a running, answering broker is returned as it is; a stale state file (its process
    gone) is replaced. The broker keeps the folder's topics and records across restarts.

    Args:
        data_dir: the broker's data folder.
        port: its port on 127.0.0.1 for a new start; a free one when ``None``.
        heap: the JVM's maximum heap (``-Xmx``).

    Returns:
        ``(state, started)``: ``started`` is False when the broker was already running.

    Raises:
        EmbeddedKafkaError: the broker failed to start (as :meth:`EmbeddedKafka.start`), or a process of
            the state file is alive but does not answer (stop it first).
    """
    folder = _data_dir(data_dir).resolve()
    with _lock(folder):
        status, state = service_status(folder)
        if status == ServiceStatus.RUNNING:
            assert state is not None  # only a stopped broker has none
            return state, False
        if status == ServiceStatus.NOT_ANSWERING:
            assert state is not None
            raise EmbeddedKafkaError(
                f"the local Kafka broker (pid {state.pid}) runs on {folder} but answers no metadata request; "
                f"see {state.log_path}, or `streamjoin kafka stop` and start it again"
            )
        broker = EmbeddedKafka(folder, port=port, heap=heap, detached=True)
        bootstrap = broker.start()
        assert broker.pid is not None  # started
        state = ServiceState(
            pid=broker.pid,
            bootstrap_servers=bootstrap,
            data_dir=str(folder),
            log_path=str(broker.log_path),
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        # Written whole, then renamed: a reader never sees half a file.
        temporary = folder / f".{STATE_FILE}.tmp"
        temporary.write_text(json.dumps(asdict(state), indent=2) + "\n")
        temporary.replace(folder / STATE_FILE)
        return state, True


def _wait_gone(state: ServiceState, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(state):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def stop_service(
    data_dir: Path | None = None, *, timeout_s: float = _STOP_TIMEOUT_S
) -> tuple[ServiceState | None, bool]:
    """Stop the local broker: SIGTERM (Kafka's controlled shutdown), SIGKILL after ``timeout_s``; remove the state file.

    Returns:
        ``(state, clean)``: the state of the broker that was stopped (``None`` when none ran: a no-op)
        and whether it shut down on SIGTERM within ``timeout_s``.
    """
    folder = _data_dir(data_dir)
    state = read_state(folder)
    if state is None:
        return None, True
    clean = True
    if _alive(state):
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.pid, signal.SIGTERM)
        clean = _wait_gone(state, timeout_s)
        if not clean:
            with contextlib.suppress(ProcessLookupError):
                os.kill(state.pid, signal.SIGKILL)
            _wait_gone(state, 10.0)
    # The broker may be our own child (a test started it): reap it.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(state.pid, os.WNOHANG)
    (folder / STATE_FILE).unlink(missing_ok=True)
    return state, clean


def _loopback(servers: str) -> bool:
    hosts = {server.strip().rsplit(":", 1)[0].strip("[]") for server in servers.split(",")}
    return hosts <= {"127.0.0.1", "localhost", "::1"}


def resolve_bootstrap_servers(
    explicit: str | None = None, *, declared: str | None = None, data_dir: Path | None = None
) -> str:
    """The Kafka cluster a run uses: ``explicit``, else ``$KAFKA_BOOTSTRAP_SERVERS``, else the cluster the
    SQL declares, else the running local service.

    A declaration on this machine's loopback (``127.0.0.1``/``localhost``, as the demo's catalog has)
    names the local broker, wherever the service listens: it resolves to the running service, and to
    the error below when none runs (rather than a connection timeout). A declared remote cluster is
    used as declared, as Flink's Kafka connector uses ``properties.bootstrap.servers``.
    Nothing is started here: the local service is started by ``make kafka`` / ``streamjoin kafka start``.
    The process check is cheap (the state file and ``/proc``), so sensors may call this every tick.

    Args:
        explicit: a setting (a resource's ``bootstrap_servers``, ``--bootstrap-servers``).
        declared: servers the SQL tables declare (``properties.bootstrap.servers``).
        data_dir: the local service's folder (default ``.local/kafka``).

    Returns:
        Bootstrap servers, ``"host:port[,host:port...]"``.

    Raises:
        EmbeddedKafkaError: none of them is there; the message says how to start the local broker
            or name a cluster, and names a stale state file.
    """
    for servers in (explicit, os.environ.get(BOOTSTRAP_ENV)):
        if servers:
            return servers
    if declared and not _loopback(declared):
        return declared
    state = read_state(data_dir)
    if state is not None and _alive(state):
        return state.bootstrap_servers
    stale = (
        f" (the state file {_data_dir(data_dir) / STATE_FILE} names pid {state.pid}, which is no longer running)"
        if state is not None
        else ""
    )
    raise EmbeddedKafkaError(f"no Kafka cluster to use{stale}: {_HOW_TO_START}")
