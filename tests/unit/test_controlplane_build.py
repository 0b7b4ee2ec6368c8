"""The local control plane's build and node spec, without Go: ``deploy/cluster/controlplane.py``
with a stand-in ``go`` on PATH (a shell script that logs its calls and writes the files a real
build would). The real build and the running control plane are tested by the cluster tier
(``tests/cluster``)."""

from __future__ import annotations

import json
import re
import os
import stat
import threading
from pathlib import Path

import pytest

from streams.dev.localcluster import controlplane_module

cp = controlplane_module()

KOORD_GO_MOD = """module github.com/koordinator-sh/koordinator

go 1.25.0

require (
\tk8s.io/kubernetes v1.35.2
)

replace (
\tk8s.io/api => k8s.io/api v0.35.2
\tk8s.io/externaljwt => k8s.io/externaljwt v0.35.2
\tk8s.io/kube-controller-manager => k8s.io/kube-controller-manager v0.35.2
)
"""


def fake_koordinator(root: Path) -> Path:
    koord = root / "koord"
    (koord / "config" / "crd" / "bases").mkdir(parents=True)
    (koord / "go.mod").write_text(KOORD_GO_MOD)
    (koord / "go.sum").write_text("k8s.io/api v0.35.2 h1:x\n")
    (koord / "config" / "crd" / "bases" / "scheduling.sigs.k8s.io_podgroups.yaml").write_text(
        "kind: CustomResourceDefinition\n")
    return koord


def fake_go(root: Path, koord: Path, fail_on: str | None = None) -> Path:
    """A ``go`` that appends its arguments to ``calls.log``; ``build -o OUT`` writes OUT;
    ``mod download -json`` prints the fake Koordinator folder; fails (exit 1, with output) on
    the first call whose arguments contain ``fail_on``."""
    bindir = root / "bin"
    bindir.mkdir()
    go = bindir / "go"
    go.write_text(f"""#!/bin/sh
echo "$@" >> {root}/calls.log
case "$*" in
  *{fail_on or '@@never@@'}*) echo "compile: something broke in $*"; echo "last line"; exit 1 ;;
esac
if [ "$1" = mod ] && [ "$2" = download ]; then
  echo '{json.dumps({"Dir": str(koord)})}'
fi
if [ "$1" = build ]; then
  while [ $# -gt 0 ]; do
    if [ "$1" = -o ]; then shift; echo binary > "$1"; fi
    shift
  done
fi
""")
    go.chmod(go.stat().st_mode | stat.S_IXUSR)
    return bindir


@pytest.fixture
def fake_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def make(fail_on: str | None = None) -> Path:
        koord = fake_koordinator(tmp_path)
        bindir = fake_go(tmp_path, koord, fail_on)
        monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
        return tmp_path
    return make


def calls(root: Path) -> list[str]:
    return (root / "calls.log").read_text().splitlines()


def test_build_runs_each_step_once_and_caches_by_version(fake_env) -> None:
    root = fake_env()
    cache = root / "cache"
    lines: list[str] = []
    bindir = cp.build(cache, progress=lines.append)
    assert bindir == cache / "controlplane" / (
        "etcd-v3.6.5-kubernetes-v1.35.2-koordinator-v1.8.0-kwok-v0.8.0-r2") / "bin"
    assert sorted(p.name for p in bindir.iterdir()) == [
        "crds", "etcd", "koord-scheduler", "kube-apiserver", "kube-controller-manager", "kwok"]
    assert [p.name for p in (bindir / "crds").iterdir()] == [
        "scheduling.sigs.k8s.io_podgroups.yaml"]
    made = calls(root)
    assert made[0] == "mod tidy"
    assert made[2] == "mod download -json github.com/koordinator-sh/koordinator@v1.8.0"
    # kube-apiserver and kube-controller-manager carry their version, or kubectl version
    # cannot parse the server's
    xflags = ("-X k8s.io/component-base/version.gitVersion=v1.35.2 "
              "-X k8s.io/component-base/version.gitMajor=1 "
              "-X k8s.io/component-base/version.gitMinor=35")
    assert xflags in made[3] and made[3].endswith("k8s.io/kubernetes/cmd/kube-apiserver")
    assert xflags in made[4] and made[4].endswith("k8s.io/kubernetes/cmd/kube-controller-manager")
    assert made[5].endswith("github.com/koordinator-sh/koordinator/cmd/koord-scheduler")
    # KWOK in a module of its own (it needs client-go v0.36.1, Koordinator pins v0.35.2)
    assert made[6] == "mod tidy"
    assert made[7].endswith("sigs.k8s.io/kwok/cmd/kwok")
    assert len(made) == 8
    assert cp.is_built(cache)
    # a second build reuses the cache: no go call at all
    assert cp.build(cache) == bindir
    assert len(calls(root)) == 8
    assert any("cold" in line for line in lines)


