"""The watch producer and Kubernetes' own gang scheduling (v1.37, kube-scheduler's
``GangScheduling``): routing of native gang members, PodGroups, CompositePodGroups and Workloads
(pure, ``GangRouter``), and the shell listing and watching ``scheduling.k8s.io`` against the
TEST API SERVER, whose store is given the three native APIs here (``native_kinds``), or left
without them as a cluster without the ``GenericWorkload`` feature gate is.

Texts of kube-scheduler v1.37.2 as ``tests/unit/test_scheduler_events.py`` builds them.
"""

from __future__ import annotations

import logging
from typing import Any, Iterator

import pytest
from kubernetes import client

import tests.doubles.apiserver as apiserver
from producers.watch.routing import gang_group_of
from producers.watch.watching import Drop, GangRouter, Publish, WatchConfig
from streams.core.timefmt import parse_time
from streams.wire.traces import fold_lines
from tests.doubles.apiserver import ApiServerDouble, eventually
from tests.fixtures.builders import kube_pod
from tests.unit.test_watch import FAST, SETTINGS, MemoryPublisher, api_client, run_watcher

T0 = parse_time("2026-11-02T09:00:00Z")
GANG = "team-a/llm@kube-scheduler"
NATIVE = "scheduling.k8s.io/v1beta1"
COMPOSITE = "scheduling.k8s.io/v1alpha3"

NATIVE_KINDS = {
    "native-podgroups": apiserver._Kind("native-podgroups", f"/apis/{NATIVE}", "podgroups",
                                        "PodGroup", NATIVE, False),
    "compositepodgroups": apiserver._Kind("compositepodgroups", f"/apis/{COMPOSITE}",
                                          "compositepodgroups", "CompositePodGroup", COMPOSITE,
                                          False),
    "workloads": apiserver._Kind("workloads", f"/apis/{NATIVE}", "workloads", "Workload",
                                 NATIVE, False),
}
"""The three native APIs as stores of the test API server (custom resources: list items carry
their kind and apiVersion), served at the paths kube-apiserver v1.37 serves them."""


@pytest.fixture
def native_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give every ``ApiServerDouble`` made in the test the native APIs (restored after)."""
    for key, kind in NATIVE_KINDS.items():
        monkeypatch.setitem(apiserver.KINDS, key, kind)


def native_pod(name: str, group: str = "llm", *, scheduler: str = "default-scheduler",
               gpu: str | None = "1", uid: str | None = "auto") -> dict[str, Any]:
    obj = kube_pod(name, "team-a", uid=f"uid-{name}" if uid == "auto" else uid,
                   rv="10" if uid == "auto" else None, scheduler=scheduler, gpu=gpu)
    obj["spec"]["schedulingGroup"] = {"podGroupName": group}
    return obj


def native_podgroup(name: str = "llm", min_count: int = 3, *, uid: str | None = "npg",
                    parent: str | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    meta: dict[str, Any] = {"name": name, "namespace": "team-a"}
    if uid:
        meta.update(uid=uid, resourceVersion="5")
    return {"apiVersion": NATIVE, "kind": "PodGroup", "metadata": meta, "spec": spec, **extra}


def koord_podgroup(name: str = "llm") -> dict[str, Any]:
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "team-a", "uid": "kpg",
                         "resourceVersion": "6"},
            "spec": {"minMember": 2}}


def scheduler_event(name: str, pod: dict[str, Any], message: str,
                    reason: str = "FailedScheduling") -> dict[str, Any]:
    """A core/v1 Event kube-scheduler's default profile writes (reportingComponent
    ``default-scheduler``: its events.k8s.io recorder's ``reportingController``)."""
    meta = pod["metadata"]
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}"},
            "involvedObject": {"kind": "Pod", "namespace": "team-a", "name": meta["name"],
                               "uid": meta.get("uid", "")},
            "reason": reason, "message": message, "type": "Warning",
            "reportingComponent": "default-scheduler", "eventTime": "2026-11-02T09:00:05Z"}


