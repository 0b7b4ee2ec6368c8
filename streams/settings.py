"""Runtime configuration of the shell: Kafka address, topic names, partitions, fold settings.

Where it sits: read once by the CLI, the worker, producers and sinks; the core never reads it
(the fold gets a ``FoldSettings`` value). Values come from the environment, read here and only
here (``Environment``, pydantic-settings), so the same settings reach the CLI, the worker
subprocess and ``docker-compose.yml``; a value that cannot be used is a ``SettingsError`` of one
line, which the CLI prints (exit status 2):

| variable | default | meaning |
|---|---|---|
| ``KAFKA_BOOTSTRAP_SERVERS`` | unset (the demo starts the local broker) | ``host:port[,host:port]`` |
| ``GANGSTATE_TOPIC_PREFIX`` | ``gangstate.`` | prefix of every topic |
| ``GANGSTATE_PARTITIONS`` | ``8`` | partitions of ``gang-events`` (outputs and changelogs follow) |
| ``GANGSTATE_APP_ID`` | ``gangstate`` | Faust application id (consumer group, changelog names) |
| ``GANGSTATE_GRACE_SECONDS`` | ``10`` | hold-warning grace period, seconds of event time |
| ``GANGSTATE_STRANDED_SECONDS`` | ``120`` | after a round ran, how long a member refused at PreEnqueue may go unattempted before ``GangMembersStranded``, seconds of event time |
| ``GANGSTATE_HOLDS`` | ``on`` | ``on``: hold a gang that cannot fit out of the scheduling queue (``HoldGang``, docs/shim.md; only where the scheduler shim runs); ``off``: never, cluster-wide |
| ``GANGSTATE_HOLD_TTL_SECONDS`` | ``180`` | how long the scheduler shim keeps a hold gangstate does not renew |
| ``GANGSTATE_HOLD_RENEW_SECONDS`` | ``60`` | how often gangstate renews a hold (below the TTL) |
| ``GANGSTATE_HOLD_MAX_SECONDS`` | ``3600`` | the longest gangstate holds a gang before the scheduler tries it again |
| ``GANGSTATE_SERVER`` | ``http://127.0.0.1:6066`` | the worker the query commands ask |
| ``GANGSTATE_CLUSTER`` | ``default`` | the cluster a watch producer, sink or query serves (a DNS-1123 label such as ``eu-1``) |
| ``GANGSTATE_CLUSTER_CONTEXTS`` | unset | kubeconfig contexts of the fleet's clusters, ``CONTEXT=CLUSTER[,CONTEXT=CLUSTER...]`` (``kind-eu=eu-1,prod-us=us-2``): the query commands' ``--context CONTEXT`` reads that cluster |
| ``GANGSTATE_METRICS_MAX_CLUSTERS`` | ``20`` | clusters a worker's gang gauges label by name (the first in cluster id order); the others are summed under ``cluster="other"`` |
| ``GANGSTATE_DATA_DIR`` | ``~/.cache/gangstate/worker`` | the worker's Faust data folder |
| ``GANGSTATE_MAX_SKEW_SECONDS`` | ``60`` | how far a record's ``observed_at`` may be ahead of its Kafka timestamp |
| ``POD_IP`` | unset | the address a worker advertises for its views (Kubernetes downward API) |
| ``KAFKA_SECURITY_PROTOCOL`` | ``PLAINTEXT`` | ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL`` |
| ``KAFKA_SASL_MECHANISM`` | ``PLAIN`` with a SASL protocol | ``PLAIN``, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512`` |
| ``KAFKA_SASL_USERNAME`` | unset | SASL user (needed with a SASL protocol) |
| ``KAFKA_SASL_PASSWORD`` | unset | its password (or ``KAFKA_SASL_PASSWORD_FILE``: a file holding it) |
| ``KAFKA_SSL_CAFILE`` | the system's CAs | PEM file of the CAs that signed the brokers' certificates |
| ``KAFKA_SSL_CERTFILE`` / ``KAFKA_SSL_KEYFILE`` | unset | client certificate and key (PEM), for brokers that require them |
| ``KAFKA_SSL_CHECK_HOSTNAME`` | ``true`` | check that a broker's certificate names the address dialled |

The ``KAFKA_*`` security variables are the Kafka client settings of the same names
(``security.protocol``, ``sasl.mechanism``, ``sasl.username``/``sasl.password`` as librdkafka
spells them, ``ssl.ca.location`` as ``ssl.cafile`` after Python's ``ssl``): ``KafkaSecurity``
turns them into the keyword arguments of kafka-python, of aiokafka and of Faust
(docs/kafka-security.md).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from streams.core.cluster import DEFAULT_CLUSTER, cluster_problem
from streams.core.settings import FoldSettings
from streams.wire.decoding import MAX_SKEW_SECONDS


class SettingsError(ValueError):
    """An environment variable with a value gangstate cannot use; ``str(err)`` is one line
    naming the variable, what is wrong and the value given."""


class Environment(BaseSettings):
    """Every environment variable gangstate reads, in one place, with one prefix (``GANGSTATE_``)
    besides Kafka's conventional ``KAFKA_BOOTSTRAP_SERVERS``. Read by ``Settings.from_env`` (and
    ``environment()``); nothing else reads ``os.environ`` for these."""

    model_config = SettingsConfigDict(env_prefix="GANGSTATE_", extra="ignore", frozen=True)

    kafka_bootstrap_servers: str | None = Field(
        default=None, validation_alias=AliasChoices("KAFKA_BOOTSTRAP_SERVERS"))
    topic_prefix: str = "gangstate."
    partitions: int = Field(default=8, gt=0)
    app_id: str = Field(default="gangstate", min_length=1)
    grace_seconds: float = Field(default=10.0, ge=0, allow_inf_nan=False)
    stranded_seconds: float = Field(default=120.0, ge=0, allow_inf_nan=False)
    holds: Literal["on", "off"] = "on"
    """``GANGSTATE_HOLDS``: ``on`` (the default) lets gangstate hold gangs that cannot fit
    where the scheduler shim runs; ``off`` turns its holds off cluster-wide."""
    hold_ttl_seconds: float = Field(default=180.0, ge=1, allow_inf_nan=False)
    hold_renew_seconds: float = Field(default=60.0, ge=1, allow_inf_nan=False)
    hold_max_seconds: float = Field(default=3600.0, ge=1, allow_inf_nan=False)
    cluster: str = DEFAULT_CLUSTER
    """``GANGSTATE_CLUSTER``: the cluster this component serves (a DNS-1123 label,
    docs/fleet.md): the watch producer stamps it on every record, the Event sink writes only
    its diagnostics, the query commands show its gangs; ``default`` (the default) is the single
    cluster of a gangstate without fleet. Workers serve every cluster and ignore it."""
    server: str | None = None
    """``GANGSTATE_SERVER``: the worker whose views the query commands ask."""
    cluster_contexts: str = ""
    """``GANGSTATE_CLUSTER_CONTEXTS``: ``CONTEXT=CLUSTER`` pairs separated by commas
    (``kind-eu=eu-1,prod-us=us-2``), the cluster id of each kubeconfig context of the fleet:
    ``--context CONTEXT`` of the query commands reads that cluster (``cluster_contexts``)."""
    metrics_max_clusters: int = Field(default=20, ge=1)
    """``GANGSTATE_METRICS_MAX_CLUSTERS``: how many clusters the worker's gang gauges name in
    their ``cluster`` label (``streams.worker.metrics.TableCollector``); the others are counted
    under ``cluster="other"``."""

    @field_validator("cluster")
    @classmethod
    def _cluster_id(cls, value: str) -> str:
        problem = cluster_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("cluster_contexts")
    @classmethod
    def _context_map(cls, value: str) -> str:
        parse_cluster_contexts(value)
        return value
    data_dir: str | None = None
    """``GANGSTATE_DATA_DIR``: the worker's Faust data folder."""
    max_skew_seconds: float = Field(default=MAX_SKEW_SECONDS, gt=0, allow_inf_nan=False)
    """``GANGSTATE_MAX_SKEW_SECONDS``: how far ahead of its Kafka timestamp a record's
    ``observed_at`` may be, seconds (``streams.wire.decoding.check_skew``)."""
    pod_ip: str | None = Field(default=None, validation_alias=AliasChoices("POD_IP"))
    """``POD_IP``: the pod's address (downward API ``status.podIP``), which the worker
    advertises to the other workers for its views."""
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT", validation_alias=AliasChoices("KAFKA_SECURITY_PROTOCOL"))
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        default=None, validation_alias=AliasChoices("KAFKA_SASL_MECHANISM"))
    kafka_sasl_username: str | None = Field(
        default=None, validation_alias=AliasChoices("KAFKA_SASL_USERNAME"))
    kafka_sasl_password: str | None = Field(
        default=None, repr=False, validation_alias=AliasChoices("KAFKA_SASL_PASSWORD"))
    kafka_sasl_password_file: str | None = Field(
        default=None, validation_alias=AliasChoices("KAFKA_SASL_PASSWORD_FILE"))
    kafka_ssl_cafile: str | None = Field(
        default=None, validation_alias=AliasChoices("KAFKA_SSL_CAFILE"))
    kafka_ssl_certfile: str | None = Field(
        default=None, validation_alias=AliasChoices("KAFKA_SSL_CERTFILE"))
    kafka_ssl_keyfile: str | None = Field(
        default=None, validation_alias=AliasChoices("KAFKA_SSL_KEYFILE"))
    kafka_ssl_check_hostname: bool = Field(
        default=True, validation_alias=AliasChoices("KAFKA_SSL_CHECK_HOSTNAME"))


