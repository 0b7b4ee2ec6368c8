"""Holds on the real scheduler: never-fitting gangs with gangstate's hold on against off (issue 24).

Usage::

    python bench/holds.py [--gangs 1,10] [--window 60] [--repeats 5] [--json-only]

One local control plane (``deploy/cluster/controlplane.py``: two KWOK nodes of 8 cpu, 32Gi and
1 ``nvidia.com/gpu``; the shim build of koord-scheduler v1.8.0) and one local Kafka
(``KAFKA_BOOTSTRAP_SERVERS`` when set). For each mode, ``off`` then ``on``, a gangstate chain
of its own (watch, worker with ``FoldSettings.holds`` off or on, sink; topics of its own, the
shim restarted onto them) and, for each count N of ``--gangs``, N gangs of 3 x 1 GPU
(minMember 3) that can never fit on the 2 GPUs, in a namespace of their own:

1. wait until each gang is storming (``off``: a failed attempt of each in the scheduler's log)
   or held (``on``: gangstate's ``GangHeld`` Event on one of its pods);
2. a window of ``--window`` seconds (wall clock), measured across it, as rates a minute:
   ``rounds`` (the shim's ``RoundOpened`` records plus ``rounds_skipped``, by their event time,
   from the chain's gang-events topic), ``attempts`` (``Unable to schedule pod`` lines of the
   scheduler's log for the namespace: kube-scheduler logs each failed attempt when it happens),
   ``failed_scheduling`` (``FailedScheduling`` Events of the namespace whose ``eventTime`` falls
   in the window, counted once koord-scheduler's delayed writes of them have drained),
   ``scheduler_cpu_s`` (koord-scheduler's user + system CPU seconds, ``/proc/<pid>/stat``) and
   ``api_writes`` (the API server's ``apiserver_request_total`` of verbs POST, PUT, PATCH,
   DELETE and APPLY, every client);
3. a small gang that fits (2 pods of 100m cpu, minMember 2), ``--repeats`` times: seconds from
   its first create call to both pods bound (``spec.nodeName``, polled every 20 ms);
4. for N = 1 only: a node of 1 GPU joins; seconds from its create call to the 3 members bound
   (and the gang's failed attempts in the 5 s before it: without holds koord-scheduler may have
   stopped trying the gang by itself); the node is deleted again.

Before the modes: the small gang's bind time with no never-fitting gang at all (the baseline).
Prints one table and a JSON line (``{"bench": "holds", ...}``). Figures in docs/shim.md,
"Holding a gang that cannot fit: measured". A run with the defaults took 11 minutes on 2 cores
(5 windows of 60 s, plus starting, settling and draining).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import client  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from streams.core.fold import FoldSettings  # noqa: E402
from streams.dev.localcluster import (Chain, controlplane_module, create_namespace,  # noqa: E402
                                     gang_pod, pod_events)
from streams.dev.localkafka import broker_module  # noqa: E402
from streams.kafka.publishing import ensure_topics  # noqa: E402
from streams.kafka.reading import read_all  # noqa: E402
from streams.settings import Settings, Topics  # noqa: E402
from streams.wire.contracts import event_time  # noqa: E402

T = TypeVar("T")
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE", "APPLY")
NODE = "bench-gpu-3"


def wait_for(what: str, check: Callable[[], T | None], timeout: float,
             every: float = 0.02) -> T:
    """Poll ``check`` every ``every`` seconds until it returns a truthy value; raise
    ``TimeoutError`` naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(every)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc/<pid>/stat`` fields 14-15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def api_writes(cluster: Any) -> float:
    """The API server's write requests so far: ``apiserver_request_total`` summed over the
    verbs of ``WRITE_VERBS`` (every client, every resource)."""
    total = 0.0
    for family in text_string_to_metric_families(cluster.get("/metrics")):
        if family.name == "apiserver_request":
            total += sum(s.value for s in family.samples if s.name == "apiserver_request_total"
                         and s.labels.get("verb") in WRITE_VERBS)
    return total


def klog_time(line: str) -> float | None:
    """Unix seconds of a klog line's header (``I1203 09:47:08.519499 ...``: local time, this
    year), or ``None`` for a line without one."""
    try:
        at = datetime.strptime(f"{datetime.now().year} {line[1:21]}", "%Y %m%d %H:%M:%S.%f")
    except ValueError:
        return None
    return at.timestamp()


