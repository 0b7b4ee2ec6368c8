"""Kubernetes' own gang scheduling on the real control plane: k8s.io/kubernetes v1.37.2 with
kube-scheduler's GangScheduling (``native_cluster``: GenericWorkload, WorkloadWithJob,
CompositePodGroup on), KWOK as the kubelets, and gangstate's whole chain with the shipped RBAC
(its watcher following ``default-scheduler`` pods).

Expected texts are worked out from the scenario (pods, minCount, minGroupCount) and the
message functions of ``streams/core/rules`` for native gangs (docs/native-gang-rules.md);
what kube-scheduler does is what v1.37.2 does: a pod held at PreEnqueue gets no Event from it.
The scenarios that only have to be observed are created at once by the module fixture, so the
grace period (10 s) is waited for once for all of them.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from kubernetes import client

from streams.core.fold import FoldSettings
from streams.dev.localcluster import (Chain, create_namespace, create_native, native_composite,
                                      native_pod, native_podgroup, pod_events)
from streams.kafka.publishing import ensure_topics
from streams.settings import Settings, Topics
from tests.cluster.conftest import GRACE_SECONDS, STRANDED_SECONDS
from tests.cluster.kube import gangstate_events, record_scenario, wait_for
from tests.cluster.test_cluster_scenarios import explain, messages

SCHEDULER = "default-scheduler"
#: how long a scenario may take to show its Events: grace (10 s) + ticks + Kafka + sink
SETTLE = 90.0


@pytest.fixture(scope="module")
def native_chain(native_cluster: Any, kafka_bootstrap: str,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    """gangstate's chain on the native control plane, with its own topics."""
    run = uuid.uuid4().hex[:8]
    settings = Settings(bootstrap=kafka_bootstrap, topics=Topics(f"native-{run}."),
                        partitions=4, app_id=f"gangstate-native-{run}",
                        fold=FoldSettings(grace_seconds=GRACE_SECONDS,
                                          stranded_seconds=STRANDED_SECONDS, holds=False))
    ensure_topics(settings)
    chain = Chain(native_cluster, settings, tmp_path_factory.mktemp("native-chain-logs"))
    chain.start(ready_timeout=180)
    try:
        yield chain
    finally:
        chain.stop()


@pytest.fixture(scope="module")
def core(native_cluster: Any) -> client.CoreV1Api:
    """A CoreV1Api as the native cluster's admin."""
    return client.CoreV1Api(native_cluster.api_client("admin"))


def kube_scheduler_events(core: client.CoreV1Api, namespace: str,
                          pod: str) -> list[dict[str, Any]]:
    """The Events kube-scheduler wrote on a pod."""
    return [e for e in pod_events(core, namespace, pod) if e["from"] == SCHEDULER]


def podgroup_events(core: client.CoreV1Api, namespace: str, name: str) -> list[dict[str, Any]]:
    """gangstate's Events on native PodGroup ``name``, as ``kubectl describe podgroup`` of
    ``scheduling.k8s.io`` finds them (involvedObject kind, name and apiVersion)."""
    found = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.kind=PodGroup,involvedObject.name={name}")
    return [{"reason": e.reason, "message": e.message,
             "api_version": e.involved_object.api_version}
            for e in found.items if (e.source.component if e.source else "") == "gangstate"
            or e.reporting_component == "gangstate"]


def wait_told(core: client.CoreV1Api, chain: Chain, namespace: str, pod: str,
              reason: str) -> list[dict[str, Any]]:
    """Wait until gangstate's Events on the pod include ``reason``; return them."""
    def probe() -> list[dict[str, Any]] | None:
        events = gangstate_events(core, namespace, pod)
        return events if reason in {e["reason"] for e in events} else None

    return wait_for(f"gangstate {reason} on {namespace}/{pod}", probe, SETTLE,
                    describe=lambda: _describe(core, chain, namespace))


