"""The fold's settings and their defaults, and the shape of its outputs.

Where it sits: the bottom of the pure core, imported by the fold (``streams.core.fold``), the
rules (``streams.core.decide``, ``streams.core.episode``) and the shell's settings
(``streams.settings`` reads the defaults from here). Imports nothing of the core, so no
module of the core needs another one's settings through the fold.

Must not: read the environment or the clock, or import infrastructure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Output = dict[str, Any]
"""A ``gangstate.diagnostic/v1`` or ``gangstate.command/v1`` record, JSON-ready."""

QUIET_SECONDS = 600.0
"""Default event time without a failed attempt after which an episode has ended
(``FoldSettings.episode_quiet_seconds``; why 600 s: ``FoldSettings``)."""
STRANDED_SECONDS = 120.0
"""Default ``FoldSettings.stranded_seconds``: after a PreEnqueue hold ended, how long a member
refused during it may go without an attempt before it is told stranded. koord-scheduler
v1.8.0 hands out a gang group's members one per cycle as soon as its representative is
popped (rule ST1, docs/koordinator-rules.md), about a second per round on the recorded
cluster; two minutes leave room for a long scheduling queue."""


@dataclass(frozen=True, slots=True)
class FoldSettings:
    """Tunables of the fold, all in seconds of event time.

    ``grace_seconds``: how long a PreEnqueue hold (``GangNotInitialized``,
    ``GangMembersInsufficient``, ``GangGroupIncomplete``, ``GangMemberGated``: ``rules.hold.hold``)
    must last before its warning (default 10 s, contracts.md). ``tombstone_seconds``: how long a
    deleted uid is remembered so that a late, stale ADDED cannot bring it back (default 600 s).
    ``refresh_seconds``: a warned PreEnqueue hold whose facts keep
    changing (pods of a large gang arriving one by one) is re-emitted at most once per this
    interval, with the latest facts (default 10 s), so one Event is not rewritten per pod; a
    ``GangUnschedulable`` whose facts changed is re-emitted at most once per this interval too.
    ``episode_settle_seconds``: how long after its first failed attempt a failure episode's
    ``GangUnschedulable`` is first emitted (default 10 s: koord-scheduler v1.8.0 retries a gang
    about once per second, and in its first rounds each member in turn is the one that does not
    fit, so the facts settle within a few rounds). ``episode_quiet_seconds``: event time
    without a failed attempt after which the episode has ended (default 600 s: longer than
    kube-scheduler v1.35.2 keeps an unschedulable pod before retrying it anyway,
    ``DefaultPodMaxInUnschedulablePodsDuration`` 5 min plus the 10 s maximum backoff,
    ``pkg/scheduler/backend/queue/scheduling_queue.go:66,83``, so a gang retried only that
    rarely is still one episode; docs/contracts.md, "Failure episodes").
    ``stranded_seconds``: how long after a PreEnqueue hold ended a member refused during it
    and not attempted since is told ``GangMembersStranded`` (default 120 s:
    ``STRANDED_SECONDS``).
    ``holds``: whether gangstate holds a gang that cannot fit out of the scheduling queue
    (``HoldGang``, ``rules.holding``; default on; applied only where a scheduler shim reports
    the gang, so that without the shim it changes nothing). ``hold_ttl_seconds``: how long the
    shim keeps a hold that is not renewed (the
    command's ``ttl_seconds``, default 180 s); ``hold_renew_seconds``: how often gangstate
    renews a hold while it holds (default 60 s, below the TTL so that one lost renewal does not
    end it); ``hold_max_seconds``: the longest gangstate holds a gang before it lets the
    scheduler try it again (``ReleaseGang`` ``HoldExpired``, default 3,600 s).
    """

    grace_seconds: float = 10.0
    tombstone_seconds: float = 600.0
    refresh_seconds: float = 10.0
    episode_settle_seconds: float = 10.0
    episode_quiet_seconds: float = QUIET_SECONDS
    stranded_seconds: float = STRANDED_SECONDS
    holds: bool = True
    hold_ttl_seconds: float = 180.0
    hold_renew_seconds: float = 60.0
    hold_max_seconds: float = 3600.0

    @property
    def hold_renew_micros(self) -> int:
        """``hold_renew_seconds`` in microseconds."""
        return int(self.hold_renew_seconds * 1_000_000)

    @property
    def hold_ttl_micros(self) -> int:
        """``hold_ttl_seconds`` in microseconds."""
        return int(self.hold_ttl_seconds * 1_000_000)

    @property
    def hold_max_micros(self) -> int:
        """``hold_max_seconds`` in microseconds."""
        return int(self.hold_max_seconds * 1_000_000)

    @property
    def stranded_micros(self) -> int:
        """``stranded_seconds`` in microseconds."""
        return int(self.stranded_seconds * 1_000_000)

    @property
    def settle_micros(self) -> int:
        """``episode_settle_seconds`` in microseconds."""
        return int(self.episode_settle_seconds * 1_000_000)

    @property
    def quiet_micros(self) -> int:
        """``episode_quiet_seconds`` in microseconds."""
        return int(self.episode_quiet_seconds * 1_000_000)

    @property
    def refresh_micros(self) -> int:
        """``refresh_seconds`` in microseconds."""
        return int(self.refresh_seconds * 1_000_000)

    @property
    def grace_micros(self) -> int:
        """``grace_seconds`` in microseconds."""
        return int(self.grace_seconds * 1_000_000)

    @property
    def tombstone_micros(self) -> int:
        """``tombstone_seconds`` in microseconds."""
        return int(self.tombstone_seconds * 1_000_000)
