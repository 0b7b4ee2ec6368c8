"""The shipped manifests of a fleet (``deploy/fleet``, docs/fleet.md, issue 27): the hub runs the
one worker group and nothing of a cluster's; each cluster's overlay runs its watch and its sink,
with their own ServiceAccounts and the RBAC of ``deploy/kubernetes/rbac.yaml`` unchanged, their
cluster's id (``GANGSTATE_CLUSTER``, required, never defaulted) and the hub's Kafka, and no
worker; and the sinks of two clusters consume in two groups.

The overlays are rendered by kustomize (``kubectl kustomize``, else ``kustomize build``; the
tests that need a rendering are skipped without either); the static checks need neither."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from streams.core.cluster import cluster_problem
from streams.events.sink import group_id
from streams.settings import Settings
from tests.unit.test_manifests import assert_locked_down, assert_probes_ask_the_port_served
from tests.unit.test_rbac import manifests

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "deploy" / "fleet"
CLUSTERS = sorted(p for p in (FLEET / "clusters").iterdir() if p.is_dir())


def kustomize_command() -> list[str] | None:
    """How to render a kustomization here: ``kubectl kustomize`` or ``kustomize build``."""
    for command in (["kubectl", "kustomize"], ["kustomize", "build"]):
        if shutil.which(command[0]) is None:
            continue
        try:
            probe = subprocess.run([*command, "--help"], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return command
    return None


KUSTOMIZE = kustomize_command()
needs_kustomize = pytest.mark.skipif(KUSTOMIZE is None,
                                     reason="neither kubectl kustomize nor kustomize here")


def render(folder: Path) -> list[dict[str, Any]]:
    assert KUSTOMIZE is not None
    done = subprocess.run([*KUSTOMIZE, str(folder)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def objects(docs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(d["kind"], d["metadata"]["name"]) for d in docs}


def env_of(deployment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e for e in container["env"]}


def kustomization(folder: Path) -> dict[str, Any]:
    return yaml.safe_load((folder / "kustomization.yaml").read_text())


# -- static: no kustomize needed --------------------------------------------------------------

@pytest.mark.parametrize("folder", [FLEET / "hub", FLEET / "member", *CLUSTERS],
                         ids=lambda p: p.relative_to(FLEET).as_posix())
def test_every_file_a_kustomization_names_exists(folder: Path) -> None:
    doc = kustomization(folder)
    for resource in doc.get("resources") or []:
        assert (folder / resource).exists(), resource
    for patch in doc.get("patches") or []:
        assert "path" not in patch or (folder / patch["path"]).is_file(), patch


@pytest.mark.parametrize("folder", CLUSTERS, ids=lambda p: p.name)
def test_a_clusters_overlay_names_its_cluster_as_its_folder(folder: Path) -> None:
    """The folder of a cluster's overlay is its cluster id, a DNS-1123 label, and the
    overlay's ConfigMap says so with the hub's Kafka address."""
    (generator,) = kustomization(folder)["configMapGenerator"]
    assert generator["name"] == "gangstate-cluster"
    literals = dict(item.split("=", 1) for item in generator["literals"])
    assert set(literals) == {"GANGSTATE_CLUSTER", "KAFKA_BOOTSTRAP_SERVERS"}
    assert literals["GANGSTATE_CLUSTER"] == folder.name
    assert cluster_problem(folder.name) is None
    assert literals["GANGSTATE_CLUSTER"] != "default"


# -- rendered ---------------------------------------------------------------------------------

@needs_kustomize
def test_the_hub_runs_the_worker_group_and_nothing_of_a_clusters() -> None:
    hub = render(FLEET / "hub")
    assert objects(hub) == {("Namespace", "gangstate"), ("ServiceAccount", "gangstate-worker"),
                            ("Service", "gangstate-worker"), ("Deployment", "gangstate-worker")}
    worker = named(hub, "Deployment", "gangstate-worker")
    # the single-cluster worker as shipped: it serves every cluster and reads no cluster id
    assert worker == named(manifests(), "Deployment", "gangstate-worker")
    assert "GANGSTATE_CLUSTER" not in env_of(worker)
    assert_locked_down(worker, "worker")


@needs_kustomize
def test_the_member_alone_names_no_cluster_and_would_not_start() -> None:
    """Applied without a cluster's overlay, the watch and the sink ask for a ConfigMap that
    is not there: their pods do not start, rather than publish as 'default'."""
    member = render(FLEET / "member")
    assert not [d for d in member if d["kind"] == "ConfigMap"]
    for component in ("watch", "sink"):
        env = env_of(named(member, "Deployment", f"gangstate-{component}"))
        ref = env["GANGSTATE_CLUSTER"]["valueFrom"]["configMapKeyRef"]
        assert ref == {"name": "gangstate-cluster", "key": "GANGSTATE_CLUSTER"}
        assert ref.get("optional") in (None, False)


@needs_kustomize
@pytest.mark.parametrize("folder", CLUSTERS, ids=lambda p: p.name)
def test_a_cluster_runs_its_watch_and_sink_with_its_id_and_unchanged_rbac(folder: Path) -> None:
    docs = render(folder)
    shipped = manifests()
    (config,) = [d for d in docs if d["kind"] == "ConfigMap"]
    assert config["metadata"]["name"].startswith("gangstate-cluster-")  # hashed: a change rolls
    assert config["data"]["GANGSTATE_CLUSTER"] == folder.name
    assert objects(docs) == {
        ("Namespace", "gangstate"), ("ConfigMap", config["metadata"]["name"]),
        ("ServiceAccount", "gangstate-watch"), ("ServiceAccount", "gangstate-sink"),
        ("ClusterRole", "gangstate-watch"), ("ClusterRole", "gangstate-sink"),
        ("ClusterRoleBinding", "gangstate-watch"), ("ClusterRoleBinding", "gangstate-sink"),
        ("Deployment", "gangstate-watch"), ("Deployment", "gangstate-sink")}
    for kind, name in objects(docs):
        if kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
            assert named(docs, kind, name) == named(shipped, kind, name)  # RBAC unchanged
    for component in ("watch", "sink"):
        deployment = named(docs, "Deployment", f"gangstate-{component}")
        assert_locked_down(deployment, component)
        assert_probes_ask_the_port_served(deployment)
        env = env_of(deployment)
        for name in ("GANGSTATE_CLUSTER", "KAFKA_BOOTSTRAP_SERVERS"):
            assert env[name] == {"name": name, "valueFrom": {"configMapKeyRef": {
                "name": config["metadata"]["name"], "key": name}}}
        assert all(("value" in e) != ("valueFrom" in e) for e in env.values())
        # the rest of the pod as in the single-cluster manifests (args, probes, image, ...)
        single = named(shipped, "Deployment", f"gangstate-{component}")
        (mine,) = deployment["spec"]["template"]["spec"]["containers"]
        (theirs,) = single["spec"]["template"]["spec"]["containers"]
        assert {k: v for k, v in mine.items() if k != "env"} == \
            {k: v for k, v in theirs.items() if k != "env"}
        # its own Kafka user (the passwords are the cluster's Secret)
        assert env["KAFKA_SASL_USERNAME"]["value"] == f"gangstate-{folder.name}-{component}"
        assert env["KAFKA_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == \
            "gangstate-kafka"


@needs_kustomize
def test_two_clusters_sinks_consume_in_two_groups(tmp_path: Path) -> None:
    """The sink's consumer group as the rendered env makes it (``GANGSTATE_APP_ID`` and the
    cluster's id): one per cluster, and none is the single-cluster sink's."""
    groups = {}
    for cluster in ("eu-1", "us-2"):
        folder = tmp_path / cluster
        folder.mkdir()
        (folder / "kustomization.yaml").write_text(yaml.safe_dump({
            "resources": [os.path.relpath(FLEET / "member", folder)],
            "configMapGenerator": [{"name": "gangstate-cluster", "namespace": "gangstate",
                                    "literals": [f"GANGSTATE_CLUSTER={cluster}",
                                                 "KAFKA_BOOTSTRAP_SERVERS=hub:9093"]}]}))
        docs = render(folder)
        (config,) = [d for d in docs if d["kind"] == "ConfigMap"]
        env = env_of(named(docs, "Deployment", "gangstate-sink"))
        groups[cluster] = group_id(Settings(app_id=env["GANGSTATE_APP_ID"]["value"],
                                            cluster=config["data"]["GANGSTATE_CLUSTER"]))
    assert groups == {"eu-1": "gangstate-event-sink-eu-1", "us-2": "gangstate-event-sink-us-2"}


@needs_kustomize
def test_the_fleets_command_lines_parse() -> None:
    from click.testing import CliRunner

    from streams.cli import cli

    docs = render(FLEET / "hub") + render(CLUSTERS[0])
    for deployment in (d for d in docs if d["kind"] == "Deployment"):
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        result = CliRunner().invoke(cli, [*container["args"][1:], "--help"])
        assert result.exit_code == 0, (deployment["metadata"]["name"], result.output)
