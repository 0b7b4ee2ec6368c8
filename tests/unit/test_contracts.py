"""Contracts: committed JSON Schemas match the models; decoding accepts the handed traces and
rejects bad records with a reason; the core imports no infrastructure."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from streams.wire.contracts import json_schemas
from streams.wire.decoding import DecodeError, decode_input

ROOT = Path(__file__).resolve().parents[2]


def test_committed_schemas_match_the_models():
    committed = {p.name: json.loads(p.read_text()) for p in (ROOT / "docs/schemas").glob("*.json")}
    assert committed == json.loads(json.dumps(json_schemas())), \
        "docs/schemas drifted from streams/wire/contracts.py: run `gangstate schema`"


def test_gangstate_schema_writes_every_schema(tmp_path):
    subprocess.run([sys.executable, "-m", "streams.cli", "schema", "--out", str(tmp_path)],
                   check=True, capture_output=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(json_schemas())


@pytest.mark.parametrize("raw,reason", [
    pytest.param(b"not json", "invalid record", id="not-json"),
    pytest.param(b'{"schema": "gangstate.nope/v1", "observed_at": "2026-11-02T09:00:00Z"}',
                 "does not match any of the expected tags", id="unknown-schema"),
    pytest.param(b'{"schema": "gangstate.tick/v1", "observed_at": "yesterday"}',
                 "observed_at", id="bad-time"),
    pytest.param(b'{"schema": "gangstate.cycle/v1", "observed_at": "2026-11-02T09:00:00Z"}',
                 "cycle: Field required", id="missing-fields"),
    pytest.param(b'{"schema": "gangstate.kube/v1", "observed_at": "2026-11-02T09:00:00Z", '
                 b'"resource": "pods", "type": "ADDED", "object": {"metadata": {"name": "p", '
                 b'"uid": "u"}}}', "namespace", id="pod-without-namespace"),
])
def test_bad_records_raise_a_decode_error_with_the_reason(raw, reason):
    with pytest.raises(DecodeError) as err:
        decode_input(raw)
    assert reason in str(err.value)


def test_every_handed_trace_line_decodes():
    for trace in (ROOT / "tests/cases").glob("*/trace.jsonl"):
        for line in trace.read_bytes().splitlines():
            if line.strip():
                assert decode_input(line).record is not None


def test_a_pod_of_no_gang_is_skipped_not_rejected():
    raw = (b'{"schema": "gangstate.kube/v1", "observed_at": "2026-11-02T09:00:00Z", '
           b'"resource": "pods", "type": "ADDED", "object": {"metadata": {"name": "p", '
           b'"namespace": "ns", "uid": "u", "labels": null}}}')
    decoded = decode_input(raw)
    assert (decoded.key, decoded.record, decoded.skipped) == (None, None, "no-gang")


def test_the_layers_hold_the_core_imports_no_infrastructure_and_nothing_imports_in_a_circle():
    lint = Path(sys.executable).parent / "lint-imports"
    run = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert f"{len(contracts['contracts'])} kept, 0 broken" in run.stdout


def test_the_core_type_checks_strictly():
    mypy = Path(sys.executable).parent / "mypy"
    run = subprocess.run([str(mypy), "--strict", "streams/core"], cwd=ROOT, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout + run.stderr
