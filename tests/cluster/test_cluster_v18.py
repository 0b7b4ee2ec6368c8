"""Koordinator v1.8.0 behaviours on the real control plane (issue 13, item 6): what
koord-scheduler v1.8.0 does, read from its Events, its pods' ``spec.nodeName`` and (where it
writes nothing at all) its log; what gangstate's chain writes on the pods and answers to
``gangstate explain pod``; and, for every scenario, that gangstate's Events agree with the
offline fold of the records the watcher published (``record_scenario`` with the chain:
``tests.cluster.kube.assert_events_agree_with_fold``).

Expected values come from the v1.8.0 source (``K`` = ``pkg/scheduler/plugins/coscheduling/`` of
koordinator v1.8.0, ``KS`` = ``pkg/scheduler/`` of kubernetes v1.35.2) and the scenario; the
observations each test relies on are written down in ``docs/cluster.md`` ("Koordinator v1.8
behaviours, observed").

The scenarios are created together by the module fixture :func:`v18` and moved to their second
step together, so the 10 s grace period of a hold warning is waited for once for all of them.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kubernetes import client

from streams.dev.localcluster import Chain, gang_pod
from tests.cluster.kube import (delete_and_record, gangstate_events, record_scenario,
                                scheduler_events, scheduler_log_matches, wait_for)
from tests.cluster.test_cluster_scenarios import (PODGROUP_LABEL, SETTLE, create,
                                                  create_namespace, delete_pods, describe,
                                                  explain, explain_fields, messages, podgroup,
                                                  reasons, scheduler_log_lines,
                                                  wait_gangstate_reasons, wait_message)

MATCH_POLICY = "gang.scheduling.koordinator.sh/match-policy"
GROUPS = "gang.scheduling.koordinator.sh/groups"
PODGROUPS = ("scheduling.sigs.k8s.io", "v1alpha1")
RACE_REFUSALS = ("err=\"can't find gang, gangName: v18-groups/a, podName: v18-groups/a-0\"",
                 "err=\"gang has not init, gangName: v18-groups/a, podName: v18-groups/a-0\"",
                 "err=\"pod v18-groups/a-0 is not exists in gangCache\"")
"""The refusals of a pod whose PreEnqueue ran before the scheduler's gang cache saw it, or saw
it but had not yet initialised its gang from it (K core/core.go:202-211, core/gang_cache.go:
137-141, core/gang.go:572-579): the scheduling queue's handler and the gang
cache's handler of a Pod add run concurrently. A pod refused so is never retried unless its
gang is worth a requeue when it is added (docs/cluster.md)."""


def groups_a0() -> dict[str, Any]:
    """``v18-groups/a-0``: gang a, min-available 2, groups ["v18-groups/b"], waiting-and-running."""
    return gang_pod("v18-groups", "a-0", gang="a", min_available=2,
                    annotations={GROUPS: json.dumps(["v18-groups/b"]),
                                 MATCH_POLICY: "waiting-and-running"})

#: namespace -> match policy of the once-satisfied scenarios (None: the default, once-satisfied)
POLICIES: dict[str, str | None] = {"v18-once": None, "v18-war": "waiting-and-running",
                                   "v18-ow": "only-waiting", "v18-once-big": None}
#: namespace -> cpu of its replacement pod m-3 (default 100m); 100 cpu never fits (8-cpu nodes)
REPLACEMENT_CPU = {"v18-once-big": "100"}


def member(namespace: str, name: str, cpu: str = "100m") -> dict[str, Any]:
    """A pod of gang ``m`` (min-available 3) with the namespace's match policy."""
    policy = POLICIES[namespace]
    return gang_pod(namespace, name, gang="m", min_available=3, cpu=cpu,
                    annotations={MATCH_POLICY: policy} if policy else None)


def pg_member(namespace: str, name: str) -> dict[str, Any]:
    """A pod labelled with PodGroup ``pg``."""
    return gang_pod(namespace, name, labels={PODGROUP_LABEL: "pg"})


def explains(chain: Chain, ref: str, text: str) -> bool:
    """Whether ``gangstate explain pod ref`` answers and its answer contains ``text`` (False
    while the worker does not know the pod yet)."""
    out = chain.gangstate("explain", "pod", ref, "--server", chain.server)
    return out.returncode == 0 and text in out.stdout


