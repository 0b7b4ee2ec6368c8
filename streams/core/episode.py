"""Failure episodes: a gang that keeps failing to fit, told once (pure rules).

Where it sits: the functional core. ``streams.core.fold.apply_cycle`` folds every cycle record
(an attempt: derived from a scheduler Event, without a cycle number, or the scheduler shim's,
with one) into the gang's ``Episode`` and its storm window (``count_attempt``);
``streams.core.decide`` emits one ``GangUnschedulable`` per episode from ``episode_facts``,
again only when those facts change; ``streams.core.explain`` answers from the same facts.

Why: koord-scheduler v1.8.0 retries a gang that cannot fit in rounds, about one per second, for
as long as the gang exists. ``NextPod`` hands out every pending member of the gang group, one
per cycle (K = ``koordinator@v1.8.0/pkg/scheduler/plugins/coscheduling/``,
``core/core.go:150-187``); the first member that does not fit writes its own fit error
(kube-scheduler v1.35.2 ``pkg/scheduler/framework/types.go:806-857``), its PostFilter rejects
the members waiting at Permit with ``GangGroup %q gets rejected due to member Pod %q is
unschedulable with reason %q, alreadyWaitForBound: %d`` (``core/core.go:376-378,414,489-503``)
and the rest of the round is refused at PreFilter with the same text (``core/core.go:336-339``);
a round without a failure ends with ``all pending pods is already been attempted`` to every
waiting member (``core/core.go:186-187``). Each of these is one Event: thousands per gang.

An episode starts with the first attempt that reports a member not fitting (its own fit error,
or a refusal or release naming it) while the gang had no open episode; it ends when a member is
bound (Koordinator then treats the group as once satisfied, ``core/core.go:506-517``), when the
gang is deleted, or when no such attempt came for ``quiet`` microseconds of event time (then
the next one starts a new episode).

Must not: read the clock, do I/O or import infrastructure. Values are immutable.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from .capacity import (Shortfall, beyond_cluster, format_quantity, lower_min_member,
                       more_text, shortfall_text)
from .native import gang_text, is_native, min_name
from .records import FAILED_STATUSES, Capacity, CycleObserved
from .text import listing

ROUND_ENDED = "GangRoundEnded"
"""Reason of a release at the end of a round without a failure (``all pending pods is already
been attempted``, K ``core/core.go:186-187``, ``core/gang_context.go:35``)."""
STORM_WINDOW_SECONDS = 60
"""The storm figure counts the failed attempts of the last 60 seconds of event time."""
NAMES_SHOWN = 3
"""How many member names a ``GangUnschedulable`` message lists per fit error."""

_FIT_ERROR = re.compile(r"0/(\d+) nodes are available: (.*?)(?:\.(?:\s|$)|$)", re.S)
_FIT_ENTRY = re.compile(r"(\d+) (.+)", re.S)


class Episode(NamedTuple):
    """One failure episode of a gang (event time in microseconds).

    ``since``: the first failed attempt; ``last_at``: the latest; ``rounds``: the rounds the
    records show (``count_round``); ``unfit``: ``(member name, its latest fit error or "")``
    for every member reported not fitting in the episode, sorted by name; ``fit``: the most
    members seen fitting and waiting at Permit at once (the largest ``alreadyWaitForBound``,
    or the number of members released together at the end of a round); ``released``: members
    released in the current run of round-end releases; ``emitted_at``: when its diagnostic was
    last emitted (``None``: not yet); ``capacity``: the cluster's room for the short resource
    the latest failure that carried it reported (``records.Capacity``)."""

    since: int
    last_at: int
    rounds: int = 0
    unfit: tuple[tuple[str, str], ...] = ()
    fit: int = 0
    released: int = 0
    emitted_at: int | None = None
    capacity: Capacity | None = None


def fit_phrase(fit_error: str) -> str:
    """A fit error for people: ``0/2 nodes are available: 2 Insufficient nvidia.com/gpu.`` ->
    ``Insufficient nvidia.com/gpu on 2 of 2 nodes``; several reasons joined by ``, `` in the
    order written (kube-scheduler sorts them as strings, ``framework/types.go:836-846``); an
    entry cut short by the 1024-byte truncation is left out; ``fit error not known`` when none
    is readable. Pure."""
    match = _FIT_ERROR.search(fit_error)
    parts = []
    if match:
        nodes = int(match.group(1))
        for entry in re.split(r", (?=\d+ )", match.group(2)):
            found = _FIT_ENTRY.fullmatch(entry.strip())
            if found and not entry.rstrip().endswith("..."):
                count = int(found.group(1))
                parts.append(f"{found.group(2).strip().rstrip('.')} on {count} of {nodes} "
                             f"{'node' if nodes == 1 else 'nodes'}")
    return ", ".join(parts) if parts else "fit error not known"


def own_failure(rec: CycleObserved, waiting: int) -> CycleObserved:
    """``rec`` with its culprit named when it reports the pod's own failure without one: a
    failed status (``records.FAILED_STATUSES``) at a stage after PreEnqueue makes the pod the
    culprit, its ``message`` the fit error (e.g. ``Filter Unschedulable``, ``0/8 nodes are
    available: 8 Insufficient nvidia.com/gpu.``) and ``waiting`` (the other members waiting at
    Permit then) its ``already_wait_for_bound``, as the watch producer reads a FailedScheduling
    Event's own fit error (form ``FIT``) and Koordinator counts the waiting members. For cycle
    records with a number that are not the scheduler shim's (the contract's first form, before
    ``culprit`` existed; no koord-scheduler v1.8.0 component writes them, but old traces hold
    them), which the fold applies it to; any other record is returned as it is. Pure."""
    if rec.culprit is not None or rec.status not in FAILED_STATUSES \
            or rec.stage == "PreEnqueue":
        return rec
    return rec._replace(culprit=rec.pod, fit_error=rec.fit_error or rec.message,
                        already_wait_for_bound=rec.already_wait_for_bound
                        if rec.already_wait_for_bound is not None else waiting)


def is_failure(rec: CycleObserved) -> bool:
    """True for an attempt that reports a member not fitting: its own fit error or a refusal
    or release that names the culprit (``rec.culprit``, set by the scheduler message catalogue
    for the forms ``FIT``, ``B2``, ``F3``, ``F5``, by the scheduler shim, or by
    ``own_failure``)."""
    return rec.culprit is not None and rec.status != "Bound"


def _name(pod: str) -> str:
    return pod.split("/", 1)[1] if "/" in pod else pod


def count_round(ep: Episode, rec: CycleObserved) -> Episode:
    """The rounds the records show: a member's own fit error is one failed round (exactly one
    member per round fails on its own: the round's failure is cached in the gang scheduling
    context and the later members are refused with it, K ``core/core.go:336-339``); a run of
    ``all pending pods is already been attempted`` releases (written to every waiting member at
    once, ``core/core.go:186-187``) with no other attempt in between is one round that ended
    without a failure. Releases in ``Unreserve`` come within a round already counted and count
    nothing. Also keeps ``fit`` (the largest number of members seen waiting at once). The
    rounds a shim record says it left out (``rec.rounds_skipped``) are added."""
    if rec.reason == ROUND_ENDED:
        released = ep.released + 1
        return ep._replace(rounds=ep.rounds + (1 if ep.released == 0 else 0)
                           + rec.rounds_skipped, released=released, fit=max(ep.fit, released))
    rounds = ep.rounds + rec.rounds_skipped + (
        1 if rec.culprit == rec.pod and rec.status != "Rejected" and rec.stage == "Filter"
        else 0)
    fit = ep.fit if rec.already_wait_for_bound is None \
        else max(ep.fit, rec.already_wait_for_bound)
    return ep._replace(rounds=rounds, released=0, fit=fit)


def fold_attempt(ep: Episode | None, rec: CycleObserved, quiet: int) -> Episode | None:
    """The episode after attempt ``rec`` (a cycle record), ``quiet``
    microseconds of event time without a failure ending an episode. A failure (``is_failure``)
    opens an episode when none is open or the open one has been quiet for longer than
    ``quiet``, and names its culprit with its fit error (the latest readable one; a cut one
    never replaces a readable one); round ends update an open episode only. A record read
    from a pod's ``PodScheduled`` condition (``rec.from_condition``) opens and feeds the
    episode the same way but counts no round (``_seen_fit``), and its round ends change
    nothing: the scheduler's Events of the same attempts count them. Returns ``ep`` itself
    when nothing changes. Pure."""
    if is_failure(rec):
        if ep is None or rec.at > ep.last_at + quiet:
            ep = Episode(since=rec.at, last_at=rec.at)
        unfit = dict(ep.unfit)
        culprit = _name(rec.culprit or "")
        fit_error = rec.fit_error or ""
        known = unfit.get(culprit)
        if known is None or (fit_error and fit_phrase(fit_error) != "fit error not known"):
            unfit[culprit] = fit_error if fit_error or known is None else known
        ep = ep._replace(last_at=max(ep.last_at, rec.at), unfit=tuple(sorted(unfit.items())))
        ep = count_round(ep, rec) if not rec.from_condition else _seen_fit(ep, rec)
        if rec.capacity is not None and rec.capacity != ep.capacity:
            ep = ep._replace(capacity=rec.capacity)
        return ep
    if ep is not None and rec.reason == ROUND_ENDED and rec.at <= ep.last_at + quiet \
            and not rec.from_condition:
        return count_round(ep, rec)
    if ep is not None and rec.culprit is None and rec.already_wait_for_bound is not None \
            and rec.at <= ep.last_at + quiet:
        # a member refused for its gang with no culprit named, but with the members placed
        # at once (kube-scheduler v1.37's pod-group cycle: "minCount (3) cannot be satisfied:
        # 2 scheduled, 0 remaining", forms GS1/GS2): the open episode's fit, nothing else
        return _seen_fit(ep, rec)
    return ep


def _seen_fit(ep: Episode, rec: CycleObserved) -> Episode:
    """``ep`` after a failure read from a pod's ``PodScheduled`` condition
    (``rec.from_condition``): the same attempt comes as an Event too, so it counts no round
    and no release; only ``fit`` (the largest ``alreadyWaitForBound`` seen, which a repeat
    cannot inflate) is kept. Pure."""
    if rec.already_wait_for_bound is None or rec.already_wait_for_bound <= ep.fit:
        return ep
    return ep._replace(fit=rec.already_wait_for_bound)


def is_open(ep: Episode | None, now: int, quiet: int) -> bool:
    """True while episode ``ep`` is open at event time ``now`` (its last failure at most
    ``quiet`` microseconds before)."""
    return ep is not None and bool(ep.unfit) and now <= ep.last_at + quiet


def count_attempt(window: tuple[tuple[int, int], ...], at: int) -> tuple[tuple[int, int], ...]:
    """Add one failed attempt at event time ``at`` (microseconds) to the storm window: counts
    per second of event time, ``((second, attempts), ...)`` ascending, keeping the seconds of
    the last ``STORM_WINDOW_SECONDS`` up to the newest. Pure."""
    second = at // 1_000_000
    if window and window[-1][0] == second:
        return window[:-1] + ((second, window[-1][1] + 1),)
    if window and window[-1][0] > second:  # late record: count it where it belongs
        counts = dict(window)
        counts[second] = counts.get(second, 0) + 1
        items = sorted(counts.items())
    else:
        items = list(window) + [(second, 1)]
    newest = items[-1][0]
    return tuple((s, n) for s, n in items if s > newest - STORM_WINDOW_SECONDS)


def per_minute(window: tuple[tuple[int, int], ...], now: int) -> int:
    """FailedScheduling Events (attempts) per minute: those of the window in the
    ``STORM_WINDOW_SECONDS`` seconds of event time up to ``now`` (microseconds). Pure."""
    second = now // 1_000_000
    return sum(n for s, n in window if second - STORM_WINDOW_SECONDS < s <= second)


def episode_facts(ep: Episode, min_member: int | None, bound: int = 0) -> dict[str, Any]:
    """The facts of a ``GangUnschedulable`` diagnostic: ``unfit`` ``{member name: fit error as
    written}``, ``fit`` (members that fit and waited at once, at most), ``min_member`` and
    ``since`` (microseconds of event time; RFC 3339 in the diagnostic); with ``capacity``
    known, ``shortfall``: its fields but ``free`` (milli-units; ``priority`` and
    ``room_preempting`` only when known) and ``bound`` (members already bound).
    Rounds and attempts are not among them: they grow while the facts stay true
    (``material_facts``)."""
    facts: dict[str, Any] = {"unfit": dict(ep.unfit), "fit": ep.fit, "min_member": min_member,
                             "since": ep.since}
    if ep.capacity is not None:
        room = ep.capacity._asdict()
        del room["free"]  # changes with every pod bound elsewhere; the room tells what matters
        if room["requests"]:
            room["requests"] = list(room["requests"])
        else:
            del room["requests"]  # a gang of one request: the facts as before
        for name in ("priority", "room_preempting"):
            if room[name] is None:
                del room[name]  # not known to the producer (PR4): the facts as before
        facts["shortfall"] = {**room, "bound": bound}
    return facts


def shortfall_of(facts: dict[str, Any]) -> Shortfall | None:
    """The ``capacity.Shortfall`` of a ``GangUnschedulable``'s facts (``None`` without
    ``shortfall`` or ``min_member``): the gang still has minMember minus bound members to
    place, each asking ``request``; the cluster's sums and room as the producer saw them."""
    s = facts.get("shortfall")
    if s is None or facts.get("min_member") is None:
        return None
    requests = tuple(s.get("requests") or ())
    return Shortfall(s["resource"], s["request"], max(0, facts["min_member"] - s["bound"]),
                     s["bound"], s["allocatable"], s.get("free", 0), s["nodes"], s["room"],
                     s["largest"], (requests[0] if requests else s["request"]) > s["largest"],
                     requests, s.get("priority"), s.get("room_preempting"))


