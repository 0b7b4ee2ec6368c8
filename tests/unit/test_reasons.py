"""Every Event reason the core can emit is one the wire contract (and so the sink) accepts.

The sink validates each diagnostic against ``streams.wire.contracts.Diagnostic``; a reason
missing from ``DiagnosticReason`` is skipped there, and its Events are never written (seen on
the cluster tier with ``GangMembersStranded`` before it was added).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from streams.core import rules
from streams.wire.contracts import DiagnosticReason

CORE = Path(__file__).resolve().parents[2] / "streams" / "core"


def test_every_reason_of_the_registry_is_in_the_contract_with_its_type_and_message() -> None:
    """The contract's reasons are the registry's (``streams.core.rules.REASONS``), each owned by
    one family, with an Event type and a message function."""
    assert get_args(DiagnosticReason) == rules.REASON_NAMES
    owners = [r.name for rule in rules.RULES for r in rule.reasons]
    assert len(owners) == len(set(owners))
    for reason in rules.REASONS.values():
        assert reason.type in ("Normal", "Warning")
        assert callable(reason.message)


def test_every_timer_is_owned_by_one_family_and_listed_once() -> None:
    owned = [t.kind for rule in rules.RULES for t in rule.timers]
    assert sorted(owned) == sorted(t.kind for t in rules.TIMERS)
    assert len(set(owned)) == len(owned)


def test_every_decision_is_owned_by_one_family_and_run_once() -> None:
    """``rules.DECISIONS`` (the order ``decide`` runs them in) holds every family's decisions,
    each once: a family left out of it would never decide, silently."""
    owned = [d.name for rule in rules.RULES for d in rule.decisions]
    assert sorted(owned) == sorted(d.name for d in rules.DECISIONS)
    assert len(set(owned)) == len(owned)
    assert [rule.family for rule in rules.RULES if not rule.decisions and not rule.timers] == []


ROOT = CORE.parents[1]


def test_the_readme_and_the_contract_list_exactly_the_reasons_emitted() -> None:
    """README.md's list of diagnostics and docs/contracts.md's table of them name every reason
    of the contract and no other (a retired reason, like ``GangCycleRejected``, leaves all
    three together)."""
    readme = (ROOT / "README.md").read_text()
    listed = readme[readme.index("- **diagnostics** ("):readme.index("- **commands**")]
    assert set(re.findall(r"`(Gang[A-Z][A-Za-z]*)`", listed)) == set(get_args(DiagnosticReason))
    contracts = (ROOT / "docs" / "contracts.md").read_text()
    rows = set(re.findall(r"^\| `(Gang[A-Z][A-Za-z]*)` \| (?:Warning|Normal) \|", contracts,
                          re.M))
    assert rows == set(get_args(DiagnosticReason))
