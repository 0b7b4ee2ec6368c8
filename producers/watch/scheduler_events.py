"""Scheduler Events -> what happened to one gang member in one cycle (pure parsing).

Where it sits: the watch producer (``producers.watch``) sees core/v1 Events whose reason is
``FailedScheduling`` or ``Scheduled`` and hands their ``reason`` and ``message`` here; the
``Outcome`` it gets back becomes the stage, status and reason of a ``gangstate.cycle/v1`` record.
Pure computation over strings: no I/O, no clock, no Kafka or Kubernetes imports.

Sources of the messages (summarised in ``../shared/brief/gang-semantics.md``):
- Koordinator ``pkg/scheduler/plugins/coscheduling/core/core.go``: ``PostFilter`` rejects the
  gang group with ``GangGroup %q gets rejected due to member Pod %q is unschedulable with reason
  %q, alreadyWaitForBound: %d`` (older: ``Gang %q gets rejected due to member Pod %q ...``), its
  own status ``Gang %q gets rejected due to pod is unschedulable``; ``Unreserve`` rejects with
  ``Gang %q gets rejected due to Pod %q in Unreserve``; older releases fail PreFilter with
  ``gang child pod not collect enough, gangName: %v, podName: %v`` and ``gang scheduleCycle not
  valid, gangName: %v, podName: %v``.
- kube-scheduler ``framework/runtime/waiting_pods_map.go``: a Permit timeout rejects with
  ``rejected due to timeout after waiting %v at plugin %v``; ``framework/types.go``
  ``FitError.Error``: ``0/%d nodes are available: <count> <reason>, ... .`` with the reasons
  sorted, optionally followed by `` preemption: ...``; ``schedule_one.go``: the ``Scheduled``
  Event says ``Successfully assigned %s/%s to %s``.

Must not: decide anything about gangs; a message it cannot read still yields an outcome
(status ``Unschedulable``, reason = the Event reason), never an exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from streams.wire.contracts import CycleStatus, Stage

REASON_GANG_GROUP_REJECTED = "GangGroupRejected"
"""Reason of a waiting member released because another member of its gang group failed."""
REASON_GANG_REJECTED = "GangRejected"
"""Reason of a member whose own failure rejected its gang (message without the fit error)."""
REASON_BASIC_CHECK = "GangBasicCheckUnsatisfied"
"""Reason of a member refused because its gang has too few member pods (Koordinator's name for
the PreEnqueue/PreFilter basic check)."""
REASON_CYCLE_INVALID = "GangScheduleCycleInvalid"
REASON_PERMIT_TIMEOUT = "PermitTimeout"
REASON_UNRESERVE = "GangUnreserve"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one scheduler Event says about its pod in one scheduling cycle.

    ``stage``/``status`` use the ``gangstate.cycle/v1`` vocabulary; ``reason`` is the short
    cause (``Insufficient nvidia.com/gpu``, ``GangGroupRejected``...); ``culprit`` names the
    member whose failure caused this one (as written in the message, bare name or ``ns/name``),
    or ``None``; ``node`` is the node a ``Scheduled`` Event assigned the pod to; ``parsed`` is
    False when no rule matched and the outcome is the generic fallback.
    """

    stage: Stage
    status: CycleStatus
    reason: str
    culprit: str | None = None
    node: str | None = None
    parsed: bool = True


_Q = r'"((?:[^"\\]|\\.)*)"'  # a Go %q string, captured without its quotes
_MEMBER_REJECTED = re.compile(
    r"(?:GangGroup|Gang) " + _Q + r" gets rejected due to member Pod " + _Q
    + r" is ?unschedulable with reason " + _Q, re.S)
_POD_UNSCHEDULABLE = re.compile(r"Gang " + _Q + r" gets rejected due to pod is unschedulable")
_UNRESERVE = re.compile(r"Gang " + _Q + r" gets rejected due to Pod " + _Q + r" in Unreserve")
_TIMEOUT = re.compile(r"rejected due to timeout after waiting (\S+) at plugin (\S+)")
_NOT_ENOUGH = re.compile(r"child pod not collect enough")
_CYCLE_INVALID = re.compile(r"gang scheduleCycle not valid")
_FIT_ERROR = re.compile(r"0/(\d+) nodes are available: (.*?)(?:\.(?:\s|$)|$)", re.S)
_FIT_ENTRY = re.compile(r"(\d+) (.+)", re.S)
_ASSIGNED = re.compile(r"Successfully assigned (\S+?)/(\S+) to (\S+)")


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def dominant_fit_reason(message: str) -> str | None:
    """The node-fit reason that rejected the most nodes in a kube-scheduler ``FitError`` text.

    ``"0/8 nodes are available: 8 Insufficient nvidia.com/gpu."`` -> ``"Insufficient
    nvidia.com/gpu"``; with several reasons (``"0/5 nodes are available: 3 Insufficient cpu, 2
    Insufficient memory."``) the one with the highest node count wins, the first written on a
    tie (kube-scheduler sorts them by text). Only the first ``0/N nodes are available`` clause
    counts (a trailing ``preemption: 0/N ...`` clause is ignored). ``None`` when the text holds
    no fit error or an empty one. Pure.
    """
    match = _FIT_ERROR.search(message)
    if not match:
        return None
    best: tuple[int, str] | None = None
    # entries are "<count> <reason>", separated by ", " before the next count
    for entry in re.split(r", (?=\d+ )", match.group(2)):
        found = _FIT_ENTRY.fullmatch(entry.strip())
        if not found:
            continue
        count, reason = int(found.group(1)), found.group(2).strip().rstrip(".")
        if best is None or count > best[0]:
            best = (count, reason)
    return None if best is None else best[1]


