"""One runner for every long-running component: ``gangstate watch``, ``gangstate sink`` and
``gangstate worker``.

Where it sits: below the components (``producers.watch.running``, ``streams.events.sink``,
``streams.worker.app``), above Kafka (``streams.kafka``). Each component's runner builds one
``Component`` and asks it, in this order, for what every long-running process needs:

    Component(who)
        .start_logging()            one format, each kind of line at most once per 10 s
        .serve(port, bind, ...)     /metrics and /readyz (503 with the reason until ready)
        .handle_signals(*then)      SIGTERM/SIGINT set .stop (and call ``then``): exit 0
        .wait_for_kafka(settings)   retried with backoff (tenacity) until Kafka answers

Its options are typed (pydantic models, frozen): ``KubeOptions`` (where the API server is),
``ServeOptions`` (the HTTP port of metrics and probes) and ``KafkaOptions`` (the Kafka flags);
each component's options model extends them, and ``streams.cli.components`` builds it from
click's arguments.

Must not: decide anything of a component's own work, or print a traceback for a bad setting.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import IO, Any, Callable, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from streams.kafka.logs import limited_handler
from streams.kafka.waiting import Readiness, kafka_source, serve_http, wait_for_kafka
from streams.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

LOG_FORMAT = "%(asctime)s %(levelname)s %(message)s"


class KubeOptions(BaseModel):
    """Where the API server is: ``--kubeconfig`` (a path; ``None``: ``$KUBECONFIG`` or
    ``~/.kube/config``), ``--context`` (a context name of it) or ``--in-cluster`` (the pod's
    ServiceAccount)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False


class ServeOptions(BaseModel):
    """``--http-port`` (``None``: no HTTP server) and ``--http-bind`` (an address) of the
    component's ``/metrics`` and ``/readyz``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    http_port: int | None = None
    http_bind: str = "127.0.0.1"


class KafkaOptions(BaseModel):
    """The Kafka flags: ``--bootstrap`` (``host:port[,host:port]``; ``None``:
    ``KAFKA_BOOTSTRAP_SERVERS``), ``--prefix`` (of every topic) and the TLS and SASL flags
    (``KafkaSecurity`` field name -> value, ``None`` for a flag not given)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bootstrap: str | None = None
    prefix: str | None = None
    kafka_security: dict[str, Any] = Field(default_factory=dict)

    def settings(self) -> Settings:
        """The environment's settings with these flags applied (``Settings.with_flags``).
        Raises ``SettingsError`` (one line) when they cannot work."""
        return Settings.from_env().with_flags(self.bootstrap, self.prefix, self.kafka_security)

    def source(self) -> str:
        """Where the Kafka address came from, for the waiting lines: ``--bootstrap`` or
        ``KAFKA_BOOTSTRAP_SERVERS``."""
        return kafka_source(self.bootstrap)


class Component:
    """The process around one long-running component named ``who`` (``gangstate watch``).

    ``stop`` is set by SIGTERM or SIGINT (``handle_signals``); the component's own loop ends
    when it is, and the runner returns 0. ``readiness`` is what ``/readyz`` answers."""

    def __init__(self, who: str, readiness: Readiness | None = None) -> None:
        self.who = who
        self.readiness = readiness if readiness is not None else Readiness()
        self.stop = threading.Event()
        self._previous: dict[int, Any] = {}
        self._server: Any = None

    def start_logging(self, stream: IO[str] | None = None,
                      formatter: logging.Formatter | None = None) -> logging.Handler:
        """Log INFO and above to ``stream`` (default ``sys.stderr``) in ``LOG_FORMAT`` (or
        ``formatter``'s), each kind of line at most once per 10 s (a broker that is down);
        a process that already has handlers (a test runner's) keeps them. Returns the
        handler."""
        handler = limited_handler(stream)
        if formatter is not None:
            handler.setFormatter(formatter)
        logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, handlers=[handler])
        return handler

    def serve(self, port: int | None, bind: str, registry: Any) -> Any:
        """Serve ``/metrics`` (``registry``) and ``/readyz`` (``readiness``) on ``bind:port``
        in a thread; nothing when ``port`` is ``None``. Raises ``Failure`` (exit 2) when the
        port is taken. Returns the server (or ``None``)."""
        if port is not None:
            self._server = serve_http(port, bind, registry, self.readiness)
        return self._server

    def stop_serving(self) -> None:
        """Shut the HTTP server down (the worker's Faust takes the port over)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def handle_signals(self, *then: Callable[[], Any]) -> None:
        """On SIGTERM or SIGINT: log ``signal N: stopping``, set ``stop``, call each of
        ``then`` (to cut open connections). ``restore_signals`` puts the previous handlers
        back."""

        def on_signal(signum: int, _frame: Any) -> None:
            log.info("signal %d: stopping", signum)
            self.stop.set()
            for callback in then:
                callback()

        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, on_signal)

    def restore_signals(self) -> None:
        """The signal handlers as they were before ``handle_signals``."""
        for sig, old in self._previous.items():
            signal.signal(sig, old)
        self._previous.clear()

    def wait_for_kafka(self, settings: Settings, source: str,
                       then: Callable[[], T] | None = None) -> T | None:
        """Wait until Kafka answers (``streams.kafka.waiting.wait_for_kafka``: no deadline,
        backoff, one line per 10 s, ``/readyz`` 503 meanwhile), then return ``then()``
        (``None`` without it, and when stopped first: ``stop`` tells which)."""
        return wait_for_kafka(settings, self.who, source=source, timeout=None,
                              stop=self.stop, readiness=self.readiness, then=then)

    def usage_error(self, message: str) -> int:
        """Print ``WHO: MESSAGE`` on stderr (a configuration that cannot work) and return the
        exit status 2."""
        print(f"{self.who}: {message}", file=sys.stderr, flush=True)
        return 2
