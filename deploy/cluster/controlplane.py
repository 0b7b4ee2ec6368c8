"""A real local Kubernetes control plane, in two flavours: gangstate's test ground.

Where this sits: gangstate explains what a gang scheduler does, and the real scheduler is the
ground truth for it. This module builds and runs, on 127.0.0.1 only, a control plane made of
the real binaries, on which pods live (run, finish, fail, terminate). Two flavours
(:class:`Flavour`) share all of the code; what differs is a parameter:

``koordinator`` (the default, :data:`KOORDINATOR`): Koordinator's Coscheduling

- **etcd** ``go.etcd.io/etcd/server/v3`` (a two-line ``main`` calling ``etcdmain.Main``),
- **kube-apiserver** and **kube-controller-manager** ``k8s.io/kubernetes/cmd/...`` v1.35.2 (the
  version Koordinator pins), with Koordinator's CRDs installed,
- **koord-scheduler** ``github.com/koordinator-sh/koordinator/cmd/koord-scheduler`` v1.8.0,
- **KWOK** ``sigs.k8s.io/kwok/cmd/kwok``, the nodes' kubelet: it keeps the fake nodes' leases and
  Ready condition and plays their pods by the Stages of ``kwok-stages.yaml`` beside this file;

``native`` (:data:`NATIVE`): Kubernetes' own gang scheduling (KEP-4671) as released in v1.37.2

- the same etcd and KWOK (copied from the koordinator build when it exists),
- **kube-apiserver**, **kube-controller-manager** and **kube-scheduler** of
  ``k8s.io/kubernetes`` v1.37.2 with the feature gates :data:`NATIVE_FEATURE_GATES`
  (GenericWorkload, WorkloadWithJob, CompositePodGroup, TopologyAwareWorkloadScheduling) and
  ``scheduling.k8s.io/v1beta1`` (Workload, PodGroup) and ``v1alpha3`` (CompositePodGroup)
  served; kube-scheduler runs as ``default-scheduler`` with its default plugins, GangScheduling
  among them, as user ``system:kube-scheduler`` with the bootstrap RBAC only; no CRDs.

Everything is built from the Go module proxy (``go`` must be on PATH) and cached by flavour and
version under ``$GANGSTATE_CACHE`` or ``~/.cache/gangstate/controlplane/`` (cold builds took
about 10 min on 2 cores here for each flavour, see docs/cluster.md; later runs reuse the
binaries). Nodes are API objects created with their status and handed to KWOK; no container
runs.

It is a throwaway for tests, demos and a person with ``kubectl``; never point anything that
matters at it. As a script (run it with the project's ``.venv/bin/python``)::

    python deploy/cluster/controlplane.py build [--native]   # build or reuse the binaries
    python deploy/cluster/controlplane.py run [--native] [--nodes nodes.yaml]
        # start, print KUBECONFIG=<path> (admin), wait for Ctrl-C, stop and clean up

What it must not do: listen on anything but loopback, download anything but Go modules, or
leave processes or files behind after :meth:`LocalCluster.stop`.

Public API: :func:`build`, :func:`build_shim`, :func:`shim_binary`, :func:`shim_key`,
:class:`LocalCluster`, :class:`NodeSpec`, :class:`ClusterError`, :class:`Flavour`,
:data:`KOORDINATOR`, :data:`NATIVE`, :func:`flavour_of`, :func:`scheduler_config`,
:func:`scheduler_argv`, :func:`token_users`, :func:`terminate`, :func:`free_ports`,
:data:`VERSIONS`, :data:`NATIVE_VERSIONS`, :func:`cache_root`.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

#: Pinned versions. Koordinator v1.8.0's go.mod pins k8s.io/kubernetes v1.35.2; etcd v3.6.5 is
#: the etcd release Kubernetes v1.35 is tested with (kubernetes build/dependencies.yaml); KWOK
#: v0.8.0 (``sigs.k8s.io/kwok``, its own client-go v0.36.1, so built in a module of its own)
#: plays the nodes' kubelets.
VERSIONS: Mapping[str, str] = {
    "etcd": "v3.6.5",
    "kubernetes": "v1.35.2",
    "koordinator": "v1.8.0",
    "kwok": "v0.8.0",
}

#: Modules of Koordinator's replace list that the Go module proxy refuses at the pinned version
#: (HTTP 403 for k8s.io/externaljwt@v0.35.2 and k8s.io/kube-controller-manager@v0.35.2); both
#: are small API-only modules that only kube-apiserver uses, and v0.35.1 builds and runs.
PROXY_REFUSED: Mapping[str, tuple[str, str]] = {
    "k8s.io/externaljwt": ("v0.35.2", "v0.35.1"),
    "k8s.io/kube-controller-manager": ("v0.35.2", "v0.35.1"),
}

KOORD_MODULE = "github.com/koordinator-sh/koordinator"
KUBE_MODULE = "k8s.io/kubernetes"
KWOK_MODULE = "sigs.k8s.io/kwok"
_HOST = "127.0.0.1"
_BUILD_MARKER = ".gangstate-build-complete"
#: bump when the build recipe below changes, so cached binaries of an older recipe are rebuilt
_RECIPE = "2"

# -- the two flavours ----------------------------------------------------------------------------

#: Kubernetes' own gang scheduling (KEP-4671) as released in v1.37.2, served by the Go module
#: proxy with every staging module at v0.37.2; etcd and KWOK as in :data:`VERSIONS`.
NATIVE_VERSIONS: Mapping[str, str] = {
    "etcd": VERSIONS["etcd"],
    "kubernetes": "v1.37.2",
    "kwok": VERSIONS["kwok"],
}

#: The feature gates of the native control plane, on kube-apiserver, kube-controller-manager and
#: kube-scheduler alike (k8s.io/kubernetes v1.37.2 pkg/features/kube_features.go): GenericWorkload
#: (beta, off by default: the Workload and PodGroup APIs, pods' ``spec.schedulingGroup``, the
#: scheduler's GangScheduling plugin, the bootstrap RBAC of scheduling.k8s.io), WorkloadWithJob
#: (alpha: the Job controller creates a Workload and a PodGroup per Job; needs GenericWorkload),
#: CompositePodGroup (alpha: trees of groups with a quorum; needs GenericWorkload and
#: TopologyAwareWorkloadScheduling), TopologyAwareWorkloadScheduling (alpha; needs GenericWorkload).
NATIVE_FEATURE_GATES: tuple[str, ...] = (
    "GenericWorkload", "WorkloadWithJob", "CompositePodGroup", "TopologyAwareWorkloadScheduling")

#: The API versions to serve besides the defaults: Workload and PodGroup are served at v1beta1
#: and CompositePodGroup at v1alpha3 only (pkg/apis/scheduling/install/install.go; beta and
#: alpha versions are off unless asked for).
NATIVE_RUNTIME_CONFIG: tuple[str, ...] = ("scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3")

#: bump when the native build recipe changes
_NATIVE_RECIPE = "1"


@dataclass(frozen=True)
class Flavour:
    """What differs between the local control planes; everything else is shared.

    ``name`` is what :class:`LocalCluster` and the script take (``koordinator``, ``native``);
    ``versions`` the pinned versions (``etcd``, ``kubernetes``, ``kwok``, and ``koordinator`` for
    that flavour); ``scheduler`` the scheduler's binary, which is also its component name
    (:meth:`LocalCluster.log_path`, :meth:`LocalCluster.pid`); ``scheduler_name`` the profile's
    ``schedulerName`` pods ask for; ``feature_gates`` gates turned on in kube-apiserver,
    kube-controller-manager and the scheduler; ``runtime_config`` API versions the API server
    serves besides its defaults; ``crds`` whether the binaries come with CRDs to install;
    ``scheduler_verbosity`` the scheduler's ``--v``.
    """

    name: str
    versions: Mapping[str, str]
    scheduler: str
    scheduler_name: str
    feature_gates: tuple[str, ...] = ()
    runtime_config: tuple[str, ...] = ()
    crds: bool = False
    scheduler_verbosity: int = 2

    def gate_args(self) -> list[str]:
        """``--feature-gates=A=true,B=true`` (nothing when the flavour turns no gate on)."""
        if not self.feature_gates:
            return []
        return ["--feature-gates=" + ",".join(f"{g}=true" for g in self.feature_gates)]

    def apiserver_args(self) -> list[str]:
        """The API server's flavour flags: its gates and ``--runtime-config``."""
        args = self.gate_args()
        if self.runtime_config:
            args.append("--runtime-config=" + ",".join(f"{v}=true" for v in self.runtime_config))
        return args

    def cache_key(self) -> str:
        """The cache folder's name; changes with any pinned version or the recipe."""
        if self.name == "koordinator":
            return _version_key()
        v = self.versions
        return (f"native-kubernetes-{v['kubernetes']}-etcd-{v['etcd']}-kwok-{v['kwok']}"
                f"-r{_NATIVE_RECIPE}")


