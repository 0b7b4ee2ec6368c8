"""Churn benchmark: many short-lived gangs through the fold; the gang table's size over time.

Usage::

    python bench/churn.py [--gangs 20000] [--members 8] [--life 60] [--spacing 1]

Gang ``i`` (``members`` pods, min-available = members, realistic ~1.1 KiB Pod records of
``bench/synthetic.py``) starts ``i * spacing`` seconds of event time after the first: its pods
are ADDED (Pending), wait at Permit (``Wait``) until the last one's ``Success``, are ``Bound``
and Running, and are DELETED ``life`` seconds after the gang started. Every record goes through
the worker's own path (``decode_input`` -> ``PartitionFold.feed``) over one store.

Each mode runs in a child process (so its RSS is its own):

- ``removal``: the fold as shipped: a gang is removed from the table once gone
  (``streams/core/retention.py``: 600 s of event time after its last record);
- ``keep``: every gang kept (the deleted-uid window set to ~30 years), as before the removal.

At each tenth of the run it prints the gangs in the table, the bytes the worker's table would
hold for them (``streams.worker.table.encode_state``, the changelog value), and the process's
resident memory (``VmRSS``). Numbers in docs/benchmarks.md, "Churn". The core runs as the
install built it (compiled unless ``GANGSTATE_PURE_CORE=1``).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.synthetic import cycle_record, pod_record  # noqa: E402
from streams.core.fold import FoldSettings, PartitionFold, next_due  # noqa: E402
from streams.core.retention import gone_at  # noqa: E402
from streams.core.state import GangState  # noqa: E402
from streams.wire.decoding import decode_input  # noqa: E402
from streams.worker.table import encode_state  # noqa: E402

T0 = 1_793_000_000_000_000  # 2026-10-26, microseconds of event time
S = 1_000_000
KEEP_SECONDS = 1e9
"""The deleted-uid window of mode ``keep`` (~30 years: nothing is ever gone)."""


def gang_records(i: int, members: int, life: int, spacing: int,
                 rng: random.Random) -> list[tuple[int, int, bytes]]:
    """Records of churn gang ``i`` as ``(at, sequence, value)``."""
    ns, job = f"churn-{i % 50:02d}", f"job-{i:07d}"
    gang = f"{ns}/{job}"
    start = T0 + i * spacing * S
    owner = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    uids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(members)]
    names = [f"{job}-worker-{m}" for m in range(members)]
    out: list[tuple[int, int, bytes]] = []
    t = start

    def add(value: bytes, dt: int = 20_000) -> None:
        nonlocal t
        t += dt
        out.append((t, i * 1000 + len(out), value))

    for m in range(members):
        add(pod_record(t, "ADDED", ns, job, m, members, uids[m], owner, 100 + m))
    cycle = 10_000 + i
    for m in range(members):
        status = "Success" if m == members - 1 else "Wait"
        add(cycle_record(t, cycle, ns, names[m], uids[m], gang, "Permit", status, names[0]))
    for m in range(members):
        add(cycle_record(t, cycle, ns, names[m], uids[m], gang, "Bind", "Bound", names[0],
                         node=f"node-{m}"))
        add(pod_record(t, "MODIFIED", ns, job, m, members, uids[m], owner, 200 + m,
                       node=f"node-{m}", phase="Running"))
    t = start + life * S
    for m in range(members):
        add(pod_record(t, "DELETED", ns, job, m, members, uids[m], owner, 300 + m,
                       node=f"node-{m}", phase="Succeeded"))
    return out


def churn(gangs: int, members: int, life: int, spacing: int) -> Iterator[tuple[int, bytes]]:
    """``(gang index, value)`` of the whole churn in event-time order (generated a window of
    overlapping gangs at a time)."""
    rng = random.Random(15)
    overlap = max(1, life // max(spacing, 1) + 2)
    pending: list[tuple[int, int, bytes, int]] = []
    next_gang = 0
    while next_gang < gangs or pending:
        while next_gang < gangs and len({g for *_, g in pending}) < overlap:
            pending.extend((at, seq, v, next_gang) for at, seq, v in
                           gang_records(next_gang, members, life, spacing, rng))
            next_gang += 1
        pending.sort(key=lambda r: (r[0], r[1]))
        horizon = T0 + (next_gang * spacing) * S if next_gang < gangs else None
        keep = []
        for at, seq, value, g in pending:
            if horizon is None or at < horizon:
                yield g, value
            else:
                keep.append((at, seq, value, g))
        pending = keep


def rss_kib() -> int:
    """The process's resident memory, KiB (``VmRSS``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def run_mode(mode: str, gangs: int, members: int, life: int, spacing: int) -> dict:
    """Fold the churn with removal (``removal``) or without (``keep``); returns checkpoints."""
    settings = FoldSettings() if mode == "removal" else FoldSettings(
        tombstone_seconds=KEEP_SECONDS)
    store: dict[str, GangState] = {}
    fold = PartitionFold(store, settings)
    window = settings.tombstone_micros
    step = max(1, gangs // 10)
    checkpoints = []
    records = 0
    started = time.perf_counter()
    seen = 0
    for g, value in churn(gangs, members, life, spacing):
        d = decode_input(value)
        fold.feed(d.key, d.record)
        records += 1
        if g + 1 > seen:
            seen = g + 1
            if seen % step == 0 or seen == gangs:
                table_bytes = sum(
                    len(encode_state(s, next_due(s, settings) is not None
                                     or gone_at(s, window) is not None))
                    for s in store.values())
                checkpoints.append({"gangs_started": seen, "gangs_in_table": len(store),
                                    "table_bytes": table_bytes, "rss_kib": rss_kib()})
    return {"mode": mode, "records": records, "seconds": time.perf_counter() - started,
            "checkpoints": checkpoints}


def main() -> None:
    """Run both modes in child processes and print their checkpoints side by side."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gangs", type=int, default=20_000, help="gangs started in all")
    parser.add_argument("--members", type=int, default=8, help="pods per gang")
    parser.add_argument("--life", type=int, default=60, help="seconds a gang lives")
    parser.add_argument("--spacing", type=int, default=1, help="seconds between gang starts")
    parser.add_argument("--mode", choices=("removal", "keep"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(run_mode(args.mode, args.gangs, args.members, args.life,
                                  args.spacing)))
        return
    results = {}
    for mode in ("removal", "keep"):
        out = subprocess.run([sys.executable, __file__, "--mode", mode, "--gangs",
                              str(args.gangs), "--members", str(args.members), "--life",
                              str(args.life), "--spacing", str(args.spacing)],
                             check=True, capture_output=True, text=True).stdout
        results[mode] = json.loads(out)
    print(f"churn: {args.gangs} gangs of {args.members} pods, each living {args.life} s, one "
          f"every {args.spacing} s of event time")
    for mode, r in results.items():
        print(f"{mode}: {r['records']} records in {r['seconds']:.1f} s "
              f"({r['records'] / r['seconds']:.0f}/s)")
    print(f"{'gangs started':>13} | {'in table':>17} | {'table MiB':>17} | {'RSS MiB':>17}")
    print(f"{'':>13} | {'removal':>8} {'keep':>8} | {'removal':>8} {'keep':>8} | "
          f"{'removal':>8} {'keep':>8}")
    for a, b in zip(results["removal"]["checkpoints"], results["keep"]["checkpoints"]):
        print(f"{a['gangs_started']:>13} | {a['gangs_in_table']:>8} {b['gangs_in_table']:>8} | "
              f"{a['table_bytes'] / 2**20:>8.1f} {b['table_bytes'] / 2**20:>8.1f} | "
              f"{a['rss_kib'] / 1024:>8.0f} {b['rss_kib'] / 1024:>8.0f}")


if __name__ == "__main__":
    main()
