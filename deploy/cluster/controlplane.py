"""A real local Kubernetes control plane with koord-scheduler v1.8.0: gangstate's test ground.

Where this sits: gangstate explains what Koordinator's Coscheduling plugin does, and the real
scheduler is the ground truth for it. This module builds and runs, on 127.0.0.1 only, a
control plane made of the real binaries, on which pods live (run, finish, fail, terminate):

- **etcd** ``go.etcd.io/etcd/server/v3`` (a two-line ``main`` calling ``etcdmain.Main``),
- **kube-apiserver** and **kube-controller-manager** ``k8s.io/kubernetes/cmd/...`` (the version
  Koordinator pins),
- **koord-scheduler** ``github.com/koordinator-sh/koordinator/cmd/koord-scheduler``,
- **KWOK** ``sigs.k8s.io/kwok/cmd/kwok``, the nodes' kubelet: it keeps the fake nodes' leases and
  Ready condition and plays their pods by the Stages of ``kwok-stages.yaml`` beside this file,

all built from the Go module proxy (``go`` must be on PATH) and cached by version under
``$GANGSTATE_CACHE`` or ``~/.cache/gangstate/controlplane/`` (a cold build took about 10 min on
2 cores here; later runs reuse the binaries). Nodes are API objects created with their status
and handed to KWOK; no container runs.

It is a throwaway for tests, demos and a person with ``kubectl``; never point anything that
matters at it. As a script (run it with the project's ``.venv/bin/python``)::

    python deploy/cluster/controlplane.py build          # build or reuse the binaries
    python deploy/cluster/controlplane.py run [--nodes nodes.yaml]
        # start, print KUBECONFIG=<path> (admin), wait for Ctrl-C, stop and clean up

What it must not do: listen on anything but loopback, download anything but Go modules, or
leave processes or files behind after :meth:`LocalCluster.stop`.

Public API: :func:`build`, :func:`build_shim`, :func:`shim_binary`, :func:`shim_key`,
:class:`LocalCluster`, :class:`NodeSpec`, :class:`ClusterError`,
:func:`terminate`, :func:`free_ports`, :data:`VERSIONS`, :func:`cache_root`.
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
KWOK_MODULE = "sigs.k8s.io/kwok"
_HOST = "127.0.0.1"
_BUILD_MARKER = ".gangstate-build-complete"
#: bump when the build recipe below changes, so cached binaries of an older recipe are rebuilt
_RECIPE = "2"

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


def scheduler_config(kubeconfig: Path) -> dict[str, Any]:
    """Return the ``KubeSchedulerConfiguration`` (a JSON-ready dict) koord-scheduler runs with.

    Shape: ``kubeconfig`` is the scheduler user's kubeconfig file.
    """
    plugins: dict[str, Any] = {p: {"enabled": [{"name": "Coscheduling"}]}
                               for p in _COSCHEDULING_POINTS}
    plugins["score"] = {"enabled": [{"name": "Coscheduling", "weight": 1}]}
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "profiles": [{"schedulerName": SCHEDULER_NAME, "plugins": plugins}],
    }


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

// Built by gangstate's deploy/cluster/controlplane.py: pins the three main packages.
package tools

import (
\t_ "github.com/koordinator-sh/koordinator/cmd/koord-scheduler"
\t_ "k8s.io/kubernetes/cmd/kube-apiserver"
\t_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
"""

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


def _write_kube_module(work: Path, koord_dir: Path) -> None:
    """A wrapper module with Koordinator's go.mod/go.sum, so its replace directives apply.

    A dependency's replace directives are ignored by Go; Koordinator v1.8.0 replaces every
    ``k8s.io/*`` staging module to v0.35.2, so the build runs in a module that copies them.
    """
    gomod = (koord_dir / "go.mod").read_text()
    lines = gomod.splitlines()
    lines[0] = "module gangstate.local/controlplane"
    text = "\n".join(lines) + "\n"
    for module, (refused, served) in PROXY_REFUSED.items():
        text = text.replace(f"{module} => {module} {refused}", f"{module} => {module} {served}")
    text += f"\nrequire {KOORD_MODULE} {VERSIONS['koordinator']}\n"
    (work / "go.mod").write_text(text)
    shutil.copyfile(koord_dir / "go.sum", work / "go.sum")
    (work / "go.sum").chmod(0o644)
    (work / "tools.go").write_text(_TOOLS_GO)


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


