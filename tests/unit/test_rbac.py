"""The shipped RBAC (``deploy/kubernetes/rbac.yaml``) against the calls the sink and the watcher
make, on the TEST API SERVER with RBAC-like authorisation (``ApiServerDouble.allow_only``).

The rules come from the manifests as shipped: the ServiceAccount named by ``sink.yaml`` and
``watch.yaml``, the (Cluster)RoleBindings naming it, and their roles' rules. The sink must write
its Events in both API modes and the watcher must list and watch, with nothing refused; the set
of (API group, resource, verb) actually used must equal the set granted (least privilege); and a
403 must reach the operator: one ERROR line naming the verb, resource, API group and namespace,
and a counter, never a silent drop.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from streams.events.sink import Forbidden, GivenUp, request_attributes
from tests.doubles.apiserver import ApiServerDouble, RequestAttributes, eventually
from tests.doubles.apiserver import request_attributes as server_request_attributes
from tests.unit.test_event_sink import diagnostics_of, make_sink
from producers.watch.watching import WatchConfig
from tests.unit.test_watch import FAST, MemoryPublisher, SETTINGS, pod, run_watcher
from tests.unit.test_watch_native import native_kinds  # noqa: F401 - a fixture

#: the watcher as shipped: with the Node and bound-pod streams of the shortfall
SHIPPED = WatchConfig(**{**FAST.__dict__, "capacity": True})

MANIFESTS = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"

OLD_RULES = [  # rbac.yaml at commit 77fec44: no get on events in either API group
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    {"apiGroups": ["scheduling.sigs.k8s.io"], "resources": ["podgroups"],
     "verbs": ["list", "watch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch", "create", "patch"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
]


def manifests() -> list[dict[str, Any]]:
    """Every object of every ``deploy/kubernetes/*.yaml``."""
    return [doc for path in sorted(MANIFESTS.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]


def service_account(component: str) -> tuple[str, str]:
    """``(namespace, name)`` of the ServiceAccount the Deployment ``gangstate-<component>``
    runs as."""
    (deployment,) = [d for d in manifests() if d["kind"] == "Deployment"
                     and d["metadata"]["name"] == f"gangstate-{component}"]
    return (deployment["metadata"]["namespace"],
            deployment["spec"]["template"]["spec"].get("serviceAccountName", "default"))


def rules_for(namespace: str, name: str) -> list[dict[str, Any]]:
    """The PolicyRules bound to ServiceAccount ``namespace/name`` by the manifests'
    ClusterRoleBindings (a RoleBinding would grant them in one namespace only, which the test
    API server does not model: none is shipped)."""
    docs = manifests()
    roles = {d["metadata"]["name"]: d.get("rules") or [] for d in docs
             if d["kind"] == "ClusterRole"}
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding")], \
        "namespaced RBAC is shipped: teach rules_for about namespaces"
    rules: list[dict[str, Any]] = []
    for binding in (d for d in docs if d["kind"] == "ClusterRoleBinding"):
        if {"kind": "ServiceAccount", "name": name, "namespace": namespace} in [
                {k: s.get(k) for k in ("kind", "name", "namespace")}
                for s in binding.get("subjects") or []]:
            rules += roles[binding["roleRef"]["name"]]
    return rules


def granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """``(API group, resource, verb)`` of every combination the rules grant."""
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]}


def used(server: ApiServerDouble) -> set[tuple[str, str, str]]:
    """``(API group, resource, verb)`` of every request the server received."""
    out = set()
    for method, path, query in server.requests:
        attrs = server_request_attributes(method, path, query)
        assert attrs is not None, path
        out.add((attrs.group, attrs.resource, attrs.verb))
    return out


def user(component: str) -> str:
    namespace, name = service_account(component)
    return f"system:serviceaccount:{namespace}:{name}"


@pytest.fixture
def server(native_kinds: None) -> Iterator[ApiServerDouble]:
    """The test API server serving Koordinator's PodGroups and Kubernetes' own
    ``scheduling.k8s.io`` APIs (``test_watch_native.native_kinds``), as a v1.37 cluster with
    both schedulers does."""
    with ApiServerDouble(bookmark_interval=0.1) as s:
        yield s


NATIVE_GRANTS = {("scheduling.k8s.io", resource, verb)
                 for resource in ("podgroups", "compositepodgroups", "workloads")
                 for verb in ("list", "watch")}
"""Kubernetes' own gangs: list and watch of the native PodGroups, CompositePodGroups and
Workloads (granted whether the cluster serves them or not: a request is authorized before the
API server finds its API missing)."""
WATCHES = 11
"""The shipped watcher's open watches: pods of koord-scheduler and of default-scheduler,
Koordinator's PodGroups, the 3 native APIs, Nodes, bound pods, 3 Event reasons (Preempted among
them)."""


def test_each_component_has_its_own_least_privilege_service_account() -> None:
    """One ServiceAccount per component: the watch may list and watch, the sink may get,
    create and patch Events, the worker may do nothing (no binding names it)."""
    assert service_account("watch") == ("gangstate", "gangstate-watch")
    assert service_account("sink") == ("gangstate", "gangstate-sink")
    assert service_account("worker") == ("gangstate", "gangstate-worker")
    assert granted(rules_for(*service_account("watch"))) == {
        ("", "pods", "list"), ("", "pods", "watch"),
        ("", "nodes", "list"), ("", "nodes", "watch"),
        ("scheduling.sigs.k8s.io", "podgroups", "list"),
        ("scheduling.sigs.k8s.io", "podgroups", "watch"),
        ("", "events", "list"), ("", "events", "watch")} | NATIVE_GRANTS
    assert granted(rules_for(*service_account("sink"))) == {
        ("", "events", "get"), ("", "events", "create"), ("", "events", "patch"),
        ("events.k8s.io", "events", "get"), ("events.k8s.io", "events", "create"),
        ("events.k8s.io", "events", "patch")}
    assert granted(rules_for(*service_account("worker"))) == set()


@pytest.mark.parametrize("api,store", [("core/v1", "events"),
                                       ("events.k8s.io/v1", "events.k8s.io")])
def test_the_sink_writes_its_events_with_the_shipped_rbac(server: ApiServerDouble, api: str,
                                                          store: str) -> None:
    server.allow_only(rules_for(*service_account("sink")), user("sink"))
    sink = make_sink(server, api=api)
    for diagnostic in diagnostics_of("spec-conflict"):  # GET, POST and PATCH
        sink.write(diagnostic)
    assert server.forbidden == []
    events = server.objects(store)
    # rl-rollout-0..2 are told twice (one Event each, updated), rl-rollout-3 once
    assert sorted((e.get("involvedObject", e.get("regarding"))["name"],
                   e.get("count") or e.get("series", {}).get("count", 1)) for e in events) == [
        ("rl-rollout-0", 2), ("rl-rollout-1", 2), ("rl-rollout-2", 2), ("rl-rollout-3", 1)]
    assert {method for method, _, _ in server.requests} == {"GET", "POST", "PATCH"}


def test_the_sink_wrote_nothing_with_the_old_rbac(server: ApiServerDouble,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """What the real cluster showed: every first write of an Event starts with a GET by
    name, which the old rules refuse."""
    server.allow_only(OLD_RULES, user("sink"))
    sink = make_sink(server)
    with caplog.at_level(logging.DEBUG, logger="streams.events.sink"):
        results = [r for d in diagnostics_of("spec-conflict") for r in sink.write(d)]
    assert server.objects("events") == []
    assert {r.reason for r in results if isinstance(r, GivenUp)} == {"api-403"}
    assert server.forbidden[0] == RequestAttributes(
        "get", "", "events", "research", server.forbidden[0].name)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert errors[0].startswith("the API server forbids the sink to get events (API group '') "
                                "in namespace 'research'")
    assert 'User "system:serviceaccount:gangstate:gangstate-sink" cannot get resource "events" ' \
           'in API group "" in the namespace "research"' in errors[0]


def test_the_watcher_lists_and_watches_with_the_shipped_rbac(server: ApiServerDouble) -> None:
    server.allow_only(rules_for(*service_account("watch")), user("watch"))
    server.apply(pod("w-0"))
    publisher = MemoryPublisher()
    watcher = run_watcher(server, publisher, SHIPPED)
    try:
        eventually(lambda: server.open_watches() == WATCHES)
        server.apply(pod("w-1"))
        eventually(lambda: [r["object"]["metadata"]["name"]
                            for _, r in publisher.on(SETTINGS.topics.gang_events)
                            if r["schema"] == "gangstate.kube/v1"] == ["w-0", "w-1"])
    finally:
        watcher.stop()
    assert server.forbidden == []
    assert used(server) == {("", "pods", "list"), ("", "pods", "watch"),
            ("", "nodes", "list"), ("", "nodes", "watch"),
                            ("scheduling.sigs.k8s.io", "podgroups", "list"),
                            ("scheduling.sigs.k8s.io", "podgroups", "watch"),
                            ("", "events", "list"), ("", "events", "watch")} | NATIVE_GRANTS


def test_every_granted_verb_is_used_and_none_is_refused(server: ApiServerDouble) -> None:
    """Least privilege, both ways: the watcher and the sink in both API modes, run against one
    server, use exactly what the shipped rules grant them."""
    server.allow_only(rules_for(*service_account("watch")), user("watch"))
    publisher = MemoryPublisher()
    watcher = run_watcher(server, publisher, SHIPPED)
    try:
        eventually(lambda: server.open_watches() == WATCHES)
    finally:
        watcher.stop()
    assert server.forbidden == []
    assert used(server) == granted(rules_for(*service_account("watch")))
    server.requests.clear()
    server.allow_only(rules_for(*service_account("sink")), user("sink"))
    for api in ("core/v1", "events.k8s.io/v1"):
        sink = make_sink(server, api=api)
        for diagnostic in diagnostics_of("spec-conflict"):
            sink.write(diagnostic)
    assert server.forbidden == []
    assert used(server) == granted(rules_for(*service_account("sink")))


@pytest.mark.parametrize("refused,count,written", [
    # spec-conflict: 2 diagnostics, of 3 then 4 pods: 7 writes, each starting with a GET by
    # name (a refused GET caches nothing, so every occurrence asks again); nothing is written
    ("get", 7, 0),
    # the GETs answer 404 (absent, cached), then each of the 7 creates is refused
    ("create", 7, 0),
    # the first diagnostic creates 3 Events; the second patches them (3 refused) and creates
    # rl-rollout-3's
    ("patch", 3, 4),
])
def test_a_forbidden_verb_is_logged_once_and_counted(server: ApiServerDouble,
                                                     caplog: pytest.LogCaptureFixture,
                                                     refused: str, count: int,
                                                     written: int) -> None:
    rules = [{**r, "verbs": [v for v in r["verbs"] if v != refused]}
             for r in rules_for(*service_account("sink"))]
    server.allow_only(rules, user("sink"))
    sink = make_sink(server)
    with caplog.at_level(logging.DEBUG, logger="streams.events.sink"):
        for diagnostic in diagnostics_of("spec-conflict"):
            sink.write(diagnostic)
    assert len(server.objects("events")) == written
    assert len(server.forbidden) == count and {a.verb for a in server.forbidden} == {refused}
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].startswith(
        f"the API server forbids the sink to {refused} events (API group '') in namespace "
        f"'research'")
    value = sink.metrics.registry.get_sample_value(
        "gangstate_sink_api_forbidden_total",
        {"verb": refused, "group": "", "resource": "events", "namespace": "research"})
    assert value == count
    assert sink.metrics.value("dropped", "api-403") == count
    again = [r for r in caplog.records if r.levelno == logging.DEBUG
             and r.getMessage().startswith("forbidden again")]
    assert len(again) == count - 1


def test_a_forbidden_request_is_not_retried(server: ApiServerDouble) -> None:
    server.fail_next(403, method="GET")
    sleeps: list[float] = []
    sink = make_sink(server, sleep=sleeps.append)
    first = diagnostics_of("invalid-spec-values")[0]  # one pod: one Event
    (result,) = sink.write(first)
    assert isinstance(result, GivenUp) and result.reason == "api-403" and sleeps == []
    assert [m for m, _, _ in server.requests] == ["GET"]
    sink.write(first)  # the refusal was not cached: the next write asks again, and goes on
    assert [m for m, _, _ in server.requests] == ["GET", "GET", "POST"]
    assert len(server.objects("events")) == 1


@pytest.mark.parametrize("method,path,expected", [
    ("GET", "/api/v1/namespaces/team-a/events/p.0123", ("get", "", "events", "team-a")),
    ("POST", "/api/v1/namespaces/team-a/events", ("create", "", "events", "team-a")),
    ("PATCH", "/apis/events.k8s.io/v1/namespaces/ns/events/p.0123",
     ("patch", "events.k8s.io", "events", "ns")),
    ("GET", "/apis/events.k8s.io/v1/namespaces/ns/events", ("list", "events.k8s.io", "events",
                                                            "ns")),
])
def test_request_attributes_name_requests_as_rbac_does(method: str, path: str,
                                                       expected: tuple[str, ...]) -> None:
    assert request_attributes(method, path) == expected
    attrs = server_request_attributes(method, path, {})
    assert attrs is not None and (attrs.verb, attrs.group, attrs.resource,
                                  attrs.namespace) == expected


def test_forbidden_is_a_give_up_with_the_403_reason() -> None:
    err = Forbidden("get", "", "events", "ns", "GET /api/v1/namespaces/ns/events/x: no")
    assert err.reason == "api-403" and str(err) == "api-403: GET /api/v1/namespaces/ns/events/x: no"


def test_the_shipped_rbac_on_a_cluster_without_the_native_apis() -> None:
    """Without ``GenericWorkload`` the native APIs are not served: the shipped rules are
    still asked first (kube-apiserver authorizes before it finds the API missing, as this
    double does), the 404 is a missing API (no refusal, no failure), and the watch goes on."""
    with ApiServerDouble(bookmark_interval=0.1) as bare:
        bare.allow_only(rules_for(*service_account("watch")), user("watch"))
        bare.apply(pod("w-0"))
        publisher = MemoryPublisher()
        watcher = run_watcher(bare, publisher, SHIPPED)
        try:
            eventually(lambda: [r["object"]["metadata"]["name"]
                                for _, r in publisher.on(SETTINGS.topics.gang_events)
                                if r["schema"] == "gangstate.kube/v1"] == ["w-0"])
        finally:
            watcher.stop()
        assert bare.forbidden == [] and watcher.failure is None
        assert {("scheduling.k8s.io", resource, "list")
                for resource in ("podgroups", "compositepodgroups", "workloads")} <= used(bare)
        assert watcher.metrics.value("gangstate_watch_api_missing", resource="workloads",
                                     api="scheduling.k8s.io/v1beta1") == 1


def test_the_rules_before_the_native_apis_end_the_watch_with_one_line(
        server: ApiServerDouble) -> None:
    """The ClusterRole as shipped before Kubernetes' own gangs (no ``scheduling.k8s.io``
    rule): the native lists are refused, whether the cluster serves them or not, and after
    ``refused_for`` the watch ends with the one line naming what to grant."""
    old = [r for r in rules_for(*service_account("watch"))
           if r["apiGroups"] != ["scheduling.k8s.io"]]
    server.allow_only(old, user("watch"))
    from producers.watch.watching import Watcher
    from tests.unit.test_watch import api_client

    watcher = Watcher(api_client(server), MemoryPublisher(), SETTINGS,
                      WatchConfig(**{**SHIPPED.__dict__, "refused_for": 0.5})).start()
    try:  # (never synced: the native streams are refused)
        eventually(lambda: watcher.failure is not None)
    finally:
        watcher.stop()
    assert {a.group for a in server.forbidden} == {"scheduling.k8s.io"}
    assert "forbids listing " in watcher.failure
    assert "(API group 'scheduling.k8s.io') cluster-wide (403 Forbidden); grant the watch's " \
           "user or ServiceAccount list and watch on it" in watcher.failure
