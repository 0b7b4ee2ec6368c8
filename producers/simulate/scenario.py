"""Simulation scenarios: the YAML format, its validation, and the planned workload.

Where it sits: the input of the simulator. ``load_scenario`` turns a YAML file (or the name of a
bundled scenario in ``producers/simulate/scenarios/``) into a frozen ``Scenario``;
``plan_workload`` draws every job, pod, delay, runtime and uid up front from
``random.Random(seed)``, so that a run with commands and a run without them face exactly the
same workload (the scheduling itself draws no randomness).

Format (all times in seconds of virtual time, resources in whole GPUs and CPU cores)::

    name: switch-matters
    description: free text
    start: "2026-11-02T00:00:00Z"      # virtual time zero, RFC 3339
    duration: 86400                     # jobs arrive during this window
    drain: 7200                         # then the cluster runs on without arrivals
    scheduler:                          # all optional, defaults below
      attempt_seconds: 0.01             # one scheduling attempt (one member, one cycle)
      bind_seconds: 0.2                 # Bind of one pod
      start_seconds: 2                  # bound -> Running
      backoff_initial: 1                # kube-scheduler podInitialBackoffSeconds
      backoff_max: 10                   # kube-scheduler podMaxBackoffSeconds
      unschedulable_max: 300            # podMaxInUnschedulablePodsDuration (5 min)
      flush_interval: 30                # flushUnschedulablePodsLeftover period
      delete_after: 30                  # finished pods are deleted by their controller
      command_latency: 1.0              # fold output -> shim inbox, in-process mode
      grace_seconds: 10                 # fold hold-warning grace (FoldSettings)
    node_pools:
      - {name: gpu-a, count: 8, gpu: 8, cpu: 96}
    jobs:                               # the job mix
      - name: train
        namespace: team-a
        rate_per_hour: 4                # Poisson arrivals
        gang_size: 4                    # pods per job (total-number)
        min_available: 4                # default gang_size
        gpus_per_pod: 8
        cpu_per_pod: 16
        member_delay: [0, 3]            # uniform creation delay of each member after arrival
        late_fraction: 0.0              # share of jobs whose last member comes late ...
        late_delay: [60, 180]           # ... by this much (uniform)
        mode: Strict                    # or NonStrict
        waiting_time: 600               # gang waiting-time annotation (Go duration, seconds)
        runtime: [1800, 3600]           # uniform, from gang bound to Succeeded
        priority: 0
        fixed_arrivals: [10, 20]        # optional: arrival times instead of rate_per_hour

Errors: ``load_scenario`` raises ``ScenarioError`` (a ``ValueError``) naming the bad field.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from streams.core.timefmt import parse_time

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names the field."""


@dataclass(frozen=True)
class SchedulerConfig:
    """Timing of the modelled scheduler, all in seconds of virtual time (see module doc).

    Defaults follow kube-scheduler (backoff 1 s to 10 s, unschedulable pods flushed after 5 min,
    checked every 30 s: ``pkg/scheduler/internal/queue/scheduling_queue.go``).
    """

    attempt_seconds: float = 0.01
    bind_seconds: float = 0.2
    start_seconds: float = 2.0
    backoff_initial: float = 1.0
    backoff_max: float = 10.0
    unschedulable_max: float = 300.0
    flush_interval: float = 30.0
    delete_after: float = 30.0
    command_latency: float = 1.0
    grace_seconds: float = 10.0


@dataclass(frozen=True)
class NodePool:
    """``count`` identical nodes named ``<name>-<i>`` with ``gpu`` GPUs and ``cpu`` cores."""

    name: str
    count: int
    gpu: int
    cpu: int


@dataclass(frozen=True)
class JobMix:
    """One kind of job: a gang of ``gang_size`` pods (see module doc for units and defaults)."""

    name: str
    namespace: str = "default"
    rate_per_hour: float = 1.0
    gang_size: int = 2
    min_available: int | None = None
    gpus_per_pod: int = 1
    cpu_per_pod: int = 4
    member_delay: tuple[float, float] = (0.0, 2.0)
    late_fraction: float = 0.0
    late_delay: tuple[float, float] = (60.0, 180.0)
    mode: str = "Strict"
    waiting_time: float = 600.0
    runtime: tuple[float, float] = (600.0, 1800.0)
    priority: int = 0
    fixed_arrivals: tuple[float, ...] = ()

    @property
    def min_member(self) -> int:
        """min-available, defaulting to the gang size."""
        return self.gang_size if self.min_available is None else self.min_available


@dataclass(frozen=True)
class Scenario:
    """A whole scenario: cluster, job mix, timing. ``start`` is RFC 3339; the others seconds."""

    name: str
    node_pools: tuple[NodePool, ...]
    jobs: tuple[JobMix, ...]
    description: str = ""
    start: str = "2026-11-02T00:00:00Z"
    duration: float = 3600.0
    drain: float = 3600.0
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)

    @property
    def start_micros(self) -> int:
        """Virtual time zero as microseconds since the Unix epoch."""
        return parse_time(self.start)


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: expected a mapping, got {type(data).__name__}")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ScenarioError(f"{where}: unknown field(s) {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, list):
            value = tuple(value)
        values[key] = value
    try:
        return cls(**values)
    except TypeError as err:
        raise ScenarioError(f"{where}: {err}") from None


