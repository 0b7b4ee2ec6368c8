"""The gang group's peer-summary protocol: how a gang learns the other gangs of its group.

A gang of a multi-gang group tells the other gangs about itself (``gangstate.gang-summary/v1``
records, ``decide_summaries``) whenever its summary changes; a gang held by its group asks its
peers for their state as of a time (``peers_to_ask``) before it warns, and answers their
questions when its ``answers`` timer fires (``answer_peers``). No Event reason of its own.

Must not: read the clock, do I/O or import infrastructure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..native import KOORDINATOR, KUBE_SCHEDULER
from ..records import GangRecord, GangSummarized
from ..settings import FoldSettings, Output
from ..state import GangState, Summary, own_summary
from ..timefmt import format_time
from .base import Decision, Rule, SUMMARY_SCHEMA, Step, TimerRule, in_cluster

def peers_to_ask(state: GangState, as_of: int) -> list[str]:
    """The other gangs of the group whose last summary is older than ``as_of`` (or missing).

    A gang held by its group must not be warned about with stale news of the other gangs:
    through Kafka a peer's summary reaches this gang's partition later than this gang's own
    records, so before a ``GangGroupIncomplete`` warning due at ``as_of`` the gang asks these
    peers for their state as of at least ``as_of`` and waits for the answers.
    """
    spec = state.spec
    if spec is None:
        return []
    peers = state.group.peers
    return [g for g in spec.groups if g != state.gang
            and (g not in peers or peers[g].as_of < as_of)]


def awaiting_answers(state: GangState) -> bool:
    """True while the gang has asked its peers (``asked_as_of``) and some answer is missing."""
    asked_as_of = state.group.asked_as_of
    return asked_as_of is not None and bool(peers_to_ask(state, asked_as_of))


SUMMARY_LOG = 32
"""How many of its own summaries a gang of a multi-gang group keeps to answer "as of"."""


def summary_as_of(state: GangState, at: int) -> Summary:
    """The gang's own summary as it was at event time ``at``: the last logged summary that
    began at or before ``at``; before the first one the gang did not exist yet; when the log
    has been cut and ``at`` is older than what it holds, the oldest entry (the best known)."""
    log = state.group.summary_log
    for begun, summary in reversed(log):
        if begun <= at:
            return summary
    if log and len(log) >= SUMMARY_LOG:
        return log[0][1]
    return ((), False, False, 0, None, False)


def answer_peers(state: GangState, due: int) -> tuple[GangState, list[dict[str, Any]]]:
    """Send this gang's summary as of ``due`` to every peer that asked for it by then."""
    pending = state.group.pending_answers
    asked = sorted(g for g, t in pending.items() if t <= due)
    then = summary_as_of(state, due)
    out = [summary_record(state, g, due, summary=then) for g in asked]
    state.group = replace(state.group,
                          pending_answers={g: t for g, t in pending.items() if t > due})
    return state, out


def summary_record(state: GangState, to: str, at: int, wanted_as_of: int | None = None,
                   summary: Summary | None = None) -> dict[str, Any]:
    """A ``gangstate.gang-summary/v1`` record telling gang ``to`` about ``state``'s gang as of
    event time ``at`` (``summary``, default the current one); ``wanted_as_of`` asks ``to`` for
    its own summary as of that time."""
    groups, exists, initialized, members, min_member, once = summary or own_summary(state)
    record = {"schema": SUMMARY_SCHEMA, "observed_at": format_time(at), "gang": state.gang,
              **in_cluster(state), "to": to, "gang_group": state.gang_group, "groups": list(groups),
              "exists": exists, "initialized": initialized, "members": members,
              "min_member": min_member}
    if once:
        record["once_satisfied"] = True
    if wanted_as_of is not None:
        record["wanted_as_of"] = format_time(wanted_as_of)
    return record


def decide_summaries(before: GangState, state: GangState, rec: GangRecord, at: int,
                      out: list[dict[str, Any]]) -> GangState:
    """Tell the other gangs of the gang group about this gang when its summary changed, and
    answer a gang that introduced itself (its summary lists this gang) for the first time, or
    that says its group is not once satisfied when this gang knows it is (a gang of the group
    created again while this one lived: rule M2).
    Summaries travel through ``gang-events`` keyed by the receiving gang, so the other gangs'
    state reaches each gang's fold through Kafka, in its own partition's order."""
    spec = state.spec
    group = state.group
    if not group.peers and group.sent_summary is None \
            and (spec is None or all(g == state.gang for g in spec.groups)):
        return state  # a gang group of one: nobody to tell (the common case, on every record)
    listeners = {g for g in (spec.groups if spec else ()) if g != state.gang}
    listeners |= {g for g, p in group.peers.items() if state.gang in p.groups}
    mine = own_summary(state)
    if (listeners or group.peers) and (not group.summary_log or group.summary_log[-1][1] != mine):
        state.group = group = replace(
            group, summary_log=(group.summary_log + ((at, mine),))[-SUMMARY_LOG:])
    targets: set[str] = set()
    if mine != group.sent_summary and (listeners or group.sent_summary is not None):
        targets = listeners
        state.group = replace(group, sent_summary=mine)
    elif isinstance(rec, GangSummarized) and state.gang in rec.groups \
            and (rec.gang not in before.group.peers or (state.once_satisfied
                                                        and not rec.once_satisfied)):
        targets = {rec.gang}  # a newcomer, or a gang that has not heard the group is satisfied
    for to in sorted(targets):
        out.append(summary_record(state, to, at))
    return state


def answers_due(state: GangState, settings: FoldSettings) -> int | None:
    """When the gang owes its peers an answer (the earliest "as of" asked), or ``None``."""
    pending = state.group.pending_answers
    return min(pending.values()) if pending else None


def _fire_answers(state: GangState, due: int, settings: FoldSettings
                  ) -> tuple[GangState, list[Output]]:
    return answer_peers(state, due)


ANSWERS: TimerRule = TimerRule("answers", "peers asked for this gang's summary", answers_due,
                               _fire_answers)
def _decide(state: GangState, s: Step, out: list[Output]) -> GangState:
    return decide_summaries(s.before, state, s.rec, s.at, out)


DECISION: Decision = Decision("group", _decide)
RULE: Rule = Rule("group", (), (ANSWERS,), (DECISION,), schedulers=(KOORDINATOR, KUBE_SCHEDULER))
