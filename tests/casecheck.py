"""Checks one handed case's expectations (``tests/cases/*/expect.json``) against outputs.

The matching rules are those of ``tests/cases/README.md``: a listed diagnostic must match at
least one emitted one with the same reason and gang, whose facts contain the listed facts
(dict-valued facts equal as a whole, a scalar also matches its string form) and whose involved
Pods include the listed names; absent reasons must not occur; commands compare in order on five
fields; final per-gang fields must hold. Used by both the offline and the Kafka test paths.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CASES = Path(__file__).parent / "cases"
COMMAND_KEYS = ("type", "gang_group", "epoch", "expected_representative", "representative")


def case_dirs() -> list[Path]:
    """Every case folder with an ``expect.json``, sorted by name."""
    return sorted(p.parent for p in CASES.glob("*/expect.json"))


def _facts_hold(expected: dict[str, Any], actual: dict[str, Any]) -> bool:
    for key, want in expected.items():
        if key not in actual:
            return False
        got = actual[key]
        if isinstance(want, dict):
            if not isinstance(got, dict) or {str(k): v for k, v in want.items()} != \
                    {str(k): v for k, v in got.items()}:
                return False
        elif got != want and str(got) != str(want):
            return False
    return True


def problems(case: Path, diagnostics: list[dict[str, Any]], commands: list[dict[str, Any]],
             gangs: dict[str, dict[str, Any]]) -> list[str]:
    """What in the outputs breaks the case's expectations (empty: it passes). Only outputs of
    the case's own gangs are considered, so several cases can share one run."""
    expect = json.loads((case / "expect.json").read_text())["expect"]
    own = set(expect.get("final", {})) | {d["gang"] for d in expect.get("diagnostics", [])}
    diags = [d for d in diagnostics if d["gang"] in own]
    groups = {g.get("gang_group", name) for name, g in gangs.items() if name in own} | own
    cmds = [c for c in commands if c["gang_group"] in groups]
    errors = []
    for want in expect.get("diagnostics", []):
        if not any(d["reason"] == want["reason"] and d["gang"] == want["gang"]
                   and _facts_hold(want.get("facts", {}), d["facts"])
                   and set(want.get("involved_pods", [])) <= {
                       i["name"] for i in d["involved"] if i["kind"] == "Pod"}
                   for d in diags):
            errors.append(f"missing {want['reason']} {want.get('facts')}")
    for reason in expect.get("absent_reasons", []):
        if any(d["reason"] == reason for d in diags):
            errors.append(f"unexpected {reason}")
    if "commands" in expect:
        got = [{k: c.get(k) for k in COMMAND_KEYS} for c in cmds]
        want_cmds = [{k: c.get(k) for k in COMMAND_KEYS} for c in expect["commands"]]
        if got != want_cmds:
            errors.append(f"commands {got} != {want_cmds}")
    for gang, fields in expect.get("final", {}).items():
        if not _facts_hold(fields, gangs.get(gang, {})):
            errors.append(f"final {gang}: {gangs.get(gang)} does not hold {fields}")
    return errors
