"""What the watcher publishes of a Pod and a PodGroup (docs/contracts.md, "The published Pod
and PodGroup"): only the fields the fold reads, so env values, secrets and the rest of the
manifest never reach ``gang-events`` (issue 15), and nothing the fold needs is lost."""

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
        "spec": {"nodeName": "gpu-3", "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]},
        "status": {"phase": "Failed", "reason": "Evicted"}}


def test_the_published_podgroup_is_the_documented_shape() -> None:
    assert published("podgroups", full_podgroup()) == {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "llm", "namespace": "team-a", "uid": "pg-1",
                     "resourceVersion": "77",
                     "annotations": {"gang.scheduling.koordinator.sh/total-number": "6"}},
        "spec": {"minMember": 4, "scheduleTimeoutSeconds": 90}}


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
    for resource, obj in (("pods", full_pod()), ("podgroups", full_podgroup())):
        whole = decode_input(json.dumps(kube(resource, obj)))
        slimmed = decode_input(json.dumps(kube(resource, published(resource, obj))))
        assert whole == slimmed
        assert whole.record is not None
    pod = decode_input(json.dumps(kube("pods", published("pods", full_pod())))).record
    assert (pod.node, pod.phase, pod.terminating, pod.gates, pod.status_reason) == (
        "gpu-3", "Failed", True, ("kueue.x-k8s.io/admission",), "Evicted")


def test_the_watcher_keeps_requests_for_capacity_but_no_secret() -> None:
    """``slim`` (what the watch streams keep in memory) adds the requests the capacity facts
    of cycle records need to the published shape, and still holds no secret."""
    kept = slim("pods", full_pod())
    assert kept["spec"]["containers"] == [{"resources": {"requests": {
        "cpu": "8", "nvidia.com/gpu": "4"}}}]
    assert kept["spec"]["initContainers"] == [{"resources": {"requests": {"cpu": "1"}}}]
    assert SECRET not in json.dumps(kept)
    assert published("pods", copy.deepcopy(kept)) == published("pods", full_pod())
