"""A gang workload drawn from a published GPU-cluster trace, scaled to a cluster (issue 25 item 2).

Usage::

    python bench/workload.py --seed 1 --nodes 1000 --gpus-per-node 8 --window 240 > plan.jsonl
    python bench/workload.py --plan plan.jsonl        # read a plan back, print its summary

**The trace.** Alibaba's ``cluster-trace-gpu-v2023`` (Weng et al., "Beware of Fragmentation:
Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC'23),
https://github.com/alibaba/clusterdata/tree/master/cluster-trace-gpu-v2023: the file
``csv/openb_pod_list_default.csv`` lists the 8,152 tasks (Kubernetes pods) of a production GPU
cluster with ``num_gpu``, ``creation_time`` and ``deletion_time`` (seconds); the cluster is
``csv/openb_node_list_gpu_node.csv`` (1,213 GPU nodes). The figures below were counted from those
two stored files (git blob of alibaba/clusterdata at commit 7a6c496), not read off a figure:

- :data:`GPU_TASKS`: GPUs per task of the 7,064 tasks with ``num_gpu`` > 0 (1,088 CPU-only
  tasks left out): 1 GPU 6,989, 2 GPUs 16, 4 GPUs 15, 8 GPUs 44;
- :data:`TRACE_GPUS`: 6,212 GPUs on the 1,213 GPU nodes (617 of 8 GPUs, 54 of 4, 518 of 2, 24
  of 1);
- :data:`ARRIVALS`: 7,047 of those tasks were created in the last 3,397,761 s of the trace (from
  day 110 to its end at 12,901,761 s; the 17 created earlier are the long-running rest of a
  snapshot): 179.2 tasks a day, which this module takes as a Poisson rate;
- :data:`DURATION_QUANTILES`: ``deletion_time - creation_time`` of the 7,064 GPU tasks at every
  5th percentile (plus the 99th and the max), seconds;
- :data:`TRACE_HELD_GPUS`: GPUs held by the trace's tasks at an instant (:func:`held_gpus`: tasks
  with ``creation_time <= t < deletion_time``, ``num_gpu`` summed), at the 400 midpoints of 400
  equal steps of the same last 3,397,761 s (:func:`sample_instants`): median 40 (0.64 % of
  :data:`TRACE_GPUS`), p5 26, p95 54, max 71; 40 just before the trace's end (12,901,760 s).
  Counting from ``scheduled_time`` instead (the 861 GPU tasks never scheduled left out) gives
  the same median. ``python bench/workload.py --occupancy-from openb_pod_list_default.csv``
  recounts it.

**Occupancy: the CSV cannot give it.** 0.64 % is no cluster's occupancy: the 8,152 tasks are a
list sampled for the authors' scheduling simulator (its README: "trace data for the Kubernetes
Scheduler Simulator"; the simulator packs the list's tasks onto the nodes, it does not replay
their times), so their intervals say how long a task lives, not how full the cluster was. (The
``pod_phase`` column is each task's last phase, not a snapshot: the 4,149 GPU tasks it calls
``Running`` ask 4,186 GPUs, 67 % of :data:`TRACE_GPUS`, but at no instant are more than 71 GPUs
held.) :data:`OCCUPANCY` is therefore **assumed, not the trace's**: 0.8 of the GPUs held by
long-running jobs, "mostly held" as a busy AI cluster is, with room left for the plan's jobs.

**Scaling.** A job is one gang of ``ceil(G / gpus_per_member)`` members of ``gpus_per_member``
GPUs (default 1: a gang's size is its GPU count, as the brief asks; in the trace a task of G GPUs
is one pod, since ``num_gpu`` <= 8 fits one node). Jobs arrive at the trace's rate scaled by the
cluster's GPUs over :data:`TRACE_GPUS`, times ``compress`` (the time compression factor);
durations are the trace's divided by ``compress``. **Assumed, not the trace's:** a compressed
duration is held to at least ``min_duration`` seconds (default 5: a pod must live long enough to
be bound and seen running; 10 % of the trace's tasks are shorter than 74 s, which a compression
of 500 makes 0.15 s), a job still running at the end of the window is deleted there, and a job of a
special kind (below; it never runs) lives until the window's end.

**Special kinds** (shares stated by the caller, default 1 % each; the trace has none of them, they
are the cases gangstate exists for): ``cannot-fit`` a gang of 3 whose members each ask one GPU more
than a node has (never fits: FailedScheduling storms), ``held`` a gang of minMember 3 with only 2
pods created (held at PreEnqueue), ``gated`` a gang of 2 whose members carry
``spec.schedulingGates`` (never lifted in the run), ``stranded`` one member of gang ``<name>``
naming the gang ``<name>-peer`` in its ``groups`` before that gang exists, the peer (one pod)
created ``peer_delay_s`` later (Koordinator v1.8.0 does not retry the first: gangstate's
``GangMembersStranded``, as ``tests/cluster/test_cluster_v18.py`` ``v18-groups-late``).

Pure and deterministic: :func:`make_plan` draws with ``random.Random(seed)`` only. A plan is JSONL,
one :class:`Job` a line (:func:`write_plan`, :func:`read_plan`), so a run can be replayed.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import random
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import IO, Iterable

TRACE = ("Alibaba cluster-trace-gpu-v2023 (Weng et al., USENIX ATC'23), "
         "csv/openb_pod_list_default.csv")
TRACE_URL = "https://github.com/alibaba/clusterdata/tree/master/cluster-trace-gpu-v2023"

#: GPUs per task -> tasks, of the trace's 7,064 GPU tasks (``num_gpu`` > 0)
GPU_TASKS: dict[int, int] = {1: 6989, 2: 16, 4: 15, 8: 44}
#: GPUs of the trace's cluster (1,213 GPU nodes of ``openb_node_list_gpu_node.csv``)
TRACE_GPUS = 6212
#: (tasks created, seconds): the trace's last 3,397,761 s, in which 7,047 GPU tasks were created
ARRIVALS: tuple[int, int] = (7047, 3397761)
#: (percentile, seconds) of the GPU tasks' ``deletion_time - creation_time``
DURATION_QUANTILES: tuple[tuple[float, float], ...] = (
    (0, 0), (5, 43), (10, 74), (15, 105), (20, 138), (25, 175), (30, 208), (35, 249),
    (40, 309), (45, 414), (50, 545), (55, 702), (60, 902), (65, 1130), (70, 1423), (75, 1989),
    (80, 2752), (85, 4006), (90, 6260), (95, 14700), (99, 112967), (100, 12537496))

#: (median, p5, p95, max) GPUs held at the 400 instants of :func:`sample_instants` over the
#: trace's last 3,397,761 s (:func:`held_gpus` of the 7,064 GPU tasks; counted at 7a6c496)
TRACE_HELD_GPUS: tuple[int, int, int, int] = (40, 26, 54, 71)
#: the share of the cluster's GPUs held before the windows (``cluster_scale.py --occupancy``):
#: assumed (the trace gives 40 / 6,212 = 0.0064 at its median instant: a sampled task list, not
#: a cluster's load; see the module's docstring)
OCCUPANCY = 0.8

KINDS = ("normal", "cannot-fit", "held", "gated", "stranded")
SPECIAL = KINDS[1:]
#: the scheduling gate of ``gated`` members
GATE = "gangstate.dev/bench-gate"


@dataclass(frozen=True)
class Job:
    """One gang of the plan.

    ``gang`` its name (unique in the plan), ``namespace``; ``members`` the pods to create now,
    each asking ``gpus_per_member`` ``nvidia.com/gpu``; ``min_available`` the gang's minMember;
    ``arrival_s`` seconds from the run's start to the create calls; ``duration_s`` seconds from
    there to the delete calls; ``kind`` one of :data:`KINDS`; ``groups`` the gang group
    annotation (``stranded``: its peer, ``<namespace>/<gang>-peer``), ``peer_delay_s`` when the
    peer (``stranded`` only) is created, seconds after ``arrival_s``; ``gated`` whether its
    members carry :data:`GATE`.
    """

    gang: str
    namespace: str
    members: int
    gpus_per_member: int
    min_available: int
    arrival_s: float
    duration_s: float
    kind: str = "normal"
    groups: tuple[str, ...] = ()
    peer_delay_s: float = 0.0
    gated: bool = False

    @property
    def gpus(self) -> int:
        """GPUs the created members ask for in all."""
        return self.members * self.gpus_per_member


@dataclass(frozen=True)
class Shares:
    """Shares of the special kinds among all jobs (each 0 <= share, sum < 1)."""

    cannot_fit: float = 0.01
    held: float = 0.01
    gated: float = 0.01
    stranded: float = 0.01

    def by_kind(self) -> dict[str, float]:
        """``{kind: share}`` for :data:`SPECIAL`."""
        return {"cannot-fit": self.cannot_fit, "held": self.held, "gated": self.gated,
                "stranded": self.stranded}


def arrival_rate(cluster_gpus: int, compress: float) -> float:
    """Jobs a second: the trace's rate (:data:`ARRIVALS`) scaled by ``cluster_gpus`` over
    :data:`TRACE_GPUS`, times ``compress``."""
    tasks, seconds = ARRIVALS
    return tasks / seconds * cluster_gpus / TRACE_GPUS * compress


def gpu_share() -> dict[int, float]:
    """The trace's share of jobs by GPUs (:data:`GPU_TASKS`, summing to 1)."""
    total = sum(GPU_TASKS.values())
    return {g: n / total for g, n in GPU_TASKS.items()}