#: koord-scheduler v1.8.0 on Kubernetes v1.35.2 with Koordinator's CRDs (the default)
KOORDINATOR = Flavour("koordinator", VERSIONS, scheduler="koord-scheduler",
                      scheduler_name="koord-scheduler", crds=True, scheduler_verbosity=2)
#: kube-scheduler v1.37.2 with its own GangScheduling plugin, the gates of
#: :data:`NATIVE_FEATURE_GATES`; ``--v 4`` so that PreEnqueue refusals are in its log
#: (pkg/scheduler/backend/queue/scheduling_queue.go logs them at V(4))
NATIVE = Flavour("native", NATIVE_VERSIONS, scheduler="kube-scheduler",
                 scheduler_name="default-scheduler", feature_gates=NATIVE_FEATURE_GATES,
                 runtime_config=NATIVE_RUNTIME_CONFIG, crds=False, scheduler_verbosity=4)
FLAVOURS: Mapping[str, Flavour] = {f.name: f for f in (KOORDINATOR, NATIVE)}


def flavour_of(flavour: "str | Flavour") -> Flavour:
    """The :class:`Flavour` named ``flavour`` (or ``flavour`` itself); :class:`ClusterError`
    naming the known ones otherwise."""
    if isinstance(flavour, Flavour):
        return flavour
    try:
        return FLAVOURS[flavour]
    except KeyError:
        raise ClusterError(f"unknown control plane flavour {flavour!r} (known: "
                           f"{', '.join(FLAVOURS)})") from None


# -- the scheduler's configuration --------------------------------------------------------------

#: The koord-scheduler profile: kube-scheduler's default plugins plus Coscheduling at every
#: extension point it implements (Koordinator's own config/manager/scheduler-config.yaml at
#: v1.8.0 enables it at preEnqueue, preFilter, postFilter, preScore, score, reserve, permit,
#: preBind and postBind). DeviceShare is left out, so ``nvidia.com/gpu`` is an ordinary extended
#: resource checked by NodeResourcesFit ("Insufficient nvidia.com/gpu"), as on the recording
#: in the project brief.
SCHEDULER_NAME = "koord-scheduler"
_COSCHEDULING_POINTS = ("preEnqueue", "preFilter", "postFilter", "preScore", "reserve",
                        "permit", "preBind", "postBind")


def scheduler_config(kubeconfig: Path, flavour: "str | Flavour" = "koordinator") -> dict[str, Any]:
    """Return the ``KubeSchedulerConfiguration`` (a JSON-ready dict) the flavour's scheduler runs
    with: koord-scheduler's profile enables Coscheduling; kube-scheduler v1.37.2's profile
    ``default-scheduler`` keeps the default plugins, which include GangScheduling (at every
    point it implements: PreEnqueue, Permit, PlacementFeasible) whenever GenericWorkload is on
    (pkg/scheduler/apis/config/v1/default_plugins.go ``applyGangScheduling``), so it needs no
    plugin list.

    Shape: ``kubeconfig`` is the scheduler user's kubeconfig file.
    """
    fl = flavour_of(flavour)
    profile: dict[str, Any] = {"schedulerName": fl.scheduler_name}
    if fl.name == "koordinator":
        plugins: dict[str, Any] = {p: {"enabled": [{"name": "Coscheduling"}]}
                                   for p in _COSCHEDULING_POINTS}
        plugins["score"] = {"enabled": [{"name": "Coscheduling", "weight": 1}]}
        profile["plugins"] = plugins
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "profiles": [profile],
    }


def scheduler_argv(flavour: "str | Flavour", binary: Path, config: Path, kubeconfig: Path,
                   port: int) -> list[str]:
    """The scheduler's command line: its configuration file (:func:`scheduler_config`), its
    secure port on loopback, the kubeconfig that authenticates and authorises its clients, its
    ``--v`` and the flavour's gates."""
    fl = flavour_of(flavour)
    argv = [str(binary), "--config", str(config), "--bind-address", _HOST,
            "--secure-port", str(port)]
    if fl.name == "koordinator":
        # its deprecated plain-HTTP healthz would listen on 0.0.0.0:10251 (Koordinator
        # v1.8.0 cmd/koord-scheduler/app/options/insecure_serving.go:75-76): off
        argv += ["--port", "0"]
    argv += ["--authentication-kubeconfig", str(kubeconfig),
             "--authorization-kubeconfig", str(kubeconfig),
             "--v", str(fl.scheduler_verbosity), *fl.gate_args()]
    return argv


# -- errors, cache, lock -------------------------------------------------------------------------


class ClusterError(RuntimeError):
    """The control plane could not be built, started or reached.

    The message carries the reason and the tail of the relevant output (the Go build's log for
    :func:`build`; the component's log for :meth:`LocalCluster.start`).
    """


if not __package__:  # run as a script (python deploy/cluster/controlplane.py): the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # root makes deploy importable

# the broker's standard-library helpers (cache root, file lock, log tails, free ports), shared
from deploy.kafka import broker as _SHARED  # noqa: E402 - after the script's path above

cache_root = _SHARED.cache_root
_tail, _file_tail, free_ports = _SHARED.tail, _SHARED.file_tail, _SHARED.free_ports


def _version_key() -> str:
    return "-".join(f"{name}-{VERSIONS[name]}"
                    for name in ("etcd", "kubernetes", "koordinator", "kwok")) + f"-r{_RECIPE}"


# -- build ---------------------------------------------------------------------------------------

_ETCD_MAIN = """// Built by gangstate's deploy/cluster/controlplane.py: etcd's own entry point.
package main

import (
\t"os"

\t"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
"""

_TOOLS_GO = """//go:build tools

// Built by gangstate's deploy/cluster/controlplane.py: pins the main packages.
package tools

import (
{imports})
"""

#: the main packages each flavour's wrapper module builds (kwok and etcd have modules of their own)
_KOORD_MAINS = (f"{KOORD_MODULE}/cmd/koord-scheduler", f"{KUBE_MODULE}/cmd/kube-apiserver",
                f"{KUBE_MODULE}/cmd/kube-controller-manager")
_NATIVE_MAINS = (f"{KUBE_MODULE}/cmd/kube-apiserver", f"{KUBE_MODULE}/cmd/kube-controller-manager",
                 f"{KUBE_MODULE}/cmd/kube-scheduler")


def _tools_go(mains: Iterable[str]) -> str:
    return _TOOLS_GO.format(imports="".join(f"\t_ \"{m}\"\n" for m in sorted(mains)))


Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def _go() -> str:
    go = shutil.which("go")
    if not go:
        raise ClusterError("building the control plane needs Go (1.26+) on PATH")
    return go


