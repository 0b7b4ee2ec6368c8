"""What the watcher publishes of a Pod and a PodGroup, Koordinator's or Kubernetes' own, and of a
native CompositePodGroup and Workload (docs/contracts.md, "The published Pod and PodGroup"):
only the fields the fold reads, so env values, secrets and the rest of the manifest never reach
``gang-events`` (issue 15), and nothing the fold needs is lost."""

from __future__ import annotations

import copy
import json
from typing import Any

from producers.watch.dump import records_of_dump
from producers.watch.watching import GangRouter, Publish, published, slim
from streams.core.timefmt import parse_time
from streams.wire.decoding import decode_input

T0 = parse_time("2026-11-02T09:00:00Z")
SECRET = "hunter2-db-password"


def full_pod() -> dict[str, Any]:
    """A gang pod as the API server returns it, with a secret in every place a manifest can
    carry one: an env value, a command argument, the last-applied-configuration annotation,
    an unrelated annotation and label."""
    manifest = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"env": [
        {"name": "DB_PASSWORD", "value": SECRET}]}]}}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "llm-0", "namespace": "team-a", "uid": "u-0", "resourceVersion": "4711",
            "generateName": "llm-", "creationTimestamp": "2026-11-02T08:59:00Z",
            "deletionTimestamp": "2026-11-02T09:10:00Z",
            "labels": {"pod-group.scheduling.sigs.k8s.io": "llm", "app": "llm",
                       "secret-hash": SECRET},
            "annotations": {
                "gang.scheduling.koordinator.sh/name": "llm",
                "gang.scheduling.koordinator.sh/min-available": "4",
                "gang.scheduling.koordinator.sh/mode": "NonStrict",
                "pod-group.scheduling.sigs.k8s.io/match-policy": "waiting-and-running",
                "kubectl.kubernetes.io/last-applied-configuration": json.dumps(manifest),
                "vault.example/token": SECRET},
            "ownerReferences": [{"kind": "Job", "name": "llm", "uid": "j-1"}],
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
        "spec": {
            "schedulerName": "koord-scheduler", "nodeName": "gpu-3",
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
            "serviceAccountName": "trainer",
            "containers": [{
                "name": "trainer", "image": "registry.example/llm:1",
                "command": ["train", f"--token={SECRET}"],
                "env": [{"name": "DB_PASSWORD", "value": SECRET},
                        {"name": "API_KEY", "valueFrom": {"secretKeyRef": {
                            "name": "api", "key": "key"}}}],
                "envFrom": [{"secretRef": {"name": "all-secrets"}}],
                "resources": {"requests": {"cpu": "8", "nvidia.com/gpu": "4"}}}],
            "initContainers": [{"name": "fetch", "env": [{"name": "S", "value": SECRET}],
                                "resources": {"requests": {"cpu": "1"}}}],
            "volumes": [{"name": "creds", "secret": {"secretName": "all-secrets"}}]},
        "status": {"phase": "Failed", "reason": "Evicted",
                   "message": "The node was low on resource: memory.",
                   "conditions": [{"type": "PodScheduled", "status": "False"}]},
    }


def full_podgroup() -> dict[str, Any]:
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "llm", "namespace": "team-a", "uid": "pg-1",
                         "resourceVersion": "77", "labels": {"owner": SECRET},
                         "annotations": {"gang.scheduling.koordinator.sh/total-number": "6",
                                         "notes": SECRET}},
            "spec": {"minMember": 4, "scheduleTimeoutSeconds": 90,
                     "minResources": {"cpu": "32"}},
            "status": {"phase": "Pending", "scheduled": 0}}


CONDITION = {"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable",
             "message": "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining",
             "lastTransitionTime": "2026-11-02T09:00:05Z"}
"""A native PodGroup's condition as kube-scheduler v1.37.2 sets it
(``schedule_one_podgroup.go:898-904``), as published."""