def _describe(core: client.CoreV1Api, chain: Chain, namespace: str) -> str:
    lines = []
    for p in core.list_namespaced_pod(namespace).items:
        lines.append(f"pod {namespace}/{p.metadata.name} node={p.spec.node_name} "
                     f"phase={p.status.phase}")
        lines += [f"  {e['type']} {e['reason']} ({e['from']}): {e['message'][:200]}"
                  for e in pod_events(core, namespace, p.metadata.name)[-6:]]
    for name in ("watch", "worker", "sink"):
        lines.append(f"--- {name} log tail\n{chain.log_tail(name, 1500)}")
    log = chain.cluster.log_path("kube-scheduler")
    try:
        text = Path(log).read_text(errors="replace")
    except OSError:
        text = ""
    lines.append(f"--- kube-scheduler log lines of {namespace} (latest 10)")
    lines += [ln[:300] for ln in text.splitlines() if f"{namespace}/" in ln][-10:]
    return "\n".join(lines)


# -- the scenarios held at PreEnqueue, created at once ----------------------------------------

HELD: dict[str, list[dict[str, Any]]] = {
    # a PodGroup of minCount 3 and 2 pods: held at PreEnqueue, 1 more pod needed
    "nat-too-few": [native_podgroup("nat-too-few", "train", 3)]
    + [native_pod("nat-too-few", f"train-{i}", "train") for i in range(2)],
    # 2 pods naming a PodGroup that does not exist (created later by the test)
    "nat-missing": [native_pod("nat-missing", f"job-{i}", "job") for i in range(2)],
    # CompositePodGroup job needs 2 children with their pods: a has 2 of 2, b 1 of 2
    "nat-composite": native_composite("nat-composite", "train", "job", 2, {"a": 2, "b": 2})
    + [native_pod("nat-composite", f"a-{i}", "a") for i in range(2)]
    + [native_pod("nat-composite", "b-0", "b")],
    # 3 pods of minCount 3, one held by a scheduling gate (a queue's admission)
    "nat-gated": [native_podgroup("nat-gated", "g", 3)]
    + [native_pod("nat-gated", f"g-{i}", "g") for i in range(2)]
    + [native_pod("nat-gated", "g-2", "g", gates=("example.com/quota",))],
}


@pytest.fixture(scope="module")
def held(native_chain: Chain, native_cluster: Any, core: client.CoreV1Api) -> Chain:
    """Create every scenario of :data:`HELD` at once."""
    for namespace, objects in HELD.items():
        create_namespace(core, namespace)
        for obj in objects:
            create_native(native_cluster, obj)
    return native_chain


def test_too_few_pods_is_told_on_every_pod_and_the_podgroup(held: Chain,
                                                            core: client.CoreV1Api) -> None:
    text = ("PodGroup nat-too-few/train has 2 of minCount 3 pods; kube-scheduler holds them "
            "at PreEnqueue (waiting for minCount pods from a gang to appear in scheduling "
            "queue) until 1 more exists")
    for pod in ("train-0", "train-1"):
        events = wait_told(core, held, "nat-too-few", pod, "GangMembersInsufficient")
        assert messages(events, "GangMembersInsufficient") == [text]
        # the gap gangstate fills: kube-scheduler writes nothing for a PreEnqueue refusal
        assert kube_scheduler_events(core, "nat-too-few", pod) == []
    on_podgroup = wait_for("gangstate's Event on PodGroup nat-too-few/train",
                           lambda: podgroup_events(core, "nat-too-few", "train"), SETTLE)
    assert [(e["reason"], e["api_version"]) for e in on_podgroup] == [
        ("GangMembersInsufficient", "scheduling.k8s.io/v1beta1")]
    out = explain(held, "nat-too-few/train-0")
    assert ("Gang:           nat-too-few/train@kube-scheduler (Gathering: 2 of minCount 3 "
            "pods, 0 bound, 0 waiting at Permit)") in out
    assert "Held at:        PreEnqueue (GangScheduling)" in out
    assert ("create 1 more pod naming PodGroup nat-too-few/train in spec.schedulingGroup, or "
            "lower its spec.schedulingPolicy.gang.minCount to 2") in out
    record_scenario(core, "nat-too-few", held)


