"""Gang scenarios on the real control plane with koord-scheduler v1.8.0 and gangstate's whole
chain: real Pods and PodGroups created through the API; the Events on the pods read back the way
``kubectl describe pod`` lists them; ``gangstate explain pod`` asked of the running worker.

Expected texts are worked out from the scenario (counts of pods, minMember) and the message
formats of ``streams/core/decide.py``; what the scheduler does is what koord-scheduler v1.8.0
does (``shared`` brief ``real-cluster.md``): a pod held at PreEnqueue gets no Event from it.

Every scenario that only has to be observed is created at once by the module fixture, so the
grace period (10 s of event time before a hold warning) is waited for once for all of them.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kubernetes import client

from streams.dev.localcluster import Chain, create_namespace, gang_pod, pod_events
from tests.cluster.kube import (delete_and_record, gangstate_events, record_scenario,
                                scheduler_events, scheduler_log_matches, wait_for)

PODGROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
#: how long a scenario may take to show its Events: grace (10 s) + ticks + Kafka + sink
SETTLE = 90.0


def podgroup(namespace: str, name: str, min_member: int) -> dict[str, Any]:
    """A ``scheduling.sigs.k8s.io/v1alpha1`` PodGroup."""
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": min_member}}


def create(core: client.CoreV1Api, custom: client.CustomObjectsApi,
           objects: list[dict[str, Any]]) -> None:
    """Create Pods and PodGroups, in order."""
    for obj in objects:
        ns = obj["metadata"]["namespace"]
        if obj["kind"] == "Pod":
            core.create_namespaced_pod(ns, obj)
        else:
            custom.create_namespaced_custom_object("scheduling.sigs.k8s.io", "v1alpha1", ns,
                                                   "podgroups", obj)


def reasons(events: list[dict[str, Any]]) -> list[str]:
    return [e["reason"] for e in events]


def messages(events: list[dict[str, Any]], reason: str) -> list[str]:
    return [e["message"] for e in events if e["reason"] == reason]


def explain(chain: Chain, ref: str) -> str:
    out = chain.gangstate("explain", "pod", ref, "--server", chain.server)
    assert out.returncode == 0, out.stderr
    return out.stdout


def explain_fields(text: str) -> dict[str, str]:
    """The ``Key:   value`` header lines of ``explain pod``."""
    fields = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith(" "):
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    return fields


def describe(core: client.CoreV1Api, namespace: str, chain: Chain) -> str:
    """Every pod's Events in ``namespace``, the chain's log tails and the scheduler's latest
    log lines about the namespace (for failure messages)."""
    lines = []
    for p in core.list_namespaced_pod(namespace).items:
        lines.append(f"pod {namespace}/{p.metadata.name} node={p.spec.node_name}")
        lines += [f"  {e['type']} {e['reason']} ({e['from']}): {e['message'][:200]}"
                  for e in pod_events(core, namespace, p.metadata.name)[-8:]]
    for name in ("watch", "worker", "sink"):
        lines.append(f"--- {name} log tail\n{chain.log_tail(name, 1500)}")
    lines.append(f"--- koord-scheduler log lines of {namespace} (latest 15)")
    lines += scheduler_log_lines(chain.cluster, namespace)[-15:]
    return "\n".join(lines)


def scheduler_log_lines(cluster: Any, namespace: str) -> list[str]:
    """The scheduler's log lines that name ``namespace/`` (a PreEnqueue refusal is written
    nowhere else), without its ``in flight Pod isn't found`` noise (Koordinator #2559), each
    cut at 300 characters."""
    try:
        text = cluster.log_path("koord-scheduler").read_text(errors="replace")
    except OSError:
        return []
    return [line[:300] for line in text.splitlines()
            if f"{namespace}/" in line and "in flight" not in line]


def wait_gangstate_reasons(core: client.CoreV1Api, chain: Chain, namespace: str, pod_name: str,
                           want: set[str], timeout: float = SETTLE,
                           uid: str | None = None) -> list[dict[str, Any]]:
    """Wait until gangstate's Events on the pod (of that ``uid`` when given: a pod that was
    deleted and created again under its name) include every reason of ``want``."""
    return wait_for(f"gangstate Events {sorted(want)} on {namespace}/{pod_name}",
                    lambda: (lambda evs: evs if want <= set(reasons(evs)) else None)(
                        gangstate_events(core, namespace, pod_name, uid)),
                    timeout, describe=lambda: describe(core, namespace, chain))


def told_while_scheduler_silent(core: client.CoreV1Api, chain: Chain, namespace: str,
                                names: tuple[str, ...], reason: str, text: str
                                ) -> dict[str, list[dict[str, Any]]]:
    """For each pod of ``names`` in turn: wait until gangstate's Events on it include
    ``reason``, assert that its one ``reason`` message is ``text`` and that koord-scheduler
    v1.8.0 wrote no Event on the pod (it writes nothing for a PreEnqueue hold). Pod name ->
    gangstate's Events on it."""
    told: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        events = wait_gangstate_reasons(core, chain, namespace, name, {reason})
        assert messages(events, reason) == [text]
        assert scheduler_events(core, namespace, name) == []
        told[name] = events
    return told


