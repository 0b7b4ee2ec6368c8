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


# -- the real shape (issue 25): bench/traffic/recorded.jsonl.gz --------------------------------

DEFAULT_SHAPE = "real"
"""The shape ``waves`` and ``trace`` give when not told (``bench/run.py --trace`` sets it)."""
STORM_EVERY = 16
"""One gang in ``STORM_EVERY`` never fits and storms (gangs ``i % STORM_EVERY == 0``)."""
STORM_PODS = 3
STORM_SECONDS = 30
"""A never-fitting gang of ``STORM_PODS`` pods storms for this many seconds of event time."""
ATTEMPTS_PER_POD_S = 14
"""Failed attempts a second per pod of a storming gang: 42 a second for 3 pods, as recorded
(43.3 FailedScheduling Events a second for one 3-pod gang, hold off)."""
EVENT_REPEAT_SHARE = 0.2
"""Share of a storm's Events written as a ``MODIFIED`` of the pod's Event (series count + 1)
rather than a new Event (``ADDED``): 8.45 of 43.5 a second as recorded."""
CONDITION_SHARE = 0.82
"""Share of a storm's attempts that change the pod's PodScheduled condition, so a condition
record is derived: 35.5 of 43.5 a second as recorded."""
POD_MODIFIED_PER_ATTEMPT = 1.1
"""Pod ``MODIFIED`` records (resourceVersion, ``nominatedNodeName``) per attempt: 47.6 of 43.5
a second as recorded."""
TICK_PARTITIONS = 8
"""Ticks: one a second of event time per partition of this many (the bench's topic)."""
NODES = 512
FIT_ERROR = f"0/{NODES} nodes are available: {NODES} Insufficient nvidia.com/gpu."
PREEMPTION = (f" no new claims to deallocate, preemption: 0/{NODES} nodes are available: "
              f"{NODES} No preemption victims found for incoming pod.")


@functools.lru_cache(maxsize=None)
def tick_keys(partitions: int = TICK_PARTITIONS) -> tuple[str, ...]:
    """One key per partition (``tick/<n>``, the first that ``partition_of`` puts there): a tick
    is folded by the partition it is in, whatever its key."""
    from streams.kafka.partitions import partition_of

    keys: list[str | None] = [None] * partitions
    n = 0
    while None in keys:
        key = f"tick/{n}"
        p = partition_of(key, partitions)
        if keys[p] is None:
            keys[p] = key
        n += 1
    return tuple(k for k in keys if k is not None)


def tick_record(at: int) -> bytes:
    """One ``gangstate.tick/v1`` (74 B, as recorded)."""
    return _DUMPS({"schema": "gangstate.tick/v1", "observed_at": format_time(at)}).encode()