def parse_cluster_contexts(text: str) -> dict[str, str]:
    """``CONTEXT=CLUSTER[,CONTEXT=CLUSTER...]`` (``GANGSTATE_CLUSTER_CONTEXTS``) -> ``{context:
    cluster id}``; blanks around names and empty entries are ignored (``""`` is no context).
    A context name is any text without ``,`` and ``=`` (``kind-eu``,
    ``arn:aws:eks:eu-west-1:1234:cluster/prod``); a cluster id a DNS-1123 label
    (``streams.core.cluster``). Raises ``ValueError`` (one line) on an entry without ``=``, an
    empty context, a bad cluster id or a context given two clusters."""
    out: dict[str, str] = {}
    for entry in text.split(","):
        if not entry.strip():
            continue
        context, sep, cluster = (part.strip() for part in entry.partition("="))
        if not sep or not context:
            raise ValueError(f"{entry.strip()!r} is not CONTEXT=CLUSTER (e.g. kind-eu=eu-1)")
        problem = cluster_problem(cluster)
        if problem is not None:
            raise ValueError(f"context {context!r}: {problem}")
        if out.get(context, cluster) != cluster:
            raise ValueError(f"context {context!r} is given two clusters, {out[context]!r} and "
                             f"{cluster!r}")
        out[context] = cluster
    return out