def test_a_missing_podgroup_then_created(held: Chain, native_cluster: Any,
                                         core: client.CoreV1Api) -> None:
    text = ("PodGroup nat-missing/job (scheduling.k8s.io) does not exist: 2 pods name it in "
            "spec.schedulingGroup; kube-scheduler keeps them out of its scheduling queue until it "
            "is created")
    for pod in ("job-0", "job-1"):
        events = wait_told(core, held, "nat-missing", pod, "GangNotInitialized")
        assert messages(events, "GangNotInitialized") == [text]
        assert kube_scheduler_events(core, "nat-missing", pod) == []
    create_native(native_cluster, native_podgroup("nat-missing", "job", 2))
    for pod in ("job-0", "job-1"):
        events = wait_told(core, held, "nat-missing", pod, "GangScheduled")
        assert messages(events, "GangMembersSatisfied") == [
            "PodGroup nat-missing/job has 2 of minCount 2 pods; no longer held"]
        assert messages(events, "GangScheduled") == [
            "PodGroup nat-missing/job is scheduled: 2 of minCount 2 pods bound"]
    record_scenario(core, "nat-missing", held)


def test_a_composite_group_short_of_its_quorum(held: Chain, core: client.CoreV1Api) -> None:
    text = ("PodGroup nat-composite/a has 2 of minCount 2 pods, but CompositePodGroup "
            "nat-composite/job has 1 of minGroupCount 2 child groups with their minCount pods; "
            "kube-scheduler holds the whole tree at PreEnqueue (waiting for composite pod group "
            "\"job\" tree to meet quorum) until 1 more group has its minCount pods")
    for pod in ("a-0", "a-1"):
        events = wait_told(core, held, "nat-composite", pod, "GangCompositeIncomplete")
        assert messages(events, "GangCompositeIncomplete") == [text]
        assert kube_scheduler_events(core, "nat-composite", pod) == []
    events = wait_told(core, held, "nat-composite", "b-0", "GangMembersInsufficient")
    assert messages(events, "GangMembersInsufficient") == [
        "PodGroup nat-composite/b has 1 of minCount 2 pods; kube-scheduler holds them at "
        "PreEnqueue (waiting for minCount pods from a gang to appear in scheduling queue) "
        "until 1 more exists"]
    out = held.gangstate("get", "gangs", "-n", "nat-composite", "--server", held.server)
    assert out.returncode == 0, out.stderr
    rows = [ln.split()[:5] for ln in out.stdout.splitlines()[1:]]
    assert rows == [["nat-composite", "a", "kube-scheduler", "Ready", "2/2"],
                    ["nat-composite", "b", "kube-scheduler", "Gathering", "1/2"],
                    ["nat-composite", "job", "kube-scheduler", "Gathering", "1/2"]]
    record_scenario(core, "nat-composite", held)


def test_a_gated_member_holds_the_whole_podgroup(held: Chain, core: client.CoreV1Api) -> None:
    text = ("PodGroup nat-gated/g has 3 pods (minCount 3), 1 with scheduling gates (g-2 waits "
            "for example.com/quota); kube-scheduler queues the PodGroup's pods as one and holds "
            "all of them at PreEnqueue until the gates of that pod are removed (by the "
            "controller that set them)")
    for pod in ("g-0", "g-1", "g-2"):
        events = wait_told(core, held, "nat-gated", pod, "GangMemberGated")
        assert messages(events, "GangMemberGated") == [text]
        assert kube_scheduler_events(core, "nat-gated", pod) == []
    assert ("Held at:        SchedulingQueue (the PodGroup, gated as one entity by "
            "SchedulingGates)") in explain(held, "nat-gated/g-0")
    record_scenario(core, "nat-gated", held)


# -- scenarios that run one after the other ----------------------------------------------------


def test_never_fits_names_the_shortfall(native_chain: Chain, native_cluster: Any,
                                        core: client.CoreV1Api) -> None:
    """3 pods of 1 GPU, minCount 3, on 2 nodes of 1 GPU: kube-scheduler's pod-group cycle
    fails; gangstate tells the failure episode with what the cluster has."""
    ns = "nat-no-fit"
    create_namespace(core, ns)
    create_native(native_cluster, native_podgroup(ns, "big", 3))
    for i in range(3):
        create_native(native_cluster, native_pod(ns, f"big-{i}", "big", gpu=1))
    told = {pod: wait_told(core, native_chain, ns, pod, "GangUnschedulable")
            for pod in ("big-0", "big-1", "big-2")}
    [text] = messages(told["big-0"], "GangUnschedulable")
    assert text.startswith("PodGroup nat-no-fit/big cannot be scheduled: "), text
    assert "Insufficient nvidia.com/gpu" in text
    assert ("it needs 3 x 1 nvidia.com/gpu (3 members to place); the cluster has 2 "
            "allocatable on 2 nodes") in text, text
    assert all(messages(events, "GangUnschedulable") == [text] for events in told.values())
    # what kube-scheduler itself says: FailedScheduling on the members (its pod-group cycle)
    assert any(e["reason"] == "FailedScheduling"
               for pod in told for e in kube_scheduler_events(core, ns, pod))
    out = explain(native_chain, f"{ns}/big-0")
    assert ("Held at:        PlacementFeasible (GangScheduling: minCount cannot be "
            "satisfied)") in out
    assert "add a node with at least 1 nvidia.com/gpu more" in out, out
    record_scenario(core, ns, native_chain)
    for i in range(3):
        core.delete_namespaced_pod(f"big-{i}", ns, grace_period_seconds=0)


