"""What a cluster id costs per record (issue 27): bytes on the wire and decode + fold time.

Usage::

    python bench/cluster_cost.py [--gangs 128] [--repeats 5] [--cluster gpu-h100-eu-west-1]

Takes the real-shaped synthetic trace (``bench/synthetic.py``), and the same trace with
``"cluster": CLUSTER`` in every value and every key ``CLUSTER:<key>`` (what a watch producer
of a fleet writes, docs/fleet.md), and for each prints: the mean value and key bytes per
record, and the decode (``decode_input``) and fold (``PartitionFold.feed``) CPU time per
record, the best of ``--repeats`` passes (each a fresh fold; the two traces alternate, so a
slower machine moment hits both alike). One process, one core; the compiled core as
installed, the worker's GC thresholds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import synthetic  # noqa: E402

import streams.core  # noqa: E402
from streams.core.cluster import key_of  # noqa: E402
from streams.core.fold import PartitionFold  # noqa: E402
from streams.wire.decoding import decode_input  # noqa: E402
from streams.worker.app import tune_gc  # noqa: E402


def stamped(items: list[tuple[bytes | None, bytes]], cluster: str
            ) -> list[tuple[bytes | None, bytes]]:
    """``items`` (key, value) as a fleet's producer writes them for ``cluster``: the value with
    a ``cluster`` field (compact JSON, as the producers write), the key ``cluster:key``."""
    out = []
    for key, value in items:
        record = json.loads(value)
        record["cluster"] = cluster
        new_key = None if key is None else key_of(cluster, key.decode()).encode()
        out.append((new_key, json.dumps(record, separators=(",", ":")).encode()))
    return out


def one_pass(items: list[tuple[bytes | None, bytes]]) -> tuple[float, float]:
    """Decode and fold ``items`` once into a fresh fold; ``(decode, fold)`` CPU seconds."""
    cpu = time.process_time
    fold = PartitionFold({})
    decode_s = fold_s = 0.0
    for _key, value in items:
        t0 = cpu()
        decoded = decode_input(value)
        t1 = cpu()
        if decoded.record is not None:
            fold.feed(decoded.key, decoded.record)
        decode_s += t1 - t0
        fold_s += cpu() - t1
    return decode_s, fold_s


def main(argv: list[str] | None = None) -> int:
    """Measure and print the comparison; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gangs", type=int, default=128,
                    help="gangs of the synthetic trace (about 395 records each; default 128)")
    ap.add_argument("--repeats", type=int, default=5,
                    help="passes over each trace; the best is shown (default 5)")
    ap.add_argument("--cluster", default="gpu-h100-eu-west-1",
                    help="the cluster id stamped (default gpu-h100-eu-west-1, 18 characters)")
    args = ap.parse_args(argv)
    tune_gc()
    plain = [(None if k is None else (k.encode() if isinstance(k, str) else k),
              v if isinstance(v, bytes) else v.encode())
             for k, v in synthetic.trace(args.gangs)]
    fleet = stamped(plain, args.cluster)
    n = len(plain)
    best: dict[str, tuple[float, float]] = {}
    for _ in range(args.repeats):
        for name, items in (("default", plain), ("cluster", fleet)):
            got = one_pass(items)
            old = best.get(name)
            best[name] = got if old is None else (min(old[0], got[0]), min(old[1], got[1]))
    print(f"{n} records, {args.gangs} gangs, compiled core: {streams.core.COMPILED}, "
          f"best of {args.repeats}; cluster {args.cluster!r}")
    print(f"{'trace':<10}{'value B':>10}{'key B':>8}{'decode µs':>12}{'fold µs':>10}"
          f"{'total µs':>10}")
    for name, items in (("default", plain), ("cluster", fleet)):
        value_b = sum(len(v) for _k, v in items) / n
        key_b = sum(len(k or b"") for k, _v in items) / n
        dec, fold = best[name]
        print(f"{name:<10}{value_b:>10.1f}{key_b:>8.1f}{dec / n * 1e6:>12.2f}"
              f"{fold / n * 1e6:>10.2f}{(dec + fold) / n * 1e6:>10.2f}")
    (pd, pf), (cd, cf) = best["default"], best["cluster"]
    print(f"cost of the cluster id: {(cd - pd) / n * 1e6:+.2f} µs decode, "
          f"{(cf - pf) / n * 1e6:+.2f} µs fold per record "
          f"({((cd + cf) / (pd + pf) - 1) * 100:+.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