# ---------------------------------------------------------------------------------------------
# The scenarios observed together
# ---------------------------------------------------------------------------------------------

TOPOLOGY_SPEC = json.dumps({"gatherStrategy": [{"layer": "SpineLayer",
                                                 "strategy": "PreferGather"}]})
"""A valid ``network-topology-spec`` (ext network_topology.go:43-53)."""

HELD = {
    # 2 pods of a gang whose min-available is 3: held at PreEnqueue, 1 more pod needed
    "sc-too-few": [gang_pod("sc-too-few", f"train-{i}", gang="train", min_available=3)
                   for i in range(2)],
    # pods naming a gang with neither a PodGroup nor min-available: never initialised
    "sc-no-spec": [gang_pod("sc-no-spec", f"job-{i}", gang="job") for i in range(2)],
    # a PodGroup with minMember 3 and 2 pods labelled with it
    "sc-pg-short": [podgroup("sc-pg-short", "pg", 3)]
    + [gang_pod("sc-pg-short", f"pg-{i}", labels={PODGROUP_LABEL: "pg"}) for i in range(2)],
    # gang a (min 1, 1 pod: complete) and gang b (min 2, 1 pod: short), one gang group
    "sc-group": [gang_pod("sc-group", "a-0", gang="a", min_available=1, annotations={
        "gang.scheduling.koordinator.sh/groups": json.dumps(["sc-group/a", "sc-group/b"])}),
                 gang_pod("sc-group", "b-0", gang="b", min_available=2, annotations={
        "gang.scheduling.koordinator.sh/groups": json.dumps(["sc-group/a", "sc-group/b"])})],
    # invalid settings: the scheduler falls back to Strict and 600 s and schedules the gang
    "sc-invalid": [gang_pod("sc-invalid", f"w-{i}", gang="w", min_available=2, annotations={
        "gang.scheduling.koordinator.sh/mode": "nonstrict",
        "gang.scheduling.koordinator.sh/waiting-time": "1h30"}) for i in range(2)],
    # a gang that fits: 2 pods of 100m cpu on two 8-cpu nodes
    "sc-fits": [gang_pod("sc-fits", f"ok-{i}", gang="ok", min_available=2) for i in range(2)],
    # a gang asking for network-topology-aware placement; the local koord-scheduler runs
    # without --enable-network-topology-manager (the default), so it has no topology (NT1)
    "sc-topology": [gang_pod("sc-topology", f"t-{i}", gang="t", min_available=2, annotations={
        "gang.scheduling.koordinator.sh/network-topology-spec": TOPOLOGY_SPEC})
        for i in range(2)],
}