def cluster_contexts(e: Environment | None = None) -> dict[str, str]:
    """The kubeconfig contexts of ``GANGSTATE_CLUSTER_CONTEXTS`` and their cluster ids
    (``parse_cluster_contexts``) from the environment ``e`` (default: read now); raises
    ``SettingsError`` (one line) on a bad value."""
    return parse_cluster_contexts((environment() if e is None else e).cluster_contexts)


def fold_settings(e: Environment | None = None) -> FoldSettings:
    """The fold's settings from the environment ``e`` (default: read now): grace, stranded
    time and holds (``GANGSTATE_HOLDS`` and its TTL, renewal and longest hold), so that the
    worker and an offline fold (``gangstate fold``, ``explain``/``describe --from``) decide
    alike. Raises ``SettingsError`` (one line) on a bad value, or a renewal not below the
    TTL."""
    e = environment() if e is None else e
    if e.hold_renew_seconds >= e.hold_ttl_seconds:
        raise SettingsError(
            f"GANGSTATE_HOLD_RENEW_SECONDS={e.hold_renew_seconds:g}: must be below "
            f"GANGSTATE_HOLD_TTL_SECONDS={e.hold_ttl_seconds:g} (a hold renewed no sooner "
            f"than it lapses would lapse)")
    return FoldSettings(grace_seconds=e.grace_seconds, stranded_seconds=e.stranded_seconds,
                        holds=e.holds == "on", hold_ttl_seconds=e.hold_ttl_seconds,
                        hold_renew_seconds=e.hold_renew_seconds,
                        hold_max_seconds=e.hold_max_seconds)


