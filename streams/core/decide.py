"""Decision rules: which diagnostics and commands a gang's new state calls for.

Where it sits: the functional core, called by ``streams.core.fold.step`` after a record has been
applied, and by ``fire_timers`` when a grace period ends. Outputs are data: JSON-ready
``gangstate.diagnostic/v1`` and ``gangstate.command/v1`` dicts that a sink writes elsewhere.
A diagnostic is emitted when its facts change, never on every input: the state keeps, per
diagnostic key, the digest of the facts last emitted. The functions that return a state
(``decide``, ``warn_held``, ``answer_peers``, ...) assign fields of the state they are given
and return it: they are only called on the fold's own new copy (``fold.step``,
``fold.fire_timers``), never on a state handed out; ``hold``, ``peers_to_ask`` and the other
readers change nothing.

A warning that still holds with the facts last emitted is sent again to every member that joins
later (``resend_to_joined``): the sink writes one Event per pod named in a diagnostic, so a pod
recreated by its controller (new uid) would otherwise never hear of its gang's invalid settings
or of the hold that keeps it at PreEnqueue.

Must not: read the clock, draw uuids, do I/O or import infrastructure. Ids are derived from the
log: ``<gang>#<reason>#<sha256(canonical facts)[:12]>`` for diagnostics (for one sent again to
joined pods, ``sha256(canonical {"facts": facts, "pods": [uids]})``) and ``<gang group>#<epoch>``
for commands (contracts.md).
"""

from __future__ import annotations

import bisect
import hashlib
import json
from json.encoder import encode_basestring as _json_string
from typing import Any

from . import episode as episodes
from . import preemption as preemptions
from . import lost as losses
from .timefmt import format_time

DIAGNOSTIC_SCHEMA = "gangstate.diagnostic/v1"
COMMAND_SCHEMA = "gangstate.command/v1"
SUMMARY_SCHEMA = "gangstate.gang-summary/v1"
from .records import CycleObserved, GangRecord, GangSummarized, PodGroupObserved, PodObserved
from .spec import MAX_PERMIT_WAIT_MICROS
from .state import GangState, Summary, own_summary, refused_member

from .settings import FoldSettings

HELD_REASONS = ("GangNotInitialized", "GangMembersInsufficient", "GangGroupIncomplete",
                "GangMemberGated")
"""The reasons of a PreEnqueue hold (``hold``), e.g. for the held-pods gauge."""
HOLD_KEY = "hold"
"""The ``emitted`` key of the PreEnqueue hold series: its reason may change within one hold
(``GangNotInitialized`` -> ``GangMembersInsufficient``), and each change of facts is news."""
GATED_KEY = "GangMemberGated"
"""The ``emitted`` key under which the hold series also keeps the digest of the last
``GangMemberGated`` it sent (``_emit_hold``): while it equals ``emitted[HOLD_KEY]``, the hold's
last word was about scheduling gates, and its end is told by ``GangMembersUngated`` rather
than ``GangMembersSatisfied``."""
_HOLD_SERIES_KEYS = (HOLD_KEY, GATED_KEY, "GangMembersSatisfied", "GangMembersUngated")
"""``emitted`` keys forgotten when a hold ends: the next hold is news again."""
GATED_NAMES_SHOWN = 3
"""How many pods a ``GangMemberGated`` message names per set of gates (the facts name all)."""
WAITING_STATUSES = ("Wait", "Gated")
"""A representative in one of these statuses is parked: waiting at Permit or held at PreEnqueue."""


PERMIT_CAP_TEXT = f"{MAX_PERMIT_WAIT_MICROS // 1_000_000}s"
"""The ``effective`` waiting time of a ``GangSpecInvalid`` for a waiting time above
kube-scheduler's 15-minute cap on a Permit wait (rule T3, ``spec.MAX_PERMIT_WAIT_MICROS``)."""


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: the canonical form hashed into diagnostic ids
    (``json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)``)."""
    return _CANONICAL.encode(value)


def _digest(facts: dict[str, Any]) -> str:
    return _sha12(canonical_json(facts))


def _sha12(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


_SCALAR_TYPES = frozenset((int, str, type(None)))
_DIGESTS: dict[tuple[tuple[str, Any], ...], str] = {}
_DIGESTS_MAX = 16_384


def _memo_key(facts: dict[str, Any]) -> tuple[tuple[str, Any], ...] | None:
    """A hashable key equal only for facts with equal canonical JSON: values of exact type
    ``int``, ``str`` or ``None``, or flat dicts of ``str`` to such values (``True`` and ``1``
    never share a key); ``None`` for facts of any other shape (not memoised)."""
    items = []
    for name, value in facts.items():
        kind = type(value)
        if kind is dict:
            inner = tuple(value.items())
            for key, item in inner:
                if type(key) is not str or type(item) not in _SCALAR_TYPES:
                    return None
            items.append((name, ("{}", inner)))
        elif kind in _SCALAR_TYPES:
            items.append((name, value))
        else:
            return None
    return tuple(items)


def facts_digest(facts: dict[str, Any]) -> str:
    """First 12 hex digits of sha256 of the canonical JSON of ``facts``.

    Memoised (``_memo_key``): a failure episode's facts are compared on every record while it
    lasts (``unschedulable_due``), and hashing JSON is the costliest step of that compare. A
    diagnostic's own digests come from ``emit_digests``."""
    key = _memo_key(facts)
    if key is None:
        return _digest(facts)
    hit = _DIGESTS.get(key)
    if hit is None:
        if len(_DIGESTS) >= _DIGESTS_MAX:
            _DIGESTS.clear()
        hit = _DIGESTS[key] = _digest(facts)
    return hit


_EMIT_DIGESTS: dict[tuple[Any, ...], tuple[str, str]] = {}
_REASON_KEY = _json_string("reason") + ":"


def emit_digests(reason: str, facts: dict[str, Any]) -> tuple[str, str]:
    """``(facts_digest({"reason": reason, **facts}), facts_digest(facts))``: what ``emitted``
    keeps for a diagnostic (``_emit``) and the digest in its id, from one canonical encoding
    of the facts.

    Memoised for facts whose values are all of exact type ``int``, ``str`` or ``None`` (e.g.
    ``GangScheduled``'s, compared on every record of a scheduled gang), by the flat tuple
    ``(reason, name, value, ...)``: equal only for equal facts in the same order."""
    flat: list[Any] = [reason]
    for name, value in facts.items():
        if type(value) not in _SCALAR_TYPES:
            flat.clear()
            break
        flat.append(name)
        flat.append(value)
    key = tuple(flat) if flat else None
    if key is not None:
        hit = _EMIT_DIGESTS.get(key)
        if hit is not None:
            return hit
    found = _reason_and_facts_digests(reason, facts)
    if key is not None:
        if len(_EMIT_DIGESTS) >= _DIGESTS_MAX:
            _EMIT_DIGESTS.clear()
        _EMIT_DIGESTS[key] = found
    return found


def _reason_and_facts_digests(reason: str, facts: dict[str, Any]) -> tuple[str, str]:
    """``emit_digests`` without the memo: each top-level fact's value is encoded once by the
    canonical encoder, and both objects are joined from those members (names escaped by the
    json module's own ``encode_basestring``), ``"reason"`` in its sorted place in the one."""
    if "reason" not in facts and all(type(name) is str for name in facts):
        names = sorted(facts)
        members = [f"{_json_string(name)}:{_CANONICAL.encode(facts[name])}" for name in names]
        plain = "{" + ",".join(members) + "}"
        members.insert(bisect.bisect_left(names, "reason"), _REASON_KEY + _json_string(reason))
        return _sha12("{" + ",".join(members) + "}"), _sha12(plain)
    return facts_digest({"reason": reason, **facts}), facts_digest(facts)