@pytest.fixture(scope="module")
def held(chain: Chain, core_v1: client.CoreV1Api,
         custom_objects: client.CustomObjectsApi) -> Chain:
    """Create every scenario of :data:`HELD` at once."""
    for namespace, objects in HELD.items():
        create_namespace(core_v1, namespace)
        create(core_v1, custom_objects, objects)
    return chain


def test_too_few_members_warns_every_pod_and_the_scheduler_says_nothing(
        held: Chain, core_v1: client.CoreV1Api) -> None:
    text = ("gang sc-too-few/train has 2 of minMember 3 pods; scheduling is held at PreEnqueue "
            "until 1 more exists")
    # the gap gangstate fills: koord-scheduler v1.8.0 writes nothing for a PreEnqueue hold
    told = told_while_scheduler_silent(core_v1, held, "sc-too-few", ("train-0", "train-1"),
                                       "GangMembersInsufficient", text)
    assert {name: [e["type"] for e in events] for name, events in told.items()} == {
        "train-0": ["Warning"], "train-1": ["Warning"]}
    out = explain(held, "sc-too-few/train-0")
    fields = explain_fields(out)
    assert fields["Gang"] == ("sc-too-few/train (Gathering: 2 of minMember 3 pods, 0 bound, "
                              "0 waiting at Permit)")
    assert fields["Held at"] == "PreEnqueue"
    assert f"GangMembersInsufficient: {text}" in out
    assert "create 1 more pod of gang sc-too-few/train, or lower min-available to 2" in out
    record_scenario(core_v1, "sc-too-few", held)


def test_no_spec_is_not_initialized(held: Chain, core_v1: client.CoreV1Api) -> None:
    text = ("gang sc-no-spec/job is not initialized: 2 pods name it, but no PodGroup and no "
            "valid min-available annotation gives its spec; scheduling is held at PreEnqueue")
    told_while_scheduler_silent(core_v1, held, "sc-no-spec", ("job-0", "job-1"),
                                "GangNotInitialized", text)
    out = explain(held, "sc-no-spec/job-1")
    assert explain_fields(out)["Held at"] == "PreEnqueue"
    assert f"GangNotInitialized: {text}" in out
    record_scenario(core_v1, "sc-no-spec", held)


def test_podgroup_with_too_few_pods(held: Chain, core_v1: client.CoreV1Api) -> None:
    text = ("gang sc-pg-short/pg has 2 of minMember 3 pods; scheduling is held at PreEnqueue "
            "until 1 more exists")
    told_while_scheduler_silent(core_v1, held, "sc-pg-short", ("pg-0", "pg-1"),
                                "GangMembersInsufficient", text)
    assert "Held at:        PreEnqueue" in explain(held, "sc-pg-short/pg-0")
    record_scenario(core_v1, "sc-pg-short", held)


def test_gang_group_with_one_gang_short(held: Chain, core_v1: client.CoreV1Api) -> None:
    short = ("gang sc-group/b has 1 of minMember 2 pods; scheduling is held at PreEnqueue until "
             "1 more exists")
    incomplete = ("gang sc-group/a is complete, but gang sc-group/b of its gang group "
                  "sc-group/a,sc-group/b has 1 of minMember 2 pods; scheduling is held at "
                  "PreEnqueue until every gang of the group has minMember pods")
    a_events = wait_gangstate_reasons(core_v1, held, "sc-group", "a-0", {"GangGroupIncomplete"})
    assert messages(a_events, "GangGroupIncomplete") == [incomplete]
    b_events = wait_gangstate_reasons(core_v1, held, "sc-group", "b-0",
                                      {"GangMembersInsufficient"})
    assert messages(b_events, "GangMembersInsufficient") == [short]
    for name in ("a-0", "b-0"):
        assert scheduler_events(core_v1, "sc-group", name) == []
    assert f"GangGroupIncomplete: {incomplete}" in explain(held, "sc-group/a-0")
    record_scenario(core_v1, "sc-group", held)


