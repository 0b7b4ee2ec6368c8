"""Gang state: the value the fold keeps per gang id, and its compact wire form.

Where it sits: the functional core. ``streams.core.fold`` produces new ``GangState`` values from
old ones; the Faust worker stores ``to_wire(state)`` in the gang table (whose changelog is the
durable copy) and ``from_wire`` turns it back. A state handed out by the fold is never changed
afterwards: the fold makes one shallow ``copy()`` per record that changes a gang, assigns fields
of that copy, and replaces (never mutates) the containers it shares with the old state. Member
counts (``bound``, ``waiting``, pending, in a cycle) are kept as counters, updated as members
change, so a record costs the same whatever the gang's size.

Must not: read the clock, do I/O, import Faust/Kafka/Kubernetes. The wire form is a JSON-ready
list/dict structure kept compact because a table value is written whole to its changelog on
every change (contracts.md, "Delivery").
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple

from .cluster import DEFAULT_CLUSTER, key_of
from .episode import Episode, per_minute
from .preemption import Preemption, Victim
from .native import counts_for_gang, gang_name, is_composite, is_native, native_spec, scheduler_of
from .records import Capacity, GangSummarized
from .spec import DEFAULT_WAITING_SECONDS, Fallback, GangSpec, RawSettings, parse_spec
from .timefmt import format_time

WIRE_VERSION = 1


class Member(NamedTuple):
    """One live member pod of a gang, identified by uid in ``GangState.members``.

    ``rv`` is the last applied resourceVersion; ``node`` is ``spec.nodeName`` (bound when set);
    ``stage``/``status``/``reason``/``cycle`` are the pod's last scheduling-cycle outcome;
    ``gates`` the names of its ``spec.schedulingGates`` (``PodObserved.gates``);
    ``refused_at`` the event time (microseconds) since which Coscheduling's PreEnqueue has
    refused the pod without the scheduler attempting it since (``rules.stranded.track_refusals``), or
    ``None``.
    """

    name: str
    rv: str
    node: str | None
    phase: str
    terminating: bool
    settings: RawSettings
    waits_for_podgroup: bool
    stage: str | None = None
    status: str | None = None
    reason: str = ""
    cycle: int | None = None
    gates: tuple[str, ...] = ()
    refused_at: int | None = None

    @property
    def pending(self) -> bool:
        """True for a pod the scheduler still has to place: unbound, not terminating, and in
        phase ``Pending`` (or no phase yet)."""
        return self.node is None and not self.terminating and self.phase in ("Pending", "")

    @property
    def alive(self) -> bool:
        """True for a pod that runs or may still run: not terminating and not terminated
        (phase neither ``Succeeded`` nor ``Failed``)."""
        return not self.terminating and self.phase not in ("Succeeded", "Failed")

    @property
    def gated(self) -> bool:
        """True for an unbound pod with scheduling gates: the scheduler cannot bind it until its
        gates are removed (kube-apiserver refuses the binding of a pod with
        ``spec.schedulingGates``, kubernetes v1.35.2 ``pkg/registry/core/pod/storage/
        storage.go:241-244``)."""
        return self.node is None and bool(self.gates)


def new_member(name: str, rv: str, node: str | None, phase: str, terminating: bool,
               settings: RawSettings, waits_for_podgroup: bool, stage: str | None,
               status: str | None, reason: str, cycle: int | None, gates: tuple[str, ...],
               refused_at: int | None) -> Member:
    """``Member(...)`` with every field given, built as the tuple it is: NamedTuple's own
    constructor is a Python function (``collections.namedtuple`` makes ``__new__`` with
    ``eval``), which the compiled fold would otherwise call for most records. The same
    value."""
    return tuple.__new__(Member, (name, rv, node, phase, terminating, settings,
                                  waits_for_podgroup, stage, status, reason, cycle, gates,
                                  refused_at))


def refused_member(m: Member, at: int | None) -> Member:
    """``m._replace(refused_at=at)`` without NamedTuple's Python-level ``_replace``
    (``refused_at`` is ``Member``'s last field)."""
    return tuple.__new__(Member, (*m[:-1], at))


def _tally(m: Member) -> tuple[int, int, int, int, int, int, int]:
    """A member's contribution to ``(bound, waiting, pending, in a cycle, gated, refused,
    failed bound)``: bound = has a node; waiting = unbound and ``Wait`` at Permit; pending =
    ``Member.pending``; in a cycle = unbound with a cycle status other than ``Gated`` (for
    ``GangState.phase``); gated = ``Member.gated``; refused = pending with ``refused_at`` set;
    failed bound = has a node and phase ``Failed``."""
    if m.node is not None:
        return 1, 0, 0, 0, 0, 0, 1 if m.phase == "Failed" else 0
    pending = 0 if m.terminating or m.phase not in ("Pending", "") else 1
    status = m.status
    return (0, status == "Wait", pending, status is not None and status != "Gated",
            1 if m.gates else 0, 1 if pending and m.refused_at is not None else 0, 0)


def cycle_key(scheduler: str, cycle: int | str, pod: str, stage: str, status: str) -> int:
    """The key under which an applied cycle record is remembered (``recent_cycles``): a 48-bit
    BLAKE2b digest of the record's identity (scheduler, cycle, pod, stage, status); ``cycle``
    is the attempt identity (``CycleObserved.attempt``, never a number: it holds ``#``) for a
    record without a cycle number. Stable across processes (unlike ``hash``), exact in JSON
    and about a third of the bytes of the 5-tuple in the wire form; two different records
    share a key with odds of about 2**-37 within the 64 remembered."""
    text = f"{scheduler}\x00{cycle}\x00{pod}\x00{stage}\x00{status}".encode()
    digest = _BLAKE2B_48.copy()  # the same as hashlib.blake2b(text, digest_size=6), set up once
    digest.update(text)
    return int.from_bytes(digest.digest(), "big")


_BLAKE2B_48 = hashlib.blake2b(digest_size=6)
"""An empty 48-bit BLAKE2b, copied by ``cycle_key`` (never updated itself)."""


class PodGroupInfo(NamedTuple):
    """The gang's PodGroup object, when one exists. ``conditions``: a native PodGroup's
    ``status.conditions`` as ``Type=Status`` or ``Type=Status/Reason`` strings
    (``PodGroupObserved.conditions``); empty for Koordinator's."""

    name: str
    uid: str
    rv: str
    settings: RawSettings
    conditions: tuple[str, ...] = ()


class Peer(NamedTuple):
    """What another gang of the gang group last said about itself (``GangSummarized``)."""

    groups: tuple[str, ...]
    exists: bool
    initialized: bool
    members: int
    min_member: int | None
    as_of: int = 0
    once_satisfied: bool = False


Summary = tuple[tuple[str, ...], bool, bool, int, "int | None", bool]
"""A gang's own summary for its peers: ``(groups, exists, initialized, members, min_member,
once_satisfied)``."""

HistoryEntry = tuple[int, str, str]
"""One transition of a gang: ``(event time in microseconds, what changed, the cause)``."""


# -- the state's parts -------------------------------------------------------------------------
# One frozen value per concern of ``GangState``, each owning its fields and its wire keys (the
# flat keys of ``to_wire``'s dict, unchanged since they were fields of ``GangState`` itself, so
# values stored before the parts existed decode as they are). A new field of a concern is one
# edit here: the field, and its key in the part's ``to_wire``/``from_wire``. The fold's copy of
# a state shares its parts; a rule that changes one replaces it
# (``dataclasses.replace(state.permit, warned=True)``), never mutates it.

@dataclass(frozen=True, slots=True)
class Permit:
    """The Permit wait (``rules.permit``): ``waiting_since`` is when members began waiting at
    Permit (event time, microseconds; ``None`` while none waits) and ``warned`` whether that
    wait has had its ``GangPermitTimeout``. Wire keys ``ws``, ``pw``."""

    waiting_since: int | None = None
    warned: bool = False

    def to_wire(self, out: dict[str, Any]) -> None:
        """Write this part's keys into the state's wire dict ``out``."""
        out["ws"] = self.waiting_since
        out["pw"] = self.warned

    @staticmethod
    def from_wire(data: Mapping[str, Any]) -> "Permit":
        """The part from a state's wire dict (both keys optional: older values lack them)."""
        waiting_since: int | None = data.get("ws")
        warned: bool = data.get("pw", False)
        if waiting_since is None and not warned:
            return NO_PERMIT
        return Permit(waiting_since, warned)


NO_PERMIT: Permit = Permit()
"""The ``Permit`` of a gang none of whose members waits at Permit (shared by every such state)."""


@dataclass(frozen=True, slots=True)
class Lost:
    """Members lost after the gang was scheduled (``streams.core.lost``): ``entries`` as
    ``(pod name, how, event time)`` while the gang is short of minMember because of them, and
    ``told`` whether ``GangMembersLost`` has told the latest of them. Wire keys ``lo`` and
    ``lt``, each written only when set."""

    entries: tuple[tuple[str, str, int], ...] = ()
    told: bool = False

    def to_wire(self, out: dict[str, Any]) -> None:
        """Write this part's keys into the state's wire dict ``out`` (only those set)."""
        if self.entries:
            out["lo"] = [list(x) for x in self.entries]
        if self.told:
            out["lt"] = True

    @staticmethod
    def from_wire(data: Mapping[str, Any]) -> "Lost":
        """The part from a state's wire dict (both keys optional)."""
        entries = tuple((a, b, c) for a, b, c in data.get("lo", []))
        told: bool = data.get("lt", False)
        if not entries and not told:
            return NO_LOSS
        return Lost(entries, told)


NO_LOSS: Lost = Lost()
"""The ``Lost`` of a gang that lost no member (shared by every such state)."""


@dataclass(frozen=True, slots=True)
class Commands:
    """The commands of the gang's group (``rules.base.command``) and the representative they
    are about: ``representative`` is the group's representative pod as the scheduler last
    reported it (``ns/name``), ``epoch`` the gang group's command counter (never reset),
    ``last_switch_at`` when the gang last issued a ``RepresentativeGated`` switch
    (``rules.representative.decide_gated_representative``; event time, microseconds) and
    ``recent_acks`` the last shim acks applied, as ``(command id, outcome)``. Wire keys ``r``,
    ``e``, ``ls``, ``ra``."""

    representative: str | None = None
    epoch: int = 0
    last_switch_at: int | None = None
    recent_acks: tuple[tuple[str, str], ...] = ()

    def to_wire(self, out: dict[str, Any]) -> None:
        """Write this part's keys into the state's wire dict ``out``."""
        out["r"] = self.representative
        out["ra"] = [list(k) for k in self.recent_acks]
        out["e"] = self.epoch
        out["ls"] = self.last_switch_at

    @staticmethod
    def from_wire(data: Mapping[str, Any]) -> "Commands":
        """The part from a state's wire dict (``ls`` optional: older values lack it)."""
        return Commands(data["r"], data["e"], data.get("ls"),
                        tuple((a, b) for a, b in data["ra"]))


NO_COMMANDS: Commands = Commands()
"""The ``Commands`` of a gang that knows no representative and issued no command."""


@dataclass(frozen=True, slots=True)
class Hold:
    """The PreEnqueue hold (``rules.hold``) and what follows its end (``rules.stranded``):
    ``held_since`` is when the hold condition began (event time, microseconds; ``None`` while
    the gang is not held), ``warned`` whether the hold has had its warning, and
    ``hold_emitted_at`` when its warning or last refresh was emitted (``None`` before, and once
    the hold ends). ``released_at`` is when the gang's last hold ended (``None`` while held or
    never held), ``released_attempted`` when the scheduler first attempted a member of the gang
    since then (a round ran; ``None`` before), and ``stranded_told`` whether its members
    refused during that hold and never attempted since have been told ``GangMembersStranded``
    (``rules.stranded.warn_stranded``). Wire keys ``hs`` and ``w`` (always written), ``he``
    (always written, optional on reading), ``rl``, ``rt`` and ``sd`` (each written only when
    set)."""

    held_since: int | None = None
    warned: bool = False
    hold_emitted_at: int | None = None
    released_at: int | None = None
    released_attempted: int | None = None
    stranded_told: bool = False

    def to_wire(self, out: dict[str, Any]) -> None:
        """Write this part's keys into the state's wire dict ``out`` (``rl``, ``rt``, ``sd``
        only when set)."""
        out["hs"] = self.held_since
        out["w"] = self.warned
        out["he"] = self.hold_emitted_at
        if self.released_at is not None:
            out["rl"] = self.released_at
        if self.stranded_told:
            out["sd"] = True
        if self.released_attempted is not None:
            out["rt"] = self.released_attempted

    @staticmethod
    def from_wire(data: Mapping[str, Any]) -> "Hold":
        """The part from a state's wire dict (``hs`` and ``w`` required, the others optional:
        older values lack them); ``KeyError`` without ``hs`` or ``w``."""
        held_since: int | None = data["hs"]
        warned: bool = data["w"]
        emitted_at: int | None = data.get("he")
        released_at: int | None = data.get("rl")
        attempted: int | None = data.get("rt")
        told: bool = data.get("sd", False)
        if held_since is None and not warned and emitted_at is None and released_at is None \
                and attempted is None and not told:
            return NO_HOLD
        return Hold(held_since, warned, emitted_at, released_at, attempted, told)


NO_HOLD: Hold = Hold()
"""The ``Hold`` of a gang that is not held and whose last hold (if any) left nothing to tell
(shared by every such state)."""


@dataclass(frozen=True, slots=True)
class Group:
    """The gang group's peer-summary protocol (``rules.group``, ``fold.apply_summary``):
    ``peers`` holds the last summary of each other gang of the gang group (received through
    ``gang-events``), by gang id; ``sent_summary`` is the last summary this gang sent them
    (``None`` before the first). ``pending_answers`` maps a peer that asked for this gang's
    summary to the event time it wants it as of; ``asked_as_of`` is the event time this gang
    asked its peers about (its hold is due then), while it waits for their answers;
    ``summary_log`` the gang's own last summaries with the event time each began (bounded by
    ``rules.group.SUMMARY_LOG``), so that it can answer "as of" an earlier time; ``deferred``
    the peers' summaries (``GangSummarized``, oldest first) newer than ``asked_as_of`` that
    arrived before the answers, applied once the answers are in (so the gang decides in
    event-time order whatever order Kafka delivered them in). Times are event time in
    microseconds. Wire keys ``p``, ``ss2``, ``pa``, ``aa``, ``sl``, ``df`` (each always
    written, optional on reading: older values lack them)."""

    peers: Mapping[str, Peer] = field(default_factory=dict)
    sent_summary: Summary | None = None
    pending_answers: Mapping[str, int] = field(default_factory=dict)
    asked_as_of: int | None = None
    summary_log: tuple[tuple[int, Summary], ...] = ()
    deferred: tuple[GangSummarized, ...] = ()

    def to_wire(self, out: dict[str, Any]) -> None:
        """Write this part's keys into the state's wire dict ``out``."""
        out["p"] = [[g, list(p.groups), p.exists, p.initialized, p.members, p.min_member,
                     p.as_of] + ([True] if p.once_satisfied else [])
                    for g, p in self.peers.items()]
        out["pa"] = dict(self.pending_answers)
        out["sl"] = [[at, list(sm[0]), *sm[1:5]] + ([True] if sm[5] else [])
                     for at, sm in self.summary_log]
        out["df"] = [[r.at, r.gang, r.to, list(r.groups), r.exists, r.initialized, r.members,
                      r.min_member, r.wanted_as_of] + ([True] if r.once_satisfied else [])
                     for r in self.deferred]
        out["aa"] = self.asked_as_of
        sent = self.sent_summary
        out["ss2"] = None if sent is None else [list(sent[0]), *sent[1:5]] + (
            [True] if sent[5] else [])

    @staticmethod
    def from_wire(data: Mapping[str, Any]) -> "Group":
        """The part from a state's wire dict (every key optional)."""
        peers = {row[0]: Peer(tuple(row[1]), row[2], row[3], row[4], row[5],
                              row[6] if len(row) > 6 else 0, len(row) > 7 and row[7])
                 for row in data.get("p", [])}
        pending_answers = dict(data.get("pa", {}))
        summary_log = tuple((row[0], (tuple(row[1]), row[2], row[3], row[4], row[5],
                                      len(row) > 6 and row[6]))
                            for row in data.get("sl", []))
        deferred = tuple(GangSummarized(r[0], r[1], r[2], tuple(r[3]), r[4], r[5], r[6], r[7],
                                        r[8], len(r) > 9 and r[9]) for r in data.get("df", []))
        asked_as_of: int | None = data.get("aa")
        ss2 = data.get("ss2")
        sent: Summary | None = None if ss2 is None else (
            tuple(ss2[0]), ss2[1], ss2[2], ss2[3], ss2[4], len(ss2) > 5 and ss2[5])
        if not peers and sent is None and not pending_answers and asked_as_of is None \
                and not summary_log and not deferred:
            return NO_GROUP
        return Group(peers, sent, pending_answers, asked_as_of, summary_log, deferred)


NO_GROUP: Group = Group()
"""The ``Group`` of a gang that has heard from no peer and told none (a gang group of one;
shared by every such state)."""

@dataclass(frozen=True, slots=True)
class Holding:
    """gangstate's own hold of the gang out of the scheduling queue (``rules.holding``: a
    ``HoldGang`` command the scheduler shim applies at PreEnqueue), not Koordinator's
    PreEnqueue hold (``Hold``). ``issued_at`` is when the current hold's first ``HoldGang`` was
    issued (``None``: gangstate does not hold the gang), ``renewed_at`` when its last one was
    (first or renewal), ``applied_at`` when the shim first acked one ``Applied`` (``GangHeld``
    is told then; ``None`` before), ``ids`` the ids of its ``HoldGang`` commands (the last
    ``HOLD_IDS``), ``facts`` the ``GangHeld`` facts at the hold (JSON values) and ``basis``
    ``(minMember, members, digest of the member uids, culprit's priority or None)`` the gang
    was held on (``rules.holding.basis``). ``released_at`` is when the last hold ended
    (``None`` while holding or never held) and ``refused`` ``(digest of the facts, the shim's
    reason)`` of the last hold the shim refused, so that the same facts are not held again.
    Times are event time in microseconds. Wire key ``gh`` (written only when set)."""

    issued_at: int | None = None
    renewed_at: int | None = None
    applied_at: int | None = None
    ids: tuple[str, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)
    basis: tuple[Any, ...] = ()
    released_at: int | None = None
    refused: tuple[str, str] | None = None

    def to_wire(self, out: dict[str, Any]) -> None:
        """Write this part's key into the state's wire dict ``out`` (only when set)."""
        if self != NO_HOLDING:
            out["gh"] = [self.issued_at, self.renewed_at, self.applied_at, list(self.ids),
                         dict(self.facts), list(self.basis), self.released_at,
                         None if self.refused is None else list(self.refused)]

    @staticmethod
    def from_wire(data: Mapping[str, Any]) -> "Holding":
        """The part from a state's wire dict (``gh`` optional: older values lack it)."""
        row = data.get("gh")
        if row is None:
            return NO_HOLDING
        refused = row[7]
        return Holding(row[0], row[1], row[2], tuple(row[3]), row[4], tuple(row[5]), row[6],
                       None if refused is None else (refused[0], refused[1]))


NO_HOLDING: Holding = Holding()
"""The ``Holding`` of a gang gangstate never held (shared by every such state)."""
HOLD_IDS = 4
"""How many ``HoldGang`` command ids of the current hold a gang keeps (``Holding.ids``): its
acks arrive within a renewal or two."""


PARTS: tuple[tuple[str, Callable[[Mapping[str, Any]], object]], ...] = (
    ("permit", Permit.from_wire), ("commands", Commands.from_wire), ("lost", Lost.from_wire),
    ("hold", Hold.from_wire), ("group", Group.from_wire), ("holding", Holding.from_wire))
"""The parts of ``GangState``: ``(attribute, its class's from_wire)``, in the order ``to_wire``
writes their keys (the order of the keys in a stored value). ``to_wire`` and ``from_wire``
iterate over it: a new part is its class, its ``GangState`` field, its line in
``GangState.copy`` and its entry here."""


@dataclass(slots=True)
class GangState:
    """Everything gangstate knows about one gang, folded from the input log.

    Counts are pod counts, times integer microseconds of event time. Six concerns are parts,
    frozen values that document their own fields and own their wire keys (``PARTS``), shared
    between a state and its ``copy()`` and replaced, never mutated, by a rule that changes
    one: ``permit`` the Permit wait (``Permit``), ``commands`` the group's representative and
    its command counter (``Commands``), ``lost`` the members lost after the gang was scheduled
    (``Lost``), ``hold`` the PreEnqueue hold and what its end left to tell (``Hold``),
    ``group`` what the gang knows of and told the other gangs of its gang group (``Group``), and
    ``holding`` gangstate's own hold of the gang out of the scheduling queue (``Holding``).

    The other fields: ``gang`` is the gang id within its cluster (``namespace/name``,
    ``streams.core.native``), ``cluster`` the cluster's id (``streams.core.cluster``: never
    read by a rule; the gang's key is ``key``); ``clock`` the latest event
    time of the records that changed the gang (``fold.apply``). ``members`` maps uid to
    ``Member`` in arrival order; ``tombstones`` maps a deleted uid to ``(rv, deleted_at)``. ``spec_source``/``spec_settings`` name the object whose
    settings initialised the gang (``spec`` is derived from them); ``podgroup`` is its PodGroup,
    ``None`` without one. ``cycle`` is the number of the latest scheduling cycle reported for
    the gang and ``outcomes`` each pod's ``(status, reason)`` in it (``fold.apply_cycle``);
    ``recent_cycles`` holds the keys (``cycle_key``) of the last ``fold.RECENT_CYCLES`` cycle
    records applied. ``emitted`` maps a diagnostic key to the digest of the facts last emitted
    for it, ``ever_scheduled`` says whether the gang was scheduled (minMember members bound,
    ``rules.scheduled``) since it was last created, and ``history`` holds the last transitions
    (bounded, oldest first). ``deleted_at``/``deleted_by`` say when and by which deletion
    (``Pod/<name>`` of the last pod, or ``PodGroup/<name>``) the gang stopped existing, as Koordinator deletes it (``fold.gang_deleted``); both are ``None``
    while it exists (``exists``) and once a pod or a PodGroup brings it back. ``episode`` is
    the gang's current or last failure episode (``streams.core.episode``, from scheduler
    Events), ``None`` when it had none since it was last bound or deleted; ``storm`` counts its
    failed attempts per second of event time over the last minute (``episode.count_attempt``).
    ``once_satisfied`` is Koordinator's ``OnceResourceSatisfied`` of the gang's group as far as
    this gang saw it: a member was bound since the gang was last created (rule M2,
    ``fold.apply_pod``). ``orphans`` holds the pods of the gang that Koordinator's gang cache
    dropped with their PodGroup (rule M5, ``fold.apply_podgroup``) and that no later event of
    theirs has brought back yet, by uid; they are not ``members`` (not the scheduler's
    children). ``shim_at`` is the event time of the last record of the scheduler shim
    (``CycleObserved.shim``) for the gang: while it is recent, the fold prefers the shim's
    records to those derived from scheduler Events (``fold.SHIM_PREFERRED_SECONDS``).
    ``preemption`` is what the gang knows of pods preempted for it and of its members'
    nominated nodes (``streams.core.preemption``), ``None`` when nothing. A deleted gang keeps
    its state (the epoch of its group, the diagnostics it emitted) as a tombstone whose phase
    is ``Deleted``.
    """

    gang: str
    clock: int = 0
    spec_source: str | None = None
    spec_settings: RawSettings | None = None
    podgroup: PodGroupInfo | None = None
    members: Mapping[str, Member] = field(default_factory=dict)
    tombstones: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    cycle: int | None = None
    outcomes: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    recent_cycles: Mapping[int, None] = field(default_factory=dict)
    hold: Hold = NO_HOLD
    emitted: Mapping[str, str] = field(default_factory=dict)
    ever_scheduled: bool = False
    group: Group = NO_GROUP
    permit: Permit = NO_PERMIT
    commands: Commands = NO_COMMANDS
    history: tuple[HistoryEntry, ...] = ()
    deleted_at: int | None = None
    deleted_by: str | None = None
    episode: Episode | None = None
    storm: tuple[tuple[int, int], ...] = ()
    once_satisfied: bool = False
    orphans: Mapping[str, Member] = field(default_factory=dict)
    shim_at: int | None = None
    preemption: Preemption | None = None
    lost: Lost = NO_LOSS
    holding: Holding = NO_HOLDING
    cluster: str = DEFAULT_CLUSTER
    # Derived from ``members`` (not on the wire, not compared): kept up to date by
    # ``put_member``/``drop_member`` so that counts cost O(1) per record, not O(members).
    n_bound: int = field(default=0, compare=False, repr=False)
    n_waiting: int = field(default=0, compare=False, repr=False)
    n_pending: int = field(default=0, compare=False, repr=False)
    n_in_cycle: int = field(default=0, compare=False, repr=False)
    n_gated: int = field(default=0, compare=False, repr=False)
    n_refused: int = field(default=0, compare=False, repr=False)
    n_failed_bound: int = field(default=0, compare=False, repr=False)
    # The parsed spec of ``spec_source``/``spec_settings`` (``_parsed``), and the two values it
    # was parsed from (compared by identity: a new value is parsed again, through a memo).
    _parsed_source: str | None = field(default=None, compare=False, repr=False)
    _parsed_settings: RawSettings | None = field(default=None, compare=False, repr=False)
    _parsed_spec: "tuple[GangSpec | None, tuple[Fallback, ...]]" = field(
        default=(None, ()), compare=False, repr=False)

    def __post_init__(self) -> None:
        self.recount()

    def recount(self) -> None:
        """Recompute the member counters from ``members`` (after building a state by hand)."""
        b = w = p = c = g = r = f = 0
        for m in self.members.values():
            mb, mw, mp, mc, mg, mr, mf = _tally(m)
            b, w, p, c, g, r = b + mb, w + mw, p + mp, c + mc, g + mg, r + mr
            f += mf
        self.n_bound, self.n_waiting, self.n_pending, self.n_in_cycle = b, w, p, c
        self.n_gated, self.n_refused, self.n_failed_bound = g, r, f

    def put_member(self, uid: str, member: Member) -> None:
        """Add or replace member ``uid`` (a new ``members`` mapping; the old one is shared with
        other states and never mutated) and update the counters."""
        old = self.members.get(uid)
        if old is not None:
            self._count(old, -1)
        self.members = {**self.members, uid: member}
        self._count(member, 1)

    def drop_member(self, uid: str) -> None:
        """Remove member ``uid`` (a new ``members`` mapping) and update the counters; raises
        ``KeyError`` when it is not a member."""
        old = self.members[uid]
        self.members = {k: m for k, m in self.members.items() if k != uid}
        self._count(old, -1)

    def _count(self, m: Member, sign: int) -> None:
        """Add (``sign`` 1) or remove (-1) member ``m``'s contribution to the counters."""
        b, w, p, c, g, r, f = _tally(m)
        self.n_bound += sign * b
        self.n_waiting += sign * w
        self.n_pending += sign * p
        self.n_in_cycle += sign * c
        self.n_gated += sign * g
        self.n_refused += sign * r
        self.n_failed_bound += sign * f

    def copy(self) -> "GangState":
        """A shallow copy (containers shared): the fold copies a state once per record that
        changes it, then assigns fields of the copy and replaces, never mutates, the shared
        containers."""
        new = GangState.__new__(GangState)
        new.gang = self.gang
        new.cluster = self.cluster
        new.clock = self.clock
        new.spec_source = self.spec_source
        new.spec_settings = self.spec_settings
        new.podgroup = self.podgroup
        new.members = self.members
        new.tombstones = self.tombstones
        new.commands = self.commands
        new.cycle = self.cycle
        new.outcomes = self.outcomes
        new.recent_cycles = self.recent_cycles
        new.hold = self.hold
        new.holding = self.holding
        new.emitted = self.emitted
        new.ever_scheduled = self.ever_scheduled
        new.group = self.group
        new.permit = self.permit
        new.history = self.history
        new.deleted_at = self.deleted_at
        new.deleted_by = self.deleted_by
        new.episode = self.episode
        new.storm = self.storm
        new.once_satisfied = self.once_satisfied
        new.orphans = self.orphans
        new.shim_at = self.shim_at
        new.lost = self.lost
        new.n_bound = self.n_bound
        new.n_waiting = self.n_waiting
        new.n_pending = self.n_pending
        new.n_in_cycle = self.n_in_cycle
        new.n_gated = self.n_gated
        new.n_refused = self.n_refused
        new.n_failed_bound = self.n_failed_bound
        new.preemption = self.preemption
        new._parsed_source = self._parsed_source
        new._parsed_settings = self._parsed_settings
        new._parsed_spec = self._parsed_spec
        return new

    @property
    def exists(self) -> bool:
        """True while the gang has a live member pod or a PodGroup (what Koordinator's gang
        cache holds a gang for; ``own_summary``'s ``exists``)."""
        return bool(self.members) or self.podgroup is not None

    @property
    def key(self) -> str:
        """The gang's key in the fold, the table and Kafka: its id, prefixed with its cluster
        outside the ``default`` cluster (``eu-1:team-a/llm``, ``cluster.key_of``)."""
        return key_of(self.cluster, self.gang)

    @property
    def namespace(self) -> str:
        """The gang's namespace (the part of the gang id before ``/``)."""
        return self.gang.partition("/")[0]

    @property
    def scheduler(self) -> str:
        """The gang's scheduler, ``koord-scheduler`` or ``kube-scheduler``
        (``streams.core.native.scheduler_of``: the gang id says which)."""
        return scheduler_of(self.gang)

    @property
    def name(self) -> str:
        """The gang's name: its PodGroup's (the gang id without namespace and scheduler)."""
        return gang_name(self.gang)

    def _parsed(self) -> tuple[GangSpec | None, tuple[Fallback, ...]]:
        if self._parsed_settings is self.spec_settings and self._parsed_source is self.spec_source:
            return self._parsed_spec  # (None, ()) at first: no spec, as spec_and_fallbacks says
        result = spec_and_fallbacks(self.gang, self.spec_source, self.spec_settings)
        self._parsed_source, self._parsed_settings = self.spec_source, self.spec_settings
        self._parsed_spec = result
        return result

    @property
    def spec(self) -> GangSpec | None:
        """The spec the scheduler uses, or ``None`` while the gang is not initialised."""
        return self._parsed()[0]

    @property
    def fallbacks(self) -> tuple[Fallback, ...]:
        """Silent fallbacks taken when the spec was initialised (for ``GangSpecInvalid``)."""
        return self._parsed()[1]

    @property
    def bound(self) -> int:
        """Members whose pod object has ``spec.nodeName`` (a cycle's ``node`` binds nothing)."""
        return self.n_bound

    @property
    def failed_bound(self) -> int:
        """Members bound whose pod failed (``spec.nodeName`` set and phase ``Failed``): counted
        in ``bound``, they hold no place of the gang any more (``lost.kept``)."""
        return self.n_failed_bound

    @property
    def waiting(self) -> int:
        """Unbound members whose last cycle status is ``Wait`` (waiting at Permit)."""
        return self.n_waiting

    @property
    def pending(self) -> int:
        """Members the scheduler still has to place (``Member.pending``)."""
        return self.n_pending

    @property
    def gated(self) -> int:
        """Unbound members with scheduling gates (``Member.gated``)."""
        return self.n_gated

    @property
    def gang_group(self) -> str:
        """The gang group id: sorted gang ids joined by ``,``; the gang itself when alone."""
        spec = self.spec
        return spec.gang_group if spec else self.gang

    @property
    def phase(self) -> str:
        """One of ``NotInitialized``, ``Gathering``, ``Ready``, ``Scheduling``, ``Scheduled``,
        ``Degraded``, ``Finished``, ``Deleted`` (contracts.md, ``gangstate fold``). ``Deleted``
        is terminal until a pod or a PodGroup of the gang appears again: the last pod of a gang
        without a PodGroup, or the PodGroup of a gang without pods, was deleted
        (``deleted_at``). ``Degraded``: the gang was scheduled and then lost members (deleted
        or failed while bound, ``streams.core.lost``) so that fewer than minMember hold their
        place, while a member is still alive; a gang going away as a whole is not degraded."""
        if self.deleted_at is not None:
            return "Deleted"
        spec = self.spec
        if not self.members and self.ever_scheduled:
            return "Finished"
        if spec is None:
            return "NotInitialized"
        if self.lost.entries and any(m.alive for m in self.members.values()):
            return "Degraded"
        if is_composite(self.gang):  # NG6: its children are the gangs; it counts them ready
            return "Ready" if ready_children(self) >= spec.min_member else "Gathering"
        if self.n_bound >= max(spec.min_member, 1) and self.members:
            return "Scheduled"
        if len(self.members) < spec.min_member:
            return "Gathering"
        if self.n_waiting or self.n_in_cycle:
            return "Scheduling"
        return "Ready"

    def member_by_name(self, pod: str) -> tuple[str, Member] | None:
        """Find a live member by ``ns/name``; returns ``(uid, member)`` or ``None``."""
        return self._by_name(self.members, pod)

    def orphan_by_name(self, pod: str) -> tuple[str, Member] | None:
        """Find a pod dropped with the gang's PodGroup (``orphans``) by ``ns/name``; returns
        ``(uid, member)`` or ``None``."""
        return self._by_name(self.orphans, pod) if self.orphans else None

    def _by_name(self, pods: Mapping[str, Member], pod: str) -> tuple[str, Member] | None:
        ns, _, name = pod.partition("/")
        if ns != self.namespace:
            return None
        for uid, member in pods.items():
            if member.name == name:
                return uid, member
        return None

    def put_members(self, updates: Mapping[str, Member]) -> None:
        """``put_member`` for several members at once: one new ``members`` mapping, not one
        per member."""
        if not updates:
            return
        for uid, member in updates.items():
            old = self.members.get(uid)
            if old is not None:
                self._count(old, -1)
            self._count(member, 1)
        self.members = {**self.members, **updates}


@functools.lru_cache(maxsize=4096)
def _cached_spec(gang: str, source: str, settings: RawSettings,
                 from_podgroup: bool) -> tuple[GangSpec | None, tuple[Fallback, ...]]:
    return parse_spec(gang, settings, source, from_podgroup=from_podgroup,
                      default_waiting_seconds=DEFAULT_WAITING_SECONDS)


_BY_IDENTITY: dict[int, tuple[RawSettings, str, str, tuple[GangSpec | None,
                                                             tuple[Fallback, ...]]]] = {}


def spec_and_fallbacks(gang: str, source: str | None, settings: RawSettings | None,
                       ) -> tuple[GangSpec | None, tuple[Fallback, ...]]:
    """``parse_spec`` of the spec source, memoised: first by the settings object's identity
    (states share it, so this avoids hashing it on every read), then by value."""
    if source is None or settings is None:
        return None, ()
    hit = _BY_IDENTITY.get(id(settings))
    if hit is not None and hit[0] is settings and hit[1] == source and hit[2] == gang:
        return hit[3]
    if is_native(gang):
        result: tuple[GangSpec | None, tuple[Fallback, ...]] = (
            native_spec(gang, settings, source), ())
    else:
        result = _cached_spec(gang, source, settings, source.startswith("PodGroup/"))
    if len(_BY_IDENTITY) > 65_536:
        _BY_IDENTITY.clear()
    _BY_IDENTITY[id(settings)] = (settings, source, gang, result)
    return result


def as_of(state: GangState, now: int | None) -> GangState:
    """The state as the read side sees it at event time ``now`` (microseconds; the fold's
    clock: the latest event time of its partition, ticks included): a copy whose ``clock`` is
    ``now`` when that is later than the gang's own (the time of its latest record), else the
    state itself. Figures that count back from the clock then hold for ``now``: the storm's
    FailedScheduling Events per minute fall to 0 a minute after the last one, a failure
    episode closes ``settings.QUIET_SECONDS`` after its last failure. The fold never stores
    the copy."""
    if now is None or now <= state.clock:
        return state
    new = state.copy()
    new.clock = now
    return new


def summary(state: GangState) -> dict[str, Any]:
    """The ``gangs`` entry of ``gangstate fold --output json`` for one gang.

    Shape: ``{"scheduler", "phase", "members", "bound", "waiting", "representative", "min_member",
    "total_number", "mode", "waiting_seconds", "match_policy", "gang_group", "spec_source",
    "epoch", "last_cycle", "deleted_at", "deleted_by", "failing", "failed_attempts_per_minute",
    "once_satisfied", "orphans", "pods": {"ns/name": {...}}}``; counts are integers, pods named ``ns/name`` (each with
    ``gates``, the names of its scheduling gates, and ``terminating``: its deletion asked, a
    grace period running), ``deleted_at`` RFC 3339. ``failing`` is the
    gang's last failure episode, ``{"since", "last_failed_at"`` (RFC 3339), ``"rounds",
    "unfit": {member name: fit error}, "fit"}``, or ``None`` (none since it was last bound or
    deleted); ``failed_attempts_per_minute`` the FailedScheduling Events of the gang in the last
    60 s of event time up to its clock (``episode.per_minute``). ``once_satisfied``: a member
    was bound since the gang was last created (rule M2); ``orphans``: the pods Koordinator
    dropped with the gang's PodGroup (rule M5), ``ns/name`` sorted; ``preemption`` (only when
    the gang knows of one: ``streams.core.preemption``) its ``victims`` (``pod``, ``uid``,
    ``node``, ``for``, ``preempted_at``, ``grace_seconds``, ``gone_at``), ``nominated``
    (member name -> node) and ``clause``. ``scheduler``: ``koord-scheduler`` or
    ``kube-scheduler`` (``GangState.scheduler``); ``cluster`` (first, outside the ``default``
    cluster only) the gang's cluster; for a native CompositePodGroup ``members``
    counts its child groups that have their minCount pods (``ready_children``) and
    ``min_member`` is its ``minGroupCount``. Unknown values are ``None``.
    """
    spec = state.spec
    ns = state.namespace
    return {
        **({} if state.cluster == DEFAULT_CLUSTER else {"cluster": state.cluster}),
        "scheduler": state.scheduler,
        "phase": state.phase,
        "members": ready_children(state) if is_composite(state.gang) else len(state.members),
        "bound": state.bound,
        "waiting": state.waiting,
        "representative": state.commands.representative,
        "min_member": spec.min_member if spec else None,
        "total_number": spec.total_number if spec else None,
        "mode": spec.mode if spec else None,
        "waiting_seconds": spec.waiting_seconds if spec else None,
        "match_policy": spec.match_policy if spec else None,
        "gang_group": state.gang_group,
        "spec_source": state.spec_source,
        "podgroup": state.podgroup.name if state.podgroup else None,
        "groups": list(spec.groups) if spec else [state.gang],
        "epoch": state.commands.epoch,
        "last_cycle": state.cycle,
        "deleted_at": None if state.deleted_at is None else format_time(state.deleted_at),
        "deleted_by": state.deleted_by,
        "failing": None if state.episode is None else {
            "since": format_time(state.episode.since),
            "last_failed_at": format_time(state.episode.last_at),
            "rounds": state.episode.rounds, "unfit": dict(state.episode.unfit),
            "fit": state.episode.fit},
        "failed_attempts_per_minute": per_minute(state.storm, state.clock),
        **({} if state.preemption is None else {"preemption": {
            "victims": [{"pod": v.pod, "uid": v.uid, "node": v.node, "for": v.preemptor,
                         "preempted_at": format_time(v.preempted_at),
                         "grace_seconds": v.grace_seconds,
                         "gone_at": None if v.gone_at is None else format_time(v.gone_at)}
                        for v in state.preemption.victims],
            "nominated": dict(state.preemption.nominated),
            "clause": state.preemption.clause}}),
        "once_satisfied": state.once_satisfied,
        "orphans": sorted(f"{ns}/{m.name}" for m in state.orphans.values()),
        "pods": {
            f"{ns}/{m.name}": {
                "uid": uid, "phase": m.phase, "node": m.node, "resource_version": m.rv,
                "stage": m.stage, "status": m.status, "reason": m.reason, "cycle": m.cycle,
                "gates": list(m.gates), "terminating": m.terminating,
            }
            for uid, m in state.members.items()
        },
    }


def own_summary(state: GangState) -> Summary:
    """What this gang tells the other gangs of its group: ``(groups, exists, initialized,
    members, min_member, once_satisfied)``; ``groups`` is empty while the gang is not
    initialised. A native PodGroup counts its live members (NG4, ``live_members``); a native
    CompositePodGroup (NG6) tells its children how many of them are ready (``ready_children``)
    as ``members`` and its ``minGroupCount`` as ``min_member``."""
    spec = state.spec
    if is_composite(state.gang):
        members = ready_children(state)
    elif is_native(state.gang):
        members = live_members(state)
    else:
        members = len(state.members)
    return (spec.groups if spec else (), state.exists, spec is not None, members,
            spec.min_member if spec else None, state.once_satisfied)


def live_members(state: GangState) -> int:
    """NG4: the members kube-scheduler counts for a native PodGroup (``AllPodsCount``): those
    not terminated (``native.counts_for_gang``), bound or not, gated or not."""
    return sum(1 for m in state.members.values() if counts_for_gang(m.phase))


def ready_children(state: GangState) -> int:
    """NG6: how many children of a native CompositePodGroup have their minCount pods: the
    peers that said they are initialised, name this gang in their group, and have
    ``members >= min_member`` (``isPGReady``)."""
    return sum(1 for p in state.group.peers.values()
               if p.initialized and p.min_member is not None and state.gang in p.groups
               and p.members >= p.min_member)


# -- wire form ---------------------------------------------------------------------------------

def _settings_out(s: RawSettings | None) -> list[str | None] | None:
    """The wire row of settings: the six Koordinator fields always, then the later ones up to
    the last that is set (``ignored_waiting_time``, ``network_topology_spec``, ``hold``,
    ``policy``, ``parent``), so rows stored before a field existed decode unchanged."""
    if s is None:
        return None
    row = list(s)
    end = len(row)
    while end > 6 and row[end - 1] is None:
        end -= 1
    return row[:end]


def _settings_in(v: list[str | None] | None) -> RawSettings | None:
    return None if v is None else RawSettings(*v)


def _member_out(uid: str, m: Member) -> list[Any]:
    row = [uid, m.name, m.rv, m.node, m.phase, m.terminating, _settings_out(m.settings),
           m.waits_for_podgroup, m.stage, m.status, m.reason, m.cycle]
    if m.refused_at is not None:
        return row + [list(m.gates), m.refused_at]
    return row if not m.gates else row + [list(m.gates)]


def _member_in(row: list[Any]) -> Member:
    return Member(row[1], row[2], row[3], row[4], row[5], _settings_in(row[6]) or RawSettings(),
                  row[7], row[8], row[9], row[10], row[11],
                  tuple(row[12]) if len(row) > 12 else (), row[13] if len(row) > 13 else None)


def to_wire(state: GangState) -> dict[str, Any]:
    """Encode a ``GangState`` as a compact JSON-ready dict (``{"v": 1, ...}``).

    Members become lists of 12 values, plus a 13th (the scheduling gates' names) only for a
    member with gates or a 14th value, and a 14th (``refused_at``) only for a member refused
    at PreEnqueue; settings lists of 6 strings. Then each part (``PARTS``, in its order) writes
    its own keys. ``from_wire(to_wire(s)) == s``.
    """
    out: dict[str, Any] = {
        "v": WIRE_VERSION,
        "g": state.gang,
        "c": state.clock,
        "ss": state.spec_source,
        "st": _settings_out(state.spec_settings),
        "pg": None if state.podgroup is None else [
            state.podgroup.name, state.podgroup.uid, state.podgroup.rv,
            _settings_out(state.podgroup.settings)]
        + ([list(state.podgroup.conditions)] if state.podgroup.conditions else []),
        "m": [_member_out(uid, m) for uid, m in state.members.items()],
        "t": [[uid, rv, at] for uid, (rv, at) in state.tombstones.items()],
        "cy": state.cycle,
        "o": [[pod, st, rs] for pod, (st, rs) in state.outcomes.items()],
        "rc": list(state.recent_cycles),
        "em": dict(state.emitted),
        "es": state.ever_scheduled,
        "h": [list(h) for h in state.history],
        "da": state.deleted_at,
        "db": state.deleted_by,
        **({} if state.episode is None else {"ep": _episode_out(state.episode)}),
        **({} if not state.storm else {"sw": [list(s) for s in state.storm]}),
        **({} if not state.once_satisfied else {"os": True}),
        **({} if not state.orphans else {"or": [_member_out(uid, m)
                                                for uid, m in state.orphans.items()]}),
        **({} if state.shim_at is None else {"sh": state.shim_at}),
        **({} if state.preemption is None else {"pe": _preemption_out(state.preemption)}),
        **({} if state.cluster == DEFAULT_CLUSTER else {"cl": state.cluster}),
    }
    for name, _ in PARTS:
        getattr(state, name).to_wire(out)
    return out


def _preemption_out(p: Preemption) -> list[Any]:
    row = [[list(v) for v in p.victims], [list(n) for n in p.nominated], p.clause,
           p.clause_at, p.told_upto, p.wasted_at]
    if p.tried_at is not None or p.stalled_at is not None:
        row += [p.tried_at, p.stalled_at]  # absent in values written before PR7
    return row


def _preemption_in(row: list[Any] | None) -> Preemption | None:
    if row is None:
        return None
    return Preemption(tuple(Victim(*v) for v in row[0]), tuple((a, b) for a, b in row[1]),
                      row[2], row[3], row[4], row[5],
                      row[6] if len(row) > 6 else None, row[7] if len(row) > 7 else None)


def _episode_out(ep: Episode) -> list[Any]:
    row = [ep.since, ep.last_at, ep.rounds, [list(u) for u in ep.unfit], ep.fit, ep.released,
           ep.emitted_at]
    if ep.capacity is None:
        return row
    c = ep.capacity
    cap: list[Any] = [c.resource, c.request, c.allocatable, c.free, c.nodes, c.room, c.largest]
    if c.priority is not None or c.room_preempting is not None:
        cap += [list(c.requests), c.priority, c.room_preempting]
    elif c.requests:
        cap.append(list(c.requests))
    return row + [cap]


def _episode_in(row: list[Any] | None) -> Episode | None:
    if row is None:
        return None
    return Episode(row[0], row[1], row[2], tuple((a, b) for a, b in row[3]), row[4], row[5],
                   row[6], _capacity_in(row[7]) if len(row) > 7 else None)


def _capacity_in(row: list[Any]) -> Capacity:
    """A ``Capacity`` from its wire row (``requests``, its 8th value, a list there;
    ``priority`` and ``room_preempting`` its 9th and 10th, rows stored before them have
    neither)."""
    return Capacity(row[0], row[1], row[2], row[3], row[4], row[5], row[6],
                    tuple(row[7]) if len(row) > 7 else (),
                    row[8] if len(row) > 8 else None, row[9] if len(row) > 9 else None)


def from_wire(data: Mapping[str, Any]) -> GangState:
    """Decode the dict made by ``to_wire``; each part (``PARTS``) decodes its own keys, and
    its ``from_wire`` says which are optional. The state's own keys added to the wire form
    after its first release (``h``, ``da``, ``db``, ``ep``, ``sw``, ``os``, ``or``, ``sh``,
    ``pe``, ``cl``) are optional, so values stored before them still decode (a gang stored before
    ``da`` is not deleted); so are a member row's 13th value (its scheduling gates: a row of 12
    is a member without gates) and 14th (``refused_at``). Keys of retired fields are ignored:
    ``cc`` (the cycle of the last command) and ``sk`` (the count of consecutive switches),
    which values stored before the failed-member switch was retired still carry. Raises
    ``ValueError`` on an unknown wire version and ``KeyError``/``TypeError`` on a malformed
    value."""
    if data.get("v") != WIRE_VERSION:
        raise ValueError(f"unknown gang state wire version {data.get('v')!r}")
    pg = data["pg"]
    state = GangState(
        gang=data["g"],
        clock=data["c"],
        spec_source=data["ss"],
        spec_settings=_settings_in(data["st"]),
        podgroup=None if pg is None else PodGroupInfo(pg[0], pg[1], pg[2], _settings_in(pg[3])
                                                      or RawSettings(),
                                                      tuple(pg[4]) if len(pg) > 4 else ()),
        members={row[0]: _member_in(row) for row in data["m"]},
        tombstones={uid: (rv, at) for uid, rv, at in data["t"]},
        cycle=data["cy"],
        outcomes={pod: (st, rs) for pod, st, rs in data["o"]},
        recent_cycles=dict.fromkeys(k if isinstance(k, int) else cycle_key(*k)
                                    for k in data["rc"]),
        emitted=dict(data["em"]),
        ever_scheduled=data["es"],
        history=tuple((a, b, c) for a, b, c in data.get("h", [])),
        deleted_at=data.get("da"),
        deleted_by=data.get("db"),
        episode=_episode_in(data.get("ep")),
        storm=tuple((a, b) for a, b in data.get("sw", [])),
        once_satisfied=data.get("os", False),
        orphans={row[0]: _member_in(row) for row in data.get("or", [])},
        shim_at=data.get("sh"),
        preemption=_preemption_in(data.get("pe")),
        cluster=data.get("cl", DEFAULT_CLUSTER),
    )
    for name, decode in PARTS:
        setattr(state, name, decode(data))
    return state
