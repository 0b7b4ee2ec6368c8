"""An ack's optional ``reason`` (``gangstate.ack/v1``): the scheduler shim says why a command
was not applied, for example a preemption in progress (docs/shim.md "Commands and
preemption"). Decoded, kept by the fold, told in ``describe gang``'s history; acks without it
read as before."""

from __future__ import annotations

import json

import pytest

from streams.core.fold import PartitionFold, describe
from streams.core.records import AckObserved
from streams.cli.query import format_gang
from streams.query.answers import gang_detail
from streams.wire.decoding import Decoded, decode_input
from tests.fixtures.builders import ack, at, cycle, pod

PREEMPTING = "preemption in progress: ns/w0 nominated to node-a"


def _ack_bytes(**extra: object) -> bytes:
    rec = {"schema": "gangstate.ack/v1", "observed_at": "2026-11-02T09:00:10.000001Z",
           "command_id": "a/g#2", "gang_group": "a/g", "epoch": 2,
           "outcome": "PreconditionFailed", "representative": "a/w0", "shim": "s-1", **extra}
    return json.dumps(rec).encode()


@pytest.mark.parametrize("extra, reason", [
    ({"reason": PREEMPTING}, PREEMPTING),
    ({}, None),
    ({"reason": None}, None),
], ids=["with a reason", "without (older acks)", "null"])
def test_the_reason_is_decoded(extra: dict, reason: str | None) -> None:
    assert decode_input(_ack_bytes(**extra)) == Decoded("a/g", AckObserved(
        1793610010000001, "a/g#2", "a/g", 2, "PreconditionFailed", "a/w0", reason))


def test_a_reason_that_is_no_string_is_dead_lettered() -> None:
    with pytest.raises(ValueError, match=r"gangstate.ack/v1.reason"):
        decode_input(_ack_bytes(reason=7))


def _fold(records):
    store: dict = {}
    fold = PartitionFold(store)
    for rec in records:
        fold.feed(getattr(rec, "gang", None) or rec.gang_group, rec)
    return store["ns/g"]


def _trace():
    return [pod("w0", 0, min_available="2"), pod("w1", 0, min_available="2"),
            cycle("w0", 1, 10, "PreEnqueue", "Success", representative="ns/w0")]


@pytest.mark.parametrize("rec, cause", [
    (ack(4, 1, "PreconditionFailed", "ns/w0", reason=PREEMPTING),
     f"ack ns/g#1 PreconditionFailed ({PREEMPTING})"),
    (ack(4, 1, "Stale", "ns/w0", reason="epoch 1 is not above the gang group's fence 3"),
     "ack ns/g#1 Stale (epoch 1 is not above the gang group's fence 3)"),
    (ack(4, 1, "PreconditionFailed", "ns/w0"), "ack ns/g#1 PreconditionFailed"),
], ids=["preemption", "stale", "no reason"])
def test_a_refused_command_is_told_in_the_history_with_its_reason(rec, cause) -> None:
    before = _fold(_trace())
    state = _fold(_trace() + [rec])
    assert state.commands.representative == before.commands.representative == "ns/w0"
    assert describe(rec) == cause
    assert state.history[-1] == (at(4), "command ns/g#1 refused", cause)
    assert len(state.history) == len(before.history) + 1
    text = format_gang(gang_detail(state))
    assert "command ns/g#1 refused" in text and cause in text, text


def test_an_applied_ack_is_told_by_the_representative_it_moves_and_a_duplicate_by_nothing():
    trace = _trace() + [cycle("w0", 3, 11, "PreFilter", "Success", representative=None)]
    applied = ack(4, 1, "Applied", "ns/w1")
    state = _fold(trace + [applied])
    assert describe(applied) == "ack ns/g#1 Applied"
    refused = ack(5, 2, "PreconditionFailed", "ns/w1", reason=PREEMPTING)
    again = _fold(trace + [applied, refused, refused])
    assert [h[1] for h in again.history[len(state.history):]] == ["command ns/g#2 refused"]