def attempts(cluster: Any, ns: str, t0: float, t1: float) -> int:
    """Failed scheduling attempts of pods of ``ns`` the scheduler logged in ``[t0, t1)`` (Unix
    seconds; ``Unable to schedule pod`` lines, kube-scheduler v1.35.2 ``schedule_one.go``)."""
    marker, n = f'pod="{ns}/', 0
    for line in cluster.log_path("koord-scheduler").read_text(errors="replace").splitlines():
        if "Unable to schedule pod" in line and marker in line:
            at = klog_time(line)
            n += at is not None and t0 <= at < t1
    return n


def failed_gangs(cluster: Any, ns: str) -> set[str]:
    """Gangs of ``ns`` (pods named ``<gang>-<i>``) with a failed attempt in the scheduler's log."""
    marker = f'pod="{ns}/'
    out = set()
    for line in cluster.log_path("koord-scheduler").read_text(errors="replace").splitlines():
        if "Unable to schedule pod" in line and marker in line:
            out.add(line.split(marker, 1)[1].split('"', 1)[0].rsplit("-", 1)[0])
    return out


def rounds(settings: Settings, ns: str, t0: float, t1: float) -> int:
    """Rounds the shim reported for gangs of ``ns`` with event time in ``[t0, t1)`` (Unix
    seconds): its ``RoundOpened`` records plus the ``rounds_skipped`` it counted."""
    topic = settings.topics.gang_events
    n = 0
    for rec in read_all(settings, [topic])[topic]:
        if not isinstance(rec, dict) or not rec.get("shim") \
                or not str(rec.get("gang", "")).startswith(f"{ns}/"):
            continue
        if t0 <= event_time(rec["observed_at"]) / 1e6 < t1:
            n += (rec.get("event") == "RoundOpened") + int(rec.get("rounds_skipped") or 0)
    return n


def failed_scheduling(core: client.CoreV1Api, ns: str, t0: float, t1: float) -> int:
    """``FailedScheduling`` Events of ``ns`` whose ``eventTime`` (else ``firstTimestamp``) is
    in ``[t0, t1)`` (Unix seconds), waiting until koord-scheduler's delayed writes drained: the
    count is final once an Event of a later time exists and it did not change for 3 s, or it did
    not change for 20 s."""
    def count() -> tuple[int, bool]:
        n, later = 0, False
        for e in core.list_namespaced_event(ns, field_selector="reason=FailedScheduling").items:
            at = e.event_time or e.first_timestamp or e.metadata.creation_timestamp
            ts = at.timestamp()
            n += t0 <= ts < t1
            later = later or ts >= t1 + 1
        return n, later

    last, since = count()[0], time.monotonic()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        time.sleep(1)
        n, later = count()
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since >= (3 if later else 20):
            break
    return last


def bound_all(core: client.CoreV1Api, ns: str, names: list[str]) -> bool:
    """True once every pod of ``names`` in ``ns`` has a node (``spec.nodeName``)."""
    pods = {p.metadata.name: p for p in core.list_namespaced_pod(ns).items}
    return all(n in pods and pods[n].spec.node_name for n in names)


def delete_all(core: client.CoreV1Api, ns: str) -> None:
    """Delete every pod of ``ns`` at once and wait until they are gone."""
    for p in core.list_namespaced_pod(ns).items:
        try:
            core.delete_namespaced_pod(p.metadata.name, ns, grace_period_seconds=0)
        except ApiException as err:
            if err.status != 404:
                raise
    wait_for(f"pods of {ns} gone", lambda: not core.list_namespaced_pod(ns).items, 120, 0.2)


def small_gang_seconds(core: client.CoreV1Api, ns: str, repeats: int) -> list[float]:
    """Seconds from the first create call to both pods bound, for ``repeats`` small gangs
    (2 x 100m cpu, minMember 2), one after the other, each deleted after."""
    out = []
    for i in range(repeats):
        name, pods = f"small-{i}", [f"small-{i}-{j}" for j in range(2)]
        start = time.monotonic()
        for p in pods:
            core.create_namespaced_pod(ns, gang_pod(ns, p, gang=name, min_available=2))
        wait_for(f"{name} bound", lambda: bound_all(core, ns, pods), 120)
        out.append(time.monotonic() - start)
        for p in pods:
            core.delete_namespaced_pod(p, ns, grace_period_seconds=0)
        wait_for(f"{name} gone", lambda: not [x for x in core.list_namespaced_pod(ns).items
                                             if x.metadata.name in pods], 60, 0.1)
    return out


def gangstate_told(core: client.CoreV1Api, ns: str, pod: str, reason: str) -> bool:
    """True once gangstate wrote an Event of ``reason`` on ``pod``."""
    return any(e["from"] == "gangstate" and e["reason"] == reason
               for e in pod_events(core, ns, pod))