def binaries_dir(cache_dir: Path | None = None) -> Path:
    """Return where the binaries of :data:`VERSIONS` live (built or not).

    Shape: ``<cache>/controlplane/<etcd-vX-kubernetes-vY-koordinator-vZ-rN>/bin``.
    """
    root = Path(cache_dir).expanduser() if cache_dir is not None else cache_root()
    return root / "controlplane" / _version_key() / "bin"


def is_built(cache_dir: Path | None = None) -> bool:
    """True when the binaries of :data:`VERSIONS` are in the cache, complete."""
    return (binaries_dir(cache_dir).parent / _BUILD_MARKER).exists()


def build(cache_dir: Path | None = None, *, progress: Progress = _quiet,
          timeout: float = 3600.0) -> Path:
    """Build (or reuse) etcd, kube-apiserver and koord-scheduler; return their folder.

    Shapes: ``cache_dir`` is the cache root (default :func:`cache_root`); the result is
    :func:`binaries_dir` holding ``etcd``, ``kube-apiserver`` and ``koord-scheduler``;
    ``progress`` receives one line per step; ``timeout`` bounds each ``go`` command, in seconds.
    Concurrent callers (threads or processes) serialise on a lock file next to the binaries, and
    only one of them builds. A failed build raises :class:`ClusterError` with the tail of the
    build log (kept at ``<version folder>/build.log``) and leaves no half-built cache entry.
    Cold, on 2 cores here: 6 min 46 s in all (1.8 GiB peak memory); the module cache grows by
    0.9 GiB and the build cache by 2.7 GiB. A caller that finds another build under way says
    so through ``progress`` and waits for it.
    """
    bindir = binaries_dir(cache_dir)
    base = bindir.parent
    with _cache_entry(base, bindir, "the control plane", _version_key(), progress) as entry:
        if entry is None:
            return bindir
        log, staging = entry
        env = _go_env(base)
        with tempfile.TemporaryDirectory(prefix="gangstate-cp-build-") as tmp:
            etcd_work = Path(tmp) / "etcd"
            kube_work = Path(tmp) / "kube"
            etcd_work.mkdir()
            kube_work.mkdir()
            go = _go()
            progress(f"building etcd {VERSIONS['etcd']} (the whole cold build: ~10 min on 2 "
                     f"cores) ...")
            _write_etcd_module(etcd_work)
            _run_logged([go, "mod", "tidy"], etcd_work, log, env, timeout, "go mod tidy (etcd)")
            _run_logged([go, "build", "-trimpath", "-ldflags=-s -w", "-o",
                         str(staging / "etcd"), "."], etcd_work, log, env, timeout,
                        "building etcd")
            progress(f"fetching Koordinator {VERSIONS['koordinator']} ...")
            koord_dir = _module_dir(KOORD_MODULE, VERSIONS["koordinator"], kube_work, log, env)
            _write_kube_module(kube_work, koord_dir)
            kv = VERSIONS["kubernetes"]
            major, minor = kv.lstrip("v").split(".")[:2]
            xflags = " ".join(f"-X k8s.io/component-base/version.{k}={v}" for k, v in
                              (("gitVersion", kv), ("gitMajor", major), ("gitMinor", minor)))
            progress(f"building kube-apiserver {kv} ...")
            _run_logged([go, "build", "-trimpath", f"-ldflags=-s -w {xflags}", "-o",
                         str(staging / "kube-apiserver"), "k8s.io/kubernetes/cmd/kube-apiserver"],
                        kube_work, log, env, timeout, "building kube-apiserver")
            progress(f"building kube-controller-manager {kv} ...")
            _run_logged([go, "build", "-trimpath", f"-ldflags=-s -w {xflags}", "-o",
                         str(staging / "kube-controller-manager"),
                         "k8s.io/kubernetes/cmd/kube-controller-manager"],
                        kube_work, log, env, timeout, "building kube-controller-manager")
            progress(f"building koord-scheduler {VERSIONS['koordinator']} ...")
            _run_logged([go, "build", "-trimpath", "-ldflags=-s -w", "-o",
                         str(staging / "koord-scheduler"), f"{KOORD_MODULE}/cmd/koord-scheduler"],
                        kube_work, log, env, timeout, "building koord-scheduler")
            crds = staging / "crds"
            crds.mkdir()
            for crd in sorted((koord_dir / "config" / "crd" / "bases").glob("*.yaml")):
                shutil.copyfile(crd, crds / crd.name)
                (crds / crd.name).chmod(0o644)
            kwok_work = Path(tmp) / "kwok"
            kwok_work.mkdir()
            progress(f"building kwok {VERSIONS['kwok']} ...")
            _write_kwok_module(kwok_work)
            _run_logged([go, "mod", "tidy"], kwok_work, log, env, timeout, "go mod tidy (kwok)")
            _run_logged([go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(staging / "kwok"),
                         f"{KWOK_MODULE}/cmd/kwok"], kwok_work, log, env, timeout,
                        "building kwok")
    return bindir


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

