"""The fold prefers the scheduler shim's records (``shim/``, docs/shim.md) and falls back to the
records derived from scheduler Events: both paths give the same failure episode and the same
``GangUnschedulable``; the shim's add the representative and the cycle numbers.

The shim's records below are those it wrote on the real koord-scheduler v1.8.0 for a gang of
three one-GPU members on two one-GPU nodes (one round: the representative opens the gang
scheduling context, NextPod hands out the other two, two wait at Permit, the third does not
fit, the two are released and unreserved, and the failed member passes PreEnqueue as the next
representative; K = Koordinator v1.8.0 ``pkg/scheduler/plugins/coscheduling/``,
``core/core.go:150-190,286-341,362-385``).
"""

from __future__ import annotations

from streams.core.records import CycleObserved
from streams.core.state import from_wire, to_wire
from streams.core.timefmt import format_time
from tests.fixtures.builders import at
from tests.unit.test_fold import (GPU, GPU_FIT, MESSAGE_W2, _gang_of_three, failed_round, run,
                                  unschedulable)

SHIM = "koord-scheduler"


def shim(name: str, t: float, cycle: int, stage: str, status: str, *, reason: str = "",
         rep: str | None = None, culprit: str | None = None, fit: str | None = None,
         waited: int | None = None, round_: int | None = None,
         skipped: int = 0) -> CycleObserved:
    """A record of the scheduler shim for member ``name`` of ``ns/g``."""
    return CycleObserved(at(t), "koord-scheduler", cycle, f"ns/{name}", f"uid-{name}", "ns/g",
                         "ns/g", stage, status, reason, "", None if rep is None else f"ns/{rep}",
                         None, "", None if culprit is None else f"ns/{culprit}", fit, waited,
                         None, SHIM, round_, skipped)


def shim_round(t: float, culprit: str = "w2", first: str = "w0", skipped: int = 0):
    """One failed round as the shim reports it (cycle number 10*t): ``first`` is the
    representative and opens the round; the culprit fails with two members waiting; they are
    released (PostFilter Rejected) and unreserved; the culprit becomes the next representative
    at its PreEnqueue."""
    c = int(10 * t)
    others = [n for n in ("w0", "w1", "w2") if n != culprit]
    out = [shim(first, t - 0.003, c, "PreFilter", "Success", reason="RoundOpened", round_=c),
           shim(others[0], t - 0.002, c, "Permit", "Wait", round_=c),
           shim(others[1], t - 0.001, c, "Permit", "Wait", round_=c),
           shim(culprit, t, c, "Filter", "Unschedulable", reason=GPU, culprit=culprit,
                fit=GPU_FIT, waited=2, round_=c, skipped=skipped)]
    for i, n in enumerate(others):
        out.append(shim(n, t + 0.01 * (i + 1), c, "PostFilter", "Rejected",
                        reason="GangGroupRejected", culprit=culprit, fit=GPU_FIT, waited=2,
                        round_=c))
        out.append(shim(n, t + 0.021 + i / 1000, c, "Unreserve", "Rejected",
                        reason="GangGroupRejected"))
    out.append(shim(culprit, t + 0.03, c, "PreEnqueue", "Success", rep=culprit))
    return out


