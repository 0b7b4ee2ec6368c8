"""The core compiled by mypyc (``setup.py``) behaves exactly as its Python sources.

Each comparison runs the same command twice, once with the installed core and once with
``GANGSTATE_PURE_CORE=1`` (the Python sources, ``streams/core/__init__.py``), and requires
byte-identical output. When the core is not compiled (installed with ``GANGSTATE_PURE_CORE=1``)
the comparisons have nothing to compare and are skipped; the default install must be compiled.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import streams.core

ROOT = Path(__file__).resolve().parents[2]
CASES = sorted((ROOT / "tests" / "cases").glob("*/trace.jsonl"))
REAL_STORM = ROOT / "tests" / "data" / "koord-v1.8.0-gpu-short-excerpt.json"
END = "2026-12-02T13:55:00Z"
PURE = os.environ.get("GANGSTATE_PURE_CORE") == "1"
needs_compiled = pytest.mark.skipif(not streams.core.COMPILED,
                                    reason="the core runs as Python (GANGSTATE_PURE_CORE=1)")


def gangstate(*args: str, pure: bool) -> str:
    env = {**os.environ, "GANGSTATE_PURE_CORE": "1" if pure else "0"}
    run = subprocess.run([sys.executable, "-m", "streams.cli", *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_the_default_install_runs_the_core_compiled():
    if PURE:
        pytest.skip("GANGSTATE_PURE_CORE=1 asks for the Python sources")
    import streams.core.fold as fold

    assert streams.core.COMPILED, "the core is not compiled: run bash .ci/setup.sh"
    assert not fold.__file__.endswith(".py")


def test_pure_mode_imports_the_python_sources():
    code = "import streams.core as c, streams.core.fold as f; print(c.COMPILED, f.__file__)"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, env={**os.environ, "GANGSTATE_PURE_CORE": "1"}, timeout=60)
    compiled, path = run.stdout.split()
    assert compiled == "False" and path == str(ROOT / "streams" / "core" / "fold.py")


@needs_compiled
@pytest.mark.parametrize("trace", CASES, ids=[p.parent.name for p in CASES])
def test_compiled_and_python_folds_agree_on_the_handed_cases(trace):
    compiled = gangstate("fold", str(trace), "--output", "json", "--at", END, pure=False)
    python = gangstate("fold", str(trace), "--output", "json", "--at", END, pure=True)
    assert compiled == python
    assert json.loads(compiled)["gangs"]  # a real fold, not an empty answer


@needs_compiled
def test_compiled_and_python_agree_on_a_real_scheduler_storm():
    # The excerpt of a real koord-scheduler v1.8.0 recording (tests/data/README.md): a gang of
    # three one-GPU members (min-available 3) on two one-GPU nodes, 42 FailedScheduling Events
    # of the live pods in about a second. The fold reads it as a watch would publish it; the
    # history of ``describe gang`` shows every state change, so a difference in any step shows.
    args = ("--from", str(REAL_STORM))
    folded = gangstate("fold", str(REAL_STORM), "--output", "json", "--at", END, pure=False)
    assert folded == gangstate("fold", str(REAL_STORM), "--output", "json", "--at", END,
                               pure=True)
    for query in (("describe", "gang", "sc-b/gb"), ("explain", "pod", "sc-b/gb-1")):
        assert gangstate(*query, *args, pure=False) == gangstate(*query, *args, pure=True)
    [diagnostic] = json.loads(folded)["diagnostics"]
    assert diagnostic["reason"] == "GangUnschedulable"
    # 2 nodes with 1 GPU each: 2 of min-available 3 fit, every member was refused for the GPU
    assert (diagnostic["facts"]["fit"], diagnostic["facts"]["min_member"]) == (2, 3)
    assert sorted(diagnostic["facts"]["unfit"]) == ["gb-0", "gb-1", "gb-2"]


@needs_compiled
def test_an_edited_source_is_not_shadowed_by_its_stale_compiled_module(tmp_path):
    copy = tmp_path / "streams"
    shutil.copytree(ROOT / "streams", copy)
    for lib in ROOT.glob("gangstate_core__mypyc*.so"):
        shutil.copy(lib, tmp_path)
    with open(copy / "core" / "timefmt.py", "a") as f:
        f.write("\nEDITED = True\n")
    code = ("import warnings; warnings.simplefilter('always')\n"
            "import streams.core as c, streams.core.timefmt as t, streams.core.fold as f\n"
            "print(c.COMPILED, t.EDITED, f.__file__.endswith('.py'))")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, env={**os.environ, "GANGSTATE_PURE_CORE": "0",
                                         "PYTHONPATH": str(tmp_path)}, timeout=60)
    assert run.stdout.split() == ["False", "True", "True"], run.stderr
    assert "compiled timefmt older than the sources" in run.stderr
