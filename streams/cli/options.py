"""The flags every ``gangstate`` command shares, as click option groups, and their value types.

Where it sits: the CLI, below its command modules. One spelling per meaning, after kubectl:
``-n/--namespace``, ``-A/--all-namespaces``, ``-o/--output``, ``--kubeconfig``/``--context``/
``--in-cluster``, ``--bootstrap``/``--prefix`` and the security flags for Kafka, and
``--http-port`` with ``--http-bind`` (default 127.0.0.1) on every long-running command (the
port's older spellings ``--web-port`` and ``--metrics-port`` stay accepted, hidden).

Must not: start anything.
"""

from __future__ import annotations

import functools
import math
import sys
from datetime import datetime, timezone
from typing import Any, Callable, TypeVar

import click

from streams.core.cluster import cluster_problem
from streams.settings import SASL_MECHANISMS, SECURITY_PROTOCOLS
from streams.wire.contracts import parse_time

F = TypeVar("F", bound=Callable[..., Any])


def _now_micros() -> int:
    return parse_time(datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


def _at(text: str | None) -> int:
    """``--at``: RFC 3339 (or ``now``/unset) -> microseconds. A bad value ends the command
    with exit status 2 and a one-line message, like any other usage error."""
    if text is None or text == "now":
        return _now_micros()
    try:
        return parse_time(text)
    except ValueError:
        print(f"gangstate: --at: not an RFC 3339 time (e.g. 2026-11-02T09:00:00Z): {text!r}",
              file=sys.stderr)
        raise SystemExit(2) from None


class Seconds(click.ParamType):
    """A finite, non-negative number of seconds."""

    name = "seconds"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        if isinstance(value, float):
            return value
        try:
            number = float(value)
        except ValueError:
            self.fail(f"not a number of seconds: {value!r}", param, ctx)
        if not math.isfinite(number) or number < 0:
            self.fail(f"must be a finite number >= 0: {value!r}", param, ctx)
        return number


SECONDS = Seconds()


class Ref(click.ParamType):
    """``NAMESPACE/NAME`` (a gang or a pod)."""

    name = "NAMESPACE/NAME"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        ns, sep, rest = str(value).partition("/")
        if not sep or not ns or not rest or "/" in rest:
            self.fail(f"{value!r} is not NAMESPACE/NAME", param, ctx)
        if ":" in ns:  # a gang's key (eu-1:ns/name), not a name: the cluster is its own flag
            cluster, _, plain = str(value).partition(":")
            self.fail(f"{value!r} is not NAMESPACE/NAME: a namespace has no ':' (for gang "
                      f"{plain} of cluster {cluster}, give {plain} --cluster {cluster})",
                      param, ctx)
        return str(value)


REF = Ref()


def _apply(f: F, *decorators: Callable[[F], F]) -> F:
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


SECURITY_FLAGS = ("security_protocol", "sasl_mechanism", "sasl_username",
                  "sasl_password_file", "ssl_cafile", "ssl_certfile", "ssl_keyfile")
"""The security flags' parameter names (``KafkaSecurity`` fields, plus the password file)."""


def kafka_security_options(f: F) -> F:
    """``--security-protocol``, ``--sasl-mechanism``, ``--sasl-username``,
    ``--sasl-password-file``, ``--ssl-cafile``, ``--ssl-certfile``, ``--ssl-keyfile``: how to
    connect to a secured Kafka (each defaults to its ``KAFKA_*`` variable; the password only
    from ``KAFKA_SASL_PASSWORD`` or a file, never a flag, so it stays out of ``ps``). The
    command receives them as one ``kafka_security`` dict (field -> value, ``None``: not
    given), for ``Settings.with_flags``."""
    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["kafka_security"] = {name: kwargs.pop(name) for name in SECURITY_FLAGS}
        return f(*args, **kwargs)

    return _apply(
        wrapper,  # type: ignore[arg-type]
        click.option("--security-protocol",
                     type=click.Choice(SECURITY_PROTOCOLS),
                     default=None, help="Kafka security.protocol "
                                        "(default: $KAFKA_SECURITY_PROTOCOL or PLAINTEXT)"),
        click.option("--sasl-mechanism",
                     type=click.Choice(SASL_MECHANISMS),
                     default=None, help="Kafka sasl.mechanism (default: $KAFKA_SASL_MECHANISM "
                                        "or PLAIN)"),
        click.option("--sasl-username", metavar="USER", default=None,
                     help="SASL user (default: $KAFKA_SASL_USERNAME)"),
        click.option("--sasl-password-file", metavar="PATH", default=None,
                     help="file holding the SASL password (default: $KAFKA_SASL_PASSWORD or "
                          "$KAFKA_SASL_PASSWORD_FILE)"),
        click.option("--ssl-cafile", metavar="PEM", default=None,
                     help="CA certificates to trust (default: $KAFKA_SSL_CAFILE or the "
                          "system's)"),
        click.option("--ssl-certfile", metavar="PEM", default=None,
                     help="client certificate, for brokers that ask for one "
                          "(default: $KAFKA_SSL_CERTFILE)"),
        click.option("--ssl-keyfile", metavar="PEM", default=None,
                     help="key of the client certificate (default: $KAFKA_SSL_KEYFILE)"),
    )


def kafka_options(f: F) -> F:
    """``--bootstrap`` and ``--prefix`` (which Kafka and which topics) and the security flags
    (``kafka_security_options``)."""
    return _apply(
        f,
        click.option("--bootstrap", metavar="HOST:PORT[,...]",
                     help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP_SERVERS)"),
        click.option("--prefix", help="topic prefix (default: $GANGSTATE_TOPIC_PREFIX or "
                                      "'gangstate.')"),
        kafka_security_options,
    )


def kube_options(f: F) -> F:
    """``--kubeconfig``, ``--context`` and ``--in-cluster``: how to reach the API server."""
    return _apply(
        f,
        click.option("--kubeconfig", metavar="PATH",
                     help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)"),
        click.option("--context", help="kubeconfig context"),
        click.option("--in-cluster", is_flag=True,
                     help="use the pod's ServiceAccount (running inside Kubernetes)"),
    )


def check_kube_options(kubeconfig: str | None, in_cluster: bool) -> None:
    if kubeconfig and in_cluster:
        raise click.UsageError("--kubeconfig and --in-cluster exclude each other")


HTTP_BIND = "127.0.0.1"
"""Where an HTTP server of gangstate listens unless ``--http-bind`` says otherwise: loopback
only, so that nothing is exposed by default (the Deployments pass ``--http-bind 0.0.0.0``)."""


PORT = click.IntRange(0, 65535)
"""A TCP port (0: any free one): a value outside is a usage error, one line and exit status 2
(not an ``OverflowError`` from the socket when the server is started)."""


def http_port_option(help: str) -> Callable[[F], F]:
    """``--http-port PORT`` (hidden old spellings: ``--web-port``, ``--metrics-port``; each a
    ``PORT``, 0-65535) and ``--http-bind ADDRESS`` (default ``HTTP_BIND``); the command
    receives ``http_port`` (``None``: no HTTP server) and ``http_bind``."""
    def decorate(f: F) -> F:
        return _apply(
            f,
            click.option("--http-port", type=PORT, metavar="PORT", default=None, help=help),
            click.option("--http-bind", metavar="ADDRESS", default=HTTP_BIND, show_default=True,
                         help="address the HTTP server listens on (0.0.0.0: every interface)"),
            click.option("--web-port", "web_port_alias", type=PORT, hidden=True, default=None),
            click.option("--metrics-port", "metrics_port_alias", type=PORT, hidden=True,
                         default=None),
        )
    return decorate


def http_port(http_port: int | None, web_port_alias: int | None,
              metrics_port_alias: int | None) -> int | None:
    given = [p for p in (http_port, web_port_alias, metrics_port_alias) if p is not None]
    if len(set(given)) > 1:
        raise click.UsageError("--http-port is given twice with different values "
                               "(--web-port and --metrics-port are its old spellings)")
    return given[0] if given else None


def output_option(*choices: str, default: str = "text") -> Callable[[F], F]:
    """``-o/--output`` with these formats."""
    return click.option("--output", "-o", type=click.Choice(choices), default=default,
                        show_default=True, help="output format")


class ClusterId(click.ParamType):
    """A cluster id (``streams.core.cluster``: a DNS-1123 label such as ``eu-1``); a bad one
    is a usage error with the reason."""

    name = "CLUSTER"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        problem = cluster_problem(value)
        if problem is not None:
            self.fail(problem, param, ctx)
        return str(value)


CLUSTER = ClusterId()


def cluster_option(what: str, context: bool = False) -> Callable[[F], F]:
    """``--cluster CLUSTER``: the cluster ``what`` serves or reads (default
    ``$GANGSTATE_CLUSTER``, else ``default``; docs/fleet.md); the command receives ``cluster``
    (``None`` when not given). ``context``: the command also takes ``--context``, whose
    cluster id ``GANGSTATE_CLUSTER_CONTEXTS`` may map (``cluster_of_context``)."""
    default = ("the cluster GANGSTATE_CLUSTER_CONTEXTS maps --context to, else "
               "$GANGSTATE_CLUSTER" if context else "$GANGSTATE_CLUSTER")
    return click.option("--cluster", "cluster", type=CLUSTER, default=None, metavar="CLUSTER",
                        help=f"{what} (a DNS-1123 label; default {default}, else 'default')")


def cluster_of_context(cluster: str | None, context: str | None) -> str | None:
    """The cluster id a watch or sink serves: ``cluster`` (``--cluster``) when given, else the
    one ``GANGSTATE_CLUSTER_CONTEXTS`` maps kubeconfig context ``context`` to, else ``None``
    (``$GANGSTATE_CLUSTER``, else ``default``). Raises ``SettingsError`` (one line) on a bad
    mapping, and ``click.UsageError`` for a context a non-empty mapping does not name while
    ``GANGSTATE_CLUSTER`` is unset (its records would go to ``default``)."""
    if cluster is not None or context is None:
        return cluster
    from streams.core.cluster import DEFAULT_CLUSTER
    from streams.settings import cluster_contexts, environment

    env = environment()
    mapping = cluster_contexts(env)
    if mapping and context not in mapping and env.cluster == DEFAULT_CLUSTER:
        # a mapping that misses the context would put this cluster's records in default
        raise click.UsageError(
            f"--context {context}: GANGSTATE_CLUSTER_CONTEXTS maps {', '.join(sorted(mapping))} "
            f"only; map it, or give --cluster (or GANGSTATE_CLUSTER)")
    return mapping.get(context)


def namespace_options(f: F) -> F:
    """``-n/--namespace NS`` and ``-A/--all-namespaces`` (the default when neither is given)."""
    return _apply(
        f,
        click.option("--namespace", "-n", default=None, metavar="NS",
                     help="only this namespace"),
        click.option("--all-namespaces", "-A", is_flag=True,
                     help="every namespace (the default without -n)"),
    )


def one_namespace(namespace: str | None, all_namespaces: bool) -> str | None:
    if namespace and all_namespaces:
        raise click.UsageError("-n/--namespace and -A/--all-namespaces exclude each other")
    return namespace


def name_options(what: str) -> Callable[[F], F]:
    """The ``NAME`` argument and ``-n/--namespace NS`` of a command about one ``what`` (``gang``,
    ``pod``), in kubectl's two spellings ``NS/NAME`` and ``NAME -n NS``; the command receives
    ``name`` and ``namespace`` and joins them with :func:`qualified`."""
    def decorate(f: F) -> F:
        return _apply(f, click.argument("name"),
                      click.option("--namespace", "-n", default=None, metavar="NS",
                                   help=f"the {what}'s namespace, when NAME has none"))
    return decorate


def qualified(name: str, namespace: str | None, what: str) -> str:
    """``NAME`` with ``-n NS`` or ``NS/NAME`` -> ``NS/NAME`` (kubectl's two spellings)."""
    if "/" in name:
        ns, _, _ = name.partition("/")
        if namespace and namespace != ns:
            raise click.UsageError(f"{what} {name!r} is in namespace {ns!r}, not -n {namespace}")
        return REF.convert(name, None, None)
    if not namespace:
        raise click.UsageError(f"{name!r} is not NAMESPACE/NAME (or give -n NAMESPACE)")
    return REF.convert(f"{namespace}/{name}", None, None)


def timeout_option(what: str) -> Callable[[F], F]:
    """``--timeout SECONDS`` (default ``streams.kafka.waiting.DEFAULT_TIMEOUT``, 30 s): how long
    an interactive command waits for ``what`` (it says on stderr that it is waiting, at the
    first failed attempt) before it gives up with one line and exit status 1; 0 gives up at the
    first failed attempt. The command receives ``timeout`` (seconds)."""
    from streams.kafka.waiting import DEFAULT_TIMEOUT

    return click.option("--timeout", type=SECONDS, default=DEFAULT_TIMEOUT, show_default=True,
                        metavar="SECONDS",
                        help=f"how long to wait for {what} before giving up (exit status 1)")
