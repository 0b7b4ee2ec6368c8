"""Embedded single-node Apache Kafka for gangstate's demo, tests and CI (not for production).

Where this sits: gangstate's streams run on Kafka. Users with Docker get a broker from
``docker-compose.yml``; everywhere else (this repo's tests, CI, ``gangstate`` demo commands) the
default broker is the one this module starts: a real Apache Kafka 4.x (KRaft, one combined
broker+controller node, replication factor 1) run from Maven Central jars with the local ``java``.
It is a throwaway by default: its data lives in a scratch directory wiped at every start (or kept
and reused with ``keep_data``, ``run --data-dir DIR``), it listens on 127.0.0.1 only, and it is
sized for a laptop (512 MiB heap). Do not point anything that matters at it.

The module uses the Python standard library only: the ``gangstate`` CLI imports it as
``deploy.kafka.broker``, and it also runs as a script::

    python deploy/kafka/broker.py fetch              # resolve the jars once (needs mvn)
    python deploy/kafka/broker.py run [--port N]     # start, print KAFKA_BOOTSTRAP_SERVERS=..., wait
    python deploy/kafka/broker.py run --data-dir DIR # the same, on the data kept in DIR

Pieces beside this file: ``pom.xml`` names the jars (``kafka_2.13`` plus a log4j2 binding),
``log4j2.properties`` sends the broker's log to ``<workdir>/logs/server.log``.

Public API: :func:`fetch`, :class:`LocalKafka`, :func:`metadata`, :class:`BrokerError`,
:data:`KAFKA_VERSION`; helpers the control plane script shares: :func:`cache_root`,
:func:`file_lock`, :func:`free_ports`, :func:`tail`, :func:`file_tail`.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import hashlib
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
LOG4J2_CONFIG = HERE / "log4j2.properties"

_MARKER = ".gangstate-fetch-complete"
_HOST = "127.0.0.1"


class BrokerError(RuntimeError):
    """The local Kafka could not be fetched, formatted, started or reached.

    The message carries the reason and, where there is one, the tail of the relevant output
    (mvn's output for :func:`fetch`; the broker's console output and ``server.log`` for
    :meth:`LocalKafka.start`).
    """


def _read_kafka_version(pom: Path = POM) -> str:
    """Return the ``kafka.version`` property of ``pom`` (e.g. ``"4.1.1"``).

    Raises :class:`BrokerError` when the pom is missing or names no version.
    """
    try:
        root = ET.parse(pom).getroot()
    except (OSError, ET.ParseError) as exc:
        raise BrokerError(f"cannot read {pom}: {exc}") from exc
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    node = root.find("m:properties/m:kafka.version", ns)
    if node is None or not (node.text or "").strip():
        raise BrokerError(f"{pom} has no <kafka.version> property")
    return node.text.strip()


#: The Apache Kafka version the pom beside this file pins (read from it at import time).
KAFKA_VERSION: str = _read_kafka_version()


def tail(text: str, lines: int = 40) -> str:
    """Return the last ``lines`` lines of ``text``."""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def file_tail(path: Path, lines: int = 40) -> str:
    """Return the last ``lines`` lines of the file at ``path`` ('' when it is missing)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return tail(data, lines)