def fits_now(facts: dict[str, Any]) -> bool:
    """True when a ``GangUnschedulable``'s facts carry the cluster's room and it is enough for
    the members still to place (``Shortfall.missing_members`` is 0 and no member is too big
    for every node): the gang is about to be scheduled, and facts that say so are no news to
    warn of again."""
    short = shortfall_of(facts)
    return short is not None and not short.never_fits and short.missing_members == 0


def unschedulable_message(gang: str, facts: dict[str, Any]) -> str:
    """The message of ``GangUnschedulable``: who did not fit and why, how many fit at once.

    e.g. ``gang sc-b/gb cannot be scheduled: gb-0, gb-1 and gb-2 did not fit (Insufficient
    nvidia.com/gpu on 2 of 2 nodes); at most 2 of minMember 3 members fit at once; the
    scheduler rejects the whole gang and retries it``. Members with the same fit error share a
    clause, clauses ordered by their first name, at most ``NAMES_SHOWN`` names each. Pure."""
    by_phrase: dict[str, list[str]] = {}
    for name in sorted(facts["unfit"]):
        by_phrase.setdefault(fit_phrase(facts["unfit"][name]), []).append(name)
    clauses = []
    for phrase, names in by_phrase.items():
        clauses.append(f"{listing(names, NAMES_SHOWN)} did not fit ({phrase})")
    fit, min_member = facts["fit"], facts["min_member"]
    least = min_name(gang)
    if fit == 0:
        fitting = f"none of {least} {min_member} members fit"
    else:
        fitting = f"at most {fit} of {least} {min_member} members " \
                  f"{'fits' if fit == 1 else 'fit'} at once"
    text = (f"{gang_text(gang)} cannot be scheduled: {'; '.join(clauses)}; {fitting}; the "
            f"scheduler rejects the whole gang and retries it")
    short = shortfall_of(facts)
    if short is not None:
        text += f"; it {shortfall_text(short, 'minCount' if is_native(gang) else 'min-available')}"
    return text


