"""``gangstate demo --cluster``: the main job on the real local control plane.

Where it sits: the outermost shell, beside ``streams/dev/demo.py`` (the fast default on bundled
traces). It starts the local control plane (etcd, kube-apiserver, koord-scheduler v1.8.0, two
fake nodes of 8 cpu, 32Gi and 1 ``nvidia.com/gpu``; built on first use, ~7 min on 2 cores,
then cached; with ``--scheduler kube-scheduler`` the native control plane instead, Kubernetes
v1.37.2 whose kube-scheduler schedules gangs itself, PodGroups of ``scheduling.k8s.io``), the
local Kafka (unless ``KAFKA_BOOTSTRAP_SERVERS`` is set) and gangstate's chain
(``watch`` → Kafka → ``worker`` → ``sink``, with the shipped RBAC), creates three gang jobs:

- ``held``: min-available 3 but only 2 pods: held at PreEnqueue, where the scheduler says nothing;
- ``no-fit``: 3 pods of 1 GPU each with min-available 3, and only 2 GPUs in the cluster;
- ``fits``: 2 pods that fit;

waits until gangstate has written on each pod, then prints, pod by pod, what the scheduler wrote
(its own Events, counted by reason) beside what gangstate wrote, and stops everything it started.

Must not: touch any cluster but the one it starts.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Callable

from streams.settings import Settings
from streams.core.native import KOORDINATOR, KUBE_SCHEDULER
from streams.dev.localcluster import (Chain, controlplane_module, create_namespace, create_native,
                                      gang_pod, native_pod, native_podgroup, pod_events)
from streams.dev.demo import demo_kafka

NAMESPACE = "gangstate-demo"


def demo_pods() -> list[dict[str, Any]]:
    """The demo's gang jobs: ``held`` (2 of min 3), ``no-fit`` (3 × 1 GPU, 2 GPUs exist) and
    ``fits`` (2 × 100m cpu)."""
    return ([gang_pod(NAMESPACE, f"held-{i}", gang="held", min_available=3) for i in range(2)]
            + [gang_pod(NAMESPACE, f"no-fit-{i}", gang="no-fit", min_available=3, gpu=1)
               for i in range(3)]
            + [gang_pod(NAMESPACE, f"fits-{i}", gang="fits", min_available=2) for i in range(2)])


def native_demo_objects() -> list[dict[str, Any]]:
    """The same three jobs for kube-scheduler's gang scheduling: a ``scheduling.k8s.io``
    PodGroup each (``held`` minCount 3, ``no-fit`` minCount 3, ``fits`` minCount 2), then their
    pods naming it in ``spec.schedulingGroup``."""
    return ([native_podgroup(NAMESPACE, "held", 3), native_podgroup(NAMESPACE, "no-fit", 3),
             native_podgroup(NAMESPACE, "fits", 2)]
            + [native_pod(NAMESPACE, f"held-{i}", "held") for i in range(2)]
            + [native_pod(NAMESPACE, f"no-fit-{i}", "no-fit", gpu=1) for i in range(3)]
            + [native_pod(NAMESPACE, f"fits-{i}", "fits") for i in range(2)])


def run_cluster_demo(*, settings: Settings | None = None, write: Callable[[str], Any] = print,
                     settle_seconds: float = 45.0, timeout: float = 150.0,
                     scheduler: str = KOORDINATOR) -> int:
    """Run the demo on the local control plane; returns 0 when every pod carries a gangstate
    Event, 1 otherwise. ``settle_seconds``: how long to let the scheduler and gangstate run
    after every pod has a gangstate Event (the scheduler's retries keep counting meanwhile);
    ``timeout``: the most to wait for that; ``scheduler``: ``koord-scheduler`` (Koordinator
    v1.8.0) or ``kube-scheduler`` (the native control plane, Kubernetes v1.37.2). Raises the
    control plane's ``ClusterError`` or the broker's ``BrokerError`` when either cannot
    start."""
    from kubernetes import client

    started = time.monotonic()
    base = settings or Settings.from_env()
    cp = controlplane_module()
    native = scheduler == KUBE_SCHEDULER
    flavour = "native" if native else "koordinator"
    if not cp.is_built(flavour=flavour):
        write("building the local control plane (first use only; ~7 min on 2 cores) ...")
    cluster = cp.LocalCluster(progress=lambda line: write(f"  {line}"), flavour=flavour)
    broker = None
    chain = None
    try:
        write("starting etcd, kube-apiserver, kube-controller-manager, KWOK and "
              + ("kube-scheduler v1.37.2 (its own gang scheduling)" if native
                 else "koord-scheduler v1.8.0") + " on 127.0.0.1 ...")
        cluster.start(timeout=180)
        write(f"  API server {cluster.server}, 2 fake nodes (8 cpu, 32Gi, 1 nvidia.com/gpu "
              f"each) ({time.monotonic() - started:.1f} s)")
        broker, settings = demo_kafka(base, write)
        assert cluster.workdir is not None
        chain = Chain(cluster, settings, cluster.workdir / "gangstate-logs")
        write("starting gangstate watch, worker and sink (shipped RBAC) ...")
        chain.start(ready_timeout=120)
        core = client.CoreV1Api(cluster.api_client("admin"))
        create_namespace(core, NAMESPACE)
        if native:
            objects = native_demo_objects()
            for obj in objects:
                create_native(cluster, obj)
            pods = [o for o in objects if o["kind"] == "Pod"]
            least = "minCount"
        else:
            pods = demo_pods()
            for obj in pods:
                core.create_namespaced_pod(NAMESPACE, obj)
            least = "min-available"
        write(f"created {len(pods)} pods in namespace {NAMESPACE}: gang held (2 pods, "
              f"{least} 3), gang no-fit (3 pods of 1 GPU, {least} 3), gang fits (2 pods)")
        names = [p["metadata"]["name"] for p in pods]
        deadline = time.monotonic() + timeout
        while not (every := all(any(e["from"] == "gangstate"
                                    for e in pod_events(core, NAMESPACE, n)) for n in names)):
            if time.monotonic() > deadline:
                break
            time.sleep(1.0)
        write(("every pod has a gangstate Event" if every else
               f"not every pod has a gangstate Event after {timeout:.0f} s")
              + f"; letting it run {settle_seconds:.0f} s more ...")
        time.sleep(settle_seconds)
        missing = _report(core, names, write, cluster.flavour.scheduler_name
                          if native else "koord-scheduler")
        write("")
        write(f"{len(names) - len(missing)} of {len(names)} pods carry gangstate's Events "
              f"({time.monotonic() - started:.1f} s in all)")
        return 1 if missing else 0
    finally:
        stopped = []
        if chain is not None:
            chain.stop()
            stopped.append("gangstate's chain")
        if broker is not None:
            broker.stop()
            stopped.append("the local Kafka")
        if cluster.workdir is not None:
            stopped.append("the control plane")
        cluster.stop()
        if stopped:
            write(f"stopped {', '.join(stopped[:-1]) + ' and ' if len(stopped) > 1 else ''}"
                  f"{stopped[-1]}")


def _report(core: Any, names: list[str], write: Callable[[str], Any],
            component: str = "koord-scheduler") -> list[str]:
    """Per pod: what the scheduler (``component``, the Events' source) wrote beside what
    gangstate wrote; the names of the pods gangstate wrote nothing on."""
    missing = []
    for name in names:
        p = core.read_namespaced_pod(name, NAMESPACE)
        events = pod_events(core, NAMESPACE, name)
        mine = [e for e in events if e["from"] == "gangstate"]
        theirs = Counter(e["reason"] for e in events if e["from"] == component)
        write("")
        write(f"pod {NAMESPACE}/{name}  node={p.spec.node_name or '<none>'}")
        said = ", ".join(f"{reason} x{n}" for reason, n in sorted(theirs.items())) or \
            "nothing (no Event, no condition)"
        write(f"  {component} wrote: {said}")
        last = [e for e in events if e["from"] == component][-1:]
        for e in last:
            write(f"    latest: {_cut(e['message'])}")
        if not mine:
            missing.append(name)
            write("  gangstate wrote: nothing")
        for e in _latest_per_reason(mine):
            write(f"  gangstate wrote: {e['type']} {e['reason']} (x{e['count']}): "
                  f"{_cut(e['message'])}")
    return missing


def _latest_per_reason(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events collapsed per reason: the latest one, its count the sum of the reason's counts."""
    out: dict[str, dict[str, Any]] = {}
    for e in events:
        total = out.get(e["reason"], {}).get("count", 0) + e["count"]
        out[e["reason"]] = {**e, "count": total}
    return list(out.values())


def _cut(text: str, width: int = 220) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