def test_invalid_settings_are_named_and_the_gang_still_schedules(
        held: Chain, core_v1: client.CoreV1Api) -> None:
    mode = ("gang sc-invalid/w: mode 'nonstrict' is not valid; the scheduler silently uses "
            "Strict")
    waiting = ("gang sc-invalid/w: waiting-time '1h30' is not valid; the scheduler silently uses "
               "600s")
    for name in ("w-0", "w-1"):
        events = wait_gangstate_reasons(core_v1, held, "sc-invalid", name, {"GangSpecInvalid"})
        wait_for(f"both GangSpecInvalid Events on {name}",
                 lambda: len(messages(gangstate_events(core_v1, "sc-invalid", name),
                                      "GangSpecInvalid")) == 2, SETTLE)
        events = gangstate_events(core_v1, "sc-invalid", name)
        assert sorted(messages(events, "GangSpecInvalid")) == sorted([mode, waiting])
        # the scheduler silently used the defaults and bound both pods
        sched = wait_for(f"the scheduler's Scheduled Event on {name}",
                         lambda: [e for e in scheduler_events(core_v1, "sc-invalid", name)
                                  if e["reason"] == "Scheduled"], SETTLE)
        assert sched[0]["message"].startswith(f"Successfully assigned sc-invalid/{name} to node-")
    record_scenario(core_v1, "sc-invalid", held)


def test_gang_that_fits_is_scheduled(held: Chain, core_v1: client.CoreV1Api) -> None:
    text = "gang sc-fits/ok is scheduled: 2 of minMember 2 pods bound"
    for name in ("ok-0", "ok-1"):
        events = wait_gangstate_reasons(core_v1, held, "sc-fits", name, {"GangScheduled"})
        assert messages(events, "GangScheduled") == [text]
        assert [e["type"] for e in events if e["reason"] == "GangScheduled"] == ["Normal"]
        assert [e["reason"] for e in scheduler_events(core_v1, "sc-fits", name)] == ["Scheduled"]
        # no warning at all for a gang that was never held
        assert [e for e in gangstate_events(core_v1, "sc-fits", name)
                if e["type"] == "Warning"] == []
    out = explain(held, "sc-fits/ok-0")
    fields = explain_fields(out)
    assert fields["Node"].startswith("node-")
    assert fields["Held at"] == "<none>"
    assert fields["Gang"].startswith("sc-fits/ok (Scheduled: 2 of minMember 2 pods, 2 bound")
    record_scenario(core_v1, "sc-fits", held)


def test_a_gang_asking_for_a_network_topology_the_scheduler_lacks(
        held: Chain, core_v1: client.CoreV1Api) -> None:
    # koord-scheduler refuses one member (whichever became the representative) in
    # BeforePreFilter and keeps the other out at PreEnqueue without a word (rule NT1)
    ns = "sc-topology"
    refusals = wait_for("the scheduler's FailedScheduling Event", lambda: {
        name: evs for name in ("t-0", "t-1")
        if (evs := [e for e in scheduler_events(core_v1, ns, name)
                    if e["reason"] == "FailedScheduling"])}, SETTLE,
        describe=lambda: describe(core_v1, ns, held))
    assert len(refusals) == 1, refusals
    ((refused, evs),) = refusals.items()
    other = "t-1" if refused == "t-0" else "t-0"
    assert evs[0]["message"].startswith("0/2 nodes are available: no cluster network topology.")
    assert scheduler_events(core_v1, ns, other) == []
    text = (f"gang sc-topology/t asks for network-topology-aware placement "
            f"(gang.scheduling.koordinator.sh/network-topology-spec on Pod/t-")
    for name in ("t-0", "t-1"):
        events = wait_gangstate_reasons(core_v1, held, ns, name, {"GangTopologyUnavailable"})
        (message,) = messages(events, "GangTopologyUnavailable")
        assert message.startswith(text)
        assert f"it refused {refused} at PreFilter" in message
    fields = explain_fields(explain(held, f"{ns}/{other}"))
    assert fields["Held at"] == \
        f"PreEnqueue (Coscheduling, behind the representative {ns}/{refused})"
    assert explain_fields(explain(held, f"{ns}/{refused}"))["Held at"] == \
        "PreFilter (Coscheduling, no cluster network topology)"
    # the member behind the refused one is not told to be deleted: past the tier's stranded
    # wait (20 s after an attempt, conftest.STRANDED_SECONDS) no GangMembersStranded came
    refused_at = evs[0]["when"].timestamp()
    wait_for("the tier's stranded wait to pass after the refusal",
             lambda: time.time() > refused_at + 25, 60)
    for name in ("t-0", "t-1"):
        assert "GangMembersStranded" not in reasons(gangstate_events(core_v1, ns, name))
    record_scenario(core_v1, ns, held)


