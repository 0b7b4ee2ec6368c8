"""The shipped Deployments (``deploy/kubernetes/*.yaml``) as a security reviewer reads them
(issue 15): one ServiceAccount per component, no token for the worker, probes on the HTTP port
each component actually serves, read-only root filesystems with only ``emptyDir`` writable,
non-root users; the worker's views and ``/metrics`` on, advertised at the pod's IP."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.test_rbac import manifests

COMPONENTS = ("watch", "sink", "worker")


def deployment(component: str) -> dict[str, Any]:
    (found,) = [d for d in manifests() if d["kind"] == "Deployment"
                and d["metadata"]["name"] == f"gangstate-{component}"]
    return found


def flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


@pytest.mark.parametrize("component", COMPONENTS)
def test_every_component_runs_locked_down(component: str) -> None:
    assert_locked_down(deployment(component), component)


def assert_locked_down(deployment: dict[str, Any], component: str) -> None:
    """The Deployment of ``component`` runs as its own ServiceAccount, non-root, seccomp'd, on
    a read-only root filesystem with only ``emptyDir`` writable (also the fleet's:
    ``test_fleet_manifests``)."""
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == f"gangstate-{component}"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts") or []}
    assert "/tmp" in mounts
    assert all("emptyDir" in volumes[name] for name in mounts.values())


@pytest.mark.parametrize("component", COMPONENTS)
def test_probes_ask_the_http_port_the_component_serves(component: str) -> None:
    assert_probes_ask_the_port_served(deployment(component))


def assert_probes_ask_the_port_served(deployment: dict[str, Any]) -> None:
    """Liveness (``/metrics``) and readiness (``/readyz``) ask the ``--http-port`` the
    component serves, bound on every interface of the pod."""
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    port = flag(args, "--http-port")
    assert port is not None
    # bound where the kubelet (and, for the worker, the other replicas) can reach it
    assert flag(args, "--http-bind") == "0.0.0.0"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe, path in (("livenessProbe", "/metrics"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert ports[get["port"]] == int(port)
        assert get["path"] == path


def test_the_worker_has_no_kubernetes_token_and_advertises_its_pod_ip() -> None:
    pod = deployment("worker")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    (account,) = [d for d in manifests() if d["kind"] == "ServiceAccount"
                  and d["metadata"]["name"] == "gangstate-worker"]
    assert account["automountServiceAccountToken"] is False
    bindings = [s for d in manifests() if d["kind"] in ("ClusterRoleBinding", "RoleBinding")
                for s in d.get("subjects") or []]
    assert "gangstate-worker" not in [s["name"] for s in bindings]
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert container["args"][:2] == ["gangstate", "worker"]
    assert env["GANGSTATE_DATA_DIR"]["value"] == "/app/data"
    assert "/app/data" in [m["mountPath"] for m in container["volumeMounts"]]


def test_the_shipped_args_parse() -> None:
    """The Deployments' command lines are valid ``gangstate`` invocations (``--help`` after
    them: parsed, nothing run)."""
    from click.testing import CliRunner

    from streams.cli import cli

    for component in COMPONENTS:
        (container,) = deployment(component)["spec"]["template"]["spec"]["containers"]
        result = CliRunner().invoke(cli, [*container["args"][1:], "--help"])
        assert result.exit_code == 0, (component, result.output)


def test_the_watch_follows_both_schedulers() -> None:
    """Koordinator's pods and those of kube-scheduler's default profile (its own gangs): a
    cluster running both is explained as shipped."""
    (container,) = deployment("watch")["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    named = [args[i + 1] for i, arg in enumerate(args) if arg == "--scheduler-name"]
    assert named == ["koord-scheduler", "default-scheduler"]
    assert "--no-native-podgroups" not in args and "--no-podgroups" not in args
