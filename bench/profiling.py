"""Profile summaries for the benchmarks (bench only; needs pyinstrument and py-spy).

``profile_call(fn, path)`` runs ``fn`` under pyinstrument and writes the call tree plus a flat
table of self time per function. ``summarize_collapsed(raw, path)`` turns ``py-spy record
--format raw`` output (collapsed stacks) into self/inclusive tables per function and per area.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Callable

AREAS = [  # first match wins; matched against "function (file)"
    ("core.decide", "streams/core/decide.py"),
    ("core.fold", "streams/core/fold.py"),
    ("core.state", "streams/core/state.py"),
    ("core.spec", "streams/core/spec.py"),
    ("core.timefmt", "streams/core/timefmt.py"),
    ("decoding+contracts", "streams/wire/decoding.py"),
    ("decoding+contracts", "streams/wire/contracts.py"),
    ("pydantic", "pydantic"),
    ("worker (streams/worker/app.py)", "streams/worker/app.py"),
    ("json", "json/"),
    ("dataclasses", "dataclasses.py"),
    ("hashlib", "hashlib"),
    ("dataclass-generated __init__/__eq__/__hash__", "(<string>)"),
    ("builtins (C)", "(<built-in>)"),
    ("faust", "faust/"),
    ("mode", "mode/"),
    ("aiokafka", "aiokafka/"),
    ("kafka-python", "kafka/"),
    ("asyncio", "asyncio/"),
]


def area(frame: str) -> str:
    for name, needle in AREAS:
        if needle in frame:
            return name
    return "other"


def _flat_table(rows: list[tuple[str, float]], total: float, limit: int) -> list[str]:
    return [f"{100 * v / total:6.1f}%  {name}" for name, v in rows[:limit]]


def summarize_collapsed(raw_path: str, out_path: str, title: str, limit: int = 35) -> dict:
    """Summarise py-spy collapsed stacks into ``out_path``; returns the top entries."""
    self_t: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    areas_self: Counter[str] = Counter()
    areas_incl: Counter[str] = Counter()
    total = 0
    for line in open(raw_path):
        line = line.rstrip("\n")
        if not line:
            continue
        stack, _, n = line.rpartition(" ")
        count = int(n)
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        total += count
        self_t[frames[-1]] += count
        areas_self[area(frames[-1])] += count
        for f in set(frames):
            incl[f] += count
        for a in {area(f) for f in frames}:
            areas_incl[a] += count
    lines = [f"# {title}", f"# {total} samples (py-spy, idle samples excluded)", "",
             "## self time by area (leaf frame)"]
    lines += _flat_table(areas_self.most_common(), total, 30)
    lines += ["", "## inclusive time by area (any frame in the stack)"]
    lines += _flat_table(areas_incl.most_common(), total, 30)
    lines += ["", "## self time by function"]
    lines += _flat_table(self_t.most_common(), total, limit)
    lines += ["", "## inclusive time by function"]
    lines += _flat_table(incl.most_common(), total, limit)
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return {"samples": total,
            "self_by_area": {a: round(100 * v / total, 1) for a, v in areas_self.most_common(8)},
            "top_self": [(n, round(100 * v / total, 1)) for n, v in self_t.most_common(8)]}


def profile_call(fn: Callable[[], Any], out_path: str, title: str, limit: int = 30) -> dict:
    """Run ``fn`` under pyinstrument; write the call tree and a flat self-time table."""
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005)
    profiler.start()
    fn()
    profiler.stop()
    session = profiler.last_session
    root = session.root_frame()
    self_t: Counter[str] = Counter()
    areas: Counter[str] = Counter()

    def walk(frame) -> None:
        if not frame.function.startswith("["):  # [self] frames repeat their parent's self time
            name = f"{frame.function} ({frame.file_path_short})"
            self_t[name] += frame.total_self_time
            areas[area(f"{frame.function} ({frame.file_path or ''})")] += frame.total_self_time
        for child in frame.children:
            walk(child)

    if root is not None:
        walk(root)
    total = sum(self_t.values()) or 1.0
    lines = [f"# {title}", f"# pyinstrument, {session.duration:.2f} s", "",
             "## self time by area"]
    lines += _flat_table(areas.most_common(), total, 30)
    lines += ["", "## self time by function"]
    lines += _flat_table(self_t.most_common(), total, limit)
    lines += ["", "## call tree", profiler.output_text(unicode=False, color=False,
                                                       show_all=False)]
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return {"self_by_area": {a: round(100 * v / total, 1) for a, v in areas.most_common(8)},
            "top_self": [(n, round(100 * v / total, 1)) for n, v in self_t.most_common(8)]}


_NATIVE = re.compile(r"CPyDef_([a-z_]+?)___(\w+?) \(")


def native_fold_profile(gangs: int, out_path: str, seconds: float = 8.0) -> dict:
    """py-spy ``--native`` on a child process folding ``gangs`` synthetic gangs in a loop for
    ``seconds``: with the core compiled by mypyc its functions are C (``CPyDef_<module>___<name>``)
    and invisible to Python-level profilers. Writes the share of samples under each core
    function (inclusive) and the leaf C functions (self) to ``out_path``."""
    import os
    import subprocess
    import sys
    import tempfile

    bench = os.path.dirname(os.path.abspath(__file__))
    code = (f"import sys, time; sys.path[:0] = [{bench!r}, {os.path.dirname(bench)!r}]\n"
            "import synthetic\nfrom streams.wire.decoding import decode_input\n"
            "from streams.core.fold import PartitionFold\n"
            f"dec = [decode_input(v) for _k, v in synthetic.trace({gangs})]\n"
            f"t = time.monotonic()\nwhile time.monotonic() - t < {seconds}:\n"
            "    f = PartitionFold({})\n    for d in dec:\n        if d.record is not None:\n            f.feed(d.key, d.record)\n")
    import shutil

    spy = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or shutil.which("py-spy")
    if spy is None:
        return {"skipped": "py-spy is not installed"}
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "native.raw")
        subprocess.run([spy, "record", "--native", "--rate", "400", "--format", "raw", "-o",
                        raw, "--", sys.executable, "-c", code], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        lines = open(raw).read().splitlines()
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    total = 0
    for line in lines:
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not any("PartitionFold___feed" in f for f in frames):
            continue  # decoding the records, imports
        n = int(count)
        total += n
        leaf[frames[-1].split(" (")[0]] += n
        for name in {f"{m.group(1)}.{m.group(2)}" for f in frames
                     for m in [_NATIVE.search(f)] if m}:
            inclusive[name] += n
    out = [f"# compiled fold (mypyc), {gangs} synthetic gangs folded in a loop",
           f"# {total} samples in PartitionFold.feed (py-spy --native)", "",
           "## inclusive share by core function (module.function)"]
    out += [f"{n / total:7.1%}  {name}" for name, n in inclusive.most_common(40)]
    out += ["", "## self share by leaf C function (CPython runtime included)"]
    out += [f"{n / total:7.1%}  {name}" for name, n in leaf.most_common(20)]
    with open(out_path, "w") as f:
        f.write("\n".join(out) + "\n")
    return {"samples": total, "top_inclusive": inclusive.most_common(8)}
