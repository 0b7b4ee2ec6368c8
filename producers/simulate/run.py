"""Running a simulation: in-process against the fold, or live against Kafka; and the metrics.

Where it sits: the shell around ``scheduler.ClusterSim``.

- ``run_in_process``: every record the cluster emits is encoded as JSON, decoded with
  ``streams.wire.decoding.decode_input`` and fed to one ``streams.core.fold.PartitionFold`` (with a
  tick every virtual second, as the live watch producer does). Commands the fold returns reach
  the shim's fencing core (``producers.shim.fencing``) after ``command_latency`` virtual seconds
  and are applied at the group's next AfterPostFilter or PreEnqueue point; acks go back into the
  fold.
  Diagnostics become Kubernetes Events on the pods they involve. With ``commands=False`` the
  fold still runs but neither its commands nor its diagnostics reach the cluster: Koordinator
  alone. Deterministic: same scenario and seed, same records and metrics.
- ``run_live``: the same cluster publishes to ``gang-events`` (``streams.kafka.publishing``), a
  gangstate worker folds, commands come back over Kafka to a ``producers.shim.shim.Shim``. The
  simulation paces itself against the wall clock (``speed`` virtual seconds per second).
- ``add_command``: the ``gangstate simulate`` subcommand.

Must not: decide commands (the fold does) or apply them other than through the shim's core.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from producers.shim.fencing import ShimState, apply_pending, buffer_command
from streams.core.fold import FoldSettings, PartitionFold
from streams.core.records import Tick
from streams.wire.contracts import COMMAND_SCHEMA
from streams.wire.decoding import decode_input

from .scenario import Scenario, ScenarioError, load_scenario, plan_workload
from .scheduler import ClusterSim


@dataclass
class SimResult:
    """What one run produced. ``metrics``: see ``metrics``; ``records``: count of records the
    cluster emitted (kube + cycle + acks); ``commands``/``acks``/``diagnostics``: the fold's and
    the shim's outputs, in order; ``trace``: the JSON lines of ``gang-events`` when asked."""

    scenario: str
    seed: int
    commands_on: bool
    metrics: dict[str, Any]
    records: int = 0
    commands: list[dict[str, Any]] = field(default_factory=list)
    acks: list[dict[str, Any]] = field(default_factory=list)
    diagnostics: int = 0
    trace: list[str] | None = None


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile ``q`` (0..100) of ``values``; ``None`` for an empty list."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def metrics(sim: ClusterSim) -> dict[str, Any]:
    """The benchmark's figures for a finished run.

    ``gangs`` (count); ``cycles_per_gang``: scheduling attempts (one per member per attempt)
    divided by gangs; ``bind_latency_p50``/``p99``: virtual seconds from a gang's last member
    created to min-available members bound, over gangs that bound; ``silent_waits``: pods held
    at PreEnqueue longer than the grace period with no Event naming them before they left it;
    ``never_bound``: gangs not bound when the run ended; ``switches``: representative changes
    made by commands.
    """
    gangs = sim.gangs
    bound = [g for g in gangs if g.bound_at is not None and g.last_created is not None]
    latency = [round(g.bound_at - g.last_created, 3) for g in bound]  # type: ignore[operator]
    return {
        "gangs": len(gangs),
        "cycles": sum(g.cycles for g in gangs),
        "cycles_per_gang": round(sum(g.cycles for g in gangs) / len(gangs), 2) if gangs else 0,
        "bind_latency_p50": percentile(latency, 50),
        "bind_latency_p99": percentile(latency, 99),
        "silent_waits": sum(1 for g in gangs for p in g.pods if p.silent_wait),
        "never_bound": len(gangs) - len(bound),
        "switches": sim.switches,
    }


