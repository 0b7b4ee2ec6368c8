"""Gangs that live, on the control plane with kube-controller-manager and KWOK (the nodes'
kubelet): pods that run and finish, Jobs whose controller recreates failed pods, preemption by
a high-priority gang, members lost after the gang was scheduled, an API server restart under
the watch. Real Pods, Jobs and PriorityClasses through the API; what the scheduler and the
controllers did is read back from the API server and asserted beside gangstate's Events.

What the real parts do here (measured on this plane, ``docs/cluster.md``): KWOK runs a bound pod
at once, ends a pod annotated ``gangstate.local/run-for`` (Succeeded) or
``gangstate.local/fail-after`` (Failed) after that long, and deletes a terminating pod at the
end of its grace period; koord-scheduler v1.8.0 preempts lower-priority pods for a gang's
members one member at a time (kube-scheduler's DefaultPreemption; it is not gang-aware), writes
``Preempted`` on each victim and sets the preemptor's ``status.nominatedNodeName``, and while the
victims terminate retries with ``... preemption: not eligible due to a terminating pod on the
nominated node.``
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from streams.dev.localcluster import Chain, create_namespace, gang_pod, pod_events
from tests.cluster.kube import (delete_and_record, gangstate_events, record_scenario,
                                scheduler_events, wait_for)
from tests.cluster.test_cluster_scenarios import (describe, explain, explain_fields,
                                                 scheduler_log_lines, wait_gangstate_reasons)

LOW, HIGH = "gangstate-low", "gangstate-high"
#: the priority of gangstate-high, never preempting: never nominated (KS
#: framework/plugins/defaultpreemption/default_preemption.go:318-320)
HIGH_NEVER = f"{HIGH}-never"
PRIORITIES = {LOW: 10, HIGH: 1000, HIGH_NEVER: 1000}


@pytest.fixture(scope="module")
def priority_classes(local_cluster: Any) -> dict[str, int]:
    """PriorityClasses ``gangstate-low`` (10) and ``gangstate-high`` (1000), preemptLowerPriority
    (the default policy), and ``gangstate-high-never`` (1000, preemptionPolicy Never); returned
    once the API server admits a pod of each: its Priority admission plugin resolves the class
    from an informer's cache, which can lag the create (a pod refused with 403 "no
    PriorityClass with name ... was found" was seen on a loaded machine)."""
    api_client = local_cluster.api_client("admin")
    api = client.SchedulingV1Api(api_client)
    for name, value in PRIORITIES.items():
        body: dict[str, Any] = {"metadata": {"name": name}, "value": value}
        if name == HIGH_NEVER:
            body["preemptionPolicy"] = "Never"
        try:
            api.create_priority_class(body)
        except ApiException as err:
            if err.status != 409:
                raise
    core = client.CoreV1Api(api_client)

    def admitted(name: str) -> bool:
        pod = {"metadata": {"name": "priority-probe"},
               "spec": {"priorityClassName": name,
                        "containers": [{"name": "c", "image": "busybox"}]}}
        try:
            core.create_namespaced_pod("default", pod, dry_run="All")
        except ApiException as err:
            if err.status == 403 and ("PriorityClass" in str(err.body)
                                      or "service account" in str(err.body)):
                return False  # either cache not yet filled
            raise
        return True

    for name in PRIORITIES:
        wait_for(f"the API server to admit pods of PriorityClass {name}",
                 lambda name=name: admitted(name), 30)
    return dict(PRIORITIES)


@pytest.fixture
def frees_gpus(core_v1: client.CoreV1Api) -> Any:
    """Namespaces a test registers (``frees_gpus.append(ns)``) have every pod deleted at once
    (grace 0) when the test ends, passed or not: the session's 2 GPUs are shared by every
    scenario."""
    namespaces: list[str] = []
    yield namespaces
    for ns in namespaces:
        for pod in core_v1.list_namespaced_pod(ns).items:
            try:
                core_v1.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)
            except ApiException as err:
                if err.status != 404:
                    raise
        wait_for(f"the pods of {ns} gone", lambda: not core_v1.list_namespaced_pod(ns).items,
                 60)


def pods_of(core: client.CoreV1Api, namespace: str) -> dict[str, Any]:
    return {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}


def wait_phase(core: client.CoreV1Api, chain: Chain, namespace: str, names: list[str],
               phase: str, timeout: float = 90.0) -> dict[str, Any]:
    """Wait until every pod of ``names`` is in ``phase``; return the pods."""
    def probe() -> dict[str, Any] | None:
        pods = pods_of(core, namespace)
        ok = all(n in pods and pods[n].status.phase == phase for n in names)
        return pods if ok else None
    return wait_for(f"{names} of {namespace} {phase}", probe, timeout,
                    describe=lambda: describe(core, namespace, chain))