def environment() -> Environment:
    """The environment, validated; raises ``SettingsError`` (one line) on a bad value."""
    try:
        return Environment()
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        name = str(first["loc"][0]) if first["loc"] else "?"
        variable = name if name.isupper() else f"GANGSTATE_{name.upper()}"
        msg = str(first["msg"]).removeprefix("Value error, ")  # pydantic's, for a validator's
        raise SettingsError(f"{variable}={first.get('input')!r}: {msg}") from None


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
"""Kafka's ``security.protocol`` values gangstate's clients speak."""
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
"""Kafka's ``sasl.mechanism`` values gangstate's clients speak."""
SECURITY_VARIABLES = ("KAFKA_SECURITY_PROTOCOL", "KAFKA_SASL_MECHANISM", "KAFKA_SASL_USERNAME",
                      "KAFKA_SASL_PASSWORD", "KAFKA_SASL_PASSWORD_FILE", "KAFKA_SSL_CAFILE",
                      "KAFKA_SSL_CERTFILE", "KAFKA_SSL_KEYFILE", "KAFKA_SSL_CHECK_HOSTNAME")
"""The environment variables ``security_from`` reads (``KafkaSecurity.env`` writes them all but
the password file)."""


@dataclass(frozen=True)
class KafkaSecurity:
    """How every Kafka client of gangstate connects: Kafka's ``security.protocol``,
    ``sasl.mechanism``, SASL user and password, and the TLS files (PEM paths). The default is
    ``PLAINTEXT`` (no TLS, no SASL), as Kafka's own clients.

    ``kafka_python()`` (kafka-python's keyword arguments) and ``ssl_context()`` serve the
    clients; the worker turns the same value into Faust credentials. Raises ``SettingsError``
    (one line) from ``check()`` when the combination cannot work (a SASL protocol without user
    or password, a mechanism without SASL, a missing file)."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool = True

    @property
    def uses_ssl(self) -> bool:
        """TLS on the connection (``SSL`` or ``SASL_SSL``)."""
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        """SASL authentication (``SASL_PLAINTEXT`` or ``SASL_SSL``)."""
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def mechanism(self) -> str | None:
        """The SASL mechanism in use (``PLAIN`` when SASL is on and none was named)."""
        return (self.sasl_mechanism or "PLAIN") if self.uses_sasl else None

    def check(self) -> "KafkaSecurity":
        """Return self when usable; else raise ``SettingsError`` naming the variable."""
        if self.protocol not in SECURITY_PROTOCOLS:
            raise SettingsError(f"KAFKA_SECURITY_PROTOCOL={self.protocol!r}: not one of "
                                f"{', '.join(SECURITY_PROTOCOLS)}")
        if self.sasl_mechanism and self.sasl_mechanism not in SASL_MECHANISMS:
            raise SettingsError(f"KAFKA_SASL_MECHANISM={self.sasl_mechanism!r}: not one of "
                                f"{', '.join(SASL_MECHANISMS)}")
        if self.sasl_mechanism and not self.uses_sasl:
            raise SettingsError(f"KAFKA_SASL_MECHANISM={self.sasl_mechanism!r} needs "
                                f"KAFKA_SECURITY_PROTOCOL SASL_SSL or SASL_PLAINTEXT, not "
                                f"{self.protocol}")
        if self.uses_sasl and not (self.sasl_username and self.sasl_password is not None):
            raise SettingsError(f"KAFKA_SECURITY_PROTOCOL={self.protocol}: set "
                                "KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD "
                                "(or KAFKA_SASL_PASSWORD_FILE)")
        for variable, path in (("KAFKA_SSL_CAFILE", self.ssl_cafile),
                               ("KAFKA_SSL_CERTFILE", self.ssl_certfile),
                               ("KAFKA_SSL_KEYFILE", self.ssl_keyfile)):
            if path and not Path(path).is_file():
                raise SettingsError(f"{variable}={path!r}: no such file")
        if self.ssl_keyfile and not self.ssl_certfile:
            raise SettingsError("KAFKA_SSL_KEYFILE needs KAFKA_SSL_CERTFILE")
        return self

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of every client (``None`` without TLS): the system's CAs or
        ``ssl_cafile``, the client certificate when given, host names checked unless
        ``ssl_check_hostname`` is false."""
        if not self.uses_ssl:
            return None
        context = ssl.create_default_context(cafile=self.ssl_cafile)
        if self.ssl_certfile:
            context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
        context.check_hostname = self.ssl_check_hostname
        return context

    def kafka_python(self) -> dict[str, Any]:
        """Keyword arguments for kafka-python's ``KafkaProducer``, ``KafkaConsumer`` and
        ``KafkaAdminClient`` (its ``sasl_plain_*`` names serve PLAIN and SCRAM alike)."""
        config: dict[str, Any] = {"security_protocol": self.protocol}
        if self.uses_ssl:
            config["ssl_context"] = self.ssl_context()
        if self.uses_sasl:
            config.update(sasl_mechanism=self.mechanism,
                          sasl_plain_username=self.sasl_username,
                          sasl_plain_password=self.sasl_password)
        return config

    def env(self) -> dict[str, str]:
        """The ``KAFKA_*`` variables that give this value back (for a child process)."""
        values = {
            "KAFKA_SECURITY_PROTOCOL": self.protocol,
            "KAFKA_SASL_MECHANISM": self.sasl_mechanism,
            "KAFKA_SASL_USERNAME": self.sasl_username,
            "KAFKA_SASL_PASSWORD": self.sasl_password,
            "KAFKA_SSL_CAFILE": self.ssl_cafile,
            "KAFKA_SSL_CERTFILE": self.ssl_certfile,
            "KAFKA_SSL_KEYFILE": self.ssl_keyfile,
            "KAFKA_SSL_CHECK_HOSTNAME": "true" if self.ssl_check_hostname else "false",
        }
        return {k: v for k, v in values.items() if v is not None}


