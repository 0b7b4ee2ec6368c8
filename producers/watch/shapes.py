"""Object shapes of the watch: what a published Pod, PodGroup, CompositePodGroup or Workload
carries, what the watcher keeps of what it lists, and the records it builds from them
(``gangstate.kube/v1``).

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
from streams.core.native import NATIVE_GROUP, NATIVE_PODGROUP_API_VERSION, is_native_podgroup
from streams.core.spec import (ANNOTATION_HOLD, ANNOTATION_MATCH_POLICY_ALIAS,
                               LABEL_MIN_AVAILABLE_DEPRECATED,
                               LABEL_POD_GROUP, LABEL_POD_GROUP_NAME_DEPRECATED, PREFIX)
from streams.core.timefmt import format_time

PODGROUP_GROUP, PODGROUP_VERSION, PODGROUP_PLURAL = "scheduling.sigs.k8s.io", "v1alpha1", "podgroups"
NATIVE_PODGROUP_API = NATIVE_PODGROUP_API_VERSION
"""``scheduling.k8s.io/v1beta1``: Kubernetes' own PodGroups (v1.37,
``pkg/apis/scheduling/install``)."""
COMPOSITE_API = f"{NATIVE_GROUP}/v1alpha3"
"""``scheduling.k8s.io/v1alpha3``: CompositePodGroups (v1.37, alpha: gate ``CompositePodGroup``)."""
WORKLOAD_API = f"{NATIVE_GROUP}/v1beta1"
"""``scheduling.k8s.io/v1beta1``: Workloads (v1.37, beta: gate ``GenericWorkload``)."""
KINDS = {"pods": ("Pod", "v1"), "events": ("Event", "v1"),
          "podgroups": ("PodGroup", f"{PODGROUP_GROUP}/{PODGROUP_VERSION}"),
          "compositepodgroups": ("CompositePodGroup", COMPOSITE_API),
          "workloads": ("Workload", WORKLOAD_API),
          "nodes": ("Node", "v1"), "boundpods": ("Pod", "v1")}
"""``kind`` and default ``apiVersion`` per watched resource (built-in list items carry none;
a stream of native PodGroups names its own, ``plan.StreamSpec.api``)."""
GROUP_RESOURCES = ("podgroups", "compositepodgroups", "workloads")
"""The resources served by an API that a cluster may lack (Koordinator's PodGroup CRD not
installed; Kubernetes' own ``scheduling.k8s.io`` APIs without the ``GenericWorkload`` or
``CompositePodGroup`` feature gate): a 404 is reported once and looked for again
(``WatchConfig.crd_recheck``), never a failure."""
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


POD_SPEC = ("nodeName", "schedulingGates", "schedulerName", "schedulingGroup")
"""The ``spec`` fields of a published Pod: bound or not, its gates, and which scheduler's gang it
is in (``streams.core.native.gang_of_pod_object``: ``schedulingGroup.podGroupName`` names a
native PodGroup, unless ``schedulerName`` is ``koord-scheduler``)."""
NATIVE_SPEC = ("schedulingPolicy", "parentCompositePodGroupName", "workloadRef")
"""The ``spec`` fields of a published native PodGroup or CompositePodGroup (``minCount`` or
``minGroupCount`` in ``schedulingPolicy.gang``, its parent in a tree, its Workload)."""
CONDITION_FIELDS = ("type", "status", "reason", "message", "lastTransitionTime")
"""What a published ``status.conditions`` entry of a native object keeps."""


def _conditions(status: Mapping[str, Any]) -> list[Any] | None:
    """``status.conditions`` with ``CONDITION_FIELDS`` only (``observedGeneration`` and anything
    else left out); an entry that is no object is kept as it is, for the decoder to refuse;
    ``None`` when there are none."""
    raw = status.get("conditions")
    if not raw or not isinstance(raw, list):
        return None
    return [{k: c[k] for k in CONDITION_FIELDS if k in c} if isinstance(c, dict) else c
            for c in raw]


def _native(resource: str, spec: Mapping[str, Any],
            status: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The published ``spec`` and ``status`` of a native PodGroup, CompositePodGroup or
    Workload (``published``)."""
    if resource == "workloads":
        out: dict[str, Any] = {}
        if "controllerRef" in spec:
            out["controllerRef"] = spec["controllerRef"]
        templates = spec.get("podGroupTemplates")
        if isinstance(templates, list):
            out["podGroupTemplates"] = [
                {k: t[k] for k in ("name", "schedulingPolicy") if k in t}
                if isinstance(t, dict) else t for t in templates]
        return out, None
    conditions = _conditions(status)
    return ({k: spec[k] for k in NATIVE_SPEC if k in spec},
            None if conditions is None else {"conditions": conditions})


