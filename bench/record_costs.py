"""CPU cost of decoding and folding each class of record of the synthetic trace (issue 25).

Usage::

    python bench/record_costs.py [--gangs 128] [--repeats 2]

Decodes (``decode_input``) and folds (``PartitionFold.feed``, the compiled core as installed,
the worker's GC thresholds) the trace (``bench/synthetic.py``, real shape) record by record,
timing each call in this process's CPU time, and prints per class (``bench/traffic.py``
``record_class``; the shim's records together) the records, the mean decode and fold cost in
µs, the share of the total, and whether the fold kept the gang's state (the record changed
nothing) or Event records were dropped at decode. One process, one core. The two clock reads
per call add a fixed cost to every figure (the totals read 1.2-1.5x ``bench/run.py``'s, which
times whole waves): compare the classes with each other, not with the run's figures.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import synthetic  # noqa: E402
from traffic import record_class  # noqa: E402

import streams.core  # noqa: E402
from streams.core.fold import PartitionFold  # noqa: E402
from streams.wire.decoding import decode_input  # noqa: E402
from streams.worker.app import tune_gc  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gangs", type=int, default=128,
                    help="gangs of the real-shaped synthetic trace (about 395 records each; "
                         "default 128)")
    ap.add_argument("--repeats", type=int, default=2,
                    help="passes over the trace, each with a fresh fold (default 2)")
    args = ap.parse_args(argv)
    tune_gc()
    items = list(synthetic.trace(args.gangs))
    classes = [(lambda c: "cycle shim" if c.startswith("cycle shim") else c)(
        record_class(json.loads(v))) for _k, v in items]
    dec: collections.Counter[str] = collections.Counter()
    fold_t: collections.Counter[str] = collections.Counter()
    n: collections.Counter[str] = collections.Counter()
    kept: collections.Counter[str] = collections.Counter()
    cpu = time.process_time
    for _ in range(args.repeats):
        fold = PartitionFold({})
        for (_k, value), cls in zip(items, classes):
            t0 = cpu()
            d = decode_input(value)
            t1 = cpu()
            if d.record is not None:
                before = fold.store.get(d.key) if d.key else None
                fold.feed(d.key, d.record)
                kept[cls] += d.key is None or fold.store.get(d.key) is before
            else:
                kept[cls] += 1
            t2 = cpu()
            dec[cls] += t1 - t0
            fold_t[cls] += t2 - t1
            n[cls] += 1
    total = sum(dec.values()) + sum(fold_t.values())
    print(f"{len(items)} records, {args.gangs} gangs, compiled core: {streams.core.COMPILED}")
    print("| record | records | decode µs | fold µs | share of CPU | state kept or dropped |")
    print("|---|---:|---:|---:|---:|---:|")
    for cls in sorted(n, key=lambda c: -(dec[c] + fold_t[c])):
        print(f"| {cls} | {n[cls] // args.repeats} | {dec[cls] / n[cls] * 1e6:.1f} | "
              f"{fold_t[cls] / n[cls] * 1e6:.1f} | {(dec[cls] + fold_t[cls]) / total:.2f} | "
              f"{kept[cls] / n[cls]:.2f} |")
    all_n = sum(n.values())
    print(f"| all | {all_n // args.repeats} | {sum(dec.values()) / all_n * 1e6:.1f} | "
          f"{sum(fold_t.values()) / all_n * 1e6:.1f} | 1.00 | "
          f"{sum(kept.values()) / all_n:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