# ---------------------------------------------------------------------------------------------
# Scenarios with a sequence of their own
# ---------------------------------------------------------------------------------------------


def delete_pods(core: client.CoreV1Api, namespace: str, names: list[str]) -> None:
    """Delete pods at once (grace 0: no kubelet runs to confirm a graceful termination)."""
    for name in names:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)


def test_late_member_ends_the_hold(chain: Chain, core_v1: client.CoreV1Api,
                                   custom_objects: client.CustomObjectsApi) -> None:
    ns = "sc-late"
    create_namespace(core_v1, ns)
    create(core_v1, custom_objects, [gang_pod(ns, f"late-{i}", gang="late", min_available=3)
                                     for i in range(2)])
    wait_gangstate_reasons(core_v1, chain, ns, "late-0", {"GangMembersInsufficient"})
    create(core_v1, custom_objects, [gang_pod(ns, "late-2", gang="late", min_available=3)])
    satisfied = "gang sc-late/late has 3 of minMember 3 pods; no longer held at PreEnqueue"
    scheduled = "gang sc-late/late is scheduled: 3 of minMember 3 pods bound"
    for name in ("late-0", "late-1", "late-2"):
        events = wait_gangstate_reasons(core_v1, chain, ns, name,
                                        {"GangMembersSatisfied", "GangScheduled"})
        assert messages(events, "GangMembersSatisfied") == [satisfied]
        assert messages(events, "GangScheduled") == [scheduled]
    # the late pod never was held: it carries no warning; the first two carry the hold's
    assert "GangMembersInsufficient" not in reasons(gangstate_events(core_v1, ns, "late-2"))
    assert messages(gangstate_events(core_v1, ns, "late-0"), "GangMembersInsufficient") == [
        "gang sc-late/late has 2 of minMember 3 pods; scheduling is held at PreEnqueue until "
        "1 more exists"]
    assert explain_fields(explain(chain, "sc-late/late-2"))["Held at"] == "<none>"
    record_scenario(core_v1, ns, chain)


def test_recreated_pods_get_the_open_diagnostics_again(
        chain: Chain, core_v1: client.CoreV1Api, custom_objects: client.CustomObjectsApi) -> None:
    ns = "sc-recreated"
    create_namespace(core_v1, ns)
    objects = [gang_pod(ns, f"r-{i}", gang="r", min_available=2,
                   annotations={"gang.scheduling.koordinator.sh/mode": "nonstrict"})
               for i in range(2)]
    create(core_v1, custom_objects, objects)
    mode = "gang sc-recreated/r: mode 'nonstrict' is not valid; the scheduler silently uses Strict"
    old_uids = {}
    for name in ("r-0", "r-1"):
        events = wait_gangstate_reasons(core_v1, chain, ns, name, {"GangSpecInvalid",
                                                                  "GangScheduled"})
        assert messages(events, "GangSpecInvalid") == [mode]
        old_uids[name] = core_v1.read_namespaced_pod(name, ns).metadata.uid
    # a controller recreates the pods: same names, new uids
    delete_pods(core_v1, ns, ["r-0", "r-1"])
    wait_for("the old pods to be gone", lambda: not core_v1.list_namespaced_pod(ns).items, 60)
    create(core_v1, custom_objects, objects)
    for name in ("r-0", "r-1"):
        new_uid = wait_for(f"{name} recreated", lambda n=name: core_v1.read_namespaced_pod(
            n, ns).metadata.uid, 30)
        assert new_uid != old_uids[name]
        # kubectl describe finds Events by the new uid: these are the new pod's own
        events = wait_for(f"GangSpecInvalid on the new {name}", lambda n=name, u=new_uid: [
            e for e in gangstate_events(core_v1, ns, n, u) if e["reason"] == "GangSpecInvalid"],
            SETTLE, describe=lambda: describe(core_v1, ns, chain))
        assert messages(events, "GangSpecInvalid") == [mode]
    record_scenario(core_v1, ns, chain)


