"""The pods' own ``PodScheduled`` condition as a source of scheduling attempts, beside the
scheduler's Events (pure).

Why: koord-scheduler v1.8.0 throttles its own Event writes on the client side; under storms a
new gang's ``FailedScheduling`` Events were created 38-66 s after their ``eventTime``, while
every pod's ``PodScheduled`` condition already held the message (issue 22). kube-scheduler
writes both from one place, for every failed attempt (KS = kubernetes v1.35.2
``pkg/scheduler/``): ``handleSchedulingFailure`` records the Event with the message cut at
1024 bytes (KS ``schedule_one.go:1108-1109``, ``truncateMessage`` ``1122-1129``) and then
patches the condition ``PodScheduled=False`` with reason ``Unschedulable`` (a rejection) or
``SchedulerError`` (anything else; KS ``schedule_one.go:1045-1048``) and the whole message
(``schedule_one.go:1110-1116``); ``updatePod`` patches only when the condition changed (KS
``schedule_one.go:1147-1154``; the same through the API cacher of the ``SchedulerAsyncAPICalls``
gate, off by default in v1.35, KS ``framework/api_calls/pod_status_patch.go:72-86``), and ``UpdatePodCondition`` keeps ``lastTransitionTime`` while
the status stays ``False`` (kubernetes v1.35.2 ``pkg/api/v1/pod/util.go:363-387``, ``374-376``).
koord-scheduler v1.8.0 keeps that handler: its failure handler dispatches to it
(Koordinator v1.8.0 ``pkg/scheduler/frameworkext/framework_extender_factory.go:391-397``,
``errorhandler_dispatcher.go:56-74``) and writes no ``PodScheduled`` condition of its own.
So a pod's condition always holds its latest attempt's reason and message, and a change of
either is a new attempt; a repeat of the same message is not visible in it (the Events'
``count`` tells those). Koordinator's main branch also patches this condition on every pending
gang member (``GangPendingPodsConditionPatch``, its PR #3087).

What the watch producer derives (``GangRouter``): one ``gangstate.cycle/v1`` record per change
of a gang pod's failed ``PodScheduled`` condition, read with the Events' parser
(``scheduler_events.parse_scheduler_event`` as a ``FailedScheduling``), with ``source.kind``
``condition`` and an attempt id ``cond:<pod uid>:<lastTransitionTime>:<sha256 of reason and
message, 16 hex>`` (``condition_attempt``), the same for a relist of the same pod, so the fold
drops a repeat (docs/contracts.md, ``gangstate.cycle/v1``).

Must not: decide anything about gangs, read the clock.
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping

POD_SCHEDULED = "PodScheduled"
CONDITION_REASONS = ("Unschedulable", "SchedulerError")
"""The reasons kube-scheduler v1.35.2 gives a ``PodScheduled=False`` condition after a failed
attempt (``v1.PodReasonUnschedulable``, ``v1.PodReasonSchedulerError``; KS
``schedule_one.go:1045-1048``); both come with a ``FailedScheduling`` Event of the same
message."""
_KEPT = ("type", "status", "reason", "message", "lastTransitionTime")


def pod_scheduled(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pod's ``PodScheduled`` condition reduced to ``type``, ``status``, ``reason``,
    ``message`` and ``lastTransitionTime`` (those present as strings: anything else is not what
    an API server serves, and is left out), or ``None`` when it has none (or
    ``status.conditions`` is not a list of objects). Pure."""
    status = pod.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    if not isinstance(conditions, list):
        return None
    for condition in conditions:
        if isinstance(condition, dict) and condition.get("type") == POD_SCHEDULED:
            return {k: condition[k] for k in _KEPT if isinstance(condition.get(k), str)}
    return None


def failed_condition(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pod's ``PodScheduled`` condition when it reports a failed attempt: status ``False``,
    reason in ``CONDITION_REASONS``, a non-empty string message, and the pod not bound
    (``spec.nodeName`` unset); else ``None``. Pure."""
    condition = pod_scheduled(pod)
    if condition is None or condition.get("status") != "False" \
            or condition.get("reason") not in CONDITION_REASONS \
            or not isinstance(condition.get("message"), str) or not condition["message"] \
            or (pod.get("spec") or {}).get("nodeName"):
        return None
    return condition


def condition_attempt(pod_uid: str, condition: Mapping[str, Any],
                      resource_version: str = "") -> str:
    """The attempt id of a failed condition: ``cond:<pod uid>:<lastTransitionTime>:<first 16
    hex of sha256(reason + "\\n" + message)>``, then ``@<resourceVersion>`` of the pod when
    given (``lastTransitionTime`` empty when absent). The same condition of the same pod
    object gives the same id (a relist, a watcher restart), and a message seen again after
    another a new one: kube-scheduler keeps ``lastTransitionTime`` while the condition stays
    False, so without the pod's resourceVersion a member's own fit error coming back after a
    gang rejection (a group once satisfied, its left-over member scheduled on its own) would
    read as the attempt already folded. Pure."""
    digest = hashlib.sha256(f"{condition.get('reason', '')}\n{condition.get('message', '')}"
                            .encode()).hexdigest()[:16]
    attempt = f"cond:{pod_uid}:{condition.get('lastTransitionTime') or ''}:{digest}"
    return f"{attempt}@{resource_version}" if resource_version else attempt


def changed_condition(pod: Mapping[str, Any],
                      prev: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The failed condition of ``pod`` (``failed_condition``) when its ``(reason, message)``
    differs from that of ``prev`` (the previous state of the same pod, ``None`` when new:
    then any failed condition counts), else ``None``. Pure."""
    condition = failed_condition(pod)
    if condition is None:
        return None
    before = pod_scheduled(prev) if prev is not None else None
    if before is not None and before.get("status") == "False" \
            and (before.get("reason"), before.get("message")) \
            == (condition.get("reason"), condition.get("message")):
        return None
    return condition