def published(actions: list[Any]) -> list[tuple[str, str, str]]:
    return [(a.key, a.record["schema"], a.record.get("resource") or a.record.get("stage"))
            for a in actions if isinstance(a, Publish)]


# ---------------------------------------------------------------------------------------------
# Routing (pure)
# ---------------------------------------------------------------------------------------------

def test_a_pod_naming_a_native_podgroup_is_routed_to_the_native_gang() -> None:
    r = GangRouter()
    assert published(r.route("pods", "ADDED", native_pod("llm-0"), None, T0)) == [
        (GANG, "gangstate.kube/v1", "pods")]
    # koord-scheduler's pods are never native members (N1): no Koordinator gang either
    assert r.route("pods", "ADDED", native_pod("k-0", scheduler="koord-scheduler"), None,
                   T0) == [Drop("no-gang")]
    # a pod of the default profile with Koordinator's gang annotation is in that gang: koord-
    # scheduler's gang cache counts every pod that names it, whatever its scheduler
    # (koordinator v1.8.0 core/core.go:138-143, core/gang_cache.go:124-150)
    annotated = kube_pod("web-0", "team-a", scheduler="default-scheduler", gang="web",
                         min_available=2)
    assert published(r.route("pods", "ADDED", annotated, None, T0)) == [
        ("team-a/web", "gangstate.kube/v1", "pods")]


def test_podgroups_of_one_name_are_two_gangs_kept_apart() -> None:
    """Koordinator's PodGroup ``llm`` and the native PodGroup ``llm`` in one namespace: two
    keys, two entries of the router's cache; deleting one leaves the other."""
    r = GangRouter()
    assert published(r.route("podgroups", "ADDED", koord_podgroup(), None, T0)) == [
        ("team-a/llm", "gangstate.kube/v1", "podgroups")]
    assert published(r.route("podgroups", "ADDED", native_podgroup(), None, T0)) == [
        (GANG, "gangstate.kube/v1", "podgroups")]
    assert sorted(r.podgroups) == ["team-a/llm", GANG]
    r.route("podgroups", "DELETED", koord_podgroup(), None, T0)
    assert list(r.podgroups) == [GANG]
    assert r.podgroups[GANG]["metadata"]["uid"] == "npg"