def node_of(core: client.CoreV1Api, namespace: str, name: str) -> str | None:
    return core.read_namespaced_pod(name, namespace).spec.node_name


def wait_bound(core: client.CoreV1Api, chain: Chain, namespace: str, names: list[str],
               timeout: float = 60.0) -> None:
    """Wait until the scheduler bound every pod of ``names`` (``spec.nodeName`` set)."""
    wait_for(f"{names} in {namespace} bound",
             lambda: all(node_of(core, namespace, n) for n in names), timeout,
             describe=lambda: describe(core, namespace, chain))


def assert_stays_pending(core: client.CoreV1Api, namespace: str, names: list[str],
                         seconds: float) -> None:
    """The pods stay unbound for ``seconds`` and the scheduler writes no Event on them (a
    PreEnqueue refusal writes none: K coscheduling.go:122-128)."""
    deadline = time.monotonic() + seconds
    while True:
        for name in names:
            assert node_of(core, namespace, name) is None, f"{namespace}/{name} was bound"
            assert scheduler_events(core, namespace, name) == [], f"{namespace}/{name}"
        if time.monotonic() >= deadline:
            return
        time.sleep(1.0)


def create_podgroup(custom: client.CustomObjectsApi, namespace: str,
                    body: dict[str, Any]) -> None:
    custom.create_namespaced_custom_object(*PODGROUPS, namespace, "podgroups", body)


def delete_podgroup(custom: client.CustomObjectsApi, namespace: str, name: str) -> None:
    custom.delete_namespaced_custom_object(*PODGROUPS, namespace, "podgroups", name)


@pytest.fixture(scope="module")
def v18(chain: Chain, core_v1: client.CoreV1Api,
        custom_objects: client.CustomObjectsApi) -> Chain:
    """Create every scenario's first step at once, wait for the binds they need, then take
    every second step at once:

    - ``v18-once``/``-war``/``-ow``/``-once-big``: gang ``m``, min-available 3, 3 pods,
      bound; then 2 bound pods deleted (not all: an annotation gang is deleted with its last
      pod, K core/gang_cache.go:206-220) and one replacement ``m-3`` created (in
      ``v18-once-big`` one that asks 100 cpu, more than any node has);
    - ``v18-nomin``: a PodGroup without ``spec.minMember`` and 2 pods;
    - ``v18-pgdel``: PodGroup ``pg`` (minMember 3) and 2 pods; then the PodGroup is deleted;
    - ``v18-groups``: gang ``b`` (min-available 1, 1 pod), bound; then ``a-0`` of gang ``a``
      (min-available 2, ``groups`` ``["v18-groups/b"]``, match policy waiting-and-running);
    - ``v18-late-pg``: 3 pods labelled with PodGroup ``pg`` before it exists; then the
      PodGroup, minMember 2;
    - ``v18-groups-late``: ``a-0`` of gang ``a`` (min-available 1, ``groups``
      ``["v18-groups-late/b"]``) while gang b does not exist; then ``b-0`` of gang ``b``
      (min-available 1, a group of itself).
    """
    for namespace in POLICIES:
        create_namespace(core_v1, namespace)
        create(core_v1, custom_objects, [member(namespace, f"m-{i}") for i in range(3)])
    ns = "v18-nomin"
    create_namespace(core_v1, ns)
    no_min = podgroup(ns, "pg", 0)
    del no_min["spec"]["minMember"]
    create(core_v1, custom_objects, [no_min] + [pg_member(ns, f"pg-{i}") for i in range(2)])
    ns = "v18-pgdel"
    create_namespace(core_v1, ns)
    create(core_v1, custom_objects,
           [podgroup(ns, "pg", 3)] + [pg_member(ns, f"pg-{i}") for i in range(2)])
    ns = "v18-groups"
    create_namespace(core_v1, ns)
    create(core_v1, custom_objects, [gang_pod(ns, "b-0", gang="b", min_available=1)])
    ns = "v18-late-pg"
    create_namespace(core_v1, ns)
    create(core_v1, custom_objects, [pg_member(ns, f"pg-{i}") for i in range(3)])
    ns = "v18-groups-late"
    create_namespace(core_v1, ns)
    create(core_v1, custom_objects, [gang_pod(ns, "a-0", gang="a", min_available=1,
                                              annotations={GROUPS: json.dumps([f"{ns}/b"])})])

    for namespace in POLICIES:
        wait_bound(core_v1, chain, namespace, ["m-0", "m-1", "m-2"])
    wait_bound(core_v1, chain, "v18-groups", ["b-0"])
    # gangstate must have seen the PodGroup gang with both pods before it is deleted
    wait_for("gangstate to know gang v18-pgdel/pg with 2 pods",
             lambda: explains(chain, "v18-pgdel/pg-1", "2 of minMember 3 pods"), SETTLE)

    for namespace in POLICIES:
        delete_pods(core_v1, namespace, ["m-1", "m-2"])
    for namespace in POLICIES:
        wait_for(f"m-1, m-2 of {namespace} gone",
                 lambda ns=namespace: len(core_v1.list_namespaced_pod(ns).items) == 1, 30)
        create(core_v1, custom_objects,
               [member(namespace, "m-3", REPLACEMENT_CPU.get(namespace, "100m"))])
    delete_podgroup(custom_objects, "v18-pgdel", "pg")
    create(core_v1, custom_objects, [groups_a0()])
    create_podgroup(custom_objects, "v18-late-pg", podgroup("v18-late-pg", "pg", 2))
    create(core_v1, custom_objects, [gang_pod("v18-groups-late", "b-0", gang="b",
                                              min_available=1)])
    return chain