def wait_message(core: client.CoreV1Api, chain: Chain, namespace: str, pod_name: str,
                 reason: str, message: str) -> list[dict[str, Any]]:
    """Wait until gangstate's Events on the pod hold exactly one of ``reason``, with
    ``message`` (read back from the API server); returns the pod's gangstate Events."""
    return wait_for(f"gangstate {reason} on {namespace}/{pod_name}: {message}",
                    lambda: (lambda evs: evs if messages(evs, reason) == [message] else None)(
                        gangstate_events(core, namespace, pod_name)),
                    SETTLE, describe=lambda: describe(core, namespace, chain))


def assert_same_explanation(chain: Chain, namespace: str, names: list[str], message: str,
                            unblock: str) -> None:
    """``explain pod`` of every member: held at Filter by Coscheduling, the same
    GangUnschedulable message and the same way out."""
    answers = []
    for name in names:
        out = explain(chain, f"{namespace}/{name}")
        assert explain_fields(out)["Node"] == "<none>"
        assert explain_fields(out)["Held at"] == "Filter (Coscheduling)", out
        assert f"  GangUnschedulable: {message}\n" in out, out
        assert f"  - {unblock}\n" in out, out
        answers.append(out.split("Held at:", 1)[1])
    assert len(set(answers)) == 1, answers


