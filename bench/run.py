"""gangstate benchmarks: ``python bench/run.py [--quick]`` (see docs/benchmarks.md).

Prints the machine and each figure as it is measured, and ends with one JSON line holding them
all. The figures (docs/benchmarks.md): fold, decode, end to end (saturation and
latency at fixed offered rates), the bare-consumer limit in the same run, recovery, memory.
``--quick`` (1-2 minutes) uses smaller sizes; the full run without recovery took about 6 minutes on 2 cores (run F).

Uses ``KAFKA_BOOTSTRAP_SERVERS`` when set, else starts the embedded local Kafka and stops it.
Every worker it starts is stopped on the way out. Bench-only dependencies: pyinstrument, py-spy
(profiles); without them the profiles are skipped.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from statistics import quantiles
from typing import Iterator

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import synthetic  # noqa: E402
from kafkabench import (PARTITIONS, Watcher, bare_consumer, bare_latency,  # noqa: E402
                        cpu_seconds, create_compacted_topic, make_settings, paced_send, preload,
                        probe_gangs, proc_memory, produce)

from streams.kafka.partitions import partition_of  # noqa: E402
from streams.settings import Settings  # noqa: E402
from streams.core.fold import PartitionFold  # noqa: E402
from streams.core.state import to_wire  # noqa: E402
from streams.wire.decoding import decode_input  # noqa: E402
from streams.dev.worker_process import running_worker  # noqa: E402

PROFILES = HERE / "profiles"

FULL = dict(fold_gangs=2_560, mem_gangs=1_000, profile_gangs=256, sat_gangs=256,
            lat=((2_000, 10), (10_000, 5)), drain_timeout=240, recovery_gangs=100_000,
            recovery_timeout=150, scale_gangs=256, scale_workers=(1, 2, 4),
            profile_worker_gangs=256)
"""Sizes of the full run on the real-shaped trace (``bench/synthetic.py``: about 395 records
a gang, 64 gangs about 25k records): fold 2,560 gangs (about 1M records), saturation and
scale out 256 gangs (about 100k). ``--trace legacy`` multiplies the gang counts by
``LEGACY_GANGS`` (the older trace has about 96 records a gang)."""
QUICK = dict(fold_gangs=128, mem_gangs=200, profile_gangs=0, sat_gangs=16,
             lat=((2_000, 1.5), (10_000, 0.5)), drain_timeout=20, recovery_gangs=3_000,
             recovery_timeout=40, scale_gangs=16, scale_workers=(1, 2, 4),
             profile_worker_gangs=0)
LEGACY_GANGS = 4


def per_member(amount: float, members: int) -> int | None:
    """``amount`` (bytes) per member held, rounded; ``None`` when no member is held (the
    real-shaped trace deletes every gang it creates, so its folds end with none)."""
    return round(amount / members) if members else None


def say(text: str) -> None:
    print(text, flush=True)


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def machine(kafka_version: str) -> dict:
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "cpu": model, "python": platform.python_version(),
            "implementation": platform.python_implementation(), "kafka": kafka_version,
            "os": platform.platform(), "loadavg_start": [round(x, 2) for x in os.getloadavg()],
            "git": git_state()}


def git_state() -> str:
    """HEAD of the checkout, and whether streams/ had uncommitted changes (the core is being
    edited while these figures are taken)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE.parent,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "streams"], cwd=HERE.parent,
                               capture_output=True, text=True).stdout.strip()
        return head + ("+dirty(streams)" if dirty else "")
    except OSError:
        return "?"


# -- 1. fold, decode, memory of the core -------------------------------------------------------

def bench_fold(gangs: int) -> dict:
    """Decode (timed) and fold (timed) the synthetic trace wave by wave, one PartitionFold over
    a dict store, one process. Each is timed on the wall clock and in this process's CPU time
    (``process_time``): on a shared machine the wall clock counts the other processes' turns
    on the core, the CPU time is what one core does (``cpu_records_per_s``, the target's
    figure). The GC runs with the worker's thresholds (``streams.worker.app.tune_gc``)."""
    import streams.core
    from streams.worker.app import tune_gc

    thresholds = gc.get_threshold()
    tune_gc()
    try:
        return _bench_fold(gangs, streams.core.COMPILED)
    finally:
        gc.set_threshold(*thresholds)