def _run_logged(cmd: Sequence[str], cwd: Path, log: Path, env: Mapping[str, str],
                timeout: float, what: str) -> None:
    with open(log, "a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        try:
            rc = subprocess.run(list(cmd), cwd=cwd, env=dict(env), stdout=fh,
                                stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            raise ClusterError(f"{what} took longer than {timeout:.0f} s; the tail of {log}:\n"
                               f"{_file_tail(log)}") from None
    if rc != 0:
        raise ClusterError(f"{what} failed (exit {rc}); the tail of {log}:\n{_file_tail(log)}")


def _go_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["GOFLAGS"] = "-mod=mod"
    env.setdefault("CGO_ENABLED", "0")
    env["GOTOOLCHAIN"] = "local"
    return env


def _module_dir(module: str, version: str, work: Path, log: Path, env: Mapping[str, str]) -> Path:
    """Download ``module@version`` into the Go module cache and return its folder."""
    with open(log, "a") as fh:
        fh.write(f"\n$ go mod download -json {module}@{version}\n")
    out = subprocess.run([_go(), "mod", "download", "-json", f"{module}@{version}"], cwd=work,
                         env=dict(env), capture_output=True, text=True, timeout=900)
    with open(log, "a") as fh:
        fh.write(out.stdout[-4000:] + out.stderr[-4000:])
    if out.returncode != 0:
        raise ClusterError(f"go mod download {module}@{version} failed:\n"
                           f"{_tail(out.stdout + out.stderr)}")
    return Path(json.loads(out.stdout)["Dir"])


def _write_wrapper_module(work: Path, source_dir: Path, name: str, gomod: str,
                          require: tuple[str, str], mains: Iterable[str]) -> None:
    """A wrapper module: ``gomod`` (a dependency's go.mod, edited) with its ``module`` line
    renamed to ``name`` and ``require`` (module, version) added, the dependency's go.sum, and a
    tools.go importing ``mains``. Go ignores a dependency's replace directives, so the build
    runs in a module that carries them as its own."""
    lines = gomod.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("module "))
    lines[at] = f"module {name}"
    text = "\n".join(lines) + f"\n\nrequire {require[0]} {require[1]}\n"
    (work / "go.mod").write_text(text)
    shutil.copyfile(source_dir / "go.sum", work / "go.sum")
    (work / "go.sum").chmod(0o644)
    (work / "tools.go").write_text(_tools_go(mains))


def _write_kube_module(work: Path, koord_dir: Path) -> None:
    """The koordinator flavour's wrapper module: Koordinator's go.mod/go.sum, so its replace
    directives apply (Koordinator v1.8.0 replaces every ``k8s.io/*`` staging module to
    v0.35.2), with the modules of :data:`PROXY_REFUSED` swapped for a served version."""
    text = (koord_dir / "go.mod").read_text()
    for module, (refused, served) in PROXY_REFUSED.items():
        text = text.replace(f"{module} => {module} {refused}", f"{module} => {module} {served}")
    _write_wrapper_module(work, koord_dir, "gangstate.local/controlplane", text,
                          (KOORD_MODULE, VERSIONS["koordinator"]), _KOORD_MAINS)


#: a replace directive of k8s.io/kubernetes' own go.mod pointing into its staging tree
_STAGING_REPLACE = re.compile(r"=>\s*\./staging/src/(k8s\.io/[A-Za-z0-9._/-]+)")


def staging_version(kubernetes: str) -> str:
    """The version of the ``k8s.io/*`` staging modules released with ``kubernetes``
    (``v1.37.2`` -> ``v0.37.2``)."""
    _, minor, patch = kubernetes.lstrip("v").split(".", 2)
    return f"v0.{minor}.{patch}"


def _write_native_module(work: Path, kube_dir: Path) -> None:
    """The native flavour's wrapper module: k8s.io/kubernetes' own go.mod and go.sum, each
    ``=> ./staging/src/k8s.io/X`` (a folder of its repository, absent from the module) replaced
    by ``=> k8s.io/X <staging version>`` as served by the proxy."""
    version = NATIVE_VERSIONS["kubernetes"]
    staged = staging_version(version)
    text = _STAGING_REPLACE.sub(lambda m: f"=> {m.group(1)} {staged}",
                                (kube_dir / "go.mod").read_text())
    _write_wrapper_module(work, kube_dir, "gangstate.local/native", text,
                          (KUBE_MODULE, version), _NATIVE_MAINS)


def _write_kwok_module(work: Path) -> None:
    """KWOK in a module of its own: it needs client-go v0.36.1, Koordinator pins v0.35.2."""
    (work / "go.mod").write_text(f"module gangstate.local/kwok\n\ngo 1.26\n\n"
                                 f"require {KWOK_MODULE} {VERSIONS['kwok']}\n")
    (work / "tools.go").write_text(
        "//go:build tools\n\n// Built by gangstate's deploy/cluster/controlplane.py.\n"
        f"package tools\n\nimport _ \"{KWOK_MODULE}/cmd/kwok\"\n")


def _write_etcd_module(work: Path) -> None:
    v = VERSIONS["etcd"]
    mods = ["go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/api/v3", "go.etcd.io/etcd/client/pkg/v3",
            "go.etcd.io/etcd/client/v3", "go.etcd.io/etcd/pkg/v3"]
    req = "\n".join(f"\t{m} {v}" for m in mods)
    (work / "go.mod").write_text(f"module gangstate.local/etcd\n\ngo 1.24\n\nrequire (\n{req}\n)\n")
    (work / "main.go").write_text(_ETCD_MAIN)


def binaries_dir(cache_dir: Path | None = None, flavour: "str | Flavour" = "koordinator") -> Path:
    """Return where the binaries of ``flavour`` live (built or not).

    Shape: ``<cache>/controlplane/<Flavour.cache_key>/bin``, e.g.
    ``etcd-v3.6.5-kubernetes-v1.35.2-koordinator-v1.8.0-kwok-v0.8.0-r2`` or
    ``native-kubernetes-v1.37.2-etcd-v3.6.5-kwok-v0.8.0-r1``.
    """
    root = Path(cache_dir).expanduser() if cache_dir is not None else cache_root()
    return root / "controlplane" / flavour_of(flavour).cache_key() / "bin"


def is_built(cache_dir: Path | None = None, flavour: "str | Flavour" = "koordinator") -> bool:
    """True when the binaries of ``flavour`` are in the cache, complete."""
    return (binaries_dir(cache_dir, flavour).parent / _BUILD_MARKER).exists()


def kube_ldflags(kubernetes: str) -> str:
    """``-ldflags`` of kube-apiserver, kube-controller-manager and kube-scheduler: stripped, and
    linked with their version, or ``kubectl version`` cannot parse the server's."""
    major, minor = kubernetes.lstrip("v").split(".")[:2]
    xflags = " ".join(f"-X k8s.io/component-base/version.{k}={v}" for k, v in
                      (("gitVersion", kubernetes), ("gitMajor", major), ("gitMinor", minor)))
    return f"-ldflags=-s -w {xflags}"


class _Builder:
    """One cache entry's build: the go commands, logged to ``log``, outputs into ``staging``."""

    def __init__(self, staging: Path, log: Path, env: Mapping[str, str], timeout: float,
                 progress: Progress, tmp: Path) -> None:
        self.staging, self.log, self.env, self.timeout = staging, log, env, timeout
        self.progress, self.tmp, self.go = progress, tmp, _go()

    def workdir(self, name: str) -> Path:
        work = self.tmp / name
        work.mkdir()
        return work

    def run(self, args: Sequence[str], cwd: Path, what: str) -> None:
        _run_logged([self.go, *args], cwd, self.log, self.env, self.timeout, what)

    def binary(self, out: str, package: str, cwd: Path, ldflags: str = "-ldflags=-s -w") -> None:
        self.run(["build", "-trimpath", ldflags, "-o", str(self.staging / out), package], cwd,
                 f"building {out}")

    def etcd(self) -> None:
        work = self.workdir("etcd")
        _write_etcd_module(work)
        self.run(["mod", "tidy"], work, "go mod tidy (etcd)")
        self.binary("etcd", ".", work)

    def kwok(self) -> None:
        work = self.workdir("kwok")
        self.progress(f"building kwok {VERSIONS['kwok']} ...")
        _write_kwok_module(work)
        self.run(["mod", "tidy"], work, "go mod tidy (kwok)")
        self.binary("kwok", f"{KWOK_MODULE}/cmd/kwok", work)

    def reuse_or(self, name: str, other: Path, make: Callable[[], None]) -> None:
        """Copy binary ``name`` from the built folder ``other`` (the same pinned version), or
        ``make`` it."""
        if (other / name).is_file():
            self.progress(f"reusing {name} from {other}")
            shutil.copy2(other / name, self.staging / name)
        else:
            make()


def build(cache_dir: Path | None = None, *, flavour: "str | Flavour" = "koordinator",
          progress: Progress = _quiet, timeout: float = 3600.0) -> Path:
    """Build (or reuse) the binaries of ``flavour``; return their folder.

    Shapes: ``cache_dir`` is the cache root (default :func:`cache_root`); the result is
    :func:`binaries_dir`. The ``koordinator`` flavour holds ``etcd``, ``kube-apiserver``,
    ``kube-controller-manager``, ``koord-scheduler``, ``kwok`` and Koordinator's ``crds/``; the
    ``native`` one ``etcd``, ``kube-apiserver``, ``kube-controller-manager``, ``kube-scheduler``
    (k8s.io/kubernetes v1.37.2) and ``kwok``, its etcd and kwok copied from the koordinator
    flavour's folder when that is built (the same versions), else built the same way.
    ``progress`` receives one line per step; ``timeout`` bounds each ``go`` command, in seconds.
    Concurrent callers (threads or processes) serialise on a lock file next to the binaries, and
    only one of them builds. A failed build raises :class:`ClusterError` with the tail of the
    build log (kept at ``<version folder>/build.log``) and leaves no half-built cache entry.
    Cold, on 2 cores here (koordinator): 6 min 46 s in all (1.8 GiB peak memory); the module
    cache grows by 0.9 GiB and the build cache by 2.7 GiB; native, from empty Go caches: 10 min
    29 s (module cache 1.2 GiB, build cache 4.4 GiB; docs/cluster.md). A caller that finds another build under way says so through ``progress``
    and waits for it.
    """
    fl = flavour_of(flavour)
    bindir = binaries_dir(cache_dir, fl)
    base = bindir.parent
    what = "the control plane" if fl.name == "koordinator" else f"the {fl.name} control plane"
    with _cache_entry(base, bindir, what, fl.cache_key(), progress) as entry:
        if entry is None:
            return bindir
        log, staging = entry
        with tempfile.TemporaryDirectory(prefix="gangstate-cp-build-") as tmp:
            b = _Builder(staging, log, _go_env(base), timeout, progress, Path(tmp))
            if fl.name == "koordinator":
                _build_koordinator(b)
            else:
                _build_native(b, binaries_dir(cache_dir, KOORDINATOR) if is_built(
                    cache_dir, KOORDINATOR) else None)
    return bindir


def _build_koordinator(b: _Builder) -> None:
    b.progress(f"building etcd {VERSIONS['etcd']} (the whole cold build: ~10 min on 2 cores) ...")
    b.etcd()
    b.progress(f"fetching Koordinator {VERSIONS['koordinator']} ...")
    kube_work = b.workdir("kube")
    koord_dir = _module_dir(KOORD_MODULE, VERSIONS["koordinator"], kube_work, b.log, b.env)
    _write_kube_module(kube_work, koord_dir)
    kv = VERSIONS["kubernetes"]
    for name in ("kube-apiserver", "kube-controller-manager"):
        b.progress(f"building {name} {kv} ...")
        b.binary(name, f"{KUBE_MODULE}/cmd/{name}", kube_work, kube_ldflags(kv))
    b.progress(f"building koord-scheduler {VERSIONS['koordinator']} ...")
    b.binary("koord-scheduler", f"{KOORD_MODULE}/cmd/koord-scheduler", kube_work)
    crds = b.staging / "crds"
    crds.mkdir()
    for crd in sorted((koord_dir / "config" / "crd" / "bases").glob("*.yaml")):
        shutil.copyfile(crd, crds / crd.name)
        (crds / crd.name).chmod(0o644)
    b.kwok()


def _build_native(b: _Builder, koordinator_bin: Path | None) -> None:
    kv = NATIVE_VERSIONS["kubernetes"]
    if koordinator_bin is None:
        b.progress(f"building etcd {VERSIONS['etcd']} ...")
        b.etcd()
    else:
        b.reuse_or("etcd", koordinator_bin, b.etcd)
    b.progress(f"fetching {KUBE_MODULE} {kv} (the whole cold build: ~10 min on 2 cores) ...")
    work = b.workdir("native")
    kube_dir = _module_dir(KUBE_MODULE, kv, work, b.log, b.env)
    _write_native_module(work, kube_dir)
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        b.progress(f"building {name} {kv} ...")
        b.binary(name, f"{KUBE_MODULE}/cmd/{name}", work, kube_ldflags(kv))
    if koordinator_bin is None:
        b.kwok()
    else:
        b.reuse_or("kwok", koordinator_bin, b.kwok)


@contextlib.contextmanager
def _cache_entry(base: Path, final: Path, what: str, header: str,
                 progress: Progress) -> Iterator[tuple[Path, Path] | None]:
    """One cache entry built at most once: under ``base``'s lock file, yields ``None`` when the
    entry is already built (its marker exists), else ``(build log, staging folder)``; when the
    block ends without an exception, the staging folder becomes ``final`` and the marker is
    written (with the seconds it took). An exception leaves no marker and no ``final``: the
    next caller builds again. ``what`` names the entry in progress lines, ``header`` heads the
    log."""
    base.mkdir(parents=True, exist_ok=True)
    lock = base / ".lock"
    with _SHARED.file_lock(lock, lambda: progress(
            f"waiting for another build of {what} (lock {lock}) ...")):
        if (base / _BUILD_MARKER).exists():
            yield None
            return
        log = base / "build.log"
        log.write_text(f"gangstate {header}\n")
        staging = base / "bin.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        started = time.monotonic()
        yield log, staging
        shutil.rmtree(final, ignore_errors=True)
        staging.rename(final)
        (base / _BUILD_MARKER).write_text(f"{time.monotonic() - started:.0f} s\n")
        progress(f"{what} built in {time.monotonic() - started:.0f} s ({final})")


# -- the scheduler shim build ------------------------------------------------------------------

#: gangstate's scheduler shim: a Go module of this repository (``shim/``) whose
#: ``cmd/koord-scheduler`` is Koordinator's scheduler with Coscheduling wrapped (docs/shim.md).
SHIM_DIR = Path(__file__).resolve().parents[2] / "shim"
#: bump when the shim's build recipe below changes
_SHIM_RECIPE = "1"


def shim_sources(shim_dir: Path | None = None) -> list[Path]:
    """The files the shim binary is built from (``go.mod``, ``go.sum``, every ``.go`` file but
    tests), sorted; their content decides the cache entry."""
    root = Path(shim_dir or SHIM_DIR)
    files = [root / "go.mod", root / "go.sum"]
    files += [f for f in root.rglob("*.go") if not f.name.endswith("_test.go")]
    return sorted(f for f in files if f.is_file())


def shim_key(shim_dir: Path | None = None) -> str:
    """The shim's cache key: Koordinator's version, the build recipe and the first 16 hex
    digits of sha256 over the sources (relative path and content of each)."""
    import hashlib

    root = Path(shim_dir or SHIM_DIR)
    digest = hashlib.sha256()
    for f in shim_sources(root):
        digest.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return f"koordinator-{VERSIONS['koordinator']}-r{_SHIM_RECIPE}-{digest.hexdigest()[:16]}"


def shim_binary(cache_dir: Path | None = None, shim_dir: Path | None = None) -> Path:
    """Where the shim's koord-scheduler of the current sources lives (built or not).

    Shape: ``<cache>/controlplane/shim/<shim_key>/bin/koord-scheduler``."""
    root = Path(cache_dir).expanduser() if cache_dir is not None else cache_root()
    return root / "controlplane" / "shim" / shim_key(shim_dir) / "bin" / "koord-scheduler"


def build_shim(cache_dir: Path | None = None, *, shim_dir: Path | None = None,
               progress: Progress = _quiet, timeout: float = 3600.0) -> Path:
    """Build (or reuse) the shim's koord-scheduler; return the binary's path.

    Cached by :func:`shim_key` (Koordinator's version + a hash of the shim's sources) under
    ``<cache>/controlplane/shim/``, with the same lock, marker and build-log tail on failure as
    :func:`build`. The sources are copied to a scratch folder first, so the build never writes
    into the repository. On 2 cores here, with the Go build cache warm from :func:`build`: 36 s;
    cold (no Go build cache) about as long as the koord-scheduler part of :func:`build`.
    """
    binary = shim_binary(cache_dir, shim_dir)
    base = binary.parent.parent
    with _cache_entry(base, binary.parent, "the shim", f"shim build {base.name}",
                      progress) as entry:
        if entry is None:
            return binary
        log, staging = entry
        progress(f"building the shim's koord-scheduler ({base.name}) ...")
        with tempfile.TemporaryDirectory(prefix="gangstate-shim-build-") as tmp:
            work = Path(tmp) / "shim"
            shutil.copytree(Path(shim_dir or SHIM_DIR), work,
                            ignore=shutil.ignore_patterns("*_test.go"))
            _run_logged([_go(), "build", "-trimpath", "-ldflags=-s -w", "-o",
                         str(staging / "koord-scheduler"), "./cmd/koord-scheduler"],
                        work, log, _go_env(base), timeout, "building the shim's koord-scheduler")
    return binary


# -- nodes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeSpec:
    """A fake Node: an API object with ``status.capacity`` and ``allocatable`` and Ready=True.

    Shapes: ``cpu`` and ``memory`` are Kubernetes quantities (``"8"``, ``"32Gi"``), ``gpu`` the
    count of ``nvidia.com/gpu``; ``pods`` the pod capacity; ``taints`` a list of
    ``{"key", "value", "effect"}`` dicts; ``labels`` extra labels.
    """

    name: str
    cpu: str = "8"
    memory: str = "32Gi"
    gpu: int = 0
    pods: int = 110
    taints: tuple[Mapping[str, str], ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> "NodeSpec":
        """Build from a dict as written in a nodes spec file (keys as the fields)."""
        known = {"name", "cpu", "memory", "gpu", "pods", "taints", "labels"}
        extra = set(raw) - known
        if extra:
            raise ClusterError(f"node spec {raw.get('name', '?')!r}: unknown keys {sorted(extra)}"
                               f" (known: {sorted(known)})")
        if not raw.get("name"):
            raise ClusterError(f"node spec without a name: {dict(raw)}")
        for taint in raw.get("taints", ()) or ():
            if not isinstance(taint, Mapping) or set(taint) - {"key", "value", "effect"} \
                    or taint.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                raise ClusterError(f"node spec {raw['name']!r}: a taint is {{key, value, effect}} "
                                   f"with effect NoSchedule, PreferNoSchedule or NoExecute, not "
                                   f"{taint!r}")
        for key in ("cpu", "memory"):
            if key in raw and not _QUANTITY.fullmatch(str(raw[key])):
                raise ClusterError(f"node spec {raw['name']!r}: {key} {raw[key]!r} is not a "
                                   f"Kubernetes quantity (e.g. 8, 500m, 32Gi)")
        for key in ("gpu", "pods"):
            if key in raw and (not isinstance(raw[key], int) or raw[key] < 0):
                raise ClusterError(f"node spec {raw['name']!r}: {key} must be a whole number "
                                   f"of at least 0, not {raw[key]!r}")
        return cls(name=str(raw["name"]), cpu=str(raw.get("cpu", "8")),
                   memory=str(raw.get("memory", "32Gi")), gpu=int(raw.get("gpu", 0)),
                   pods=int(raw.get("pods", 110)),
                   taints=tuple(dict(t) for t in raw.get("taints", ()) or ()),
                   labels=dict(raw.get("labels", {}) or {}))

    def manifest(self) -> dict[str, Any]:
        """The Node object (without status) to create."""
        labels = {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux",
                  **self.labels}
        spec: dict[str, Any] = {}
        if self.taints:
            spec["taints"] = [dict(t) for t in self.taints]
        key, value = KWOK_ANNOTATION
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": self.name, "labels": labels,
                             "annotations": {key: value}}, "spec": spec}

    def status(self) -> dict[str, Any]:
        """The ``status`` to patch in: capacity = allocatable; the conditions (Ready) are
        KWOK's to report, as a kubelet's would be."""
        resources = {"cpu": self.cpu, "memory": self.memory, "pods": str(self.pods)}
        if self.gpu:
            resources["nvidia.com/gpu"] = str(self.gpu)
        return {"capacity": resources, "allocatable": resources}