# ---------------------------------------------------------------------------------------------
# (a) once-satisfied replacement pods (rules M2, P4)
# ---------------------------------------------------------------------------------------------

HELD_REPLACEMENT = ("gang {ns}/m has 2 of minMember 3 pods; scheduling is held at PreEnqueue "
                    "until 1 more exists")


@pytest.mark.parametrize("ns", ["v18-war", "v18-ow"])
def test_replacement_is_held_under_a_strict_match_policy(
        v18: Chain, core_v1: client.CoreV1Api, ns: str) -> None:
    """Match policy waiting-and-running or only-waiting: the once-satisfied shortcut does not
    apply (K core/core.go:213-216 tests once-satisfied only), so the basic check runs
    (core.go:218, 247-284): 2 children (m-0 bound, m-3 pending) < min-available 3, and m-3 is
    refused at PreEnqueue with no Event; gangstate warns it after the grace period."""
    text = HELD_REPLACEMENT.format(ns=ns)
    events = wait_gangstate_reasons(core_v1, v18, ns, "m-3", {"GangMembersInsufficient"})
    assert messages(events, "GangMembersInsufficient") == [text]
    assert node_of(core_v1, ns, "m-3") is None
    assert scheduler_events(core_v1, ns, "m-3") == []
    out = explain(v18, f"{ns}/m-3")
    assert explain_fields(out)["Held at"] == "PreEnqueue"
    assert f"GangMembersInsufficient: {text}" in out
    assert f"create 1 more pod of gang {ns}/m, or lower min-available to 2" in out


def test_second_replacement_completes_the_gang_under_waiting_and_running(
        v18: Chain, core_v1: client.CoreV1Api, custom_objects: client.CustomObjectsApi) -> None:
    """What gangstate said would unblock m-3 does: a fourth pod makes 3 children, the add
    activates it (K core/gang_cache.go:153-165, ``isGangWorthRequeue``), NextPod hands out m-3
    (core.go:150-190) and Permit counts waiting + bound = 2 + 1 >= 3 (K core/gang.go:565-566):
    both are bound."""
    ns = "v18-war"
    create(core_v1, custom_objects, [member(ns, "m-4")])
    wait_bound(core_v1, v18, ns, ["m-3", "m-4"])
    satisfied = "gang v18-war/m has 3 of minMember 3 pods; no longer held at PreEnqueue"
    wait_message(core_v1, v18, ns, "m-3", "GangMembersSatisfied", satisfied)
    for name in ("m-3", "m-4"):
        assert reasons(scheduler_events(core_v1, ns, name)) == ["Scheduled"]
    assert explain_fields(explain(v18, f"{ns}/m-3"))["Held at"] == "<none>"
    record_scenario(core_v1, ns, v18)


