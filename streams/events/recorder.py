"""The Event recorder's core: diagnostics -> decisions about Kubernetes Events (pure).

Where it sits: between the ``diagnostics`` topic and the Event sink (``streams.events.sink``).
It turns one ``gangstate.diagnostic/v1`` into one *occurrence* per involved object (each member
Pod and the PodGroup), correlates each occurrence with what was written before, and returns a
decision value that the sink applies: ``Create``, ``Patch``, ``Skip`` (nothing new: a repeat) or
``Drop`` (news that is deliberately not written: spam, an ended series). The request bodies
for ``core/v1`` and ``events.k8s.io/v1`` are rendered by ``streams.events.bodies``.

It follows client-go's ``tools/record`` (``events_cache.go``, ``event.go``), with small types
that have one job each:
- ``EventKey`` / ``event_name``: the dedupe key and the Event's name. client-go keys an Event by
  source, involved object, type, reason *and message* (``getEventKey``) and names it
  ``<object>.<hex nanoseconds>`` (``makeEvent``); gangstate's contract instead says that one
  Event stands for one (involved object, reason, ``field`` fact where the reason has one), so a
  diagnostic with new facts updates that Event's message, count and time, and the name is
  derived from the key, so that a restarted sink finds the Event again.
- ``correlate``: the counterpart of ``eventLogger.eventObserve``: count and last time of an
  existing Event are bumped (a patch), a new key is created. Unlike client-go it can tell a
  repeat from news, because the Event records which diagnostics it already counted
  (annotations ``gangstate.dev/last-observed-at`` and ``gangstate.dev/diagnostic-ids``).
- ``SpamFilter``: ``EventSourceObjectSpamFilter``: a token bucket per source + involved object,
  burst 25, refill 1 token per 300 s (``defaultSpamBurst``, ``defaultSpamQPS = 1/300``), in an
  LRU of 4096 entries (``maxLruCacheEntries``); the clock is injected.
- ``Recorder``: the ``EventCorrelator``: LRU cache of known Event states + spam filter +
  ``correlate`` + series ending; ``observe`` is ``UpdateState`` after a successful write.

Must not: talk to the API, read the wall clock (the spam filter's clock is passed in), or
import the ``kubernetes`` package. Times are integer microseconds since the Unix epoch
(``streams.core.timefmt``); the Event's own times come from the diagnostic's ``observed_at``.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Callable, Generic, Hashable, Iterable, Literal, Mapping, TypeVar, Union

from streams.core.timefmt import parse_time

COMPONENT = "gangstate"
"""``source.component`` and ``reportingComponent`` / ``reportingController`` of every Event."""
ACTION = "Diagnose"
"""``action`` of events.k8s.io/v1 Events (required there, at most 128 characters)."""
MESSAGE_LIMIT = 1024
"""Bytes. ``NoteLengthLimit`` of kubernetes ``pkg/apis/core/validation/events.go``: enforced on
events.k8s.io/v1 ``note`` and on any Event that has ``eventTime``; kube-scheduler truncates its
own messages to it (``truncateMessage``, kubernetes PR #98715)."""
TRUNCATION_SUFFIX = " ..."
"""Appended to a truncated message, as kube-scheduler's ``truncateMessage`` does."""
NAME_LIMIT = 253
"""Characters: an Event's name is a DNS subdomain (``metadata.name``)."""
LRU_ENTRIES = 4096
"""client-go ``maxLruCacheEntries``: bound of the Event cache and of the spam filter."""
SPAM_BURST = 25
"""client-go ``defaultSpamBurst``: Events a source may write about one object at once."""
SPAM_REFILL_SECONDS = 300.0
"""client-go ``defaultSpamQPS = 1/300``: one more token per 5 minutes per object."""
MAX_IDS = 32
"""Diagnostic ids remembered per Event for its latest ``observed_at`` (annotation)."""

ANNOTATION_LAST_ID = "gangstate.dev/last-diagnostic-id"
ANNOTATION_LAST_AT = "gangstate.dev/last-observed-at"
ANNOTATION_IDS = "gangstate.dev/diagnostic-ids"
ANNOTATION_GANG = "gangstate.dev/gang"

PODGROUP_API_VERSION = "scheduling.sigs.k8s.io/v1alpha1"
API_VERSIONS = {"Pod": "v1", "PodGroup": PODGROUP_API_VERSION}
"""The ``apiVersion`` of an involved object whose diagnostic names none: a Pod's, and
Koordinator's PodGroup's. A native PodGroup's entry names its own (``scheduling.k8s.io/v1beta1``,
``streams.core.rules.base.involved``), which the Event carries, so that ``kubectl describe
podgroup.scheduling.k8s.io`` lists it."""

_HOLD_WARNINGS = frozenset({"GangNotInitialized", "GangMembersInsufficient",
                            "GangGroupIncomplete", "GangMemberGated"})
SERIES_ENDED_BY: dict[str, frozenset[str]] = {
    "GangMembersSatisfied": _HOLD_WARNINGS,
    "GangMembersUngated": frozenset({"GangMemberGated"}),
    "GangScheduled": _HOLD_WARNINGS | {"GangUnschedulable", "GangPermitTimeout",
                                       "GangPreemptionWasted", "GangAwaitingRetry",
                                       "GangMembersStranded"},
    "GangMembersRestored": frozenset({"GangMembersLost", "GangBelowMinCount"}),
}
"""Normal reason -> the warning reasons whose series it ends (contracts.md: the Normal one
"ends that series"). A warning on the same object no newer than the Normal is dropped.
``GangMembersUngated`` follows a ``GangMemberGated`` only, so it ends that one alone, and
``GangMembersRestored`` a ``GangMembersLost`` (``streams.core.lost``): every
ender of a reason costs a lookup when that reason's Event is not cached. A native gang's loss is
``GangBelowMinCount`` (the facts of ``GangMembersLost``), which ``GangMembersRestored`` ends
too."""

Api = Literal["core/v1", "events.k8s.io/v1"]


# ---------------------------------------------------------------------------------------------
# Keys and names
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ObjectRef:
    """An involved object (``involvedObject`` / ``regarding``): a Pod or the gang's PodGroup."""

    kind: str
    namespace: str
    name: str
    uid: str = ""
    api_version: str = "v1"

    def to_json(self) -> dict[str, str]:
        """The ``ObjectReference`` JSON (``uid`` left out when unknown)."""
        out = {"kind": self.kind, "apiVersion": self.api_version,
               "namespace": self.namespace, "name": self.name}
        if self.uid:
            out["uid"] = self.uid
        return out


@dataclass(frozen=True)
class EventKey:
    """One Event: source component, involved object, type, reason and the ``field`` fact
    (``""`` when the reason has none). client-go's ``getEventKey`` without the message."""

    involved: ObjectRef
    type: str
    reason: str
    field: str = ""
    component: str = COMPONENT

    @property
    def name(self) -> str:
        """The Event's deterministic name (``event_name``)."""
        return event_name(self)


def event_name(key: EventKey) -> str:
    """``<involved name>.<16 hex digits of sha256(kind, namespace, name, uid, reason, field)>``,
    at most 253 characters (the name part is cut when needed). Same key, same name, on every
    sink and after every restart; a recreated pod (new uid) gets new Events. An object of
    another apiVersion than its kind's default (``API_VERSIONS``: a native PodGroup) adds it
    to the digest, so a Koordinator PodGroup and a native one of one name never share an Event
    (the names of every other Event are as before)."""
    ref = key.involved
    parts: tuple[str, ...] = (ref.kind, ref.namespace, ref.name, ref.uid, key.reason, key.field)
    if ref.api_version != API_VERSIONS.get(ref.kind, "v1"):
        parts += (ref.api_version,)
    digest = hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]
    return f"{ref.name[:NAME_LIMIT - 17]}.{digest}"