def _is_self(written: str, namespace: str, name: str) -> bool:
    return written in (name, f"{namespace}/{name}")


def parse_scheduler_event(event_reason: str, message: str, namespace: str,
                          name: str) -> Outcome:
    """Read one scheduler Event about pod ``namespace/name`` into an ``Outcome``.

    ``event_reason`` is the Event's ``reason`` (``FailedScheduling`` or ``Scheduled``),
    ``message`` its ``message`` (``note`` in events.k8s.io/v1). Rules, first match wins:
    1. ``Scheduled``: ``Bind``/``Bound`` with the node from ``Successfully assigned ns/pod to
       node``.
    2. ``[Gang]Group "G" gets rejected due to member Pod "P" is unschedulable with reason "R"``:
       when P is this pod, it is the member that failed (``Filter``/``Unschedulable``, reason
       from the fit error R, else ``GangRejected``); otherwise this pod was waiting and is
       released (``PostFilter``/``Rejected``, ``GangGroupRejected``, culprit P). Checked before
       rule 5 because R itself holds a fit error.
    3. ``Gang "G" gets rejected due to Pod "P" in Unreserve``: a waiting member released
       (``Unreserve``/``Rejected``) or, when P is this pod, its own ``Unreserve`` failure.
    4. ``rejected due to timeout after waiting D at plugin X``: ``Permit``/``Timeout``.
    5. A fit error ``0/N nodes are available: ...``: ``Filter``/``Unschedulable`` with the
       dominant node reason (``dominant_fit_reason``).
    6. ``Gang "G" gets rejected due to pod is unschedulable``: ``PostFilter``/``Unschedulable``.
    7. Older Koordinator PreFilter checks: ``child pod not collect enough`` ->
       ``GangBasicCheckUnsatisfied``, ``gang scheduleCycle not valid`` ->
       ``GangScheduleCycleInvalid``; both ``PreFilter``/``Unschedulable``.
    8. Anything else: ``Filter``/``Unschedulable`` with ``event_reason`` as the reason,
       ``parsed=False``. Raises nothing.
    """
    if event_reason == "Scheduled":
        assigned = _ASSIGNED.search(message)
        return Outcome("Bind", "Bound", "", node=assigned.group(3) if assigned else None,
                       parsed=assigned is not None)
    member = _MEMBER_REJECTED.search(message)
    if member:
        culprit, inner = _unquote(member.group(2)), _unquote(member.group(3))
        if _is_self(culprit, namespace, name):
            fit = dominant_fit_reason(inner)
            if fit is not None:
                return Outcome("Filter", "Unschedulable", fit)
            return Outcome("PostFilter", "Unschedulable", REASON_GANG_REJECTED)
        return Outcome("PostFilter", "Rejected", REASON_GANG_GROUP_REJECTED, culprit=culprit)
    unreserve = _UNRESERVE.search(message)
    if unreserve:
        culprit = _unquote(unreserve.group(2))
        if _is_self(culprit, namespace, name):
            return Outcome("Unreserve", "Unschedulable", REASON_UNRESERVE)
        return Outcome("Unreserve", "Rejected", REASON_GANG_GROUP_REJECTED, culprit=culprit)
    if _TIMEOUT.search(message):
        return Outcome("Permit", "Timeout", REASON_PERMIT_TIMEOUT)
    fit = dominant_fit_reason(message)
    if fit is not None:
        return Outcome("Filter", "Unschedulable", fit)
    if _POD_UNSCHEDULABLE.search(message):
        return Outcome("PostFilter", "Unschedulable", REASON_GANG_REJECTED)
    if _NOT_ENOUGH.search(message):
        return Outcome("PreFilter", "Unschedulable", REASON_BASIC_CHECK)
    if _CYCLE_INVALID.search(message):
        return Outcome("PreFilter", "Unschedulable", REASON_CYCLE_INVALID)
    return Outcome("Filter", "Unschedulable", event_reason or "FailedScheduling", parsed=False)