def test_only_waiting_replacement(v18: Chain, core_v1: client.CoreV1Api) -> None:
    """Match policy only-waiting, with no fourth pod: the scenario ends held. m-0 stays bound,
    the replacement m-3 is never bound and gets no scheduler Event (a PreEnqueue refusal writes
    none: K coscheduling.go:122-128); gangstate warns the hold on m-3 once the grace period
    has passed, and its Events agree with the offline fold of the namespace's records. Waits
    for that warning itself, so it does not depend on the tests above having run."""
    ns = "v18-ow"
    events = wait_gangstate_reasons(core_v1, v18, ns, "m-3", {"GangMembersInsufficient"})
    assert messages(events, "GangMembersInsufficient") == [HELD_REPLACEMENT.format(ns=ns)]
    assert node_of(core_v1, ns, "m-0") is not None
    assert node_of(core_v1, ns, "m-3") is None
    assert scheduler_events(core_v1, ns, "m-3") == []
    assert sorted(p.metadata.name for p in core_v1.list_namespaced_pod(ns).items) == [
        "m-0", "m-3"]
    record_scenario(core_v1, ns, v18)


def test_once_satisfied_replacement_is_scheduled_without_a_warning(
        v18: Chain, core_v1: client.CoreV1Api) -> None:
    """Default match policy (once-satisfied): m-0's bind set the gang group's
    OnceResourceSatisfied (K core/gang.go:489-507, core/gang_cache.go:150-152), which stays
    while the gang lives (ganggroup.go:29-32); PreEnqueue and BeforePreFilter pass m-3 without
    the basic check (core.go:213-216, 301-304) and Permit allows it (gang.go:567-568): the
    real scheduler binds it although the gang has 2 < 3 children. gangstate must not warn
    GangMembersInsufficient (the tests above ran past the 10 s grace period since m-3 was
    created), nor any other warning in the namespace."""
    ns = "v18-once"
    wait_bound(core_v1, v18, ns, ["m-3"])
    sched = scheduler_events(core_v1, ns, "m-3")
    assert reasons(sched) == ["Scheduled"]
    assert sched[0]["message"].startswith("Successfully assigned v18-once/m-3 to node-")
    assert len(core_v1.list_namespaced_pod(ns).items) == 2  # m-0 and m-3: 2 of min 3
    # the one warning is the loss of m-1 and m-2 (streams/core/lost.py), on m-0 at least
    for name in ("m-0", "m-3"):
        assert {e["reason"] for e in gangstate_events(core_v1, ns, name)
                if e["type"] == "Warning"} <= {"GangMembersLost"}, name
    lost = [e for e in gangstate_events(core_v1, ns, "m-0") if e["reason"] == "GangMembersLost"]
    assert len(lost) == 1 and lost[0]["message"].startswith(
        f"gang {ns}/m lost members after it was scheduled: m-1 and m-2 deleted; "), lost
    out = explain(v18, f"{ns}/m-3")
    assert explain_fields(out)["Held at"] == "<none>"
    assert "GangMembersInsufficient" not in out
    record_scenario(core_v1, ns, v18)


def test_once_satisfied_replacement_that_does_not_fit_fails_alone(
        v18: Chain, core_v1: client.CoreV1Api) -> None:
    """Once-satisfied, and the replacement m-3 asks 100 cpu of 8-cpu nodes: it passes
    PreEnqueue and BeforePreFilter without gang checks (K core/core.go:213-216, 301-304), fails
    Filter on its own, and AfterPostFilter rejects no gang for a once-satisfied group
    (core.go:372-374): the scheduler's Events on m-3 are its own fit error, never a gang
    rejection. gangstate warns no gang hold (2 of min-available 3 is no hold for such a
    group) and starts no gang failure episode; explain says the pod is scheduled on its own and
    held at Filter by its own fit error."""
    ns = "v18-once-big"
    try:
        sched = wait_for("the scheduler's FailedScheduling on v18-once-big/m-3",
                         lambda: scheduler_events(core_v1, ns, "m-3"), SETTLE)
        assert set(reasons(sched)) == {"FailedScheduling"}
        for e in sched:
            assert e["message"].startswith("0/2 nodes are available: 2 Insufficient cpu."), e
            assert "Gang" not in e["message"], e
        # the grace period has long passed since m-3 was created (the tests above waited it)
        # no warning but the loss of m-1 and m-2 (streams/core/lost.py): never stranded,
        # never a gang failure
        for p in core_v1.list_namespaced_pod(ns).items:
            assert {e["reason"] for e in gangstate_events(core_v1, ns, p.metadata.name)
                    if e["type"] == "Warning"} <= {"GangMembersLost"}, p.metadata.name
        out = explain(v18, f"{ns}/m-3")
        assert explain_fields(out)["Held at"] == "Filter", out
        assert ("  GangOnceSatisfied: gang v18-once-big/m was once satisfied (a member was "
                "bound) and its match policy is once-satisfied: koord-scheduler v1.8.0 "
                "schedules its later pods one by one, without gang checks\n") in out, out
        assert "  PodUnschedulable: the pod's own last attempt failed: " in out, out
        assert "; no other member has to fit with it\n" in out, out
        record_scenario(core_v1, ns, v18)
    finally:
        delete_and_record(core_v1, v18.settings, ns, ["m-3"])  # end its retries


