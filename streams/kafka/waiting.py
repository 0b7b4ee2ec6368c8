"""Failing clean: exit statuses, one-line failures, waiting for what a command needs, ``/readyz``.

Where it sits: below every command and component that reaches Kafka, the API server or a worker
(the CLI, ``gangstate worker``/``watch``/``sink``), beside the Kafka clients. It is the one place
that waits: interactive commands (``tap``, ``replay``, ``get``, ``describe``, ``explain``) call
``retry`` with a deadline (``--timeout``) and say on stderr, at the first failed attempt, that
they are waiting; long-running components call it without a deadline and log each failed
attempt (``streams.kafka.logs`` lets one line of a kind through per 10 s) while their
``/readyz`` answers 503 with the reason. Delays: ``Backoff``, tenacity's capped exponential
with full jitter (``wait_random_exponential``).

Exit statuses, the same for every command (README "Exit statuses"):

| status | meaning |
|---|---|
| 0 | done; a long-running command (``worker``, ``watch``, ``sink``) stopped by SIGTERM or SIGINT, at any moment: stopping is how it ends |
| 1 | runtime failure: Kafka, the API server or the worker still unreachable after ``--timeout``; a permission refused (403, 401); a topic, gang or pod that does not exist |
| 2 | usage or configuration error: a bad flag or variable, a missing or unreadable kubeconfig, Kafka not configured, an HTTP port that cannot be bound |
| 130 | an interactive command cut short by SIGINT (Ctrl-C) |
| 143 | an interactive command cut short by SIGTERM |

Must not: print a traceback for any of these, or retry anything but the one attempt it is given.
"""

from __future__ import annotations

import logging
import random
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, TypeVar

import tenacity

if TYPE_CHECKING:  # pragma: no cover
    from streams.settings import KafkaSecurity, Settings

T = TypeVar("T")

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

DEFAULT_TIMEOUT = 30.0
"""Seconds an interactive command waits for Kafka or a worker before it gives up (``--timeout``)."""
ATTEMPT_SECONDS = 3.0
"""Seconds one attempt to reach Kafka may take at most (a SIGTERM to a long-running component
is acted on within this)."""
FIRST_ATTEMPT_SECONDS = 0.5
"""Seconds the first attempt may take (the second twice this, ...; none less, and none past
the deadline by more): the waiting line comes after the first failed one, 1.5-3 s after the
start with the imports (measured on the 2 shared cores here)."""
BACKOFF_BASE = 0.5
BACKOFF_CAP = 10.0
"""Delays between attempts, seconds: ``Backoff(BACKOFF_BASE, BACKOFF_CAP)``, before retry k
(0-based) uniform in [0, min(BACKOFF_CAP, BACKOFF_BASE * 2**k))."""
LIBRARY_LOGGERS = ("kafka", "urllib3", "kubernetes")
"""Libraries whose log records are dropped below CRITICAL in every command: kafka-python logs
each failed connection several times a second while a broker is down, urllib3 each retried
request; gangstate says what matters itself (the waiting lines, the retry lines of the watch,
the sink's API lines). The worker's aiokafka and Faust follow its ``--loglevel``
(``streams.worker.app``)."""

log = logging.getLogger("gangstate")


class Backoff(tenacity.wait_random_exponential):
    """tenacity's "full jitter" exponential wait (AWS Architecture Blog, "Exponential Backoff
    And Jitter"), ``tenacity.wait_random_exponential(multiplier=base, max=cap)``, with its
    uniform draw taken from ``rand`` (uniform in [0, 1)): called with a ``RetryCallState``,
    seconds to wait before retry ``attempt_number - 1`` (0-based), ``rand() * min(cap, base *
    2**(attempt_number - 1))``; the window is tenacity's (``wait_exponential``), the draw
    ``random.uniform``'s formula, so with ``rand=random.random`` (the default) every delay is
    the one ``wait_random_exponential`` itself draws. A test pins ``rand``."""

    def __init__(self, base: float, cap: float,
                 rand: Callable[[], float] = random.random) -> None:
        super().__init__(multiplier=base, max=cap)
        self.rand = rand

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        high = tenacity.wait_exponential.__call__(self, retry_state)
        return self.min + (high - self.min) * self.rand()  # random.uniform(self.min, high)


