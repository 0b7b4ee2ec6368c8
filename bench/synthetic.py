"""Deterministic synthetic ``gang-events`` traces for the benchmarks (bench only).

``trace(gangs, members, seed)`` yields ``(key, value_bytes)`` pairs in event-time order: the raw
Kafka values a watch producer and a scheduler shim would publish for ``gangs`` gangs of
``members`` pods each. Pod records carry what ``gangstate watch`` publishes of a Pod
(``producers.watch.shapes.published``: metadata, gang annotations, ``spec.nodeName``,
``status.phase``; about 0.5 KiB); ``manifests=True`` publishes the whole ~1.1 KiB Pod instead
(labels, owner, containers, conditions), as a trace recorded before that slimming (or by
another producer) carries it. Per gang (min-available = members):

- one ``ADDED`` per member (Pending), each but the last followed by a ``PreEnqueue``/``Gated``
  cycle record, and one ``MODIFIED`` (PodScheduled=False condition);
- 1 to 5 failed scheduling attempts: members wait at Permit one cycle each until a member fails
  Filter (``Unschedulable``, ``Insufficient nvidia.com/gpu``), the waiting ones are then
  ``Rejected`` in that cycle (numbered records without ``shim``, the contract's first form: they
  fold into the gang's failure episode, which ends with the first bind, well before its
  ``GangUnschedulable`` would settle);
- a final attempt: Permit ``Wait`` ... last member ``Success``, then ``Bound`` for every member;
- four ``MODIFIED`` per member once bound: ``spec.nodeName``, container creating, ``Running``,
  ``Ready``;
- about 2 % of the gangs are deleted afterwards (one ``DELETED`` per member).

That is about 12 records per member (about 1M records for 10k gangs x 8). Gangs are generated
in waves of ``WAVE`` gangs; within a wave their records interleave by event time; waves follow
each other in event time. Same arguments, same bytes.

``probe(gang, n, at)`` builds a record whose output is known in advance and immediate: a
PodGroup of ``gang`` whose ``mode`` annotation is ``probe-<PROBE_BASE + n>``, answered by a
``GangSpecInvalid`` of ``gang`` with ``facts.value`` that text (``probe_number`` reads it back;
used to time latency). Until the per-record ``GangCycleRejected`` was retired (issue 21) a probe
was a failed numbered cycle, answered by that diagnostic.
"""

from __future__ import annotations

import functools
import json
import random
import uuid
from typing import Iterator

from producers.watch.shapes import published
from streams.core.timefmt import format_time

T0 = 1_793_000_000_000_000  # 2026-10-26, microseconds of event time
WAVE = 64
WAVE_SPACING = 120_000_000  # event time between wave starts (120 s)
PREFIX = "gang.scheduling.koordinator.sh/"
SCHEDULER = "koord-scheduler"
PROBE_BASE = 1_000_000_000  # probe numbers are PROBE_BASE + n (also the PodGroup's rv)
PROBE_MODE = "probe-"  # a probe's mode annotation: PROBE_MODE + str(PROBE_BASE + n)
_DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def gang_name(i: int, ns_prefix: str = "bench") -> tuple[str, str]:
    """(namespace, name) of synthetic gang ``i``."""
    return f"{ns_prefix}-{i % 50:02d}", f"job-{i:06d}"


def pod_record(at: int, type_: str, ns: str, job: str, member: int, members: int, uid: str,
               owner_uid: str, rv: int, *, node: str | None = None, phase: str = "Pending",
               condition: bool = False, deleting: bool = False,
               manifest: bool = False) -> bytes:
    """One ``gangstate.kube/v1`` Pod record as ``gangstate watch`` publishes it (about 0.5
    KiB), or with ``manifest`` the whole Pod (about 1.1 KiB)."""
    name = f"{job}-worker-{member}"
    created = format_time(at)[:19] + "Z"
    meta = {
        "name": name, "namespace": ns, "uid": uid, "creationTimestamp": created,
        "labels": {"app.kubernetes.io/name": job, "training.kubeflow.org/replica-index":
                   str(member), "training.kubeflow.org/job-name": job},
        "annotations": {PREFIX + "name": job, PREFIX + "min-available": str(members),
                        PREFIX + "total-number": str(members), PREFIX + "mode": "Strict"},
        "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                             "name": job, "uid": owner_uid, "controller": True,
                             "blockOwnerDeletion": True}],
        "resourceVersion": str(rv),
    }
    if deleting:
        meta["deletionTimestamp"] = created
    spec: dict = {"schedulerName": SCHEDULER, "priority": 0, "restartPolicy": "Never",
                  "containers": [{"name": "trainer", "image": "registry.example.com/train:2.4",
                                  "resources": {"requests": {"cpu": "16", "memory": "128Gi",
                                                             "nvidia.com/gpu": "8"},
                                                "limits": {"nvidia.com/gpu": "8"}}}]}
    if node:
        spec["nodeName"] = node
    status: dict = {"phase": phase, "qosClass": "Burstable"}
    if condition:
        status["conditions"] = [{"type": "PodScheduled", "status": "False",
                                 "reason": "Unschedulable", "lastTransitionTime": created,
                                 "message": "waiting for gang members"}]
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}
    return _DUMPS({"schema": "gangstate.kube/v1", "observed_at": format_time(at),
                   "resource": "pods", "type": type_,
                   "object": obj if manifest else published("pods", obj)}).encode()