class Run:
    """One measurement run: a cluster, a Kafka bootstrap, the window and repeats."""

    def __init__(self, cluster: Any, bootstrap: str, window: float, repeats: int,
                 logdir: Path) -> None:
        self.cluster, self.bootstrap = cluster, bootstrap
        self.window, self.repeats, self.logdir = window, repeats, logdir
        self.core = client.CoreV1Api(cluster.api_client())

    def chain(self, holds: bool) -> Chain:
        """Start a chain (holds on or off) and point the shim at its topics."""
        run = uuid.uuid4().hex[:8]
        settings = Settings(bootstrap=self.bootstrap, topics=Topics(f"bench-holds-{run}."),
                            partitions=4, app_id=f"gangstate-bench-holds-{run}",
                            fold=FoldSettings(grace_seconds=10.0, holds=holds))
        ensure_topics(settings)
        chain = Chain(self.cluster, settings, self.logdir / f"chain-{run}")
        chain.start(ready_timeout=180)
        self.cluster.use_shim({"KAFKA_BOOTSTRAP_SERVERS": settings.bootstrap,
                               **settings.security.env(),
                               "GANGSTATE_TOPIC_PREFIX": settings.topics.prefix,
                               "GANGSTATE_SHIM_ID": f"bench-shim-{run}"}, timeout=120)
        return chain

    def window_rates(self, chain: Chain, ns: str) -> dict[str, Any]:
        """One window of ``self.window`` seconds from now: the rates a minute of the rounds,
        failed attempts (of ``ns``), the scheduler's CPU seconds and the API server's writes
        (``FailedScheduling`` Events are counted later, once drained: ``t0`` and ``t1``
        are returned)."""
        pid = self.cluster.pid("koord-scheduler")
        c0, w0, t0 = cpu_seconds(pid), api_writes(self.cluster), time.time()
        time.sleep(self.window)  # the measured window itself
        c1, w1, t1 = cpu_seconds(pid), api_writes(self.cluster), time.time()
        per_min = 60.0 / (t1 - t0)
        return {"window_s": round(t1 - t0, 1), "t0": t0, "t1": t1,
                "rounds_per_min": round(rounds(chain.settings, ns, t0, t1) * per_min, 1),
                "attempts_per_min": round(attempts(self.cluster, ns, t0, t1) * per_min, 1),
                "scheduler_cpu_s_per_min": round((c1 - c0) * per_min, 2),
                "api_writes_per_min": round((w1 - w0) * per_min, 1)}

    def baseline(self, chain: Chain) -> dict[str, Any]:
        """No never-fitting gang: the window's rates and the small gang's bind times."""
        create_namespace(self.core, "hb-baseline")
        got = self.window_rates(chain, "hb-baseline")
        got["small_gang_bind_s"] = [round(s, 3) for s in
                                    small_gang_seconds(self.core, "hb-baseline", self.repeats)]
        return got

    def never_fitting(self, chain: Chain, mode: str, n: int) -> dict[str, Any]:
        """N never-fitting gangs under ``chain``: the window's rates, the small gang's bind
        times, and (N = 1) the node-to-bound time."""
        ns = f"hb-{mode}-{n}"
        create_namespace(self.core, ns)
        gangs = [[f"g{i}-{j}" for j in range(3)] for i in range(n)]
        for i, pods in enumerate(gangs):
            for p in pods:
                self.core.create_namespaced_pod(ns, gang_pod(ns, p, gang=f"g{i}",
                                                             min_available=3, gpu=1))
        if mode == "on":
            for pods in gangs:
                wait_for(f"GangHeld on {ns}/{pods[0][:-2]}", lambda: any(
                    gangstate_told(self.core, ns, p, "GangHeld") for p in pods), 180, 0.5)
        else:
            wait_for(f"a failed attempt of each gang of {ns}", lambda: {
                f"g{i}" for i in range(n)} <= failed_gangs(self.cluster, ns), 120, 0.5)
        time.sleep(2)  # a window's edge, not a wait: a round under way may still end
        result: dict[str, Any] = {"gangs": n, **self.window_rates(chain, ns)}
        result["small_gang_bind_s"] = [round(s, 3) for s in
                                       small_gang_seconds(self.core, ns, self.repeats)]
        result["failed_scheduling_per_min"] = round(failed_scheduling(
            self.core, ns, result["t0"], result["t1"]) * 60.0 / (result["t1"] - result["t0"]), 1)
        if n == 1:
            now = time.time()
            # whether the scheduler still tried the gang: koord-scheduler v1.8.0 may leave a
            # storming gang in kube-scheduler's unschedulable pods by itself (then only the
            # 5-minute flush moves it: hence the wait of 420 s)
            result["attempts_in_5s_before_node"] = attempts(self.cluster, ns, now - 5, now)
            start = time.monotonic()
            self.cluster.add_node(controlplane_module().NodeSpec(name=NODE, gpu=1), wait=False)
            wait_for("the gang bound on the new node", lambda: bound_all(self.core, ns, gangs[0]),
                     420)
            result["node_to_bound_s"] = round(time.monotonic() - start, 3)
        delete_all(self.core, ns)
        if n == 1:
            self.core.delete_node(NODE)
            wait_for(f"{NODE} gone", lambda: NODE not in {
                x.metadata.name for x in self.core.list_node().items}, 60, 0.2)
        return result