def involved(state: GangState) -> list[dict[str, str]]:
    """Every live member Pod (arrival order), then the pods dropped with the gang's PodGroup
    (``GangState.orphans``), and the PodGroup when one exists."""
    ns = state.namespace
    out = [{"kind": "Pod", "namespace": ns, "name": m.name, "uid": uid}
           for uid, m in state.members.items()]
    out.extend({"kind": "Pod", "namespace": ns, "name": m.name, "uid": uid}
               for uid, m in state.orphans.items())
    if state.podgroup is not None:
        out.append({"kind": "PodGroup", "namespace": ns, "name": state.podgroup.name,
                    "uid": state.podgroup.uid})
    return out


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def gated_members(state: GangState) -> dict[str, list[str]]:
    """The members the scheduler cannot bind until their scheduling gates are removed
    (``Member.gated``), as ``{pod name: [gate names as written]}`` in arrival order."""
    return {m.name: list(m.gates) for m in state.members.values() if m.gated}


def gated_text(gated: dict[str, list[str]]) -> str:
    """Who waits for which gates, for people: pods with the same gates share a clause,
    clauses ordered by their first pod name (names sorted as strings), at most
    ``GATED_NAMES_SHOWN`` names each, e.g. ``g-1 waits for example.com/quota`` or
    ``p-0, p-1, p-10 and 7 more wait for kueue.x-k8s.io/admission; q-0 waits for a, b``."""
    by_gates: dict[tuple[str, ...], list[str]] = {}
    for name in sorted(gated):
        by_gates.setdefault(tuple(gated[name]), []).append(name)
    clauses = []
    for gates, names in by_gates.items():
        shown = ", ".join(names[:GATED_NAMES_SHOWN])
        more = len(names) - GATED_NAMES_SHOWN
        if more > 0:
            shown += f" and {more} more"
        clauses.append(f"{shown} {_plural(len(names), 'waits', 'wait')} for {', '.join(gates)}")
    return "; ".join(clauses)


def message(gang: str, reason: str, facts: dict[str, Any]) -> str:
    """The human message of a diagnostic: a deterministic function of gang, reason and facts."""
    f = facts
    if reason == "GangNotInitialized" and f.get("orphaned"):
        return (f"gang {gang} was removed from the scheduler's gang cache with its PodGroup "
                f"{f['podgroup_deleted'] or ''}".rstrip() + f"; its {f['orphaned']} remaining "
                f"{_plural(f['orphaned'], 'pod is', 'pods are')} held at PreEnqueue (can't find "
                f"gang) until the PodGroup exists again and each pod is created again")
    if reason == "GangMembersInsufficient" and f.get("orphaned"):
        missing = f["min_member"] - f["members"]
        return (f"gang {gang} has {f['members']} of minMember {f['min_member']} pods as the "
                f"scheduler counts them: {f['orphaned']} "
                f"{_plural(f['orphaned'], 'pod was', 'pods were')} dropped from the gang with "
                f"its deleted PodGroup and {_plural(f['orphaned'], 'counts', 'count')} again "
                f"only once created again; scheduling is held at PreEnqueue until "
                f"{missing} more {_plural(missing, 'counts', 'count')}")
    if reason == "GangNotInitialized":
        return (f"gang {gang} is not initialized: {f['members']} "
                f"{_plural(f['members'], 'pod names', 'pods name')} it, but no PodGroup and no valid "
                f"min-available annotation gives its spec; scheduling is held at PreEnqueue")
    if reason == "GangMembersInsufficient":
        missing = f["min_member"] - f["members"]
        return (f"gang {gang} has {f['members']} of minMember {f['min_member']} pods; "
                f"scheduling is held at PreEnqueue until {missing} more "
                f"{_plural(missing, 'exists', 'exist')}")
    if reason == "GangGroupIncomplete":
        blocking = f["blocking_gang"]
        if "min_member" in f:
            state_text = f"has {f['members']} of minMember {f['min_member']} pods"
        elif f["members"]:
            state_text = f"is not initialized ({f['members']} pods, no spec)"
        else:
            state_text = "does not exist (no pods, no PodGroup)"
        return (f"gang {gang} is complete, but gang {blocking} of its gang group "
                f"{f['gang_group']} {state_text}; scheduling is held at PreEnqueue until every "
                f"gang of the group has minMember pods")
    if reason == "GangPermitTimeout":
        return (f"gang {gang}: {f['waiting']} "
                f"{_plural(f['waiting'], 'member', 'members')} waited at Permit for the full "
                f"waiting time of {f['waiting_seconds']}s without minMember {f['min_member']} "
                f"ready together; they are rejected and retried")
    if reason == "GangMembersSatisfied":
        return (f"gang {gang} has {f['members']} of minMember {f['min_member']} pods; "
                f"no longer held at PreEnqueue")
    if reason == "GangMemberGated":
        missing = f["min_member"] - f["ungated"]
        return (f"gang {gang} has {f['ungated']} of minMember {f['min_member']} pods free of "
                f"scheduling gates ({gated_text(f['gated'])}); scheduling is held at "
                f"PreEnqueue until the gates of {missing} more {_plural(missing, 'pod', 'pods')}"
                f" are removed (by the controller that set them)")
    if reason == "GangMembersUngated":
        return (f"gang {gang} has {f['ungated']} of minMember {f['min_member']} pods free of "
                f"scheduling gates; no longer held at PreEnqueue")
    if reason == "GangScheduled":
        return f"gang {gang} is scheduled: {f['bound']} of minMember {f['min_member']} pods bound"
    if reason == "GangMembersStranded":
        n = len(f["stranded"])
        shown = ", ".join(f["stranded"][:GATED_NAMES_SHOWN]) + (
            f" and {n - GATED_NAMES_SHOWN} more" if n > GATED_NAMES_SHOWN else "")
        return (f"gang {gang}: {shown} {_plural(n, 'was', 'were')} refused at PreEnqueue and "
                f"koord-scheduler will not retry {_plural(n, 'it', 'them')}: it runs PreEnqueue "
                f"again only for a pod being created, and no round of the gang group has "
                f"handed {_plural(n, 'it', 'them')} out in {f['after_seconds']}s; delete "
                f"{_plural(n, 'it', 'them')} so that {_plural(n, 'its', 'their')} controller "
                f"creates {_plural(n, 'it', 'them')} again")
    if reason == "GangSpecInvalid" and f["field"] == "groups" and f["value"] == f["effective"]:
        return (f"gang {gang}: groups {f['value']} does not list the gang itself; the scheduler "
                f"uses the list as written, so {gang} is not a member of its own gang group")
    if reason == "GangSpecInvalid" and f["field"] in ("waiting-time", "scheduleTimeoutSeconds") \
            and f["effective"] == PERMIT_CAP_TEXT:
        return (f"gang {gang}: {f['field']} {f['value']!r} is longer than kube-scheduler lets a "
                f"pod wait at Permit; members wait at most {f['effective']} (15 minutes)")
    if reason == "GangSpecInvalid":
        return (f"gang {gang}: {f['field']} {f['value']!r} is not valid; the scheduler silently "
                f"uses {f['effective']}")
    if reason == "GangSpecConflict":
        parts = "; ".join(f"{value!r} on {', '.join(pods)}"
                          for value, pods in sorted(f["values"].items()))
        return (f"gang {gang}: members disagree on {f['field']} ({parts}); the scheduler "
                f"keeps the value of the object that initialised the gang")
    if reason == "GangUnschedulable":
        return episodes.unschedulable_message(gang, f)
    if reason == preemptions.PREEMPTING:
        return preemptions.preempting_message(gang, f)
    if reason == preemptions.WASTED:
        return preemptions.wasted_message(gang, f)
    if reason == "GangMembersLost":
        return losses.lost_message(gang, f)
    if reason == "GangMembersRestored":
        return losses.restored_message(gang, f)
    return f"gang {gang}: {reason} {canonical_json(facts)}"


