"""Contract tests of the TEST API SERVER (``tests.doubles.apiserver``), driven with the real
``kubernetes`` client: the protocol details the watch producer and the Event sink rely on."""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from tests.doubles.apiserver import ApiServerDouble, json_patch, merge_patch
from tests.fixtures.builders import kube_pod


@pytest.fixture
def server() -> Iterator[ApiServerDouble]:
    with ApiServerDouble(bookmark_interval=0.05) as s:
        yield s


def core(server: ApiServerDouble) -> client.CoreV1Api:
    return client.CoreV1Api(client.ApiClient(server.configuration()))


def pod(name: str, ns: str = "ns", scheduler: str = "koord-scheduler",
        labels: dict[str, str] | None = None) -> dict[str, Any]:
    return kube_pod(name, ns, uid=None, rv=None, scheduler=scheduler, labels=labels, phase=None)


def watch_lines(api: client.CoreV1Api, **kwargs: Any) -> list[dict[str, Any]]:
    resp = api.list_namespaced_pod("ns", watch=True, _preload_content=False,
                                   _request_timeout=(2, 5), **kwargs)
    try:
        return [json.loads(line) for line in iter_resp_lines(resp) if line]
    finally:
        resp.release_conn()


def test_resource_versions_are_one_global_counter(server: ApiServerDouble) -> None:
    first = server.apply(pod("a"))
    second = server.apply(pod("b"))
    updated = server.apply({**first, "spec": {**first["spec"], "schedulerName": "other"}})
    assert [int(o["metadata"]["resourceVersion"]) for o in (first, second, updated)] == [
        101, 102, 103]
    assert updated["metadata"]["uid"] == first["metadata"]["uid"]
    assert server.resource_version == 103


def test_chunked_list_with_selectors(server: ApiServerDouble) -> None:
    for i in range(5):
        server.apply(pod(f"p{i}", labels={"app": "x" if i % 2 else "y"}))
    server.apply(pod("q", scheduler="default-scheduler"))
    api = core(server)
    page = api.list_namespaced_pod("ns", limit=2,
                                   field_selector="spec.schedulerName=koord-scheduler")
    names = [p.metadata.name for p in page.items]
    token = page.metadata._continue
    while token:
        page = api.list_namespaced_pod("ns", limit=2, _continue=token,
                                       field_selector="spec.schedulerName=koord-scheduler")
        names += [p.metadata.name for p in page.items]
        token = page.metadata._continue
    assert names == ["p0", "p1", "p2", "p3", "p4"]
    assert [p.metadata.name for p in api.list_namespaced_pod(
        "ns", label_selector="app in (x),app!=y").items] == ["p1", "p3"]
    assert [p.metadata.name for p in api.list_pod_for_all_namespaces(
        field_selector="spec.schedulerName!=koord-scheduler").items] == ["q"]


def test_expired_continue_token_is_410(server: ApiServerDouble) -> None:
    for i in range(3):
        server.apply(pod(f"p{i}"))
    api = core(server)
    token = api.list_namespaced_pod("ns", limit=1).metadata._continue
    server.apply(pod("p9"))
    server.compact()
    with pytest.raises(ApiException) as err:
        api.list_namespaced_pod("ns", limit=1, _continue=token)
    assert err.value.status == 410


def test_watch_from_a_version_with_bookmarks_and_timeout(server: ApiServerDouble) -> None:
    a = server.apply(pod("a"))
    start = server.resource_version
    server.apply(pod("b"))
    server.apply(pod("c", scheduler="default-scheduler"))
    server.delete("pods", "ns", "a")
    events = watch_lines(core(server), resource_version=str(start), timeout_seconds=1,
                         allow_watch_bookmarks=True,
                         field_selector="spec.schedulerName=koord-scheduler")
    changes = [(e["type"], e["object"]["metadata"].get("name")) for e in events
               if e["type"] != "BOOKMARK"]
    assert changes == [("ADDED", "b"), ("DELETED", "a")]
    deleted = events[[e["type"] for e in events].index("DELETED")]["object"]
    assert deleted["metadata"]["uid"] == a["metadata"]["uid"]
    assert int(deleted["metadata"]["resourceVersion"]) == server.resource_version
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks and bookmarks[-1]["object"]["metadata"]["resourceVersion"] == str(
        server.resource_version)