def test_composite_podgroups_and_workloads_are_published_under_their_ids() -> None:
    r = GangRouter()
    composite = {"apiVersion": COMPOSITE, "kind": "CompositePodGroup",
                 "metadata": {"name": "train", "namespace": "team-a", "uid": "cpg"},
                 "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 2}}}}
    workload = {"apiVersion": NATIVE, "kind": "Workload",
                "metadata": {"name": "llm", "namespace": "team-a", "uid": "wl"},
                "spec": {"podGroupTemplates": [{"name": "w", "schedulingPolicy": {
                    "gang": {"minCount": 3}}}]}}
    assert published(r.route("compositepodgroups", "ADDED", composite, None, T0)
                     + r.route("workloads", "MODIFIED", workload, None, T0)) == [
        ("team-a/composite:train@kube-scheduler", "gangstate.kube/v1", "compositepodgroups"),
        (GANG, "gangstate.kube/v1", "workloads")]


@pytest.mark.parametrize("podgroup,expected", [
    (None, GANG),
    (native_podgroup(), GANG),
    # a child of a CompositePodGroup is scheduled with its tree (streams.core.native.native_spec)
    (native_podgroup(parent="train"), "team-a/composite:train@kube-scheduler"),
    # Koordinator's annotations on a native PodGroup mean nothing to kube-scheduler
    ({**native_podgroup(), "metadata": {"name": "llm", "namespace": "team-a", "annotations": {
        "gang.scheduling.koordinator.sh/groups": '["team-a/a", "team-a/b"]'}}}, GANG),
], ids=["PodGroup not seen", "PodGroup", "child of a CompositePodGroup",
        "Koordinator's annotation ignored"])
def test_the_gang_group_of_a_native_gang(podgroup: dict[str, Any] | None, expected: str) -> None:
    assert gang_group_of(GANG, native_pod("llm-0"), podgroup) == expected


def test_kube_schedulers_events_become_cycle_records_of_the_native_gang() -> None:
    """One pod-group cycle of kube-scheduler v1.37.2 on 2 nodes of 1 GPU for a gang of 3 pods
    of 1 GPU (minCount 3): llm-2's own fit error (culprit, fit error, the cluster's room),
    the refusal of llm-0 and llm-1 which fit (GS1: no culprit), then, another time, the Permit
    timeout (T4)."""
    r = GangRouter()
    for node in ("n1", "n2"):
        r.route("nodes", "ADDED", {"metadata": {"name": node, "uid": node},
                                   "status": {"allocatable": {"nvidia.com/gpu": "1"}}},
                None, T0)
    r.route("podgroups", "ADDED", native_podgroup(), None, T0)
    pods = [native_pod(f"llm-{i}") for i in range(3)]
    for p in pods:
        r.route("pods", "ADDED", p, None, T0)
    refused = ("pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 "
               "remaining, pod group preemption: No preemption victims found for incoming "
               "preemptor")
    at = T0 + 5_000_000
    own = r.route("events", "ADDED", scheduler_event(
        "e2", pods[2], "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."), None, at)
    rejected = r.route("events", "ADDED", scheduler_event("e0", pods[0], refused), None, at)
    timeout = r.route("events", "ADDED", scheduler_event(
        "e1", pods[1], "0/1 nodes are available: 1 rejected due to timeout after waiting 5m0s "
                       "at plugin GangScheduling."), None, at)
    assert published(own + rejected + timeout) == [
        (GANG, "gangstate.kube/v1", "events"), (GANG, "gangstate.cycle/v1", "Filter"),
        (GANG, "gangstate.kube/v1", "events"), (GANG, "gangstate.cycle/v1", "PostFilter"),
        (GANG, "gangstate.kube/v1", "events"), (GANG, "gangstate.cycle/v1", "Permit")]
    cycle = own[1].record
    assert {k: cycle[k] for k in ("scheduler", "gang", "gang_group", "stage", "status", "reason",
                                  "culprit", "fit_error")} == {
        "scheduler": "default-scheduler", "gang": GANG, "gang_group": GANG,
        "stage": "Filter", "status": "Unschedulable", "reason": "Insufficient nvidia.com/gpu",
        "culprit": "team-a/llm-2",
        "fit_error": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}
    assert cycle["capacity"] == {"resource": "nvidia.com/gpu", "request": 1000,
                                 "allocatable": 2000, "free": 2000, "nodes": 2, "room": 2,
                                 "largest": 1000, "priority": 0, "room_preempting": 2}
    refusal = rejected[1].record
    assert (refusal["status"], refusal["reason"], refusal["source"]["form"]) == (
        "Rejected", "GangMinCountUnsatisfiable", "GS1")
    assert "culprit" not in refusal and "preemption" not in refusal
    assert (timeout[1].record["status"], timeout[1].record["reason"]) == (
        "Timeout", "PermitTimeout")


# ---------------------------------------------------------------------------------------------
# The shell against the test API server
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def native_server(native_kinds: None) -> Iterator[ApiServerDouble]:
    with ApiServerDouble(bookmark_interval=0.1) as s:
        yield s


def create(server: ApiServerDouble, api: str, plural: str, obj: dict[str, Any]) -> None:
    """Create a native object through the API (POST), as kubectl would."""
    group, version = api.split("/")
    client.CustomObjectsApi(api_client(server)).create_namespaced_custom_object(
        group, version, "team-a", plural, obj)


def kube_records(publisher: MemoryPublisher) -> list[tuple[str | None, str, str, str]]:
    return [(k, r["type"], r["resource"], r["object"]["metadata"]["name"])
            for k, r in publisher.on(SETTINGS.topics.gang_events)
            if r["schema"] == "gangstate.kube/v1" and r["resource"] != "events"]


def test_the_watch_lists_and_watches_kubernetes_own_gangs(native_server: ApiServerDouble) -> None:
    """Both PodGroup APIs, CompositePodGroups and Workloads, listed then watched; the pods of
    ``default-scheduler``: the folded stream holds the native gang with its 3 members and its
    PodGroup, and Koordinator's PodGroup of the same name as another gang."""
    server = native_server
    create(server, NATIVE, "workloads", {
        "apiVersion": NATIVE, "kind": "Workload", "metadata": {"name": "llm"},
        "spec": {"podGroupTemplates": [{"name": "w", "schedulingPolicy": {
            "gang": {"minCount": 3}}}]}})
    create(server, NATIVE, "podgroups", native_podgroup(uid=None))
    server.apply(koord_podgroup())
    server.apply(native_pod("llm-0", uid=None))
    publisher = MemoryPublisher()
    watcher = run_watcher(server, publisher)
    try:
        create(server, COMPOSITE, "compositepodgroups", {
            "apiVersion": COMPOSITE, "kind": "CompositePodGroup", "metadata": {"name": "train"},
            "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 1}}}})
        for name in ("llm-1", "llm-2"):
            server.apply(native_pod(name, uid=None))
        eventually(lambda: len(kube_records(publisher)) == 7)
    finally:
        watcher.stop()
    assert sorted(kube_records(publisher)) == sorted([
        (GANG, "SYNC", "workloads", "llm"), (GANG, "SYNC", "podgroups", "llm"),
        ("team-a/llm", "SYNC", "podgroups", "llm"), (GANG, "SYNC", "pods", "llm-0"),
        ("team-a/composite:train@kube-scheduler", "ADDED", "compositepodgroups", "train"),
        (GANG, "ADDED", "pods", "llm-1"), (GANG, "ADDED", "pods", "llm-2")])
    native_lists = {(path, q.get("watch", "")) for method, path, q in server.requests
                    if method == "GET" and path.startswith("/apis/scheduling.k8s.io/")}
    assert native_lists == {(f"/apis/{NATIVE}/podgroups", ""),
                            (f"/apis/{NATIVE}/podgroups", "true"),
                            (f"/apis/{COMPOSITE}/compositepodgroups", ""),
                            (f"/apis/{COMPOSITE}/compositepodgroups", "true"),
                            (f"/apis/{NATIVE}/workloads", ""),
                            (f"/apis/{NATIVE}/workloads", "true")}
    folded = fold_lines(publisher.lines(), None)
    assert not folded.errors
    assert len(folded.states[GANG].members) == 3
    assert folded.states[GANG].podgroup is not None
    assert folded.states[GANG].podgroup.uid != folded.states["team-a/llm"].podgroup.uid
    assert watcher.metrics.value("gangstate_watch_api_missing", resource="podgroups",
                                 api=NATIVE) == 0


def test_a_cluster_without_the_native_apis_is_told_once_and_looked_at_again(
        native_kinds: None, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Without ``GenericWorkload`` kube-apiserver answers 404 for ``scheduling.k8s.io``'s
    PodGroups and Workloads (and CompositePodGroups): one INFO line per API, a gauge, no
    traceback, pods watched regardless; looked for again every ``crd_recheck`` seconds
    without another line; once served, listed and watched (one line that says so)."""
    caplog.set_level(logging.INFO, logger="producers.watch.watching")
    with ApiServerDouble(bookmark_interval=0.1) as server:
        for key in NATIVE_KINDS:  # the stores exist; the paths answer 404
            monkeypatch.delitem(apiserver.KINDS, key)
        server.apply(native_pod("llm-0", uid=None))
        publisher = MemoryPublisher()
        config = WatchConfig(**{**FAST.__dict__, "crd_recheck": 0.2})
        watcher = run_watcher(server, publisher, config)
        try:
            eventually(lambda: (GANG, "SYNC", "pods", "llm-0") in kube_records(publisher))
            for resource, api in (("podgroups", NATIVE), ("compositepodgroups", COMPOSITE),
                                  ("workloads", NATIVE)):
                assert watcher.metrics.value("gangstate_watch_api_missing", resource=resource,
                                             api=api) == 1

            def asked(path: str) -> int:
                return sum(1 for _, p, _ in server.requests if p == path)

            eventually(lambda: asked(f"/apis/{NATIVE}/podgroups") >= 3)  # rechecked
            missing = [r for r in caplog.records if "is not served" in r.getMessage()]
            assert sorted((r.levelno, r.getMessage().split(":")[0]) for r in missing) == [
                (logging.INFO, "compositepodgroups.scheduling.k8s.io/v1alpha3[ns=*,]"),
                (logging.INFO, "podgroups.scheduling.k8s.io/v1beta1[ns=*,]"),
                (logging.INFO, "workloads.scheduling.k8s.io/v1beta1[ns=*,]")]
            assert "feature gate GenericWorkload" in missing[0].getMessage()
            # Koordinator's CRD is served here: not reported, its gauge 0
            assert watcher.metrics.value("gangstate_watch_podgroup_crd_missing") == 0
            # the cluster gets the APIs (gates on, kube-apiserver restarted)
            for key, kind in NATIVE_KINDS.items():
                monkeypatch.setitem(apiserver.KINDS, key, kind)
            create(server, NATIVE, "podgroups", native_podgroup(uid=None))
            eventually(lambda: (GANG, "SYNC", "podgroups", "llm") in kube_records(publisher))
            eventually(lambda: watcher.metrics.value(
                "gangstate_watch_api_missing", resource="podgroups", api=NATIVE) == 0)
        finally:
            watcher.stop()
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert len([r for r in caplog.records if "is not served" in r.getMessage()]) == 3
    assert any("is served now" in r.getMessage() and "podgroups.scheduling.k8s.io" in
               r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("args,native,podgroups", [
    ([], True, True), (["--no-native-podgroups"], False, True),
    (["--no-podgroups"], True, False)])
def test_the_watch_command_follows_both_schedulers_and_both_podgroup_apis(
        monkeypatch: pytest.MonkeyPatch, args: list[str], native: bool,
        podgroups: bool) -> None:
    """``gangstate watch`` without ``--scheduler-name`` leaves the schedulers to
    ``DEFAULT_SCHEDULERS`` (koord-scheduler and default-scheduler); ``--no-native-podgroups``
    and ``--no-podgroups`` turn off one PodGroup API each."""
    from click.testing import CliRunner

    import producers.watch.running
    from producers.watch.plan import DEFAULT_SCHEDULERS
    from streams.cli import cli

    seen: list[Any] = []
    monkeypatch.setattr(producers.watch.running, "run_watch",
                        lambda options: seen.append(options) or 0)
    result = CliRunner().invoke(cli, ["watch", "--kubeconfig", "/dev/null", *args])
    assert result.exit_code == 0, result.output
    (options,) = seen
    assert (options.scheduler_names, options.native, options.podgroups) == ((), native,
                                                                          podgroups)
    assert DEFAULT_SCHEDULERS == ("koord-scheduler", "default-scheduler")


def test_a_pod_group_preemptions_preempted_event_is_dropped_and_counted() -> None:
    """kube-scheduler v1.37.2's pod-group preemption names a PodGroup as the preemptor
    (``Preempted by podgroup <uid> on node cluster``, recorded in
    tests/data/native-v1.37.2/h-preemption): no ``gangstate.preemption/v1`` is made of it yet
    (its preemptor is no pod); it is dropped and counted, never a dead letter."""
    r = GangRouter()
    victim = native_pod("low-0", "low")
    r.route("pods", "ADDED", victim, None, T0)
    event = {**scheduler_event("low-0.p", victim,
                               "Preempted by podgroup d9bfa356-b464-4e43-88f0-6f99d7d5ff9b on "
                               "node cluster", reason="Preempted"), "type": "Normal"}
    assert r.route("events", "ADDED", event, None, T0) == [Drop("preempted-unreadable")]
