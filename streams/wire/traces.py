"""The offline fold: a trace file through the core with no broker (``gangstate fold``).

Where it sits: a thin shell like the worker, but over a file. It decodes each line with
``streams.wire.decoding``, feeds one ``PartitionFold`` (one event-time clock for the whole trace) and
ends with a tick at ``at``. Malformed lines are reported with their line number and skipped; a
record far ahead of ``at`` or of the rest of the trace is set aside with its reason
(``set_aside``), as the worker dead-letters one far ahead of its Kafka timestamp; nothing else
is lost. The Kafka path gives the same diagnostics and commands per gang
(``tests/kafka/test_pipeline.py`` checks it).

Must not: read the wall clock itself (the caller passes ``at``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple

from streams.core.cluster import DEFAULT_CLUSTER, key_of, split_key
from streams.core.fold import FoldSettings, Output, PartitionFold
from streams.core.records import Tick
from streams.core.state import GangState, as_of, summary
from streams.core.timefmt import format_time
from streams.wire.decoding import MAX_SKEW_SECONDS, DecodeError, Decoded, decode_input


@dataclass
class FoldResult:
    """What a trace folds to: outputs in emission order, final states, and input accounting.

    ``errors`` holds ``(line number, reason)`` for malformed lines; ``set_aside`` holds
    ``(line number, observed_at, reason)`` for valid records far ahead of ``at`` or of the rest
    of the trace (``far_ahead``), which were not folded; ``skipped`` counts valid records that
    concern no gang, by reason (``no-gang``, ``events``); ``records`` counts valid records,
    those set aside and skipped included; ``clock`` is the fold's clock at the end (event
    time, microseconds: the final tick's, or the latest record's), the time the gangs are
    read at (``state.as_of``).
    """

    diagnostics: list[Output] = field(default_factory=list)
    commands: list[Output] = field(default_factory=list)
    states: dict[str, GangState] = field(default_factory=dict)
    errors: list[tuple[int, str]] = field(default_factory=list)
    set_aside: list[tuple[int, str, str]] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    records: int = 0
    clock: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``gangstate fold --output json`` object: ``{"diagnostics": [...], "commands":
        [...], "gangs": {gang id: summary}}`` plus ``"input"`` accounting (``set_aside``: one
        ``{"line", "observed_at", "reason"}`` per record set aside)."""
        return {
            "diagnostics": self.diagnostics,
            "commands": self.commands,
            "gangs": {gang: summary(as_of(state, self.clock))
                      for gang, state in sorted(self.states.items())},
            "input": {"records": self.records, "malformed": len(self.errors),
                      "skipped": dict(sorted(self.skipped.items())),
                      "errors": [{"line": n, "error": e} for n, e in self.errors],
                      "set_aside": [{"line": n, "observed_at": t, "reason": r}
                                    for n, t, r in self.set_aside]},
        }