def spread(values: list[float]) -> str:
    """``median (min-max)`` of seconds, e.g. ``0.21 (0.18-0.30)``."""
    return (f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"
            if values else "-")


def table(result: dict[str, Any]) -> str:
    """The measured table: one row per figure, one column per (gangs, mode)."""
    cols = [(n, m) for n in result["gangs"] for m in ("off", "on")]
    rows = [("scheduling rounds a minute", "rounds_per_min"),
            ("failed attempts a minute (scheduler log)", "attempts_per_min"),
            ("FailedScheduling Events a minute", "failed_scheduling_per_min"),
            ("scheduler CPU seconds a minute", "scheduler_cpu_s_per_min"),
            ("API server write requests a minute", "api_writes_per_min")]
    head = "| figure | " + " | ".join(f"{n} gang{'s' * (n > 1)}, hold {m}" for n, m in cols)
    lines = [head + " |", "|---" * (len(cols) + 1) + "|"]
    for label, key in rows:
        lines.append(f"| {label} | " + " | ".join(
            str(result["modes"][m][str(n)][key]) for n, m in cols) + " |")
    lines.append("| small gang: seconds to bound, median (min-max) | " + " | ".join(
        spread(result["modes"][m][str(n)]["small_gang_bind_s"]) for n, m in cols) + " |")
    lines.append("| node added: seconds to the held gang bound | " + " | ".join(
        str(result["modes"][m][str(n)].get("node_to_bound_s", "-")) for n, m in cols) + " |")
    base = result["baseline"]
    lines.append(f"\nno never-fitting gang: small gang bound in {spread(base['small_gang_bind_s'])}"
                 f" s; scheduler CPU {base['scheduler_cpu_s_per_min']} s and API server writes "
                 f"{base['api_writes_per_min']} a minute")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the measurement; print the table and a JSON line. Returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gangs", default="1,10",
                    help="counts of never-fitting gangs, comma-separated (default 1,10)")
    ap.add_argument("--window", type=float, default=60.0,
                    help="seconds of each measured window (default 60)")
    ap.add_argument("--repeats", type=int, default=5,
                    help="small gangs bound per situation (default 5)")
    ap.add_argument("--json-only", action="store_true", help="print the JSON line alone")
    args = ap.parse_args(argv)
    try:
        counts = [int(x) for x in args.gangs.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--gangs: comma-separated counts expected, got {args.gangs!r}")
    if not counts or min(counts) < 1 or args.window <= 0 or args.repeats < 1:
        ap.error("--gangs counts, --window and --repeats must be positive")
    say = (lambda _: None) if args.json_only else (lambda line: print(line, flush=True))
    broker = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        broker = broker_module().LocalKafka()
        bootstrap = broker.start(timeout=120)
    cluster = controlplane_module().LocalCluster(progress=say)
    result: dict[str, Any] = {"bench": "holds", "gangs": counts, "window_s": args.window,
                              "repeats": args.repeats, "modes": {}}
    try:
        cluster.start(timeout=300)
        run = Run(cluster, bootstrap, args.window, args.repeats,
                  Path(tempfile.mkdtemp(prefix="gangstate-bench-holds-")))
        for mode in ("off", "on"):
            chain = run.chain(holds=mode == "on")
            try:
                if mode == "off":
                    result["baseline"] = run.baseline(chain)
                    say(f"no never-fitting gang: {json.dumps(result['baseline'])}")
                result["modes"][mode] = {}
                for n in counts:
                    got = run.never_fitting(chain, mode, n)
                    result["modes"][mode][str(n)] = got
                    say(f"hold {mode}, {n} gangs: {json.dumps(got)}")
            finally:
                chain.stop()
    finally:
        cluster.stop()
        if broker is not None:
            broker.stop()
    say(table(result))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