def draw_gpus(rng: random.Random) -> int:
    """A job's GPU count drawn from :data:`GPU_TASKS`."""
    sizes = sorted(GPU_TASKS)
    return rng.choices(sizes, weights=[GPU_TASKS[g] for g in sizes])[0]


def held_gpus(tasks: Iterable[tuple[float, float, int]], t: float) -> int:
    """GPUs held at instant ``t`` (s) by ``tasks`` of ``(creation_time, deletion_time, num_gpu)``:
    the sum of ``num_gpu`` of those with ``creation_time <= t < deletion_time``."""
    return sum(g for c, d, g in tasks if c <= t < d)


def sample_instants(start: float, end: float, n: int) -> list[float]:
    """``n`` instants in ``[start, end)``: the midpoints of ``n`` equal steps (s)."""
    step = (end - start) / n
    return [start + (i + 0.5) * step for i in range(n)]


def nearest_rank(values: Iterable[float], q: float) -> float:
    """The smallest of ``values`` with at least the share ``q`` (0 < q <= 1) at or below it."""
    v = sorted(values)
    return v[max(0, math.ceil(round(q * len(v), 9)) - 1)]


def trace_occupancy(tasks: list[tuple[float, float, int]], start: float, end: float,
                    n: int = 400) -> tuple[int, int, int, int]:
    """``(median, p5, p95, max)`` of :func:`held_gpus` at :func:`sample_instants` of
    ``[start, end)`` (GPUs; nearest rank)."""
    held = [held_gpus(tasks, t) for t in sample_instants(start, end, n)]
    return (int(nearest_rank(held, 0.5)), int(nearest_rank(held, 0.05)),
            int(nearest_rank(held, 0.95)), max(held))


