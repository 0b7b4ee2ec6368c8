"""What the query commands answer, as plain documents built from gang states.

Where it sits: the query side, over ``streams.core``. ``gang_rows``, ``gang_detail`` and
``explain_pod`` are plain functions of ``GangState`` values, so that ``gangstate get/describe/explain
--from TRACE`` prints exactly what a worker serves (``streams.worker.web`` mounts them over HTTP).
Everything they say comes from ``streams.core`` (``summary``, ``explain.findings``,
``explain.why_pod``); this module only selects and shapes.

Must not: decide or explain anything itself, do I/O, or import Faust, Kafka or the worker.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from streams.core.explain import deletion, findings, why_pod
from streams.core.native import KUBE_SCHEDULER, SCHEDULERS, composite_key, gang_key, split_gang
from streams.core.state import GangState, as_of, summary
from streams.core.timefmt import format_time

PHASES = ("NotInitialized", "Gathering", "Ready", "Scheduling", "Scheduled", "Finished",
          "Deleted")
"""Every value of ``GangState.phase`` (contracts.md, ``gangstate fold``)."""
HIDDEN_PHASES = ("Deleted",)
"""Phases ``gang_rows`` leaves out unless asked for by name: a deleted gang is not a live gang
(its tombstone stays in the table; ``describe gang`` explains it)."""

ROW_FIELDS = ("scheduler", "phase", "members", "bound", "waiting", "min_member",
              "representative")


class NotFound(LookupError):
    """A gang or pod the table does not know; ``str(err)`` is the message for people."""


def gang_row(state: GangState) -> dict[str, Any]:
    """One line of the gang list: ``{"gang", "namespace", "name", "scheduler", "phase",
    "members", "bound", "waiting", "min_member", "representative"}``; ``name`` is the gang's
    (its PodGroup's) without the scheduler, ``scheduler`` ``koord-scheduler`` or
    ``kube-scheduler``; counts are pods, ``min_member`` (a native gang's minCount) and
    ``representative`` are ``None`` when unknown."""
    info = summary(state)
    return {"gang": state.gang, "namespace": state.namespace, "name": state.name,
            **{k: info[k] for k in ROW_FIELDS}}


def gang_rows(states: Iterable[GangState], namespace: str | None = None,
              phase: str | None = None, scheduler: str | None = None) -> list[dict[str, Any]]:
    """``gang_row`` of each state in ``namespace``, ``phase`` (``None``: any phase but the
    ``HIDDEN_PHASES``) and ``scheduler`` (``None``: both), sorted by gang id. ``phase`` matches
    case-insensitively (``ready`` = ``Ready``). Raises ``ValueError`` when ``phase`` is not one
    of ``PHASES`` or ``scheduler`` not one of ``SCHEDULERS``."""
    if phase is not None:
        canonical = {p.lower(): p for p in PHASES}.get(phase.lower())
        if canonical is None:
            raise ValueError(f"unknown phase {phase!r}; one of {', '.join(PHASES)}")
        phase = canonical
    if scheduler is not None and scheduler not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {scheduler!r}; one of {', '.join(SCHEDULERS)}")
    rows = [gang_row(s) for s in states
            if (namespace is None or s.namespace == namespace)
            and (scheduler is None or s.scheduler == scheduler)
            and (s.phase == phase if phase is not None else s.phase not in HIDDEN_PHASES)]
    return sorted(rows, key=lambda r: r["gang"])


def history(state: GangState) -> list[dict[str, str]]:
    """The gang's recorded transitions, oldest first: ``[{"at": RFC 3339, "change",
    "cause"}]``."""
    return [{"at": format_time(at), "change": change, "cause": cause}
            for at, change, cause in state.history]


def gang_detail(state: GangState, now: int | None = None) -> dict[str, Any]:
    """The one-gang document: ``{"gang", **summary(state), "deleted": deletion(state),
    "findings": findings(state), "history": history(state)}`` (shapes in
    ``streams.core.state.summary`` and ``streams.core.explain``; ``deleted`` is ``None`` while
    the gang exists), read at event time ``now`` (microseconds: the fold's clock, ticks
    included; ``None``: the gang's own clock, ``state.as_of``)."""
    state = as_of(state, now)
    return {"gang": state.gang, **summary(state), "deleted": deletion(state),
            "findings": findings(state), "history": history(state)}


def gang_candidates(gang: str, scheduler: str | None = None) -> list[str]:
    """The gang ids a person's ``NAMESPACE/NAME`` may mean: with ``scheduler`` only that
    scheduler's; without, Koordinator's, then the native PodGroup's (``ns/name@kube-scheduler``)
    and the native CompositePodGroup's (``ns/composite:name@kube-scheduler``); an id that
    already names its scheduler means itself. Raises ``ValueError`` for an unknown
    ``scheduler``."""
    if scheduler is not None and scheduler not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {scheduler!r}; one of {', '.join(SCHEDULERS)}")
    namespace, name, named = split_gang(gang)
    if gang.endswith("@" + KUBE_SCHEDULER):
        return [gang] if scheduler in (None, named) else []
    out = [] if scheduler == KUBE_SCHEDULER else [gang_key(namespace, name)]
    if scheduler in (None, KUBE_SCHEDULER):
        out += [gang_key(namespace, name, KUBE_SCHEDULER), composite_key(namespace, name)]
    return out


def resolve_gang(states: Mapping[str, GangState], gang: str,
                 scheduler: str | None = None) -> GangState:
    """The state ``gang`` (``NAMESPACE/NAME``, ``scheduler`` as in ``gang_candidates``) names.
    Raises ``NotFound`` when none is known, or when both schedulers have a gang of that name
    and ``scheduler`` does not say which."""
    found = [states[g] for g in gang_candidates(gang, scheduler) if g in states]
    if not found:
        raise NotFound(f"gang {gang} not found")
    if len(found) > 1:
        raise NotFound(ambiguous(gang, [s.gang for s in found]))
    return found[0]


def ambiguous(gang: str, ids: list[str]) -> str:
    """What to say when ``NAMESPACE/NAME`` ``gang`` names several gangs (``ids``): which, and
    how to pick one (``--scheduler``, or the id itself)."""
    return (f"gang {gang} names {len(ids)} gangs: {', '.join(ids)}; say which with "
            f"--scheduler, or give the id")


def _knows_pod(state: GangState, pod: str) -> bool:
    """True when pod ``ns/name`` is a live member of the gang, or one of the pods dropped with
    its PodGroup (``GangState.orphans``, which ``why_pod`` explains too)."""
    return state.member_by_name(pod) is not None or state.orphan_by_name(pod) is not None


def find_gang_of_pod(states: Iterable[GangState], pod: str) -> GangState | None:
    """The gang (first in gang id order) whose live members, or pods dropped with its
    PodGroup, include pod ``ns/name``, or ``None``."""
    for state in sorted(states, key=lambda s: s.gang):
        if _knows_pod(state, pod):
            return state
    return None


def explain_pod(states: Mapping[str, GangState], pod: str, gang: str | None = None,
                now: Callable[[str], int | None] | None = None) -> dict[str, Any]:
    """``why_pod`` for pod ``ns/name`` in gang ``gang`` (``None``: the gang whose members
    include the pod), read at event time ``now(gang id)`` (microseconds: the clock of the fold
    that owns the gang; ``None``: the gang's own clock, ``state.as_of``). Raises ``NotFound`` when the gang is unknown or the pod is not one of its
    live members."""
    if gang is not None:
        state = resolve_gang(states, gang)
        if not _knows_pod(state, pod):
            raise NotFound(f"pod {pod} is not a live member of gang {gang}")
    else:
        state = find_gang_of_pod(states.values(), pod)
        if state is None:
            raise NotFound(f"pod {pod} is not a live member of any known gang")
    return why_pod(as_of(state, None if now is None else now(state.gang)), pod)
