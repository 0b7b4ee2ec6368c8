"""The gang state's wire form across an upgrade: a state stored by the code before
``GangState`` was split into parts (main at 01b12bf, where every field was flat) decodes with
today's ``from_wire`` and encodes back to the same keys and values, so an upgraded worker reads
the changelog the previous one wrote."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from streams.core.state import (NO_LOSS, NO_PERMIT, Commands, Lost, Permit, from_wire,
                                to_wire)

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
