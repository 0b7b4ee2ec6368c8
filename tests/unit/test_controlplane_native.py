"""The native control plane's pure parts (``deploy/cluster/controlplane.py``, flavour
``native``: k8s.io/kubernetes v1.37.2 with kube-scheduler's GangScheduling plugin): its build
with a stand-in ``go`` (as in ``test_controlplane_build.py``), its cache key, wrapper module,
scheduler configuration and command lines. The real build and the running control plane are
tested by ``tests/cluster/test_native_controlplane.py``."""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path

import pytest

from streams.dev.localcluster import controlplane_module

cp = controlplane_module()

KUBE_GO_MOD = """// This is a generated file. Do not edit directly.

module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tk8s.io/api v0.0.0
\tk8s.io/kube-scheduler v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/kube-scheduler => ./staging/src/k8s.io/kube-scheduler
\tk8s.io/dynamic-resource-allocation => ./staging/src/k8s.io/dynamic-resource-allocation
)
"""


def fake_modules(root: Path) -> dict[str, Path]:
    kube = root / "kubernetes"
    kube.mkdir()
    (kube / "go.mod").write_text(KUBE_GO_MOD)
    (kube / "go.sum").write_text("k8s.io/api v0.37.2 h1:x\n")
    koord = root / "koord"
    (koord / "config" / "crd" / "bases").mkdir(parents=True)
    (koord / "go.mod").write_text("module github.com/koordinator-sh/koordinator\n")
    (koord / "go.sum").write_text("")
    return {"k8s.io/kubernetes": kube, "github.com/koordinator-sh/koordinator": koord}


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``go`` that logs its arguments to ``calls.log``, writes ``-o OUT`` (its content names
    the package) and answers ``mod download -json M@V`` with the fake module folder of M."""
    dirs = fake_modules(tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    go = bindir / "go"
    cases = "".join(f"  *{mod}@*) echo '{json.dumps({'Dir': str(d)})}' ;;\n"
                    for mod, d in dirs.items())
    go.write_text(f"""#!/bin/sh