def published(resource: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The slimmed object that a ``gangstate.kube/v1`` record carries: exactly what
    the fold reads (docs/contracts.md, "The published Pod and PodGroup"), so that container
    env values, commands, images, volumes, other labels and annotations (such as
    ``kubectl.kubernetes.io/last-applied-configuration``, a copy of the whole manifest) never
    reach ``gang-events``:

    - every one: ``apiVersion``, ``kind``, ``metadata.{name, namespace, uid, resourceVersion,
      creationTimestamp, deletionTimestamp}`` (those present);
    - a Pod and a Koordinator PodGroup: the gang annotations
      (``gang.scheduling.koordinator.sh/*``, ``pod-group.scheduling.sigs.k8s.io/match-policy``,
      ``gangstate.io/hold``);
    - a Pod: the gang labels (``GANG_LABELS``), ``spec.{nodeName, schedulingGates,
      schedulerName, schedulingGroup}`` and ``status.{phase, reason, nominatedNodeName}``
      (those set; ``reason``: ``Evicted`` for a pod the kubelet evicted);
    - a Koordinator PodGroup (``scheduling.sigs.k8s.io``): ``spec.{minMember,
      scheduleTimeoutSeconds}``;
    - a native PodGroup (``apiVersion`` ``scheduling.k8s.io/*``) and a CompositePodGroup
      (resource ``compositepodgroups``): ``spec.{schedulingPolicy,
      parentCompositePodGroupName, workloadRef}`` and ``status.conditions`` (each with
      ``type``, ``status``, ``reason``, ``message``, ``lastTransitionTime`` only);
    - a Workload (resource ``workloads``): ``spec.controllerRef`` and
      ``spec.podGroupTemplates`` (each with ``name`` and ``schedulingPolicy`` only).

    Other resources (core/v1 Events) pass unchanged. Pure."""
    if resource not in ("pods",) + GROUP_RESOURCES:
        return obj
    meta = obj.get("metadata") or {}
    out_meta: dict[str, Any] = {k: meta[k] for k in PUBLISHED_META if k in meta}
    native = resource != "pods" and (resource != "podgroups"
                                     or is_native_podgroup(str(obj.get("apiVersion") or "")))
    if resource == "pods":
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k in GANG_LABELS}
        if labels:
            out_meta["labels"] = labels
    if not native:  # kube-scheduler reads no annotation of a native object
        annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                       if _gang_annotation(k)}
        if annotations:
            out_meta["annotations"] = annotations
    out: dict[str, Any] = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    out["metadata"] = out_meta
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if resource == "pods":
        out["spec"] = {k: spec[k] for k in POD_SPEC if k in spec}
        out["status"] = {k: status[k] for k in ("phase", "reason", "nominatedNodeName")
                         if status.get(k)}
    elif native:
        out["spec"], native_status = _native(resource, spec, status)
        if native_status is not None:
            out["status"] = native_status
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


def _tolerations(tolerations: Any) -> list[dict[str, Any]]:
    """Tolerations reduced to what matching a taint reads (``key``, ``operator``, ``value``,
    ``effect``; not ``tolerationSeconds``): ``streams.core.capacity.tolerations_of``."""
    return [{k: t[k] for k in ("key", "operator", "value", "effect") if k in t}
            for t in tolerations if isinstance(t, dict)] if isinstance(tolerations, list) else []


def slim(resource: str, obj: dict[str, Any]) -> dict[str, Any]:
    """What the watcher keeps of an object it lists or watches, so that its memory for a large
    cluster stays small and nothing it does not need (env values above all) is held:

    - a Node or a bound Pod: only what the per-node cache reads (name, uid, resourceVersion; a
      Node's ``spec.unschedulable``, taints and ``status.allocatable``; a Pod's node, container
      and init-container requests, overhead, priority and phase), and a bound Pod's grace period
      (``spec.terminationGracePeriodSeconds``, ``metadata.deletionGracePeriodSeconds`` and
      ``deletionTimestamp``) for the records of a preemption (``GangRouter``);
    - a gang Pod, a PodGroup, a CompositePodGroup or a Workload: its ``published`` shape; a
      Pod also keeps its containers' requests and overhead, which the capacity facts of its
      cycle records need (``GangRouter``), with its ``spec.priority`` and
      ``preemptionPolicy`` (their ``room_preempting``), its ``spec.tolerations`` (which
      nodes count: rule CAP1) and its ``PodScheduled`` condition
      (``pod_scheduled``: the condition records' source), which ``published`` leaves out of
      ``gang-events``.

    core/v1 Events pass unchanged. Pure."""
    if resource in GROUP_RESOURCES:
        return published(resource, obj)
    if resource == "pods":
        out = published(resource, obj)
        spec = obj.get("spec") or {}
        out["spec"] = {**out["spec"], "containers": _requests(spec.get("containers")),
                       "initContainers": _requests(spec.get("initContainers")),
                       **({"overhead": spec["overhead"]} if spec.get("overhead") else {}),
                       **{k: spec[k] for k in ("priority", "preemptionPolicy") if k in spec},
                       **({"tolerations": _tolerations(spec["tolerations"])}
                          if spec.get("tolerations") else {})}
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