def _bench_fold(gangs: int, compiled: bool) -> dict:

    store: dict = {}
    fold = PartitionFold(store)
    records = nbytes = outputs = 0
    t_gen = t_dec = t_fold = 0.0
    c_dec = c_fold = 0.0
    cpu = time.process_time
    gc.collect()
    rss0 = rss_bytes()
    peak = rss0
    perf = time.perf_counter
    for wave in synthetic.waves(gangs):
        t = perf()
        values = [(k, v) for k, v in wave]
        t_gen += perf() - t
        t, c = perf(), cpu()
        decoded = [decode_input(v) for _k, v in values]
        t_dec += perf() - t
        c_dec += cpu() - c
        records += len(values)
        nbytes += sum(len(v) for _k, v in values)
        del values, wave
        t, c = perf(), cpu()
        for d in decoded:
            if d.record is not None:  # a kube Event: published, not folded
                outputs += len(fold.feed(d.key, d.record))
        t_fold += perf() - t
        c_fold += cpu() - c
        del decoded
        peak = max(peak, rss_bytes())
    members = sum(len(s.members) for s in store.values())
    wire = [json.dumps(to_wire(s), separators=(",", ":")) for s in list(store.values())[:2000]]
    wire_bytes = sum(len(w) for w in wire) / max(len(wire), 1)
    return {
        "fold": {"records": records, "gangs": gangs, "outputs": outputs,
                 "compiled": compiled,
                 "seconds": round(t_fold, 2), "records_per_s": round(records / t_fold),
                 "cpu_seconds": round(c_fold, 2),
                 "cpu_records_per_s": round(records / max(c_fold, 1e-9))},
        "decode": {"records": records, "mean_value_bytes": round(nbytes / records),
                   "seconds": round(t_dec, 2), "records_per_s": round(records / t_dec),
                   "cpu_seconds": round(c_dec, 2),
                   "cpu_records_per_s": round(records / max(c_dec, 1e-9))},
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "fold_process_memory": {"members_held": members, "rss_delta_bytes": peak - rss0,
                                "bytes_per_member_rss_delta": per_member(peak - rss0, members),
                                "wire_bytes_per_gang": round(wire_bytes),
                                "wire_bytes_per_member": per_member(wire_bytes * len(wire), sum(
                                    len(s.members) for s in list(store.values())[:2000]))},
    }


def bench_store_memory(gangs: int) -> dict:
    """Bytes of the core's store (GangState values) per member, by tracemalloc: the fold runs
    under tracemalloc, the records are dropped, the store is kept."""
    waves = list(synthetic.waves(gangs, shape="legacy"))  # gangs that stay: members held
    decoded = [[decode_input(v) for _k, v in w] for w in waves]
    del waves
    gc.collect()
    tracemalloc.start()
    store: dict = {}
    fold = PartitionFold(store)
    base = tracemalloc.get_traced_memory()[0]
    for w in decoded:
        for d in w:
            if d.record is not None:
                fold.feed(d.key, d.record)
    current, peak = tracemalloc.get_traced_memory()
    del decoded
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    members = sum(len(s.members) for s in store.values())
    return {"gangs": gangs, "members_held": members, "store_bytes": held,
            "store_bytes_per_member": per_member(held, members)}


def missing_profilers() -> list[str]:
    """The bench-only profilers that are not installed (``pyinstrument``: the pure-Python
    profiles; ``py-spy``: the compiled fold's and the worker's). Their profiles are skipped."""
    import importlib.util

    missing = []
    if importlib.util.find_spec("pyinstrument") is None:
        missing.append("pyinstrument")
    if py_spy() is None:
        missing.append("py-spy")
    return missing


def py_spy() -> str | None:
    """Path of the ``py-spy`` beside this Python, or on ``PATH``; ``None`` if not installed."""
    return shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")


def profile_core(gangs: int) -> dict:
    """Profiles of decode and fold (pyinstrument) and of the compiled fold (py-spy
    ``--native``); each is skipped, and says so, when its profiler is not installed."""
    missing = missing_profilers()
    result: dict = {}
    if missing:
        result["skipped"] = f"not installed: {', '.join(missing)}"
        say(f"  profiles skipped for lack of {', '.join(missing)} "
            f"(pip install pyinstrument py-spy)")
    values = [v for _k, v in synthetic.trace(gangs)]
    decoded = [decode_input(v) for v in values]
    if "pyinstrument" not in missing:
        from profiling import profile_call

        again: list = []
        result["decode"] = profile_call(lambda: again.extend(decode_input(v) for v in values),
                                        str(PROFILES / "decode.txt"),
                                        f"decode_input on {len(values)} synthetic records")

        def fold_all() -> None:
            fold = PartitionFold({})
            for d in decoded:
                if d.record is not None:
                    fold.feed(d.key, d.record)

        result["fold"] = profile_call(fold_all, str(PROFILES / "fold.txt"),
                                      f"PartitionFold.feed on {len(decoded)} decoded records")
        say("  profiles: bench/profiles/decode.txt, bench/profiles/fold.txt")
    import streams.core

    if streams.core.COMPILED and "py-spy" not in missing:
        # pyinstrument sees none of the compiled functions
        from profiling import native_fold_profile

        result["fold_compiled"] = native_fold_profile(min(gangs, 400),
                                                      str(PROFILES / "fold-compiled.txt"))
    return result


# -- 2./3. end to end, latency, limit ------------------------------------------------------------

def probe_at(value: bytes) -> int:
    from streams.core.timefmt import parse_time

    return parse_time(json.loads(value)["observed_at"])


def with_edge_probes(items: list[tuple[str, bytes]], tag: str, cycle0: int
                     ) -> tuple[list[tuple[str, bytes]], list[tuple[str, int]],
                                list[tuple[str, int]]]:
    """Put one probe at the head and one at the tail of every partition."""
    gangs = probe_gangs(PARTITIONS, 2, tag)
    first_at, last_at = probe_at(items[0][1]), probe_at(items[-1][1])
    heads, tails = [], []
    head_items, tail_items = [], []
    for p in range(PARTITIONS):
        g_head, g_tail = gangs[p]
        heads.append((g_head, cycle0 + p))
        tails.append((g_tail, cycle0 + 100 + p))
        head_items.append((g_head, synthetic.probe(g_head, cycle0 + p, first_at)))
        tail_items.append((g_tail, synthetic.probe(g_tail, cycle0 + 100 + p, last_at)))
    return head_items + items + tail_items, heads, tails