_TYPES = {"GangMembersSatisfied": "Normal", "GangMembersUngated": "Normal",
          "GangScheduled": "Normal", preemptions.PREEMPTING: "Normal",
          "GangMembersRestored": "Normal"}


def diagnostic(state: GangState, reason: str, facts: dict[str, Any], at: int,
               pods: tuple[str, ...] = (), facts_id: str | None = None,
               also: tuple[dict[str, str], ...] = ()) -> dict[str, Any]:
    """Build one ``gangstate.diagnostic/v1`` record (JSON-ready) for ``state``'s gang.

    ``at`` is event time in microseconds; it becomes ``observed_at``. ``involved`` names every
    live member and the PodGroup (``involved``), and the id digests the facts
    (``facts_digest``, or ``facts_id`` when the caller has it already); or, with
    ``pods`` (member uids), the diagnostic is one sent again to those members only
    (``resend_to_joined``): ``involved`` names just them and the id digests
    ``{"facts": facts, "pods": [uids]}``, so each re-send has its own id and a replay the same.
    ``also`` names more objects after those (the victims of a ``GangPreemptionWasted``, which
    may be in other namespaces and gone already).
    """
    gang = state.gang
    if pods:
        ns = state.namespace
        digest = _digest({"facts": facts, "pods": list(pods)})
        named = [{"kind": "Pod", "namespace": ns, "name": state.members[uid].name, "uid": uid}
                 for uid in pods]
    else:
        digest = facts_digest(facts) if facts_id is None else facts_id
        named = involved(state)
    return {
        "schema": DIAGNOSTIC_SCHEMA,
        "id": f"{gang}#{reason}#{digest}",
        "observed_at": format_time(at),
        "gang": gang,
        "gang_group": state.gang_group,
        "type": _TYPES.get(reason, "Warning"),
        "reason": reason,
        "message": message(gang, reason, facts),
        "involved": named + list(also),
        "facts": facts,
    }


def _emit(state: GangState, key: str, reason: str, facts: dict[str, Any], at: int,
          out: list[dict[str, Any]]) -> GangState:
    """Append a diagnostic when its facts differ from the last emitted under ``key``; never
    for a gang with nothing left to name (no member, no pod dropped with its PodGroup, no
    PodGroup: ``involved`` would be empty and the Events go nowhere)."""
    if not has_objects(state):
        return state
    digest, facts_id = emit_digests(reason, facts)
    if state.emitted.get(key) == digest:
        return state
    out.append(diagnostic(state, reason, facts, at, facts_id=facts_id))
    state.emitted = {**state.emitted, key: digest}
    return state


def _emit_hold(state: GangState, reason: str, facts: dict[str, Any], at: int,
               out: list[dict[str, Any]]) -> GangState:
    """``_emit`` under ``HOLD_KEY``; a ``GangMemberGated`` sent is also remembered under
    ``GATED_KEY`` (so the end of the hold knows which Normal reason tells it)."""
    count = len(out)
    state = _emit(state, HOLD_KEY, reason, facts, at, out)
    if len(out) > count and reason == "GangMemberGated":
        state.emitted = {**state.emitted, GATED_KEY: state.emitted[HOLD_KEY]}
    return state


def has_objects(state: GangState) -> bool:
    """True while the gang has an object a diagnostic can name (``involved``): a live member,
    a pod dropped with its PodGroup, or its PodGroup."""
    return bool(state.members) or bool(state.orphans) or state.podgroup is not None


def skips_gang_checks(state: GangState) -> bool:
    """True when koord-scheduler v1.8.0 lets the gang's pods through PreEnqueue, PreFilter,
    PostFilter and Permit without any gang check: the gang's match policy is
    ``once-satisfied`` and its group was once satisfied (``GangState.once_satisfied``, rule
    M2). K = ``pkg/scheduler/plugins/coscheduling/``: ``core/core.go:213-216`` (PreEnqueue),
    ``301-304`` (BeforePreFilter, so no gang scheduling context is opened), ``372-374``
    (AfterPostFilter: no gang rejection), ``core/gang.go:567-568`` (Permit), rule P4. Its pods
    are then scheduled one by one, like pods of no gang."""
    spec = state.spec
    return state.once_satisfied and spec is not None and spec.match_policy == "once-satisfied"


def orphans_pending(state: GangState) -> int:
    """How many of the pods dropped with the gang's PodGroup (``GangState.orphans``) are still
    pending (``Member.pending``)."""
    return sum(1 for m in state.orphans.values() if m.pending)


def hold(state: GangState) -> tuple[str, dict[str, Any]] | None:
    """Why the gang's pending pods are held at PreEnqueue, as ``(reason, facts)``, or ``None``.

    Held means: at least one member (or pod dropped with the PodGroup) is pending, and the
    gang is not initialised (``GangNotInitialized`` [members]), has fewer live members than
    minMember (``GangMembersInsufficient`` [members, min_member, total_number]), or another
    gang of its gang group is missing, uninitialised or short (``GangGroupIncomplete``
    [gang_group, blocking_gang, members, min_member when known]; the first such gang in sorted
    order). This is Koordinator's PreEnqueue basic check (``core/core.go`` ``PreEnqueue``,
    ``GangBasicCheckUnsatisfied``; every gang of the group must have min-available members).
    Koordinator v1.8.0 rules (K = ``pkg/scheduler/plugins/coscheduling/``):

    - P2/M5: pods dropped with their PodGroup (``GangState.orphans``) are refused with
      ``can't find gang`` while the gang is gone, and counted by no gang when it is created
      again (K ``core/core.go:202-206``, ``core/gang_cache.go:295-310``); the facts then add
      ``orphaned`` (how many) and ``podgroup_deleted`` (its name, or ``None``).
    - P4: a gang that skips the gang checks (``skips_gang_checks``) is never held.
    - P6: the gang's own count is checked only when its gang group lists it
      (K ``core/core.go:247-264`` iterates the group, ``getGangGroup``).

    Otherwise, held means fewer than minMember members are free of scheduling gates
    (``GangMemberGated`` [members, ungated, min_member, gated: {pod name: [gates]}]; bound
    members count as free). Koordinator v1.8.0 (``pkg/scheduler/plugins/coscheduling/``, K) with
    kube-scheduler v1.35.2 (``pkg/scheduler/``, KS):

    - a gated pod is a gang child like any other (K ``core/gang_cache.go:149``, ``setChild`` in
      ``core/gang.go:396-414`` reads no gates), so the basic check above passes;
    - the ``SchedulingGates`` PreEnqueue plugin refuses it while ``spec.schedulingGates`` is
      not empty (KS ``framework/plugins/schedulinggates/scheduling_gates.go:48-57``); a
      refused pod's next PreEnqueue runs that plugin first (KS
      ``backend/queue/scheduling_queue.go:576-584``). The PreEnqueue plugins sit in a map
      (KS ``scheduler.go:386-394``, ``scheduling_queue.go:586``), so on the gated pod's first
      PreEnqueue Coscheduling may run before SchedulingGates and make it the gang group's
      representative (K ``core/core.go:240``, ``core/gang.go:572-586``), which it stays while
      gated; the other members are then refused with ``representative pod ... already
      exists``;
    - an ungated member refused at PreEnqueue before the gang had minMember children stays
      refused: the gang cache re-activates only the pod being added (K
      ``core/gang_cache.go:153-165``), here the gated one, and Coscheduling registers no
      events (K ``coscheduling.go:109-112``; KS ``scheduler.go:477-487``), so neither a
      cluster event nor the 5-minute flush of unschedulable pods moves it (KS
      ``backend/queue/scheduling_queue.go:948-956``, ``1225-1229``);
    - when a gang round runs anyway, NextPod hands out pending children gated or not (K
      ``core/core.go:165-183``), and the API server refuses to bind a gated pod (kubernetes
      ``pkg/registry/core/pod/storage/storage.go:241-244``): minMember members can only be
      bound together once minMember of them are free of gates (K ``core/gang.go:554-569``).
    """
    if not state.n_pending and not (state.orphans and orphans_pending(state)):
        return None
    spec = state.spec
    members = len(state.members)
    orphaned: dict[str, Any] = {}
    if state.orphans:
        orphaned = {"orphaned": len(state.orphans),
                    "podgroup_deleted": (state.deleted_by or "").partition("/")[2]
                    if state.deleted_by and state.deleted_by.startswith("PodGroup/")
                    else None}
    if spec is None:
        return "GangNotInitialized", {"members": members, **orphaned}
    if skips_gang_checks(state):
        return None
    if members < spec.min_member and state.gang in spec.groups:
        return "GangMembersInsufficient", {"members": members, "min_member": spec.min_member,
                                           "total_number": spec.total_number, **orphaned}
    for other in spec.groups:
        if other == state.gang:
            continue
        peer = state.peers.get(other)
        facts: dict[str, Any] = {"gang_group": spec.gang_group, "blocking_gang": other}
        if peer is None or not peer.exists:
            return "GangGroupIncomplete", {**facts, "members": 0}
        if not peer.initialized or peer.min_member is None:
            return "GangGroupIncomplete", {**facts, "members": peer.members}
        if peer.members < peer.min_member:
            return "GangGroupIncomplete", {**facts, "members": peer.members,
                                           "min_member": peer.min_member}
    gated = state.n_gated
    if gated and members - gated < spec.min_member:
        return "GangMemberGated", {"members": members, "ungated": members - gated,
                                   "min_member": spec.min_member,
                                   "gated": gated_members(state)}
    return None


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
    return [g for g in spec.groups if g != state.gang
            and (g not in state.peers or state.peers[g].as_of < as_of)]