def slim_pod(at: int, type_: str, ns: str, gang: str, name: str, uid: str, rv: int,
             members: int, created: str, *, node: str | None = None, phase: str = "Pending",
             nominated: str | None = None, deleting: str | None = None) -> bytes:
    """A Pod record as ``gangstate watch`` publishes it (``published``; about 0.5 KiB as
    recorded)."""
    meta: dict = {"name": name, "namespace": ns, "uid": uid, "resourceVersion": str(rv),
                  "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = deleting
    meta["annotations"] = {PREFIX + "min-available": str(members), PREFIX + "name": gang}
    spec = {"nodeName": node} if node else {}
    status: dict = {"phase": phase}
    if nominated:
        status["nominatedNodeName"] = nominated
    return _DUMPS({"schema": "gangstate.kube/v1", "observed_at": format_time(at),
                   "resource": "pods", "type": type_,
                   "object": {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                              "spec": spec, "status": status}}).encode()


def shim_record(at: int, shim: str, cycle: int, ns: str, pod: str, uid: str, gang: str,
                stage: str, status: str, *, reason: str = "", message: str = "",
                representative: str | None = None, node: str | None = None,
                **extra: object) -> bytes:
    """A ``gangstate.cycle/v1`` record of the scheduler shim (``shim``, the cycle number;
    optional fields of ``extra`` in the recorded order)."""
    rec: dict = {"schema": "gangstate.cycle/v1", "observed_at": format_time(at),
                 "scheduler": SCHEDULER, "shim": shim, "cycle": cycle,
                 "pod": {"namespace": ns, "name": pod, "uid": uid}, "gang": gang,
                 "gang_group": gang, "stage": stage, "status": status, "reason": reason,
                 "message": message, "representative": representative, "node": node}
    rec.update(extra)
    return _DUMPS(rec).encode()


def event_record(at: int, type_: str, ns: str, ev_name: str, ev_uid: str, rv: int,
                 pod: str, pod_uid: str, pod_rv: int, reason: str, message: str,
                 kind: str, count: int) -> bytes:
    """A core/v1 Event as the watch producer publishes it (as the API server returned it,
    ``managedFields`` included: about 1.3 KiB as recorded)."""
    when = format_time(at)
    created = when[:19] + "Z"
    fields = {"f:action": {}, "f:eventTime": {}, "f:note": {}, "f:reason": {},
              "f:regarding": {}, "f:reportingController": {}, "f:reportingInstance": {}}
    if count > 1:
        fields["f:series"] = {".": {}, "f:count": {}, "f:lastObservedTime": {}}
    fields["f:type"] = {}
    obj: dict = {"kind": "Event", "apiVersion": "v1",
                 "metadata": {"name": ev_name, "namespace": ns, "uid": ev_uid,
                              "resourceVersion": str(rv), "creationTimestamp": created,
                              "managedFields": [{"manager": SCHEDULER, "operation": "Update",
                                                 "apiVersion": "events.k8s.io/v1",
                                                 "time": created, "fieldsType": "FieldsV1",
                                                 "fieldsV1": fields}]},
                 "involvedObject": {"kind": "Pod", "namespace": ns, "name": pod,
                                    "uid": pod_uid, "apiVersion": "v1",
                                    "resourceVersion": str(pod_rv)},
                 "reason": reason, "message": message, "source": {}, "firstTimestamp": None,
                 "lastTimestamp": None, "type": kind, "eventTime": when}
    if count > 1:
        obj["series"] = {"count": count, "lastObservedTime": when}
    obj.update({"action": "Scheduling" if reason == "FailedScheduling" else "Binding",
                "reportingComponent": SCHEDULER, "reportingInstance": f"{SCHEDULER}-0"})
    return _DUMPS({"schema": "gangstate.kube/v1", "observed_at": when, "resource": "events",
                   "type": type_, "object": obj}).encode()


def derived_record(at: int, ns: str, pod: str, uid: str, gang: str, stage: str, status: str,
                   reason: str, message: str, source: dict, **extra: object) -> bytes:
    """A ``gangstate.cycle/v1`` record the watch producer derives from a scheduler Event or a
    pod's PodScheduled condition (``cycle`` null, ``source`` naming it)."""
    rec: dict = {"schema": "gangstate.cycle/v1", "observed_at": format_time(at),
                 "scheduler": SCHEDULER, "cycle": None,
                 "pod": {"namespace": ns, "name": pod, "uid": uid}, "gang": gang,
                 "gang_group": gang, "stage": stage, "status": status, "reason": reason,
                 "message": message, "representative": None, "node": extra.pop("node", None),
                 "source": source}
    rec.update(extra)
    return _DUMPS(rec).encode()


class _Gang:
    """Per-gang generation state: names, uids, resourceVersions, the records so far."""

    def __init__(self, i: int, members: int, start: int, rng: random.Random,
                 ns_prefix: str) -> None:
        self.ns, self.name = gang_name(i, ns_prefix)
        self.gang = f"{self.ns}/{self.name}"
        self.members = members
        self.pods = [f"{self.name}-{m}" for m in range(members)]
        self.uids = [_uid(rng) for _ in range(members)]
        self.rv = [10_000 + rng.randrange(1000) + 10 * m for m in range(members)]
        self.t = start
        self.created = [""] * members
        self.out: list[tuple[int, int, str, bytes]] = []
        self.cycle = 1_000 + 4_096 * i
        self.shim = "bench-shim"

    def add(self, value: bytes, dt: int = 0) -> None:
        self.t += dt
        self.out.append((self.t, len(self.out), self.gang, value))

    def pod(self, type_: str, m: int, dt: int = 0, **kw: object) -> None:
        self.rv[m] += 1
        self.t += dt
        self.add(slim_pod(self.t, type_, self.ns, self.name, self.pods[m], self.uids[m],
                          self.rv[m], self.members, self.created[m], **kw))  # type: ignore

    def shim_rec(self, m: int, stage: str, status: str, dt: int = 30, **kw: object) -> None:
        self.t += dt
        self.add(shim_record(self.t, self.shim, self.cycle, self.ns, self.pods[m],
                             self.uids[m], self.gang, stage, status, **kw))  # type: ignore

    def arrive(self) -> None:
        """Pods created; each but the last refused at PreEnqueue (not enough members yet)."""
        for m in range(self.members):
            self.t += 50_000
            self.created[m] = format_time(self.t)[:19] + "Z"
            self.pod("ADDED", m)
            if m < self.members - 1:
                self.shim_rec(m, "PreEnqueue", "UnschedulableAndUnresolvable", 7_000,
                              reason="GangBasicCheckUnsatisfied",
                              message=f"gangGroup [{self.gang}] basic check: memberGangs "
                              f"[{self.gang}] child pod not collect enough, current gang: "
                              f"{self.gang}, podName: {self.ns}/{self.pods[m]}",
                              code="UnschedulableAndUnresolvable")

    def open_round(self, rep: int) -> str:
        """The shim's opening records of a detailed round by representative ``rep``."""
        self.cycle += 1
        rep_id = f"{self.ns}/{self.pods[rep]}"
        self.shim_rec(rep, "PreEnqueue", "Success", representative=rep_id, code="Success")
        self.shim_rec(rep, "PreEnqueue", "Success", reason="RepresentativeRecorded",
                      message=f"representative - -> {rep_id} (PreEnqueue)",
                      representative=rep_id, event="RepresentativeRecorded")
        self.cycle += 1
        self.shim_rec(rep, "PreFilter", "Success", reason="RoundOpened",
                      message="gang scheduling context opened by the representative",
                      round=self.cycle, event="RoundOpened")
        self.shim_rec(rep, "PreEnqueue", "Success", reason="RepresentativeCleared",
                      message=f"representative {rep_id} -> - (gang group enters scheduling)",
                      event="RepresentativeCleared")
        return rep_id


def _live_gang(i: int, start: int, rng: random.Random, ns_prefix: str
               ) -> list[tuple[int, int, str, bytes]]:
    """A gang that fits (2 to 8 pods): created, one shim round (every member waits at Permit,
    the last is ``Allowed``), bound (the shim's ``Bound`` and the ``Scheduled`` Event with its
    derived record), Running, deleted 20-60 s after its creation, as the recording's small
    gangs."""
    g = _Gang(i, rng.choice((2, 2, 4, 4, 8)), start, rng, ns_prefix)
    g.arrive()
    g.open_round(g.members - 1)
    round_ = g.cycle
    nodes = [f"gpu-node-{rng.randrange(NODES)}" for _ in range(g.members)]
    for k, m in enumerate([g.members - 1] + list(range(g.members - 1))):
        if k:
            g.shim_rec(m, "PreFilter", "Success", reason="MemberHandedOut",
                       message="NextPod hands out a pending member of the round",
                       round=round_, event="MemberHandedOut")
        if k < g.members - 1:
            g.shim_rec(m, "Permit", "Wait", 500, reason="Coscheduling", message="wait 10m0s",
                       node=nodes[m], round=round_)
        else:
            g.shim_rec(m, "Permit", "Success", 500, reason="Coscheduling", node=nodes[m],
                       round=round_, event="Allowed")
    for m in range(g.members):
        g.cycle += 1
        msg = f"Successfully assigned {g.ns}/{g.pods[m]} to {nodes[m]}"
        g.shim_rec(m, "Bind", "Bound", 20_000, message=msg, node=nodes[m])
        ev_name, ev_uid = f"{g.pods[m]}.{rng.getrandbits(60):016x}", _uid(rng)
        g.t += 20_000
        g.add(event_record(g.t, "ADDED", g.ns, ev_name, ev_uid, g.rv[m] + 5, g.pods[m],
                           g.uids[m], g.rv[m], "Scheduled", msg, "Normal", 1))
        g.add(derived_record(g.t, g.ns, g.pods[m], g.uids[m], g.gang, "Bind", "Bound", "", msg,
                             {"event": f"{g.ns}/{ev_name}", "uid": ev_uid, "count": 1,
                              "parsed": True, "form": "E1"}, node=nodes[m]))
    for phase_step in range(4):  # nodeName, container creating, Running, Ready
        for m in range(g.members):
            g.pod("MODIFIED", m, 100_000 if phase_step else 5_000, node=nodes[m],
                  phase="Running" if phase_step >= 2 else "Pending")
    g.t = start + rng.randrange(20_000_000, 60_000_000)
    gone = format_time(g.t)[:19] + "Z"
    for m in range(g.members):
        g.pod("MODIFIED", m, 1_000, node=nodes[m], phase="Running", deleting=gone)
    for m in range(g.members):
        g.pod("DELETED", m, 40_000, node=nodes[m], phase="Running", deleting=gone)
    return g.out


def _storm_gang(i: int, start: int, rng: random.Random, ns_prefix: str
                ) -> list[tuple[int, int, str, bytes]]:
    """A gang of ``STORM_PODS`` x 1 GPU that never fits, storming for ``STORM_SECONDS`` of
    event time, then deleted. Each second: one detailed shim round (as recorded: the
    representative recorded and cleared, ``RoundOpened``, members handed out, one waiting at
    Permit, a member failing Filter with ``rounds_skipped``, ``Unreserve`` rejections,
    ``RoundClosed``, the PreFilter and PreEnqueue refusals of the next rounds), and
    ``ATTEMPTS_PER_POD_S`` failed attempts per pod, each a ``FailedScheduling`` Event (new, or
    a repeat of the pod's Event with its series count), the cycle record derived from it, a Pod
    ``MODIFIED`` (resourceVersion, ``nominatedNodeName``) and, for most, the cycle record
    derived from the pod's changed PodScheduled condition."""
    g = _Gang(i, STORM_PODS, start, rng, ns_prefix)
    g.arrive()
    capacity = {"resource": "nvidia.com/gpu", "request": 1000, "allocatable": 2000 * NODES,
                "free": 0, "nodes": NODES, "room": 0, "largest": 1000, "priority": 0,
                "room_preempting": 0}
    events: list[tuple[str, str, int] | None] = [None] * g.members  # name, uid, count
    ltt = [g.created[m] for m in range(g.members)]
    ev_rv = 50_000 + 4_096 * i
    per_s = ATTEMPTS_PER_POD_S * g.members
    t0 = g.t
    for second in range(STORM_SECONDS):
        g.t = t0 + second * 1_000_000
        culprit = rng.randrange(g.members)
        rep = (culprit + 1) % g.members
        rep_id = g.open_round(rep)
        round_ = g.cycle
        others = [m for m in range(g.members) if m != rep]
        for m in others:
            g.shim_rec(m, "PreFilter", "Success", 200, reason="MemberHandedOut",
                       message="NextPod hands out a pending member of the round",
                       round=round_, event="MemberHandedOut")
        g.shim_rec(rep, "Permit", "Wait", 500, reason="Coscheduling", message="wait 10m0s",
                   node=f"gpu-node-{rng.randrange(NODES)}", round=round_)
        g.shim_rec(culprit, "Filter", "Unschedulable", 500, reason="Insufficient nvidia.com/gpu",
                   message=FIT_ERROR, culprit=f"{g.ns}/{g.pods[culprit]}", fit_error=FIT_ERROR,
                   already_wait_for_bound=1, round=round_, rounds_skipped=rng.randrange(8, 16))
        g.shim_rec(rep, "Unreserve", "Rejected", reason="GangGroupRejected",
                   message=f'Gang "{g.gang}" gets rejected due to Pod "{g.pods[rep]}" in '
                   f'Unreserve', representative=rep_id, node=f"gpu-node-{rng.randrange(NODES)}")
        g.shim_rec(rep, "PreFilter", "Success", 80_000, reason="RoundClosed",
                   message="all pending pods is already been attempted",
                   representative=rep_id, round=round_, event="RoundClosed")
        g.cycle += 1
        reject = (f'GangGroup "{g.gang}" gets rejected due to member Pod "{g.ns}/'
                  f'{g.pods[culprit]}" is unschedulable with reason "{FIT_ERROR}", '
                  f'alreadyWaitForBound: 0')
        g.shim_rec(rep, "PreFilter", "UnschedulableAndUnresolvable", 1_000,
                   reason="GangGroupRejected", message=reject,
                   culprit=f"{g.ns}/{g.pods[culprit]}", fit_error=FIT_ERROR, round=g.cycle,
                   code="UnschedulableAndUnresolvable")
        g.shim_rec(rep, "PreEnqueue", "UnschedulableAndUnresolvable", 1_000,
                   reason="GangGroupRejected", message=reject,
                   code="UnschedulableAndUnresolvable")
        for a in range(per_s):
            g.t = t0 + second * 1_000_000 + 100_000 + a * (900_000 // per_s)
            m = a % g.members
            own = m == culprit
            if own:
                message, form = FIT_ERROR + PREEMPTION, "FIT"
                facts: dict = {"culprit": f"{g.ns}/{g.pods[m]}", "fit_error": FIT_ERROR,
                               "capacity": capacity, "preemption": "no-victims",
                               "preemption_text": PREEMPTION.split("preemption: ", 1)[1]}
                stage, status, reason = "Filter", "Unschedulable", "Insufficient nvidia.com/gpu"
            else:
                message, form = (f"0/{NODES} nodes are available: {reject}. not found", "B2")
                facts = {"culprit": f"{g.ns}/{g.pods[culprit]}", "fit_error": FIT_ERROR,
                         "already_wait_for_bound": 0, "capacity": capacity}
                stage, status, reason = ("PreFilter", "UnschedulableAndUnresolvable",
                                         "GangGroupRejected")
            ev_rv += 1
            previous = events[m]
            if previous is not None and rng.random() < EVENT_REPEAT_SHARE:
                name, uid, count = previous
                count += 1
                type_ = "MODIFIED"
            else:
                name, uid, count = f"{g.pods[m]}.{rng.getrandbits(60):016x}", _uid(rng), 1
                type_ = "ADDED"
            events[m] = (name, uid, count)
            g.add(event_record(g.t, type_, g.ns, name, uid, ev_rv, g.pods[m], g.uids[m],
                               g.rv[m], "FailedScheduling", message, "Warning", count))
            g.add(derived_record(g.t, g.ns, g.pods[m], g.uids[m], g.gang, stage, status,
                                 reason, message, {"event": f"{g.ns}/{name}", "uid": uid,
                                                   "count": count, "parsed": True,
                                                   "form": form}, **facts))
            nominated = None if own else f"gpu-node-{rng.randrange(NODES)}"
            for _ in range(1 + (rng.random() < POD_MODIFIED_PER_ATTEMPT - 1)):
                g.pod("MODIFIED", m, 2_000, nominated=nominated)
            if rng.random() < CONDITION_SHARE:
                digest = f"{rng.getrandbits(64):016x}"
                g.add(derived_record(g.t, g.ns, g.pods[m], g.uids[m], g.gang, stage, status,
                                     reason, message,
                                     {"kind": "condition", "uid": f"cond:{g.uids[m]}:{ltt[m]}:"
                                      f"{digest}@{g.rv[m]}", "count": 1,
                                      "last_transition_time": ltt[m], "parsed": True,
                                      "form": form}, **facts), 1_000)
    g.t += 1_000_000
    gone = format_time(g.t)[:19] + "Z"
    for m in range(g.members):
        g.pod("DELETED", m, 40_000, deleting=gone)
    return g.out


def _real_gang(i: int, start: int, rng: random.Random, ns_prefix: str
               ) -> list[tuple[int, int, str, bytes]]:
    if i % STORM_EVERY == 0:
        return _storm_gang(i, start, rng, ns_prefix)
    return _live_gang(i, start, rng, ns_prefix)


def waves(gangs: int, members: int = 8, seed: int = 6, ns_prefix: str = "bench",
          first: int = 0, manifests: bool = False,
          shape: str | None = None) -> Iterator[list[tuple[str, bytes]]]:
    """The trace as lists of ``(key, value)``, one list per wave of ``WAVE`` gangs, in
    event-time order. ``first`` offsets the gang indexes (a disjoint set of gangs).
    ``shape`` ``real`` (the default): the recorded v1.8 mix (module help; ``members`` and
    ``manifests`` are not used, ticks included); ``legacy``: the older shape of ``members``
    pods per gang (``manifests``: whole Pods)."""
    shape = shape or DEFAULT_SHAPE
    if shape not in ("real", "legacy"):
        raise ValueError(f"shape must be 'real' or 'legacy', not {shape!r}")
    for w_start in range(first, first + gangs, WAVE):
        w_end = min(w_start + WAVE, first + gangs)
        rng = random.Random(f"{seed}:{ns_prefix}:{w_start}")
        base = T0 + (w_start // WAVE) * WAVE_SPACING
        recs: list[tuple[int, int, int, str, bytes]] = []
        for i in range(w_start, w_end):
            start = base + rng.randrange(30_000_000)
            gang = (_real_gang(i, start, rng, ns_prefix) if shape == "real" else
                    _gang_records(i, members, start, rng, ns_prefix, manifests))
            recs.extend((at, i, seq, key, value) for at, seq, key, value in gang)
        if shape == "real" and recs:
            end = max(r[0] for r in recs)
            keys = tick_keys()
            for n, at in enumerate(range(base, end + 1, 1_000_000)):
                for p, key in enumerate(keys):
                    recs.append((at, -1, n * len(keys) + p, key, tick_record(at)))
        recs.sort(key=lambda r: (r[0], r[1], r[2]))
        yield [(key, value) for _at, _i, _seq, key, value in recs]


def trace(gangs: int, members: int = 8, seed: int = 6, ns_prefix: str = "bench",
          first: int = 0, manifests: bool = False,
          shape: str | None = None) -> Iterator[tuple[str, bytes]]:
    """The whole trace as ``(key, value)`` pairs in event-time order (``shape``, ``members``
    and ``manifests`` as for ``waves``)."""
    for wave in waves(gangs, members, seed, ns_prefix, first, manifests, shape):
        yield from wave


if __name__ == "__main__":  # a sample: python bench/synthetic.py GANGS > trace.jsonl
    import sys

    for _key, value in trace(int(sys.argv[1]) if len(sys.argv) > 1 else 1):
        sys.stdout.write(value.decode() + "\n")
