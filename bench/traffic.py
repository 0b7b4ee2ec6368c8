"""What the real scheduler's traffic on ``gang-events`` looks like: record it and count it (issue 25).

Usage::

    python bench/traffic.py [--window 60] [--sample bench/traffic/recorded.jsonl.gz] [--json-only]

One local control plane (``deploy/cluster/controlplane.py``: two KWOK nodes of 8 cpu, 32Gi and 1
``nvidia.com/gpu``; the shim build of koord-scheduler v1.8.0) and one local Kafka
(``KAFKA_BOOTSTRAP_SERVERS`` when set). For each mode, ``off`` then ``on``, a gangstate chain of
its own (watch, worker with ``FoldSettings.holds`` off or on, sink; topics of its own, the shim
restarted onto them, as ``bench/holds.py`` does) and, during one window of ``--window`` seconds
(wall clock), a mixed scenario at once:

- ``storm``: one gang of 3 x 1 GPU (minMember 3) that can never fit on the 2 GPUs (hold ``off``:
  the scheduler's ``FailedScheduling`` storm; ``on``: gangstate holds it once its episode
  settled);
- ``live``: a small gang (2 x 100m cpu, minMember 2) created every 5 s, bound, Running, and
  deleted 15 s after its creation;
- ``gated``: one gang of minMember 3 with 2 pods only (Koordinator's PreEnqueue refuses them).

After the window, every record of the chain's ``gang-events`` topic whose Kafka timestamp falls
in the window is counted by class (:func:`record_class`: schema, and for kube records the object
kind and watch type, for cycle records who wrote it: the shim's ``event`` or stage, an Event or
a pod's condition) with its count per second and its values' mean size in bytes. With
``--sample`` the window's records of both modes are written as gzip JSON lines (``mode``,
``t`` seconds into the window, ``partition``, ``key``, ``value`` as text). Prints one table per
mode and a JSON line (``{"bench": "traffic", ...}``). Figures in docs/benchmarks.md, "What real
traffic looks like".
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka import KafkaConsumer, TopicPartition  # noqa: E402
from kubernetes import client  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402

from bench.holds import delete_all  # noqa: E402
from streams.core.fold import FoldSettings  # noqa: E402
from streams.dev.localcluster import (Chain, controlplane_module, create_namespace,  # noqa: E402
                                     gang_pod)
from streams.dev.localkafka import broker_module  # noqa: E402
from streams.kafka.publishing import ensure_topics  # noqa: E402
from streams.settings import Settings, Topics  # noqa: E402


def record_class(value: Any) -> str:
    """The class a ``gang-events`` value is counted under: ``kube <Kind> <type>`` (``kube Event
    ADDED``), ``cycle shim <event or stage/status>``, ``cycle event``, ``cycle condition``,
    ``cycle numbered`` (a cycle number without ``shim``), ``tick``, ``ack``, ``capacity``,
    ``preemption``, ``gang-summary``, or ``other <schema>``."""
    if not isinstance(value, dict):
        return "other (not an object)"
    schema = str(value.get("schema", ""))
    kind = schema.removeprefix("gangstate.").split("/", 1)[0]
    if kind == "kube":
        obj = value.get("object") if isinstance(value.get("object"), dict) else {}
        return f"kube {obj.get('kind', '?')} {value.get('type', '?')}"
    if kind == "cycle":
        if value.get("shim"):
            what = value.get("event") or f"{value.get('stage')}/{value.get('status')}"
            return f"cycle shim {what}"
        if value.get("cycle") is not None:
            return "cycle numbered"
        source = value.get("source") if isinstance(value.get("source"), dict) else {}
        return f"cycle {source.get('kind', 'event')}"
    return kind if kind in ("tick", "ack", "capacity", "preemption", "gang-summary") \
        else f"other {schema}"


def read_raw(settings: Settings, topic: str) -> list[tuple[int, int, str | None, bytes]]:
    """Every record of ``topic`` up to its end offsets now: ``(partition, timestamp_ms, key,
    value bytes)``."""
    consumer = KafkaConsumer(**settings.kafka_python(
        enable_auto_commit=False, group_id=None, consumer_timeout_ms=2000))
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic)
                                                        or ())]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        out = []
        while any(consumer.position(tp) < end[tp] for tp in tps):
            for msg in consumer:
                if msg.offset < end[TopicPartition(topic, msg.partition)]:
                    out.append((msg.partition, msg.timestamp,
                                None if msg.key is None else msg.key.decode(), msg.value or b""))
                if all(consumer.position(tp) >= end[tp] for tp in tps):
                    break
        return out
    finally:
        consumer.close()


def count(records: list[tuple[int, int, str | None, bytes]], t0: float, t1: float,
          ) -> dict[str, dict[str, float]]:
    """Per class: ``records``, ``per_s`` and ``mean_bytes`` of the records whose Kafka
    timestamp is in ``[t0, t1)`` (Unix seconds); plus ``all``."""
    n: dict[str, int] = defaultdict(int)
    size: dict[str, int] = defaultdict(int)
    for _, ts, _, raw in records:
        if not t0 <= ts / 1000 < t1:
            continue
        try:
            cls = record_class(json.loads(raw))
        except ValueError:
            cls = "other (not JSON)"
        for c in (cls, "all"):
            n[c] += 1
            size[c] += len(raw)
    span = t1 - t0
    return {c: {"records": n[c], "per_s": round(n[c] / span, 2),
                "mean_bytes": round(size[c] / n[c])}
            for c in sorted(n, key=lambda c: (c == "all", -n[c]))}


class Live(threading.Thread):
    """Small gangs that fit, created every ``every`` seconds and deleted ``lifetime`` seconds
    after their creation, until :meth:`stop`."""

    def __init__(self, core: client.CoreV1Api, ns: str, every: float = 5.0,
                 lifetime: float = 15.0) -> None:
        super().__init__(daemon=True)
        self.core, self.ns, self.every, self.lifetime = core, ns, every, lifetime
        self.halt = threading.Event()
        self.made = 0

    def run(self) -> None:
        alive: list[tuple[float, list[str]]] = []
        next_at = time.monotonic()
        while not self.halt.is_set():
            now = time.monotonic()
            if now >= next_at:
                pods = [f"live{self.made}-{j}" for j in range(2)]
                for p in pods:
                    self.core.create_namespaced_pod(self.ns, gang_pod(
                        self.ns, p, gang=f"live{self.made}", min_available=2))
                alive.append((now, pods))
                self.made += 1
                next_at += self.every
            while alive and now - alive[0][0] >= self.lifetime:
                for p in alive.pop(0)[1]:
                    try:
                        self.core.delete_namespaced_pod(p, self.ns, grace_period_seconds=0)
                    except ApiException as err:
                        if err.status != 404:
                            raise
            self.halt.wait(0.2)

    def stop(self) -> None:
        """Stop creating gangs and wait for the thread."""
        self.halt.set()
        self.join(30)


def one_mode(cluster: Any, bootstrap: str, mode: str, window: float, logdir: Path,
             say: Any) -> tuple[dict[str, Any], list[tuple[int, int, str | None, bytes]],
                                float, float]:
    """One chain (holds ``mode``), the mixed scenario over ``window`` seconds; returns the
    counts, the topic's raw records and the window's ends."""
    core = client.CoreV1Api(cluster.api_client())
    run = uuid.uuid4().hex[:8]
    settings = Settings(bootstrap=bootstrap, topics=Topics(f"bench-traffic-{run}."),
                        partitions=4, app_id=f"gangstate-bench-traffic-{run}",
                        fold=FoldSettings(grace_seconds=10.0, holds=mode == "on"))
    ensure_topics(settings)
    chain = Chain(cluster, settings, logdir / f"chain-{run}")
    chain.start(ready_timeout=180)
    try:
        cluster.use_shim({"KAFKA_BOOTSTRAP_SERVERS": settings.bootstrap,
                          **settings.security.env(),
                          "GANGSTATE_TOPIC_PREFIX": settings.topics.prefix,
                          "GANGSTATE_SHIM_ID": f"bench-shim-{run}"}, timeout=120)
        names = {k: f"tr-{mode}-{k}" for k in ("storm", "live", "gated")}
        for ns in names.values():
            create_namespace(core, ns)
        for j in range(3):
            core.create_namespaced_pod(names["storm"], gang_pod(
                names["storm"], f"g-{j}", gang="g", min_available=3, gpu=1))
        for j in range(2):
            core.create_namespaced_pod(names["gated"], gang_pod(
                names["gated"], f"short-{j}", gang="short", min_available=3))
        live = Live(core, names["live"])
        live.start()
        time.sleep(20)  # the storm under way (and, holds on, the gang held) before the window
        t0 = time.time()
        time.sleep(window)  # the measured window itself
        t1 = time.time()
        live.stop()
        for ns in names.values():
            delete_all(core, ns)
        time.sleep(3)  # the last deletions published
        raw = read_raw(settings, settings.topics.gang_events)
        counts = count(raw, t0, t1)
        say(f"hold {mode}: {counts['all']['records']} records in {t1 - t0:.1f} s, "
            f"{live.made} live gangs")
        return {"window_s": round(t1 - t0, 1), "live_gangs": live.made,
                "classes": counts}, raw, t0, t1
    finally:
        chain.stop()


def table(result: dict[str, Any]) -> str:
    """One markdown table: a row per class, per mode records/s and mean bytes."""
    modes = list(result["modes"])
    classes: list[str] = []
    for m in modes:
        classes += [c for c in result["modes"][m]["classes"] if c not in classes and c != "all"]
    lines = ["| record | " + " | ".join(f"hold {m}: per s | mean B" for m in modes) + " |",
             "|---" * (1 + 2 * len(modes)) + "|"]
    for c in classes + ["all"]:
        cells = []
        for m in modes:
            got = result["modes"][m]["classes"].get(c)
            cells += [str(got["per_s"]), str(got["mean_bytes"])] if got else ["-", "-"]
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the recording; print the tables and a JSON line. Returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--window", type=float, default=60.0,
                    help="seconds of each mode's measured window (default 60)")
    ap.add_argument("--sample", type=Path, default=None,
                    help="write the windows' records here (gzip JSON lines)")
    ap.add_argument("--json-only", action="store_true", help="print the JSON line alone")
    args = ap.parse_args(argv)
    if args.window <= 0:
        ap.error("--window must be positive")
    say = (lambda _: None) if args.json_only else (lambda line: print(line, flush=True))
    broker = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        broker = broker_module().LocalKafka()
        bootstrap = broker.start(timeout=120)
    cluster = controlplane_module().LocalCluster(progress=say)
    result: dict[str, Any] = {"bench": "traffic", "window_s": args.window, "modes": {}}
    sample: list[dict[str, Any]] = []
    try:
        cluster.start(timeout=300)
        logdir = Path(tempfile.mkdtemp(prefix="gangstate-bench-traffic-"))
        for mode in ("off", "on"):
            got, raw, t0, t1 = one_mode(cluster, bootstrap, mode, args.window, logdir, say)
            result["modes"][mode] = got
            sample += [{"mode": mode, "t": round(ts / 1000 - t0, 3), "partition": p, "key": k,
                        "value": v.decode("utf-8", "replace")}
                       for p, ts, k, v in raw if t0 <= ts / 1000 < t1]
    finally:
        cluster.stop()
        if broker is not None:
            broker.stop()
    if args.sample is not None:
        args.sample.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(args.sample, "wt", encoding="utf-8", compresslevel=9) as f:
            for row in sample:
                f.write(json.dumps(row, separators=(",", ":")) + "\n")
        say(f"sample: {len(sample)} records in {args.sample}")
    say(table(result))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