def read_password_file(path: str, given_as: str) -> str:
    """The SASL password held in file ``path`` (its text without the trailing line break).
    Raises ``SettingsError`` ``"<given_as>: <why>"`` when the file cannot be read
    (``given_as``: the variable or flag that named ``path``, with it)."""
    try:
        return Path(path).read_text().rstrip("\r\n")
    except OSError as err:
        raise SettingsError(f"{given_as}: {err.strerror}") from None


def security_from(e: Environment) -> KafkaSecurity:
    """The ``KafkaSecurity`` of an environment; reads ``KAFKA_SASL_PASSWORD_FILE`` when
    ``KAFKA_SASL_PASSWORD`` is unset. Raises ``SettingsError`` (one line)."""
    password = e.kafka_sasl_password
    if password is None and e.kafka_sasl_password_file:
        password = read_password_file(
            e.kafka_sasl_password_file,
            f"KAFKA_SASL_PASSWORD_FILE={e.kafka_sasl_password_file!r}")
    return KafkaSecurity(
        protocol=e.kafka_security_protocol, sasl_mechanism=e.kafka_sasl_mechanism,
        sasl_username=e.kafka_sasl_username, sasl_password=password,
        ssl_cafile=e.kafka_ssl_cafile, ssl_certfile=e.kafka_ssl_certfile,
        ssl_keyfile=e.kafka_ssl_keyfile, ssl_check_hostname=e.kafka_ssl_check_hostname,
    ).check()