def test_gang_that_can_never_fit_gpu_short(chain: Chain, core_v1: client.CoreV1Api,
                                           custom_objects: client.CustomObjectsApi,
                                           local_cluster: Any) -> None:
    """3 pods of 1 ``nvidia.com/gpu`` each, min-available 3, on 2 nodes of 1 GPU: never fits.
    The scheduler retries about once per second per pod, and in its first rounds the members
    in turn are the ones that do not fit (which of them, and whether all three before the
    episode settles, depends on the order of the rounds: on a loaded machine gpu-0 was never
    the one left over in 90 s); gangstate tells the failure episode on every pod, the same
    message: the members that failed to fit on GPUs, at most 2 fit at once, the shortfall.

    Between rounds the members pass the gang checks but wait behind the representative: only
    one pod of a gang group passes PreEnqueue (K core/gang.go:572-586, core/core.go:240), the
    others are refused with ``representative pod <member> of gangGroupID <group> already
    exists``, and during a round the members not attempted yet with ``gangGroup <group> is
    scheduling and this pod has not been attempted`` (core/gang.go:35, core/core.go:228-238);
    both refusals leave no Event, only a log line, so the scheduler's log is read for them."""
    ns = "sc-gpu-short"
    create_namespace(core_v1, ns)
    names = [f"gpu-{i}" for i in range(3)]
    create(core_v1, custom_objects, [gang_pod(ns, n, gang="gpu", min_available=3, gpu=1)
                                     for n in names])
    # the shortfall: 3 members of 1 GPU to place; 2 GPUs allocatable (no other pod asks GPUs)
    tail = (" did not fit (Insufficient nvidia.com/gpu on 2 of 2 nodes); at most 2 of minMember "
            "3 members fit at once; the scheduler rejects the whole gang and retries it; it "
            "needs 3 x 1 nvidia.com/gpu (3 members to place); the cluster has 2 allocatable on "
            "2 nodes, room for 2 members now: freeing capacity cannot make room, it takes a new "
            "node (at least 1 nvidia.com/gpu more), or min-available would have to drop to 2")
    # who did not fit: any of the members, as unschedulable_message names them
    said = {f"gang sc-gpu-short/gpu cannot be scheduled: {who}{tail}" for who in (
        "gpu-0", "gpu-1", "gpu-2", "gpu-0 and gpu-1", "gpu-0 and gpu-2", "gpu-1 and gpu-2",
        "gpu-0, gpu-1 and gpu-2")}
    unblock = ("add a node with at least 1 nvidia.com/gpu more: the members to place ask more "
               "than the cluster's 2 could ever free, or lower minMember to 2; the gang is "
               "retried as a whole")
    try:
        for name in names:
            events = wait_for(f"gangstate GangUnschedulable on {ns}/{name} with the shortfall",
                              lambda: (lambda evs: evs if messages(evs, "GangUnschedulable")
                                       and messages(evs, "GangUnschedulable")[-1] in said
                                       else None)(gangstate_events(core_v1, ns, name)),
                              SETTLE, describe=lambda: describe(core_v1, ns, chain))
            told = messages(events, "GangUnschedulable")
            assert len(told) == len(set(told)), told  # each message once (news only)
            assert all(e["type"] == "Warning" for e in events)
            # what the scheduler itself says: FailedScheduling only, many of them
            assert set(reasons(scheduler_events(core_v1, ns, name))) == {"FailedScheduling"}
        message = wait_for("the same latest GangUnschedulable on every member", lambda: (
            lambda latest: latest.pop() if len(latest) == 1 else None)(
            {messages(gangstate_events(core_v1, ns, n), "GangUnschedulable")[-1]
             for n in names}), SETTLE, describe=lambda: describe(core_v1, ns, chain))
        assert message in said
        assert_same_explanation(chain, ns, names, message, unblock)
        for name in names:
            gate = scheduler_log_matches(local_cluster, (
                rf'"PreEnqueue failed" err="representative pod {ns}/(gpu-\d) of gangGroupID '
                rf'{ns}/gpu already exists" pod="{ns}/{name}"'))
            assert gate and name not in gate, (name, gate)
        assert scheduler_log_matches(local_cluster, (
            rf'"PreEnqueue failed" err="gangGroup {ns}/gpu is scheduling and this pod has not '
            rf'been attempted" pod="{ns}/(gpu-\d)"'))
        record_scenario(core_v1, ns, chain)
    finally:
        delete_and_record(core_v1, chain.settings, ns, names)  # end the retry storm