class _CoreAuthority:
    """The shim's fencing core, in-process: buffered commands applied at the apply points."""

    def __init__(self, emit: Callable[[str, dict[str, Any]], None],
                 stamp: Callable[[float], str]) -> None:
        self.state = ShimState()
        self.emit = emit
        self.stamp = stamp
        self.acks: list[dict[str, Any]] = []

    def receive(self, command: dict[str, Any]) -> None:
        self.state = buffer_command(self.state, command)

    def point(self, gang_group: str, kind: str, current: str | None,
              candidates: list[str], at: float) -> str | None:
        self.state, rep, acks = apply_pending(self.state, gang_group, current,
                                              at=self.stamp(at), candidates=candidates,
                                              shim_id="simulator")
        for ack in acks:
            self.acks.append(ack)
            self.emit(gang_group, ack)
        return rep


def run_in_process(scenario: Scenario, seed: int, commands: bool = True,
                   keep_trace: bool = False, latency: float | None = None) -> SimResult:
    """Simulate ``scenario`` with ``seed`` against an in-process fold (see module doc).

    ``latency`` overrides the scenario's ``command_latency`` (virtual seconds from the fold's
    output to the shim's inbox). Runs ``duration + drain`` virtual seconds. Raises nothing for a
    valid scenario; a record the fold cannot decode raises ``streams.wire.decoding.DecodeError``
    (a simulator bug).
    """
    cfg = scenario.scheduler
    delay = cfg.command_latency if latency is None else latency
    fold = PartitionFold({}, FoldSettings(grace_seconds=cfg.grace_seconds))
    result = SimResult(scenario.name, seed, commands, {}, trace=[] if keep_trace else None)
    sim: ClusterSim

    def handle(outputs: list[dict[str, Any]]) -> None:
        for out in outputs:
            if out["schema"] == COMMAND_SCHEMA:
                result.commands.append(out)
                if commands:
                    sim.call_at(sim.now + delay, lambda c=out: authority.receive(c))
            else:
                result.diagnostics += 1
                if commands:
                    for inv in out["involved"]:
                        if inv["kind"] == "Pod":
                            sim.note_event(f"{inv['namespace']}/{inv['name']}", sim.now)

    def emit(key: str, record: dict[str, Any]) -> None:
        raw = json.dumps(record, separators=(",", ":"))
        result.records += 1
        if result.trace is not None:
            result.trace.append(raw)
        decoded = decode_input(raw)
        if decoded.record is not None:
            handle(fold.feed(decoded.key, decoded.record))

    authority = _CoreAuthority(emit, lambda t: sim.stamp(t))
    sim = ClusterSim(scenario, plan_workload(scenario, seed), emit,
                     authority if commands else None)
    end = scenario.duration + scenario.drain
    t = 0.0
    while t < end:
        t = min(end, t + 1.0)
        sim.run(t)
        handle(fold.feed(None, Tick(scenario.start_micros + int(t * 1_000_000))))
    sim.finish()
    result.acks = authority.acks
    result.metrics = metrics(sim)
    return result


class _LiveAuthority:
    """The Kafka shell of the shim as the authority: commands come over Kafka."""

    def __init__(self, shim: Any) -> None:
        self.shim = shim

    def point(self, gang_group: str, kind: str, current: str | None,
              candidates: list[str], at: float) -> str | None:
        self.shim.set_representative(gang_group, current)
        if kind == "AfterPostFilter":
            return self.shim.after_post_filter(gang_group, candidates)
        return self.shim.pre_enqueue(gang_group, candidates)