# ---------------------------------------------------------------------------------------------
# (b) a PodGroup without minMember (rule S27)
# ---------------------------------------------------------------------------------------------

def test_podgroup_without_min_member_is_never_held(
        v18: Chain, core_v1: client.CoreV1Api, custom_objects: client.CustomObjectsApi) -> None:
    """``spec.minMember`` is ``omitempty``: absent reads as 0 (K core/gang.go:193-197); the
    basic check 2 >= 0 passes and Permit's 0 waiting >= 0 too: both pods are bound; gangstate
    says the gang of minMember 0 is scheduled and warns nothing. (In one CI run of about ten,
    pg-1 was refused at PreEnqueue behind the representative pg-0 and, once pg-0 was bound,
    nothing retried it; gangstate told it ``GangMembersStranded`` after 20 s. The test then
    does what that Event advises, creates it again, and asks the same of the new pod.)"""
    ns = "v18-nomin"
    text = "gang v18-nomin/pg is scheduled: 2 of minMember 0 pods bound"

    def bound_or_stranded(name: str) -> str | None:
        if node_of(core_v1, ns, name):
            return "bound"
        told = {e["reason"] for e in gangstate_events(core_v1, ns, name)}
        return "stranded" if "GangMembersStranded" in told else None

    for name in ("pg-0", "pg-1"):
        if wait_for(f"{ns}/{name} bound or told stranded", lambda: bound_or_stranded(name),
                    SETTLE, describe=lambda: describe(core_v1, ns, v18)) == "stranded":
            delete_pods(core_v1, ns, [name])
            wait_for(f"{name} gone", lambda: name not in {
                p.metadata.name for p in core_v1.list_namespaced_pod(ns).items}, 30)
            create(core_v1, custom_objects, [pg_member(ns, name)])
    for name in ("pg-0", "pg-1"):
        uid = core_v1.read_namespaced_pod(name, ns).metadata.uid
        evs = wait_for(f"gangstate GangScheduled on {ns}/{name}: {text}", lambda: (
            lambda evs: evs if [e["message"] for e in evs
                                if e["reason"] == "GangScheduled"] == [text] else None)(
            gangstate_events(core_v1, ns, name, uid)), SETTLE,
            describe=lambda: describe(core_v1, ns, v18))
        # a pod refused at PreEnqueue got no Event: the one created again has its own only
        assert reasons(scheduler_events(core_v1, ns, name)) == ["Scheduled"], name
        assert [e for e in evs if e["type"] == "Warning"] == []
    fields = explain_fields(explain(v18, f"{ns}/pg-0"))
    assert fields["Gang"].startswith("v18-nomin/pg (Scheduled: 2 of minMember 0 pods, 2 bound")
    record_scenario(core_v1, ns, v18)


# ---------------------------------------------------------------------------------------------
# (d) a groups list that omits the gang itself (rule P6)
# ---------------------------------------------------------------------------------------------

def race_refusals(chain: Chain) -> int:
    """How many times the scheduler refused ``v18-groups/a-0`` in the race of its Pod handlers
    (:data:`RACE_REFUSALS`) so far."""
    return sum(1 for line in scheduler_log_lines(chain.cluster, "v18-groups")
               if any(r in line for r in RACE_REFUSALS))


