"""What every rule family of the core shares: reasons and timers as values, digests and ids,
the diagnostic and command records.

Where it sits: the bottom of ``streams.core.rules``, imported by each rule family and by the
registry (``streams.core.rules``). A family describes each Event reason it emits as a ``Reason``
(name, Event type, message function) and each timer it owns as a ``TimerRule`` (its due time
from the state, what firing it emits); the registry collects them.

Must not: read the clock, draw uuids, do I/O or import infrastructure. Ids are derived from the
log: ``<gang>#<reason>#<sha256(canonical facts)[:12]>`` for diagnostics (for one sent again to
joined pods, ``sha256(canonical {"facts": facts, "pods": [uids]})``) and ``<gang group>#<epoch>``
for commands (contracts.md).
"""

from __future__ import annotations

import bisect
import hashlib
import json
from dataclasses import replace
from json.encoder import encode_basestring as _json_string
from typing import Any, Callable, Literal, NamedTuple

from ..cluster import DEFAULT_CLUSTER
from ..native import KOORDINATOR, NATIVE_PODGROUP_API_VERSION, is_native
from ..records import GangRecord
from ..settings import FoldSettings, Output
from ..state import GangState, Member
from ..timefmt import format_time

DIAGNOSTIC_SCHEMA = "gangstate.diagnostic/v1"
COMMAND_SCHEMA = "gangstate.command/v1"
SUMMARY_SCHEMA = "gangstate.gang-summary/v1"

WAITING_STATUSES = ("Wait", "Gated")
"""A representative in one of these statuses is parked: waiting at Permit or held at PreEnqueue."""


class Reason(NamedTuple):
    """One Kubernetes Event reason a rule family emits: ``name`` (e.g. ``GangScheduled``),
    ``type`` (the Event type, ``Normal`` or ``Warning``) and ``message(gang, facts) -> str``
    (the human text, a deterministic function of the gang id and the facts); ``unblock(state,
    facts) -> str``, when given, says what would unblock a pod held for this reason
    (``explain pod``'s "What would unblock it")."""

    name: str
    type: Literal["Normal", "Warning"]
    message: Callable[[str, dict[str, Any]], str]
    unblock: "Callable[[GangState, dict[str, Any]], str] | None" = None

    def unblock_text(self, state: GangState, facts: dict[str, Any]) -> str:
        """What would unblock a pod held for this reason with ``facts`` (``unblock``), or
        ``""`` when the family gives no such text."""
        return "" if self.unblock is None else self.unblock(state, facts)


class Timer(NamedTuple):
    """A timer of a gang as a value: ``due`` (event time, microseconds) and ``kind`` (the
    ``TimerRule.kind`` that owns it)."""

    due: int
    kind: str


class TimerRule(NamedTuple):
    """A timer a rule family owns: ``kind`` (its name), ``cause`` (the text of the gang's
    history entry when it fires), ``due(state, settings)`` (event time in microseconds, or
    ``None`` when not pending), ``fire(state, due, settings) -> (state, outputs)`` (called on
    the fold's own copy) and ``releases_deferred`` (after it fires, the peers' summaries held
    back while the gang waited for answers are applied)."""

    kind: str
    cause: str
    due: Callable[[GangState, FoldSettings], int | None]
    fire: Callable[[GangState, int, FoldSettings], tuple[GangState, list[Output]]]
    releases_deferred: bool = False


class Step(NamedTuple):
    """One record's decision as every rule family sees it: ``before`` (the gang's state before
    the record was applied), ``rec`` (the record), ``at`` (the event time decided at,
    microseconds), ``settings`` (the fold's) and ``before_rep`` (the representative before the
    record, ``ns/name`` or ``None``)."""

    before: GangState
    rec: GangRecord
    at: int
    settings: FoldSettings
    before_rep: str | None