def cycle_record(at: int, cycle: int, ns: str, pod: str, uid: str, gang: str, stage: str,
                 status: str, representative: str | None, *, reason: str = "",
                 message: str = "", node: str | None = None) -> bytes:
    """One ``gangstate.cycle/v1`` record."""
    return _DUMPS({"schema": "gangstate.cycle/v1", "observed_at": format_time(at),
                   "scheduler": SCHEDULER, "cycle": cycle,
                   "pod": {"namespace": ns, "name": pod, "uid": uid}, "gang": gang,
                   "gang_group": gang, "stage": stage, "status": status, "reason": reason,
                   "message": message, "representative": representative,
                   "node": node}).encode()


def probe(gang: str, n: int, at: int) -> bytes:
    """A PodGroup ``MODIFIED`` of ``gang`` after which the worker must emit ``GangSpecInvalid``
    for ``gang`` with ``facts.value == f"probe-{PROBE_BASE + n}"`` at once (mode
    ``probe-<number>`` is not valid; the resourceVersion is that number, so each later probe of
    the gang is newer). ``n`` must grow per gang."""
    ns, _, name = gang.partition("/")
    number = PROBE_BASE + n
    obj = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
           "metadata": {"name": name, "namespace": ns, "uid": f"probe-{name}",
                        "resourceVersion": str(number),
                        "annotations": {PREFIX + "mode": f"{PROBE_MODE}{number}"}},
           "spec": {"minMember": 1}}
    return _DUMPS({"schema": "gangstate.kube/v1", "observed_at": format_time(at),
                   "resource": "podgroups", "type": "MODIFIED", "object": obj}).encode()


def probe_number(diagnostic: dict) -> int | None:
    """``n`` of the probe a diagnostic answers (``probe``), or ``None`` for any other."""
    facts = diagnostic.get("facts") or {}
    value = facts.get("value")
    if diagnostic.get("reason") != "GangSpecInvalid" or facts.get("field") != "mode" \
            or not isinstance(value, str) or not value.startswith(PROBE_MODE):
        return None
    return int(value[len(PROBE_MODE):]) - PROBE_BASE