def awaiting_answers(state: GangState) -> bool:
    """True while the gang has asked its peers (``asked_as_of``) and some answer is missing."""
    return state.asked_as_of is not None and bool(peers_to_ask(state, state.asked_as_of))


SUMMARY_LOG = 32
"""How many of its own summaries a gang of a multi-gang group keeps to answer "as of"."""


def summary_as_of(state: GangState, at: int) -> Summary:
    """The gang's own summary as it was at event time ``at``: the last logged summary that
    began at or before ``at``; before the first one the gang did not exist yet; when the log
    has been cut and ``at`` is older than what it holds, the oldest entry (the best known)."""
    log = state.summary_log
    for begun, summary in reversed(log):
        if begun <= at:
            return summary
    if log and len(log) >= SUMMARY_LOG:
        return log[0][1]
    return ((), False, False, 0, None, False)


def answer_peers(state: GangState, due: int) -> tuple[GangState, list[dict[str, Any]]]:
    """Send this gang's summary as of ``due`` to every peer that asked for it by then."""
    asked = sorted(g for g, t in state.pending_answers.items() if t <= due)
    then = summary_as_of(state, due)
    out = [summary_record(state, g, due, summary=then) for g in asked]
    state.pending_answers = {g: t for g, t in state.pending_answers.items() if t > due}
    return state, out


def warn_held(state: GangState, at: int) -> tuple[GangState, list[dict[str, Any]]]:
    """The hold's grace period ended at ``at``: emit its warning and mark the hold as warned;
    or, for a hold by the gang group with peers' news older than ``at``, ask those peers for
    their state as of ``at`` first (``peers_to_ask``)."""
    found = hold(state)
    out: list[dict[str, Any]] = []
    if found is None:
        state.held_since, state.warned, state.asked_as_of = None, False, None
        return state, out
    if found[0] == "GangGroupIncomplete":
        stale = peers_to_ask(state, at)
        if stale:
            out = [summary_record(state, g, at, wanted_as_of=at) for g in stale]
            state.asked_as_of = at
            return state, out
    reason, facts = found
    state = _emit_hold(state, reason, facts, at, out)
    state.warned, state.asked_as_of, state.hold_emitted_at = True, None, at
    return state, out


def warn_permit_timeout(state: GangState, at: int) -> tuple[GangState, list[dict[str, Any]]]:
    """Emit ``GangPermitTimeout`` for members still waiting at Permit when the gang's waiting
    time ended at ``at`` (kube-scheduler rejects them: ``rejected due to timeout after waiting
    ... at plugin Coscheduling``)."""
    out: list[dict[str, Any]] = []
    spec = state.spec
    if spec is not None and state.waiting:
        state = _emit(state, "GangPermitTimeout", "GangPermitTimeout",
                      {"waiting": state.waiting, "min_member": spec.min_member,
                       "waiting_seconds": spec.permit_wait_seconds}, at, out)
    state.permit_warned = True
    return state, out


def _decide_permit(state: GangState, rec: GangRecord, out: list[dict[str, Any]]) -> GangState:
    """Track the Permit wait (its start feeds the timer) and report the scheduler's own
    ``Timeout`` records of the latest cycle."""
    waiting = state.waiting
    if waiting and state.waiting_since is None:
        state.waiting_since, state.permit_warned = rec.at, False
    elif not waiting and state.waiting_since is not None:
        state.waiting_since, state.permit_warned = None, False
    spec = state.spec
    if isinstance(rec, CycleObserved) and rec.status == "Timeout" and spec is not None \
            and rec.cycle == state.cycle:
        timed_out = sum(1 for status, _ in state.outcomes.values() if status == "Timeout")
        state = _emit(state, "GangPermitTimeout", "GangPermitTimeout",
                      {"waiting": timed_out, "min_member": spec.min_member,
                       "waiting_seconds": spec.permit_wait_seconds}, rec.at, out)
    return state


def hold_update_pending(state: GangState) -> bool:
    """True when a warned hold's facts changed since its last warning (a refresh is due)."""
    if not state.warned or state.held_since is None:
        return False
    found = hold(state)
    return found is not None and \
        state.emitted.get(HOLD_KEY) != emit_digests(found[0], found[1])[0]


def refresh_hold(state: GangState, at: int) -> tuple[GangState, list[dict[str, Any]]]:
    """The refresh interval of a warned hold ended at ``at``: emit its current facts."""
    out: list[dict[str, Any]] = []
    return _decide_hold(state, at, out, 0), out


def _decide_hold(state: GangState, at: int, out: list[dict[str, Any]],
                 refresh_micros: int) -> GangState:
    found = hold(state)
    if found is not None:
        if state.held_since is None:
            state.held_since, state.warned = at, False
            return state
        if state.warned:
            if state.hold_emitted_at is not None and at < state.hold_emitted_at + refresh_micros:
                return state  # news within the refresh interval: the refresh timer sends it
            if found[0] == "GangGroupIncomplete":
                wanted = max(at, state.asked_as_of or 0)
                stale = peers_to_ask(state, wanted)
                if stale:  # news of the group first (see peers_to_ask)
                    if state.asked_as_of != wanted:
                        out.extend(summary_record(state, g, at, wanted_as_of=wanted)
                                   for g in stale)
                    state.asked_as_of = wanted
                    return state
            count = len(out)
            state = _emit_hold(state, found[0], found[1], at, out)
            if len(out) > count:
                state.hold_emitted_at = at
            state.asked_as_of = None
            return state
        return state
    if state.held_since is None:
        return state
    spec = state.spec
    members = len(state.members)
    emitted = state.emitted
    if state.warned and spec is not None and GATED_KEY in emitted \
            and emitted[GATED_KEY] == emitted.get(HOLD_KEY):
        ungated = members - state.n_gated
        if ungated >= spec.min_member:
            state = _emit(state, "GangMembersUngated", "GangMembersUngated",
                          {"members": members, "ungated": ungated,
                           "min_member": spec.min_member}, at, out)
    elif state.warned and spec is not None and members >= spec.min_member:
        state = _emit(state, "GangMembersSatisfied", "GangMembersSatisfied",
                      {"members": members, "min_member": spec.min_member}, at, out)
    state.emitted = {k: v for k, v in state.emitted.items() if k not in _HOLD_SERIES_KEYS}
    state.held_since, state.warned, state.asked_as_of, state.hold_emitted_at = \
        None, False, None, None
    return state