class Decision(NamedTuple):
    """A rule family's decision on each record: ``name`` and ``run(state, step, out) -> state``
    (assigns fields of the fold's own copy ``state``, appends its outputs to ``out``). The
    registry lists them in ``DECISIONS``, the order ``decide.decide`` runs them in, which is
    the order of a record's outputs."""

    name: str
    run: Callable[[GangState, Step, list[Output]], GangState]


class Rule(NamedTuple):
    """One rule family in the registry (``streams.core.rules.RULES``): ``family`` (its module's
    short name), the ``reasons`` it emits, the ``timers`` it owns and its ``decisions`` (run on
    every record, in ``registry.DECISIONS`` order) and ``findings(state) -> [finding]``, when
    given: the conditions of its reasons that hold for the gang now, each ``{"reason", "type",
    "message", "facts"}`` and ``"since"`` (RFC 3339 or ``None``) where the condition has a
    start (``explain.findings`` lists them, in ``registry.FINDINGS`` order); ``why(state,
    member) -> explanation | None``, when given: why that member (``state.Member``, not bound
    to a node) is held by a condition of the family, ``{"held_at", "held_by", "reasons":
    [{"reason", "facts", "message"}], "unblock": [str]}`` (``explain.why_pod`` asks them in
    ``registry.WHY`` order; the first answer wins). ``schedulers``: the gang schedulers whose
    gangs the family runs for (``streams.core.native.SCHEDULERS``; Koordinator's only by
    default): the registry runs its decisions and timers, and asks its findings and why, only
    for a gang of one of them, so no scheduler's rule reaches the other's gangs."""

    family: str
    reasons: tuple[Reason, ...]
    timers: tuple[TimerRule, ...] = ()
    decisions: tuple[Decision, ...] = ()
    findings: "Callable[[GangState], list[dict[str, Any]]] | None" = None
    why: "Callable[[GangState, Member], dict[str, Any] | None] | None" = None
    schedulers: tuple[str, ...] = (KOORDINATOR,)


