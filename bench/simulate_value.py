"""What the gangstate loop is worth: the same scenario and seed with commands on and off.

Runs ``producers.simulate.run.run_in_process`` twice per scenario (gangstate on; ``--no-commands``:
Koordinator v1.7+ alone) and prints one Markdown table: scheduling cycles per gang, virtual
seconds from a gang's last member created to min-available members bound (p50, p99, over the
gangs that bound), pods held at PreEnqueue longer than the grace period with no Event, gangs
never bound by the end of the run. ``--force-mode`` runs every job kind as Strict or NonStrict.
Deterministic: the figures depend only on scenario, seed and latency, never on the machine
(the wall time per run is printed for information).

Usage: python bench/simulate_value.py [SCENARIO ...] [--seed N] [--latency S]
                                      [--force-mode Strict|NonStrict]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
import time

from producers.simulate.run import run_in_process
from producers.simulate.scenario import load_scenario


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print the table; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", default=["switch-matters", "late-members"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--latency", type=float, default=None,
                        help="command latency, virtual seconds (default: the scenario's)")
    parser.add_argument("--force-mode", choices=("Strict", "NonStrict"), default=None)
    args = parser.parse_args(argv)
    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"seed {args.seed}, in-process (virtual time)\n")
    print("| scenario | gangstate | gangs | cycles/gang | last member -> bound p50 (s) | "
          "p99 (s) | pods waited with no Event | gangs never bound | commands applied | "
          "wall (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.scenarios:
        scenario = load_scenario(name)
        label = scenario.name
        if args.force_mode:
            scenario = dataclasses.replace(scenario, jobs=tuple(
                dataclasses.replace(j, mode=args.force_mode) for j in scenario.jobs))
            label += f" (all {args.force_mode})"
        for on in (True, False):
            started = time.perf_counter()
            result = run_in_process(scenario, args.seed, commands=on, latency=args.latency)
            wall = time.perf_counter() - started
            m = result.metrics
            applied = sum(1 for a in result.acks if a["outcome"] == "Applied")
            print(f"| {label} | {'on' if on else 'off'} | {m['gangs']} | "
                  f"{m['cycles_per_gang']} | {m['bind_latency_p50']} | "
                  f"{m['bind_latency_p99']} | {m['silent_waits']} | {m['never_bound']} | "
                  f"{applied if on else '-'} | {wall:.1f} |")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