def test_a_job_created_gang(native_chain: Chain, native_cluster: Any,
                            core: client.CoreV1Api) -> None:
    """WorkloadWithJob: a Job asking for gang scheduling (``spec.scheduling.schedulingPolicy.
    gang``) gets a Workload and a PodGroup from the Job controller, minCount its parallelism;
    its pods name the PodGroup, and gangstate follows the gang it never saw created by hand."""
    ns = "nat-job"
    create_namespace(core, ns)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": ns},
           "spec": {"parallelism": 2, "completions": 2, "backoffLimit": 0,
                    "scheduling": {"schedulingPolicy": {"gang": {}}},
                    "template": {"spec": {
                        "restartPolicy": "Never", "schedulerName": SCHEDULER,
                        "terminationGracePeriodSeconds": 0,
                        "containers": [{"name": "main", "image": "busybox:1.36",
                                        "resources": {"requests": {"cpu": "100m"}}}]}}}}
    native_cluster.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job)
    pods = wait_for("the Job's 2 pods", lambda: (lambda items: items if len(items) == 2 else None)(
        core.list_namespaced_pod(ns).items), SETTLE)
    names = sorted(p.metadata.name for p in pods)
    groups = native_cluster.get(f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups")
    [podgroup] = [g["metadata"]["name"] for g in groups["items"]]
    for pod in names:
        events = wait_told(core, native_chain, ns, pod, "GangScheduled")
        assert messages(events, "GangScheduled") == [
            f"PodGroup {ns}/{podgroup} is scheduled: 2 of minCount 2 pods bound"]
    out = native_chain.gangstate("describe", "gang", f"{ns}/{podgroup}", "--server",
                                 native_chain.server)
    assert out.returncode == 0, out.stderr
    assert re.search(r"^Scheduler:\s+kube-scheduler$", out.stdout, re.M), out.stdout
    record_scenario(core, ns, native_chain)


def test_a_gang_that_lost_a_member_after_it_was_scheduled(native_chain: Chain,
                                                          native_cluster: Any,
                                                          core: client.CoreV1Api) -> None:
    """Both pods of minCount 2 bound and Running; one is deleted: the PodGroup still says
    PodGroupInitiallyScheduled=True, gangstate says it is below minCount."""
    ns = "nat-lost"
    create_namespace(core, ns)
    create_native(native_cluster, native_podgroup(ns, "w", 2))
    for i in range(2):
        create_native(native_cluster, native_pod(ns, f"w-{i}", "w"))
    for pod in ("w-0", "w-1"):
        wait_told(core, native_chain, ns, pod, "GangScheduled")
    wait_for("w-0 and w-1 Running", lambda: all(
        core.read_namespaced_pod(p, ns).status.phase == "Running" for p in ("w-0", "w-1")),
        SETTLE)
    core.delete_namespaced_pod("w-1", ns, grace_period_seconds=0)
    events = wait_told(core, native_chain, ns, "w-0", "GangBelowMinCount")
    [text] = messages(events, "GangBelowMinCount")
    assert text.startswith(
        "PodGroup nat-lost/w was scheduled and is now below minCount: w-1 deleted; 1 of "
        "minCount 2 pod remains bound; its PodGroupInitiallyScheduled condition stays True"), text
    pg = native_cluster.get(f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups/w")
    # the gap: kube-scheduler's own condition still says the group is scheduled
    assert [(c["type"], c["status"]) for c in pg["status"]["conditions"]] == [
        ("PodGroupInitiallyScheduled", "True")]
    record_scenario(core, ns, native_chain)