def listed(finding: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A family's one finding (or ``None``) as its ``Rule.findings`` list: ``[]`` or
    ``[finding]``."""
    return [] if finding is None else [finding]


def reason_of(finding: dict[str, Any]) -> dict[str, Any]:
    """A finding (``Rule.findings``) as one of ``explain pod``'s reasons: its ``reason``,
    ``facts`` and ``message``."""
    return {k: finding[k] for k in ("reason", "facts", "message")}


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
    (``GangState.orphans``), and the PodGroup when one exists (a native one with its
    ``apiVersion``, ``scheduling.k8s.io/v1beta1``)."""
    ns = state.namespace
    out = [{"kind": "Pod", "namespace": ns, "name": m.name, "uid": uid}
           for uid, m in state.members.items()]
    out.extend({"kind": "Pod", "namespace": ns, "name": m.name, "uid": uid}
               for uid, m in state.orphans.items())
    if state.podgroup is not None:
        pg = {"kind": "PodGroup", "namespace": ns, "name": state.podgroup.name,
              "uid": state.podgroup.uid}
        if is_native(state.gang):  # the sink names its API group (Koordinator's by default)
            pg["apiVersion"] = NATIVE_PODGROUP_API_VERSION
        out.append(pg)
    return out


def plural(n: int, one: str, many: str) -> str:
    """``one`` when ``n`` is 1, else ``many``."""
    return one if n == 1 else many


def in_cluster(state: GangState) -> dict[str, str]:
    """The ``cluster`` field of every record made for ``state``'s gang (diagnostics, commands,
    summaries): ``{"cluster": "eu-1"}``, nothing in the ``default`` cluster (absent means
    ``default`` on the wire, so single-cluster outputs are as before; ``streams.core.cluster``).
    """
    return {} if state.cluster == DEFAULT_CLUSTER else {"cluster": state.cluster}


def diagnostic(state: GangState, reason: Reason, facts: dict[str, Any], at: int,
               pods: tuple[str, ...] = (), facts_id: str | None = None,
               also: tuple[dict[str, str], ...] = ()) -> dict[str, Any]:
    """Build one ``gangstate.diagnostic/v1`` record (JSON-ready) for ``state``'s gang, of
    ``reason`` (its name, Event type and message, ``Reason``).

    ``at`` is event time in microseconds; it becomes ``observed_at``. ``involved`` names every
    live member and the PodGroup (``involved``), and the id digests the facts
    (``facts_digest``, or ``facts_id`` when the caller has it already); or, with
    ``pods`` (member uids), the diagnostic is one sent again to those members only
    (``resend_to_joined``): ``involved`` names just them and the id digests
    ``{"facts": facts, "pods": [uids]}``, so each re-send has its own id and a replay the same.
    The id starts with the gang's key (``GangState.key``: its cluster outside ``default``), so
    two clusters' gangs of one name never share an id; ``cluster`` names the cluster
    (``in_cluster``).
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
        "id": f"{state.key}#{reason.name}#{digest}",
        **in_cluster(state),
        "observed_at": format_time(at),
        "gang": gang,
        "gang_group": state.gang_group,
        "type": reason.type,
        "reason": reason.name,
        "message": reason.message(gang, facts),
        "involved": named + list(also),
        "facts": facts,
    }


def emit(state: GangState, key: str, reason: Reason, facts: dict[str, Any], at: int,
          out: list[dict[str, Any]]) -> GangState:
    """Append a diagnostic when its facts differ from the last emitted under ``key``; never
    for a gang with nothing left to name (no member, no pod dropped with its PodGroup, no
    PodGroup: ``involved`` would be empty and the Events go nowhere)."""
    if not has_objects(state):
        return state
    digest, facts_id = emit_digests(reason.name, facts)
    if state.emitted.get(key) == digest:
        return state
    out.append(diagnostic(state, reason, facts, at, facts_id=facts_id))
    state.emitted = {**state.emitted, key: digest}
    return state


def has_objects(state: GangState) -> bool:
    """True while the gang has an object a diagnostic can name (``involved``): a live member,
    a pod dropped with its PodGroup, or its PodGroup."""
    return bool(state.members) or bool(state.orphans) or state.podgroup is not None


def skips_gang_checks(state: GangState) -> bool:
    """True when koord-scheduler v1.8.0 lets the gang's pods through PreEnqueue, PreFilter,
    PostFilter and Permit without any gang check: the gang's match policy is
    ``once-satisfied`` and its group was once satisfied (``GangState.once_satisfied``, rule
    M2): rule P4 (docs/koordinator-rules.md; no gang scheduling context is opened, no gang
    rejection, no wait at Permit). Its pods are then scheduled one by one, like pods of no
    gang."""
    spec = state.spec
    return state.once_satisfied and spec is not None and spec.match_policy == "once-satisfied"


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
    epoch = state.commands.epoch + 1
    if spec is not None and len(spec.groups) > 1:
        epoch = max(epoch, cycle if cycle is not None else (state.cycle or 0))
    group = state.gang_group
    cmd = {
        "schema": COMMAND_SCHEMA,
        "id": f"{group}#{epoch}",
        **in_cluster(state),
        "issued_at": format_time(at),
        "type": type_,
        "gang_group": group,
        "epoch": epoch,
        "expected_representative": expected,
        "representative": representative,
        "reason": reason,
        "cycle": cycle,
    }
    state.commands = replace(state.commands, epoch=epoch)
    return state, cmd


def activate_gang(state: GangState, reason: str, at: int) -> tuple[GangState, dict[str, Any]]:
    """``command`` ``ActivateGang`` for the gang's group (``reason``: ``PreemptionDone``, rule
    PR7; ``MembersStranded``, rule ST5): no compare-and-swap (``expected_representative``
    ``null``), the group's current representative or ``""``; the shim activates the group's
    pending members (docs/shim.md, "Activated")."""
    return command(state, "ActivateGang", None, state.commands.representative or "", reason,
                   at, None)