class Failure(Exception):
    """A command that cannot go on: ``str(err)`` is the one line for the user (what, where,
    what to do, without the command's name), ``status`` the exit status. ``streams.cli.main``
    prints it as ``gangstate COMMAND: MESSAGE``."""

    def __init__(self, message: str, status: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.status = status


class Stopped(BaseException):
    """Raised in the main thread by the SIGTERM handler of an interactive command
    (``raise_on_sigterm``); a ``BaseException`` like ``KeyboardInterrupt``, so that no
    ``except Exception`` on the way swallows it."""


def raise_on_sigterm() -> None:
    """Make SIGTERM raise ``Stopped`` in the main thread, as SIGINT raises
    ``KeyboardInterrupt`` (``streams.cli.main`` turns both into one line and 143 or 130).
    Long-running components install their own handlers over it."""
    def stop(_signum: int, _frame: Any) -> None:
        raise Stopped()

    if threading.current_thread() is threading.main_thread():  # else signal.signal refuses
        signal.signal(signal.SIGTERM, stop)


def quiet_libraries(names: Iterable[str] = LIBRARY_LOGGERS, level: int = logging.CRITICAL) -> None:
    """Drop the records of ``names`` below ``level`` (``LIBRARY_LOGGERS``)."""
    for name in names:
        logging.getLogger(name).setLevel(level)


class Readiness:
    """Whether a long-running component is ready, and why not: ``reason`` is ``None`` when ready,
    else one line (``waiting for Kafka at 127.0.0.1:1 (KAFKA_BOOTSTRAP_SERVERS)``). ``check``:
    asked when ``reason`` is ``None``, for what is known elsewhere (a watch's first lists);
    ``None`` from it is ready. Thread-safe: one attribute, written whole."""

    def __init__(self, reason: str | None = "starting",
                 check: Callable[[], str | None] | None = None) -> None:
        self.reason = reason
        self.check = check

    def state(self) -> str | None:
        """``None`` when ready, else why not."""
        reason = self.reason
        if reason is None and self.check is not None:
            return self.check()
        return reason

    def answer(self) -> tuple[int, str]:
        """``(200, "ready\\n")`` or ``(503, "not ready: REASON\\n")``: ``GET /readyz``."""
        reason = self.state()
        return (200, "ready\n") if reason is None else (503, f"not ready: {reason}\n")


def serve_http(port: int, bind: str, registry: Any, readiness: Readiness,
               what: str = "--http-port") -> Any:
    """Serve ``/metrics`` (``registry`` in the Prometheus text format, prometheus_client's own
    WSGI app; ``None``: 503 and the readiness reason, for a worker whose metrics do not exist
    yet) and ``/readyz`` (``readiness.answer()``) on ``bind:port`` in a daemon thread
    (prometheus_client's threading WSGI server, the one ``start_http_server`` uses). Returns the
    server (``shutdown()`` then ``server_close()`` stop it). Raises ``Failure`` (2) when the
    address cannot be bound."""
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from prometheus_client import make_wsgi_app
    from prometheus_client.exposition import ThreadingWSGIServer

    metrics = make_wsgi_app(registry) if registry is not None else None

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO") == "/readyz" or metrics is None:
            status, body = readiness.answer()
            start_response(f"{status} {'OK' if status == 200 else 'Service Unavailable'}",
                           [("Content-Type", "text/plain; charset=utf-8")])
            return [body.encode()]
        return metrics(environ, start_response)

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
            pass

    try:
        server = make_server(bind, port, app, ThreadingWSGIServer, handler_class=Quiet)
    except OSError as err:
        raise Failure(f"cannot listen on {bind}:{port} ({what}): {err.strerror}; choose "
                      f"another port", EXIT_USAGE) from None
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server


def retry(attempt: Callable[[], T], *, who: str, waiting: str, deadline: float | None = None,
          stop: threading.Event | None = None, readiness: Readiness | None = None,
          say: Callable[[str], Any] | None = None, give_up: str = "",
          transient: tuple[type[BaseException], ...] = (Exception,),
          clock: Callable[[], float] = time.monotonic,
          rand: Callable[[], float] = random.random) -> T | None:
    """Call ``attempt()`` until it returns, and return what it returns.

    ``who`` is the command (``gangstate watch``), ``waiting`` what is waited for and where
    (``Kafka at 127.0.0.1:1 (KAFKA_BOOTSTRAP_SERVERS)``). An exception of ``transient`` is a failed attempt; anything
    else goes up at once (a ``Failure`` says itself). After a failed attempt:

    - with ``say`` (interactive), ``say("WHO: waiting for WAITING ...")`` once, at the first
      failure;
      past ``deadline`` (``clock()`` seconds) it raises ``Failure`` (1): ``cannot reach WAITING
      after N s (LAST ERROR)`` and ``give_up`` (what to do);
    - without ``say`` (long-running), a WARNING on the ``gangstate`` logger at every failure
      (the rate-limited handler keeps one a kind per 10 s), and ``readiness`` is set to
      ``waiting for WAITING`` until an attempt succeeds (then ready).

    ``stop`` (set by a signal handler) ends the wait: ``None`` is returned. Delays between
    attempts: ``Backoff(BACKOFF_BASE, BACKOFF_CAP, rand)``, cut at the deadline."""
    started = clock()
    backoff = Backoff(BACKOFF_BASE, BACKOFF_CAP, rand)

    def stopped(_state: tenacity.RetryCallState | None = None) -> None:
        if stop is not None and stop.is_set():
            raise _Stopped

    def wait(state: tenacity.RetryCallState) -> float:
        delay = backoff(state)
        if say is not None and deadline is not None:  # never sleep past the deadline
            delay = min(delay, max(0.0, deadline - clock()))
        return delay

    def past_deadline(state: tenacity.RetryCallState) -> bool:
        stopped()
        if say is not None and deadline is not None and (
                clock() + min(state.upcoming_sleep, 0.1) >= deadline):
            raise Failure(f"cannot reach {waiting} after {clock() - started:.0f} s "
                          f"({_cause(state)})" + (f"; {give_up}" if give_up else ""))
        return False

    def before_sleep(state: tenacity.RetryCallState) -> None:
        if say is not None:
            if state.attempt_number == 1:
                say(f"{who}: waiting for {waiting} ...")
            return
        log.warning("%s: waiting for %s: %s; retrying in %.1f s", who, waiting, _cause(state),
                    state.upcoming_sleep)
        if readiness is not None:
            readiness.reason = f"waiting for {waiting}"

    def pause(seconds: float) -> None:  # a signal ends the pause at once
        if stop is not None:
            stop.wait(seconds)
        else:
            time.sleep(seconds)

    try:
        result = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(transient), before=stopped, wait=wait,
            stop=past_deadline, before_sleep=before_sleep,
            sleep=pause)(attempt)
    except _Stopped:
        return None
    if readiness is not None and say is None:
        readiness.reason = None
    return result