def full_native_pod() -> dict[str, Any]:
    """A member of native gang ``team-a/llm@kube-scheduler`` (kube-scheduler's default
    profile), with the secrets of ``full_pod``."""
    pod = full_pod()
    pod["metadata"]["labels"] = {"app": "llm", "secret-hash": SECRET}
    pod["metadata"]["annotations"] = {k: v for k, v in pod["metadata"]["annotations"].items()
                                      if not k.startswith(("gang.", "pod-group."))}
    pod["spec"]["schedulerName"] = "default-scheduler"
    pod["spec"]["schedulingGroup"] = {"podGroupName": "llm"}
    return pod


def full_native_podgroup() -> dict[str, Any]:
    """A native PodGroup (``scheduling.k8s.io/v1beta1``, k8s.io/api v0.37.2
    ``scheduling/v1beta1/types.go:567-763``) with every field it may have and secrets in its
    labels, annotations and a condition's unknown field."""
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "llm", "namespace": "team-a", "uid": "npg-1",
                         "resourceVersion": "78", "creationTimestamp": "2026-11-02T08:58:00Z",
                         "labels": {"owner": SECRET},
                         "annotations": {"gang.scheduling.koordinator.sh/total-number": "6",
                                         "notes": SECRET},
                         "ownerReferences": [{"kind": "Job", "name": "llm", "uid": "j-1"}],
                         "managedFields": [{"manager": "kube-controller-manager"}]},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}},
                     "parentCompositePodGroupName": "train",
                     "workloadRef": {"workloadName": "llm", "templateName": "workers"},
                     "schedulingConstraints": {"topology": [{"key": "rack"}]},
                     "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": SECRET}],
                     "priorityClassName": "high", "priority": 1000},
            "status": {"conditions": [{**CONDITION, "observedGeneration": 2,
                                       "secret": SECRET}],
                       "resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": SECRET}]}}


def full_composite() -> dict[str, Any]:
    """A CompositePodGroup (``scheduling.k8s.io/v1alpha3``, ``v1alpha3/types.go:1177-1240``)."""
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": "train", "namespace": "team-a", "uid": "cpg-1",
                         "resourceVersion": "79", "creationTimestamp": "2026-11-02T08:57:00Z",
                         "annotations": {"notes": SECRET}},
            "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 2}},
                     "workloadRef": {"workloadName": "llm", "templateName": "train"},
                     "disruptionMode": {"all": {}}, "priorityClassName": SECRET},
            "status": {"conditions": [{"type": "PodGroupInitiallyScheduled",
                                       "status": "True", "reason": "Scheduled", "message": "",
                                       "lastTransitionTime": "2026-11-02T09:01:00Z",
                                       "observedGeneration": 1}]}}


def full_workload() -> dict[str, Any]:
    """A Workload (``scheduling.k8s.io/v1beta1``, ``v1beta1/types.go:93-300``)."""
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": "llm", "namespace": "team-a", "uid": "wl-1",
                         "resourceVersion": "80", "creationTimestamp": "2026-11-02T08:56:00Z",
                         "labels": {"owner": SECRET}},
            "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "llm"},
                     "podGroupTemplates": [{
                         "name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}},
                         "schedulingConstraints": {"topology": [{"key": "rack"}]},
                         "resourceClaims": [{"name": "gpus",
                                             "resourceClaimTemplateName": SECRET}],
                         "priorityClassName": SECRET}],
                     "compositePodGroupTemplates": [{"name": SECRET,
                                                     "schedulingPolicy": {"basic": {}}}]}}


def kube(resource: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"schema": "gangstate.kube/v1", "observed_at": "2026-11-02T09:00:00.000000Z",
            "resource": resource, "type": "MODIFIED", "object": obj}