def test_the_shims_rounds_give_the_diagnostic_the_events_give_plus_representative_and_cycle():
    """60 failed rounds, one per second, w2 the culprit each time, once as scheduler Events
    (test_fold.test_an_episode_is_one_diagnostic_over_many_rounds) and once as the shim's
    records: the same single GangUnschedulable at t=11 (rounds 10), and nothing else for any
    numbered round; the shim's state also knows the representative and the last cycle. The
    storm counts the scheduler's FailedScheduling Events: 30 a minute from the Events (3 per
    round, the Unreserve releases are not attempts), none from the shim's records alone (they
    tell the same attempts, one round a GANGSTATE_SHIM_ROUND_INTERVAL in detail: a new user
    saw 23 a minute where the API server held about 2,600)."""
    from_events, events_store = run(_gang_of_three() + [r for t in range(1, 61)
                                                        for r in failed_round(t)], end=120)
    from_shim, shim_store = run(_gang_of_three() + [r for t in range(1, 61)
                                                    for r in shim_round(t)], end=120)
    expected = [(format_time(at(11)), {
        "unfit": {"w2": GPU_FIT}, "fit": 2, "min_member": 3, "since": format_time(at(1)),
        "rounds": 10, "attempts_per_minute": 30}, MESSAGE_W2)]
    assert unschedulable(from_events) == expected
    expected[0][1]["attempts_per_minute"] = 0
    assert unschedulable(from_shim) == expected
    assert [o["reason"] for o in from_shim] == ["GangUnschedulable"]
    ev, sh = events_store["ns/g"], shim_store["ns/g"]
    assert (ev.episode.rounds, ev.episode.fit) == (sh.episode.rounds, sh.episode.fit) == (60, 2)
    assert ev.commands.representative is None and ev.cycle is None
    assert sh.commands.representative == "ns/w2" and sh.cycle == 600
    assert sh.shim_at == at(60.03)
    assert from_wire(to_wire(sh)) == sh
    old = {k: v for k, v in to_wire(sh).items() if k != "sh"}
    assert from_wire(old).shim_at is None


def test_events_are_set_aside_while_the_shim_reports_and_folded_again_after_it_stops():
    """t=1-20: every round arrives twice, from the shim and as scheduler Events: the episode
    counts 20 rounds, not 40, and the storm each second's 3 FailedScheduling Events once (the
    Events', not the shim's records). t=100-104: Events only (the shim stopped 80 s of event time
    before, more than SHIM_PREFERRED_SECONDS = 60): they fold again, 5 more rounds."""
    records = _gang_of_three()
    for t in range(1, 21):
        records += shim_round(t) + failed_round(t + 0.5)
    _, store = run(records)
    assert store["ns/g"].episode.rounds == 20
    assert store["ns/g"].storm[-1] == (at(20) // 1_000_000, 3)
    later = [r for t in range(100, 105) for r in failed_round(t)]
    _, store2 = run(records + later)
    assert store2["ns/g"].episode.rounds == 25
    assert store2["ns/g"].episode.last_at == at(104.02)


def test_rounds_the_shim_sampled_out_are_counted():
    """The shim reports at most one round per gang group and second in detail; the next
    detailed round's failure carries the count of the others (rounds_skipped): 1 + 7 + 1 + 12
    rounds."""
    records = _gang_of_three() + shim_round(1) + shim_round(2, skipped=7) + shim_round(3) \
        + shim_round(4, skipped=12)
    _, store = run(records)
    assert store["ns/g"].episode.rounds == 1 + (7 + 1) + 1 + (12 + 1)


def test_a_shim_record_with_its_optional_fields_decodes():
    """The wire form the Go shim writes (shim/gangshim/plugin.go, Record) decodes into the
    fields above; the optional fields are optional."""
    import json

    from streams.wire.decoding import decode_input

    raw = {"schema": "gangstate.cycle/v1", "observed_at": "2026-12-01T07:17:20.000100Z",
           "scheduler": "koord-scheduler", "shim": "smoke", "cycle": 1234,
           "pod": {"namespace": "s1", "name": "g-0", "uid": "u0"}, "gang": "s1/g",
           "gang_group": "s1/g", "stage": "Filter", "status": "Unschedulable",
           "reason": GPU, "message": GPU_FIT, "representative": None, "node": None,
           "culprit": "s1/g-0", "fit_error": GPU_FIT, "already_wait_for_bound": 2,
           "round": 1230, "rounds_skipped": 4}
    decoded = decode_input(json.dumps(raw).encode())
    rec = decoded.record
    assert decoded.key == "s1/g"
    assert (rec.cycle, rec.shim, rec.round, rec.rounds_skipped, rec.culprit) == (
        1234, "smoke", 1230, 4, "s1/g-0")
    raw.pop("shim"), raw.pop("round"), raw.pop("rounds_skipped")
    plain = decode_input(json.dumps(raw).encode()).record
    assert (plain.shim, plain.round, plain.rounds_skipped) == ("", None, 0)
