"""The gang state's wire form across an upgrade: a state stored by the code before
``GangState`` was split into parts (main at 01b12bf, where every field was flat) decodes with
today's ``from_wire`` and encodes back to the same keys and values, so an upgraded worker reads
the changelog the previous one wrote."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

from streams.core.records import GangSummarized
from streams.core.state import (NO_GROUP, NO_HOLD, NO_LOSS, NO_PERMIT, PARTS, Commands,
                                GangState, Group, Hold, Lost, Peer, Permit, from_wire, to_wire)

OLD = Path(__file__).resolve().parents[1] / "data" / "gang-state-wire-main-01b12bf.json"
"""36 wire forms written by main's ``to_wire`` at 01b12bf, taken while folding every case of
``tests/cases`` record by record (the first two states to carry each key set)."""


def _old_forms() -> list[dict]:
    return json.loads(OLD.read_text())


def test_old_flat_form_decodes_and_encodes_back_unchanged() -> None:
    forms = _old_forms()
    assert len(forms) == 36
    for old in forms:
        assert to_wire(from_wire(old)) == old


def test_old_form_fills_the_parts() -> None:
    forms = _old_forms()
    waiting = next(w for w in forms if w.get("ws") is not None)
    state = from_wire(waiting)
    assert state.permit == Permit(waiting["ws"], waiting["pw"])
    lost = next(w for w in forms if w.get("lo"))
    state = from_wire(lost)
    assert state.lost == Lost(tuple(tuple(x) for x in lost["lo"]), lost.get("lt", False))
    assert from_wire(forms[0]).lost is NO_LOSS
    commanded = next(w for w in forms if w["e"] and w.get("ls") is not None)
    assert from_wire(commanded).commands == Commands(
        commanded["r"], commanded["e"], commanded["ls"], tuple(tuple(k) for k in commanded["ra"]))


def test_a_part_owns_its_keys_and_omits_defaults() -> None:
    state = from_wire(_old_forms()[0])
    state.permit = Permit(7, True)
    state.lost = Lost((("w0", "deleted", 5),), True)
    wire = to_wire(state)
    assert (wire["ws"], wire["pw"], wire["lo"], wire["lt"]) == (7, True, [["w0", "deleted", 5]],
                                                                 True)
    back = from_wire(wire)
    assert back == state
    state.permit, state.lost = NO_PERMIT, replace(NO_LOSS)
    wire = to_wire(state)
    assert "lo" not in wire and "lt" not in wire and wire["ws"] is None and wire["pw"] is False


def test_old_form_fills_the_hold() -> None:
    forms = _old_forms()
    held = next(w for w in forms if w["hs"] is not None)
    assert from_wire(held).hold == Hold(held["hs"], held["w"], held["he"], held.get("rl"),
                                        held.get("rt"), held.get("sd", False))
    released = next(w for w in forms if w.get("rt") is not None)
    hold = from_wire(released).hold
    assert (hold.released_at, hold.released_attempted) == (released["rl"], released["rt"])
    quiet = next(w for w in forms if w["hs"] is None and "rl" not in w and not w["w"])
    assert from_wire(quiet).hold is NO_HOLD


def test_the_hold_writes_hs_w_he_always_and_rl_rt_sd_only_when_set() -> None:
    state = from_wire(_old_forms()[0])
    state.hold = Hold(held_since=None, warned=False, hold_emitted_at=None, released_at=3,
                      released_attempted=4, stranded_told=True)
    wire = to_wire(state)
    assert [wire[k] for k in ("hs", "w", "he", "rl", "rt", "sd")] == [None, False, None, 3, 4,
                                                                      True]
    assert from_wire(wire) == state
    state.hold = replace(NO_HOLD, held_since=9, warned=True, hold_emitted_at=10)
    wire = to_wire(state)
    assert (wire["hs"], wire["w"], wire["he"]) == (9, True, 10)
    assert "rl" not in wire and "rt" not in wire and "sd" not in wire


def test_old_form_fills_the_group() -> None:
    forms = _old_forms()
    told = next(w for w in forms if w["p"] and w["ss2"] is not None and w["sl"])
    group = from_wire(told).group
    row = told["p"][0]
    assert group.peers[row[0]] == Peer(tuple(row[1]), row[2], row[3], row[4], row[5], row[6],
                                       len(row) > 7)
    ss2 = told["ss2"]
    assert group.sent_summary == (tuple(ss2[0]), ss2[1], ss2[2], ss2[3], ss2[4], len(ss2) > 5)
    assert len(group.summary_log) == len(told["sl"])
    assert group.summary_log[0][0] == told["sl"][0][0]
    alone = next(w for w in forms if not w["p"] and w["ss2"] is None and not w["sl"])
    assert from_wire(alone).group is NO_GROUP


def test_the_group_writes_its_six_keys() -> None:
    state = from_wire(_old_forms()[0])
    deferred = GangSummarized(20, "ml/b", "ml/a", ("ml/a", "ml/b"), True, True, 2, 2, None,
                              True)
    state.group = Group(peers={"ml/b": Peer(("ml/a", "ml/b"), True, True, 1, 2, 5, False)},
                        sent_summary=(("ml/a", "ml/b"), True, True, 2, 2, True),
                        pending_answers={"ml/b": 7}, asked_as_of=8,
                        summary_log=((3, (("ml/a", "ml/b"), True, True, 2, 2, False)),),
                        deferred=(deferred,))
    wire = to_wire(state)
    assert wire["p"] == [["ml/b", ["ml/a", "ml/b"], True, True, 1, 2, 5]]
    assert wire["ss2"] == [["ml/a", "ml/b"], True, True, 2, 2, True]
    assert (wire["pa"], wire["aa"]) == ({"ml/b": 7}, 8)
    assert wire["sl"] == [[3, ["ml/a", "ml/b"], True, True, 2, 2]]
    assert wire["df"] == [[20, "ml/b", "ml/a", ["ml/a", "ml/b"], True, True, 2, 2, None, True]]
    assert from_wire(wire) == state
    state.group = replace(NO_GROUP)
    wire = to_wire(state)
    assert [wire[k] for k in ("p", "ss2", "pa", "aa", "sl", "df")] == [[], None, {}, None, [], []]


def test_parts_names_every_part_of_the_state_with_its_decoder() -> None:
    state = GangState(gang="ml/a")
    assert [name for name, _ in PARTS] == ["permit", "commands", "lost", "hold", "group",
                                          "holding"]
    assert {f.name for f in fields(GangState) if hasattr(getattr(state, f.name), "to_wire")} \
        == {name for name, _ in PARTS}
    wire = to_wire(state)
    for name, decode in PARTS:
        assert decode(wire) == getattr(state, name)
    state.hold = Hold(held_since=4, warned=True, hold_emitted_at=5)
    state.permit = Permit(6, False)
    back = from_wire(to_wire(state))
    assert (back.hold, back.permit, back.lost) == (Hold(4, True, 5), Permit(6, False), NO_LOSS)