def _check(s: Scenario) -> Scenario:
    if not s.node_pools:
        raise ScenarioError("node_pools: at least one pool is needed")
    if not s.jobs:
        raise ScenarioError("jobs: at least one job kind is needed")
    for i, p in enumerate(s.node_pools):
        if p.count < 1 or p.gpu < 0 or p.cpu < 1:
            raise ScenarioError(f"node_pools[{i}]: count >= 1, gpu >= 0, cpu >= 1")
    for i, j in enumerate(s.jobs):
        if j.gang_size < 1 or not 1 <= j.min_member <= j.gang_size:
            raise ScenarioError(f"jobs[{i}] ({j.name}): need 1 <= min_available <= gang_size")
        if j.mode not in ("Strict", "NonStrict"):
            raise ScenarioError(f"jobs[{i}] ({j.name}): mode must be Strict or NonStrict")
        for name in ("member_delay", "late_delay", "runtime"):
            pair = getattr(j, name)
            if len(pair) != 2 or pair[0] > pair[1] or pair[0] < 0:
                raise ScenarioError(f"jobs[{i}] ({j.name}): {name} must be [low, high]")
        if j.rate_per_hour < 0 or not 0 <= j.late_fraction <= 1:
            raise ScenarioError(f"jobs[{i}] ({j.name}): rate_per_hour >= 0, late_fraction in "
                                f"[0, 1]")
    try:
        parse_time(s.start)
    except ValueError:
        raise ScenarioError(f"start: not RFC 3339: {s.start!r}") from None
    return s


def scenario_from_dict(data: Any) -> Scenario:
    """Build and validate a ``Scenario`` from parsed YAML. Raises ``ScenarioError``."""
    if not isinstance(data, dict):
        raise ScenarioError("a scenario is a mapping")
    data = dict(data)
    pools = tuple(_build(NodePool, p, f"node_pools[{i}]")
                  for i, p in enumerate(data.pop("node_pools", []) or []))
    jobs = tuple(_build(JobMix, j, f"jobs[{i}]") for i, j in enumerate(data.pop("jobs", []) or []))
    sched = _build(SchedulerConfig, data.pop("scheduler", {}) or {}, "scheduler")
    s = _build(Scenario, {**data, "node_pools": pools, "jobs": jobs, "scheduler": sched},
               "scenario")
    return _check(s)


def bundled_scenarios() -> list[str]:
    """Names of the scenarios shipped in ``producers/simulate/scenarios/``."""
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Load a scenario from a YAML file path, or by the name of a bundled scenario.

    Raises ``ScenarioError`` for an unknown name or invalid content and ``OSError`` when the file
    cannot be read.
    """
    path = Path(name_or_path)
    if not path.exists():
        candidate = SCENARIO_DIR / f"{name_or_path}.yaml"
        if not candidate.exists():
            raise ScenarioError(f"no scenario file {str(name_or_path)!r} and no bundled scenario "
                                f"of that name (bundled: {', '.join(bundled_scenarios())})")
        path = candidate
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ScenarioError(f"{path}: not YAML: {err}") from None
    return scenario_from_dict(data)


# -- the planned workload ----------------------------------------------------------------------

@dataclass(frozen=True)
class PlannedPod:
    """One member pod to create ``delay`` seconds after its job arrives; ``uid`` fixed."""

    index: int
    name: str
    uid: str
    delay: float


@dataclass(frozen=True)
class PlannedJob:
    """One job (one gang): arrival time (s), kind, members, runtime (s) once bound."""

    arrival: float
    kind: JobMix
    name: str
    uid: str
    pods: tuple[PlannedPod, ...]
    runtime: float

    @property
    def gang(self) -> str:
        """The gang id ``namespace/name``."""
        return f"{self.kind.namespace}/{self.name}"


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def plan_workload(scenario: Scenario, seed: int) -> list[PlannedJob]:
    """Draw the whole workload from ``random.Random(seed)``: Poisson arrivals per job kind over
    ``duration`` (or ``fixed_arrivals``), member creation delays, late members, runtimes and
    uids. Pure function of (scenario, seed); jobs sorted by arrival time then name."""
    rng = random.Random(seed)
    jobs: list[PlannedJob] = []
    for kind in scenario.jobs:
        arrivals: list[float] = list(kind.fixed_arrivals)
        if not arrivals and kind.rate_per_hour > 0:
            t = rng.expovariate(kind.rate_per_hour / 3600.0)
            while t < scenario.duration:
                arrivals.append(t)
                t += rng.expovariate(kind.rate_per_hour / 3600.0)
        for n, at in enumerate(arrivals):
            name = f"{kind.name}-{n:04d}"
            delays = [round(rng.uniform(*kind.member_delay), 3) for _ in range(kind.gang_size)]
            if rng.random() < kind.late_fraction:
                delays[-1] = round(delays[-1] + rng.uniform(*kind.late_delay), 3)
            pods = tuple(PlannedPod(i, f"{name}-worker-{i}", _uid(rng), delays[i])
                         for i in range(kind.gang_size))
            jobs.append(PlannedJob(round(at, 3), kind, name, _uid(rng), pods,
                                   round(rng.uniform(*kind.runtime), 3)))
    jobs.sort(key=lambda j: (j.arrival, j.gang))
    return jobs