class _Stopped(Exception):
    """``retry``'s ``stop`` was set: the wait ends without a result."""


def _cause(state: tenacity.RetryCallState) -> str:
    """The failed attempt of ``state`` in one line (``one_line``)."""
    err = state.outcome.exception() if state.outcome else None
    return one_line(err) if err is not None else "?"


def one_line(err: BaseException) -> str:
    """One short line for an exception: kafka-python's ``KafkaTimeoutError: KafkaTimeoutError:
    Unable to bootstrap from X`` reads ``KafkaTimeoutError: Unable to bootstrap from X``."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    if isinstance(err, Unreachable):
        return text
    name = type(err).__name__
    if text.startswith(f"{name}: "):
        text = text[len(name) + 2:]
    text = text[:200]
    return f"{name}: {text}" if text else name


def kafka_source(flag: str | None) -> str:
    """Where the bootstrap address came from, for messages: ``--bootstrap`` when the flag was
    given, else ``KAFKA_BOOTSTRAP_SERVERS``."""
    return "--bootstrap" if flag else "KAFKA_BOOTSTRAP_SERVERS"


def kafka_unreachable(bootstrap: str, security: "KafkaSecurity | None" = None,
                      timeout: float = ATTEMPT_SECONDS) -> str | None:
    """``None`` when a broker of ``host:port[,host:port]`` answers a metadata request spoken
    with ``security`` (TLS and SASL as every other client; ``None``: PLAINTEXT), else why not
    (one line). A broker that refuses the handshake or the credentials counts as unreachable.
    ``timeout``: seconds per broker."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    from streams.settings import KafkaSecurity

    config = (security or KafkaSecurity()).kafka_python()
    why = "no address"
    for address in bootstrap.split(","):
        try:
            probe = KafkaConsumer(bootstrap_servers=address.strip(), group_id=None,
                                  client_id="gangstate-probe",
                                  bootstrap_timeout_ms=int(timeout * 1000),
                                  # above fetch_max_wait_ms (500), as kafka-python requires
                                  request_timeout_ms=max(int(timeout * 1000), 1000),
                                  **config)
        except (KafkaError, OSError, ValueError) as err:
            why = one_line(err)
            continue
        try:
            probe.topics()  # a metadata request
            return None
        except (KafkaError, OSError, ValueError) as err:
            why = one_line(err)
            continue
        finally:
            probe.close()
    return why


