"""The shipped ServiceAccounts on the real kube-apiserver (issue 15): each component of the
chain runs with a token of its own ServiceAccount (``deploy/kubernetes/rbac.yaml`` applied as
shipped, tokens from the TokenRequest API); the worker's can do nothing, the watch's cannot
write Events, the sink's cannot read pods."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from streams.dev.localcluster import Chain, service_account_of
from streams.dev.localkafka import repo_root

DEPLOY = repo_root() / "deploy" / "kubernetes"


def api_as(cluster: Any, component: str) -> client.ApiClient:
    """An API client holding a token of the ServiceAccount ``<component>.yaml`` runs as."""
    namespace, name = service_account_of(DEPLOY / f"{component}.yaml")
    token = cluster.token_for_service_account(namespace, name)
    return cluster.api_client(f"rbac-test-{component}", token=token)


def status_of(call: Any) -> int:
    """The HTTP status of one API call: 200 when it succeeded, else the error's."""
    try:
        call()
    except ApiException as err:
        return int(err.status)
    return 200


def event(namespace: str) -> dict[str, Any]:
    name = f"rbac-{uuid.uuid4().hex[:8]}"
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {"kind": "Pod", "namespace": namespace, "name": "p"},
            "reason": "Test", "message": "rbac test", "type": "Normal",
            "source": {"component": "rbac-test"}}


def test_the_chain_runs_each_component_as_its_own_service_account(chain: Chain) -> None:
    """The watch and the sink of the running chain hold tokens of ``gangstate-watch`` and
    ``gangstate-sink``; the worker gets no kubeconfig at all."""
    assert service_account_of(DEPLOY / "watch.yaml") == ("gangstate", "gangstate-watch")
    assert service_account_of(DEPLOY / "sink.yaml") == ("gangstate", "gangstate-sink")
    assert service_account_of(DEPLOY / "worker.yaml") == ("gangstate", "gangstate-worker")
    assert set(chain.kubeconfigs) == {"watch", "sink"}
    for component in ("watch", "sink"):
        text = chain.kubeconfigs[component].read_text()
        assert f"gangstate-{component}" in text
    assert chain.alive() == {"worker": True, "watch": True, "sink": True}


def test_the_worker_service_account_can_do_nothing(chain: Chain, local_cluster: Any) -> None:
    """Every read and write the other components make, and more, is refused (403) to the
    worker's ServiceAccount."""
    api = api_as(local_cluster, "worker")
    core = client.CoreV1Api(api)
    events = client.EventsV1Api(api)
    custom = client.CustomObjectsApi(api)
    calls = {
        "list pods": lambda: core.list_pod_for_all_namespaces(limit=1),
        "list nodes": lambda: core.list_node(limit=1),
        "list events": lambda: core.list_event_for_all_namespaces(limit=1),
        "get event": lambda: core.read_namespaced_event("x", "default"),
        "create event": lambda: core.create_namespaced_event("default", event("default")),
        "create events.k8s.io event": lambda: events.create_namespaced_event(
            "default", {"apiVersion": "events.k8s.io/v1", "kind": "Event",
                        "metadata": {"name": "x", "namespace": "default"},
                        "eventTime": "2026-11-02T09:00:00.000000Z", "action": "a",
                        "reason": "r", "reportingController": "c",
                        "reportingInstance": "i", "type": "Normal",
                        "regarding": {"kind": "Pod", "namespace": "default", "name": "p"}}),
        "list podgroups": lambda: custom.list_cluster_custom_object(
            "scheduling.sigs.k8s.io", "v1alpha1", "podgroups"),
        "list secrets": lambda: core.list_secret_for_all_namespaces(limit=1),
        "list configmaps": lambda: core.list_namespaced_config_map("gangstate"),
    }
    assert {name: status_of(call) for name, call in calls.items()} == {
        name: 403 for name in calls}


def test_the_watch_service_account_reads_but_cannot_write_events(chain: Chain,
                                                                 local_cluster: Any) -> None:
    core = client.CoreV1Api(api_as(local_cluster, "watch"))
    assert status_of(lambda: core.list_pod_for_all_namespaces(limit=1)) == 200
    assert status_of(lambda: core.list_event_for_all_namespaces(limit=1)) == 200
    assert status_of(lambda: core.create_namespaced_event("default", event("default"))) == 403
    assert status_of(lambda: core.patch_namespaced_event(
        "x", "default", {"message": "forged"})) == 403
    assert status_of(lambda: core.list_secret_for_all_namespaces(limit=1)) == 403


def test_the_sink_service_account_writes_events_but_cannot_read_pods(
        chain: Chain, local_cluster: Any) -> None:
    core = client.CoreV1Api(api_as(local_cluster, "sink"))
    assert status_of(lambda: core.create_namespaced_event("default", event("default"))) == 200
    assert status_of(lambda: core.list_pod_for_all_namespaces(limit=1)) == 403
    assert status_of(lambda: core.list_event_for_all_namespaces(limit=1)) == 403
    assert status_of(lambda: core.delete_namespaced_event("x", "default")) == 403


pytestmark = pytest.mark.cluster
