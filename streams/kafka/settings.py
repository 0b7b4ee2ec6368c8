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
| ``GANGSTATE_SERVER`` | ``http://127.0.0.1:6066`` | the worker the query commands ask |
| ``GANGSTATE_DATA_DIR`` | ``~/.cache/gangstate/worker`` | the worker's Faust data folder |
| ``GANGSTATE_MAX_SKEW_SECONDS`` | ``60`` | how far a record's ``observed_at`` may be ahead of its Kafka timestamp |
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import AliasChoices, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from streams.core.fold import FoldSettings
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
    server: str | None = None
    """``GANGSTATE_SERVER``: the worker whose views the query commands ask."""
    data_dir: str | None = None
    """``GANGSTATE_DATA_DIR``: the worker's Faust data folder."""
    max_skew_seconds: float = Field(default=MAX_SKEW_SECONDS, gt=0, allow_inf_nan=False)
    """``GANGSTATE_MAX_SKEW_SECONDS``: how far ahead of its Kafka timestamp a record's
    ``observed_at`` may be, seconds (``streams.wire.decoding.check_skew``)."""


def environment() -> Environment:
    """The environment, validated; raises ``SettingsError`` (one line) on a bad value."""
    try:
        return Environment()
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        name = str(first["loc"][0]) if first["loc"] else "?"
        variable = name if name.isupper() else f"GANGSTATE_{name.upper()}"
        raise SettingsError(f"{variable}={first.get('input')!r}: {first['msg']}") from None


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
    max_skew_seconds: float = MAX_SKEW_SECONDS
    """How far a record's ``observed_at`` may be ahead of its Kafka timestamp, seconds."""

    @property
    def max_skew_micros(self) -> int:
        """``max_skew_seconds`` in microseconds."""
        return int(self.max_skew_seconds * 1_000_000)

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
            fold=FoldSettings(grace_seconds=e.grace_seconds),
            max_skew_seconds=e.max_skew_seconds,
        )
