"""Object shapes of the watch: what a published Pod or PodGroup carries, what the watcher keeps
of what it lists, and the records it builds from them (``gangstate.kube/v1``).

Where it sits: the watch producer's pure part, below the stream plan, the router
(``producers.watch.routing``) and the shell (``producers.watch.watching``); ``producers.watch.dump``
and the bench build the same shapes. Every function here is pure: an object in, a new object
out, nothing read from the clock or the network.

Must not: let anything the fold does not read (container env values, commands, other labels and
annotations) into a published shape (docs/contracts.md, "The published Pod and PodGroup").
"""

from __future__ import annotations

from typing import Any, Mapping

from producers.watch.conditions import pod_scheduled
from streams.wire.contracts import KUBE_SCHEMA
from streams.core.spec import (ANNOTATION_HOLD, ANNOTATION_MATCH_POLICY_ALIAS,
                               LABEL_MIN_AVAILABLE_DEPRECATED,
                               LABEL_POD_GROUP, LABEL_POD_GROUP_NAME_DEPRECATED, PREFIX)
from streams.core.timefmt import format_time

PODGROUP_GROUP, PODGROUP_VERSION, PODGROUP_PLURAL = "scheduling.sigs.k8s.io", "v1alpha1", "podgroups"
KINDS = {"pods": ("Pod", "v1"), "events": ("Event", "v1"),
          "podgroups": ("PodGroup", f"{PODGROUP_GROUP}/{PODGROUP_VERSION}"),
          "nodes": ("Node", "v1"), "boundpods": ("Pod", "v1")}
"""``kind`` and ``apiVersion`` per watched resource (built-in list items carry none)."""
CAPACITY_RESOURCES = ("nodes", "boundpods")
"""Streams that only feed the per-node cache (``node_cache.NodeCache``): Nodes, and every
pod bound to a node (any scheduler's: they hold what the gang's members would need)."""


GANG_LABELS = (LABEL_POD_GROUP, LABEL_POD_GROUP_NAME_DEPRECATED,
               LABEL_MIN_AVAILABLE_DEPRECATED)
"""The pod labels the fold reads (``streams.core.spec``: ``gang_of_pod``,
``waits_for_podgroup``, ``settings_of_pod``); every other label stays out of ``gang-events``."""
PUBLISHED_META = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp",
                  "deletionTimestamp")
"""The ``metadata`` fields of a published Pod or PodGroup besides its gang labels and
annotations (docs/contracts.md, "The published Pod and PodGroup")."""


def _gang_annotation(key: str) -> bool:
    """An annotation the fold reads: Koordinator's ``gang.scheduling.koordinator.sh/*`` and the
    ``pod-group.scheduling.sigs.k8s.io/match-policy`` alias and gangstate's own
    ``gangstate.io/hold`` (``streams.core.spec``)."""
    return key.startswith(PREFIX) or key in (ANNOTATION_MATCH_POLICY_ALIAS, ANNOTATION_HOLD)