def test_watch_without_version_starts_with_synthetic_added(server: ApiServerDouble) -> None:
    server.apply(pod("a"))
    events = watch_lines(core(server), timeout_seconds=1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "a")]


def test_selector_match_changes_read_as_added_and_deleted(server: ApiServerDouble) -> None:
    a = server.apply(pod("a", scheduler="other"))
    start = server.resource_version
    moved = server.apply({**a, "spec": {**a["spec"], "schedulerName": "koord-scheduler"}})
    server.apply({**moved, "spec": {**moved["spec"], "schedulerName": "other"}})
    events = watch_lines(core(server), resource_version=str(start), timeout_seconds=1,
                         field_selector="spec.schedulerName=koord-scheduler")
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]


def test_too_old_watch_is_410_and_expire_sends_error_event(server: ApiServerDouble) -> None:
    server.apply(pod("a"))
    old = server.resource_version
    server.apply(pod("b"))
    server.compact()
    with pytest.raises(ApiException) as err:
        watch_lines(core(server), resource_version=str(old - 1))
    assert err.value.status == 410
    api = core(server)
    resp = api.list_namespaced_pod("ns", watch=True, resource_version=str(server.resource_version),
                                   _preload_content=False, _request_timeout=(2, 5))
    lines = iter_resp_lines(resp)
    server.pause_watches()
    server.apply(pod("c"))  # never delivered: the watch expires first
    from tests.doubles.apiserver import eventually
    eventually(lambda: server.open_watches("pods") == 1)
    server.compact(expire_watches=True)
    events = [json.loads(line) for line in lines if line]
    resp.release_conn()
    assert [e["type"] for e in events] == ["ERROR"]
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["kind"] == "Status"


def test_dropped_watch_breaks_the_stream(server: ApiServerDouble) -> None:
    from tests.doubles.apiserver import eventually

    api = core(server)
    resp = api.list_namespaced_pod("ns", watch=True, resource_version="0",
                                   _preload_content=False, _request_timeout=(2, 5))
    eventually(lambda: server.open_watches() == 1)
    server.drop_watches()
    with pytest.raises(Exception):
        list(iter_resp_lines(resp))
    eventually(lambda: server.open_watches() == 0)


def test_podgroups_served_only_with_the_crd() -> None:
    pg = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
          "metadata": {"name": "g", "namespace": "ns"}, "spec": {"minMember": 2}}
    with ApiServerDouble() as server:
        server.apply(pg)
        custom = client.CustomObjectsApi(client.ApiClient(server.configuration()))
        listed = custom.list_namespaced_custom_object("scheduling.sigs.k8s.io", "v1alpha1",
                                                      "ns", "podgroups")
        assert [i["spec"]["minMember"] for i in listed["items"]] == [2]
        assert listed["items"][0]["kind"] == "PodGroup"  # custom list items keep their kind
    with ApiServerDouble(crds=False) as server:
        custom = client.CustomObjectsApi(client.ApiClient(server.configuration()))
        with pytest.raises(ApiException) as err:
            custom.list_cluster_custom_object("scheduling.sigs.k8s.io", "v1alpha1",
                                              "podgroups")
        assert err.value.status == 404


