"""Kubernetes' own gang scheduling on the native control plane (``native_cluster``:
k8s.io/kubernetes v1.37.2, kube-scheduler's GangScheduling plugin, the scheduling.k8s.io/v1beta1
PodGroup; ``deploy/cluster/controlplane.py`` flavour ``native``, docs/cluster.md). What these
tests pin is what the real scheduler does, as recorded in ``tests/data/native-v1.37.2``: a full
gang binds and its PodGroup gets ``PodGroupInitiallyScheduled=True``; a gang short of pods is
held at PreEnqueue with nothing on the pod or the PodGroup, only a ``--v 4`` log line; a Job
gets a Workload and a PodGroup from the Job controller (WorkloadWithJob). The two default nodes
have 1 ``nvidia.com/gpu`` each. Each test works in a namespace of its own and waits on
conditions with a deadline."""

from __future__ import annotations

import re
import uuid
from typing import Any, Iterator

import pytest
from kubernetes import client

from streams.dev.localcluster import create_namespace
from tests.cluster.kube import wait_for

PG = "/apis/scheduling.k8s.io/v1beta1"
HELD = "waiting for minCount pods from a gang to appear in scheduling queue"


@pytest.fixture
def ns(native_cluster: Any) -> Iterator[str]:
    name = f"native-{uuid.uuid4().hex[:6]}"
    create_namespace(client.CoreV1Api(native_cluster.api_client("admin")), name)
    yield name
    native_cluster.request("DELETE", f"/api/v1/namespaces/{name}")


def podgroup(cluster: Any, ns: str, name: str, min_count: int) -> None:
    cluster.request("POST", f"{PG}/namespaces/{ns}/podgroups", {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})


def gang_pod(cluster: Any, ns: str, name: str, group: str, gpu: int = 1) -> None:
    limits = {"cpu": "100m", **({"nvidia.com/gpu": str(gpu)} if gpu else {})}
    cluster.request("POST", f"/api/v1/namespaces/{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulingGroup": {"podGroupName": group}, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "busybox",
                                 "resources": {"requests": limits, "limits": limits}}]}})


def pods(cluster: Any, ns: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p
            for p in cluster.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]}


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions", []) or []
                 if c["type"] == ctype), None)


def running(cluster: Any, ns: str, names: list[str]) -> bool:
    got = pods(cluster, ns)
    return all(got.get(n, {}).get("status", {}).get("phase") == "Running"
               and got[n]["spec"].get("nodeName") for n in names)


def scheduler_log(cluster: Any) -> str:
    return cluster.log_path(cluster.scheduler_component).read_text(errors="replace")


def test_a_full_gang_binds_runs_and_is_initially_scheduled(native_cluster: Any,
                                                           ns: str) -> None:
    podgroup(native_cluster, ns, "g", 2)
    for name in ("g-0", "g-1"):
        gang_pod(native_cluster, ns, name, "g")
    wait_for("both members bound and Running (KWOK)",
             lambda: running(native_cluster, ns, ["g-0", "g-1"]), 60,
             describe=lambda: str(pods(native_cluster, ns)))
    nodes = {p["spec"]["nodeName"] for p in pods(native_cluster, ns).values()}
    assert nodes == {"node-a", "node-b"}  # one GPU each: one member per node

    def initially_scheduled() -> dict[str, Any] | None:
        got = native_cluster.request("GET", f"{PG}/namespaces/{ns}/podgroups/g")
        cond = condition(got, "PodGroupInitiallyScheduled")
        return cond if cond and cond["status"] == "True" else None

    cond = wait_for("PodGroupInitiallyScheduled=True on the PodGroup", initially_scheduled, 30)
    assert cond["reason"] == "Scheduled"