PLACEMENT = (("didn't match Pod's node affinity/selector", "selector"),
             ("untolerated taint", "taint"),
             ("didn't match pod topology spread constraints", "spread"),
             ("were unschedulable", "cordoned"))
"""Fit-error entries about where a pod may run, not how much it asks (kube-scheduler v1.35.2
``framework/plugins/nodeaffinity/node_affinity.go`` ``ErrReasonPod``,
``tainttoleration/taint_toleration.go`` ``untolerated taint``,
``nodeunschedulable/node_unschedulable.go`` ``ErrReasonUnschedulable``): freeing capacity does
not help them."""


def placement_kinds(fit_error: str) -> set[str]:
    """The kinds of placement mismatch a fit error names (``selector``, ``taint``, ``spread``,
    ``cordoned``), and ``resource`` for any other entry (``Insufficient cpu``, ...)."""
    match = _FIT_ERROR.search(fit_error)
    text = match.group(2) if match else fit_error
    kinds: set[str] = set()
    for entry in re.split(r", (?=\d+ )", text):
        if not entry.strip():
            continue
        kind = next((k for phrase, k in PLACEMENT if phrase in entry), "resource")
        kinds.add(kind)
    return kinds


def placement_advice(kinds: set[str]) -> str:
    """What helps a member no node may take (``placement_kinds`` without ``resource``): a
    label, a toleration, a node that matches, or an uncordoned node; never free capacity."""
    steps = []
    if "selector" in kinds:
        steps.append("label a node to match the pod's node selector/affinity (or change them)")
    if "taint" in kinds:
        steps.append("add a toleration for the nodes' taint (or remove the taint)")
    if "spread" in kinds:
        steps.append("relax the pod's topology spread constraints")
    if "cordoned" in kinds:
        steps.append("uncordon a node")
    steps.append("or add a node that matches")
    return ", ".join(steps) + "; freeing capacity does not help"