def test_concurrent_builds_build_once(fake_env) -> None:
    root = fake_env()
    cache = root / "cache"
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(cp.build(cache)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(set(results)) == 1 and len(results) == 3
    assert len(calls(root)) == 8  # one build's worth of go calls, not three


def test_failed_build_reports_the_tail_and_caches_nothing(fake_env) -> None:
    root = fake_env(fail_on="cmd/kube-apiserver")
    cache = root / "cache"
    with pytest.raises(cp.ClusterError) as err:
        cp.build(cache)
    text = str(err.value)
    assert text.startswith("building kube-apiserver failed (exit 1)")
    assert "compile: something broke in build" in text and text.rstrip().endswith("last line")
    assert not cp.is_built(cache)
    assert not cp.binaries_dir(cache).exists()


def test_wrapper_module_copies_koordinators_replaces_and_swaps_the_refused_ones(
        tmp_path: Path) -> None:
    koord = fake_koordinator(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    cp._write_kube_module(work, koord)
    gomod = (work / "go.mod").read_text()
    assert gomod.splitlines()[0] == "module gangstate.local/controlplane"
    assert "k8s.io/api => k8s.io/api v0.35.2" in gomod
    assert "k8s.io/externaljwt => k8s.io/externaljwt v0.35.1" in gomod
    assert "k8s.io/kube-controller-manager => k8s.io/kube-controller-manager v0.35.1" in gomod
    assert gomod.rstrip().endswith("require github.com/koordinator-sh/koordinator v1.8.0")
    assert (work / "go.sum").read_text() == "k8s.io/api v0.35.2 h1:x\n"


def test_node_spec_from_a_file(tmp_path: Path) -> None:
    spec = tmp_path / "nodes.yaml"
    spec.write_text("nodes:\n- {name: gpu-1, cpu: '16', memory: 64Gi, gpu: 8,\n"
                    "   taints: [{key: dedicated, value: ml, effect: NoSchedule}]}\n"
                    "- {name: small}\n")
    gpu, small = cp.load_nodes(spec)
    assert gpu.manifest() == {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-1", "labels": {"kubernetes.io/hostname": "gpu-1",
                                                 "kubernetes.io/os": "linux"},
                     # KWOK plays the kubelet of a node annotated so at its creation
                     "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]}}
    status = gpu.status()
    assert status["allocatable"] == {"cpu": "16", "memory": "64Gi", "pods": "110",
                                     "nvidia.com/gpu": "8"}
    assert status["capacity"] == status["allocatable"]
    assert "conditions" not in status  # Ready is KWOK's to report, as a kubelet's would be
    assert small.status()["allocatable"] == {"cpu": "8", "memory": "32Gi", "pods": "110"}
    assert small.manifest()["spec"] == {}


def test_node_spec_rejects_unknown_keys_and_missing_names(tmp_path: Path) -> None:
    with pytest.raises(cp.ClusterError, match=r"unknown keys \['gpus'\]"):
        cp.NodeSpec.from_mapping({"name": "n", "gpus": 1})
    with pytest.raises(cp.ClusterError, match="without a name"):
        cp.NodeSpec.from_mapping({"cpu": "4"})
    bad = tmp_path / "nodes.yaml"
    bad.write_text("name: n\n")
    with pytest.raises(cp.ClusterError, match="expected a list of nodes"):
        cp.load_nodes(bad)


def test_scheduler_config_enables_coscheduling_everywhere_it_acts(tmp_path: Path) -> None:
    config = cp.scheduler_config(tmp_path / "kubeconfig")
    (profile,) = config["profiles"]
    assert profile["schedulerName"] == "koord-scheduler"
    assert config["leaderElection"] == {"leaderElect": False}
    assert sorted(profile["plugins"]) == sorted([
        "preEnqueue", "preFilter", "postFilter", "preScore", "score", "reserve", "permit",
        "preBind", "postBind"])
    for point, plugins in profile["plugins"].items():
        assert [p["name"] for p in plugins["enabled"]] == ["Coscheduling"], point


@pytest.mark.parametrize("raw,message", [
    ({"name": "a", "cpu": "lots"}, "cpu 'lots' is not a Kubernetes quantity"),
    ({"name": "a", "gpu": -1}, "gpu must be a whole number of at least 0, not -1"),
    ({"name": "a", "taints": [{"key": "x", "effect": "Sometimes"}]},
     "a taint is {key, value, effect} with effect NoSchedule"),
    ({"name": "a", "taints": [{"key": "x", "effect": "NoSchedule", "extra": 1}]},
     "a taint is {key, value, effect}"),
])
def test_node_spec_values_are_checked_before_the_api_server_sees_them(raw, message) -> None:
    with pytest.raises(cp.ClusterError, match=re.escape(message)):
        cp.NodeSpec.from_mapping(raw)


def test_a_missing_or_broken_nodes_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(cp.ClusterError, match="cannot read the nodes spec"):
        cp.load_nodes(tmp_path / "absent.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("- {name: a\n")
    with pytest.raises(cp.ClusterError, match="not YAML"):
        cp.load_nodes(broken)


def test_a_waiting_build_says_so(fake_env) -> None:
    root = fake_env()
    cache = root / "cache"
    lock = cp.binaries_dir(cache).parent / ".lock"
    lines: list[str] = []
    with cp._SHARED.file_lock(lock):
        waiter = threading.Thread(target=lambda: cp.build(cache, progress=lines.append))
        waiter.start()
        waiter.join(1.0)
        assert waiter.is_alive()  # blocked behind the held lock
    waiter.join(30)
    assert lines[0].startswith("waiting for another build of the control plane (lock ")


def fake_shim(root: Path) -> Path:
    shim = root / "shim"
    (shim / "cmd" / "koord-scheduler").mkdir(parents=True)
    (shim / "go.mod").write_text("module gangstate.local/shim\n")
    (shim / "go.sum").write_text("")
    (shim / "cmd" / "koord-scheduler" / "main.go").write_text("package main\n")
    (shim / "cmd" / "koord-scheduler" / "main_test.go").write_text("package main\n")
    return shim


def test_the_shim_is_built_once_per_version_and_sources_outside_the_repository(fake_env) -> None:
    """The shim's binary is cached by Koordinator's version, the recipe and a hash of its
    sources (tests excluded): a second build is no go call; a changed source is a new entry;
    the build runs in a copy (the shim folder gets no build output)."""
    root = fake_env()
    cache, shim = root / "cache", fake_shim(root)
    key = cp.shim_key(shim)
    assert re.fullmatch(r"koordinator-v1\.8\.0-r1-[0-9a-f]{16}", key)
    binary = cp.build_shim(cache, shim_dir=shim)
    assert binary == cache / "controlplane" / "shim" / key / "bin" / "koord-scheduler"
    assert binary.read_text() == "binary\n"
    made = calls(root)
    assert len(made) == 1 and made[0].startswith("build -trimpath")
    assert made[0].endswith("./cmd/koord-scheduler")
    assert sorted(p.name for p in shim.rglob("*")) == sorted(
        ["cmd", "koord-scheduler", "go.mod", "go.sum", "main.go", "main_test.go"])
    assert cp.build_shim(cache, shim_dir=shim) == binary
    assert len(calls(root)) == 1
    (shim / "cmd" / "koord-scheduler" / "main_test.go").write_text("package main // x\n")
    assert cp.shim_key(shim) == key  # tests are not built into the binary
    (shim / "cmd" / "koord-scheduler" / "main.go").write_text("package main // changed\n")
    assert cp.shim_key(shim) != key
    assert cp.build_shim(cache, shim_dir=shim) != binary
    assert len(calls(root)) == 2


def test_a_failed_shim_build_reports_the_tail_and_caches_nothing(fake_env) -> None:
    root = fake_env(fail_on="./cmd/koord-scheduler")
    cache, shim = root / "cache", fake_shim(root)
    with pytest.raises(cp.ClusterError) as err:
        cp.build_shim(cache, shim_dir=shim)
    text = str(err.value)
    assert text.startswith("building the shim's koord-scheduler failed (exit 1)")
    assert "compile: something broke in build" in text and text.rstrip().endswith("last line")
    assert not cp.shim_binary(cache, shim).exists()
    assert not (cp.shim_binary(cache, shim).parent.parent / ".gangstate-build-complete").exists()