def spec_conflicts(state: GangState) -> dict[str, dict[str, list[str]]]:
    """Settings the members (and the PodGroup, named ``PodGroup/<name>``) disagree on:
    ``{field: {value as written: [pod names]}}`` for fields with two or more values."""
    distinct = {m.settings for m in state.members.values()}
    if state.podgroup is not None:
        distinct.add(state.podgroup.settings)
    if len(distinct) <= 1:
        return {}  # every object writes the same settings (the common case): no scan by field
    values: dict[str, dict[str, list[str]]] = {}
    sources = [(m.name, m.settings) for m in state.members.values()]
    if state.podgroup is not None:
        sources.insert(0, (f"PodGroup/{state.podgroup.name}", state.podgroup.settings))
    for name, settings in sources:
        for field, value in settings.as_written():
            if value is not None:
                values.setdefault(field, {}).setdefault(value, []).append(name)
    return {field: by_value for field, by_value in values.items() if len(by_value) > 1}


def _spec_may_have_changed(before: GangState, state: GangState, rec: GangRecord) -> bool:
    """Only a Pod that joined, left or changed its settings, or a PodGroup event, can change
    the fallbacks or the disagreements; every other record skips the O(members) scan."""
    if isinstance(rec, PodGroupObserved):
        return True
    if before.spec_source != state.spec_source or before.spec_settings != state.spec_settings:
        return True
    if isinstance(rec, PodObserved):
        old, new = before.members.get(rec.uid), state.members.get(rec.uid)
        return old is None or new is None or old.settings != new.settings
    return False


def _decide_spec(before: GangState, state: GangState, rec: GangRecord, at: int,
                 out: list[dict[str, Any]]) -> GangState:
    if not _spec_may_have_changed(before, state, rec):
        return state
    for fb in state.fallbacks:
        state = _emit(state, f"GangSpecInvalid:{fb.field}", "GangSpecInvalid",
                      {"field": fb.field, "value": fb.value, "effective": fb.effective}, at, out)
    for field, by_value in spec_conflicts(state).items():
        state = _emit(state, f"GangSpecConflict:{field}", "GangSpecConflict",
                      {"field": field, "values": by_value}, at, out)
    return state


UNSCHEDULABLE_KEY = "GangUnschedulable"
"""The ``emitted`` key of a failure episode's diagnostic (digest of ``material`` facts)."""


def unschedulable_facts(state: GangState) -> dict[str, Any] | None:
    """The facts of the gang's failure episode that make its ``GangUnschedulable`` (``episode.
    episode_facts``: ``unfit``, ``fit``, ``min_member``, ``since`` in microseconds), or ``None``
    without an episode naming a member, once the gang is scheduled, while it skips the gang
    checks (``skips_gang_checks``: its pods fail one by one, each with its own Event), or when
    the gang has no pod left: the scheduler's Events of pods already deleted still arrive
    (recorded: ``tests/cases/recorded/gpu-short``, one 2 s after the deletion), and a warning
    about a gang that no longer exists would tell no one anything."""
    ep = state.episode
    if ep is None or not ep.unfit or not state.members or skips_gang_checks(state):
        return None
    spec = state.spec
    if spec is None:
        return None  # no minMember to tell of: a gang not initialised is held at PreEnqueue
    if state.bound >= max(spec.min_member, 1):
        return None
    return episodes.episode_facts(ep, spec.min_member, state.bound)


def unschedulable_due(state: GangState, settings: FoldSettings) -> int | None:
    """When the episode's ``GangUnschedulable`` is due (microseconds of event time): its
    settling time (``since`` + ``episode_settle_seconds``) before the first one, then, when the
    facts differ from those last emitted, ``refresh_seconds`` after the last; else ``None``."""
    facts = unschedulable_facts(state)
    ep = state.episode
    if facts is None or ep is None:
        return None
    after = preemptions.unschedulable_after(state.preemption)  # PR2: not while it waits
    if after == preemptions.NEVER:
        return None
    if ep.emitted_at is None:
        due = ep.since + settings.settle_micros
    elif state.emitted.get(UNSCHEDULABLE_KEY) == facts_digest(facts):
        return None
    elif episodes.fits_now(facts):
        return None  # news of recovery ("room for 2 now: enough") is no warning to send again
    else:
        due = ep.emitted_at + settings.refresh_micros
    return due if after is None else max(due, after)


def warn_unschedulable(state: GangState, at: int, settings: FoldSettings,
                       ) -> tuple[GangState, list[dict[str, Any]]]:
    """Emit the failure episode's ``GangUnschedulable`` at event time ``at`` (its timer, or a
    record at or after it): facts ``unfit`` (member name -> fit error as written), ``fit``,
    ``min_member``, ``since`` (RFC 3339), and ``rounds`` and ``attempts_per_minute`` as they are
    then (not compared: the diagnostic is not emitted again for them). Assigns the state's
    fields (the fold's own copy) and returns it with the outputs."""
    out: list[dict[str, Any]] = []
    facts = unschedulable_facts(state)
    ep = state.episode
    after = preemptions.unschedulable_after(state.preemption)
    if facts is None or ep is None or (after is not None and at < after):
        return state, out  # PR2: a gang waiting for its victims is not short of capacity
    digest = facts_digest(facts)
    state.episode = ep._replace(emitted_at=at)
    if state.emitted.get(UNSCHEDULABLE_KEY) == digest:
        return state, out
    shown = {**facts, "since": format_time(ep.since), "rounds": ep.rounds,
             "attempts_per_minute": episodes.per_minute(state.storm, at)}
    out.append(diagnostic(state, "GangUnschedulable", shown, at))
    state.emitted = {**state.emitted, UNSCHEDULABLE_KEY: digest}
    return state, out


def _decide_unschedulable(state: GangState, rec: CycleObserved, settings: FoldSettings,
                          out: list[dict[str, Any]]) -> GangState:
    """``GangUnschedulable`` when a record arrives at or after its due time (``PartitionFold``
    fires the timer first; this covers a fold stepped record by record)."""
    due = unschedulable_due(state, settings)
    if due is None or rec.at < due:
        return state
    state, fired = warn_unschedulable(state, rec.at, settings)
    out.extend(fired)
    return state


def _preemption_live(state: GangState) -> bool:
    """True when a preemption may be told: the gang has members, is not scheduled and does
    not skip the gang checks."""
    spec = state.spec
    return state.preemption is not None and bool(state.members) \
        and not skips_gang_checks(state) \
        and not (spec is not None and state.bound >= max(spec.min_member, 1))


def _preempting_facts(state: GangState) -> dict[str, Any] | None:
    spec = state.spec
    return preemptions.preempting_facts(state.preemption, spec.min_member if spec else None)


def preemption_due(state: GangState) -> int | None:
    """When ``GangPreempting`` or ``GangPreemptionWasted`` is due (``preemption.
    preempting_due``, ``preemption.wasted_due``), the earlier; ``None`` when neither is."""
    if not _preemption_live(state):
        return None
    due = [d for d in (preemptions.preempting_due(state.preemption),
                       preemptions.wasted_due(state.preemption, state.episode)) if d is not None]
    return min(due) if due else None