def read_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line number, raw bytes)`` for each non-blank line of a JSON-lines file."""
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield number, line


class SetAside(NamedTuple):
    """A record ``far_ahead`` sets aside: its ``position`` in the list of times, and the time it
    was judged against, ``reference`` (microseconds): ``--at`` when ``after_at``, else the
    ``observed_at`` of the record that shows the trace came back (at position ``by``)."""

    position: int
    reference: int
    after_at: bool
    by: int = -1


def far_ahead(times: list[int | None], at: int | None,
              max_skew_micros: int) -> list[SetAside]:
    """The records of a trace to set aside, in file order, from their event times ``times``
    (microseconds, in file order; ``None`` for a line with no record to fold). A trace has no
    Kafka timestamps to judge a record by (the worker's rule, ``decoding.check_skew``); the
    trace's own time stands for them. A record is set aside when it is more than
    ``max_skew_micros`` ahead of:

    - ``at``, the fold's final tick (``gangstate fold --at``, default now): the worker's rule
      were the trace replayed at ``at``; or
    - the trace: it is a jump (more than ``max_skew_micros`` ahead of the clock, the latest
      time folded before it) and the trace comes back: the next record after it, skipping
      those within ``max_skew_micros`` of it (a burst at the same time, or a run of bad
      stamps, judged alike) and those more than ``max_skew_micros`` behind the clock (late
      records, folded as usual), is more than ``max_skew_micros`` behind it. When that record
      is later, or there is none, the jump is the trace's time moving on (a gap, such as a pod
      created 5 minutes after the previous record) and it is folded.

    A record set aside moves no clock. Without ``at`` (only from the API) the first rule is off.
    """
    out: list[SetAside] = []
    clock: int | None = None
    for index, t in enumerate(times):
        if t is None:
            continue
        if at is not None and t - at > max_skew_micros:
            out.append(SetAside(index, at, True))
            continue
        if clock is not None and t - clock > max_skew_micros:
            back = _comes_back(times, index, clock, max_skew_micros)
            if back is not None:
                out.append(SetAside(index, times[back] or 0, False, back))
                continue
        clock = t if clock is None or t > clock else clock
    return out


def _comes_back(times: list[int | None], jump: int, clock: int, skew: int) -> int | None:
    """The position of the record that shows the trace came back from the jump at ``jump``
    (``far_ahead``): the next one, skipping those within ``skew`` of the jump and those more
    than ``skew`` behind ``clock``, when it is more than ``skew`` behind the jump; ``None``
    when that record is later than the jump, or there is none."""
    t = times[jump] or 0
    for later in range(jump + 1, len(times)):
        u = times[later]
        if u is None or clock - u > skew or abs(t - u) <= skew:
            continue
        return later if t - u > skew else None
    return None


def fold_lines(lines: Iterable[tuple[int, bytes]], at: int | None,
               settings: FoldSettings = FoldSettings(),
               max_skew_micros: int = int(MAX_SKEW_SECONDS * 1_000_000),
               partition_of: Callable[[str, int], int] | None = None) -> FoldResult:
    """Fold numbered raw lines, then tick at ``at`` (microseconds of event time; ``None`` = no
    final tick). Raises nothing for bad lines: they land in ``FoldResult.errors``. A record
    more than ``max_skew_micros`` ahead of ``at`` or of the rest of the trace (``far_ahead``)
    is set aside, not folded: it lands in ``FoldResult.set_aside`` with the reason, fires no
    timer and does not move the clock (docs/contracts.md, "Limits"). The lines are all decoded
    before the first is folded. ``partition_of`` (Kafka's partitioner,
    ``streams.kafka.partitions.partition_of``, which this layer does not import) lets the
    watch producers' rosters apply, as in the worker (``PartitionFold``); without it they
    change nothing."""
    result = FoldResult()
    fold = PartitionFold(result.states, settings, partition_of=partition_of)

    def take(outputs: list[Output]) -> None:
        for out in outputs:
            (result.commands if out["schema"].startswith("gangstate.command")
             else result.diagnostics).append(out)

    read: list[tuple[int, Decoded]] = []
    for number, raw in lines:
        try:
            read.append((number, decode_input(raw)))
        except DecodeError as err:
            result.errors.append((number, str(err)))
    result.records = len(read)
    times = [None if d.record is None else d.record.at for _, d in read]
    aside: set[int] = set()
    bound = f"at most {max_skew_micros / 1e6:g} s, docs/contracts.md \"Limits\""
    for judged in far_ahead(times, at, max_skew_micros):
        aside.add(judged.position)
        t = times[judged.position] or 0
        ahead = f"observed_at {format_time(t)} is {(t - judged.reference) / 1e6:.0f} s ahead of"
        if judged.after_at:
            why = f"{ahead} --at {format_time(judged.reference)}"
        else:
            why = (f"{ahead} the rest of the trace (line {read[judged.by][0]}, after it, is at "
                   f"{format_time(judged.reference)})")
        result.set_aside.append((read[judged.position][0], format_time(t),
                                 f"{why} ({bound}): set aside, not folded"))
    for index, (number, decoded) in enumerate(read):
        if decoded.record is None:
            result.skipped[decoded.skipped or "unknown"] += 1
        elif index not in aside:
            take(fold.feed(decoded.key, decoded.record))
    if at is not None:
        take(fold.feed(None, Tick(max(at, fold.clock))))
    result.clock = fold.clock
    return result


def fold_trace(path: Path, at: int | None, settings: FoldSettings = FoldSettings()) -> FoldResult:
    """Fold a trace file (``gangstate.*/v1`` JSON lines). Raises ``OSError`` if unreadable."""
    return fold_lines(read_lines(path), at, settings)


def format_text(result: Any) -> str:
    """Render a ``FoldResult`` for people: one block per gang (by cluster, then gang id; a
    gang outside ``default`` named by its key, ``eu-1:team-a/llm``), its diagnostics and
    commands."""
    lines: list[str] = []
    by_gang: dict[str, list[dict[str, Any]]] = {}
    for d in result.diagnostics:
        by_gang.setdefault(key_of(d.get("cluster", DEFAULT_CLUSTER), d["gang"]), []).append(d)
    for gang, state in sorted(result.states.items(), key=lambda item: split_key(item[0])):
        s = summary(as_of(state, getattr(result, "clock", None)))
        lines.append(f"gang {gang}  phase={s['phase']}  members={s['members']}"
                     f"/{s['min_member'] if s['min_member'] is not None else '?'}"
                     f"  bound={s['bound']}  waiting={s['waiting']}"
                     f"  representative={s['representative'] or '-'}")
        for d in by_gang.get(gang, []):
            lines.append(f"  {d['observed_at']}  {d['type']:<7} {d['reason']}: {d['message']}")
        for c in result.commands:
            if c["gang_group"] != s["gang_group"] \
                    or c.get("cluster", DEFAULT_CLUSTER) != state.cluster:
                continue
            cycle = f", cycle {c['cycle']}" if c.get("cycle") is not None else ""
            lines.append(f"  {c['issued_at']}  Command {c['type']} epoch {c['epoch']}: "
                         f"{c['expected_representative'] or '-'} -> {c['representative']}"
                         f" ({c['reason']}{cycle})")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