def cache_root() -> Path:
    """Return the root of gangstate's download cache.

    ``$GANGSTATE_CACHE`` when set, else ``~/.cache/gangstate``. The jars of Kafka ``<version>``
    live in ``<root>/kafka-<version>/lib``.
    """
    env = os.environ.get("GANGSTATE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "gangstate"


def _pom_digest() -> str:
    """Return a digest of the pom, so that editing it (new versions) forces a new fetch."""
    return hashlib.sha256(POM.read_bytes()).hexdigest()


@contextlib.contextmanager
def file_lock(path: Path, on_wait: Callable[[], object] | None = None) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path`` (POSIX ``flock``; a no-op elsewhere) for the
    block; ``on_wait`` is called once when another holder has it, before waiting. Also used
    by ``deploy/cluster/controlplane.py``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            yield
            return
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _is_fetched(lib: Path, digest: str) -> bool:
    """True when ``lib`` holds a complete copy made from a pom with this ``digest``."""
    try:
        return (lib / _MARKER).read_text().strip() == digest
    except OSError:
        return False


def fetch(cache_dir: Path | None = None, *, timeout: float = 900.0) -> Path:
    """Make sure the Kafka jars are on disk and return the directory holding them.

    Shapes: ``cache_dir`` is the cache root (default :func:`cache_root`, i.e. ``$GANGSTATE_CACHE``
    or ``~/.cache/gangstate``); the return value is ``<cache_dir>/kafka-<KAFKA_VERSION>/lib``, a
    directory of jars to put on the classpath as ``<lib>/*``. ``timeout`` is in seconds and bounds
    the one ``mvn`` run.

    The first call runs ``mvn dependency:copy-dependencies`` on the ``pom.xml`` beside this file
    (Maven Central must be reachable, or the jars already in ``~/.m2``), copying into a temporary
    directory that is renamed into place with a marker file once complete. Later calls see the
    marker and return at once; a changed pom triggers a new copy. Concurrent callers (several
    processes) serialise on a lock file, and only one of them runs mvn.

    Raises :class:`BrokerError` when ``mvn`` is not installed, fails (with the tail of its
    output), or times out.
    """
    root = Path(cache_dir).expanduser() if cache_dir is not None else cache_root()
    base = root / f"kafka-{KAFKA_VERSION}"
    lib = base / "lib"
    digest = _pom_digest()
    if _is_fetched(lib, digest):
        return lib
    with file_lock(base / ".lock"):
        if _is_fetched(lib, digest):  # another process finished while we waited
            return lib
        mvn = shutil.which("mvn")
        if mvn is None:
            raise BrokerError(
                "mvn (Apache Maven 3.x) is not on PATH; it is needed once to fetch the Kafka "
                f"{KAFKA_VERSION} jars into {lib}"
            )
        staging = Path(tempfile.mkdtemp(prefix="lib.tmp-", dir=base))
        cmd = [
            mvn, "-B", "-q", "-f", str(POM),
            "dependency:copy-dependencies", f"-DoutputDirectory={staging}",
        ]
        try:
            try:
                proc = subprocess.run(
                    cmd, cwd=str(base), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True, timeout=timeout,
                )
            except subprocess.TimeoutExpired as exc:
                out = exc.output if isinstance(exc.output, str) else (exc.output or b"").decode()
                raise BrokerError(
                    f"mvn did not finish fetching Kafka jars within {timeout:.0f}s:\n{tail(out)}"
                ) from exc
            if proc.returncode != 0:
                raise BrokerError(
                    f"mvn failed (exit {proc.returncode}) fetching Kafka {KAFKA_VERSION} jars:\n"
                    f"{tail(proc.stdout)}"
                )
            if not any(staging.glob("kafka_2.13-*.jar")):
                raise BrokerError(f"mvn succeeded but copied no kafka_2.13 jar:\n{tail(proc.stdout)}")
            (staging / _MARKER).write_text(digest + "\n")
            if lib.exists():
                shutil.rmtree(lib)
            staging.rename(lib)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return lib


def free_ports(count: int) -> list[int]:
    """Return ``count`` distinct TCP ports on 127.0.0.1 that were free a moment ago (also used
    by ``deploy/cluster/controlplane.py`` and the local chain).

    All sockets are held open until every port is chosen, so the ports differ from each other.
    """
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((_HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# --- a tiny Kafka wire-protocol client (ApiVersions v0 and Metadata v4), for readiness -------

_API_METADATA = 3
_API_VERSIONS = 18


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    """Read exactly ``n`` bytes from ``sock``; raises ``ConnectionError`` on EOF."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def _request(sock: socket.socket, api_key: int, version: int, corr: int, body: bytes) -> bytes:
    """Send one request with a v1 header (non-flexible) and return the response body.

    Both requests used here (ApiVersions v0, Metadata v4) have v0 response headers: just the
    correlation id, which is checked.
    """
    client_id = b"gangstate-probe"
    header = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id
    payload = header + body
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    data = _recv_exact(sock, size)
    (got,) = struct.unpack_from(">i", data, 0)
    if got != corr:
        raise ConnectionError(f"correlation id mismatch: sent {corr}, got {got}")
    return data[4:]


class _Reader:
    """Cursor over a big-endian Kafka response body (non-flexible encodings only)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def int16(self) -> int:
        return self._take(">h")

    def int32(self) -> int:
        return self._take(">i")

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        raw = self.data[self.pos:self.pos + n]
        self.pos += n
        return raw.decode("utf-8")


def metadata(bootstrap: str, timeout: float = 5.0) -> dict:
    """Ask a Kafka broker for cluster metadata over a raw socket (stdlib only).

    ``bootstrap`` is ``"host:port"``; ``timeout`` is in seconds for the connection and each read.
    Sends ApiVersions v0, then Metadata v4 for no topics, and returns::

        {"cluster_id": str | None, "controller_id": int,
         "brokers": [{"node_id": int, "host": str, "port": int}, ...],
         "metadata_versions": (min: int, max: int)}

    ``brokers`` lists the brokers the cluster's metadata knows as alive (unfenced), so a broker
    appearing there is ready to serve clients. Raises ``OSError`` (including ``ConnectionError``
    and ``socket.timeout``) when the broker cannot be reached or hangs up, and
    :class:`BrokerError` when it answers with an error or does not support Metadata v4.
    """
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.settimeout(timeout)
        r = _Reader(_request(sock, _API_VERSIONS, 0, 1, b""))
        err = r.int16()
        if err != 0:
            raise BrokerError(f"ApiVersions answered error code {err}")
        versions = {}
        for _ in range(r.int32()):
            key, lo, hi = r.int16(), r.int16(), r.int16()
            versions[key] = (lo, hi)
        lo, hi = versions.get(_API_METADATA, (1, 0))
        if not lo <= 4 <= hi:
            raise BrokerError(f"broker does not support Metadata v4 (supports v{lo}..v{hi})")
        # Metadata v4 body: topics = empty array (no topics), allow_auto_topic_creation = false.
        r = _Reader(_request(sock, _API_METADATA, 4, 2, struct.pack(">ib", 0, 0)))
        r.int32()  # throttle_time_ms
        brokers = []
        for _ in range(r.int32()):
            node_id, bhost, bport = r.int32(), r.string(), r.int32()
            r.string()  # rack
            brokers.append({"node_id": node_id, "host": bhost, "port": bport})
        cluster_id = r.string()
        controller_id = r.int32()
    return {
        "cluster_id": cluster_id,
        "controller_id": controller_id,
        "brokers": brokers,
        "metadata_versions": (lo, hi),
    }


# --- the broker process ----------------------------------------------------------------------

_RUNNING: "weakref.WeakSet[LocalKafka]" = weakref.WeakSet()

# Lines Kafka logs when its startup failed for good (kafka.Kafka$, BrokerServer, ControllerServer).
_FATAL_MARKERS = ("Exiting Kafka due to fatal exception", "Fatal error during")


def _stop_all_at_exit() -> None:
    """Stop brokers this interpreter started and did not stop (atexit hook)."""
    for kafka in list(_RUNNING):
        with contextlib.suppress(Exception):
            kafka.stop(timeout=10)


atexit.register(_stop_all_at_exit)


def _read_properties(path: Path) -> dict[str, str]:
    """``key=value`` lines of a Java properties file (comments and blank lines skipped); ``{}``
    when it is missing."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def _java() -> str:
    """Return the java executable (``$JAVA_HOME/bin/java`` or ``java`` on PATH).

    Raises :class:`BrokerError` when there is none. Kafka 4 needs Java 17 or newer.
    """
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise BrokerError("java is not on PATH (Kafka 4 needs Java 17+); set JAVA_HOME or install it")
    return found


class LocalKafka:
    """One throwaway single-node Kafka (KRaft, combined broker+controller) on 127.0.0.1.

    ``LocalKafka(workdir=None, port=None, controller_port=None, heap="512m")``:

    - ``workdir``: scratch directory for ``server.properties``, ``data/`` (the log dirs) and
      ``logs/`` (``server.log``, ``kafka.out``). ``None`` makes a temporary directory that
      :meth:`stop` removes; a given directory is kept, but its ``data/`` and ``logs/`` are wiped
      at each :meth:`start` (every start is a freshly formatted, empty cluster) unless
      ``keep_data``.
    - ``keep_data`` (keyword only; needs ``workdir``): keep ``data/`` across starts, so the
      broker restarts on its topics, records and committed offsets. The storage is formatted
      (with a new cluster id, and ``scram``) only when ``data/`` holds no formatted storage
      (``meta.properties``); otherwise the cluster id is read from it. Ports not given are
      those of the previous start (read from ``server.properties``), so clients keep their
      bootstrap address (given ones may differ: a restart on new client and controller ports
      serves the same data); :class:`BrokerError` says when one is busy. ``logs/`` is still
      rewritten at each start.
    - ``port`` / ``controller_port``: TCP ports for clients and for the KRaft controller. ``None``
      picks free ports (bind to port 0), so several instances on one machine never collide.
    - ``heap``: the JVM's ``-Xmx`` value, e.g. ``"512m"``.
    - ``properties``: extra or overriding broker settings (``{"name": "value"}``), keyword only.
    - ``listeners``: extra client listeners, keyword only, each named by its security protocol
      (``"SSL"``, ``"SASL_SSL"``, ``"SASL_PLAINTEXT"``) and given a free port of its own
      (:meth:`address`); the PLAINTEXT listener stays (the readiness probe and inter-broker
      traffic use it). Their keystores and JAAS settings come through ``properties``
      (``ssl.keystore.*``, ``sasl.enabled.mechanisms``,
      ``listener.name.<listener>.<mechanism>.sasl.jaas.config``).
    - ``scram``: SCRAM credentials written into the new cluster's metadata when it is formatted
      (``kafka-storage format --add-scram``), e.g.
      ``"SCRAM-SHA-512=[name=alice,password=alice-secret]"``, keyword only.

    Use :meth:`start` / :meth:`stop`, or ``with LocalKafka() as kafka: kafka.bootstrap``.
    """

    def __init__(
        self,
        workdir: Path | None = None,
        port: int | None = None,
        controller_port: int | None = None,
        heap: str = "512m",
        *,
        properties: Mapping[str, str] | None = None,
        listeners: Sequence[str] = (),
        scram: Sequence[str] = (),
        keep_data: bool = False,
    ) -> None:
        if keep_data and workdir is None:
            raise BrokerError("keep_data needs a workdir: a temporary one is removed at stop()")
        self.keep_data = keep_data
        self._given_workdir = Path(workdir).resolve() if workdir is not None else None
        self._given_port = port
        self._given_controller_port = controller_port
        self.heap = heap
        self.extra_properties = dict(properties or {})
        unknown = set(listeners) - {"SSL", "SASL_SSL", "SASL_PLAINTEXT"}
        if unknown:
            raise BrokerError(f"unknown listener(s) {sorted(unknown)}: use SSL, SASL_SSL or "
                              "SASL_PLAINTEXT")
        self.extra_listeners = list(dict.fromkeys(listeners))
        self.listener_ports: dict[str, int] = {}
        self.scram = list(scram)
        self.workdir: Path | None = None
        self.port: int | None = None
        self.controller_port: int | None = None
        self.cluster_id: str | None = None
        self._proc: subprocess.Popen | None = None
        self._out = None
        self._made_workdir = False
        self._lock = threading.Lock()

    # -- properties --------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """The bootstrap string ``"127.0.0.1:<port>"`` of the running broker.

        Raises :class:`BrokerError` when the broker has not been started.
        """
        if self.port is None or self._proc is None:
            raise BrokerError("LocalKafka is not started")
        return f"{_HOST}:{self.port}"

    def address(self, listener: str) -> str:
        """``"127.0.0.1:<port>"`` of the extra ``listener`` (``"SSL"``, ``"SASL_SSL"``,
        ``"SASL_PLAINTEXT"``) of the running broker. Raises :class:`BrokerError` when the broker
        is not started or has no such listener."""
        if self._proc is None or listener not in self.listener_ports:
            raise BrokerError(f"LocalKafka has no running {listener} listener")
        return f"{_HOST}:{self.listener_ports[listener]}"

    @property
    def pid(self) -> int | None:
        """Process id of the broker JVM (also its process group id), or None when not running."""
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path | None:
        """Path of the broker's ``server.log`` (None before the first start)."""
        return self.workdir / "logs" / "server.log" if self.workdir else None

    def is_running(self) -> bool:
        """True while the broker JVM this object started is alive."""
        return self._proc is not None and self._proc.poll() is None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> str:
        """Start the broker and wait until it serves metadata; return ``"127.0.0.1:<port>"``.

        Fetches the jars first if needed (:func:`fetch`, not counted in ``timeout``). Then writes
        ``<workdir>/server.properties``, formats ``<workdir>/data`` with a new cluster id
        (``kafka.tools.StorageTool``, one JVM per call), starts ``kafka.Kafka`` in its own process
        group, and polls the client port with a Metadata request (:func:`metadata`) until the
        broker lists itself as alive. ``timeout`` (seconds) bounds formatting plus startup.
        When the ports were picked automatically and one was taken in the meantime, it retries
        with new ports (up to 3 attempts).

        Calling start() on a running instance returns its bootstrap string.
        Raises :class:`BrokerError` (with the tail of the broker's output and ``server.log``)
        when java is missing, formatting fails, the broker exits, or it is not ready within
        ``timeout``; the half-started process is stopped first.
        """
        with self._lock:
            if self.is_running():
                return self.bootstrap
            self._kill(timeout=5.0)  # reap a broker that died on its own, close its output file
            lib = fetch()
            self._prepare_workdir()
            kept = self._kept_ports()
            auto_ports = ((self._given_port or kept.get("PLAINTEXT")) is None
                          or (self._given_controller_port or kept.get("CONTROLLER")) is None)
            attempts = 3 if auto_ports or self.extra_listeners else 1
            deadline = time.monotonic() + timeout
            for attempt in range(1, attempts + 1):
                self._choose_ports()
                try:
                    self._launch(lib, deadline)
                    self._wait_ready(deadline, timeout)
                except BrokerError:
                    self._kill(timeout=5.0)
                    picked = {p for p, given in ((self.port, self._given_port),
                                                 (self.controller_port, self._given_controller_port))
                              if not given} | set(self.listener_ports.values())
                    if attempt < attempts and self._ports_failed_to_bind() & picked:
                        continue  # a port we picked was taken since we probed it: pick again
                    self._cleanup_workdir()
                    self.port = self.controller_port = None
                    self.listener_ports = {}
                    raise
                _RUNNING.add(self)
                return self.bootstrap
            raise AssertionError("unreachable")  # pragma: no cover

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the broker and free its ports; remove the workdir if this object created it.

        Sends SIGTERM to the broker's process group (Kafka shuts down cleanly, typically in a
        couple of seconds), waits up to ``timeout`` seconds, then sends SIGKILL. Safe to call
        twice or on an instance that never started. Raises nothing for an already dead process.
        """
        with self._lock:
            self._kill(timeout)
            _RUNNING.discard(self)
            self._cleanup_workdir()
            self.port = self.controller_port = None
            self.listener_ports = {}

    def __enter__(self) -> "LocalKafka":
        """Start (if not running) and return self."""
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Stop the broker."""
        self.stop()

    def __repr__(self) -> str:
        state = f"running at {self.bootstrap}" if self.is_running() else "stopped"
        return f"<LocalKafka {state} workdir={self.workdir}>"

    # -- internals ---------------------------------------------------------------------------

    def _prepare_workdir(self) -> None:
        """Create the workdir (temporary unless given); _launch empties its data/ and logs/."""
        if self._given_workdir is not None:
            self.workdir = self._given_workdir
            self.workdir.mkdir(parents=True, exist_ok=True)
            self._made_workdir = False
        else:
            self.workdir = Path(tempfile.mkdtemp(prefix="gangstate-kafka-"))
            self._made_workdir = True

    def _cleanup_workdir(self) -> None:
        """Remove the workdir when this object created it."""
        if self._made_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self._made_workdir = False

    def _kept_ports(self) -> dict[str, int]:
        """``{"PLAINTEXT": port, "CONTROLLER": port}`` of the previous start on kept data (from
        its ``server.properties``); empty unless ``keep_data`` and ``data/`` is formatted."""
        assert self.workdir is not None
        if not self.keep_data or not (self.workdir / "data" / "meta.properties").exists():
            return {}
        props = _read_properties(self.workdir / "server.properties")
        return {name: int(port) for name, port in
                re.findall(r"(PLAINTEXT|CONTROLLER)://[^,:]+:(\d+)", props.get("listeners", ""))}

    def _choose_ports(self) -> None:
        """Fill in the client and controller ports (given ones, else those of the previous start
        on kept data, else free ones)."""
        kept = self._kept_ports()
        free = [p for p in free_ports(4 + len(self.extra_listeners)) if p not in kept.values()]
        self.port = self._given_port or kept.get("PLAINTEXT") or free[0]
        self.controller_port = self._given_controller_port or kept.get("CONTROLLER") or next(
            p for p in free if p != self.port
        )
        if self.port == self.controller_port:
            raise BrokerError(f"port and controller_port are both {self.port}")
        spare = [p for p in free if p not in (self.port, self.controller_port)]
        self.listener_ports = dict(zip(self.extra_listeners, spare))

    def server_properties(self) -> dict[str, str]:
        """Return the broker settings :meth:`start` writes (after ports and workdir are set).

        A combined KRaft node (``node.id=1``), listeners on 127.0.0.1 only, every internal topic
        at replication factor 1, 8 partitions for auto-created topics, no initial rebalance
        delay; then ``properties`` given to the constructor override or add.
        """
        assert self.workdir is not None and self.port and self.controller_port
        extra = [f"{name}://{_HOST}:{port}" for name, port in self.listener_ports.items()]
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"{_HOST}:{self.controller_port}",
            "listeners": ",".join([f"PLAINTEXT://{_HOST}:{self.port}",
                                   f"CONTROLLER://{_HOST}:{self.controller_port}", *extra]),
            "advertised.listeners": ",".join([f"PLAINTEXT://{_HOST}:{self.port}", *extra]),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": ",".join(
                ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT",
                 *(f"{name}:{name}" for name in self.listener_ports)]),
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "8",
            "default.replication.factor": "1",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            # Fewer partitions than the default 50/50: the first consumer group and the first
            # transactional producer come up faster, which is all tests and demos need.
            "offsets.topic.num.partitions": "10",
            "transaction.state.log.num.partitions": "10",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update({k: str(v) for k, v in self.extra_properties.items()})
        return props

    def _jvm(self, lib: Path, main: str, *args: str, heap: str | None = None) -> list[str]:
        """Return a java command line running ``main`` on the Kafka classpath."""
        assert self.workdir is not None
        cmd = [_java()]
        if heap:
            cmd.append(f"-Xmx{heap}")
        cmd += [
            "-cp", f"{lib}{os.sep}*",
            f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
            f"-Dkafka.logs.dir={self.workdir / 'logs'}",
            "-Djava.awt.headless=true",
            main, *args,
        ]
        return cmd

    def _run_tool(self, lib: Path, deadline: float, *args: str) -> str:
        """Run ``kafka.tools.StorageTool`` with ``args`` in its own JVM; return its stdout."""
        remaining = max(1.0, deadline - time.monotonic())
        cmd = self._jvm(lib, "kafka.tools.StorageTool", *args, heap="256m")
        try:
            proc = subprocess.run(
                cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=remaining
            )
        except subprocess.TimeoutExpired as exc:
            raise BrokerError(f"StorageTool {args[0]} timed out") from exc
        if proc.returncode != 0:
            raise BrokerError(
                f"StorageTool {args[0]} failed (exit {proc.returncode}):\n"
                f"{tail(proc.stdout + proc.stderr)}"
            )
        return proc.stdout

    def _launch(self, lib: Path, deadline: float) -> None:
        """Write server.properties, format storage and start the broker JVM."""
        assert self.workdir is not None
        meta = self.workdir / "data" / "meta.properties"
        formatted = self.keep_data and meta.exists()
        for sub in ("logs",) if formatted else ("data", "logs"):
            shutil.rmtree(self.workdir / sub, ignore_errors=True)
            (self.workdir / sub).mkdir()
        props_path = self.workdir / "server.properties"
        lines = ["# Written by gangstate deploy/kafka/broker.py; rewritten at every start."]
        lines += [f"{k}={v}" for k, v in self.server_properties().items()]
        props_path.write_text("\n".join(lines) + "\n")

        if formatted:  # restart on the kept data: its cluster id, no new format
            self.cluster_id = _read_properties(meta).get("cluster.id")
            if not self.cluster_id:
                raise BrokerError(f"{meta} names no cluster.id: not a Kafka storage directory "
                                  f"this script formatted; remove {self.workdir / 'data'} to "
                                  f"start empty")
        else:
            self.cluster_id = self._run_tool(lib, deadline, "random-uuid").strip().splitlines()[-1]
            scram = [arg for credential in self.scram for arg in ("--add-scram", credential)]
            self._run_tool(
                lib, deadline, "format", "-t", self.cluster_id, "-c", str(props_path),
                "--standalone", *scram,
            )

        self._out = open(self.workdir / "logs" / "kafka.out", "wb")
        try:
            self._proc = subprocess.Popen(
                self._jvm(lib, "kafka.Kafka", str(props_path), heap=self.heap),
                cwd=str(self.workdir),
                stdin=subprocess.DEVNULL,
                stdout=self._out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: signals reach the whole JVM tree
            )
        except OSError as exc:
            self._out.close()
            self._out = None
            raise BrokerError(f"cannot start java: {exc}") from exc

    def _ports_failed_to_bind(self) -> set[int]:
        """Ports the last start could not listen on (Kafka: 'failed to bind to host:port')."""
        assert self.workdir is not None
        text = file_tail(self.workdir / "logs" / "kafka.out", 2000)
        return {int(p) for p in re.findall(r"failed to bind to [^\s:]+:(\d+)", text)}

    def _diagnostics(self) -> str:
        """Return the tails of the broker's console output and server.log."""
        assert self.workdir is not None
        full = file_tail(self.workdir / "logs" / "kafka.out", 2000).splitlines()
        errors = [ln for ln in full if " ERROR " in ln or "Exception: " in ln][:3]
        out = "\n".join([ln for ln in full if not ln.lstrip().startswith("at ")][-20:])
        log = file_tail(self.workdir / "logs" / "server.log", 30)
        first = "\n".join(errors) or "(none)"
        return (f"--- first errors ---\n{first}\n--- kafka.out (tail, no stack frames) ---\n{out}\n"
                f"--- server.log (tail) ---\n{log}")

    def _wait_ready(self, deadline: float, timeout: float) -> None:
        """Poll until the broker lists itself in a Metadata answer, or raise BrokerError."""
        assert self._proc is not None and self.workdir is not None
        bootstrap = f"{_HOST}:{self.port}"
        last_error: BaseException | None = None
        while True:
            code = self._proc.poll()
            if code is not None:
                raise BrokerError(
                    f"Kafka broker exited with code {code} during startup.\n{self._diagnostics()}"
                )
            # Startup errors reach kafka.out (the console gets WARN and above). After a fatal one
            # the JVM can linger for many seconds before exiting; don't wait for it.
            fatal = [ln for ln in file_tail(self.workdir / "logs" / "kafka.out", 400).splitlines()
                     if any(marker in ln for marker in _FATAL_MARKERS)]
            if fatal:
                raise BrokerError(
                    f"Kafka broker failed during startup: {fatal[0]}\n{self._diagnostics()}"
                )
            try:
                answer = metadata(bootstrap, timeout=2.0)
            except (OSError, BrokerError, struct.error) as exc:
                last_error = exc
            else:
                if any(b["port"] == self.port for b in answer["brokers"]):
                    return
                last_error = BrokerError(f"broker not yet in metadata: {answer}")
            if time.monotonic() >= deadline:
                raise BrokerError(
                    f"Kafka broker on {bootstrap} not ready within {timeout:.0f}s "
                    f"(last probe: {last_error!r}).\n{self._diagnostics()}"
                )
            time.sleep(0.2)

    def _kill(self, timeout: float = 30.0) -> None:
        """SIGTERM the broker's process group, wait ``timeout`` s, then SIGKILL it."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
        if self._out is not None:
            self._out.close()
            self._out = None


# --- command line ----------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    """Command line: ``fetch`` or ``run [--port N] [--controller-port N] [--workdir DIR |
    --data-dir DIR]``.

    ``fetch`` prints the jar directory. ``run`` starts a broker, prints
    ``KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:<port>`` and stays in the foreground until SIGINT or
    SIGTERM, then stops it cleanly. With ``--workdir`` (or neither, a temporary directory) every
    start is an empty cluster; with ``--data-dir`` the broker keeps its data in DIR and a later
    ``run --data-dir DIR`` restarts on it (``LocalKafka(keep_data=True)``). Returns the exit
    code (0 ok, 1 broker error or broker died; 2 usage).
    """
    parser = argparse.ArgumentParser(
        prog="broker.py",
        description="Embedded single-node Apache Kafka for gangstate's demo, tests and CI "
        "(not for production).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_fetch = sub.add_parser("fetch", help="resolve the Kafka jars into the cache (needs mvn)")
    p_fetch.add_argument("--cache-dir", type=Path, default=None,
                         help="cache root (default: $GANGSTATE_CACHE or ~/.cache/gangstate)")
    p_run = sub.add_parser("run", help="start a broker and keep it in the foreground")
    p_run.add_argument("--port", type=int, default=None, help="client port (default: a free one)")
    p_run.add_argument("--controller-port", type=int, default=None,
                       help="KRaft controller port (default: a free one)")
    where = p_run.add_mutually_exclusive_group()
    where.add_argument("--workdir", type=Path, default=None,
                       help="scratch directory, emptied at every start (default: a temporary "
                            "one, removed at exit)")
    where.add_argument("--data-dir", type=Path, default=None,
                       help="keep the broker's data in DIR and restart on it: formatted (a new "
                            "cluster id) only when DIR holds no Kafka storage yet, the same "
                            "ports as the previous start unless --port/--controller-port")
    p_run.add_argument("--heap", default="512m", help="JVM -Xmx (default 512m)")
    p_run.add_argument("--timeout", type=float, default=90.0, help="startup timeout in seconds")
    args = parser.parse_args(argv)

    try:
        if args.command == "fetch":
            started = time.monotonic()
            lib = fetch(args.cache_dir)
            print(f"{lib}  ({time.monotonic() - started:.1f}s)")
            return 0

        stop = threading.Event()

        def _on_signal(signum: int, _frame: object) -> None:
            stop.set()

        signal.signal(signal.SIGINT, _on_signal)
        signal.signal(signal.SIGTERM, _on_signal)
        kafka = LocalKafka(args.data_dir or args.workdir, args.port, args.controller_port,
                           args.heap, keep_data=args.data_dir is not None)
        started = time.monotonic()
        bootstrap = kafka.start(timeout=args.timeout)
        try:
            print(f"KAFKA_BOOTSTRAP_SERVERS={bootstrap}", flush=True)
            kept = f"; data kept in {kafka.workdir / 'data'}" if kafka.keep_data else ""
            print(f"# Kafka {KAFKA_VERSION} ready in {time.monotonic() - started:.1f}s "
                  f"(cluster {kafka.cluster_id}{kept}); logs in {kafka.log_path}; Ctrl-C to stop",
                  file=sys.stderr, flush=True)
            while not stop.wait(0.5):
                if not kafka.is_running():
                    print(f"Kafka broker died.\n{kafka._diagnostics()}", file=sys.stderr)
                    return 1
            return 0
        finally:
            kafka.stop()
    except BrokerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