def warn_preemption(state: GangState, at: int) -> tuple[GangState, list[dict[str, Any]]]:
    """Emit what of the preemption is due by event time ``at`` (rules PR1-PR5,
    ``streams.core.preemption``): ``GangPreemptionWasted`` (Warning, on the gang's pods and on
    every victim) once the victims are gone and the gang still fails, else ``GangPreempting``
    (Normal, on the gang's pods: who was preempted, where, for which member, since when, the
    nominated nodes) while victims terminate. Assigns the state's fields (the fold's own copy)
    and returns it with the outputs."""
    out: list[dict[str, Any]] = []
    p = state.preemption
    if p is None or not _preemption_live(state):
        return state, out
    wasted = preemptions.wasted_due(p, state.episode)
    if wasted is not None and wasted <= at and state.episode is not None:
        spec = state.spec
        wasted_facts = preemptions.wasted_facts(p, state.episode,
                                                spec.min_member if spec else None, state.bound)
        out.append(diagnostic(state, preemptions.WASTED, wasted_facts, at,
                              also=tuple(preemptions.victims_involved(p))))
        state.preemption = p._replace(wasted_at=at)
        return state, out
    facts = _preempting_facts(state)
    due = preemptions.preempting_due(p)
    if facts is not None and due is not None and due <= at:
        shown = {**facts, "nominated": dict(p.nominated)}
        out.append(diagnostic(state, preemptions.PREEMPTING, shown, at,
                              facts_id=facts_digest(facts)))
        state.preemption = p._replace(
            told_upto=max(v.seen_at for v in preemptions.terminating(p)))
    return state, out


def _decide_preemption(state: GangState, at: int, out: list[dict[str, Any]]) -> GangState:
    """``warn_preemption`` when a record arrives at or after its due time (``PartitionFold``
    fires the timer first; this covers a fold stepped record by record and a failed attempt
    that makes the waste evident at once)."""
    due = preemption_due(state)
    if due is None or at < due:
        return state
    state, fired = warn_preemption(state, at)
    out.extend(fired)
    return state


def open_warnings(state: GangState) -> list[tuple[str, str, dict[str, Any]]]:
    """The warnings that hold now with exactly the facts last emitted for them, as
    ``(emitted key, reason, facts)``: silent fallbacks (``GangSpecInvalid``), disagreements
    (``GangSpecConflict``) and a warned PreEnqueue hold (``HOLD_KEY``). These are standing
    conditions, true until someone changes the gang; ``GangPermitTimeout`` reports one wait's
    outcome and is not open in this sense (the next wait reports afresh, to every member it
    involves), and ``GangUnschedulable`` is re-emitted, to every member, when its facts
    change."""
    emitted = state.emitted
    out: list[tuple[str, str, dict[str, Any]]] = []

    def still(key: str, reason: str, facts: dict[str, Any]) -> None:
        if emitted.get(key) == emit_digests(reason, facts)[0]:
            out.append((key, reason, facts))

    if not emitted:
        return out
    for fb in state.fallbacks:
        still(f"GangSpecInvalid:{fb.field}", "GangSpecInvalid",
              {"field": fb.field, "value": fb.value, "effective": fb.effective})
    if any(key.startswith("GangSpecConflict:") for key in emitted):
        for field, by_value in spec_conflicts(state).items():
            still(f"GangSpecConflict:{field}", "GangSpecConflict",
                  {"field": field, "values": by_value})
    if state.warned and HOLD_KEY in emitted:
        found = hold(state)
        if found is not None:
            still(HOLD_KEY, *found)
    return out


def joined(before: GangState, state: GangState, rec: GangRecord) -> tuple[str, ...]:
    """The uid of the pod that ``rec`` made a member, when that uid was never seen before
    (not a member of ``before`` and not remembered as deleted); else ``()``."""
    if not isinstance(rec, PodObserved) or rec.type == "DELETED":
        return ()
    uid = rec.uid
    if uid in before.members or uid in before.tombstones or uid not in state.members:
        return ()
    return (uid,)


def resend_to_joined(before: GangState, state: GangState, rec: GangRecord, at: int,
                     out: list[dict[str, Any]]) -> GangState:
    """Send each open warning (``open_warnings``) again, with the same facts, to the member
    that ``rec`` brought in (``joined``), unless this record emitted it anyway (then it already
    names every member). Diagnostics are otherwise emitted only when their facts change, and the
    sink writes an Event per pod named: without this, a pod that joins after the warning (a
    late member, or one a Job/JobSet controller recreated with a new uid, same name or not)
    never gets an Event about its gang's invalid settings or its hold. The re-sent diagnostic
    names only the new pod (``diagnostic(pods=...)``), so the Events of the other members are
    not counted up again. Changes nothing in ``state``."""
    pods = joined(before, state, rec)
    if not pods:
        return state
    for key, reason, facts in open_warnings(state):
        if state.emitted.get(key) == before.emitted.get(key):
            out.append(diagnostic(state, reason, facts, at, pods))
    return state


def summary_record(state: GangState, to: str, at: int, wanted_as_of: int | None = None,
                   summary: Summary | None = None) -> dict[str, Any]:
    """A ``gangstate.gang-summary/v1`` record telling gang ``to`` about ``state``'s gang as of
    event time ``at`` (``summary``, default the current one); ``wanted_as_of`` asks ``to`` for
    its own summary as of that time."""
    groups, exists, initialized, members, min_member, once = summary or own_summary(state)
    record = {"schema": SUMMARY_SCHEMA, "observed_at": format_time(at), "gang": state.gang,
              "to": to, "gang_group": state.gang_group, "groups": list(groups),
              "exists": exists, "initialized": initialized, "members": members,
              "min_member": min_member}
    if once:
        record["once_satisfied"] = True
    if wanted_as_of is not None:
        record["wanted_as_of"] = format_time(wanted_as_of)
    return record


def _decide_summaries(before: GangState, state: GangState, rec: GangRecord, at: int,
                      out: list[dict[str, Any]]) -> GangState:
    """Tell the other gangs of the gang group about this gang when its summary changed, and
    answer a gang that introduced itself (its summary lists this gang) for the first time, or
    that says its group is not once satisfied when this gang knows it is (a gang of the group
    created again while this one lived: rule M2).
    Summaries travel through ``gang-events`` keyed by the receiving gang, so the other gangs'
    state reaches each gang's fold through Kafka, in its own partition's order."""
    spec = state.spec
    if not state.peers and state.sent_summary is None \
            and (spec is None or all(g == state.gang for g in spec.groups)):
        return state  # a gang group of one: nobody to tell (the common case, on every record)
    listeners = {g for g in (spec.groups if spec else ()) if g != state.gang}
    listeners |= {g for g, p in state.peers.items() if state.gang in p.groups}
    mine = own_summary(state)
    if (listeners or state.peers) and (not state.summary_log or state.summary_log[-1][1] != mine):
        state.summary_log = (state.summary_log + ((at, mine),))[-SUMMARY_LOG:]
    targets: set[str] = set()
    if mine != state.sent_summary and (listeners or state.sent_summary is not None):
        targets = listeners
        state.sent_summary = mine
    elif isinstance(rec, GangSummarized) and state.gang in rec.groups \
            and (rec.gang not in before.peers or (state.once_satisfied
                                                  and not rec.once_satisfied)):
        targets = {rec.gang}  # a newcomer, or a gang that has not heard the group is satisfied
    for to in sorted(targets):
        out.append(summary_record(state, to, at))
    return state