#: the API server's own pattern for quantities (apimachinery pkg/api/resource/quantity.go)
_QUANTITY = re.compile(r"[+-]?[0-9.]+[eEinumkKMGTP]*[-+]?[0-9]*")

DEFAULT_NODES: tuple[NodeSpec, ...] = (
    NodeSpec("node-a", cpu="8", memory="32Gi", gpu=1),
    NodeSpec("node-b", cpu="8", memory="32Gi", gpu=1),
)


def load_nodes(path: Path) -> list[NodeSpec]:
    """Read a nodes spec file: YAML (or JSON) ``[{name, cpu, memory, gpu, pods, taints,
    labels}, ...]`` or ``{nodes: [...]}``. Raises :class:`ClusterError` naming what is wrong
    (the API server's own validation of names and quantities comes at start)."""
    import yaml

    try:
        raw = yaml.safe_load(Path(path).read_text())
    except OSError as err:
        raise ClusterError(f"cannot read the nodes spec {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise ClusterError(f"{path}: not YAML: {err}") from None
    if isinstance(raw, dict):
        raw = raw.get("nodes")
    if not isinstance(raw, list):
        raise ClusterError(f"{path}: expected a list of nodes (or {{nodes: [...]}})")
    return [NodeSpec.from_mapping(n) for n in raw]


# -- running -------------------------------------------------------------------------------------

_LIVE: "weakref.WeakSet[LocalCluster]" = weakref.WeakSet()


def _stop_all_at_exit() -> None:
    for cluster in list(_LIVE):
        with contextlib.suppress(Exception):
            cluster.stop()


atexit.register(_stop_all_at_exit)


#: Users of the token file. The scheduler runs as a cluster admin (it is not what is tested here);
#: gangstate's components authenticate as the ServiceAccounts of deploy/kubernetes/rbac.yaml
#: with tokens from the TokenRequest API, so the shipped RBAC is exactly what they get.
_TOKEN_USERS = {"admin": ("gangstate-admin", "system:masters"),
                "scheduler": ("system:kube-scheduler", "system:masters"),
                "controller-manager": ("system:kube-controller-manager", "system:masters"),
                "kwok": ("kwok", "system:masters")}


def token_users(flavour: "str | Flavour" = "koordinator") -> dict[str, tuple[str, str]]:
    """The token file's users of ``flavour``: {user: (name, groups)}. The native flavour's
    kube-scheduler is ``system:kube-scheduler`` with no group: it gets exactly the bootstrap
    RBAC of kube-apiserver v1.37.2 (ClusterRoles ``system:kube-scheduler`` and
    ``system:volume-scheduler``, which with GenericWorkload and CompositePodGroup on read
    podgroups and compositepodgroups and patch their status:
    plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go), so a missing permission
    shows in its log as it would on a real cluster."""
    users = dict(_TOKEN_USERS)
    if flavour_of(flavour).name == "native":
        users["scheduler"] = ("system:kube-scheduler", "")
    return users

#: the annotation KWOK manages nodes by (``--manage-nodes-with-annotation-selector``)
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
#: the kubelet KWOK plays: Stages for nodes and pods (the file says what a test can ask)
KWOK_STAGES = Path(__file__).resolve().parent / "kwok-stages.yaml"
#: the taint TaintNodesByCondition puts on a new Node, which kube-controller-manager's node
#: lifecycle controller lifts once the node reports Ready
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


class LocalCluster:
    """etcd, kube-apiserver, kube-controller-manager, KWOK and a scheduler on 127.0.0.1, with
    Nodes whose kubelet KWOK plays.

    Shapes: ``nodes`` is a sequence of :class:`NodeSpec` (default :data:`DEFAULT_NODES`: two
    nodes of 8 cpu, 32Gi and 1 ``nvidia.com/gpu``); ``workdir`` a scratch folder (default: a new
    temporary one, removed by :meth:`stop`); ``scheduler`` whether to run the scheduler;
    ``flavour`` which control plane (:class:`Flavour` or its name): ``"koordinator"`` (the
    default: Kubernetes v1.35.2, Koordinator's CRDs, koord-scheduler v1.8.0, pods ask for
    ``schedulerName: koord-scheduler``) or ``"native"`` (Kubernetes v1.37.2 with the gates of
    :data:`NATIVE_FEATURE_GATES`, the scheduling.k8s.io v1beta1 and v1alpha3 APIs and
    kube-scheduler with its GangScheduling plugin as ``default-scheduler``; no CRDs, no shim).
    :attr:`scheduler_component` is the scheduler's component name (``koord-scheduler`` or
    ``kube-scheduler``) for :meth:`log_path` and :meth:`pid`.
    After :meth:`start`: :attr:`server` is ``https://127.0.0.1:<port>``, :attr:`ca_file` the
    API server's serving certificate (its own CA), :meth:`kubeconfig` writes a kubeconfig for a
    user, :meth:`token_for_service_account` mints a token for a ServiceAccount. Use it as a
    context manager or call :meth:`stop`; an ``atexit`` hook stops what is left;
    :meth:`restart` restarts one component, :meth:`add_node` adds a node.
    """

    def __init__(self, nodes: Sequence[NodeSpec] = DEFAULT_NODES, *,
                 workdir: Path | None = None, scheduler: bool = True,
                 cache_dir: Path | None = None, progress: Progress = _quiet,
                 shim: Mapping[str, str] | None = None,
                 flavour: "str | Flavour" = "koordinator") -> None:
        self.flavour = flavour_of(flavour)
        if shim is not None and self.flavour.name != "koordinator":
            raise ClusterError("the shim wraps koord-scheduler: it runs on the koordinator "
                               f"flavour only, not {self.flavour.name!r}")
        #: the scheduler's binary and component name
        self.scheduler_component = self.flavour.scheduler
        self.nodes = list(nodes)
        #: ``None``: Koordinator's koord-scheduler; a mapping: the shim's build (docs/shim.md),
        #: run with these environment variables (``KAFKA_BOOTSTRAP_SERVERS``, ...)
        self.shim = None if shim is None else dict(shim)
        self._given_workdir = workdir
        self.workdir: Path | None = None
        self.with_scheduler = scheduler
        self._cache_dir = cache_dir
        self._progress = progress
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._argv: dict[str, tuple[list[str], dict[str, str] | None]] = {}
        self._tokens: dict[str, str] = {}
        self._lock = threading.Lock()
        self.server = ""
        self.ca_file = Path()
        self.bindir = Path()
        self.scheduler_port = 0

    # -- paths and clients --

    def _path(self, *parts: str) -> Path:
        assert self.workdir is not None, "the cluster is not started"
        return self.workdir.joinpath(*parts)

    def log_path(self, component: str) -> Path:
        """The log file of ``component`` (``etcd``, ``kube-apiserver``,
        :attr:`scheduler_component`, ...)."""
        return self._path("logs", f"{component}.log")

    def kubeconfig(self, user: str = "admin", token: str | None = None) -> Path:
        """Write (once) and return a kubeconfig for ``user`` (``admin``, ``scheduler`` or any
        name when ``token`` is given), verifying the server against :attr:`ca_file`."""
        path = self._path("kubeconfigs", f"{user}.yaml")
        token = token or self._tokens[user]
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": "gangstate-local",
            "clusters": [{"name": "gangstate-local", "cluster": {
                "server": self.server, "certificate-authority": str(self.ca_file)}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "gangstate-local", "context": {
                "cluster": "gangstate-local", "user": user}}],
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cfg, indent=1))
        path.chmod(0o600)
        return path

    def api_client(self, user: str = "admin", token: str | None = None) -> Any:
        """A ``kubernetes.client.ApiClient`` for ``user`` (see :meth:`kubeconfig`)."""
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(config_file=str(self.kubeconfig(user, token)),
                                client_configuration=cfg)
        return client.ApiClient(cfg)

    def _request(self, method: str, path: str, body: Any = None, *, timeout: float = 10.0,
                 content_type: str = "application/json") -> Any:
        """One request as the admin, with the standard library (used while starting up)."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self._tokens['admin']}", "Content-Type": content_type,
            "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as err:
            try:
                reason = json.loads(err.read()).get("message", "")
            except ValueError:
                reason = ""
            raise ClusterError(f"the API server refused {method} {path}: {err.code} "
                               f"{err.reason}: {reason}") from None
        return json.loads(raw) if raw[:1] in (b"{", b"[") else raw.decode()

    # -- lifecycle --

    def start(self, timeout: float = 120.0) -> "LocalCluster":
        """Build or reuse the binaries, then start etcd, kube-apiserver, the CRDs (koordinator
        flavour), kube-controller-manager, KWOK, the Nodes (waiting until each is Ready and
        untainted) and the scheduler; return self. Raises :class:`ClusterError` with the failing
        component's log tail; on failure everything started is stopped again."""
        self.bindir = build(self._cache_dir, flavour=self.flavour, progress=self._progress)
        if self.with_scheduler and self.shim is not None:
            build_shim(self._cache_dir, progress=self._progress)
        with self._lock:
            if self._procs:
                return self
            if self._given_workdir and Path(self._given_workdir).exists() and \
                    any(Path(self._given_workdir).iterdir()):
                raise ClusterError(f"the workdir {self._given_workdir} is not empty (etcd would "
                                   f"start on old data): give a new or empty folder")
            self.workdir = (Path(self._given_workdir) if self._given_workdir else
                            Path(tempfile.mkdtemp(prefix="gangstate-cluster-")))
            for sub in ("logs", "etcd", "certs", "kubeconfigs"):
                self._path(sub).mkdir(parents=True, exist_ok=True)
            _LIVE.add(self)
            deadline = time.monotonic() + timeout
            try:
                self._start_etcd(deadline)
                self._start_apiserver(deadline)
                if self.flavour.crds:
                    self._install_crds(deadline)
                self._start_controller_manager(deadline)
                self._start_kwok(deadline)
                self._create_nodes(deadline)
                if self.with_scheduler:
                    self._start_scheduler(deadline)
            except BaseException:
                self._stop_locked()
                raise
        return self

    def stop(self, timeout: float = 20.0) -> None:
        """Stop every process started (SIGTERM, then SIGKILL) and remove the scratch folder
        (unless it was given)."""
        with self._lock:
            self._stop_locked(timeout)

    def _stop_locked(self, timeout: float = 20.0) -> None:
        for name in (self.scheduler_component, "kwok", "kube-controller-manager",
                     "kube-apiserver", "etcd"):
            proc = self._procs.pop(name, None)
            if proc is not None:
                terminate(proc, timeout)
        _LIVE.discard(self)
        if self.workdir is not None and self._given_workdir is None:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir = None

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def is_running(self, component: str) -> bool:
        """True while ``component``'s process is alive."""
        proc = self._procs.get(component)
        return proc is not None and proc.poll() is None

    def pid(self, component: str) -> int | None:
        """The process id of ``component`` (``kube-apiserver``, :attr:`scheduler_component`, ...)
        while it runs, else ``None`` (for its CPU time in ``/proc/<pid>/stat``)."""
        proc = self._procs.get(component)
        return proc.pid if proc is not None and proc.poll() is None else None

    def get(self, path: str, timeout: float = 10.0) -> Any:
        """``GET path`` on the API server as the admin: decoded JSON, or the text (``/metrics``).
        Raises ``ClusterError`` with the server's reason when refused."""
        return self._request("GET", path, timeout=timeout)

    def request(self, method: str, path: str, body: Any = None, *, timeout: float = 10.0,
                content_type: str = "application/json") -> Any:
        """One request to the API server as the admin, with the standard library: decoded JSON
        (or the text); :class:`ClusterError` with the server's reason when refused. For
        objects the ``kubernetes`` client does not model (the native flavour's
        scheduling.k8s.io PodGroups, a pod's ``spec.schedulingGroup``); ``content_type``
        ``application/merge-patch+json`` for a PATCH."""
        return self._request(method, path, body, timeout=timeout, content_type=content_type)

    def stop_scheduler(self) -> None:
        """Stop the scheduler alone (the API server keeps running)."""
        with self._lock:
            proc = self._procs.pop(self.scheduler_component, None)
            if proc is not None:
                terminate(proc, 20.0)

    def start_scheduler(self, timeout: float = 60.0) -> None:
        """(Re)start the scheduler against the running API server."""
        with self._lock:
            self._start_scheduler(time.monotonic() + timeout)

    def use_shim(self, shim: Mapping[str, str] | None, timeout: float = 60.0) -> None:
        """Run gangstate's shim build with the environment ``shim`` (``None``: Koordinator's
        koord-scheduler) from now on, restarting the scheduler when it runs; the shim is built
        first (cached), so the scheduler is down only for its restart."""
        if shim is not None:
            if self.flavour.name != "koordinator":
                raise ClusterError("the shim wraps koord-scheduler: it runs on the koordinator "
                                   f"flavour only, not {self.flavour.name!r}")
            build_shim(self._cache_dir, progress=self._progress)
        self.stop_scheduler()
        self.shim = None if shim is None else dict(shim)
        if self.with_scheduler:
            self.start_scheduler(timeout)

    # -- components --

    def _spawn(self, name: str, argv: list[str],
               env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = open(self.log_path(name), "ab")
        try:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    cwd=self.workdir,
                                    env=None if env is None else {**os.environ, **env})
        finally:
            log.close()
        self._procs[name] = proc
        self._argv[name] = (list(argv), None if env is None else dict(env))
        return proc

    def restart(self, component: str, timeout: float = 60.0) -> None:
        """Stop ``component`` (``kube-apiserver``, ``kube-controller-manager``, ``kwok``; the
        scheduler has :meth:`start_scheduler`) and start it again with the same
        arguments (the same port, certificates and etcd), then wait until it is ready again;
        for tests of what a restart does to the clients. :class:`ClusterError` if it does not
        come back within ``timeout`` seconds."""
        with self._lock:
            proc = self._procs.pop(component, None)
            if proc is None:
                raise ClusterError(f"{component} is not running")
            terminate(proc, 20.0)
            argv, env = self._argv[component]
            self._spawn(component, argv, env)
            deadline = time.monotonic() + timeout
            if component == "kube-apiserver":
                self._wait(component, deadline,
                           lambda: self._request("GET", "/readyz", timeout=2) == "ok")
            elif component == "kwok":
                port = argv[argv.index("--server-address") + 1].rsplit(":", 1)[1]
                self._wait(component, deadline, lambda: urllib.request.urlopen(
                    f"http://{_HOST}:{port}/healthz", timeout=2).status == 200)
            else:
                port = argv[argv.index("--secure-port") + 1]
                self._wait_https(component, int(port), deadline)

    def _wait(self, name: str, deadline: float, check: Callable[[], bool]) -> None:
        proc = self._procs[name]
        while True:
            if proc.poll() is not None:
                raise ClusterError(f"{name} exited with {proc.returncode} while starting; the "
                                   f"tail of its log:\n{_file_tail(self.log_path(name))}")
            with contextlib.suppress(Exception):
                if check():
                    return
            if time.monotonic() > deadline:
                raise ClusterError(f"{name} was not ready in time; the tail of its log:\n"
                                   f"{_file_tail(self.log_path(name))}")
            time.sleep(0.25)

    def _start_etcd(self, deadline: float) -> None:
        client_port, peer_port = free_ports(2)
        self._etcd_url = f"http://{_HOST}:{client_port}"
        peer = f"http://{_HOST}:{peer_port}"
        self._spawn("etcd", [
            str(self.bindir / "etcd"), "--name", "gangstate", "--data-dir", str(self._path("etcd")),
            "--listen-client-urls", self._etcd_url, "--advertise-client-urls", self._etcd_url,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"gangstate={peer}", "--unsafe-no-fsync",
            "--log-level", "warn"])

        def healthy() -> bool:
            with urllib.request.urlopen(self._etcd_url + "/health", timeout=2) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")

        self._wait("etcd", deadline, healthy)

    def _start_apiserver(self, deadline: float) -> None:
        (port,) = free_ports(1)
        certs = self._path("certs")
        sa_key = certs / "sa.key"
        sa_pub = certs / "sa.pub"
        _openssl(["genrsa", "-out", str(sa_key), "2048"])
        _openssl(["rsa", "-in", str(sa_key), "-pubout", "-out", str(sa_pub)])
        rows = []
        for user, (name, groups) in token_users(self.flavour).items():
            token = secrets.token_hex(16)
            self._tokens[user] = token
            rows.append(f'{token},{name},{name}' + (f',"{groups}"' if groups else ""))
        tokens = certs / "tokens.csv"
        tokens.write_text("\n".join(rows) + "\n")
        tokens.chmod(0o600)
        self.server = f"https://{_HOST}:{port}"
        self.ca_file = certs / "apiserver.crt"
        self._spawn("kube-apiserver", [
            str(self.bindir / "kube-apiserver"), "--etcd-servers", self._etcd_url,
            "--bind-address", _HOST, "--advertise-address", _HOST, "--secure-port", str(port),
            "--cert-dir", str(certs), "--token-auth-file", str(tokens),
            "--authorization-mode", "RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", str(sa_pub),
            "--service-account-signing-key-file", str(sa_key),
            "--service-cluster-ip-range", "10.96.0.0/24",
            "--enable-priority-and-fairness=false", "--profiling=false",
            "--endpoint-reconciler-type", "none", *self.flavour.apiserver_args()])

        def ready() -> bool:
            return bool(self.ca_file.exists()
                        and self._request("GET", "/readyz", timeout=2) == "ok")

        self._wait("kube-apiserver", deadline, ready)

    def _install_crds(self, deadline: float) -> None:
        import yaml

        names = []
        for path in sorted((self.bindir / "crds").glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            names.append(crd["metadata"]["name"])
            self._request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)

        def established() -> bool:
            for name in names:
                crd = self._request(
                    "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
                conds = {c["type"]: c["status"]
                         for c in crd.get("status", {}).get("conditions", [])}
                if conds.get("Established") != "True":
                    return False
            return True

        self._wait("kube-apiserver", deadline, established)

    def _start_controller_manager(self, deadline: float) -> None:
        """kube-controller-manager with its default controllers: the namespace controller (so
        namespaces delete), the ServiceAccount and token controllers (so the ServiceAccount
        admission plugin can stay on), node lifecycle (lifts the not-ready taint, taints and
        evicts on NotReady), the Job, ReplicaSet, garbage and pod GC controllers."""
        (port,) = free_ports(1)
        kubeconfig = self.kubeconfig("controller-manager")
        certs = self._path("certs")
        self._spawn("kube-controller-manager", [
            str(self.bindir / "kube-controller-manager"), "--kubeconfig", str(kubeconfig),
            "--authentication-kubeconfig", str(kubeconfig),
            "--authorization-kubeconfig", str(kubeconfig),
            "--bind-address", _HOST, "--secure-port", str(port), "--leader-elect=false",
            "--service-account-private-key-file", str(certs / "sa.key"),
            "--root-ca-file", str(self.ca_file), "--use-service-account-credentials=false",
            # a node whose lease stops is NotReady after 20 s (default 50 s), so a test of a
            # lost node does not wait a minute
            "--node-monitor-grace-period", "20s", "--profiling=false", "--v", "1",
            *self.flavour.gate_args()])
        self._wait_https("kube-controller-manager", port, deadline)

        def default_service_account() -> bool:
            self._request("GET", "/api/v1/namespaces/default/serviceaccounts/default",
                          timeout=2)
            return True

        self._wait("kube-controller-manager", deadline, default_service_account)

    def _start_kwok(self, deadline: float) -> None:
        """KWOK playing the kubelet of every node annotated :data:`KWOK_ANNOTATION` (all the
        nodes this class creates), with the Stages of :data:`KWOK_STAGES`."""
        (port,) = free_ports(1)
        key, value = KWOK_ANNOTATION
        self._spawn("kwok", [
            str(self.bindir / "kwok"), "--kubeconfig", str(self.kubeconfig("kwok")),
            "-c", str(KWOK_STAGES), f"--manage-nodes-with-annotation-selector={key}={value}",
            "--server-address", f"{_HOST}:{port}", "--node-ip", _HOST,
            "--node-lease-duration-seconds", "40", *os.environ.get("GANGSTATE_KWOK_ARGS", "").split()])

        def healthy() -> bool:
            with urllib.request.urlopen(f"http://{_HOST}:{port}/healthz", timeout=2) as resp:
                return resp.status == 200

        self._wait("kwok", deadline, healthy)

    def _wait_https(self, name: str, port: int, deadline: float) -> None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the component's own throwaway serving cert

        def healthy() -> bool:
            with urllib.request.urlopen(f"https://{_HOST}:{port}/healthz", context=ctx,
                                        timeout=2) as resp:
                return resp.read() == b"ok"

        self._wait(name, deadline, healthy)

    def _create_nodes(self, deadline: float) -> None:
        for node in self.nodes:
            self.add_node(node, wait=False)
        for node in self.nodes:
            self.wait_node_ready(node.name, deadline - time.monotonic())

    def add_node(self, node: NodeSpec, *, wait: bool = True, timeout: float = 60.0) -> None:
        """Create ``node``, patch its capacity and allocatable in, then hand it to KWOK (the
        annotation), which reports it Ready and keeps its lease; with ``wait``, return once it
        is Ready and kube-controller-manager has lifted the not-ready taint (``timeout``
        seconds). The order matters: a node KWOK initialised before its status was patched
        would report KWOK's default allocatable."""
        # created with its status, as a kubelet registers its node (the API server keeps the
        # status of a new Node); KWOK takes nodes on at creation only (it tries to hold a
        # node's lease on ADDED, not MODIFIED: kwok v0.8.0 node_controller.go:212-214)
        self._request("POST", "/api/v1/nodes", {**node.manifest(), "status": node.status()})
        if wait:
            self.wait_node_ready(node.name, timeout)

    def node_ready(self, name: str) -> bool:
        """True when Node ``name`` reports Ready=True and carries no not-ready taint."""
        node = self._request("GET", f"/api/v1/nodes/{name}", timeout=5)
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in node.get("status", {}).get("conditions", []))
        tainted = any(t.get("key") == NOT_READY_TAINT
                      for t in node.get("spec", {}).get("taints", []) or [])
        return ready and not tainted

    def wait_node_ready(self, name: str, timeout: float = 60.0) -> None:
        """Wait until :meth:`node_ready`; :class:`ClusterError` with KWOK's log tail if not."""
        deadline = time.monotonic() + max(timeout, 1.0)
        self._wait("kwok", deadline, lambda: self.node_ready(name))

    def _start_scheduler(self, deadline: float) -> None:
        (port,) = free_ports(1)
        kubeconfig = self.kubeconfig("scheduler")
        config = self._path("scheduler-config.yaml")
        config.write_text(json.dumps(scheduler_config(kubeconfig, self.flavour), indent=1))
        binary = self.bindir / self.scheduler_component if self.shim is None else \
            build_shim(self._cache_dir, progress=self._progress)
        self._spawn(self.scheduler_component,
                    scheduler_argv(self.flavour, binary, config, kubeconfig, port), env=self.shim)
        self.scheduler_port = port
        self._wait_https(self.scheduler_component, port, deadline)

    # -- users for gangstate's components --

    def apply_manifests(self, paths: Iterable[Path]) -> None:
        """Create every object of the YAML files (``kubectl create -f``), as the admin."""
        from kubernetes import utils

        api = self.api_client("admin")
        for path in paths:
            import yaml

            for doc in yaml.safe_load_all(Path(path).read_text()):
                if doc:
                    utils.create_from_dict(api, doc)

    def token_for_service_account(self, namespace: str, name: str,
                                  seconds: int = 86400) -> str:
        """A token for ServiceAccount ``namespace/name`` from the TokenRequest API (the way a
        pod's projected token is made), valid ``seconds``."""
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds}}
        out = self._request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                            body)
        return str(out["status"]["token"])


