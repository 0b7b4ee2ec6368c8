"""The offline fold: a trace file through the core with no broker (``gangstate fold``).

Where it sits: a thin shell like the worker, but over a file. It decodes each line with
``streams.wire.decoding``, feeds one ``PartitionFold`` (one event-time clock for the whole trace) and
ends with a tick at ``at``. Malformed lines are reported with their line number and skipped;
nothing else is lost. The Kafka path gives the same diagnostics and commands per gang
(``tests/kafka/test_pipeline.py`` checks it).

Must not: read the wall clock itself (the caller passes ``at``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from streams.core.fold import FoldSettings, Output, PartitionFold
from streams.core.records import Tick
from streams.core.state import GangState, summary
from streams.wire.decoding import DecodeError, decode_input


@dataclass
class FoldResult:
    """What a trace folds to: outputs in emission order, final states, and input accounting.

    ``errors`` holds ``(line number, reason)`` for malformed lines; ``skipped`` counts valid
    records that concern no gang, by reason (``no-gang``, ``events``).
    """

    diagnostics: list[Output] = field(default_factory=list)
    commands: list[Output] = field(default_factory=list)
    states: dict[str, GangState] = field(default_factory=dict)
    errors: list[tuple[int, str]] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    records: int = 0

    def to_json(self) -> dict[str, Any]:
        """The ``gangstate fold --output json`` object: ``{"diagnostics": [...], "commands":
        [...], "gangs": {gang id: summary}}`` plus ``"input"`` accounting."""
        return {
            "diagnostics": self.diagnostics,
            "commands": self.commands,
            "gangs": {gang: summary(state) for gang, state in sorted(self.states.items())},
            "input": {"records": self.records, "malformed": len(self.errors),
                      "skipped": dict(sorted(self.skipped.items())),
                      "errors": [{"line": n, "error": e} for n, e in self.errors]},
        }


def read_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line number, raw bytes)`` for each non-blank line of a JSON-lines file."""
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield number, line


def fold_lines(lines: Iterable[tuple[int, bytes]], at: int | None,
               settings: FoldSettings = FoldSettings()) -> FoldResult:
    """Fold numbered raw lines, then tick at ``at`` (microseconds of event time; ``None`` = no
    final tick). Raises nothing for bad lines: they land in ``FoldResult.errors``."""
    result = FoldResult()
    fold = PartitionFold(result.states, settings)

    def take(outputs: list[Output]) -> None:
        for out in outputs:
            (result.commands if out["schema"].startswith("gangstate.command")
             else result.diagnostics).append(out)

    for number, raw in lines:
        try:
            decoded = decode_input(raw)
        except DecodeError as err:
            result.errors.append((number, str(err)))
            continue
        result.records += 1
        if decoded.record is None:
            result.skipped[decoded.skipped or "unknown"] += 1
            continue
        take(fold.feed(decoded.key, decoded.record))
    if at is not None:
        take(fold.feed(None, Tick(max(at, fold.clock))))
    return result


def fold_trace(path: Path, at: int | None, settings: FoldSettings = FoldSettings()) -> FoldResult:
    """Fold a trace file (``gangstate.*/v1`` JSON lines). Raises ``OSError`` if unreadable."""
    return fold_lines(read_lines(path), at, settings)


def format_text(result: Any) -> str:
    """Render a ``FoldResult`` for people: one block per gang, its diagnostics and commands."""
    lines: list[str] = []
    by_gang: dict[str, list[dict[str, Any]]] = {}
    for d in result.diagnostics:
        by_gang.setdefault(d["gang"], []).append(d)
    for gang, state in sorted(result.states.items()):
        s = summary(state)
        lines.append(f"gang {gang}  phase={s['phase']}  members={s['members']}"
                     f"/{s['min_member'] if s['min_member'] is not None else '?'}"
                     f"  bound={s['bound']}  waiting={s['waiting']}"
                     f"  representative={s['representative'] or '-'}")
        for d in by_gang.get(gang, []):
            lines.append(f"  {d['observed_at']}  {d['type']:<7} {d['reason']}: {d['message']}")
        for c in result.commands:
            if c["gang_group"] != s["gang_group"]:
                continue
            cycle = f", cycle {c['cycle']}" if c.get("cycle") is not None else ""
            lines.append(f"  {c['issued_at']}  Command {c['type']} epoch {c['epoch']}: "
                         f"{c['expected_representative'] or '-'} -> {c['representative']}"
                         f" ({c['reason']}{cycle})")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