def members_after(items: list[tuple[str, bytes]]) -> int:
    store: dict = {}
    fold = PartitionFold(store)
    for _k, v in items:
        d = decode_input(v)
        if d.record is not None:
            fold.feed(d.key, d.record)
    return sum(len(s.members) for s in store.values())


def pct(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return quantiles(values, n=1000, method="inclusive")[int(q * 1000) - 1]


def offered_load(settings: Settings, watcher: Watcher, rate: int, seconds: float,
                 first_gang: int, tag: str, drain_timeout: float, alive) -> dict:
    """Offer ``rate`` records/s of synthetic background load for ``seconds``, with a probe about
    every 20 ms mixed in; latency = probe produce time -> its GangSpecInvalid readable."""
    total = int(rate * seconds)
    gangs_needed = total // 90 + 2
    background: list[tuple[str, bytes]] = []
    for key, value in synthetic.trace(gangs_needed, first=first_gang, ns_prefix=f"lat{rate}"):
        background.append((key, value))
        if len(background) >= total:
            break
    every = max(1, rate // 50)
    pgangs = [g for part in probe_gangs(PARTITIONS, 4, f"{tag}{rate}") for g in part]
    plan: list[tuple[str, bytes, tuple[str, int] | None]] = []
    n_probe = 0
    for i, (key, value) in enumerate(background):
        if i % every == every // 2:
            gang = pgangs[n_probe % len(pgangs)]
            pid = (gang, 1_000_000 + n_probe)
            plan.append((gang, synthetic.probe(gang, pid[1], probe_at(value)), pid))
            n_probe += 1
        plan.append((key, value, None))
    topic = settings.topics.gang_events
    send_seconds, sent_at, index_of = paced_send(
        settings.bootstrap or "", [(topic, key.encode(), value, pid) for key, value, pid in plan],
        rate)
    watcher.wait_for(sent_at, drain_timeout, alive)
    got = sorted((sent_at[k], watcher.seen[k] - sent_at[k], index_of[k], watcher.seen[k])
                 for k in sent_at if k in watcher.seen)
    lat = [g[1] * 1000 for g in got]
    out: dict = {"offered_per_s": rate, "seconds": seconds, "records": len(plan),
                 "achieved_send_per_s": round(len(plan) / send_seconds), "probes": len(sent_at),
                 "probes_seen": len(got)}
    if lat:
        out.update(p50_ms=round(pct(lat, 0.5), 1), p99_ms=round(pct(lat, 0.99), 1),
                   max_ms=round(max(lat), 1))
        tenth = max(1, len(got) // 10)
        out["p50_first_tenth_ms"] = round(pct(lat[:tenth], 0.5), 1)
        out["p50_last_tenth_ms"] = round(pct(lat[-tenth:], 0.5), 1)
        if len(got) > 2:
            a, b = got[tenth - 1], got[-1]
            if b[3] > a[3]:
                out["processed_per_s"] = round((b[2] - a[2]) / (b[3] - a[3]))
            span = got[-1][0] - got[0][0]
            if span > 0:  # how fast latency grows while the load is offered
                out["latency_growth_ms_per_s"] = round((lat[-1] - lat[0]) / span, 1)
    return out


def latency_floor(bootstrap: str, rate: int, seconds: float) -> dict:
    """The harness's own latency, no worker: the same publisher, broker and watcher, with
    ``rate`` records/s of synthetic values published straight to an output topic and a probe
    (already in the form of its ``GangSpecInvalid``) about every 20 ms; send() -> readable.
    What the end-to-end latency cannot go below on this machine."""
    from streams.kafka.publishing import ensure_topics

    settings = make_settings(bootstrap, "floor")
    ensure_topics(settings)
    topic = settings.topics.diagnostics
    watcher = Watcher(bootstrap, [topic], PARTITIONS)
    watcher.start()
    try:
        total = int(rate * seconds)
        filler = [kv[1] for _i, kv in zip(range(total), synthetic.trace(total // 90 + 2))]
        every = max(1, rate // 50)
        plan: list = []
        for i in range(total):
            if i % every == every // 2:
                gang = f"floor/g{i % 97}"
                plan.append((topic, gang.encode(), json.dumps({
                    "reason": "GangSpecInvalid", "gang": gang,
                    "facts": {"field": "mode", "effective": "Strict",
                              "value": f"{synthetic.PROBE_MODE}{synthetic.PROBE_BASE + i}"}
                }).encode(), (gang, i)))
            else:
                plan.append((topic, f"filler-{i}".encode(), filler[i], None))
        _seconds, sent, _index = paced_send(bootstrap, plan, rate)
        watcher.wait_for(sent, 30)
        lat = sorted((watcher.seen[k] - sent[k]) * 1000 for k in sent if k in watcher.seen)
    finally:
        watcher.stop()
    out: dict = {"offered_per_s": rate, "seconds": seconds, "probes": len(sent),
                 "probes_seen": len(lat)}
    if lat:
        out.update(p50_ms=round(pct(lat, 0.5), 1), p99_ms=round(pct(lat, 0.99), 1),
                   max_ms=round(lat[-1], 1))
    return out


def bench_end_to_end(bootstrap: str, cfg: dict, profile: bool) -> dict:
    settings = make_settings(bootstrap, "e2e")
    from streams.kafka.publishing import ensure_topics

    ensure_topics(settings)
    items = list(synthetic.trace(cfg["sat_gangs"]))
    items, heads, tails = with_edge_probes(items, "sat", 500_000)
    result: dict = {"preload": preload(settings, items)}
    say(f"  preloaded {len(items)} records ({result['preload']['records_per_s']}/s)")
    result["limit"] = bare_consumer(bootstrap, settings.topics.gang_events, PARTITIONS,
                                    len(items))
    say(f"  limit (bare aiokafka consumer + json.loads): {result['limit']['records_per_s']}/s "
        f"({result['limit']['cpu_records_per_s']}/s per CPU second)")
    from faust_ceiling import run_mode

    result["faust_null_agent"] = run_mode(bootstrap, settings.topics.gang_events, len(items),
                                          "null", PARTITIONS)
    say(f"  Faust's own ceiling (an agent that does nothing, same stream): "
        f"{result['faust_null_agent']['records_per_s']}/s "
        f"({result['faust_null_agent']['cpu_seconds']} s CPU for "
        f"{result['faust_null_agent']['records']} records)")
    result["latency_bare"] = []
    result["latency_floor"] = []
    for rate, seconds in cfg["lat"]:
        bare = bare_latency(bootstrap, settings.topics.commands, PARTITIONS, rate, seconds,
                            [v for _k, v in items[:5000]])
        bare["loadavg"] = os.getloadavg()[0]
        floor = latency_floor(bootstrap, rate, seconds)
        floor["loadavg"] = os.getloadavg()[0]
        if "p99_ms" in bare and "p99_ms" in floor:
            floor["p50_over_bare"] = round(floor["p50_ms"] / max(bare["p50_ms"], 0.1), 1)
            floor["p99_over_bare"] = round(floor["p99_ms"] / max(bare["p99_ms"], 0.1), 1)
        result["latency_bare"].append(bare)
        result["latency_floor"].append(floor)
        say(f"  bare aiokafka produce->consume at {rate}/s: {json.dumps(bare)}")
        say(f"  harness floor (publisher -> broker -> watcher, no worker) at {rate}/s: "
            f"{json.dumps(floor)}")
    members = members_after(items)
    watcher = Watcher(bootstrap, [settings.topics.diagnostics], PARTITIONS)
    watcher.start()
    log = Path(f"/tmp/gangstate-bench-{settings.app_id}.log")
    try:
        t_start = time.monotonic()
        with running_worker(settings, log_path=log) as worker:
            alive = lambda: worker.poll() is None  # noqa: E731
            # the worker's CPU time from when every head probe is answered (its first batch)
            # to when every tail probe is: the rate per second of one core, whatever else
            # runs on the machine
            ok = watcher.wait_for(heads, 120, alive)
            c0 = cpu_seconds(worker.pid)
            ok = ok and watcher.wait_for(heads + tails, 120 + len(items) / 300, alive)
            c1 = cpu_seconds(worker.pid)
            if not ok:
                raise RuntimeError(f"saturation probes missing; worker log {log}")
            t0 = min(watcher.seen[h] for h in heads)
            t1 = max(watcher.seen[t] for t in tails)
            mem = proc_memory(worker.pid)
            result["saturation"] = {
                "records": len(items), "gangs": cfg["sat_gangs"],
                "seconds": round(t1 - t0, 2), "records_per_s": round(len(items) / (t1 - t0)),
                "cpu_seconds": round(c1 - c0, 2),
                "cpu_records_per_s": round(len(items) / max(c1 - c0, 1e-9)),
                "loadavg": round(os.getloadavg()[0], 2),
                "worker_start_to_first_output_s": round(t0 - t_start, 2)}
            faust_rss = result["faust_null_agent"]["peak_rss_bytes"]
            result["worker_memory"] = {
                "members_held": members, "peak_rss_bytes": mem["VmHWM"],
                "peak_rss_bytes_per_member": per_member(mem["VmHWM"], members),
                "faust_null_agent_peak_rss_bytes": faust_rss,
                "rss_over_faust_per_member": per_member(mem["VmHWM"] - faust_rss,
                                                        members)}
            sat, null, lim = (result["saturation"], result["faust_null_agent"],
                              result["limit"])
            null["cpu_records_per_s"] = round(null["records"] / max(null["cpu_seconds"], 1e-9))
            result["ratios"] = {
                "faust_ceiling_over_limit": round(null["records_per_s"] / lim["records_per_s"], 3),
                "worker_over_faust_ceiling": round(sat["records_per_s"] / null["records_per_s"], 3),
                "cpu_faust_ceiling_over_limit": round(null["cpu_records_per_s"]
                                                      / lim["cpu_records_per_s"], 3),
                "cpu_worker_over_faust_ceiling": round(sat["cpu_records_per_s"]
                                                       / null["cpu_records_per_s"], 3)}
            say(f"  ratios (wall clock, and per CPU second): {json.dumps(result['ratios'])}")
            say(f"  saturation: {result['saturation']['records_per_s']}/s over "
                f"{len(items)} records ({sat['cpu_records_per_s']}/s per CPU second of the "
                f"worker); worker peak RSS {mem['VmHWM'] / 2**20:.0f} MiB for "
                f"{members} members")
            latency = []
            first = cfg["sat_gangs"]
            for rate, seconds in cfg["lat"]:
                r = offered_load(settings, watcher, rate, seconds, first, "lat",
                                 cfg["drain_timeout"], alive)
                first += int(rate * seconds) // 90 + 2
                latency.append(r)
                say(f"  offered {rate}/s: {json.dumps(r)}")
            result["latency"] = latency
            if profile and cfg["profile_worker_gangs"] and py_spy() is None:
                result["profile_worker"] = {"skipped": "py-spy is not installed"}
                say("  worker profile skipped: py-spy is not installed")
            elif profile and cfg["profile_worker_gangs"]:
                result["profile_worker"] = profile_worker(settings, watcher, worker, first,
                                                          cfg["profile_worker_gangs"])
    finally:
        watcher.stop()
    result["worker_log"] = str(log)
    return result


def profile_worker(settings: Settings, watcher: Watcher, worker, first: int, gangs: int) -> dict:
    """py-spy on the running worker while it works through a burst it cannot keep up with: the
    records are sent as fast as the producer goes, the profile covers the time until the tail
    probes are out."""
    from streams.kafka.publishing import Publisher

    from profiling import summarize_collapsed

    items = list(synthetic.trace(gangs, first=first, ns_prefix="prof"))
    items, heads, tails = with_edge_probes(items, "prof", 700_000)
    raw = PROFILES / "worker-pyspy.raw"
    spy = subprocess.Popen([str(py_spy()), "record", "--pid",
                            str(worker.pid), "--nonblocking", "--rate", "200", "--format", "raw",
                            "-o", str(raw)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        pub = Publisher(settings, client_id="gangstate-bench-prof", linger_ms=20,
                        batch_size=512 * 1024)
        for key, value in items:
            pub.send(settings.topics.gang_events, key, value)
        pub.close()
        watcher.wait_for(heads + tails, 60 + len(items) / 300, lambda: worker.poll() is None)
    finally:
        spy.send_signal(signal.SIGINT)
        try:
            spy.wait(timeout=30)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait()
    if not raw.exists():
        return {"error": "py-spy wrote nothing"}
    summary = summarize_collapsed(str(raw), str(PROFILES / "worker.txt"),
                                  f"worker at saturation, {len(items)} records")
    raw.unlink()
    return summary


# -- 5. scale out -------------------------------------------------------------------------------

def group_members(bootstrap: str, group_id: str) -> tuple[str, int]:
    """State and member count of consumer group ``group_id``."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="gangstate-bench-scale")
    try:
        group = admin.describe_groups([group_id]).get(group_id) or {}
    except Exception:  # coordinator still loading
        group = {}
    finally:
        admin.close()
    state = str(group.get("group_state") or group.get("state") or "")
    return state.lower(), len(group.get("members") or [])


def records_folded(port: int) -> int:
    """``gangstate_records_total`` summed over schemas, read from a worker's ``/metrics``."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return round(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                     if line.startswith("gangstate_records_total{")))


def bench_scale(bootstrap: str, gangs: int, workers: int) -> dict:
    """``workers`` workers (one consumer group) on one 8-partition ``gang-events``: start them
    on the empty topic, wait for the group to be stable with all of them and for one probe per
    partition to be answered (every partition served), then write ``gangs`` synthetic gangs
    with head and tail probes per partition as fast as aiokafka goes (``produce``); rate =
    records / (last tail probe's output - first head probe's output). Each worker's share is
    its ``gangstate_records_total`` (``/metrics``) over the same span, and per CPU second of
    that worker (``/proc``: the workers idle before the records are written)."""
    import contextlib

    from streams.dev.localkafka import broker_module
    from streams.kafka.publishing import ensure_topics

    settings = make_settings(bootstrap, f"scale{workers}")
    ensure_topics(settings)
    items = list(synthetic.trace(gangs, ns_prefix=f"scale{workers}"))
    items, heads, tails = with_edge_probes(items, f"scale{workers}", 800_000)
    warm = [(g, 850_000 + p) for p, (g,) in enumerate(probe_gangs(PARTITIONS, 1,
                                                                  f"warm{workers}"))]
    watcher = Watcher(bootstrap, [settings.topics.diagnostics], PARTITIONS)
    watcher.start()
    ports = broker_module().free_ports(workers)
    out: dict = {"workers": workers, "records": len(items), "gangs": gangs,
                 "loadavg_start": os.getloadavg()[0]}
    try:
        with contextlib.ExitStack() as stack:
            procs = [stack.enter_context(running_worker(
                settings, log_path=Path(f"/tmp/gangstate-bench-{settings.app_id}-{i}.log"),
                extra_args=("--http-port", str(port)), ready_timeout=None))
                for i, port in enumerate(ports)]
            alive = lambda: all(p.poll() is None for p in procs)  # noqa: E731
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and alive():
                if group_members(bootstrap, settings.app_id) == ("stable", workers):
                    break
                time.sleep(0.5)
            produce(bootstrap, ((settings.topics.gang_events, g.encode(), synthetic.probe(
                g, c, probe_at(items[0][1])), partition_of(g, PARTITIONS)) for g, c in warm))
            if not watcher.wait_for(warm, 120, alive):
                raise RuntimeError(f"scale-out ({workers}): not every partition served")
            before = [records_folded(port) for port in ports]
            cpu0 = [cpu_seconds(p.pid) for p in procs]
            t_produce = time.monotonic()
            produce(bootstrap, ((settings.topics.gang_events, k.encode(), v,
                                 partition_of(k, PARTITIONS)) for k, v in items))
            t_produce = time.monotonic() - t_produce
            if not watcher.wait_for(heads + tails, 120 + len(items) / 300, alive):
                raise RuntimeError(f"scale-out ({workers}): probes missing")
            t0 = min(watcher.seen[h] for h in heads)
            t1 = max(watcher.seen[t] for t in tails)
            span = t1 - t0
            cpu = [cpu_seconds(p.pid) - c for p, c in zip(procs, cpu0)]
            per = [records_folded(port) - b for port, b in zip(ports, before)]
            out["per_worker_cpu_seconds"] = [round(c, 2) for c in cpu]
            out["per_worker_cpu_records_per_s"] = [round(n / max(c, 1e-9))
                                                   for n, c in zip(per, cpu)]
            # the records are written while the workers read them: when writing took about as
            # long as the span, the producer (same 2 cores) bounds the rate, not the workers
            out.update(produce_seconds=round(t_produce, 2),
                       produce_per_s=round(len(items) / t_produce),
                       seconds=round(span, 2), records_per_s=round(len(items) / span),
                       per_worker_records=per,
                       per_worker_per_s=[round(n / span) for n in per])
    finally:
        watcher.stop()
    out["loadavg_end"] = os.getloadavg()[0]
    return out


# -- 4. recovery -----------------------------------------------------------------------------------

def write_changelog(settings: Settings, gangs: int) -> dict:
    """Fill ``<app id>-gangs-changelog`` (created compacted, 8 partitions, as Faust creates it)
    with ``gangs`` gangs of 8 members, one record per gang, exactly as the worker writes them:
    key = the UTF-8 gang id, value = ``streams.worker.table.encode_state`` of the final state of a
    folded synthetic gang (renamed per gang), in the gang's partition. Returns the first gang
    of each partition (the probes go there), the byte count and the time taken."""
    import re

    from streams.kafka.publishing import ensure_topics

    from streams.worker.table import encode_state
    from streams.core.fold import next_due

    bootstrap = settings.bootstrap or ""
    ensure_topics(settings)
    changelog = f"{settings.app_id}-gangs-changelog"
    create_compacted_topic(bootstrap, changelog, PARTITIONS)
    # template: the final state of synthetic gang 0 (not deleted), as the worker stores it
    store: dict = {}
    fold = PartitionFold(store, settings.fold)
    for _k, v in synthetic.trace(1, ns_prefix="rec", shape="legacy"):
        d = decode_input(v)
        if d.record is not None:
            fold.feed(d.key, d.record)
    (_gang0, state0), = store.items()
    template = encode_state(state0, next_due(state0, settings.fold) is not None).decode()
    ns0, job0 = synthetic.gang_name(0, "rec")
    uids = list(state0.members)
    # split the template once at every renamed token: namespace, job name, member uids
    names = [f"{ns0}/", job0, *uids]
    token = re.compile("|".join(re.escape(t) for t in sorted(names, key=len, reverse=True)))
    pieces = token.split(template)
    found = token.findall(template)
    uid_index = {u: k for k, u in enumerate(uids)}
    nbytes = 0
    by_partition: dict[int, str] = {}

    def records() -> Iterator[tuple[str, bytes, bytes, int]]:
        nonlocal nbytes
        for i in range(gangs):
            ns, job = synthetic.gang_name(i, "rec")
            subst = [f"{ns}/" if f == f"{ns0}/" else job if f == job0
                     else f"{i:08x}{uids[uid_index[f]][8:]}" for f in found]
            out = [pieces[0]]
            for sub, piece in zip(subst, pieces[1:]):
                out.append(sub)
                out.append(piece)
            data = "".join(out).encode()
            gang = f"{ns}/{job}"
            p = partition_of(gang, PARTITIONS)
            by_partition.setdefault(p, gang)
            nbytes += len(data)
            yield changelog, gang.encode(), data, p

    t = time.perf_counter()
    produce(bootstrap, records())
    return {"by_partition": by_partition, "bytes": nbytes, "members": gangs * len(uids),
            "seconds": time.perf_counter() - t, "clock": state0.clock}


def time_recovery(settings: Settings, written: dict, timeout: float, cycle0: int,
                  extra_args: tuple[str, ...] = ()) -> dict:
    """Put one probe per partition in gang-events, start a worker, and time each probe's
    output from the worker's start (the worker recovers the table first)."""
    from streams.kafka.publishing import Publisher

    bootstrap = settings.bootstrap or ""
    probes = []
    pub = Publisher(settings, client_id="gangstate-bench-probes")
    for p, gang in sorted(written["by_partition"].items()):
        probes.append((gang, cycle0 + p))
        pub.send(settings.topics.gang_events, gang,
                 synthetic.probe(gang, cycle0 + p, written["clock"] + 60_000_000))
    pub.close()
    watcher = Watcher(bootstrap, [settings.topics.diagnostics], PARTITIONS)
    watcher.start()
    log = Path(f"/tmp/gangstate-bench-{settings.app_id}.log")
    mem: dict = {}
    try:
        t0 = time.monotonic()
        with running_worker(settings, log_path=log, extra_args=extra_args) as worker:
            ok = watcher.wait_for(probes, timeout, lambda: worker.poll() is None)
            mem = proc_memory(worker.pid) if worker.poll() is None else {}
    finally:
        watcher.stop()
    times = [watcher.seen[k] - t0 for k in probes if k in watcher.seen]
    members = written["members"]
    out: dict = {"partitions_serving": len(times), "partitions": len(probes)}
    if not ok:
        out["error"] = (f"{len(probes) - len(times)} of {len(probes)} partitions did not "
                        f"serve within {timeout} s; worker log {log}")
    if times:
        out.update(first_partition_serves_s=round(min(times), 2),
                   serves_s=round(max(times), 2) if ok else None,
                   worker_peak_rss_bytes=mem.get("VmHWM"),
                   worker_peak_rss_bytes_per_member=round(mem["VmHWM"] / members)
                   if mem else None)
    out["worker_log"] = str(log)
    return out


def bench_recovery(bootstrap: str, gangs: int, timeout: float) -> dict:
    """A changelog holding ``gangs`` gangs (8 members each, one record per gang: a compacted
    changelog, written as the worker writes it), a probe per partition waiting in gang-events;
    time from the worker's start until every probe's output is readable."""
    settings = make_settings(bootstrap, "rec")
    written = write_changelog(settings, gangs)
    say(f"  changelog: {gangs} records, {written['bytes'] / 2**20:.0f} MiB "
        f"({written['seconds']:.1f} s to write)")
    out = {"gangs": gangs, "members": written["members"], "changelog_records": gangs,
           "changelog_mib": round(written["bytes"] / 2**20, 1)}
    out.update(time_recovery(settings, written, timeout, 9_000_000))
    return out


# -- main --------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, under a minute")
    ap.add_argument("--only", default="fold,e2e,scale,recovery,profile",
                    help="comma list of parts: fold, e2e, scale, recovery, profile")
    ap.add_argument("--no-profile", action="store_true", help="skip the profiles")
    ap.add_argument("--trace", choices=("real", "legacy"), default="real",
                    help="the synthetic trace's shape: the recorded v1.8 mix (default) or the "
                    "older one of the figures before 2026-12-03")
    ap.add_argument("--workers", default=None,
                    help="scale out: comma list of worker counts (default 1,2,4)")
    args = ap.parse_args(argv)
    synthetic.DEFAULT_SHAPE = args.trace

    def on_term(signum, _frame):  # run the finally blocks: stop workers and the broker
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    cfg = dict(QUICK if args.quick else FULL)
    if args.trace == "legacy":
        for size in ("fold_gangs", "profile_gangs", "sat_gangs", "scale_gangs",
                     "profile_worker_gangs"):
            cfg[size] *= LEGACY_GANGS
    if args.workers:
        cfg["scale_workers"] = tuple(int(x) for x in args.workers.split(","))
    parts = set(args.only.split(","))
    profile = not args.no_profile and "profile" in parts
    PROFILES.mkdir(exist_ok=True)
    started = time.monotonic()
    results: dict = {"mode": "quick" if args.quick else "full", "trace": args.trace}

    broker = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    kafka_version = "external" if bootstrap else "?"
    if not bootstrap and parts & {"e2e", "recovery", "scale"}:
        from streams.dev.localkafka import broker_module

        mod = broker_module()
        kafka_version = mod.KAFKA_VERSION
        broker = mod.LocalKafka(heap="1g")
    elif not bootstrap:
        from streams.dev.localkafka import broker_module

        kafka_version = broker_module().KAFKA_VERSION
    results["machine"] = machine(kafka_version)
    say(f"machine: {json.dumps(results['machine'])}")
    try:
        if "fold" in parts:
            say(f"fold/decode: synthetic trace of {cfg['fold_gangs']} gangs x 8 members ...")
            r = bench_fold(cfg["fold_gangs"])
            results.update(r)
            say(f"  decode: {r['decode']['cpu_records_per_s']}/s of CPU time, "
                f"{r['decode']['records_per_s']}/s wall ({r['decode']['records']} records,"
                f" mean {r['decode']['mean_value_bytes']} B; load {r['loadavg'][0]})")
            say(f"  fold:   {r['fold']['cpu_records_per_s']}/s of CPU time, "
                f"{r['fold']['records_per_s']}/s wall ({r['fold']['outputs']} outputs; "
                f"compiled core: {r['fold']['compiled']})")
            results["store_memory"] = bench_store_memory(cfg["mem_gangs"])
            say(f"  core store: {results['store_memory']['store_bytes_per_member']} B/member "
                f"(tracemalloc, {cfg['mem_gangs']} gangs); fold process RSS delta "
                f"{r['fold_process_memory']['bytes_per_member_rss_delta']} B/member; wire "
                f"{r['fold_process_memory']['wire_bytes_per_member']} B/member")
        if profile and (cfg["profile_gangs"] or "fold" not in parts):
            results["profile_core"] = profile_core(cfg["profile_gangs"] or 300)
        if parts & {"e2e", "recovery", "scale"}:
            if broker is not None:
                t = time.monotonic()
                bootstrap = broker.start(timeout=120)
                say(f"local Kafka {kafka_version} at {bootstrap} "
                    f"({time.monotonic() - t:.1f} s)")
            if "e2e" in parts:
                say(f"end to end: {cfg['sat_gangs']} gangs preloaded, one worker ...")
                e2e = bench_end_to_end(bootstrap, cfg, profile)
                results["end_to_end"] = e2e
                results["end_to_end_over_limit"] = round(
                    e2e["saturation"]["records_per_s"] / e2e["limit"]["records_per_s"], 3)
                say(f"  end to end / limit = {results['end_to_end_over_limit']}")
            if "scale" in parts:
                counts = cfg["scale_workers"]
                say(f"scale out: {cfg['scale_gangs']} gangs, workers {counts} ...")
                scale: dict = {}
                for n in counts:
                    scale[str(n)] = bench_scale(bootstrap, cfg["scale_gangs"], n)
                    say(f"  {n} worker(s): {json.dumps(scale[str(n)])}")
                base = scale[str(counts[0])]["records_per_s"]
                scale["over_first"] = {str(n): round(scale[str(n)]["records_per_s"] / base, 2)
                                       for n in counts}
                results["scale_out"] = scale
                say(f"  rate over {counts[0]} worker(s): {json.dumps(scale['over_first'])}")
            if "recovery" in parts:
                say(f"recovery: {cfg['recovery_gangs']} gangs in the changelog ...")
                results["recovery"] = bench_recovery(bootstrap, cfg["recovery_gangs"],
                                                    cfg["recovery_timeout"])
                say(f"  {json.dumps(results['recovery'])}")
    finally:
        if broker is not None:
            broker.stop()
    results["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    results["seconds"] = round(time.monotonic() - started, 1)
    results["targets"] = targets(results)
    say(f"targets: {json.dumps(results['targets'])}")
    print(json.dumps(results, separators=(",", ":")), flush=True)
    return 0


def targets(r: dict) -> dict:
    out: dict = {}
    if "fold" in r:
        out["fold_200k_per_s"] = r["fold"]["cpu_records_per_s"] >= 200_000
    mem = r.get("end_to_end", {}).get("worker_memory")
    rec_mem = r.get("recovery", {}).get("worker_peak_rss_bytes_per_member")
    if rec_mem:  # the largest table measured: Faust's own ~75 MiB do not hide the members
        out["worker_2KiB_per_member"] = rec_mem <= 2048
    elif mem and mem.get("rss_over_faust_per_member") is not None:
        out["worker_2KiB_per_member"] = mem["rss_over_faust_per_member"] <= 2048
    if "end_to_end_over_limit" in r:
        out["e2e_half_of_limit"] = r["end_to_end_over_limit"] >= 0.5
    for lat in r.get("end_to_end", {}).get("latency", []):
        if lat["offered_per_s"] == 2_000 and "p99_ms" in lat:
            out["p99_50ms_at_2k"] = lat["p99_ms"] <= 50 and lat["probes_seen"] == lat["probes"]
    for floor in r.get("end_to_end", {}).get("latency_floor", []):
        if "p99_over_bare" in floor:
            out[f"floor_2x_of_bare_at_{floor['offered_per_s']}"] = (
                floor["p50_over_bare"] <= 2 and floor["p99_over_bare"] <= 2)
    e2e = r.get("end_to_end", {})
    if "faust_null_agent" in e2e and "limit" in e2e:
        out["faust_ceiling_half_of_limit"] = (
            e2e["faust_null_agent"]["records_per_s"] >= 0.5 * e2e["limit"]["records_per_s"])
    if "faust_null_agent" in e2e and "saturation" in e2e:
        out["worker_0.8_of_faust_ceiling"] = (
            e2e["saturation"]["records_per_s"] >= 0.8 * e2e["faust_null_agent"]["records_per_s"])
    if "decode" in r:
        out["decode_200k_per_s"] = r["decode"]["cpu_records_per_s"] >= 200_000
    rec = r.get("recovery", {})
    if rec.get("gangs"):
        out[f"recovery_{rec['gangs']}_gangs_20s"] = (rec.get("serves_s") or 1e9) <= 20
    return out


if __name__ == "__main__":
    sys.exit(main())