class Unreachable(Exception):
    """A failed attempt to reach something (the reason is the message)."""


def wait_for_kafka(settings: "Settings", who: str, *, source: str = "KAFKA_BOOTSTRAP_SERVERS",
                   timeout: float | None = DEFAULT_TIMEOUT, stop: threading.Event | None = None,
                   readiness: Readiness | None = None, then: Callable[[], T] | None = None,
                   say: Callable[[str], Any] | None = None) -> T | None:
    """Wait until Kafka at ``settings.bootstrap`` answers (``kafka_unreachable``), then return
    ``then()`` (``None`` without it); an exception of ``then`` counts as one more failed attempt
    (the broker went away in between). ``who``: the command, for the messages. Interactive with
    ``timeout`` seconds: the waiting line through ``say`` (default: stderr), ``Failure`` after
    the timeout; long-running with ``timeout=None``: logs, ``readiness`` and ``stop`` as
    ``retry``. ``source``: ``kafka_source(flag)``."""
    assert settings.bootstrap, "KAFKA_BOOTSTRAP_SERVERS is not set"
    bootstrap = settings.bootstrap

    tries = [0]
    deadline = None if timeout is None else time.monotonic() + timeout

    def attempt() -> Any:
        # the first attempt short (the waiting line comes after it), later ones longer, none
        # far past the deadline
        tries[0] += 1
        seconds = min(ATTEMPT_SECONDS, FIRST_ATTEMPT_SECONDS * tries[0])
        if deadline is not None:
            seconds = max(FIRST_ATTEMPT_SECONDS, min(seconds, deadline - time.monotonic()))
        why = kafka_unreachable(bootstrap, settings.security, seconds)
        if why is not None:
            raise Unreachable(why)
        return then() if then is not None else None

    if timeout is not None and say is None:
        say = _stderr
    return retry(attempt, who=who, waiting=f"Kafka at {bootstrap} ({source})",
                 deadline=deadline,
                 stop=stop, readiness=readiness, say=say if timeout is not None else None,
                 give_up="check the address, or start a local broker with "
                         "`python deploy/kafka/broker.py run`")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
