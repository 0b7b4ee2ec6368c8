"""Gang members held by ``spec.schedulingGates``: the gates each member carries, kept in the
gang state and its wire form (values worked out by hand)."""

from __future__ import annotations

from typing import Any

from streams.core.fold import FoldSettings, PartitionFold
from streams.core.records import Tick
from streams.core.state import from_wire, summary, to_wire
from tests.builders import at, pod

Q = ("example.com/quota",)
K = ("kueue.x-k8s.io/admission",)


def run(records: list[Any], end: float | None = None) -> tuple[list[dict[str, Any]], dict]:
    """Feed records keyed by their gang, then tick at ``end`` (seconds) when given."""
    store: dict = {}
    fold = PartitionFold(store, FoldSettings(grace_seconds=10.0, refresh_seconds=10.0))
    outputs = []
    for rec in records:
        outputs += fold.feed(rec.gang, rec)
    if end is not None:
        outputs += fold.feed(None, Tick(at(end)))
    return outputs, store


def test_the_gates_are_kept_on_the_member_and_through_cycle_records() -> None:
    from tests.builders import cycle

    _, store = run([pod("g-0", 0), pod("g-1", 1, gates=K + Q),
                    cycle("g-1", 2, 7, "Bind", "Error", reason="binding refused")])
    state = store["ns/g"]
    assert state.members["uid-g-1"].gates == K + Q and state.members["uid-g-0"].gates == ()
    assert state.gated == 1
    assert summary(state)["pods"]["ns/g-1"]["gates"] == list(K + Q)
    lifted = run([pod("g-0", 0), pod("g-1", 1, gates=Q), pod("g-1", 2, rv="2",
                                                           type_="MODIFIED")])[1]["ns/g"]
    assert lifted.gated == 0 and lifted.members["uid-g-1"].gates == ()


def test_a_state_with_gates_survives_its_wire_form_and_old_values_read_as_ungated() -> None:
    _, store = run([pod("g-0", 0), pod("g-1", 1, gates=K + Q)], 11)
    state = store["ns/g"]
    wire = to_wire(state)
    assert [len(row) for row in wire["m"]] == [12, 13]  # a 13th value only for a gated member
    assert wire["m"][1][12] == list(K + Q)
    back = from_wire(wire)
    assert back == state and back.gated == 1 and to_wire(back) == wire
    # a table value stored before gates were kept: every member row has 12 values
    old = {**wire, "m": [row[:12] for row in wire["m"]]}
    before = from_wire(old)
    assert before.gated == 0 and all(m.gates == () for m in before.members.values())
    assert before.members["uid-g-1"] == state.members["uid-g-1"]._replace(gates=())
