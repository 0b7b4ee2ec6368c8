"""Members refused at PreEnqueue during a hold that nothing will retry (rules ST1-ST5 of
docs/koordinator-rules.md); with a scheduler shim reporting the gang, gangstate has the shim
activate them (``ActivateGang``, reason ``MembersStranded``: ST5).

Reason: ``GangMembersStranded`` (Warning). Timer: ``stranded`` (``stranded_seconds`` after a
round ran since the hold ended).

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..records import CycleObserved, GangRecord, PodObserved
from ..settings import FoldSettings, Output
from ..state import GangState, Member, refused_member
from ..timefmt import format_time
from .base import (Decision, Reason, Rule, Step, TimerRule, activate_gang, diagnostic,
                   emit_digests, listed, plural, reason_of)
from .hold import GATED_NAMES_SHOWN
from .topology import NO_TOPOLOGY


def _message(gang: str, f: dict[str, Any]) -> str:
    n = len(f["stranded"])
    shown = ", ".join(f["stranded"][:GATED_NAMES_SHOWN]) + (
        f" and {n - GATED_NAMES_SHOWN} more" if n > GATED_NAMES_SHOWN else "")
    them = plural(n, 'it', 'them')
    then = (f"gangstate asked the scheduler shim to activate {them} (ActivateGang)"
            if f.get("activated") else
            f"delete {them} so that {plural(n, 'its', 'their')} controller creates {them} "
            f"again (or create {them} again yourself: a pod without a controller is created "
            f"again by no one)")
    return (f"gang {gang}: {shown} {plural(n, 'was', 'were')} refused at PreEnqueue and "
            f"koord-scheduler will not retry {them}: it runs PreEnqueue "
            f"again only for a pod being created, and no round of the gang group has "
            f"handed {them} out in {f['after_seconds']}s; {then}")


STRANDED: Reason = Reason("GangMembersStranded", "Warning", _message)


def track_refusals(before: GangState, state: GangState, rec: GangRecord, at: int) -> GangState:
    """Mark the members Coscheduling refuses at PreEnqueue, and when the hold ends.

    While the gang is held (``held_since``), every pending member without scheduling gates is
    refused at PreEnqueue (no Event; rule ST1): all of them when the hold begins, a member that
    joins or changes during it as it comes (``Member.refused_at``). A gated member is left out:
    its gates' plugin refused it, and that plugin requeues it when the gates are removed (G2).
    When the hold ends, ``released_at`` is set, and ``released_attempted`` when the scheduler
    first attempts a member after that (a round ran). The gang's first bind (no member was
    bound before) means its group was allowed at Permit, which ends the round: a pending member
    without an attempt then is marked too (it was refused behind the representative or as not
    yet attempted, P7/P8), and the bind counts as the attempt. Why it matters (ST1, with its
    sources in docs/koordinator-rules.md): a refused pod waits in the scheduling queue's
    unschedulable pods, and no cluster event, no 5-minute flush and no pod update moves it; the
    gang cache activates only a pod being created, or one child when a PodGroup makes the gang
    complete. The refused pod moves again only when a round of its gang group hands it out
    (NextPod), and a round ends when the group is allowed at Permit (its context cleared) or
    every pending member was attempted."""
    hold = state.hold
    if hold.held_since is not None:
        if before.hold.held_since is None:
            state.put_members({uid: refused_member(m, at)
                               for uid, m in state.members.items()
                               if m.pending and not m.gates and m.refused_at is None})
        elif isinstance(rec, PodObserved):
            changed = state.members.get(rec.uid)
            if changed is not None and changed.pending and not changed.gates \
                    and changed.refused_at is None:
                state.put_member(rec.uid, refused_member(changed, at))
        if hold.released_at is not None or hold.stranded_told \
                or hold.released_attempted is not None:
            state.hold = replace(hold, released_at=None, stranded_told=False,
                                 released_attempted=None)
    elif before.hold.held_since is not None:
        state.hold = replace(hold, released_at=at, stranded_told=False, released_attempted=None)
    elif isinstance(rec, CycleObserved) and hold.released_at is not None \
            and hold.released_attempted is None and rec.at >= hold.released_at \
            and not (rec.stage == "PreEnqueue" and rec.status != "Success") \
            and rec.reason != NO_TOPOLOGY:
        # a member refused for want of a cluster network topology opened no round (rule
        # NT1): the others wait behind it, and deleting them would not help
        state.hold = replace(hold, released_attempted=rec.at)
    if isinstance(rec, CycleObserved) and state.n_refused:
        state = _tried_culprit(state, rec)
    if state.hold.held_since is None and before.n_bound == 0 and state.n_bound > 0 \
            and state.n_pending > state.n_refused:
        # the gang's first bind: its group was allowed at Permit and the round's context
        # cleared (ST1); a member the round did not hand out was refused at PreEnqueue behind
        # the representative or as not yet attempted (P7/P8) and nothing retries it either
        left = {uid: refused_member(m, at) for uid, m in state.members.items()
                if m.pending and not m.gates and m.refused_at is None
                and (m.status is None or m.stage == "PreEnqueue")}
        state.put_members(left)
        if left and state.hold.released_at is None:
            state.hold = replace(state.hold, released_at=at, stranded_told=False)
        if state.hold.released_attempted is None and state.hold.released_at is not None:
            state.hold = replace(state.hold, released_attempted=at)
    return state


def _tried_culprit(state: GangState, rec: CycleObserved) -> GangState:
    """A refused member that ``rec`` names as its culprit, with a fit error, was tried and did
    not fit: Koordinator names the member that failed Filter in the rejections and releases
    of the others (rule ST2), and kube-scheduler writes
    a pod's own FailedScheduling Event only after its attempt (its own record, which the fold
    applies to the member, clears the refusal too: ``fold.apply_cycle``). Such a member is
    explained by its fit error, never told stranded: its own Event may come long after the
    others' (the scheduler throttles its Event writes), and deleting it would not make it
    fit. Clears its ``refused_at``."""
    if rec.culprit is None or rec.culprit == rec.pod or not rec.fit_error:
        return state
    found = state.member_by_name(rec.culprit)
    if found is not None and found[1].refused_at is not None and found[1].pending:
        state.put_member(found[0], refused_member(found[1], None))
    return state


def stranded_members(state: GangState) -> list[str]:
    """Names (sorted) of the pending members refused at PreEnqueue during the gang's last hold
    and not attempted since (``Member.refused_at``), while the gang is not held, neither by
    Koordinator nor by gangstate (``gangstate_holds``)."""
    if state.hold.held_since is not None or not state.n_refused or gangstate_holds(state):
        return []
    return sorted(m.name for m in state.members.values()
                  if m.refused_at is not None and m.pending)


def stranded_facts(state: GangState, at: int) -> dict[str, Any] | None:
    """The facts of ``GangMembersStranded`` at event time ``at``: ``stranded``
    (``stranded_members``) and ``after_seconds`` (whole seconds since the hold ended), and
    ``activated`` (``True``, only when a scheduler shim reports the gang: an ``ActivateGang``
    goes with the diagnostic, ST5), or ``None`` when no member is stranded."""
    names = stranded_members(state)
    released_at = state.hold.released_at
    if not names or released_at is None:
        return None
    facts: dict[str, Any] = {"stranded": names,
                             "after_seconds": (at - released_at) // 1_000_000}
    if state.shim_at is not None:
        facts["activated"] = True  # ST5: an ActivateGang goes with it
    return facts


def gangstate_holds(state: GangState) -> bool:
    """True while gangstate holds the gang out of the scheduling queue (``rules.holding``): no
    round runs then, by design, and the scheduler shim activates the members it refused when
    the hold ends (docs/shim.md), so no member is stranded meanwhile (ST4)."""
    return state.holding.issued_at is not None


def stranded_due(state: GangState, settings: FoldSettings) -> int | None:
    """When refused members are due to be told stranded (microseconds of event time):
    ``stranded_seconds`` after the scheduler first attempted a member since the hold ended (a
    round ran and may leave them out; ``released_attempted``), or after the hold ended for a
    gang that is not in its own gang group (a round of that group never hands out its pods,
    rule ST3); once per release.
    Without such evidence (the scheduler may be down or its queue long) nothing is said.
    ``None`` when no member is refused, the gang is held (by Koordinator or by gangstate:
    ``gangstate_holds``), or the release was told. After a hold of gangstate's, the wait starts
    again when it ended (ST4: the evidence of a round before it says nothing of after)."""
    hold = state.hold
    if not state.n_refused or hold.held_since is not None or hold.released_at is None \
            or hold.stranded_told or gangstate_holds(state):
        return None
    spec = state.spec
    since = state.holding.released_at or 0  # the end of gangstate's last hold, if any
    if hold.released_attempted is not None:
        return max(hold.released_attempted, since) + settings.stranded_micros
    if spec is None or state.gang in spec.groups:
        return None
    return max(hold.released_at, since) + settings.stranded_micros


def warn_stranded(state: GangState, at: int) -> tuple[GangState, list[dict[str, Any]]]:
    """Emit ``GangMembersStranded`` at ``at`` for the members still refused since the gang's
    last hold (``stranded_members``; facts ``stranded`` [names], ``after_seconds`` [whole
    seconds since the hold ended]), naming only those pods, followed, when a scheduler shim
    reports the gang, by ``ActivateGang`` (reason ``MembersStranded``, rule ST5). Marks the
    release as told."""
    out: list[dict[str, Any]] = []
    facts = stranded_facts(state, at)
    state.hold = replace(state.hold, stranded_told=True)
    if facts is not None:
        names = facts["stranded"]
        digest = emit_digests("GangMembersStranded", {"stranded": names})[0]
        if state.emitted.get("GangMembersStranded") != digest:
            named = set(names)
            uids = tuple(uid for uid, m in state.members.items() if m.name in named)
            out.append(diagnostic(state, STRANDED, facts, at, uids))
            state.emitted = {**state.emitted, "GangMembersStranded": digest}
            if facts.get("activated"):
                # ST5: the shim activates them (Handle.Activate), PreEnqueue runs again
                state, cmd = activate_gang(state, "MembersStranded", at)
                out.append(cmd)
    return state, out


def stranded_finding(state: GangState) -> dict[str, Any] | None:
    """``GangMembersStranded`` as a finding once it was told (``warn_stranded``) and while some
    of its members are still refused and pending: facts ``stranded`` (names) and
    ``after_seconds`` (whole seconds of event time since the hold ended, at the gang's clock),
    ``since`` the hold's end (RFC 3339); else ``None``."""
    if not state.hold.stranded_told:
        return None
    facts = stranded_facts(state, state.clock)
    released_at = state.hold.released_at
    if facts is None or released_at is None:
        return None
    return {"reason": STRANDED.name, "type": STRANDED.type,
            "message": _message(state.gang, facts), "facts": facts,
            "since": format_time(released_at)}


def finding(state: GangState) -> list[dict[str, Any]]:
    """``stranded_finding`` as the family's findings of ``describe gang`` (``[]`` or one)."""
    return listed(stranded_finding(state))


def why(state: GangState, member: Member) -> dict[str, Any] | None:
    """Why ``member`` is held when it is one of the members told stranded
    (``stranded_finding``): at ``PreEnqueue``, refused earlier and not retried; only a pod
    created again runs PreEnqueue again (ST1). ``None`` otherwise."""
    stranded = stranded_finding(state)
    delete = (f"delete {state.namespace}/{member.name} so that its controller creates it "
              f"again (or create it again yourself): koord-scheduler runs PreEnqueue again "
              f"only for a pod being created")
    if stranded is None or member.name not in stranded["facts"]["stranded"]:
        return _refused_why(state, member, delete)
    if stranded["facts"].get("activated"):
        delete = ("nothing to do: gangstate asked the scheduler shim to activate it "
                  "(ActivateGang), which runs PreEnqueue again; if it stays Pending, " + delete)
    return {"held_at": "PreEnqueue", "held_by": "Coscheduling, refused earlier and not retried",
            "reasons": [reason_of(stranded)], "unblock": [delete]}


REFUSED = "RefusedAtPreEnqueue"
"""The reason ``explain`` gives a member refused at PreEnqueue and not attempted since, before
``GangMembersStranded`` is told (or when it cannot be: no round ran yet)."""


def _refused_why(state: GangState, member: Member, delete: str) -> dict[str, Any] | None:
    """Why a member that ``stranded_members`` names is held before it is told stranded, once a
    round of its gang group ran since the hold ended (``released_attempted``) without handing
    it out: it was refused at PreEnqueue (``Member.refused_at``; the refusal writes no Event,
    ST1) and waits in the scheduling queue's unschedulable pods until a round hands it out
    (NextPod) or it is created again. A gang that went ahead without it reads as scheduled
    meanwhile, and before this explain said nothing held it. ``None`` for any other member
    (before any round, ``NotYetAttempted`` says what is known)."""
    ran = state.hold.released_attempted
    if ran is None or member.refused_at is None or not member.pending \
            or member.name not in stranded_members(state):
        return None
    group = state.gang_group
    then = ("gangstate tells GangMembersStranded and has the scheduler shim activate it "
            "(ActivateGang)" if state.shim_at is not None else
            "gangstate tells GangMembersStranded")
    wait = (f"a round of gang group {group} ran at {format_time(ran)} and did not hand it out: "
            f"unless a later one does, {then}")
    return {"held_at": "PreEnqueue", "held_by": "Coscheduling, refused earlier",
            "reasons": [{
                "reason": REFUSED,
                "facts": {"refused_at": format_time(member.refused_at), "gang_group": group},
                "message": (f"the pod was refused at PreEnqueue at "
                            f"{format_time(member.refused_at)} (no Event) and not attempted "
                            f"since: it waits among the unschedulable pods until a round of "
                            f"gang group {group} hands it out, which no cluster event "
                            f"triggers; koord-scheduler runs PreEnqueue again otherwise only "
                            f"for a pod being created")}],
            "unblock": [wait + f"; to move it now, {delete}"]}


def _fire(state: GangState, due: int, settings: FoldSettings) -> tuple[GangState, list[Output]]:
    return warn_stranded(state, due)


TIMER: TimerRule = TimerRule("stranded", "refused members not retried", stranded_due, _fire)
def _decide(state: GangState, s: Step, out: list[Output]) -> GangState:
    return track_refusals(s.before, state, s.rec, s.at)


DECISION: Decision = Decision("stranded", _decide)
RULE: Rule = Rule("stranded", (STRANDED,), (TIMER,), (DECISION,), finding, why)