def test_core_v1_events_create_get_patch_list(server: ApiServerDouble) -> None:
    api = core(server)
    body = {"metadata": {"name": "llm.1", "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "llm-0"},
            "reason": "GangMembersInsufficient", "message": "3 of 4", "type": "Warning",
            "count": 1}
    created = api.create_namespaced_event("ns", body)
    assert created.metadata.uid and created.count == 1
    with pytest.raises(ApiException) as err:
        api.create_namespaced_event("ns", body)
    assert err.value.status == 409
    patched = api.patch_namespaced_event("llm.1", "ns", {"count": 2, "message": "3 of 4 (x2)"})
    assert (patched.count, patched.message) == (2, "3 of 4 (x2)")
    patched = api.patch_namespaced_event("llm.1", "ns", [
        {"op": "replace", "path": "/count", "value": 3}])
    assert patched.count == 3
    assert api.read_namespaced_event("llm.1", "ns").count == 3
    assert [e.metadata.name for e in api.list_namespaced_event(
        "ns", field_selector="involvedObject.name=llm-0,reason=GangMembersInsufficient").items
            ] == ["llm.1"]
    with pytest.raises(ApiException) as err:
        api.read_namespaced_event("nope", "ns")
    assert err.value.status == 404


def test_events_k8s_io_v1_create_patch_list(server: ApiServerDouble) -> None:
    api = client.EventsV1Api(client.ApiClient(server.configuration()))
    body = {"metadata": {"name": "llm.2", "namespace": "ns"}, "eventTime":
            "2026-11-02T09:00:00.000000Z", "reportingController": "gangstate",
            "reportingInstance": "gangstate-0", "action": "Diagnose",
            "reason": "GangScheduled", "note": "4 of 4 bound", "type": "Normal",
            "regarding": {"kind": "Pod", "namespace": "ns", "name": "llm-0"}}
    created = api.create_namespaced_event("ns", body)
    assert created.note == "4 of 4 bound"
    patched = api.patch_namespaced_event("llm.2", "ns", {"series": {
        "count": 2, "lastObservedTime": "2026-11-02T09:01:00.000000Z"}})
    assert patched.series.count == 2
    assert [e.metadata.name for e in api.list_namespaced_event("ns").items] == ["llm.2"]
    assert server.objects("events.k8s.io")[0]["series"]["count"] == 2
    assert server.objects("events") == []


@pytest.mark.parametrize("target,patch,expected", [
    ({"a": 1, "b": {"c": 2}}, {"b": {"d": 3}}, {"a": 1, "b": {"c": 2, "d": 3}}),
    ({"a": 1, "b": 2}, {"a": None}, {"b": 2}),
    ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),
], ids=["nested merge", "null deletes", "lists replace"])
def test_merge_patch(target: dict[str, Any], patch: dict[str, Any],
                     expected: dict[str, Any]) -> None:
    assert merge_patch(target, patch) == expected


def test_json_patch() -> None:
    doc = {"a": {"b": 1}, "l": [1, 2]}
    assert json_patch(doc, [{"op": "replace", "path": "/a/b", "value": 5},
                            {"op": "add", "path": "/l/-", "value": 3},
                            {"op": "remove", "path": "/l/0"}]) == {"a": {"b": 5}, "l": [2, 3]}
    with pytest.raises(ValueError):
        json_patch(doc, [{"op": "test", "path": "/a/b", "value": 9}])


def test_allow_only_answers_unauthorised_requests_403_as_rbac_does(server: ApiServerDouble
                                                                    ) -> None:
    server.apply(pod("a"))
    server.allow_only([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
                      user="system:serviceaccount:gangstate:gangstate")
    api = core(server)
    assert [p.metadata.name for p in api.list_namespaced_pod("ns").items] == ["a"]
    with pytest.raises(ApiException) as err:
        api.read_namespaced_pod("a", "ns")
    assert err.value.status == 403
    body = json.loads(err.value.body)
    assert (body["reason"], body["details"]) == ("Forbidden", {"group": "", "kind": "pods",
                                                              "name": "a"})
    assert body["message"] == ('pods "a" is forbidden: User "system:serviceaccount:gangstate:'
                               'gangstate" cannot get resource "pods" in API group "" in the '
                               'namespace "ns"')
    with pytest.raises(ApiException):
        client.EventsV1Api(client.ApiClient(server.configuration())).create_namespaced_event(
            "ns", {"metadata": {"name": "e"}, "eventTime": "2026-11-02T09:00:00.000000Z",
                   "reportingController": "x", "reportingInstance": "y", "action": "a",
                   "reason": "r", "type": "Normal", "regarding": {"kind": "Pod"}})
    assert [(a.verb, a.group, a.resource, a.namespace, a.name) for a in server.forbidden] == [
        ("get", "", "pods", "ns", "a"), ("create", "events.k8s.io", "events", "ns", "")]
    server.allow_only(None)
    assert api.read_namespaced_pod("a", "ns").metadata.name == "a"
