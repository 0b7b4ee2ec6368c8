"""The local real control plane (``deploy/cluster/controlplane.py``) and gangstate's whole chain
on it, as real processes: ``gangstate watch`` → Kafka → ``gangstate worker`` → ``gangstate sink``.

Where it sits: the shell, for ``gangstate demo --cluster`` and the cluster test tier. The
components authenticate as the ServiceAccounts that the shipped Deployments name
(``deploy/kubernetes/watch.yaml``, ``sink.yaml``), with the shipped RBAC
(``deploy/kubernetes/rbac.yaml``) applied as is and tokens from the TokenRequest API: a verb the
manifests forget is a verb the chain lacks, so the deployment cannot drift from what is tested.

Must not: decide anything about gangs (that is the core's), or touch a cluster it did not start.

Public API: :func:`controlplane_module`, :class:`Chain`, :func:`service_account_of`,
:func:`pod_events`, :func:`gang_pod`, :func:`create_namespace`, and for the native control plane
(kube-scheduler's gang scheduling) :func:`native_pod`, :func:`native_podgroup`,
:func:`native_composite`, :func:`create_native`.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import yaml

from streams.settings import Settings
from streams.dev.localkafka import repo_root
from streams.dev.worker_process import worker_env

MANIFESTS = ("rbac.yaml",)
COMPONENTS = ("worker", "watch", "sink")
"""The processes of a whole chain, in the order they start."""
GANG_PREFIX = "gang.scheduling.koordinator.sh/"


def gang_pod(namespace: str, name: str, *, gang: str | None = None,
             min_available: int | None = None, annotations: dict[str, str] | None = None,
             labels: dict[str, str] | None = None, cpu: str = "100m", gpu: int = 0,
             gates: tuple[str, ...] = (), grace_seconds: int = 0,
             priority_class: str | None = None,
             finalizers: tuple[str, ...] = ()) -> dict[str, Any]:
    """A Pod of koord-scheduler for the local control plane: gang annotations (``name``,
    ``min-available`` under ``gang.scheduling.koordinator.sh/``), requests of ``cpu`` (a
    quantity), 64Mi of memory and ``gpu`` ``nvidia.com/gpu``, ``spec.schedulingGates`` named
    ``gates``, a termination grace period of ``grace_seconds`` (KWOK, the nodes' kubelet,
    deletes a terminating pod at the end of it), ``spec.priorityClassName`` and
    ``metadata.finalizers`` when given."""
    ann = dict(annotations or {})
    if gang is not None:
        ann[GANG_PREFIX + "name"] = gang
    if min_available is not None:
        ann[GANG_PREFIX + "min-available"] = str(min_available)
    requests: dict[str, str] = {"cpu": cpu, "memory": "64Mi"}
    limits: dict[str, str] = {}
    if gpu:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpu)
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler", "terminationGracePeriodSeconds": grace_seconds,
        "containers": [{"name": "main", "image": "busybox:1.36",
                        "resources": {"requests": requests, "limits": limits}}]}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if priority_class:
        spec["priorityClassName"] = priority_class
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": ann,
                            "labels": dict(labels or {})}
    if finalizers:
        meta["finalizers"] = list(finalizers)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def native_pod(namespace: str, name: str, podgroup: str, *, cpu: str = "100m", gpu: int = 0,
               gates: tuple[str, ...] = (), grace_seconds: int = 0,
               priority_class: str | None = None) -> dict[str, Any]:
    """A Pod of kube-scheduler's gang scheduling (Kubernetes v1.37, the native control plane):
    ``spec.schedulingGroup.podGroupName`` names ``podgroup``; requests, gates, grace period and
    priority class as ``gang_pod``'s, scheduler ``default-scheduler``."""
    pod = gang_pod(namespace, name, cpu=cpu, gpu=gpu, gates=gates, grace_seconds=grace_seconds,
                   priority_class=priority_class)
    pod["spec"]["schedulerName"] = "default-scheduler"
    pod["spec"]["schedulingGroup"] = {"podGroupName": podgroup}
    return pod