def test_a_gang_short_of_pods_is_held_at_pre_enqueue_without_a_trace_on_the_pod(
        native_cluster: Any, ns: str) -> None:
    """One pod of a minCount-2 gang: GangScheduling's PreEnqueue refuses it; the refusal is in
    kube-scheduler's log at ``--v 4`` only (no Event, no pod condition, no PodGroup condition,
    as KEP-4671 v1.37 has it). The second pod completes the gang and both bind."""
    podgroup(native_cluster, ns, "s", 2)
    gang_pod(native_cluster, ns, "s-0", "s")
    line = re.compile(r'"Status after running PreEnqueue plugin" pod="' + re.escape(ns)
                      + r'/s-0" plugin="GangScheduling" status="' + re.escape(HELD) + '"')
    wait_for("GangScheduling's PreEnqueue refusal of s-0 in the scheduler's log",
             lambda: line.search(scheduler_log(native_cluster)), 30)
    pod = pods(native_cluster, ns)["s-0"]
    assert not pod["spec"].get("nodeName")
    assert not pod.get("status", {}).get("conditions")  # not even PodScheduled=False
    assert not pod.get("status", {}).get("nominatedNodeName")
    events = native_cluster.request("GET", f"/api/v1/namespaces/{ns}/events")["items"]
    assert [e for e in events if e["involvedObject"]["kind"] == "Pod"] == []
    group = native_cluster.request("GET", f"{PG}/namespaces/{ns}/podgroups/s")
    assert not group.get("status", {}).get("conditions")

    gang_pod(native_cluster, ns, "s-1", "s")
    wait_for("both members bound and Running once the gang is complete",
             lambda: running(native_cluster, ns, ["s-0", "s-1"]), 60,
             describe=lambda: str(pods(native_cluster, ns)))


def test_a_job_gets_a_workload_and_a_podgroup_from_the_job_controller(native_cluster: Any,
                                                                      ns: str) -> None:
    """WorkloadWithJob: a Job asking for a gang (``spec.scheduling.schedulingPolicy.gang: {}``,
    minCount defaulting to the parallelism) gets a Workload and a PodGroup named after it, and
    its pods join that PodGroup; they bind together."""
    limits = {"cpu": "100m", "nvidia.com/gpu": "1"}
    native_cluster.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
        "spec": {"parallelism": 2, "completions": 2,
                 "scheduling": {"schedulingPolicy": {"gang": {}}},
                 "template": {"spec": {
                     "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": limits, "limits": limits}}]}}}})

    def both_running() -> list[dict[str, Any]] | None:
        got = [p for p in pods(native_cluster, ns).values()
               if p["status"].get("phase") == "Running"]
        return got if len(got) == 2 else None

    members = wait_for("the Job's two pods Running", both_running, 60,
                       describe=lambda: str(pods(native_cluster, ns)))
    (workload,) = native_cluster.request("GET", f"{PG}/namespaces/{ns}/workloads")["items"]
    (group,) = native_cluster.request("GET", f"{PG}/namespaces/{ns}/podgroups")["items"]
    assert workload["spec"]["controllerRef"] == {"apiGroup": "batch", "kind": "Job",
                                                 "name": "train"}
    assert workload["metadata"]["name"].startswith("train-")
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    assert group["spec"]["workloadRef"] == {"workloadName": workload["metadata"]["name"],
                                            "templateName": "train-pgt-0"}
    assert group["metadata"]["name"].startswith(f"{workload['metadata']['name']}-train-pgt-0-")
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in members} == {
        group["metadata"]["name"]}


def test_kube_scheduler_needs_no_more_than_the_bootstrap_rbac(native_cluster: Any) -> None:
    """The native scheduler runs as ``system:kube-scheduler`` with no group: every list and
    watch it makes (PodGroups, CompositePodGroups among them) is allowed by the bootstrap
    ClusterRoles of v1.37.2 with the gates on, so its log has no ``forbidden``."""
    assert native_cluster.scheduler_component == "kube-scheduler"
    log = scheduler_log(native_cluster)
    assert '"GangScheduling"' in log  # the profile's plugins, logged at start
    assert "forbidden" not in log.lower()