def published(resource: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The slimmed Pod or PodGroup that a ``gangstate.kube/v1`` record carries: exactly what
    the fold reads (docs/contracts.md, "The published Pod and PodGroup"), so that container
    env values, commands, images, volumes, other labels and annotations (such as
    ``kubectl.kubernetes.io/last-applied-configuration``, a copy of the whole manifest) never
    reach ``gang-events``:

    - both: ``apiVersion``, ``kind``, ``metadata.{name, namespace, uid, resourceVersion,
      creationTimestamp, deletionTimestamp}`` (those present) and the gang annotations
      (``gang.scheduling.koordinator.sh/*``, ``pod-group.scheduling.sigs.k8s.io/match-policy``,
      ``gangstate.io/hold``);
    - a Pod: the gang labels (``GANG_LABELS``), ``spec.{nodeName, schedulingGates}`` and
      ``status.{phase, reason, nominatedNodeName}`` (those set; ``reason``: ``Evicted`` for a pod the kubelet evicted);
    - a PodGroup: ``spec.{minMember, scheduleTimeoutSeconds}``.

    Other resources (core/v1 Events) pass unchanged. Pure."""
    if resource not in ("pods", "podgroups"):
        return obj
    meta = obj.get("metadata") or {}
    out_meta: dict[str, Any] = {k: meta[k] for k in PUBLISHED_META if k in meta}
    if resource == "pods":
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k in GANG_LABELS}
        if labels:
            out_meta["labels"] = labels
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if _gang_annotation(k)}
    if annotations:
        out_meta["annotations"] = annotations
    out: dict[str, Any] = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    out["metadata"] = out_meta
    spec = obj.get("spec") or {}
    if resource == "pods":
        out["spec"] = {k: spec[k] for k in ("nodeName", "schedulingGates") if k in spec}
        status = obj.get("status") or {}
        out["status"] = {k: status[k] for k in ("phase", "reason", "nominatedNodeName")
                         if status.get(k)}
    else:
        out["spec"] = {k: spec[k] for k in ("minMember", "scheduleTimeoutSeconds")
                       if k in spec}
    return out


def _requests(containers: Any) -> list[dict[str, Any]]:
    """Containers reduced to their resource requests (and an init container's
    ``restartPolicy``, which makes it a sidecar: ``streams.core.capacity.pod_requests``)."""
    return [{"resources": {"requests": (c.get("resources") or {}).get("requests") or {}},
             **({"restartPolicy": c["restartPolicy"]} if "restartPolicy" in c else {})}
            for c in containers or []]


def slim(resource: str, obj: dict[str, Any]) -> dict[str, Any]:
    """What the watcher keeps of an object it lists or watches, so that its memory for a large
    cluster stays small and nothing it does not need (env values above all) is held:

    - a Node or a bound Pod: only what the per-node cache reads (name, uid, resourceVersion; a
      Node's ``spec.unschedulable``, taints and ``status.allocatable``; a Pod's node, container
      and init-container requests, overhead, priority and phase), and a bound Pod's grace period
      (``spec.terminationGracePeriodSeconds``, ``metadata.deletionGracePeriodSeconds`` and
      ``deletionTimestamp``) for the records of a preemption (``GangRouter``);
    - a gang Pod or a PodGroup: its ``published`` shape; a Pod also keeps its containers'
      requests and overhead, which the capacity facts of its cycle records need
      (``GangRouter``), with its ``spec.priority`` and ``preemptionPolicy`` (their
      ``room_preempting``), its ``spec.schedulerName`` and its ``PodScheduled`` condition
      (``pod_scheduled``: the condition records' source), which ``published`` leaves out of
      ``gang-events``.

    core/v1 Events pass unchanged. Pure."""
    if resource == "podgroups":
        return published(resource, obj)
    if resource == "pods":
        out = published(resource, obj)
        spec = obj.get("spec") or {}
        out["spec"] = {**out["spec"], "containers": _requests(spec.get("containers")),
                       "initContainers": _requests(spec.get("initContainers")),
                       **({"overhead": spec["overhead"]} if spec.get("overhead") else {}),
                       **({"schedulerName": spec["schedulerName"]}
                          if spec.get("schedulerName") else {}),
                       **{k: spec[k] for k in ("priority", "preemptionPolicy") if k in spec}}
        scheduled = pod_scheduled(obj)
        if scheduled is not None:  # the condition records' source (GangRouter)
            out["status"] = {**out["status"], "conditions": [scheduled]}
        return out
    if resource not in CAPACITY_RESOURCES:
        return obj
    meta = obj.get("metadata") or {}
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    out: dict[str, Any] = {"metadata": {k: meta[k] for k in ("name", "namespace", "uid",
                                                             "resourceVersion") if k in meta}}
    if resource == "nodes":
        out["spec"] = {k: spec[k] for k in ("unschedulable", "taints") if k in spec}
        out["status"] = {"allocatable": status.get("allocatable") or {}}
        return out

    for key in ("deletionTimestamp", "deletionGracePeriodSeconds"):
        if meta.get(key) is not None:
            out["metadata"][key] = meta[key]
    out["spec"] = {"nodeName": spec.get("nodeName"),
                   **({"terminationGracePeriodSeconds": spec["terminationGracePeriodSeconds"]}
                      if spec.get("terminationGracePeriodSeconds") is not None else {}),
                   "containers": _requests(spec.get("containers")),
                   "initContainers": _requests(spec.get("initContainers")),
                   **({"overhead": spec["overhead"]} if spec.get("overhead") else {}),
                   **({"priority": spec["priority"]} if "priority" in spec else {})}
    out["status"] = {"phase": status.get("phase")}
    return out



def event_count(event: Mapping[str, Any]) -> int:
    """How often a core/v1 Event has happened: ``series.count`` (events.k8s.io/v1 Events, as the
    scheduler's recorder writes them, count their repeats there: client-go
    ``tools/events/event_broadcaster.go:178-182``), else ``count`` (the legacy recorder), else 1
    (``k8s.io/api`` v0.35.2 ``core/v1/types.go:7549-7551,7584-7586``). Values that are not
    positive integers count as absent. Pure."""
    for value in ((event.get("series") or {}).get("count"), event.get("count")):
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
    return 1


def kube_record(resource: str, type_: str, obj: dict[str, Any], at: int) -> dict[str, Any]:
    """A ``gangstate.kube/v1`` record at event time ``at`` (microseconds); a Pod or PodGroup
    goes in its ``published`` shape, whoever built ``obj`` (the watch streams, a dump)."""
    return {"schema": KUBE_SCHEMA, "observed_at": format_time(at), "resource": resource,
            "type": type_, "object": published(resource, obj)}