def read_trace_tasks(path: Path) -> list[tuple[float, float, int]]:
    """``(creation_time, deletion_time, num_gpu)`` of the GPU tasks (``num_gpu`` > 0) of the
    trace's ``openb_pod_list_default.csv``. Raises ``ValueError`` naming a bad line."""
    import csv

    out = []
    with open(path, newline="") as f:
        for i, row in enumerate(csv.DictReader(f), 2):
            try:
                g = int(row["num_gpu"])
                if g > 0:
                    out.append((float(row["creation_time"]), float(row["deletion_time"]), g))
            except (KeyError, TypeError, ValueError) as err:
                raise ValueError(f"{path}:{i}: not a task row: {err}") from None
    return out


def prefill_gangs(seed: int, cluster_gpus: int, occupancy: float) -> list[int]:
    """GPUs of each long-running job that fills ``occupancy`` of ``cluster_gpus`` before the
    windows: drawn from :data:`GPU_TASKS` with ``random.Random(seed)`` (:func:`draw_gpus`) until
    their sum is ``floor(occupancy * cluster_gpus)``, the last cut to what is left. Each is run
    as the plan runs a job, one gang of that many members of 1 GPU. Raises ``ValueError`` when
    ``occupancy`` is not in [0, 1)."""
    if not 0 <= occupancy < 1:
        raise ValueError(f"occupancy must be in [0, 1), got {occupancy}")
    rng = random.Random(seed)
    left = math.floor(round(occupancy * cluster_gpus, 9))
    out = []
    while left > 0:
        g = min(draw_gpus(rng), left)
        out.append(g)
        left -= g
    return out