def test_groups_without_the_gang_itself_skip_its_own_count(
        v18: Chain, core_v1: client.CoreV1Api, custom_objects: client.CustomObjectsApi) -> None:
    """Gang a (min-available 2, one pod a-0) lists only ``v18-groups/b`` in its groups: its
    gang group is [b] and the basic check runs over that list only (K core/core.go:247-264),
    so a's own 1 < 2 is never checked. Match policy waiting-and-running keeps the
    once-satisfied shortcut out of it (a shares the GangGroupInfo ``v18-groups/b`` with b,
    which is once satisfied: K core/gang_cache.go:141-146); Permit checks the gangs of a's
    group, i.e. b, which is valid for Permit (once satisfied, gang.go:567-568): a-0 is bound
    with 1 of min-available 2. (When a-0's PreEnqueue runs before the gang cache saw it, it is
    refused for that alone and never retried; the test then creates it again, as its controller
    would.) gangstate names the groups list that omits the gang, and warns no hold."""
    ns = "v18-groups"
    races = 0  # the namespace is new: every race refusal in the log is a-0's
    for attempt in range(8):
        if attempt:  # it lost the race of the two Pod handlers (RACE_REFUSALS): create it again
            races = race_refusals(v18)
            delete_pods(core_v1, ns, ["a-0"])
            wait_for("a-0 gone", lambda: len(core_v1.list_namespaced_pod(ns).items) == 1, 30)
            create(core_v1, custom_objects, [groups_a0()])
        try:
            wait_for("a-0 bound", lambda: node_of(core_v1, ns, "a-0"), 8.0, interval=0.5)
            break
        except pytest.fail.Exception:
            if race_refusals(v18) == races:  # not refused, only slow (a loaded machine)
                wait_for("a-0 bound", lambda: node_of(core_v1, ns, "a-0"), 60.0, interval=0.5,
                         describe=lambda: describe(core_v1, ns, v18))
                break
    else:
        pytest.fail("a-0 lost the race of the Pod handlers 8 times\n" + describe(core_v1, ns, v18))
    # never refused on its own count: no basic check of the scheduler ever named a-0
    assert not [line for line in scheduler_log_lines(v18.cluster, ns)
                if "basic check" in line and "podName: v18-groups/a-0" in line]
    assert reasons(scheduler_events(core_v1, ns, "a-0")) == ["Scheduled"]
    omits = ('gang v18-groups/a: groups ["v18-groups/b"] does not list the gang itself; the '
             'scheduler uses the list as written, so v18-groups/a is not a member of its own '
             'gang group')
    # the Events of this a-0 (kubectl describe's view), not of those the race retry deleted
    uid = core_v1.read_namespaced_pod("a-0", ns).metadata.uid
    events = wait_gangstate_reasons(core_v1, v18, ns, "a-0", {"GangSpecInvalid"}, uid=uid)
    assert messages(events, "GangSpecInvalid") == [omits]
    assert [e["reason"] for e in events if e["type"] == "Warning"] == ["GangSpecInvalid"]
    assert explain_fields(explain(v18, f"{ns}/a-0"))["Held at"] == "<none>"
    record_scenario(core_v1, ns, v18)


def test_a_gang_refused_while_its_group_did_not_exist_is_not_retried(
        v18: Chain, core_v1: client.CoreV1Api, local_cluster: Any) -> None:
    """a-0's gang group is [b] alone; when a-0 reached PreEnqueue gang b did not exist:
    refused with ``memberGangs [v18-groups-late/b] doesn't exists`` (K core/core.go:252-255,
    266-267), no Event. b-0 then came and was bound; its add activates only b-0
    (core/gang_cache.go:153-165) and its round hands out the pending pods of gang b only
    (NextPod walks the group of b, core.go:164-179): nothing retries a-0 (coscheduling.go:109-111,
    KS scheduler.go:480-487), which stays Pending although every check would now pass it."""
    ns = "v18-groups-late"
    wait_bound(core_v1, v18, ns, ["b-0"])
    assert_stays_pending(core_v1, ns, ["a-0"], 5.0)
    assert scheduler_log_matches(local_cluster, (
        rf'"PreEnqueue failed" err="gangGroup \[{ns}/b\] basic check: memberGangs \[{ns}/b\] '
        rf"doesn't exists, current gang: {ns}/a, podName: {ns}/a-0\" pod=\"{ns}/(a-0)\""))
    omits = (f'gang {ns}/a: groups ["{ns}/b"] does not list the gang itself; the scheduler '
             f'uses the list as written, so {ns}/a is not a member of its own gang group')
    events = wait_gangstate_reasons(core_v1, v18, ns, "a-0", {"GangSpecInvalid"})
    assert messages(events, "GangSpecInvalid") == [omits]
    record_scenario(core_v1, ns, v18)


# ---------------------------------------------------------------------------------------------
# (c) a PodGroup deleted while its pods remain (rule M5)
# ---------------------------------------------------------------------------------------------