def command(state: GangState, type_: str, expected: str | None, representative: str,
            reason: str, at: int, cycle: int | None) -> tuple[GangState, dict[str, Any]]:
    """Issue a command for the gang's group: bumps the epoch (never reset) and returns the new
    state with the ``gangstate.command/v1`` record. ``id`` is ``<gang group>#<epoch>``.

    A gang group of one gang counts 1, 2, 3, ... Several gangs of one group each keep their own
    counter, so there the epoch is at least the scheduler's cycle number (``cycle``, or the
    gang's latest cycle): cycle numbers are monotonic across the scheduler, so the epochs of
    the group's gangs stay strictly increasing and their ids distinct.
    """
    spec = state.spec
    epoch = state.epoch + 1
    if spec is not None and len(spec.groups) > 1:
        epoch = max(epoch, cycle if cycle is not None else (state.cycle or 0))
    group = state.gang_group
    cmd = {
        "schema": COMMAND_SCHEMA,
        "id": f"{group}#{epoch}",
        "issued_at": format_time(at),
        "type": type_,
        "gang_group": group,
        "epoch": epoch,
        "expected_representative": expected,
        "representative": representative,
        "reason": reason,
        "cycle": cycle,
    }
    state.epoch = epoch
    return state, cmd


def _decide_elect(before_rep: str | None, state: GangState, rec: PodObserved,
                  out: list[dict[str, Any]]) -> GangState:
    """ElectRepresentative: the representative pod was deleted while members still wait to be
    scheduled; name the earliest-arrived pending member (Koordinator drops a deleted
    representative, ``PodDeleted``, and issue #2773 shows a group left without one)."""
    if rec.type != "DELETED" or before_rep is None or before_rep != f"{rec.namespace}/{rec.name}":
        return state
    if state.representative is not None:
        return state
    pending = [m.name for m in state.members.values() if m.pending]
    if not pending:
        return state
    state, cmd = command(state, "ElectRepresentative", before_rep,
                         f"{state.namespace}/{pending[0]}", "RepresentativeDeleted", rec.at, None)
    out.append(cmd)
    return state


def _decide_scheduled(state: GangState, at: int, out: list[dict[str, Any]]) -> GangState:
    spec = state.spec
    if spec is None or not state.members:
        return state
    bound = state.bound
    if bound < spec.min_member or bound == 0:
        return state
    state = _emit(state, "GangScheduled", "GangScheduled",
                  {"bound": bound, "min_member": spec.min_member}, at, out)
    state.ever_scheduled = True
    return state


def decide(state: GangState, rec: GangRecord, settings: FoldSettings,
           before_rep: str | None = None, before: GangState | None = None,
           ) -> tuple[GangState, list[dict[str, Any]]]:
    """Decide the outputs of the state reached by applying ``rec``.

    Order of outputs for one record: spec findings (``GangSpecInvalid``, ``GangSpecConflict``),
    the PreEnqueue hold (``GangNotInitialized``/``GangMembersInsufficient``/
    ``GangGroupIncomplete``/``GangMemberGated`` re-emitted when their facts change after the
    grace period, ``GangMembersSatisfied`` when the hold ends, or ``GangMembersUngated`` when
    it ends after a ``GangMemberGated``), the open
    warnings sent again to a member that joined (``resend_to_joined``), ``GangPermitTimeout``
    (the scheduler's own ``Timeout`` records), ``GangPreempting``/``GangPreemptionWasted``
    (``warn_preemption``, when due), ``GangUnschedulable`` (a failure episode's, when
    due), commands (``RepresentativeGated`` switches, ``ElectRepresentative``),
    ``GangScheduled``, then ``gangstate.gang-summary/v1`` records for the other gangs of the
    group. ``before`` is the state before the record was applied (``before_rep`` its
    representative).
    """
    out: list[dict[str, Any]] = []
    before = state if before is None else before
    # A peer's summary can arrive long after the gang's own later records: decide at the
    # gang's own time then, never before it.
    at = max(rec.at, before.clock) if isinstance(rec, GangSummarized) else rec.at
    state = _decide_spec(before, state, rec, at, out)
    state = _decide_hold(state, at, out, settings.refresh_micros)
    state = track_refusals(before, state, rec, at)
    state = resend_to_joined(before, state, rec, at, out)
    state = _decide_permit(state, rec, out)
    state = _decide_preemption(state, at, out)
    if isinstance(rec, CycleObserved):
        state = _decide_unschedulable(state, rec, settings, out)
        state = _decide_gated_representative(state, rec, out)
    elif isinstance(rec, PodObserved):
        state = _decide_elect(before_rep, state, rec, out)
        state = _decide_gated_representative(state, rec, out)
    state = _decide_lost(before, state, rec, at, out)
    state = _decide_scheduled(state, at, out)
    state = _decide_summaries(before, state, rec, at, out)
    return state, out


LOST_KEY = "GangMembersLost"
"""The ``emitted`` key of ``GangMembersLost``: present while a loss told has not ended (its
end is ``GangMembersRestored``, or the gang going away)."""


def warn_lost(state: GangState, at: int) -> tuple[GangState, list[dict[str, Any]]]:
    """Emit ``GangMembersLost`` at event time ``at`` (its settling timer, ``lost.lost_due``,
    or a record at or after it) with ``lost.lost_facts``; marks the losses as told."""
    out: list[dict[str, Any]] = []
    facts = losses.lost_facts(state)
    state.lost_told = True
    if facts is not None:
        state = _emit(state, LOST_KEY, "GangMembersLost", facts, at, out)
    return state, out


def _decide_lost(before: GangState, state: GangState, rec: GangRecord, at: int,
                 out: list[dict[str, Any]]) -> GangState:
    """Members lost after the gang was scheduled (``streams.core.lost``): remember a loss,
    ``GangMembersLost`` when its settling time has passed by this record, and
    ``GangMembersRestored`` when a told loss ends with minMember members bound again."""
    state = losses.track_losses(before, state, rec, at)
    if not state.lost and LOST_KEY in state.emitted:
        # the series of GangMembersLost ends: told as restored when minMember members are
        # bound again, silently when the gang went away; a later loss is news again
        restored = losses.restored_facts(before, state)
        if restored is not None:
            out.append(diagnostic(state, "GangMembersRestored", restored, at))
        state.emitted = {k: v for k, v in state.emitted.items() if k != LOST_KEY}
        state.lost_told = False
    due = losses.lost_due(state)
    if due is not None and rec.at >= due:
        state, fired = warn_lost(state, rec.at)
        out.extend(fired)
    return state