def trace_duration(u: float) -> float:
    """The trace's duration at quantile ``u`` in [0, 1] (seconds): linear in the percentile
    between the points of :data:`DURATION_QUANTILES`."""
    ps = [p / 100 for p, _ in DURATION_QUANTILES]
    i = min(max(bisect.bisect_right(ps, u), 1), len(ps) - 1)
    (p0, d0), (p1, d1) = DURATION_QUANTILES[i - 1], DURATION_QUANTILES[i]
    p0, p1 = p0 / 100, p1 / 100
    return d0 + (d1 - d0) * (u - p0) / (p1 - p0) if p1 > p0 else d1


def make_plan(seed: int, *, nodes: int = 1000, gpus_per_node: int = 8, window_s: float = 240.0,
              compress: float = 500.0, shares: Shares = Shares(), gpus_per_member: int = 1,
              min_duration: float = 5.0, namespaces: int = 10,
              peer_delay_s: float = 5.0) -> list[Job]:
    """The plan of jobs arriving in ``[0, window_s)`` seconds on a cluster of ``nodes`` x
    ``gpus_per_node`` GPUs, oldest first; pure (``random.Random(seed)``).

    Arrivals: a Poisson process of :func:`arrival_rate`; each job is of a special kind with
    the probabilities of ``shares``, else ``normal`` with GPUs from :func:`draw_gpus` split into
    members of ``gpus_per_member`` (min-available all of them); durations
    ``max(min_duration, trace_duration(u) / compress)``, cut at the window's end. Namespaces
    ``team-0`` .. ``team-<namespaces-1>``, drawn per job. Raises ``ValueError`` on a bad
    argument (one line)."""
    if nodes < 1 or gpus_per_node < 1 or window_s <= 0 or compress <= 0 or gpus_per_member < 1 \
            or min_duration < 0 or namespaces < 1:
        raise ValueError("nodes, gpus_per_node, window, compress, gpus_per_member, namespaces "
                         "must be positive (min_duration >= 0)")
    special = shares.by_kind()
    if any(s < 0 for s in special.values()) or sum(special.values()) >= 1:
        raise ValueError(f"shares must be >= 0 and sum below 1, got {special}")
    rng = random.Random(seed)
    rate = arrival_rate(nodes * gpus_per_node, compress)
    jobs: list[Job] = []
    t = rng.expovariate(rate)
    while t < window_s:
        n = len(jobs)
        ns = f"team-{rng.randrange(namespaces)}"
        duration = max(min_duration, trace_duration(rng.random()) / compress)
        duration = round(min(duration, window_s - t), 3)
        u, kind, acc = rng.random(), "normal", 0.0
        for k in SPECIAL:
            acc += special[k]
            if u < acc:
                kind = k
                break
        at = round(t, 3)
        if kind != "normal":  # it never runs: it waits until the window's end, as a user would
            duration = round(window_s - t, 3)
        if kind == "normal":
            gpus = draw_gpus(rng)
            members = math.ceil(gpus / gpus_per_member)
            job = Job(f"job-{n}", ns, members, gpus_per_member, members, at, duration)
        elif kind == "cannot-fit":
            job = Job(f"nofit-{n}", ns, 3, gpus_per_node + 1, 3, at, duration, kind)
        elif kind == "held":
            job = Job(f"held-{n}", ns, 2, 1, 3, at, duration, kind)
        elif kind == "gated":
            job = Job(f"gated-{n}", ns, 2, 1, 2, at, duration, kind, gated=True)
        else:
            job = Job(f"strand-{n}", ns, 1, 1, 1, at, duration, kind,
                      groups=(f"{ns}/strand-{n}-peer",), peer_delay_s=peer_delay_s)
        jobs.append(job)
        t += rng.expovariate(rate)
    return jobs


