"""The scheduler shim's fencing core: which commands to apply, and the acks that answer them.

Where it sits: inside the shim (``producers.shim.shim`` is its Kafka shell), and in-process in the
simulator (``producers.simulate.run``). ``ShimState``, ``buffer_command``, ``apply_command``,
``apply_pending`` and ``recover`` are pure functions over frozen values: no clock, no I/O.

Fencing rule (contracts.md, ``gangstate.command/v1``): a command is applied only if its epoch is
greater than the group's fence and its ``expected_representative`` is still the group's
representative (compare-and-swap); every command is acked (``Applied``, ``Stale``,
``PreconditionFailed``). The fence is the highest epoch answered with ``Applied`` or
``PreconditionFailed``, so a redelivered command that once failed its precondition is never
applied later; it is acked ``Stale``.

Must not: read the clock, do I/O, or decide anything about gangs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from streams.wire.contracts import ACK_SCHEMA

ACK_OUTCOMES = ("Applied", "Stale", "PreconditionFailed")
FENCING_OUTCOMES = frozenset({"Applied", "PreconditionFailed"})
"""Ack outcomes that advance a group's fence (a ``Stale`` ack answers an already-fenced epoch)."""

CommandDict = Mapping[str, Any]
"""A ``gangstate.command/v1`` record as a JSON-ready mapping (keys as in contracts.md)."""
AckDict = dict[str, Any]
"""A ``gangstate.ack/v1`` record as a JSON-ready dict."""


# -- the fencing core --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ShimState:
    """What a shim remembers, per gang group id.

    ``fences``: the highest command epoch answered ``Applied`` or ``PreconditionFailed`` (an
    int >= 1; absent = 0). ``pending``: commands received but not yet applied, in arrival order;
    they wait here until the group's next AfterPostFilter or PreEnqueue point. Frozen: every
    change makes a new value.
    """

    fences: Mapping[str, int] = field(default_factory=dict)
    pending: Mapping[str, tuple[CommandDict, ...]] = field(default_factory=dict)

    def fence(self, gang_group: str) -> int:
        """The group's fence epoch (0 when the shim never answered a command of the group)."""
        return self.fences.get(gang_group, 0)


def make_ack(command: CommandDict, outcome: str, representative: str | None,
             at: str, shim_id: str | None = None) -> AckDict:
    """Build the ``gangstate.ack/v1`` answer to ``command``.

    ``outcome`` is one of ``ACK_OUTCOMES``; ``representative`` is the group's representative
    after the decision (``ns/name`` or ``None``); ``at`` is the RFC 3339 ``observed_at``.
    ``shim_id``, when given, is added as the optional field ``shim`` so that a restarted shim can
    find its own acks. Raises ``ValueError`` for an unknown outcome.
    """
    if outcome not in ACK_OUTCOMES:
        raise ValueError(f"unknown ack outcome {outcome!r}")
    ack: AckDict = {
        "schema": ACK_SCHEMA, "observed_at": at, "command_id": command["id"],
        "gang_group": command["gang_group"], "epoch": int(command["epoch"]),
        "outcome": outcome, "representative": representative,
    }
    if shim_id is not None:
        ack["shim"] = shim_id
    return ack