def run_live(scenario: Scenario, seed: int, settings: Any, commands: bool = True,
             speed: float = 1.0, shim_id: str = "simulator",
             on_progress: Callable[[float], None] | None = None) -> SimResult:
    """Simulate ``scenario`` against Kafka in (scaled) real time (see module doc).

    ``settings``: ``streams.kafka.settings.Settings`` with ``bootstrap``; topics are created when absent.
    ``speed``: virtual seconds per wall second. Acks are the shim's; commands are read from the
    ``commands`` topic. Raises ``kafka.errors.KafkaError`` when the broker cannot be reached.
    """
    from streams.kafka.publishing import Publisher, ensure_topics
    from producers.shim.shim import Shim

    ensure_topics(settings)
    publisher = Publisher(settings, client_id="gangstate-simulator")
    shim = Shim(settings, shim_id=shim_id) if commands else None
    result = SimResult(scenario.name, seed, commands, {})

    def emit(key: str, record: dict[str, Any]) -> None:
        result.records += 1
        publisher.send_json(settings.topics.gang_events, key, record)

    sim = ClusterSim(scenario, plan_workload(scenario, seed), emit,
                     _LiveAuthority(shim) if shim else None)
    if shim is not None:
        shim.start()
        shim.wait_assigned()
    wall0 = time.monotonic()
    last_tick = [0.0]

    def pace(t: float) -> None:
        while True:
            lag = wall0 + t / speed - time.monotonic()
            if lag <= 0:
                break
            time.sleep(min(lag, 0.2))
        if t - last_tick[0] >= 1.0:
            publisher.producer.flush()
            last_tick[0] = t
            if on_progress:
                on_progress(t)

    try:
        end = scenario.duration + scenario.drain
        sim.run(end, before_event=pace)
        pace(end)
        publisher.tick_all_partitions(scenario.start_micros + int(end * 1_000_000))
        publisher.flush()
        if shim is not None:
            # let the last acks reach the topic
            time.sleep(0.5)
    finally:
        publisher.close()
        if shim is not None:
            shim.close()
            result.acks = list(shim.acks_sent)
    sim.finish()
    result.metrics = metrics(sim)
    return result


# -- the CLI -----------------------------------------------------------------------------------

def format_metrics(result: SimResult) -> str:
    """One block of text for people: the run and its figures."""
    m = result.metrics
    outcomes: dict[str, int] = {}
    for ack in result.acks:
        outcomes[ack["outcome"]] = outcomes.get(ack["outcome"], 0) + 1
    lines = [
        f"scenario {result.scenario}  seed {result.seed}  "
        f"gangstate {'on' if result.commands_on else 'off (--no-commands)'}",
        f"  records emitted           {result.records}",
        f"  gangs                     {m['gangs']}",
        f"  scheduling cycles / gang  {m['cycles_per_gang']}",
        f"  last member -> bound p50  {m['bind_latency_p50']} s",
        f"  last member -> bound p99  {m['bind_latency_p99']} s",
        f"  pods waited with no Event {m['silent_waits']}",
        f"  gangs never bound         {m['never_bound']}",
        f"  commands issued by fold   {len(result.commands)}",
        f"  acks                      {json.dumps(outcomes, sort_keys=True)}",
        f"  representative switches   {m['switches']}",
    ]
    return "\n".join(lines) + "\n"


def cmd_simulate(args: argparse.Namespace) -> int:
    """``gangstate simulate SCENARIO``: run a scenario and print its figures."""
    import os

    try:
        scenario = load_scenario(args.scenario)
    except (ScenarioError, OSError) as err:
        print(f"gangstate simulate: {err}", file=sys.stderr)
        return 2
    bootstrap = args.bootstrap or os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if bootstrap and not args.in_process:
        from streams.kafka.settings import Settings

        settings = Settings.from_env()
        settings = Settings(bootstrap=bootstrap, topics=settings.topics,
                            partitions=settings.partitions, app_id=settings.app_id,
                            fold=settings.fold, security=settings.security)
        result = run_live(scenario, args.seed, settings, commands=not args.no_commands,
                          speed=args.speed)
    else:
        result = run_in_process(scenario, args.seed, commands=not args.no_commands,
                                keep_trace=bool(args.trace), latency=args.latency)
        if args.trace:
            with open(args.trace, "w") as handle:
                handle.writelines(line + "\n" for line in result.trace or [])
    if args.output == "json":
        json.dump({"scenario": result.scenario, "seed": result.seed,
                   "commands_on": result.commands_on, "records": result.records,
                   "metrics": result.metrics, "commands": len(result.commands),
                   "acks": len(result.acks)}, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_metrics(result))
    return 0