def write_plan(jobs: Iterable[Job], out: IO[str]) -> None:
    """Write ``jobs`` as JSONL (one object a line, the fields of :class:`Job`)."""
    for job in jobs:
        out.write(json.dumps(asdict(job), sort_keys=True) + "\n")


def read_plan(path: Path) -> list[Job]:
    """Read a plan written by :func:`write_plan`. Raises ``ValueError`` naming the line of a bad
    entry."""
    names = {f.name for f in fields(Job)}
    jobs = []
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            if not isinstance(raw, dict) or set(raw) - names:
                raise ValueError(f"unknown keys {sorted(set(raw) - names)}"
                                 if isinstance(raw, dict) else "not an object")
            raw["groups"] = tuple(raw.get("groups", ()))
            job = Job(**raw)
            if job.kind not in KINDS:
                raise ValueError(f"kind {job.kind!r} is not one of {KINDS}")
        except (ValueError, TypeError) as err:
            raise ValueError(f"{path}:{i}: not a plan entry: {err}") from None
        jobs.append(job)
    return jobs


def summary(jobs: list[Job]) -> dict[str, object]:
    """Counts of a plan: jobs, pods (members plus peers), GPUs, jobs by kind, normal jobs by
    GPUs, the last arrival (s)."""
    kinds = {k: sum(j.kind == k for j in jobs) for k in KINDS}
    sizes: dict[int, int] = {}
    for j in jobs:
        if j.kind == "normal":
            sizes[j.gpus] = sizes.get(j.gpus, 0) + 1
    return {"jobs": len(jobs), "pods": sum(j.members + (j.kind == "stranded") for j in jobs),
            "gpus": sum(j.gpus for j in jobs), "kinds": kinds,
            "normal_by_gpus": dict(sorted(sizes.items())),
            "last_arrival_s": max((j.arrival_s for j in jobs), default=0.0)}


def main(argv: list[str] | None = None) -> int:
    """Print a plan (JSONL) for ``--seed``, or with ``--plan`` the summary of a plan file."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1, help="the plan's random seed (default 1; "
                    "bench/cluster_scale.py uses 4)")
    ap.add_argument("--plan", type=Path, help="read this plan and print its summary")
    ap.add_argument("--nodes", type=int, default=1000,
                    help="nodes of the cluster the plan is scaled to (default 1000)")
    ap.add_argument("--gpus-per-node", type=int, default=8,
                    help="nvidia.com/gpu per node (default 8)")
    ap.add_argument("--window", type=float, default=240.0, help="seconds of arrivals")
    ap.add_argument("--compress", type=float, default=500.0, help="time compression factor")
    ap.add_argument("--occupancy-from", type=Path, metavar="CSV",
                    help="count TRACE_HELD_GPUS from the trace's openb_pod_list_default.csv")
    args = ap.parse_args(argv)
    try:
        if args.occupancy_from:
            tasks = read_trace_tasks(args.occupancy_from)
            end = max(c for c, _, _ in tasks)
            start = end - ARRIVALS[1]
            med, p5, p95, top = trace_occupancy(tasks, start, end)
            print(json.dumps({"gpu_tasks": len(tasks), "from_s": start, "to_s": end,
                              "held_gpus_median": med, "p5": p5, "p95": p95, "max": top,
                              "share_median": round(med / TRACE_GPUS, 4),
                              "held_gpus_at_end": held_gpus(tasks, end - 1)}))
            return 0
        if args.plan:
            print(json.dumps(summary(read_plan(args.plan))))
            return 0
        write_plan(make_plan(args.seed, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                             window_s=args.window, compress=args.compress), sys.stdout)
    except (ValueError, OSError) as err:
        print(f"workload: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