def apply_command(state: ShimState, command: CommandDict, current_representative: str | None,
                  *, at: str | None = None, candidates: Iterable[str] | None = None,
                  shim_id: str | None = None) -> tuple[ShimState, AckDict]:
    """Decide one command against the scheduler's current representative of its group.

    Pure. Returns the new state and the ack (``gangstate.ack/v1`` dict):

    - ``Stale`` when ``command["epoch"]`` is not greater than the group's fence (a duplicate, a
      redelivery, or a command overtaken by a newer one); the state is unchanged;
    - ``PreconditionFailed`` when the compare-and-swap fails: for ``SwitchRepresentative``,
      ``expected_representative`` is not ``current_representative``; for
      ``ElectRepresentative`` (the group has none or it is gone), the group has a representative
      other than ``expected_representative``; also when ``candidates`` (the group's pending
      member pods, ``ns/name``) is given and does not contain the new representative. The fence
      moves to the command's epoch;
    - ``Applied`` otherwise: the ack's ``representative`` is the command's, and the fence moves.

    ``at`` is the ack's ``observed_at`` (default: the command's ``issued_at``, so the result is a
    pure function of its inputs). The representative rule follows Koordinator's
    ``pkg/scheduler/plugins/coscheduling/core/core.go`` (one representative per gang group) and
    the switch that PR #2417 did in PostFilter. Raises ``KeyError`` when the command lacks
    ``id``, ``gang_group`` or ``epoch``.
    """
    group = command["gang_group"]
    epoch = int(command["epoch"])
    when = at if at is not None else command.get("issued_at", "")
    if epoch <= state.fence(group):
        return state, make_ack(command, "Stale", current_representative, when, shim_id)
    expected = command.get("expected_representative")
    target = command["representative"]
    if command.get("type") == "ElectRepresentative":
        holds = current_representative is None or current_representative == expected
    else:
        holds = current_representative == expected
    if holds and candidates is not None and target not in set(candidates):
        holds = False
    fenced = replace(state, fences={**state.fences, group: epoch})
    if not holds:
        return fenced, make_ack(command, "PreconditionFailed", current_representative, when,
                                shim_id)
    return fenced, make_ack(command, "Applied", target, when, shim_id)


def buffer_command(state: ShimState, command: CommandDict) -> ShimState:
    """Put a received command in its group's local buffer (a new state; pure).

    Nothing is decided here: the command waits for the group's next AfterPostFilter or
    PreEnqueue point (``apply_pending``). A command already buffered (same ``id``) is not
    buffered twice; a redelivery after it was answered is buffered and will be acked ``Stale``.
    """
    group = command["gang_group"]
    queued = state.pending.get(group, ())
    if any(c["id"] == command["id"] for c in queued):
        return state
    return replace(state, pending={**state.pending, group: queued + (command,)})


def apply_pending(state: ShimState, gang_group: str, current_representative: str | None, *,
                  at: str | None = None, candidates: Iterable[str] | None = None,
                  shim_id: str | None = None,
                  ) -> tuple[ShimState, str | None, list[AckDict]]:
    """Apply every buffered command of ``gang_group`` in epoch order (pure).

    Returns ``(state, representative, acks)``: the state with the group's buffer emptied, the
    representative the scheduler should use from now on (``current_representative`` when nothing
    applied) and one ack per buffered command, in the order decided. This is what both
    ``Shim.after_post_filter`` and ``Shim.pre_enqueue`` run.
    """
    queued = state.pending.get(gang_group, ())
    if not queued:
        return state, current_representative, []
    state = replace(state, pending={g: c for g, c in state.pending.items() if g != gang_group})
    pool = None if candidates is None else list(candidates)
    rep = current_representative
    acks: list[AckDict] = []
    for command in sorted(queued, key=lambda c: int(c["epoch"])):
        state, ack = apply_command(state, command, rep, at=at, candidates=pool, shim_id=shim_id)
        if ack["outcome"] == "Applied":
            rep = ack["representative"]
        acks.append(ack)
    return state, rep, acks


def recover(acks: Iterable[Mapping[str, Any]], shim_id: str | None = None,
            groups: Iterable[str] | None = None) -> ShimState:
    """Rebuild the fences from acks read back from ``gang-events`` after a restart (pure).

    ``acks``: ``gangstate.ack/v1`` dicts in any order; others are ignored. With ``shim_id``, only
    acks carrying ``"shim": shim_id`` count (a shim trusts only its own answers); with
    ``groups``, only those gang groups. Each group's fence becomes the highest epoch among its
    ``Applied``/``PreconditionFailed`` acks, so every command answered before the restart is
    ``Stale`` after it: applied at most once.
    """
    wanted = None if groups is None else set(groups)
    fences: dict[str, int] = {}
    for ack in acks:
        if ack.get("schema") != ACK_SCHEMA or ack.get("outcome") not in FENCING_OUTCOMES:
            continue
        if shim_id is not None and ack.get("shim") != shim_id:
            continue
        group = ack.get("gang_group")
        if not isinstance(group, str) or (wanted is not None and group not in wanted):
            continue
        fences[group] = max(fences.get(group, 0), int(ack["epoch"]))
    return ShimState(fences=fences)