def unblock_text(facts: dict[str, Any], gang: str = "") -> str:
    """What would let a gang with a failure episode be scheduled, for people, of a kind that
    can help: for members that no node may take (node selector/affinity, untolerated taint,
    ``placement_advice``) a label, toleration or matching node; with the cluster's room known
    (``shortfall``), a new node when the members ask more than the cluster could ever free
    (``capacity.beyond_cluster``), else how much must free up; a smaller minMember only when
    some fit, never 0 nor below the members bound (``capacity.lower_min_member``); e.g. ``free
    capacity so that 1 more member fits alongside the 2 that fit (Insufficient
    nvidia.com/gpu on 2 of 2 nodes), or lower minMember to 2; the gang is retried as a
    whole``; ``minCount`` for a native ``gang`` (``native.min_name``). Pure."""
    least = min_name(gang)
    phrases = "; ".join(sorted({fit_phrase(f) for f in facts["unfit"].values()}))
    kinds: set[str] = set()
    for fit_error in facts["unfit"].values():
        if fit_error:
            kinds |= placement_kinds(fit_error)
    if kinds and "resource" not in kinds:
        return f"{placement_advice(kinds)} ({phrases}); the gang is retried as a whole"
    short = shortfall_of(facts)
    if short is not None:
        def q(milli: int) -> str:
            return format_quantity(short.resource, milli)

        if short.never_fits:
            asked = short.to_place[0] if short.to_place else short.request
            return (f"one member asks {q(asked)} {short.resource}, more than any node has "
                    f"allocatable (at most {q(short.largest)}): lower its request or add a node "
                    f"with more; the gang is retried as a whole")
        if short.missing_members:
            lower = lower_min_member(short)
            alternative = "" if lower is None else f", or lower {least} to {lower}"
            beyond = beyond_cluster(short)
            if beyond:
                return (f"add a node with at least {q(beyond)} {short.resource} more: the "
                        f"members to place ask more than the cluster's "
                        f"{q(short.allocatable)} could ever free{alternative}; the gang is "
                        f"retried as a whole")
            return (f"free {more_text(short).replace(' more must free up', '')}, now held by "
                    f"other pods{alternative}; the gang is retried as a whole")
    fit, min_member = facts["fit"], facts["min_member"]
    if fit and min_member is not None and fit < min_member:
        more = min_member - fit
        return (f"free capacity so that {more} more {'member fits' if more == 1 else 'members fit'}"
                f" alongside the {fit} that {'fits' if fit == 1 else 'fit'} ({phrases}), or "
                f"lower {least} to {fit}; the gang is retried as a whole")
    return (f"free capacity for the members that did not fit ({phrases}); the gang is retried "
            f"as a whole")
