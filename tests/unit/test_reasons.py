"""Every Event reason the core can emit is one the wire contract (and so the sink) accepts.

The sink validates each diagnostic against ``streams.wire.contracts.Diagnostic``; a reason
missing from ``DiagnosticReason`` is skipped there, and its Events are never written (seen on
the cluster tier with ``GangMembersStranded`` before it was added).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from streams.wire.contracts import DiagnosticReason

CORE = Path(__file__).resolve().parents[2] / "streams" / "core"
# the reasons of explain's findings only (never emitted) and of cycle records (not Events)
NOT_EMITTED = {"GangRoundEnded", "GangOnceSatisfied"}


def test_every_reason_the_core_writes_is_in_the_contract() -> None:
    written = set()
    for name in ("decide.py", "episode.py", "preemption.py"):
        written |= set(re.findall(r'"(Gang[A-Z][A-Za-z]*)"', (CORE / name).read_text()))
    assert written - NOT_EMITTED == set(get_args(DiagnosticReason))


ROOT = CORE.parents[1]


def test_the_readme_and_the_contract_list_exactly_the_reasons_emitted() -> None:
    """README.md's list of diagnostics and docs/contracts.md's table of them name every reason
    of the contract and no other (a retired reason, like ``GangCycleRejected``, leaves all
    three together)."""
    readme = (ROOT / "README.md").read_text()
    listed = readme[readme.index("- **diagnostics** ("):readme.index("- **commands** (")]
    assert set(re.findall(r"`(Gang[A-Z][A-Za-z]*)`", listed)) == set(get_args(DiagnosticReason))
    contracts = (ROOT / "docs" / "contracts.md").read_text()
    rows = set(re.findall(r"^\| `(Gang[A-Z][A-Za-z]*)` \| (?:Warning|Normal) \|", contracts,
                          re.M))
    assert rows == set(get_args(DiagnosticReason))