def native_podgroup(namespace: str, name: str, min_count: int, *,
                    parent: str | None = None,
                    workload: tuple[str, str] | None = None) -> dict[str, Any]:
    """A native ``scheduling.k8s.io/v1beta1`` PodGroup with the gang policy of ``min_count``
    (``spec.parentCompositePodGroupName`` ``parent`` and ``spec.workloadRef`` ``(workload,
    template)`` when given)."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    if workload:
        spec["workloadRef"] = {"workloadName": workload[0], "templateName": workload[1]}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def native_composite(namespace: str, workload: str, name: str, min_groups: int,
                     children: dict[str, int]) -> list[dict[str, Any]]:
    """A native composite gang as kube-apiserver v1.37.2 takes it: the Workload ``workload``
    (``scheduling.k8s.io/v1beta1``) with one CompositePodGroup template ``name`` of
    ``minGroupCount`` ``min_groups`` over PodGroup templates ``children`` (name -> minCount),
    then the CompositePodGroup (``v1alpha3``; its ``spec.workloadRef`` is required) and its
    child PodGroups, in the order to create them."""
    templates = [{"name": child, "schedulingPolicy": {"gang": {"minCount": count}}}
                 for child, count in children.items()]
    objects: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
         "metadata": {"name": workload, "namespace": namespace},
         "spec": {"podGroupTemplates": [], "compositePodGroupTemplates": [{
             "name": name, "schedulingPolicy": {"gang": {"minGroupCount": min_groups}},
             "podGroupTemplates": templates}]}},
        {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
         "metadata": {"name": name, "namespace": namespace},
         "spec": {"workloadRef": {"workloadName": workload, "templateName": name},
                  "schedulingPolicy": {"gang": {"minGroupCount": min_groups}}}}]
    objects += [native_podgroup(namespace, child, count, parent=name,
                                workload=(workload, child))
                for child, count in children.items()]
    return objects


NATIVE_PLURALS = {"PodGroup": "podgroups", "CompositePodGroup": "compositepodgroups",
                  "Workload": "workloads"}
"""The resource of each native ``scheduling.k8s.io`` kind, for ``create_native``."""


def create_native(cluster: Any, obj: dict[str, Any]) -> dict[str, Any]:
    """Create a native ``scheduling.k8s.io`` object (``native_podgroup``, ``native_composite``)
    or a Pod (``native_pod``: the ``kubernetes`` client of this project does not model
    ``spec.schedulingGroup``) as the admin of ``cluster`` (a ``LocalCluster``); return what the
    API server made."""
    ns = obj["metadata"]["namespace"]
    if obj["kind"] == "Pod":
        path = f"/api/v1/namespaces/{ns}/pods"
    else:
        path = f"/apis/{obj['apiVersion']}/namespaces/{ns}/{NATIVE_PLURALS[obj['kind']]}"
    created: dict[str, Any] = cluster.request("POST", path, obj)
    return created


def create_namespace(core_v1: Any, name: str, timeout: float = 60.0) -> None:
    """Create namespace ``name`` and wait until kube-controller-manager has made its
    ``default`` ServiceAccount: the ServiceAccount admission plugin refuses pods until then
    (``timeout`` seconds; :class:`TimeoutError` after)."""
    from kubernetes.client.exceptions import ApiException

    core_v1.create_namespace({"metadata": {"name": name}})
    deadline = time.monotonic() + timeout
    while True:
        try:
            core_v1.read_namespaced_service_account("default", name)
            return
        except ApiException as err:
            if err.status != 404 or time.monotonic() > deadline:
                raise TimeoutError(f"namespace {name}: no default ServiceAccount after "
                                   f"{timeout:.0f} s (is kube-controller-manager running?)"
                                   ) from None
        time.sleep(0.1)


def controlplane_module() -> ModuleType:
    """The module ``deploy.cluster.controlplane`` (imported on first use). Raises
    ``FileNotFoundError`` when the ``deploy`` package is not installed."""
    try:
        from deploy.cluster import controlplane
    except ModuleNotFoundError as err:
        raise FileNotFoundError(f"{err.name} is not installed: run from a gangstate "
                                "checkout") from None
    return controlplane


def service_account_of(manifest: Path) -> tuple[str, str]:
    """``(namespace, name)`` of the ServiceAccount the Deployment in ``manifest`` runs as."""
    for doc in yaml.safe_load_all(Path(manifest).read_text()):
        if doc and doc.get("kind") == "Deployment":
            ns = doc["metadata"].get("namespace", "default")
            return ns, doc["spec"]["template"]["spec"].get("serviceAccountName", "default")
    raise ValueError(f"{manifest}: no Deployment")


def pod_events(core_v1: Any, namespace: str, name: str, uid: str | None = None,
               ) -> list[dict[str, Any]]:
    """The core/v1 Events of one pod as ``kubectl describe pod`` finds them (field selector on
    ``involvedObject`` name, namespace and uid), oldest first; each a dict with ``type``,
    ``reason``, ``from`` (source or reporting component), ``message``, ``count``."""
    selector = f"involvedObject.name={name},involvedObject.namespace={namespace}"
    if uid:
        selector += f",involvedObject.uid={uid}"
    items = core_v1.list_namespaced_event(namespace, field_selector=selector).items
    rows = []
    for ev in items:
        when = ev.last_timestamp or ev.event_time or ev.metadata.creation_timestamp
        rows.append({"type": ev.type, "reason": ev.reason, "message": ev.message,
                     "from": (ev.source.component if ev.source and ev.source.component
                              else ev.reporting_component),
                     "count": ev.count or 1, "when": when})
    rows.sort(key=lambda r: (r["when"] is None, r["when"]))
    return rows


class Chain:
    """``gangstate watch``, ``worker`` and ``sink`` as child processes against ``cluster``.

    Shapes: ``cluster`` a started ``LocalCluster``; ``settings`` the Kafka settings (bootstrap,
    topic prefix, app id, grace); ``logdir`` where each process logs (``<name>.log``);
    ``web_port`` the worker's HTTP views and ``/metrics`` port (``explain``/``describe`` with
    ``--server``; default: a free one); ``watch_port`` the watcher's ``/metrics`` port
    (``gangstate watch --http-port``; default: a free one). :meth:`start` applies the shipped RBAC, mints one
    token per component from the ServiceAccount its Deployment names, writes its kubeconfig,
    and starts the three processes; :meth:`stop` ends them. The worker has no Kubernetes
    credentials at all. ``cluster_id`` is the fleet's name of ``cluster`` (``GANGSTATE_CLUSTER``
    of the watcher and the sink, docs/fleet.md; default ``settings.cluster``); ``components`` which of ``worker``, ``watch``
    and ``sink`` this chain runs (a fleet runs one worker for every cluster's watch and sink).
    """

    def __init__(self, cluster: Any, settings: Settings, logdir: Path,
                 web_port: int | None = None, watch_port: int | None = None, *,
                 cluster_id: str | None = None,
                 components: tuple[str, ...] = COMPONENTS) -> None:
        self.cluster = cluster
        self.settings = settings
        self.logdir = Path(logdir)
        self.cluster_id = settings.cluster if cluster_id is None else cluster_id
        self.components = components
        free = controlplane_module().free_ports(2)
        self.web_port = web_port or free[0]
        self.watch_port = watch_port or free[1]
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.kubeconfigs: dict[str, Path] = {}

    @property
    def server(self) -> str:
        """The worker's HTTP address for ``--server``."""
        return f"http://127.0.0.1:{self.web_port}"

    @property
    def scheduler_name(self) -> str:
        """The ``schedulerName`` whose pods the watcher follows: the cluster's scheduler's
        (``koord-scheduler``, or ``default-scheduler`` on the native control plane)."""
        flavour = getattr(self.cluster, "flavour", None)
        return str(getattr(flavour, "scheduler_name", "koord-scheduler"))

    def install_rbac(self) -> None:
        """Apply the shipped manifests (``deploy/kubernetes/rbac.yaml``) as the admin, once."""
        from kubernetes.utils import FailToCreateError

        deploy = repo_root() / "deploy" / "kubernetes"
        try:
            self.cluster.apply_manifests([deploy / m for m in MANIFESTS])
        except FailToCreateError as err:  # already there: a second chain on one cluster
            if any(e.status != 409 for e in err.api_exceptions):
                raise
        for component in ("watch", "sink"):
            ns, sa = service_account_of(deploy / f"{component}.yaml")
            token = self.cluster.token_for_service_account(ns, sa)
            self.kubeconfigs[component] = self.cluster.kubeconfig(f"gangstate-{component}",
                                                                  token=token)

    def _spawn(self, name: str) -> None:
        log = open(self.logdir / f"{name}.log", "ab")
        try:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "streams.cli", *self._args(name)], env=self._env(),
                stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()

    def start(self, ready_timeout: float = 120.0) -> "Chain":
        """Start worker, watch and sink; return once the worker's views answer. Raises
        ``RuntimeError`` with a log tail when a component exits or the views stay silent."""
        from streams.kafka.publishing import ensure_topics

        self.logdir.mkdir(parents=True, exist_ok=True)
        self.install_rbac()
        ensure_topics(self.settings)
        for name in self.components:
            self._spawn(name)
        deadline = time.monotonic() + ready_timeout
        ready = f"{self.server}/gangs" if "worker" in self.components \
            else f"http://127.0.0.1:{self.watch_port}/metrics"
        while True:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"gangstate {name} exited with {proc.returncode}; "
                                       f"log tail:\n{self.log_tail(name)}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(ready, timeout=2) as resp:
                    if resp.status == 200:
                        return self
            if time.monotonic() > deadline:
                raise RuntimeError(f"the worker's views did not answer in {ready_timeout} s; "
                                   f"log tail:\n{self.log_tail('worker')}")
            time.sleep(0.5)

    def _env(self) -> dict[str, str]:
        env = worker_env(self.settings)
        env.pop("KUBECONFIG", None)
        env["GANGSTATE_CLUSTER"] = self.cluster_id
        return env

    def _args(self, name: str) -> list[str]:
        if name == "worker":
            return ["worker", "--http-port", str(self.web_port)]
        if name == "watch":
            return ["watch", "--kubeconfig", str(self.kubeconfigs["watch"]),
                    "--scheduler-name", self.scheduler_name,
                    "--http-port", str(self.watch_port)]
        return ["sink", "--kubeconfig", str(self.kubeconfigs["sink"])]

    def restart(self, name: str, timeout: float = 20.0,
                meanwhile: Callable[[], Any] | None = None) -> None:
        """Stop component ``name`` (``watch``, ``sink`` or ``worker``: SIGTERM, then SIGKILL)
        and start it again with the same arguments; its log continues in the same file.
        ``meanwhile()`` runs while it is stopped (what happens during a rollout)."""
        proc = self.procs.pop(name)
        controlplane_module().terminate(proc, timeout)
        if meanwhile is not None:
            meanwhile()
        self._spawn(name)

    def log_tail(self, name: str, chars: int = 3000) -> str:
        """The end of a component's log."""
        try:
            return (self.logdir / f"{name}.log").read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def alive(self) -> dict[str, bool]:
        """Which components still run."""
        return {name: proc.poll() is None for name, proc in self.procs.items()}

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM every component (the sink and the watcher first), then SIGKILL stragglers."""
        for name in ("watch", "sink", "worker"):
            proc = self.procs.pop(name, None)
            if proc is not None:
                controlplane_module().terminate(proc, timeout)

    def __enter__(self) -> "Chain":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def gangstate(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run one ``gangstate`` command (e.g. ``explain pod NS/NAME --server ...``) and return
        its completed process (text output)."""
        return subprocess.run([sys.executable, "-m", "streams.cli", *args], env=self._env(),
                              capture_output=True, text=True, timeout=timeout)