def _openssl(args: list[str]) -> None:
    openssl = shutil.which("openssl")
    if not openssl:
        raise ClusterError("the local control plane needs openssl on PATH (service-account keys)")
    out = subprocess.run([openssl, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise ClusterError(f"openssl {' '.join(args)} failed:\n{_tail(out.stderr)}")


def terminate(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM ``proc``'s process group, SIGKILL it after ``timeout`` seconds; wait for it."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


# -- script --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """``controlplane.py build [--shim | --native]`` | ``controlplane.py run [--native] [--nodes
    FILE] [--no-scheduler] [--workdir DIR] [--shim --kafka HOST:PORT [--topic-prefix P]
    [--shim-id ID]]``. Exit status 0, 1 on a :class:`ClusterError`, 130 when stopped by SIGINT or
    SIGTERM (its last line names which)."""
    parser = argparse.ArgumentParser(
        prog="controlplane.py",
        description="gangstate's local control plane: etcd, kube-apiserver, "
                    "kube-controller-manager, KWOK and koord-scheduler "
                    f"({', '.join(f'{k} {v}' for k, v in VERSIONS.items())}) on 127.0.0.1, "
                    "built with Go from the module proxy and cached by version in "
                    "$GANGSTATE_CACHE/controlplane (default ~/.cache/gangstate); a cold build "
                    "took ~10 min on 2 cores here. With --native: Kubernetes' own gang "
                    f"scheduling instead (kubernetes {NATIVE_VERSIONS['kubernetes']}: "
                    "kube-apiserver, kube-controller-manager and kube-scheduler with the gates "
                    f"{', '.join(NATIVE_FEATURE_GATES)}; no Koordinator).")
    sub = parser.add_subparsers(dest="cmd", required=True)
    build_cmd = sub.add_parser("build", help="build or reuse the binaries; print their folder "
                                             "(with --shim: also the shim's koord-scheduler, "
                                             "printed on a second line)")
    build_cmd.add_argument("--shim", action="store_true",
                           help="also build gangstate's scheduler shim (shim/, docs/shim.md)")
    build_cmd.add_argument("--native", action="store_true",
                           help="build the native control plane (kubernetes "
                                f"{NATIVE_VERSIONS['kubernetes']} with kube-scheduler) instead")
    run = sub.add_parser("run", help="start, print the admin KUBECONFIG, run until Ctrl-C or "
                                     "SIGTERM, then stop everything and clean up")
    run.add_argument("--nodes", type=Path,
                     help="YAML list (or {nodes: [...]}) of fake nodes {name, cpu, memory, gpu, "
                          "pods, taints: [{key, value, effect}], labels} (default: 2 nodes, 8 "
                          "cpu, 32Gi, 1 nvidia.com/gpu each)")
    run.add_argument("--native", action="store_true",
                     help="run the native control plane: kubernetes "
                          f"{NATIVE_VERSIONS['kubernetes']}, kube-scheduler as default-scheduler "
                          "with its GangScheduling plugin (pods join a scheduling.k8s.io/v1beta1 "
                          "PodGroup with spec.schedulingGroup.podGroupName)")
    run.add_argument("--no-scheduler", action="store_true", help="do not run the scheduler")
    run.add_argument("--shim", action="store_true",
                     help="run gangstate's shim build of koord-scheduler (docs/shim.md)")
    run.add_argument("--kafka", default="",
                     help="with --shim: the Kafka bootstrap (host:port) the shim publishes to")
    run.add_argument("--topic-prefix", default="gangstate.",
                     help="with --shim: topic prefix (default gangstate.)")
    run.add_argument("--shim-id", default="koord-scheduler",
                     help="with --shim: the shim's id, kept across restarts (default "
                          "koord-scheduler)")
    run.add_argument("--workdir", type=Path,
                     help="scratch folder to use and keep (certificates, etcd data, logs of "
                          "each component); default: a temporary one, removed on stop")
    args = parser.parse_args(argv)
    if args.native and args.shim:
        parser.error("--shim wraps koord-scheduler: it cannot go with --native")
    flavour = NATIVE if args.native else KOORDINATOR

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    received: list[int] = []  # the signal that ended the run, for its last line

    def interrupt(signum: int, _frame: object) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    # SIGTERM (kill, timeout, a CI cancel) and SIGINT (even when inherited as ignored by a
    # background job) end the run the same way, also while it is still starting
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    try:
        if args.cmd == "build":
            print(build(flavour=flavour, progress=say))
            if args.shim:
                print(build_shim(progress=say))
            return 0
        nodes = load_nodes(args.nodes) if args.nodes else DEFAULT_NODES
        shim = None
        if args.shim:
            shim = {"KAFKA_BOOTSTRAP_SERVERS": args.kafka,
                    "GANGSTATE_TOPIC_PREFIX": args.topic_prefix,
                    "GANGSTATE_SHIM_ID": args.shim_id}
        cluster = LocalCluster(nodes, scheduler=not args.no_scheduler, progress=say,
                               workdir=args.workdir, shim=shim, flavour=flavour)
        with cluster:
            print(f"KUBECONFIG={cluster.kubeconfig('admin')}", flush=True)
            say(f"API server {cluster.server}; logs in {cluster.log_path('etcd').parent}; "
                f"Ctrl-C or SIGTERM stops")
            threading.Event().wait()
        return 0
    except KeyboardInterrupt:
        how = "stopped (SIGTERM)" if received[:1] == [signal.SIGTERM] else "interrupted (Ctrl-C)"
        say(f"controlplane: {how}; everything it started was stopped")
        return 130
    except ClusterError as exc:
        print(f"controlplane: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
