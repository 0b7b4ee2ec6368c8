"""The shim's Go side: ``go test`` and ``go vet`` over the whole ``shim/`` module (the fencing
core, the configuration, the bus's encoding, the round tracker, and the hooks against a fake
framework handle with Koordinator's Coscheduling inside), with the same Go settings as its build
(``deploy/cluster/controlplane.py``: module mode, no cgo, the local toolchain; ``-trimpath`` as
the build, so that the Go build cache of the build serves the tests' packages too). In the cluster
tier because it needs Go and Koordinator's modules, as the build does; the first run on a cold
Go build cache pays for compiling Koordinator's packages for vet (about 6 min on 2 cores here),
later runs take seconds (the Go build cache keeps them)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from streams.dev.localcluster import controlplane_module

cp = controlplane_module()


def _go(*args: str) -> subprocess.CompletedProcess[str]:
    go = shutil.which("go")
    if go is None:
        pytest.fail("the shim's Go tests need Go on PATH (as the cluster tier's build does)")
    env = {**os.environ, "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0", "GOTOOLCHAIN": "local"}
    return subprocess.run([go, *args], cwd=cp.SHIM_DIR, env=env, capture_output=True,
                          text=True, timeout=1800)


@pytest.mark.timeout(1900)
def test_go_unit_tests_of_the_shim_pass() -> None:
    out = _go("test", "-trimpath", "-count=1", "./...")
    assert out.returncode == 0, out.stdout + out.stderr
    for package in ("bus", "fencing", "gangshim"):
        assert f"ok  \tgangstate.local/shim/{package}" in out.stdout, out.stdout


@pytest.mark.timeout(1900)
def test_go_vet_finds_nothing_in_the_shim() -> None:
    out = _go("vet", "-trimpath", "./...")
    assert out.returncode == 0, out.stdout + out.stderr