def track_refusals(before: GangState, state: GangState, rec: GangRecord, at: int) -> GangState:
    """Mark the members Coscheduling refuses at PreEnqueue, and when the hold ends.

    While the gang is held (``held_since``), every pending member without scheduling gates is
    refused at PreEnqueue (no Event; K ``coscheduling.go:122-128``): all of them when the hold
    begins, a member that joins or changes during it as it comes (``Member.refused_at``). A
    gated member is left out: its gates' plugin refused it, and that plugin requeues it when
    the gates are removed (KS ``framework/plugins/schedulinggates/scheduling_gates.go``). When
    the hold ends, ``released_at`` is set, and ``released_attempted`` when the scheduler first
    attempts a member after that (a round ran). The gang's first bind (no member was bound
    before) means its group was allowed at Permit, which ends the round: a pending member
    without an attempt then is marked too (it was refused behind the representative or as
    not yet attempted, K ``core/core.go:228-240``), and the bind counts as the attempt. Why it matters (KS = kubernetes v1.35.2
    ``pkg/scheduler/``): a refused pod waits in the scheduling queue's unschedulable pods;
    Coscheduling registers no cluster events (K ``coscheduling.go:109-112``), so no event and
    not the 5-minute flush moves it (KS ``backend/queue/scheduling_queue.go:1225-1229``), and a
    pod update does not either (no queueing hint, ``scheduling_queue.go:1062-1082,456-501``);
    the gang cache activates only a pod being created (K ``core/gang_cache.go:153-165``) or
    one child when a PodGroup makes the gang complete (``core/gang_cache.go:236-249``). The
    refused pod moves again only when a round of its gang group hands it out (NextPod,
    ``core/core.go:150-187``), and a round ends when the group is allowed at Permit (its
    context cleared, ``core/core.go:192-194``) or every pending member was attempted."""
    if state.held_since is not None:
        if before.held_since is None:
            state.put_members({uid: refused_member(m, at)
                               for uid, m in state.members.items()
                               if m.pending and not m.gates and m.refused_at is None})
        elif isinstance(rec, PodObserved):
            changed = state.members.get(rec.uid)
            if changed is not None and changed.pending and not changed.gates \
                    and changed.refused_at is None:
                state.put_member(rec.uid, refused_member(changed, at))
        if state.released_at is not None or state.stranded_told \
                or state.released_attempted is not None:
            state.released_at, state.stranded_told = None, False
            state.released_attempted = None
    elif before.held_since is not None:
        state.released_at, state.stranded_told, state.released_attempted = at, False, None
    elif isinstance(rec, CycleObserved) and state.released_at is not None \
            and state.released_attempted is None and rec.at >= state.released_at \
            and not (rec.stage == "PreEnqueue" and rec.status != "Success"):
        state.released_attempted = rec.at
    if isinstance(rec, CycleObserved) and state.n_refused:
        state = _tried_culprit(state, rec)
    if state.held_since is None and before.n_bound == 0 and state.n_bound > 0 \
            and state.n_pending > state.n_refused:
        # the gang's first bind: its group was allowed at Permit and the round's context
        # cleared (K core/core.go:192-194); a member the round did not hand out was refused
        # at PreEnqueue behind the representative or as not yet attempted (K core/core.go:
        # 228-240) and nothing retries it either
        left = {uid: refused_member(m, at) for uid, m in state.members.items()
                if m.pending and not m.gates and m.refused_at is None
                and (m.status is None or m.stage == "PreEnqueue")}
        state.put_members(left)
        if left and state.released_at is None:
            state.released_at, state.stranded_told = at, False
        if state.released_attempted is None and state.released_at is not None:
            state.released_attempted = at
    return state


def _tried_culprit(state: GangState, rec: CycleObserved) -> GangState:
    """A refused member that ``rec`` names as its culprit, with a fit error, was tried and did
    not fit: Koordinator names the member that failed Filter in the rejections and releases
    of the others (K ``core/core.go:336-339,376-378,489-503``), and kube-scheduler writes
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
    and not attempted since (``Member.refused_at``), while the gang is not held."""
    if state.held_since is not None or not state.n_refused:
        return []
    return sorted(m.name for m in state.members.values()
                  if m.refused_at is not None and m.pending)


def stranded_facts(state: GangState, at: int) -> dict[str, Any] | None:
    """The facts of ``GangMembersStranded`` at event time ``at``: ``stranded``
    (``stranded_members``) and ``after_seconds`` (whole seconds since the hold ended), or
    ``None`` when no member is stranded."""
    names = stranded_members(state)
    if not names or state.released_at is None:
        return None
    return {"stranded": names, "after_seconds": (at - state.released_at) // 1_000_000}


def stranded_due(state: GangState, settings: FoldSettings) -> int | None:
    """When refused members are due to be told stranded (microseconds of event time):
    ``stranded_seconds`` after the scheduler first attempted a member since the hold ended (a
    round ran and may leave them out; ``released_attempted``), or after the hold ended for a
    gang that is not in its own gang group (a round of that group never hands out its pods,
    K ``core/core.go:164-179``); once per release.
    Without such evidence (the scheduler may be down or its queue long) nothing is said.
    ``None`` when no member is refused, the gang is held, or the release was told."""
    if not state.n_refused or state.held_since is not None or state.released_at is None \
            or state.stranded_told:
        return None
    spec = state.spec
    if state.released_attempted is not None:
        return state.released_attempted + settings.stranded_micros
    if spec is None or state.gang in spec.groups:
        return None
    return state.released_at + settings.stranded_micros


def warn_stranded(state: GangState, at: int) -> tuple[GangState, list[dict[str, Any]]]:
    """Emit ``GangMembersStranded`` at ``at`` for the members still refused since the gang's
    last hold (``stranded_members``; facts ``stranded`` [names], ``after_seconds`` [whole
    seconds since the hold ended]), naming only those pods. Marks the release as told."""
    out: list[dict[str, Any]] = []
    facts = stranded_facts(state, at)
    state.stranded_told = True
    if facts is not None:
        names = facts["stranded"]
        digest = emit_digests("GangMembersStranded", {"stranded": names})[0]
        if state.emitted.get("GangMembersStranded") != digest:
            named = set(names)
            uids = tuple(uid for uid, m in state.members.items() if m.name in named)
            out.append(diagnostic(state, "GangMembersStranded", facts, at, uids))
            state.emitted = {**state.emitted, "GangMembersStranded": digest}
    return state, out


GATED_SWITCH_INTERVAL_SECONDS = 10
"""After a ``RepresentativeGated`` switch, the earliest another one is issued for the gang
(seconds of event time). The shim's records keep naming the gated representative until the
command is applied (at the group's next PreEnqueue, or after PostFilter) and its ack is back:
0.4-0.7 s on the real scheduler (docs/shim.md); a switch still called for later (the command
was lost or refused, or the gated pod became the representative again) is issued again."""


def _decide_gated_representative(state: GangState, rec: CycleObserved | PodObserved,
                                 out: list[dict[str, Any]]) -> GangState:
    """SwitchRepresentative (reason ``RepresentativeGated``): the scheduler shim reports as
    the gang group's representative a member that has scheduling gates, while the gang passes
    its checks (``hold`` is ``None``: at least minMember members are free of gates) and
    another member without gates is pending. koord-scheduler v1.8.0 lets only the
    representative into its scheduling queue (K = ``pkg/scheduler/plugins/coscheduling/``,
    ``core/core.go:240``, ``core/gang.go:572-586``); PreEnqueue plugins run in map order
    (KS ``scheduler.go:386-394``), so a gated pod can become it, and while its gates stay
    nothing moves the group (seen on the real scheduler: 4 of 8 tries stuck for good without
    the shim; with it, the switch bound the group 0.4-0.7 s after the command, docs/shim.md).
    The target is the earliest-arrived pending member without gates. At most one switch per
    ``GATED_SWITCH_INTERVAL_SECONDS`` of event time (``last_switch_at``). Evaluated on the
    shim's cycle records and on Pod records (the shim's record naming the representative can
    reach the fold before the Pod record of the member that completes the gang: the scheduler
    refuses that member at once, and nothing retries it), with the representative the shim
    last reported (``state.representative``, only while the gang has shim records,
    ``shim_at``)."""
    if isinstance(rec, CycleObserved) and not rec.shim:
        return state
    rep = state.representative
    if rep is None or state.shim_at is None:
        return state
    found = state.member_by_name(rep)
    if found is None or not found[1].gated or hold(state) is not None:
        return state
    if state.last_switch_at is not None \
            and rec.at < state.last_switch_at + GATED_SWITCH_INTERVAL_SECONDS * 1_000_000:
        return state
    ns = state.namespace
    target = next((m.name for m in state.members.values()
                   if m.pending and not m.gates and f"{ns}/{m.name}" != rep), None)
    if target is None:
        return state
    cycle = rec.cycle if isinstance(rec, CycleObserved) else None
    state, cmd = command(state, "SwitchRepresentative", rep, f"{ns}/{target}",
                         "RepresentativeGated", rec.at, cycle)
    out.append(cmd)
    state.last_switch_at = rec.at
    return state