def test_podgroup_deleted_while_its_pods_remain(
        v18: Chain, core_v1: client.CoreV1Api, custom_objects: client.CustomObjectsApi) -> None:
    """The PodGroup delete removed gang v18-pgdel/pg with its children (K
    core/gang_cache.go:295-310): the two pods, refused at PreEnqueue before (2 < 3), stay
    Pending with no Event. Recreating the PodGroup (minMember 3) starts a gang with no children
    (gang_cache.go:124-149 only adds a pod on its own add/update), so nothing is retried; an
    update of each pod (a label) re-adds it as a child (onPodUpdate, gang_cache.go:177-190)
    but does not retry it either: Coscheduling registers no cluster event
    (coscheduling.go:109-111), so kube-scheduler v1.35.2 requeues a pod it refused on no
    event, its own update included (KS scheduler.go:480-487,
    backend/queue/scheduling_queue.go:1063-1081). A third pod makes 3 children: its add
    activates it (gang_cache.go:153-165), its round hands out the two others
    (core.go:150-190) and all three are bound."""
    ns = "v18-pgdel"
    names = ["pg-0", "pg-1"]
    assert_stays_pending(core_v1, ns, names, 3.0)
    deleted = {name: explain(v18, f"{ns}/{name}") for name in names}
    # the hold warning of the pods left without a gang (the PodGroup was deleted in the fixture,
    # more than the 10 s grace period ago by now)
    events_at_deletion = {name: wait_gangstate_reasons(core_v1, v18, ns, name,
                                                       {"GangNotInitialized"})
                          for name in names}
    # the PodGroup comes back: its gang has no children yet
    create_podgroup(custom_objects, ns, podgroup(ns, "pg", 3))
    assert_stays_pending(core_v1, ns, names, 3.0)
    recreated = {name: explain(v18, f"{ns}/{name}") for name in names}
    # each pod's update re-adds it as a child; 2 < 3, and nothing retries them anyway
    for name in names:
        core_v1.patch_namespaced_pod(name, ns, {"metadata": {"labels": {"touched": "yes"}}})
    assert_stays_pending(core_v1, ns, names, 3.0)
    readded = {name: explain(v18, f"{ns}/{name}") for name in names}
    # a third pod: activated on its add, its round takes the other two along
    create(core_v1, custom_objects, [pg_member(ns, "pg-2")])
    wait_bound(core_v1, v18, ns, ["pg-0", "pg-1", "pg-2"])
    scheduled = "gang v18-pgdel/pg is scheduled: 3 of minMember 3 pods bound"
    for name in ("pg-0", "pg-1", "pg-2"):
        wait_message(core_v1, v18, ns, name, "GangScheduled", scheduled)
        assert reasons(scheduler_events(core_v1, ns, name)) == ["Scheduled"]
    record_scenario(core_v1, ns, v18)
    # what gangstate explained at each step (asserted last, so the scheduler's side above is
    # checked even while gangstate's explanation is wrong): the two pods left without a gang,
    # then a gang of 0 counted children (the 2 dropped pods count again only from their next
    # event), then 2 of minMember 3
    dropped = ("gang v18-pgdel/pg was removed from the scheduler's gang cache with its PodGroup "
               "pg; its 2 remaining pods are held at PreEnqueue (can't find gang) until the "
               "PodGroup exists again and each pod is created again")
    # (the rest of this message says the dropped pods count again only once created again:
    # an update re-adds them too, K core/gang_cache.go:177-190, as the next step shows)
    uncounted = ("gang v18-pgdel/pg has 0 of minMember 3 pods as the scheduler counts them: 2 "
                 "pods were dropped from the gang with its deleted PodGroup")
    short = ("gang v18-pgdel/pg has 2 of minMember 3 pods; scheduling is held at PreEnqueue "
             "until 1 more exists")
    for name in names:
        for step, out, text in (("deleted", deleted[name], f"GangNotInitialized: {dropped}"),
                                ("recreated", recreated[name],
                                 f"GangMembersInsufficient: {uncounted}"),
                                ("re-added", readded[name], f"GangMembersInsufficient: {short}")):
            assert explain_fields(out)["Held at"].startswith("PreEnqueue"), (step, out)
            assert f"  {text}" in out, (step, out)
        assert ("  - create PodGroup v18-pgdel/pg again (scheduling.sigs.k8s.io/v1alpha1, with "
                "spec.minMember), then delete the gang's pods so that their controller creates "
                "them again: the scheduler forgot them with the old PodGroup and runs PreEnqueue "
                "again only for a pod being created\n") in deleted[name], deleted[name]
        assert ("  - delete this pod so that its controller creates it again: PodGroup pg was "
                "created again, but the scheduler forgot the pod with the old one and runs "
                "PreEnqueue again only for a pod being created\n") in recreated[name], \
            recreated[name]
        assert dropped in messages(events_at_deletion[name], "GangNotInitialized"), \
            events_at_deletion[name]