def _gang_records(i: int, members: int, start: int, rng: random.Random,
                  ns_prefix: str,
                  manifests: bool = False) -> list[tuple[int, int, str, bytes]]:
    """Records of gang ``i`` as (at, seq, key, value), ``seq`` keeping per-gang order."""
    ns, job = gang_name(i, ns_prefix)
    gang = f"{ns}/{job}"
    owner = _uid(rng)
    uids = [_uid(rng) for _ in range(members)]
    names = [f"{job}-worker-{m}" for m in range(members)]
    rv = [1000 + rng.randrange(1000) + m * 7 for m in range(members)]
    out: list[tuple[int, int, str, bytes]] = []
    t = start

    pod = functools.partial(pod_record, manifest=manifests)

    def add(value: bytes, dt: int = 2_000) -> None:
        nonlocal t
        t += dt
        out.append((t, len(out), gang, value))

    cycle = 100_000 + i * 64
    for m in range(members):
        add(pod(t, "ADDED", ns, job, m, members, uids[m], owner, rv[m]), 50_000)
        if m < members - 1:  # held at PreEnqueue until the gang has min-available pods
            cycle += 1
            add(cycle_record(t, cycle, ns, names[m], uids[m], gang, "PreEnqueue", "Gated",
                             None, reason="gang members insufficient",
                             message="gang has not enough members"))
    for m in range(members):
        rv[m] += 3
        add(pod(t, "MODIFIED", ns, job, m, members, uids[m], owner, rv[m],
                condition=True), 20_000)
    rep = 0  # v1.8: no representative switch follows a failed member (docs/shim.md)
    for _attempt in range(rng.choice((1, 2, 2, 3, 3, 4, 5))):
        fail = rng.randrange(members)
        for m in range(fail):
            cycle += 1
            add(cycle_record(t, cycle, ns, names[m], uids[m], gang, "Permit", "Wait",
                             f"{ns}/{names[rep]}", message="waiting for gang members",
                             node=f"gpu-node-{rng.randrange(512)}"))
        cycle += 1
        add(cycle_record(t, cycle, ns, names[fail], uids[fail], gang, "Filter",
                         "Unschedulable", f"{ns}/{names[rep]}",
                         reason="Insufficient nvidia.com/gpu",
                         message="0/512 nodes are available: 512 Insufficient nvidia.com/gpu."))
        for m in range(fail):
            add(cycle_record(t, cycle, ns, names[m], uids[m], gang, "PostFilter", "Rejected",
                             f"{ns}/{names[rep]}", message="gang member failed"))
    order = [rep] + [m for m in range(members) if m != rep]
    nodes = {m: f"gpu-node-{rng.randrange(512)}" for m in range(members)}
    cycles = {}
    for k, m in enumerate(order):
        cycle += 1
        cycles[m] = cycle
        last = k == len(order) - 1
        add(cycle_record(t, cycle, ns, names[m], uids[m], gang, "Permit",
                         "Success" if last else "Wait", f"{ns}/{names[rep]}",
                         message="" if last else "waiting for gang members", node=nodes[m]))
    for m in order:
        add(cycle_record(t, cycles[m], ns, names[m], uids[m], gang, "Bind", "Bound",
                         f"{ns}/{names[rep]}", node=nodes[m]))
    for m in range(members):
        rv[m] += 5
        add(pod(t, "MODIFIED", ns, job, m, members, uids[m], owner, rv[m],
                node=nodes[m]), 10_000)
    for m in range(members):
        rv[m] += 2
        add(pod(t, "MODIFIED", ns, job, m, members, uids[m], owner, rv[m],
                node=nodes[m], condition=True), 200_000)  # ContainerCreating
    for m in range(members):
        rv[m] += 4
        add(pod(t, "MODIFIED", ns, job, m, members, uids[m], owner, rv[m],
                node=nodes[m], phase="Running"), 500_000)
    for m in range(members):
        rv[m] += 3
        add(pod(t, "MODIFIED", ns, job, m, members, uids[m], owner, rv[m],
                node=nodes[m], phase="Running", condition=True), 100_000)  # Ready
    if rng.random() < 0.02:
        t += 30_000_000
        for m in range(members):
            rv[m] += 9
            add(pod(t, "DELETED", ns, job, m, members, uids[m], owner, rv[m],
                    node=nodes[m], phase="Succeeded", deleting=True), 100_000)
    return out


def waves(gangs: int, members: int = 8, seed: int = 6, ns_prefix: str = "bench",
          first: int = 0, manifests: bool = False) -> Iterator[list[tuple[str, bytes]]]:
    """The trace as lists of ``(key, value)``, one list per wave of ``WAVE`` gangs, in
    event-time order. ``first`` offsets the gang indexes (a disjoint set of gangs);
    ``manifests`` publishes whole Pods (see the module's help)."""
    for w_start in range(first, first + gangs, WAVE):
        w_end = min(w_start + WAVE, first + gangs)
        rng = random.Random(f"{seed}:{ns_prefix}:{w_start}")
        base = T0 + (w_start // WAVE) * WAVE_SPACING
        recs: list[tuple[int, int, int, str, bytes]] = []
        for i in range(w_start, w_end):
            start = base + rng.randrange(30_000_000)
            recs.extend((at, i, seq, key, value)
                        for at, seq, key, value in _gang_records(i, members, start, rng,
                                                                 ns_prefix, manifests))
        recs.sort(key=lambda r: (r[0], r[1], r[2]))
        yield [(key, value) for _at, _i, _seq, key, value in recs]


def trace(gangs: int, members: int = 8, seed: int = 6, ns_prefix: str = "bench",
          first: int = 0, manifests: bool = False) -> Iterator[tuple[str, bytes]]:
    """The whole trace as ``(key, value)`` pairs in event-time order (``manifests``: whole
    Pods, see the module's help)."""
    for wave in waves(gangs, members, seed, ns_prefix, first, manifests):
        yield from wave


if __name__ == "__main__":  # a sample: python bench/synthetic.py GANGS > trace.jsonl
    import sys

    for _key, value in trace(int(sys.argv[1]) if len(sys.argv) > 1 else 1):
        sys.stdout.write(value.decode() + "\n")