echo "$@" >> {tmp_path}/calls.log
if [ "$1" = mod ] && [ "$2" = download ]; then
  case "$*" in
{cases}  esac
fi
if [ "$1" = build ]; then
  for last; do :; done
  while [ $# -gt 0 ]; do
    if [ "$1" = -o ]; then shift; echo "binary of $last" > "$1"; fi
    shift
  done
fi
""")
    go.chmod(go.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def calls(root: Path) -> list[str]:
    return (root / "calls.log").read_text().splitlines()


def test_the_flavours_have_their_own_cache_entries() -> None:
    # the koordinator flavour's key is the one caches already hold: it must not move
    assert cp.KOORDINATOR.cache_key() == (
        "etcd-v3.6.5-kubernetes-v1.35.2-koordinator-v1.8.0-kwok-v0.8.0-r2")
    assert cp.NATIVE.cache_key() == "native-kubernetes-v1.37.2-etcd-v3.6.5-kwok-v0.8.0-r1"
    assert cp.binaries_dir(Path("/c"), "native") == Path(
        "/c/controlplane/native-kubernetes-v1.37.2-etcd-v3.6.5-kwok-v0.8.0-r1/bin")
    assert cp.binaries_dir(Path("/c")) == cp.binaries_dir(Path("/c"), cp.KOORDINATOR)
    assert cp.flavour_of("native") is cp.NATIVE and cp.flavour_of(cp.NATIVE) is cp.NATIVE
    with pytest.raises(cp.ClusterError, match=r"unknown control plane flavour 'volcano' "
                                              r"\(known: koordinator, native\)"):
        cp.flavour_of("volcano")


def test_native_build_makes_every_binary_when_nothing_is_built(fake_go: Path) -> None:
    cache = fake_go / "cache"
    lines: list[str] = []
    bindir = cp.build(cache, flavour="native", progress=lines.append)
    assert bindir == cp.binaries_dir(cache, "native")
    assert sorted(p.name for p in bindir.iterdir()) == [
        "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
    made = calls(fake_go)
    assert made[:2] == ["mod tidy", "build -trimpath -ldflags=-s -w -o "
                        f"{cache}/controlplane/{cp.NATIVE.cache_key()}/bin.partial/etcd ."]
    assert made[2] == "mod download -json k8s.io/kubernetes@v1.37.2"
    xflags = ("-ldflags=-s -w -X k8s.io/component-base/version.gitVersion=v1.37.2 "
              "-X k8s.io/component-base/version.gitMajor=1 "
              "-X k8s.io/component-base/version.gitMinor=37")
    for call, name in zip(made[3:6], ("kube-apiserver", "kube-controller-manager",
                                      "kube-scheduler")):
        assert call.startswith(f"build -trimpath {xflags} -o ")
        assert call.endswith(f"k8s.io/kubernetes/cmd/{name}")
    assert made[6] == "mod tidy" and made[7].endswith("sigs.k8s.io/kwok/cmd/kwok")
    assert len(made) == 8
    assert cp.is_built(cache, "native") and not cp.is_built(cache, "koordinator")
    assert cp.build(cache, flavour="native") == bindir
    assert len(calls(fake_go)) == 8  # cached: no go call
    assert lines[-1].startswith("the native control plane built in ")


def test_native_build_reuses_etcd_and_kwok_of_the_koordinator_build(fake_go: Path) -> None:
    cache = fake_go / "cache"
    koord = cp.build(cache)
    before = len(calls(fake_go))
    lines: list[str] = []
    bindir = cp.build(cache, flavour="native", progress=lines.append)
    made = calls(fake_go)[before:]
    assert made[0] == "mod download -json k8s.io/kubernetes@v1.37.2"
    assert [c.rsplit(" ", 1)[1] for c in made[1:]] == [
        "k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager",
        "k8s.io/kubernetes/cmd/kube-scheduler"]
    for name in ("etcd", "kwok"):
        assert (bindir / name).read_bytes() == (koord / name).read_bytes()
        assert f"reusing {name} from {koord}" in lines
    assert not (bindir / "crds").exists()


def test_native_wrapper_module_points_the_staging_tree_at_the_proxy(tmp_path: Path) -> None:
    kube = fake_modules(tmp_path)["k8s.io/kubernetes"]
    work = tmp_path / "work"
    work.mkdir()
    cp._write_native_module(work, kube)
    gomod = (work / "go.mod").read_text()
    assert "module gangstate.local/native\n" in gomod and "module k8s.io/kubernetes" not in gomod
    assert gomod.startswith("// This is a generated file")  # the comments before it kept
    assert "\tk8s.io/api => k8s.io/api v0.37.2\n" in gomod
    assert "\tk8s.io/kube-scheduler => k8s.io/kube-scheduler v0.37.2\n" in gomod
    assert ("\tk8s.io/dynamic-resource-allocation => k8s.io/dynamic-resource-allocation "
            "v0.37.2\n") in gomod
    assert "./staging" not in gomod
    assert "godebug default=go1.26" in gomod
    assert gomod.rstrip().endswith("require k8s.io/kubernetes v1.37.2")
    assert (work / "go.sum").read_text() == "k8s.io/api v0.37.2 h1:x\n"
    tools = (work / "tools.go").read_text()
    assert tools.startswith("//go:build tools\n")
    assert [line.strip() for line in tools.splitlines() if line.startswith("\t_ ")] == [
        '_ "k8s.io/kubernetes/cmd/kube-apiserver"',
        '_ "k8s.io/kubernetes/cmd/kube-controller-manager"',
        '_ "k8s.io/kubernetes/cmd/kube-scheduler"']


@pytest.mark.parametrize("kubernetes,staged", [("v1.37.2", "v0.37.2"), ("v1.38.0", "v0.38.0"),
                                               ("v1.38.0-beta.0", "v0.38.0-beta.0")])
def test_staging_version(kubernetes: str, staged: str) -> None:
    assert cp.staging_version(kubernetes) == staged


def test_native_scheduler_config_keeps_the_default_plugins(tmp_path: Path) -> None:
    """kube-scheduler v1.37.2 adds GangScheduling to the default profile's multiPoint plugins
    when GenericWorkload is on, so the profile names no plugin; pods ask for
    default-scheduler."""
    config = cp.scheduler_config(tmp_path / "kubeconfig", "native")
    assert config == {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(tmp_path / "kubeconfig")},
        "profiles": [{"schedulerName": "default-scheduler"}]}
    koord = cp.scheduler_config(tmp_path / "kubeconfig")
    assert koord["profiles"][0]["schedulerName"] == "koord-scheduler"
    assert "Coscheduling" in json.dumps(koord["profiles"][0]["plugins"])


def test_native_command_lines_turn_the_gates_on_everywhere(tmp_path: Path) -> None:
    gates = ("--feature-gates=GenericWorkload=true,WorkloadWithJob=true,"
             "CompositePodGroup=true,TopologyAwareWorkloadScheduling=true")
    assert cp.NATIVE.apiserver_args() == [
        gates, "--runtime-config=scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true"]
    assert cp.NATIVE.gate_args() == [gates]
    argv = cp.scheduler_argv("native", Path("/b/kube-scheduler"), Path("/w/config.yaml"),
                             Path("/w/scheduler.yaml"), 4321)
    assert argv == ["/b/kube-scheduler", "--config", "/w/config.yaml",
                    "--bind-address", "127.0.0.1", "--secure-port", "4321",
                    "--authentication-kubeconfig", "/w/scheduler.yaml",
                    "--authorization-kubeconfig", "/w/scheduler.yaml", "--v", "4", gates]
    # koord-scheduler: no gates, its plain-HTTP port off, --v 2 as before
    koord = cp.scheduler_argv("koordinator", Path("/b/koord-scheduler"), Path("/w/c.yaml"),
                              Path("/w/s.yaml"), 4321)
    assert koord[koord.index("--port") + 1] == "0"
    assert koord[-2:] == ["--v", "2"] and not any(a.startswith("--feature-gates") for a in koord)
    assert cp.KOORDINATOR.apiserver_args() == []


def test_native_scheduler_user_has_only_the_bootstrap_rbac() -> None:
    assert cp.token_users("native")["scheduler"] == ("system:kube-scheduler", "")
    assert cp.token_users("koordinator")["scheduler"] == ("system:kube-scheduler",
                                                          "system:masters")
    assert cp.token_users("native")["admin"] == ("gangstate-admin", "system:masters")


def test_the_shim_is_refused_on_the_native_flavour() -> None:
    with pytest.raises(cp.ClusterError, match="the shim wraps koord-scheduler"):
        cp.LocalCluster(flavour="native", shim={"KAFKA_BOOTSTRAP_SERVERS": "x:1"})
    cluster = cp.LocalCluster(flavour="native")
    assert cluster.scheduler_component == "kube-scheduler"
    assert cp.LocalCluster().scheduler_component == "koord-scheduler"
    with pytest.raises(SystemExit):
        cp.main(["run", "--native", "--shim"])


def test_the_script_builds_the_native_flavour(fake_go: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GANGSTATE_CACHE", str(fake_go / "cache"))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        assert cp.main(["build", "--native"]) == 0
    finally:  # main() takes SIGINT and SIGTERM over; give them back to pytest
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    out = capsys.readouterr()
    assert out.out.strip() == str(cp.binaries_dir(flavour="native"))
    assert "building kube-scheduler v1.37.2 ..." in out.err