def truncate_message(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """Cut ``message`` to at most ``limit`` bytes of UTF-8, ending with ``" ..."`` when cut
    (kube-scheduler's ``truncateMessage``), never inside a multi-byte character."""
    data = message.encode("utf-8")
    if len(data) <= limit:
        return message
    keep = data[:limit - len(TRUNCATION_SUFFIX)].decode("utf-8", "ignore")
    return keep + TRUNCATION_SUFFIX


def ender_keys(key: EventKey) -> list[EventKey]:
    """The keys of the Normal Events that end ``key``'s warning series on the same object
    (empty for a reason no Normal ends)."""
    return [EventKey(key.involved, "Normal", normal, "", key.component)
            for normal, ended in sorted(SERIES_ENDED_BY.items()) if key.reason in ended]


# ---------------------------------------------------------------------------------------------
# Occurrences and states
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Occurrence:
    """One diagnostic as seen by one involved object. ``observed_at``: microseconds."""

    key: EventKey
    diagnostic_id: str
    observed_at: int
    message: str
    gang: str


def occurrences(diagnostic: Mapping[str, Any], component: str = COMPONENT) -> list[Occurrence]:
    """One ``Occurrence`` per entry of ``involved`` (Pods and the PodGroup), in order; an
    entry's ``apiVersion`` when it names one (a native PodGroup), else its kind's
    (``API_VERSIONS``).

    ``diagnostic`` is a ``gangstate.diagnostic/v1`` dict; its ``message`` is truncated to
    ``MESSAGE_LIMIT``. Raises ``KeyError``/``ValueError`` on a diagnostic without ``id``,
    ``observed_at`` (RFC 3339), ``type``, ``reason`` or ``involved``."""
    field = diagnostic.get("facts", {}).get("field", "")
    at = parse_time(diagnostic["observed_at"])
    message = truncate_message(diagnostic.get("message", ""))
    out = []
    for inv in diagnostic["involved"]:
        ref = ObjectRef(inv["kind"], inv["namespace"], inv["name"], inv.get("uid", ""),
                        inv.get("apiVersion") or API_VERSIONS.get(inv["kind"], "v1"))
        key = EventKey(ref, diagnostic["type"], diagnostic["reason"], str(field), component)
        out.append(Occurrence(key, diagnostic["id"], at, message, diagnostic.get("gang", "")))
    return out


@dataclass(frozen=True)
class Written:
    """What an Event says (or will say once written): ``count`` occurrences, ``first_at`` and
    ``last_at`` in microseconds of event time, ``ids`` = the diagnostic ids counted at
    ``last_at`` (the newest last), the ``message`` shown."""

    name: str
    namespace: str
    count: int
    first_at: int
    last_at: int
    ids: tuple[str, ...]
    message: str
    gang: str = ""


# ---------------------------------------------------------------------------------------------
# Decisions
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Create:
    """Create the Event ``key`` in the state ``state`` (count 1 unless re-creating)."""

    key: EventKey
    state: Written


@dataclass(frozen=True)
class Patch:
    """Patch Event ``key`` from ``previous`` to ``state`` (count + 1, newer time, message);
    on 404 the sink creates it in ``state`` instead (client-go ``recordEvent``)."""

    key: EventKey
    state: Written
    previous: Written


SkipReason = Literal["duplicate", "stale"]
DropReason = Literal["series-ended", "spam"]


@dataclass(frozen=True)
class Skip:
    """Nothing new: ``duplicate`` (this diagnostic is already counted) or ``stale`` (older
    than what the Event already shows)."""

    key: EventKey
    reason: SkipReason


@dataclass(frozen=True)
class Drop:
    """News not written on purpose: ``series-ended`` (a warning no newer than the Normal Event
    that ended it) or ``spam`` (the object's token bucket is empty)."""

    key: EventKey
    reason: DropReason


Decision = Union[Create, Patch, Skip, Drop]


def correlate(occ: Occurrence, written: Written | None,
              ended_at: int | None = None) -> Create | Patch | Skip | Drop:
    """Decide what ``occ`` does to its Event, given the Event's current state ``written``
    (``None``: no such Event) and ``ended_at``, the newest ``last_at`` of the Normal Events that
    end this warning's series on the same object (``None``: none).

    Rules, in order: a warning with ``observed_at <= ended_at`` is dropped (``series-ended``);
    no Event -> ``Create`` with count 1; ``observed_at`` older than the Event's ``last_at`` ->
    ``Skip("stale")``; same ``observed_at`` and an id already counted -> ``Skip("duplicate")``;
    otherwise ``Patch`` with count + 1, ``last_at = observed_at`` and the new message. Pure."""
    if ended_at is not None and occ.observed_at <= ended_at:
        return Drop(occ.key, "series-ended")
    if written is None:
        return Create(occ.key, Written(occ.key.name, occ.key.involved.namespace, 1,
                                       occ.observed_at, occ.observed_at, (occ.diagnostic_id,),
                                       occ.message, occ.gang))
    if occ.observed_at < written.last_at:
        return Skip(occ.key, "stale")
    if occ.observed_at == written.last_at:
        if occ.diagnostic_id in written.ids:
            return Skip(occ.key, "duplicate")
        ids = (written.ids + (occ.diagnostic_id,))[-MAX_IDS:]
    else:
        ids = (occ.diagnostic_id,)
    state = replace(written, count=written.count + 1, last_at=occ.observed_at, ids=ids,
                    message=occ.message, gang=occ.gang or written.gang)
    return Patch(occ.key, state, written)


# ---------------------------------------------------------------------------------------------
# Caches, spam filter, recorder
# ---------------------------------------------------------------------------------------------

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """A bounded least-recently-used map (groupcache ``lru.Cache`` as client-go uses it):
    at most ``capacity`` entries; ``get`` and ``put`` refresh an entry."""

    def __init__(self, capacity: int = LRU_ENTRIES) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> tuple[bool, V | None]:
        """``(True, value)`` when cached, else ``(False, None)``."""
        if key not in self._items:
            return False, None
        self._items.move_to_end(key)
        return True, self._items[key]

    def put(self, key: K, value: V) -> None:
        """Store ``value``, evicting the least recently used entry when full."""
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def pop(self, key: K) -> None:
        """Remove ``key`` if cached."""
        self._items.pop(key, None)

    def __len__(self) -> int:
        return len(self._items)


class SpamFilter:
    """client-go ``EventSourceObjectSpamFilter``: one token bucket per (source component,
    involved object) in an LRU; ``burst`` tokens, refilled at one per ``refill_seconds``.

    ``clock`` returns seconds (any monotonic origin). ``allow`` takes a token and says whether
    one was available. Only writes take tokens (a repeat that writes nothing costs none)."""

    def __init__(self, clock: Callable[[], float], burst: int = SPAM_BURST,
                 refill_seconds: float = SPAM_REFILL_SECONDS,
                 capacity: int = LRU_ENTRIES) -> None:
        self.clock = clock
        self.burst = burst
        self.refill_seconds = refill_seconds
        self._buckets: LruCache[tuple[str, ObjectRef], tuple[float, float]] = LruCache(capacity)

    def allow(self, component: str, ref: ObjectRef) -> bool:
        """Take one token for ``ref``; ``False`` when the bucket is empty."""
        now = self.clock()
        found, bucket = self._buckets.get((component, ref))
        tokens, last = bucket if found and bucket is not None else (float(self.burst), now)
        tokens = min(float(self.burst), tokens + max(0.0, now - last) / self.refill_seconds)
        allowed = tokens >= 1.0
        self._buckets.put((component, ref), (tokens - 1.0 if allowed else tokens, now))
        return allowed


Lookup = Callable[[EventKey], "Written | None"]
"""Reads an Event's state from the API on a cache miss (``None``: no such Event)."""


class Recorder:
    """client-go's ``EventCorrelator`` for gangstate: an LRU of Event states (``LRU_ENTRIES``),
    the spam filter, ``correlate`` and series ending.

    ``decide(occ, lookup)`` returns a decision; ``lookup`` is called only for keys not cached
    (the occurrence's own key and the keys of the Normal Events that end it) and its answers,
    ``None`` included, are cached. ``observe(key, state)`` records a successful write (client-go
    ``UpdateState``); ``forget(key)`` drops a cached state (after a 404 or a conflict). Skips
    and drops do not change the cache."""

    def __init__(self, spam: SpamFilter, capacity: int = LRU_ENTRIES) -> None:
        self.spam = spam
        self._states: LruCache[EventKey, Written | None] = LruCache(capacity)

    def known(self, key: EventKey, lookup: Lookup) -> Written | None:
        """The cached state of ``key``, else ``lookup(key)`` (then cached)."""
        found, state = self._states.get(key)
        if found:
            return state
        state = lookup(key)
        self._states.put(key, state)
        return state

    def decide(self, occ: Occurrence, lookup: Lookup) -> Decision:
        """Correlate ``occ`` with its Event and the Events that end its series; a write that
        the spam filter refuses becomes ``Drop("spam")``."""
        ends = [s.last_at for k in ender_keys(occ.key)
                if (s := self.known(k, lookup)) is not None]
        decision = correlate(occ, self.known(occ.key, lookup), max(ends) if ends else None)
        if isinstance(decision, (Create, Patch)) and \
                not self.spam.allow(occ.key.component, occ.key.involved):
            return Drop(occ.key, "spam")
        return decision

    def observe(self, key: EventKey, state: Written | None) -> None:
        """Record the state of ``key`` as written (``None``: known to be absent)."""
        self._states.put(key, state)

    def forget(self, key: EventKey) -> None:
        """Forget ``key``'s state so the next ``decide`` looks it up again."""
        self._states.pop(key)


# ---------------------------------------------------------------------------------------------
# What a decision leaves behind
# ---------------------------------------------------------------------------------------------


def state_of(decision: Decision) -> Written | None:
    """The state a write decision leads to (``None`` for skips and drops)."""
    return decision.state if isinstance(decision, (Create, Patch)) else None


def outcome(decision: Decision) -> tuple[str, str]:
    """``(action, reason)`` for the ``gangstate_sink_events_total`` counter:
    ``created``/``patched`` (reason = the Event's reason), ``skipped``/``dropped`` (reason =
    why)."""
    if isinstance(decision, Create):
        return "created", decision.key.reason
    if isinstance(decision, Patch):
        return "patched", decision.key.reason
    return ("skipped" if isinstance(decision, Skip) else "dropped"), decision.reason


def written_offline(diagnostics: Iterable[Mapping[str, Any]],
                    component: str = COMPONENT) -> dict[EventKey, Written]:
    """What the sink leaves behind for ``diagnostics`` (``gangstate.diagnostic/v1`` dicts, in
    order), worked out without an API server: each diagnostic's occurrences (one per involved
    Pod and PodGroup) through one ``Recorder`` (series ending, repeats, stale ones, and the
    sink's spam filter with its clock standing still: at most ``SPAM_BURST`` writes per
    object, as a sink that is handed them all at once), starting from no Event. Returns the
    final state of every Event, by key, in the order the Events were first created. Pure."""
    written: dict[EventKey, Written] = {}
    recorder = Recorder(SpamFilter(clock=lambda: 0.0))
    for diagnostic in diagnostics:
        for occ in occurrences(diagnostic, component):
            decision = recorder.decide(occ, written.get)
            state = state_of(decision)
            if state is not None:
                written[decision.key] = state
                recorder.observe(decision.key, state)
    return written