def test_the_published_pod_is_the_documented_shape() -> None:
    assert published("pods", full_pod()) == {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "llm-0", "namespace": "team-a", "uid": "u-0",
                     "resourceVersion": "4711", "creationTimestamp": "2026-11-02T08:59:00Z",
                     "deletionTimestamp": "2026-11-02T09:10:00Z",
                     "labels": {"pod-group.scheduling.sigs.k8s.io": "llm"},
                     "annotations": {
                         "gang.scheduling.koordinator.sh/name": "llm",
                         "gang.scheduling.koordinator.sh/min-available": "4",
                         "gang.scheduling.koordinator.sh/mode": "NonStrict",
                         "pod-group.scheduling.sigs.k8s.io/match-policy":
                             "waiting-and-running"}},
        # schedulerName: a pod of koord-scheduler is no native gang member, whatever it names
        # (streams.core.native.native_gang_of_pod)
        "spec": {"nodeName": "gpu-3", "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                 "schedulerName": "koord-scheduler"},
        "status": {"phase": "Failed", "reason": "Evicted"}}


def test_the_published_podgroup_is_the_documented_shape() -> None:
    assert published("podgroups", full_podgroup()) == {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "llm", "namespace": "team-a", "uid": "pg-1",
                     "resourceVersion": "77",
                     "annotations": {"gang.scheduling.koordinator.sh/total-number": "6"}},
        "spec": {"minMember": 4, "scheduleTimeoutSeconds": 90}}


def test_the_published_native_objects_are_the_documented_shape() -> None:
    """Kubernetes' own gangs (v1.37): a member Pod carries ``spec.schedulerName`` and
    ``spec.schedulingGroup``; a PodGroup of ``scheduling.k8s.io`` its ``schedulingPolicy``,
    parent, Workload and conditions (five fields each), no annotation (kube-scheduler reads
    none); a CompositePodGroup the same; a Workload its controller and each PodGroup
    template's name and policy."""
    meta = {"name": "llm", "namespace": "team-a"}
    assert published("pods", full_native_pod())["spec"] == {
        "nodeName": "gpu-3", "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
        "schedulerName": "default-scheduler", "schedulingGroup": {"podGroupName": "llm"}}
    assert published("pods", full_native_pod())["metadata"] == {
        "name": "llm-0", "namespace": "team-a", "uid": "u-0", "resourceVersion": "4711",
        "creationTimestamp": "2026-11-02T08:59:00Z", "deletionTimestamp": "2026-11-02T09:10:00Z"}
    assert published("podgroups", full_native_podgroup()) == {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {**meta, "uid": "npg-1", "resourceVersion": "78",
                     "creationTimestamp": "2026-11-02T08:58:00Z"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}},
                 "parentCompositePodGroupName": "train",
                 "workloadRef": {"workloadName": "llm", "templateName": "workers"}},
        "status": {"conditions": [CONDITION]}}
    assert published("compositepodgroups", full_composite()) == {
        "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
        "metadata": {"name": "train", "namespace": "team-a", "uid": "cpg-1",
                     "resourceVersion": "79", "creationTimestamp": "2026-11-02T08:57:00Z"},
        "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 2}},
                 "workloadRef": {"workloadName": "llm", "templateName": "train"}},
        "status": {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True",
                                   "reason": "Scheduled", "message": "",
                                   "lastTransitionTime": "2026-11-02T09:01:00Z"}]}}
    assert published("workloads", full_workload()) == {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": "llm", "namespace": "team-a", "uid": "wl-1",
                     "resourceVersion": "80", "creationTimestamp": "2026-11-02T08:56:00Z"},
        "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "llm"},
                 "podGroupTemplates": [{"name": "workers",
                                        "schedulingPolicy": {"gang": {"minCount": 3}}}]}}
    # a native PodGroup without conditions yet (just created) has no status
    fresh = full_native_podgroup()
    del fresh["status"]
    assert "status" not in published("podgroups", fresh)