def job(namespace: str, name: str, *, parallelism: int, min_available: int,
        annotations: dict[str, str], backoff_limit: int = 0, gpu: int = 0) -> dict[str, Any]:
    """A batch/v1 Job (indexed, ``parallelism`` = completions) whose pod template carries the
    gang annotations of gang ``name`` (min-available ``min_available``) and ``annotations``."""
    template = gang_pod(namespace, name, gang=name, min_available=min_available,
                        annotations=annotations, gpu=gpu)
    for key in ("apiVersion", "kind"):
        template.pop(key)
    template["metadata"].pop("name")
    template["metadata"].pop("namespace")
    template["spec"]["restartPolicy"] = "Never"
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"parallelism": parallelism, "completions": parallelism,
                     "completionMode": "Indexed", "backoffLimit": backoff_limit,
                     "template": template}}


def job_pods(core: client.CoreV1Api, namespace: str, name: str) -> list[Any]:
    """The Job's pods, oldest first."""
    pods = core.list_namespaced_pod(
        namespace, label_selector=f"batch.kubernetes.io/job-name={name}").items
    return sorted(pods, key=lambda p: (p.metadata.creation_timestamp, p.metadata.name))


# ---------------------------------------------------------------------------------------------
# pods that run and finish
# ---------------------------------------------------------------------------------------------


def test_a_job_gang_runs_and_succeeds(chain: Chain, core_v1: client.CoreV1Api) -> None:
    """An indexed Job of 2 pods, gang min-available 2: both bound, Running, then Succeeded after
    4 s; the Job completes. gangstate says the gang is scheduled, and nothing when it finishes
    (a finished member is not a lost one)."""
    ns = "live-job"
    create_namespace(core_v1, ns)
    batch = client.BatchV1Api(core_v1.api_client)
    batch.create_namespaced_job(ns, job(ns, "train", parallelism=2, min_available=2,
                                        annotations={"gangstate.local/run-for": "4s"}))
    pods = wait_for("2 pods of Job train", lambda: (lambda ps: ps if len(ps) == 2 else None)(
        job_pods(core_v1, ns, "train")), 60)
    names = [p.metadata.name for p in pods]
    for name in names:
        evs = wait_gangstate_reasons(core_v1, chain, ns, name, {"GangScheduled"})
        assert [e["message"] for e in evs if e["reason"] == "GangScheduled"] == [
            f"gang {ns}/train is scheduled: 2 of minMember 2 pods bound"]
    wait_phase(core_v1, chain, ns, names, "Succeeded")
    wait_for("Job train complete", lambda: (batch.read_namespaced_job_status("train", ns)
                                           .status.succeeded == 2), 60)
    for name in names:
        assert [e["reason"] for e in scheduler_events(core_v1, ns, name)] == ["Scheduled"]
    # KWOK ended the pods; the watcher saw them Succeeded; gangstate wrote no Warning
    wait_for("the watcher to publish the Succeeded pods", lambda: _published_phase(
        chain, ns, "Succeeded") >= 2, 60)
    for name in names:
        assert [e["type"] for e in gangstate_events(core_v1, ns, name)] == ["Normal"]
    record_scenario(core_v1, ns, chain)


def _published_phase(chain: Chain, namespace: str, phase: str) -> int:
    """How many pod records of ``namespace`` the watcher published in ``phase``."""
    import json

    from tests.cluster.kube import namespace_records

    count = 0
    for _n, raw in namespace_records(chain.settings, namespace):
        rec = json.loads(raw)
        if rec.get("resource") == "pods" and \
                (rec.get("object", {}).get("status") or {}).get("phase") == phase:
            count += 1
    return count


# ---------------------------------------------------------------------------------------------
# preemption
# ---------------------------------------------------------------------------------------------