# ---------------------------------------------------------------------------------------------
# (e) pods the gang checks would pass, left behind by the round (rules P7, P8)
# ---------------------------------------------------------------------------------------------

def late_pg_split(core: client.CoreV1Api) -> tuple[list[str], list[str]]:
    """``(bound, pending)`` pod names of ``v18-late-pg``."""
    pods = core.list_namespaced_pod("v18-late-pg").items
    bound = sorted(p.metadata.name for p in pods if p.spec.node_name)
    pending = sorted(p.metadata.name for p in pods if not p.spec.node_name)
    return bound, pending


def test_podgroup_created_after_its_pods_schedules_min_member_and_strands_the_rest(
        v18: Chain, core_v1: client.CoreV1Api) -> None:
    """3 pods name PodGroup pg before it exists: each is refused at PreEnqueue (``gang has not
    init``, K core/core.go:209-212). The PodGroup (minMember 2) makes the gang worth a requeue
    and activates ONE child (K core/gang_cache.go:236-249, ``pickSomeChildren``); that pod is
    the representative, opens the round, NextPod hands out one more member (core.go:150-190),
    Permit sees 2 waiting >= 2 and the round succeeds: exactly 2 pods are bound. The third is
    never attempted and, refused before, is not retried (Coscheduling registers no cluster
    event: coscheduling.go:109-111, KS scheduler.go:480-487) until kube-scheduler's 5-minute
    flush of unschedulable pods (KS backend/queue/scheduling_queue.go:942-958): it stays
    Pending with no Event although the gang checks would now pass it (once satisfied)."""
    ns = "v18-late-pg"
    wait_for("2 pods of v18-late-pg bound", lambda: len(late_pg_split(core_v1)[0]) == 2, 60,
             describe=lambda: describe(core_v1, ns, v18))
    bound, pending = late_pg_split(core_v1)
    assert_stays_pending(core_v1, ns, pending, 5.0)
    assert late_pg_split(core_v1) == (bound, pending)
    scheduled = "gang v18-late-pg/pg is scheduled: 2 of minMember 2 pods bound"
    for name in bound + pending:
        wait_message(core_v1, v18, ns, name, "GangScheduled", scheduled)
    for name in bound:
        assert reasons(scheduler_events(core_v1, ns, name)) == ["Scheduled"]
    record_scenario(core_v1, ns, v18)


@pytest.mark.parametrize("case", ["v18-late-pg", "v18-groups-late"])
def test_stranded_pod_is_explained_as_held_at_preenqueue(v18: Chain, core_v1: client.CoreV1Api,
                                                         case: str) -> None:
    """The pods left behind above are held: PreEnqueue refused them (gang not initialised;
    a gang of the group missing) and nothing requeues them, so ``explain`` must say they are
    held at PreEnqueue, not that no gang condition holds them or that a round will hand them
    out."""
    pending = late_pg_split(core_v1)[1] if case == "v18-late-pg" else ["a-0"]
    assert len(pending) == 1 and node_of(core_v1, case, pending[0]) is None
    # told STRANDED_SECONDS (20 s here) after a round ran (or after the hold ended, for a gang
    # outside its own group): streams/core/decide.py stranded_due
    events = wait_gangstate_reasons(core_v1, v18, case, pending[0], {"GangMembersStranded"})
    assert [e["message"].split(": ", 1)[1].startswith(f"{pending[0]} was refused at PreEnqueue")
            for e in events if e["reason"] == "GangMembersStranded"] == [True]
    out = explain(v18, f"{case}/{pending[0]}")
    assert explain_fields(out)["Held at"].startswith("PreEnqueue"), out
    assert "GangMembersStranded" in out, out
    record_scenario(core_v1, case, v18)