@dataclass(frozen=True)
class Topics:
    """Full topic names for one prefix (contracts.md, "Topics")."""

    prefix: str = "gangstate."

    @property
    def gang_events(self) -> str:
        """The one ordered input log, keyed by gang id."""
        return f"{self.prefix}gang-events"

    @property
    def diagnostics(self) -> str:
        """``gangstate.diagnostic/v1`` records, keyed by gang id."""
        return f"{self.prefix}diagnostics"

    @property
    def commands(self) -> str:
        """``gangstate.command/v1`` records, keyed by gang group id."""
        return f"{self.prefix}commands"

    @property
    def dead_letters(self) -> str:
        """``gangstate.dead-letter/v1`` records, keyed by the original key."""
        return f"{self.prefix}dead-letters"

    def resolve(self, name: str) -> str:
        """Full name of a topic given short (``diagnostics``) or full; unknown names pass."""
        short = {"gang-events", "diagnostics", "commands", "dead-letters"}
        return f"{self.prefix}{name}" if name in short else name


@dataclass(frozen=True)
class Settings:
    """Everything the shell needs; build with ``Settings.from_env()``."""

    bootstrap: str | None = None
    topics: Topics = field(default_factory=Topics)
    partitions: int = 8
    app_id: str = "gangstate"
    fold: FoldSettings = field(default_factory=FoldSettings)
    cluster: str = DEFAULT_CLUSTER
    """The cluster this component serves (``GANGSTATE_CLUSTER``, ``streams.core.cluster``)."""
    max_skew_seconds: float = MAX_SKEW_SECONDS
    """How far a record's ``observed_at`` may be ahead of its Kafka timestamp, seconds."""

    @property
    def max_skew_micros(self) -> int:
        """``max_skew_seconds`` in microseconds."""
        return int(self.max_skew_seconds * 1_000_000)
    security: KafkaSecurity = field(default_factory=KafkaSecurity)
    """How the clients connect (TLS, SASL); ``PLAINTEXT`` by default."""

    def kafka_python(self, **config: Any) -> dict[str, Any]:
        """Keyword arguments of a kafka-python client of this Kafka: ``bootstrap_servers``,
        the security settings, then ``config``."""
        return {"bootstrap_servers": self.bootstrap, **self.security.kafka_python(), **config}

    def with_flags(self, bootstrap: str | None = None, prefix: str | None = None,
                   security: dict[str, Any] | None = None) -> "Settings":
        """These settings with command-line flags applied: ``--bootstrap``, ``--prefix`` and
        the security flags (``KafkaSecurity`` field name -> value; ``None`` values are
        ignored). Raises ``SettingsError`` when the result cannot work."""
        changed = self
        if bootstrap:
            changed = replace(changed, bootstrap=bootstrap)
        if prefix:
            changed = replace(changed, topics=Topics(prefix))
        given = {k: v for k, v in (security or {}).items() if v is not None}
        if given:
            if "security_protocol" in given:
                given["protocol"] = given.pop("security_protocol")
            password_file = given.pop("sasl_password_file", None)
            if password_file:
                given["sasl_password"] = read_password_file(
                    password_file, f"--sasl-password-file {password_file}")
            changed = replace(changed, security=replace(changed.security, **given).check())
        return changed

    @classmethod
    def from_env(cls) -> "Settings":
        """Read the settings from the environment (``Environment``). Raises ``SettingsError``
        (one line) on a value that cannot be used, e.g. a non-numeric
        ``GANGSTATE_PARTITIONS``."""
        e = environment()
        return cls(
            bootstrap=e.kafka_bootstrap_servers or None,
            topics=Topics(e.topic_prefix),
            partitions=e.partitions,
            app_id=e.app_id,
            fold=fold_settings(e),
            cluster=e.cluster,
            max_skew_seconds=e.max_skew_seconds,
            security=security_from(e),
        )


def own_app_id(settings: Settings) -> str | None:
    """The app id to suggest when ``settings`` has a topic prefix of its own but the default
    app id (``gangstate-<prefix>``), whose consumer groups (and the worker's table) every
    component of the default app id shares whatever its topics; ``None`` otherwise."""
    default = Settings()
    if settings.topics.prefix == default.topics.prefix or settings.app_id != default.app_id:
        return None
    return "gangstate-" + (settings.topics.prefix.rstrip(".-_") or "own")