def preempted(core: client.CoreV1Api, namespace: str) -> list[tuple[str, str, str, str]]:
    """The scheduler's ``Preempted`` Events in ``namespace`` as ``(victim, node, preemptor
    name, the Event's time as gangstate writes it)``, in time order: the message is
    ``Preempted by pod <uid> on node <node>`` (kube-scheduler v1.35.2
    ``framework/preemption/preemption.go``), the preemptor found by its uid."""
    import re

    by_uid = {p.metadata.uid: p.metadata.name for p in core.list_namespaced_pod(namespace).items}
    out = []
    for ev in core.list_namespaced_event(namespace).items:
        if ev.reason != "Preempted":
            continue
        m = re.fullmatch(r"Preempted by pod (\S+) on node (\S+)", ev.message or "")
        assert m, ev.message
        when = ev.event_time or ev.last_timestamp
        out.append((ev.involved_object.name, m.group(2), by_uid.get(m.group(1), m.group(1)),
                    when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")))
    return sorted(out, key=lambda row: row[3])


def start_preemption(core: client.CoreV1Api, chain: Chain, namespace: str,
                     grace_seconds: int) -> None:
    """Two low-priority pods ``low-0``/``low-1`` (1 GPU each, grace ``grace_seconds``) hold the
    session's 2 GPUs, Running; then the high-priority gang ``hi`` of 2 x 1 GPU (minMember 2)
    is created, whose members preempt them."""
    for i in range(2):
        core.create_namespaced_pod(namespace, gang_pod(namespace, f"low-{i}", gpu=1,
                                                       grace_seconds=grace_seconds,
                                                       priority_class=LOW))
    wait_phase(core, chain, namespace, ["low-0", "low-1"], "Running")
    for i in range(2):
        core.create_namespaced_pod(namespace, gang_pod(namespace, f"hi-{i}", gang="hi",
                                                       min_available=2, gpu=1,
                                                       priority_class=HIGH))


def victims_text(namespace: str, rows: list[tuple[str, str, str, str]],
                 grace: str | None) -> str:
    """``ns/low-0 on node-a (for hi-1, at T, grace period 15s) and ...`` as
    ``streams.core.preemption`` writes the victims: in the order they were preempted."""
    parts = [f"{namespace}/{victim} on {node} (for {by}, at {at}"
             + (f", grace period {grace})" if grace else ")")
             for victim, node, by, at in rows]
    return " and ".join(parts)


def test_preemption_in_progress_then_bound(chain: Chain, core_v1: client.CoreV1Api,
                                           priority_classes: dict[str, int],
                                           frees_gpus: list[str]) -> None:
    """Two low-priority pods (grace 6 s) hold both GPUs; a high-priority gang of 2 x 1 GPU
    preempts them: ``Preempted`` on each victim, the members nominated to their nodes, the
    victims Terminating for 6 s, then the gang binds (or koord-scheduler v1.8.0 leaves it
    pending, below). gangstate tells the preemption in progress and never advises freeing
    capacity or lowering minMember meanwhile."""
    ns = "live-preempt"
    create_namespace(core_v1, ns)
    frees_gpus.append(ns)
    start_preemption(core_v1, chain, ns, grace_seconds=6)
    # kube-scheduler preempts for one member at a time and writes its Preempted Events through
    # its own rate limit: wait for both Events, not for a moment when both victims terminate
    rows = wait_for("the Preempted Events on both victims", lambda: (
        lambda rows: rows if sorted(r[0] for r in rows) == ["low-0", "low-1"] else None)(
        preempted(core_v1, ns)), 60, describe=lambda: describe(core_v1, ns, chain))
    assert sorted(r[2] for r in rows) == ["hi-0", "hi-1"]
    # GangPreempting tells the victims seen when it is due (1 s after the latest; a later one
    # makes it told again), each as the scheduler's Event has it, and the members' nominated
    # nodes as their pods then carried them
    clauses = {f"{ns}/{victim} on {node} (for {by}, at {at}, grace period 6s)": (by, node)
               for victim, node, by, at in rows}
    head = f"gang {ns}/hi is waiting for its preemption: koord-scheduler preempted "
    tail = ("; until then its pods' FailedScheduling (preemption: not eligible due to a "
            "terminating pod on the nominated node) is expected: no capacity needs to be freed "
            "and minMember need not change")
    for name in ("hi-0", "hi-1"):
        evs = wait_gangstate_reasons(core_v1, chain, ns, name, {"GangPreempting"}, timeout=30)
        told = [(e["type"], e["message"]) for e in evs if e["reason"] == "GangPreempting"]
        assert len(told) == 1, told
        kind, text = told[0]
        assert kind == "Normal" and text.startswith(head) and text.endswith(tail), text
        victims = text[len(head):text.index(" for its members; ")].split(" and ")
        assert victims and set(victims) <= set(clauses), (victims, clauses)
        nominated_text = text[text.index("; nominated nodes: ") + 19:-len(tail)]
        if nominated_text != "none known":
            preemptor_node = dict(clauses.values())
            for pair in nominated_text.split(", "):
                member, _, node = pair.partition(" on ")
                assert preemptor_node[member] == node, (pair, rows)
    # the gang binds once the victims are gone (6 s grace); or koord-scheduler v1.8.0 leaves it
    # (one CI run in about six): the representative, rejected by Coscheduling's PreFilter while
    # its peer preempted, waits for the scheduler's 5-minute flush of unschedulable pods, and
    # the other member is refused at PreEnqueue ("representative pod ... already exists")
    try:
        wait_phase(core_v1, chain, ns, ["hi-0", "hi-1"], "Running", timeout=90)
        bound = True
    except pytest.fail.Exception:
        refused = [line for line in scheduler_log_lines(chain.cluster, ns)
                   if "PreEnqueue failed" in line and "already exists" in line]
        assert refused, describe(core_v1, ns, chain)
        bound = False
    # once bound, nothing gangstate told the gang advised freeing capacity or lowering
    # minMember; left pending, the gang is told it waits for the scheduler's flush (rule PR7:
    # GangAwaitingRetry, what a user can do about it; no shim in this chain, so no command)
    for name in ("hi-0", "hi-1"):
        evs = wait_gangstate_reasons(core_v1, chain, ns, name,
                                     {"GangScheduled" if bound else "GangAwaitingRetry"})
        said = " ".join(e["message"] for e in evs)
        assert "lower minMember" not in said and "min-available would have to drop" not in said
        assert "must free up" not in said
        if not bound:
            (told,) = [e["message"] for e in evs if e["reason"] == "GangAwaitingRetry"]
            assert told.startswith(f"gang {ns}/hi: its preemption made room (its victims "
                                   f"{ns}/low-") and told.endswith("retries the gang now"), told
    record_scenario(core_v1, ns, chain)
    # give the GPUs back to the other scenarios of the session
    delete_and_record(core_v1, chain.settings, ns, ["hi-0", "hi-1"])


def test_wasted_preemption_is_told_on_the_gang_and_the_victims(
        chain: Chain, core_v1: client.CoreV1Api, priority_classes: dict[str, int],
        frees_gpus: list[str]) -> None:
    """A high-priority gang of 3 x 1 GPU, 2 GPUs in the cluster, held by two low-priority pods
    (grace 0): the scheduler evicts both and the gang still cannot fit. gangstate tells the
    wasted preemption on the gang's pods and on the victims."""
    ns = "live-wasted"
    create_namespace(core_v1, ns)
    frees_gpus.append(ns)
    victims = {}
    for i in range(2):
        pod = core_v1.create_namespaced_pod(ns, gang_pod(ns, f"low-{i}", gpu=1,
                                                         priority_class=LOW))
        victims[f"low-{i}"] = pod.metadata.uid
    wait_phase(core_v1, chain, ns, list(victims), "Running")
    members = [f"big-{i}" for i in range(3)]
    for name in members:
        core_v1.create_namespaced_pod(ns, gang_pod(ns, name, gang="big", min_available=3,
                                                   gpu=1, priority_class=HIGH))
    wait_for("both victims gone", lambda: not set(victims) & set(pods_of(core_v1, ns)), 60,
             describe=lambda: describe(core_v1, ns, chain))
    # the scheduler writes its Events after the evictions, through its own rate limit
    rows = wait_for("the Preempted Events on both victims", lambda: (
        lambda rows: rows if sorted(r[0] for r in rows) == ["low-0", "low-1"] else None)(
        preempted(core_v1, ns)), 60)
    wasted = (f"gang {ns}/big still cannot be scheduled although koord-scheduler preempted "
              f"{victims_text(ns, rows, None)} for it: it needs 3 x 1 nvidia.com/gpu and the "
              f"cluster has 2 allocatable on 2 nodes; the evictions freed room the gang cannot "
              f"use (koord-scheduler preempts for one pod at a time, not for the whole gang)")
    for name in members:
        evs = wait_gangstate_reasons(core_v1, chain, ns, name, {"GangPreemptionWasted"},
                                     timeout=60)
        assert [(e["type"], e["message"]) for e in evs
                if e["reason"] == "GangPreemptionWasted"] == [("Warning", wasted)]
    # on the victims too, where their owners look (the pods are gone: the Events stay)
    for name, uid in victims.items():
        evs = wait_for(f"GangPreemptionWasted on victim {name}", lambda: (lambda evs: evs or None)(
            [e for e in pod_events(core_v1, ns, name, uid) if e["from"] == "gangstate"
             and e["reason"] == "GangPreemptionWasted"]), 60)
        assert [(e["type"], e["message"]) for e in evs] == [("Warning", wasted)]
    delete_and_record(core_v1, chain.settings, ns, members)


def test_a_gang_that_preemption_cannot_make_room_for_is_told_so(
        chain: Chain, core_v1: client.CoreV1Api, priority_classes: dict[str, int],
        frees_gpus: list[str]) -> None:
    """Rule PR4 on the real scheduler: of the 2 GPUs, one is held by a pod of priority 1000
    (``keep``, not lower than the gang's: never a victim), the other by one of priority 10
    (``low``, grace 0); a gang of 2 x 1 GPU at priority 1000 fails. Evicting every pod of lower
    priority would leave room for 1 member of the 2: the cycle records carry the members'
    priority and that room, and GangUnschedulable says that preemption cannot make room
    (whether or not kube-scheduler has evicted ``low`` in vain by then)."""
    ns = "live-pr4"
    create_namespace(core_v1, ns)
    frees_gpus.append(ns)
    core_v1.create_namespaced_pod(ns, gang_pod(ns, "keep", gpu=1, priority_class=HIGH))
    core_v1.create_namespaced_pod(ns, gang_pod(ns, "low", gpu=1, priority_class=LOW))
    wait_phase(core_v1, chain, ns, ["keep", "low"], "Running")
    members = ["g-0", "g-1"]
    for name in members:
        core_v1.create_namespaced_pod(ns, gang_pod(ns, name, gang="g", min_available=2, gpu=1,
                                                   priority_class=HIGH))
    clause = ("preemption cannot make room: evicting every pod of priority below 1000 would "
              "leave room for 1 member")
    for name in members:
        told = wait_for(f"GangUnschedulable on {name} telling what preemption can do", lambda: [
            e for e in gangstate_events(core_v1, ns, name)
            if e["reason"] == "GangUnschedulable" and clause in e["message"]] or None, 90,
            describe=lambda: describe(core_v1, ns, chain))
        assert told[-1]["type"] == "Warning"
    # keep, of the gang's own priority, was never a victim
    assert pods_of(core_v1, ns)["keep"].status.phase == "Running"
    delete_and_record(core_v1, chain.settings, ns, sorted(pods_of(core_v1, ns)))  # low may be evicted


def test_the_member_left_over_when_min_member_is_lowered_is_explained_on_its_own(
        chain: Chain, core_v1: client.CoreV1Api, frees_gpus: list[str]) -> None:
    """PodGroup ``big`` of minMember 3, 3 pods of 1 GPU on the 2 GPUs: the gang cannot fit;
    then its minMember is lowered to 2 (a user following gangstate's advice): 2 pods bind and
    the group is once satisfied (rule M2), so the third is scheduled on its own (rule P4) and
    fails Filter with its own fit error once kube-scheduler retries it (rule M7: within 5 min
    when it was rejected with its gang). explain says so: scheduled on its own, and either
    waiting for that retry or held at Filter by its own fit error, no other member having to
    fit with it; never that nothing holds it (the new-user trial's finding)."""
    from tests.cluster.test_cluster_scenarios import PODGROUP_LABEL, create, podgroup

    ns = "live-lowered"
    create_namespace(core_v1, ns)
    frees_gpus.append(ns)
    custom = client.CustomObjectsApi(core_v1.api_client)
    names = [f"big-{i}" for i in range(3)]
    create(core_v1, custom, [podgroup(ns, "big", 3)] + [
        gang_pod(ns, n, labels={PODGROUP_LABEL: "big"}, gpu=1) for n in names])
    wait_gangstate_reasons(core_v1, chain, ns, names[0], {"GangUnschedulable"})
    custom.patch_namespaced_custom_object("scheduling.sigs.k8s.io", "v1alpha1", ns,
                                          "podgroups", "big", {"spec": {"minMember": 2}})
    running = wait_for("2 of the 3 pods Running", lambda: (lambda pods: pods if len(pods) == 2
                       else None)([n for n, p in pods_of(core_v1, ns).items()
                                   if p.status.phase == "Running"]), 90,
                       describe=lambda: describe(core_v1, ns, chain))
    (left,) = set(names) - set(running)
    # until its next attempt, which may take up to 5 min (rule M7: it waits among the
    # unschedulable pods when it was rejected with its gang), explain says it waits for its
    # retry; after it, its own fit error; never that nothing holds it
    out = wait_for(f"explain of {left} on its own", lambda: (lambda text: text if
                   explain_fields(text).get("Held at", "").startswith(
                       ("Filter", "SchedulingQueue")) else None)(
                       explain(chain, f"{ns}/{left}")), 60,
                   describe=lambda: explain(chain, f"{ns}/{left}"))
    assert "  GangOnceSatisfied: " in out, out
    if explain_fields(out)["Held at"] == "Filter":
        assert "  PodUnschedulable: the pod's own last attempt failed: Insufficient " \
               "nvidia.com/gpu" in out, out
        assert "; no other member has to fit with it\n" in out, out
    else:
        assert "  WaitingForRetry: its last attempt was rejected with its gang " \
               "(GangGroupRejected at " in out, out
        assert explain_fields(out)["Held at"] == \
            "SchedulingQueue (kube-scheduler's unschedulable pods)", out
    delete_and_record(core_v1, chain.settings, ns, names)


# ---------------------------------------------------------------------------------------------
# members lost after the gang was scheduled
# ---------------------------------------------------------------------------------------------


def test_a_member_lost_after_the_gang_was_scheduled(chain: Chain,
                                                    core_v1: client.CoreV1Api) -> None:
    """A bound gang of minMember 2 (2 bare pods, Running); one member is deleted (grace 3 s:
    Terminating, then gone). The other runs on alone: gangstate says the gang dropped below
    minMember."""
    ns = "live-lost"
    create_namespace(core_v1, ns)
    for i in range(2):
        core_v1.create_namespaced_pod(ns, gang_pod(ns, f"w-{i}", gang="w", min_available=2,
                                                   grace_seconds=3))
    wait_phase(core_v1, chain, ns, ["w-0", "w-1"], "Running")
    wait_gangstate_reasons(core_v1, chain, ns, "w-0", {"GangScheduled"})
    core_v1.delete_namespaced_pod("w-1", ns)
    wait_for("w-1 gone", lambda: "w-1" not in pods_of(core_v1, ns), 60)
    evs = wait_gangstate_reasons(core_v1, chain, ns, "w-0", {"GangMembersLost"}, timeout=60)
    lost = [e for e in evs if e["reason"] == "GangMembersLost"]
    assert [(e["type"], e["message"]) for e in lost] == [("Warning", (
        f"gang {ns}/w lost members after it was scheduled: w-1 deleted; 1 member of minMember "
        f"2 remains bound; koord-scheduler neither evicts the remaining members nor restarts "
        f"the gang; a replacement pod created by its controller skips the gang checks because "
        f"the gang group was once satisfied, so it is scheduled on its own as soon as it fits, "
        f"without waiting for minMember; a pod without a controller is created again by no "
        f"one"))]
    # the gang reads Degraded, not Gathering, with its remaining member bound
    fields = explain_fields(explain(chain, f"{ns}/w-0"))
    assert fields["Gang"].startswith(f"{ns}/w (Degraded: 1 of minMember 2 pods, 1 bound"), fields
    # a replacement is scheduled on its own (once-satisfied, rule M2) and the gang is whole
    core_v1.create_namespaced_pod(ns, gang_pod(ns, "w-2", gang="w", min_available=2))
    wait_phase(core_v1, chain, ns, ["w-0", "w-2"], "Running")
    for name in ("w-0", "w-2"):
        evs = wait_gangstate_reasons(core_v1, chain, ns, name, {"GangMembersRestored"})
        assert [e["message"] for e in evs if e["reason"] == "GangMembersRestored"] == [
            f"gang {ns}/w has 2 of minMember 2 members bound again"]
    record_scenario(core_v1, ns, chain)


def test_a_member_deleted_while_the_watch_was_down_is_lost_after_its_restart(
        chain: Chain, core_v1: client.CoreV1Api) -> None:
    """A bound gang of minMember 2 (2 bare pods, Running); the watch producer is stopped, w-1
    is force-deleted, and the watch starts again (a rollout). The new process lists w-0 only
    and sends its roster (gangstate.roster/v1): the worker drops w-1 and tells the loss on
    w-0. Before, no DELETED came for w-1 and it stayed a member for good (a new user's run)."""
    ns = "live-roster"
    create_namespace(core_v1, ns)
    for i in range(2):
        core_v1.create_namespaced_pod(ns, gang_pod(ns, f"w-{i}", gang="w", min_available=2))
    wait_phase(core_v1, chain, ns, ["w-0", "w-1"], "Running")
    wait_gangstate_reasons(core_v1, chain, ns, "w-0", {"GangScheduled"})

    def delete_w_1() -> None:
        core_v1.delete_namespaced_pod("w-1", ns, grace_period_seconds=0)
        wait_for("w-1 gone", lambda: "w-1" not in pods_of(core_v1, ns), 60)

    chain.restart("watch", meanwhile=delete_w_1)
    evs = wait_gangstate_reasons(core_v1, chain, ns, "w-0", {"GangMembersLost"}, timeout=90)
    assert [e["message"].split(";")[:2] for e in evs if e["reason"] == "GangMembersLost"] == [
        [f"gang {ns}/w lost members after it was scheduled: w-1 deleted",
         " 1 member of minMember 2 remains bound"]]
    fields = explain_fields(explain(chain, f"{ns}/w-0"))
    assert fields["Gang"].startswith(f"{ns}/w (Degraded: 1 of minMember 2 pods, 1 bound"), fields
    record_scenario(core_v1, ns, chain)


def test_failed_job_pods_are_recreated_by_their_controller(chain: Chain,
                                                           core_v1: client.CoreV1Api) -> None:
    """An indexed Job of 2 pods (gang min-available 2, backoffLimit 2) whose pods fail 3 s after
    they start: the Job controller creates a replacement for each failure until the backoff
    limit; the gang was once satisfied, so the replacements are scheduled as they come
    (Koordinator v1.8.0's once-satisfied gang, rule M2)."""
    ns = "live-fail"
    create_namespace(core_v1, ns)
    batch = client.BatchV1Api(core_v1.api_client)
    batch.create_namespaced_job(ns, job(ns, "flaky", parallelism=2, min_available=2,
                                        backoff_limit=2,
                                        annotations={"gangstate.local/fail-after": "3s"}))
    pods = wait_for("a replacement pod of Job flaky", lambda: (
        lambda ps: ps if len(ps) >= 3 else None)(job_pods(core_v1, ns, "flaky")), 90,
        describe=lambda: describe(core_v1, ns, chain))
    first = [p.metadata.name for p in pods[:2]]
    wait_phase(core_v1, chain, ns, first, "Failed")
    replacement = pods[2].metadata.name
    wait_for(f"replacement {replacement} bound", lambda: pods_of(core_v1, ns)[replacement]
             .spec.node_name, 60)
    evs = wait_gangstate_reasons(core_v1, chain, ns, first[0], {"GangMembersLost"}, timeout=60)
    said = [e["message"] for e in evs if e["reason"] == "GangMembersLost"]
    assert f"{first[0]} and {first[1]} failed;" in said[0] or f"{first[0]} failed;" in said[0]
    wait_for("Job flaky failed", lambda: any(
        c.type == "Failed" and c.status == "True"
        for c in (batch.read_namespaced_job_status("flaky", ns).status.conditions or [])), 120)
    record_scenario(core_v1, ns, chain)


# ---------------------------------------------------------------------------------------------
# the API server restarted under the watch
# ---------------------------------------------------------------------------------------------


def test_the_watch_is_back_within_seconds_of_an_api_server_restart(
        chain: Chain, core_v1: client.CoreV1Api, local_cluster: Any) -> None:
    """kube-apiserver restarted (same port, same etcd): a gang created right after it is up
    again gets its ``GangScheduled`` within seconds of its bind, as before the restart, not
    after a long backoff of the watch."""
    local_cluster.restart("kube-apiserver")
    ns = "live-restart"
    create_namespace(core_v1, ns)
    for i in range(2):
        core_v1.create_namespaced_pod(ns, gang_pod(ns, f"r-{i}", gang="r", min_available=2))
    pods = wait_phase(core_v1, chain, ns, ["r-0", "r-1"], "Running", timeout=60)
    evs = wait_gangstate_reasons(core_v1, chain, ns, "r-0", {"GangScheduled"}, timeout=60)
    bound = max(c.last_transition_time for p in pods.values() for c in p.status.conditions
                if c.type == "PodScheduled" and c.status == "True")
    told = min(e["when"] for e in evs if e["reason"] == "GangScheduled")
    # both at one-second resolution (the condition's time, the Event's)
    assert (told - bound).total_seconds() < 10.0, (bound, told)
    record_scenario(core_v1, ns, chain)



# ---------------------------------------------------------------------------------------------
# members that do not fit: their own fit error, per-member requests, advice of the right kind
# ---------------------------------------------------------------------------------------------


def test_a_nonstrict_member_that_does_not_fit_is_never_stranded(
        chain: Chain, core_v1: client.CoreV1Api) -> None:
    """A NonStrict gang of min-available 2 with 3 pods, the third asking 100 cpu (8 per node):
    the scheduler binds the two that fit and keeps trying the third with its own fit error
    (``0/2 nodes are available: 2 Insufficient cpu.``). gangstate says the gang is scheduled and
    never calls the third pod stranded nor tells anyone to delete it; explain gives its fit
    error."""
    from tests.cluster.conftest import STRANDED_SECONDS
    from tests.cluster.test_cluster_scenarios import explain

    ns = "live-nonstrict"
    create_namespace(core_v1, ns)
    mode = {"gang.scheduling.koordinator.sh/mode": "NonStrict"}
    for i in range(2):
        core_v1.create_namespaced_pod(ns, gang_pod(ns, f"n-{i}", gang="n", min_available=2,
                                                   annotations=mode))
    core_v1.create_namespaced_pod(ns, gang_pod(ns, "n-big", gang="n", min_available=2,
                                               annotations=mode, cpu="100"))
    wait_phase(core_v1, chain, ns, ["n-0", "n-1"], "Running")
    for name in ("n-0", "n-1"):
        wait_gangstate_reasons(core_v1, chain, ns, name, {"GangScheduled"})

    # the scheduler tried n-big (its own fit error) and then parks it until the cluster
    # changes: wait until the fold's clock (the records' event time, ticks included) is past
    # the stranded wait after that attempt
    def event_time_past_the_stranded_wait() -> bool:
        import json

        from streams.core.timefmt import parse_time
        from tests.cluster.kube import namespace_records

        first, last = None, 0
        for _n, raw in namespace_records(chain.settings, ns):
            rec = json.loads(raw)
            at = parse_time(rec["observed_at"])
            last = max(last, at)
            if first is None and rec.get("schema") == "gangstate.cycle/v1" and \
                    (rec.get("pod") or {}).get("name") == "n-big":
                first = at
        return first is not None and last > first + int((STRANDED_SECONDS + 5) * 1e6)
    wait_for("event time past the stranded wait after n-big's attempt",
             event_time_past_the_stranded_wait, 120, interval=5.0,
             describe=lambda: describe(core_v1, ns, chain))
    fit = [e["message"] for e in scheduler_events(core_v1, ns, "n-big")]
    assert fit and fit[0].startswith("0/2 nodes are available: 2 Insufficient cpu."), fit
    said = gangstate_events(core_v1, ns, "n-big")
    assert "GangMembersStranded" not in [e["reason"] for e in said]
    assert not any("delete it" in e["message"] for e in said)
    out = explain(chain, f"{ns}/n-big")
    assert "Insufficient cpu" in out and "stranded" not in out.lower()
    delete_and_record(core_v1, chain.settings, ns, ["n-0", "n-1", "n-big"])


def test_a_heterogeneous_gang_is_told_each_members_request(
        chain: Chain, core_v1: client.CoreV1Api, frees_gpus: list[str]) -> None:
    """A gang of min-available 3 whose members ask 2, 1 and 1 GPU, on 2 nodes of 1 GPU: the
    2-GPU member can never fit anywhere. The shortfall names each member's request, not 3 x
    the culprit's."""
    ns = "live-hetero"
    create_namespace(core_v1, ns)
    frees_gpus.append(ns)
    members = {"h-0": 2, "h-1": 1, "h-2": 1}
    for name, gpus in members.items():
        core_v1.create_namespaced_pod(ns, gang_pod(ns, name, gang="h", min_available=3,
                                                   gpu=gpus))
    for name in members:
        evs = wait_gangstate_reasons(core_v1, chain, ns, name, {"GangUnschedulable"})
        text = [e["message"] for e in evs if e["reason"] == "GangUnschedulable"][-1]
        assert text.endswith(
            "; it needs 2 + 1 + 1 nvidia.com/gpu (3 members to place); the cluster has 2 "
            "allocatable on 2 nodes: one member's 2 is more than any node has allocatable (at "
            "most 1), so it can never fit"), text
        assert "3 x 2" not in text
    delete_and_record(core_v1, chain.settings, ns, list(members))


def test_a_selector_no_node_matches_is_not_told_to_free_capacity(
        chain: Chain, core_v1: client.CoreV1Api) -> None:
    """A gang of 2 whose pods select a label no node has: the scheduler says ``node(s) didn't
    match Pod's node affinity/selector``; gangstate advises a label or a node, never freeing
    capacity."""
    from tests.cluster.test_cluster_scenarios import explain

    ns = "live-selector"
    create_namespace(core_v1, ns)
    names = ["s-0", "s-1"]
    for name in names:
        pod = gang_pod(ns, name, gang="s", min_available=2)
        pod["spec"]["nodeSelector"] = {"gangstate.local/zone": "nowhere"}
        core_v1.create_namespaced_pod(ns, pod)
    for name in names:
        evs = wait_gangstate_reasons(core_v1, chain, ns, name, {"GangUnschedulable"})
        text = [e["message"] for e in evs if e["reason"] == "GangUnschedulable"][-1]
        assert "didn't match Pod's node affinity/selector" in text, text
        assert "free" not in text, text
    out = explain(chain, f"{ns}/s-0")
    assert ("label a node to match the pod's node selector/affinity (or change them), or add a "
            "node that matches; freeing capacity does not help") in out, out
    delete_and_record(core_v1, chain.settings, ns, names)