#: the annotation KWOK manages nodes by (``--manage-nodes-with-annotation-selector``)
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
#: the kubelet KWOK plays: Stages for nodes and pods (the file says what a test can ask)
KWOK_STAGES = Path(__file__).resolve().parent / "kwok-stages.yaml"
#: the taint TaintNodesByCondition puts on a new Node, which kube-controller-manager's node
#: lifecycle controller lifts once the node reports Ready
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


class LocalCluster:
    """etcd, kube-apiserver, kube-controller-manager, KWOK and koord-scheduler on 127.0.0.1,
    with Nodes whose kubelet KWOK plays.

    Shapes: ``nodes`` is a sequence of :class:`NodeSpec` (default :data:`DEFAULT_NODES`: two
    nodes of 8 cpu, 32Gi and 1 ``nvidia.com/gpu``); ``workdir`` a scratch folder (default: a new
    temporary one, removed by :meth:`stop`); ``scheduler`` whether to run koord-scheduler.
    After :meth:`start`: :attr:`server` is ``https://127.0.0.1:<port>``, :attr:`ca_file` the
    API server's serving certificate (its own CA), :meth:`kubeconfig` writes a kubeconfig for a
    user, :meth:`token_for_service_account` mints a token for a ServiceAccount. Use it as a
    context manager or call :meth:`stop`; an ``atexit`` hook stops what is left;
    :meth:`restart` restarts one component, :meth:`add_node` adds a node.
    """

    def __init__(self, nodes: Sequence[NodeSpec] = DEFAULT_NODES, *,
                 workdir: Path | None = None, scheduler: bool = True,
                 cache_dir: Path | None = None, progress: Progress = _quiet,
                 shim: Mapping[str, str] | None = None) -> None:
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
        """The log file of ``component`` (``etcd``, ``kube-apiserver``, ``koord-scheduler``)."""
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
        """Build or reuse the binaries, then start etcd, kube-apiserver, the CRDs,
        kube-controller-manager, KWOK, the Nodes (waiting until each is Ready and untainted)
        and koord-scheduler; return self. Raises :class:`ClusterError` with the failing
        component's log tail; on failure everything started is stopped again."""
        self.bindir = build(self._cache_dir, progress=self._progress)
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
        for name in ("koord-scheduler", "kwok", "kube-controller-manager", "kube-apiserver",
                     "etcd"):
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
        """The process id of ``component`` (``kube-apiserver``, ``koord-scheduler``, ...) while
        it runs, else ``None`` (for its CPU time in ``/proc/<pid>/stat``)."""
        proc = self._procs.get(component)
        return proc.pid if proc is not None and proc.poll() is None else None

    def get(self, path: str, timeout: float = 10.0) -> Any:
        """``GET path`` on the API server as the admin: decoded JSON, or the text (``/metrics``).
        Raises ``ClusterError`` with the server's reason when refused."""
        return self._request("GET", path, timeout=timeout)

    def stop_scheduler(self) -> None:
        """Stop koord-scheduler alone (the API server keeps running)."""
        with self._lock:
            proc = self._procs.pop("koord-scheduler", None)
            if proc is not None:
                terminate(proc, 20.0)

    def start_scheduler(self, timeout: float = 60.0) -> None:
        """(Re)start koord-scheduler against the running API server."""
        with self._lock:
            self._start_scheduler(time.monotonic() + timeout)

    def use_shim(self, shim: Mapping[str, str] | None, timeout: float = 60.0) -> None:
        """Run gangstate's shim build with the environment ``shim`` (``None``: Koordinator's
        koord-scheduler) from now on, restarting the scheduler when it runs; the shim is built
        first (cached), so the scheduler is down only for its restart."""
        if shim is not None:
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
        """Stop ``component`` (``kube-apiserver``, ``kube-controller-manager``, ``kwok``;
        ``koord-scheduler`` has :meth:`start_scheduler`) and start it again with the same
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
        for user, (name, groups) in _TOKEN_USERS.items():
            token = secrets.token_hex(16)
            self._tokens[user] = token
            rows.append(f'{token},{name},{name},"{groups}"')
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
            "--endpoint-reconciler-type", "none"])

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
            "--node-monitor-grace-period", "20s", "--profiling=false", "--v", "1"])
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
        config.write_text(json.dumps(scheduler_config(kubeconfig), indent=1))
        binary = self.bindir / "koord-scheduler" if self.shim is None else \
            build_shim(self._cache_dir, progress=self._progress)
        self._spawn("koord-scheduler", [
            str(binary), "--config", str(config),
            "--bind-address", _HOST, "--secure-port", str(port),
            # its deprecated plain-HTTP healthz would listen on 0.0.0.0:10251 (Koordinator
            # v1.8.0 cmd/koord-scheduler/app/options/insecure_serving.go:75-76): off
            "--port", "0",
            "--authentication-kubeconfig", str(kubeconfig),
            "--authorization-kubeconfig", str(kubeconfig), "--v", "2"], env=self.shim)
        self.scheduler_port = port
        self._wait_https("koord-scheduler", port, deadline)

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
    """``controlplane.py build [--shim]`` | ``controlplane.py run [--nodes FILE]
    [--no-scheduler] [--workdir DIR] [--shim --kafka HOST:PORT [--topic-prefix P] [--shim-id
    ID]]``. Exit status 0, 1 on a :class:`ClusterError`, 130 when stopped by SIGINT or
    SIGTERM (its last line names which)."""
    parser = argparse.ArgumentParser(
        prog="controlplane.py",
        description="gangstate's local control plane: etcd, kube-apiserver, "
                    "kube-controller-manager, KWOK and koord-scheduler "
                    f"({', '.join(f'{k} {v}' for k, v in VERSIONS.items())}) on 127.0.0.1, "
                    "built with Go from the module proxy and cached by version in "
                    "$GANGSTATE_CACHE/controlplane (default ~/.cache/gangstate); a cold build "
                    "took ~10 min on 2 cores here.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    build_cmd = sub.add_parser("build", help="build or reuse the binaries; print their folder "
                                             "(with --shim: also the shim's koord-scheduler, "
                                             "printed on a second line)")
    build_cmd.add_argument("--shim", action="store_true",
                           help="also build gangstate's scheduler shim (shim/, docs/shim.md)")
    run = sub.add_parser("run", help="start, print the admin KUBECONFIG, run until Ctrl-C or "
                                     "SIGTERM, then stop everything and clean up")
    run.add_argument("--nodes", type=Path,
                     help="YAML list (or {nodes: [...]}) of fake nodes {name, cpu, memory, gpu, "
                          "pods, taints: [{key, value, effect}], labels} (default: 2 nodes, 8 "
                          "cpu, 32Gi, 1 nvidia.com/gpu each)")
    run.add_argument("--no-scheduler", action="store_true", help="do not run koord-scheduler")
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
            print(build(progress=say))
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
                               workdir=args.workdir, shim=shim)
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