def test_no_secret_of_a_native_gang_reaches_a_published_record() -> None:
    """The native objects through the router and through a dump: no secret, and each under
    its key (a PodGroup under its gang id, a CompositePodGroup under its own id, a Workload
    under the gang id of its name)."""
    router = GangRouter()
    actions = [a for resource, obj in (("workloads", full_workload()),
                                       ("compositepodgroups", full_composite()),
                                       ("podgroups", full_native_podgroup()),
                                       ("pods", full_native_pod()))
               for a in router.route(resource, "ADDED", obj, None, T0)]
    published_ = [a for a in actions if isinstance(a, Publish)]
    assert [(a.key, a.record["resource"]) for a in published_] == [
        ("team-a/llm@kube-scheduler", "workloads"),
        ("team-a/composite:train@kube-scheduler", "compositepodgroups"),
        ("team-a/llm@kube-scheduler", "podgroups"),
        ("team-a/llm@kube-scheduler", "pods")]
    dump = {"apiVersion": "v1", "kind": "List", "items": [
        full_workload(), full_composite(), full_native_podgroup(), full_native_pod()]}
    from_dump = records_of_dump(dump).records
    assert [r["resource"] for r in from_dump] == ["workloads", "compositepodgroups",
                                                  "podgroups", "pods"]
    for record in [a.record for a in published_] + from_dump:
        assert SECRET not in json.dumps(record)


def test_no_secret_reaches_a_published_record() -> None:
    """Through the router (the watch) and through a dump (``gangstate fold``/``replay`` of
    ``kubectl get -o json``): the secret is in no published byte."""
    router = GangRouter()
    actions = router.route("podgroups", "ADDED", full_podgroup(), None, T0)
    actions += router.route("pods", "ADDED", full_pod(), None, T0)
    records = [a.record for a in actions if isinstance(a, Publish)]
    assert [r["resource"] for r in records] == ["podgroups", "pods"]
    dump = {"apiVersion": "v1", "kind": "List", "items": [full_podgroup(), full_pod()]}
    from_dump = records_of_dump(dump).records
    assert from_dump
    for record in records + from_dump:
        assert SECRET not in json.dumps(record)


def test_the_fold_reads_the_same_from_the_published_object() -> None:
    """Nothing the fold needs is lost: the decoded Pod and PodGroup records (gang, uid,
    resourceVersion, node, phase and status reason, deletion, spec settings, PodGroup wait,
    scheduling gates)
    are equal for the full and the published object."""
    for resource, obj in (("pods", full_pod()), ("podgroups", full_podgroup()),
                          ("pods", full_native_pod()), ("podgroups", full_native_podgroup()),
                          ("compositepodgroups", full_composite()),
                          ("workloads", full_workload())):
        whole = decode_input(json.dumps(kube(resource, obj)))
        slimmed = decode_input(json.dumps(kube(resource, published(resource, obj))))
        assert whole == slimmed
        assert whole.record is not None or resource == "workloads"
    pod = decode_input(json.dumps(kube("pods", published("pods", full_pod())))).record
    assert (pod.node, pod.phase, pod.terminating, pod.gates, pod.status_reason) == (
        "gpu-3", "Failed", True, ("kueue.x-k8s.io/admission",), "Evicted")
    native = decode_input(json.dumps(kube("pods", published("pods", full_native_pod()))))
    assert native.key == "team-a/llm@kube-scheduler"
    group = decode_input(json.dumps(kube("podgroups",
                                         published("podgroups", full_native_podgroup()))))
    assert (group.key, group.record.settings.min_available, group.record.settings.parent,
            group.record.conditions) == (
        "team-a/llm@kube-scheduler", "3", "train",
        ("PodGroupInitiallyScheduled=False/Unschedulable",))


def test_the_watcher_keeps_requests_for_capacity_but_no_secret() -> None:
    """``slim`` (what the watch streams keep in memory) adds the requests the capacity facts
    of cycle records need to the published shape, and still holds no secret."""
    kept = slim("pods", full_pod())
    assert kept["spec"]["containers"] == [{"resources": {"requests": {
        "cpu": "8", "nvidia.com/gpu": "4"}}}]
    assert kept["spec"]["initContainers"] == [{"resources": {"requests": {"cpu": "1"}}}]
    assert SECRET not in json.dumps(kept)
    assert published("pods", copy.deepcopy(kept)) == published("pods", full_pod())
    tolerant = full_pod()
    tolerant["spec"]["tolerations"] = [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300},
        {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    # the tolerations decide which nodes count in its capacity facts (rule CAP1), matched on key,
    # operator, value and effect only
    assert slim("pods", tolerant)["spec"]["tolerations"] == [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
        {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
