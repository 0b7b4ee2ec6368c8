"""A gang its scheduler stopped trying after its preemption made room (rule PR7 of
docs/koordinator-rules.md; the facts: ``streams.core.preemption``).

koord-scheduler v1.8.0 preempts for one gang member at a time (PR1). While a member preempts,
Coscheduling's PreFilter rejects its peer (the group's round is another member's), and a pod
Coscheduling rejected waits in the scheduler's unschedulable pods: Coscheduling registers no
cluster event (K ``coscheduling.go:109-112``), so the victims' deletion moves nothing, and the
other members are refused at PreEnqueue behind that representative (``representative ...
already exists``). The gang then waits for kube-scheduler's flush of unschedulable pods, up to
5 minutes after the rejection (``DefaultPodMaxInUnschedulablePodsDuration``, KS
``backend/queue/scheduling_queue.go:66,942-958``), with room for it all along. Seen on the real
scheduler in about one run in five (docs/cluster.md).

Reason: ``GangAwaitingRetry`` (Warning), told ``preemption.GONE_SETTLE_SECONDS`` after the last
victim was gone when no attempt of the gang came since (``preemption.stalled_due``); once per
preemption. With a scheduler shim reporting the gang (``GangState.shim_at``) it comes with an
``ActivateGang`` command (reason ``PreemptionDone``): the shim moves the group's pending members
to the active queue (``Handle.Activate``, docs/shim.md), and the gang is tried at once. Timer:
``retry``.

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from typing import Any

from .. import preemption as preemptions
from ..native import KOORDINATOR
from ..settings import FoldSettings, Output
from ..state import GangState, Member
from ..text import listing
from ..timefmt import format_time
from .base import (Decision, Reason, Rule, Step, TimerRule, activate_gang, diagnostic,
                   facts_digest, listed, plural, reason_of)
from .preemption import futile, preemption_live

NAMES_SHOWN = 5
"""Victims and waiting members a message names at most (the rest counted)."""


def _message(gang: str, f: dict[str, Any]) -> str:
    """The message of ``GangAwaitingRetry``, e.g. ``gang ns/g: its preemption made room (its
    victims ns/v-0 and ns/v-1 were gone by 2026-12-01T10:00:04.000000Z) but koord-scheduler has
    not tried it since: Coscheduling registers no cluster events, so g-0 and g-1 wait in the
    scheduler's unschedulable pods for kube-scheduler's flush, up to 5 minutes after their last
    attempt; gangstate asked the scheduler shim to activate them (ActivateGang)``."""
    n = len(f["waiting"])
    them = plural(n, "it", "them")
    victims = listing(f["victims"], NAMES_SHOWN)
    then = (f"gangstate asked the scheduler shim to activate {them} (ActivateGang)"
            if f["activated"] else
            f"deleting {them} so that {plural(n, 'its', 'their')} controller creates "
            f"{them} again retries the gang now")
    k = len(f["victims"])
    return (f"gang {gang}: its preemption made room ({plural(k, 'its victim', 'its victims')} "
            f"{victims} {plural(k, 'was', 'were')} gone by {f['gone_at']}) but "
            f"koord-scheduler has not tried it since: Coscheduling registers no cluster events, "
            f"so {listing(f['waiting'], NAMES_SHOWN)} {plural(n, 'waits', 'wait')} in the "
            f"scheduler's unschedulable pods for kube-scheduler's flush, up to 5 minutes after "
            f"{plural(n, 'its', 'their')} last attempt; {then}")


def _unblock(state: GangState, f: dict[str, Any]) -> str:
    if f["activated"]:
        return ("nothing to do: the scheduler shim activates the gang's pending members "
                "(ActivateGang) and the gang is tried at once")
    return ("delete the gang's pending pods so that their controller creates them again (a pod "
            "being created runs PreEnqueue at once), or wait for kube-scheduler's flush of "
            "unschedulable pods (at most 5 minutes)")


AWAITING: Reason = Reason("GangAwaitingRetry", "Warning", _message, _unblock)


def _live(state: GangState) -> bool:
    """A Koordinator gang whose preemption may be told and could make it bind (a futile one,
    ``rules.preemption.futile``, is told as wasted, PR6)."""
    return state.scheduler == KOORDINATOR and preemption_live(state) and not futile(state)


def stalled_facts(state: GangState) -> dict[str, Any] | None:
    """The facts of ``GangAwaitingRetry``: ``victims`` (``ns/name``, in the order preempted),
    ``gone_at`` (RFC 3339: the last victim gone), ``waiting`` (the pending members' names,
    sorted) and ``activated`` (a scheduler shim reports the gang, so ``ActivateGang`` goes
    with it); ``None`` when the gang was tried since its victims were gone, has no pending
    member, or its preemption is in progress."""
    gone = preemptions.untried_since_gone(state.preemption)
    p = state.preemption
    if p is None or gone is None or not _live(state):
        return None
    waiting = sorted(m.name for m in state.members.values() if m.pending)
    if not waiting:
        return None
    return {"victims": [v.pod for v in p.victims], "gone_at": format_time(gone),
            "waiting": waiting, "activated": state.shim_at is not None}


def retry_due(state: GangState, settings: FoldSettings | None = None) -> int | None:
    """When ``GangAwaitingRetry`` is due (``preemption.stalled_due``), for a live Koordinator
    gang; ``None`` otherwise. ``settings`` is not read (the ``TimerRule`` shape): the settle
    time is ``preemption.GONE_SETTLE_SECONDS``."""
    if not _live(state):
        return None
    return preemptions.stalled_due(state.preemption)


def warn_stalled(state: GangState, at: int,
                 settings: FoldSettings | None = None) -> tuple[GangState, list[Output]]:
    """At event time ``at`` (``settings`` not read: the ``TimerRule`` shape): ``GangAwaitingRetry`` on the gang's pods with ``stalled_facts``
    and, when a shim reports the gang, ``ActivateGang`` (reason ``PreemptionDone``) for its
    group, after the diagnostic; marks the preemption told (``stalled_at``) either way."""
    out: list[Output] = []
    p = state.preemption
    facts = stalled_facts(state)
    if p is None:
        return state, out
    state.preemption = p._replace(stalled_at=at)
    if facts is None:
        return state, out
    out.append(diagnostic(state, AWAITING, facts, at, facts_id=facts_digest(facts)))
    if facts["activated"]:
        state, cmd = activate_gang(state, "PreemptionDone", at)
        out.append(cmd)
    return state, out


def decide_retry(state: GangState, s: Step, out: list[Output]) -> GangState:
    """``warn_stalled`` when a record is decided at or after its due time (the timer fires
    first in a partition's fold; this covers a fold stepped record by record)."""
    due = retry_due(state)
    if due is None or s.at < due:
        return state
    state, fired = warn_stalled(state, s.at)
    out.extend(fired)
    return state


def retry_finding(state: GangState) -> dict[str, Any] | None:
    """``GangAwaitingRetry`` as a finding once told and while the gang is still not tried
    since its victims were gone (``stalled_facts``), ``since`` the last victim gone."""
    p = state.preemption
    if p is None or p.stalled_at is None:
        return None
    facts = stalled_facts(state)
    if facts is None:
        return None
    return {"reason": AWAITING.name, "type": AWAITING.type,
            "message": AWAITING.message(state.gang, facts), "facts": facts,
            "since": facts["gone_at"]}


def finding(state: GangState) -> list[dict[str, Any]]:
    """``retry_finding`` as the family's findings of ``describe gang`` (``[]`` or one)."""
    return listed(retry_finding(state))


def why(state: GangState, member: Member) -> dict[str, Any] | None:
    """Why a pending ``member`` waits once ``GangAwaitingRetry`` was told: in the unschedulable
    pods (or behind the representative at PreEnqueue), until the flush or an activation."""
    found = retry_finding(state)
    if found is None:
        return None
    return {"held_at": "the scheduling queue (unschedulable pods)",
            "held_by": "Coscheduling, which registers no cluster events",
            "reasons": [reason_of(found)],
            "unblock": [AWAITING.unblock_text(state, found["facts"])]}


TIMER: TimerRule = TimerRule("retry", "not tried since its preemption made room", retry_due,
                             warn_stalled)
DECISION: Decision = Decision("retry", decide_retry)
RULE: Rule = Rule("retry", (AWAITING,), (TIMER,), (DECISION,), finding, why)
