"""Runtime configuration of the shell: Kafka address, topic names, partitions, fold settings.

Where it sits: read once by the CLI, the worker, producers and sinks; the core never reads it
(the fold gets a ``FoldSettings`` value). Values come from the environment, so the same settings
reach the CLI, the worker subprocess and ``docker-compose.yml``:

| variable | default | meaning |
|---|---|---|
| ``KAFKA_BOOTSTRAP_SERVERS`` | unset (the demo starts the local broker) | ``host:port[,host:port]`` |
| ``GANGSTATE_TOPIC_PREFIX`` | ``gangstate.`` | prefix of every topic |
| ``GANGSTATE_PARTITIONS`` | ``8`` | partitions of ``gang-events`` (outputs and changelogs follow) |
| ``GANGSTATE_APP_ID`` | ``gangstate`` | Faust application id (consumer group, changelog names) |
| ``GANGSTATE_GRACE_SECONDS`` | ``10`` | hold-warning grace period, seconds of event time |
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from streams.core.fold import FoldSettings


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

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Settings":
        """Read the settings from ``env`` (default ``os.environ``). Raises ``ValueError`` on a
        non-numeric ``GANGSTATE_PARTITIONS`` or ``GANGSTATE_GRACE_SECONDS``."""
        e = os.environ if env is None else env
        return cls(
            bootstrap=e.get("KAFKA_BOOTSTRAP_SERVERS") or None,
            topics=Topics(e.get("GANGSTATE_TOPIC_PREFIX", "gangstate.")),
            partitions=int(e.get("GANGSTATE_PARTITIONS", "8")),
            app_id=e.get("GANGSTATE_APP_ID", "gangstate"),
            fold=FoldSettings(grace_seconds=float(e.get("GANGSTATE_GRACE_SECONDS", "10"))),
        )