def test_one_member_that_can_never_fit_on_cpu(chain: Chain, core_v1: client.CoreV1Api,
                                              custom_objects: client.CustomObjectsApi) -> None:
    """2 pods, min-available 2; ``big-1`` asks 100 cpu of 8-cpu nodes: the gang never fits,
    and it is ``big-1``'s fit error (with kube-scheduler v1.35's ``no new claims to
    deallocate,`` clause before the preemption text) that the scheduler reports for the group;
    gangstate names big-1 and its reason on both pods, and that big-0 fits."""
    ns = "sc-cpu-member"
    create_namespace(core_v1, ns)
    create(core_v1, custom_objects, [gang_pod(ns, "big-0", gang="big", min_available=2),
                                     gang_pod(ns, "big-1", gang="big", min_available=2, cpu="100")])
    # big-1 asks 100 cpu, big-0 100m (a heterogeneous gang: the record carries both
    # requests); the nodes have 8 allocatable each: big-1 can never fit
    message = ("gang sc-cpu-member/big cannot be scheduled: big-1 did not fit (Insufficient cpu "
               "on 2 of 2 nodes); at most 1 of minMember 2 members fits at once; the scheduler "
               "rejects the whole gang and retries it; it needs 100 + 100m cpu (2 members to "
               "place); the cluster has 16 allocatable on 2 nodes: one member's 100 is more "
               "than any node has allocatable (at most 8), so it can never fit")
    unblock = ("one member asks 100 cpu, more than any node has allocatable (at most 8): lower "
               "its request or add a node with more; the gang is retried as a whole")
    try:
        for name in ("big-0", "big-1"):
            wait_message(core_v1, chain, ns, name, "GangUnschedulable", message)
        sched = scheduler_events(core_v1, ns, "big-0")
        assert any('member Pod "sc-cpu-member/big-1" is unschedulable' in e["message"]
                   for e in sched), sched
        assert any(e["message"].startswith("0/2 nodes are available: 2 Insufficient cpu.")
                   for e in scheduler_events(core_v1, ns, "big-1"))
        assert_same_explanation(chain, ns, ["big-0", "big-1"], message, unblock)
        record_scenario(core_v1, ns, chain)
    finally:
        delete_and_record(core_v1, chain.settings, ns, ["big-0", "big-1"])


def test_member_held_by_scheduling_gates(chain: Chain, core_v1: client.CoreV1Api,
                                         custom_objects: client.CustomObjectsApi) -> None:
    """min-available 2; ``g-0`` free, ``g-1`` created with the gate ``example.com/quota`` (a
    queue waiting for quota): the scheduler keeps both Pending and writes nothing
    (docs/contracts.md, "Scheduling gates"); gangstate warns both pods, says what holds each,
    and ends the warning once the gate's controller lifts it and the gang is scheduled."""
    ns = "sc-gated"
    create_namespace(core_v1, ns)
    create(core_v1, custom_objects, [gang_pod(ns, "g-0", gang="g", min_available=2),
                                     gang_pod(ns, "g-1", gang="g", min_available=2,
                                         gates=("example.com/quota",))])
    gated = ("gang sc-gated/g has 1 of minMember 2 pods free of scheduling gates (g-1 waits for "
             "example.com/quota); scheduling is held at PreEnqueue until the gates of 1 more "
             "pod are removed (by the controller that set them)")
    unblock = ("- remove the scheduling gates of sc-gated/g-1, set by the controller that owns "
               "them (g-1 waits for example.com/quota)")
    try:
        for name in ("g-0", "g-1"):
            events = wait_gangstate_reasons(core_v1, chain, ns, name, {"GangMemberGated"})
            assert messages(events, "GangMemberGated") == [gated]
            assert scheduler_events(core_v1, ns, name) == []
        out = explain(chain, f"{ns}/g-1")
        assert explain_fields(out)["Held at"] == "PreEnqueue (schedulingGates of sc-gated/g-1)"
        assert f"GangMemberGated: {gated}" in out and unblock in out
        out = explain(chain, f"{ns}/g-0")
        assert explain_fields(out)["Held at"] == \
            "PreEnqueue (Coscheduling, behind the schedulingGates of sc-gated/g-1)"
        assert f"GangMemberGated: {gated}" in out and unblock in out
        # the gate's controller lifts it: the scheduler places both pods
        core_v1.patch_namespaced_pod("g-1", ns, {"spec": {"schedulingGates": None}})
        ungated = ("gang sc-gated/g has 2 of minMember 2 pods free of scheduling gates; no "
                   "longer held at PreEnqueue")
        for name in ("g-0", "g-1"):
            events = wait_gangstate_reasons(core_v1, chain, ns, name,
                                            {"GangMembersUngated", "GangScheduled"})
            assert messages(events, "GangMembersUngated") == [ungated]
            assert "Scheduled" in reasons(scheduler_events(core_v1, ns, name))
        record_scenario(core_v1, ns, chain)
    finally:
        delete_pods(core_v1, ns, ["g-0", "g-1"])
