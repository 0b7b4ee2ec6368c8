"""Preemption for a gang (``streams/core/preemption.py``, rules PR1-PR5): named scenarios with
values worked out by hand from the real scheduler's texts (docs/koordinator-rules.md)."""

from __future__ import annotations

import json

from streams.core.records import Capacity, CycleObserved, PodObserved, PreemptionObserved, Tick
from streams.core.state import GangState
from streams.core.timefmt import format_time
from tests.fixtures.builders import at, fold_records, pod

GPU = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
TERMINATING = (GPU + " no new claims to deallocate, preemption: not eligible due to a "
               "terminating pod on the nominated node.")
NO_VICTIMS = (GPU + " no new claims to deallocate, preemption: 0/2 nodes are available: 2 No "
              "preemption victims found for incoming pod.")
ROOM_0 = Capacity("nvidia.com/gpu", 1000, 2000, 0, 2, 0, 1000)


def member(name: str, t: float, *, rv: str = "1", node: str | None = None,
           nominated: str | None = None, min_available: str = "2",
           type_: str = "ADDED") -> PodObserved:
    """A member of ns/g: Running once on a node, else Pending."""
    return pod(name, t, rv=rv, type_=type_, min_available=min_available, node=node,
               phase="Running" if node else "Pending", nominated=nominated)


def failed(name: str, t: float, n: int, message: str, kind: str | None) -> CycleObserved:
    """A FailedScheduling of ``name``'s own fit error (form FIT), as the watch producer reads
    it: culprit itself, fit error without the PostFilter text, the preemption clause."""
    return CycleObserved(at(t), "koord-scheduler", None, f"ns/{name}", f"uid-{name}", "ns/g",
                         "ns/g", "Filter", "Unschedulable", "Insufficient nvidia.com/gpu",
                         message, None, None, f"ev-{name}#{n}", f"ns/{name}", GPU, 0, ROOM_0,
                         preemption=kind)


def preempted(victim: str, node: str, member_name: str, t: float, *, grace: int | None = 30,
              type_: str = "Preempted") -> PreemptionObserved:
    return PreemptionObserved(at(t), type_, "ns/g", f"low/{victim}", f"uid-{victim}", node,
                              f"ns/{member_name}", f"uid-{member_name}", grace)


def folded(records: list) -> GangState:
    """The state of gang ns/g once a fold with the default settings has been fed ``records``."""
    store: dict = {}
    fold_records(records, store=store)
    return store["ns/g"]


def diagnostics(out: list[dict]) -> list[dict]:
    return [o for o in out if o["schema"] == "gangstate.diagnostic/v1"]


def in_progress_then_bound(grace: int = 30) -> list:
    """A gang of 2 x 1 GPU (minMember 2), two low-priority pods holding the 2 GPUs with a 30 s
    grace period: the scheduler preempts both at t=1.0/1.1, nominates node-a/node-b, and
    fails the members with 'not eligible due to a terminating pod' until the victims are gone
    at t=31/31.2; both members bind at t=31.5."""
    recs: list = [member("g-0", 0), member("g-1", 0)]
    recs += [failed("g-0", 0.5, 1, GPU, None)]
    recs += [preempted("v-0", "node-a", "g-0", 1.0, grace=grace),
             preempted("v-1", "node-b", "g-1", 1.1, grace=grace),
             member("g-0", 1.2, rv="2", nominated="node-a"),
             member("g-1", 1.3, rv="2", nominated="node-b")]
    for i in range(2, 30):  # one failure a second for 28 s: far past the 10 s settle
        recs.append(failed("g-0" if i % 2 else "g-1", 1.5 + i, i, TERMINATING,
                           "victims-terminating"))
    recs += [preempted("v-0", "node-a", "g-0", 31.0, type_="Deleted"),
             preempted("v-1", "node-b", "g-1", 31.2, type_="Deleted"),
             member("g-0", 31.5, rv="3", node="node-a"),
             member("g-1", 31.5, rv="3", node="node-b")]
    return recs


def test_preemption_in_progress_then_bound_says_preempting_once_then_scheduled():
    out = diagnostics(fold_records(in_progress_then_bound()))
    assert [d["reason"] for d in out] == ["GangPreempting", "GangScheduled"]
    d = out[0]
    assert d["type"] == "Normal"
    assert d["observed_at"] == format_time(at(2.1))  # 1 s after the last victim (t=1.1)
    assert [i["name"] for i in d["involved"]] == ["g-0", "g-1"]
    t1, t2 = format_time(at(1.0)), format_time(at(1.1))
    assert d["message"] == (
        f"gang ns/g is waiting for its preemption: koord-scheduler preempted low/v-0 on node-a "
        f"(for g-0, at {t1}, grace period 30s) and low/v-1 on node-b (for g-1, at {t2}, grace "
        f"period 30s) for its members; the gang binds once the 2 victims are gone (each "
        f"deletion completes when the victim's kubelet confirms it, within its grace period); "
        f"nominated nodes: g-0 on node-a, g-1 on node-b; until then its pods' FailedScheduling "
        f"(preemption: not eligible due to a terminating pod on the nominated node) is "
        f"expected: no capacity needs to be freed and minMember need not change")
    assert d["facts"]["nominated"] == {"g-0": "node-a", "g-1": "node-b"}
    assert all("must free up" not in x["message"] and "min-available would" not in x["message"]
               and "lower minMember" not in x["message"] for x in out)


def test_victims_terminating_clause_alone_holds_back_unschedulable():
    """The Preempted Events may come late (koord-scheduler throttles its Event writes): the
    scheduler's own 'not eligible due to a terminating pod' is enough to hold back the
    GangUnschedulable advice to free capacity or lower minMember."""
    recs: list = [member("g-0", 0), member("g-1", 0)]
    recs += [failed("g-0", 0.5 + i, i, TERMINATING, "victims-terminating") for i in range(30)]
    assert diagnostics(fold_records(recs)) == []


def wasted_recs() -> list:
    """A gang of 3 x 1 GPU (minMember 3) on a cluster of 2 GPUs held by 2 low-priority pods
    (grace 0): the scheduler evicts both at t=1.0/1.2 (gone at t=1.1/1.3); the gang's retries
    then fail with 'No preemption victims found' from t=2."""
    recs: list = [member(f"g-{i}", 0, min_available="3") for i in range(3)]
    recs += [failed("g-0", 0.5, 1, GPU, None),
             preempted("v-0", "node-a", "g-0", 1.0, grace=0),
             preempted("v-0", "node-a", "g-0", 1.1, type_="Deleted"),
             preempted("v-1", "node-b", "g-1", 1.2, grace=0),
             preempted("v-1", "node-b", "g-1", 1.3, type_="Deleted")]
    recs += [failed(f"g-{i % 3}", 2.0 + i, 10 + i, NO_VICTIMS, "no-victims") for i in range(15)]
    return recs


def test_wasted_preemption_is_told_on_the_gang_and_the_victims():
    out = diagnostics(fold_records(wasted_recs()))
    assert [d["reason"] for d in out] == ["GangPreemptionWasted", "GangUnschedulable"]
    d = out[0]
    assert d["type"] == "Warning" and d["observed_at"] == format_time(at(2.0))
    assert [(i["namespace"], i["name"]) for i in d["involved"]] == [
        ("ns", "g-0"), ("ns", "g-1"), ("ns", "g-2"), ("low", "v-0"), ("low", "v-1")]
    t1, t2 = format_time(at(1.0)), format_time(at(1.2))
    assert d["message"] == (
        f"gang ns/g still cannot be scheduled although koord-scheduler preempted low/v-0 on "
        f"node-a (for g-0, at {t1}) and low/v-1 on node-b (for g-1, at {t2}) for it: it needs "
        f"3 x 1 nvidia.com/gpu and the cluster has 2 allocatable on 2 nodes; the evictions "
        f"freed room the gang cannot use (koord-scheduler preempts for one pod at a time, not "
        f"for the whole gang)")
    assert d["facts"]["victims"][1]["gone_at"] == format_time(at(1.3))


def test_wasted_after_victims_gone_without_no_victims_clause():
    """Victims gone (DELETED) and the gang still failing 5 s later (GONE_SETTLE_SECONDS),
    the messages saying nothing of preemption: wasted, told at gone + 5 s = t 6.3."""
    recs = [r if not isinstance(r, CycleObserved) or r.at < at(2) else
            r._replace(preemption=None, message=GPU) for r in wasted_recs()]
    out = diagnostics(fold_records(recs))
    assert [d["reason"] for d in out] == ["GangPreemptionWasted", "GangUnschedulable"]
    assert out[0]["observed_at"] == format_time(at(6.3))


def test_preemptor_unknown_record_changes_nothing_for_other_gangs():
    """A Deleted of a victim the gang never heard of is no news."""
    recs: list = [member("g-0", 0), member("g-1", 0),
                  preempted("v-9", "node-a", "g-0", 1.0, type_="Deleted")]
    assert folded(recs).preemption is None


def test_replay_is_deterministic():
    for recs in (in_progress_then_bound(), wasted_recs()):
        a, b = fold_records(recs), fold_records(list(recs))
        assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
        from streams.core.state import from_wire, to_wire
        state = folded(recs)
        assert from_wire(json.loads(json.dumps(to_wire(state)))) == state


def test_explain_pod_during_preemption_names_victims_and_nominated_node():
    from streams.core.explain import why_pod
    why = why_pod(folded(in_progress_then_bound()[:20]), "ns/g-0")  # victims still terminating
    assert (why["held_at"], why["held_by"]) == ("PostFilter",
                                                "DefaultPreemption, waiting for its victims")
    assert [r["reason"] for r in why["reasons"]] == ["GangPreempting"]
    assert [v["pod"] for v in why["reasons"][0]["facts"]["victims"]] == ["low/v-0", "low/v-1"]
    assert why["unblock"][0].endswith("; this pod is nominated to node-a")


def test_explain_after_wasted_preemption_tells_both():
    from streams.core.explain import why_pod
    why = why_pod(folded(wasted_recs()), "ns/g-2")
    assert [r["reason"] for r in why["reasons"]] == ["GangUnschedulable", "GangPreemptionWasted"]


def test_describe_gang_shows_the_preemption():
    from streams.cli.query import format_gang
    from streams.query.answers import gang_detail
    text = format_gang(gang_detail(folded(in_progress_then_bound()[:20])))
    t1 = format_time(at(1.0))
    line = [ln for ln in text.splitlines() if ln.startswith("Preemption:")][0]
    assert line.split(":", 1)[1].strip().startswith(
        f"low/v-0 on node-a for ns/g-0 since {t1}, terminating (grace period 30s); ")
    assert line.endswith("; the scheduler's latest word: victims-terminating; nominated: "
                         "g-0 on node-a, g-1 on node-b")
    assert "GangPreempting" in text and "GangUnschedulable" not in text


def test_a_late_preempted_event_for_a_scheduled_gang_changes_nothing():
    recs = in_progress_then_bound() + [preempted("v-2", "node-a", "g-0", 40.0)]
    store: dict = {}
    out = fold_records(recs, store=store)
    assert store["ns/g"].preemption is None
    assert [d["reason"] for d in diagnostics(out)] == ["GangPreempting", "GangScheduled"]


def test_a_late_preempted_event_tells_its_own_time_and_settles_on_the_folds_clock():
    """The Preempted Events written 40 s late (eventTime t=1.0/1.1, seen at t=41/41.1):
    GangPreempting at 42.1 (1 s after the last seen, the fold's clock) tells t=1.0/1.1."""
    recs = [member("g-0", 0), member("g-1", 0)]
    recs += [failed("g-0", 0.5 + i, i, TERMINATING, "victims-terminating") for i in range(40)]
    recs += [preempted("v-0", "node-a", "g-0", 41.0)._replace(event_at=at(1.0)),
             preempted("v-1", "node-b", "g-1", 41.1)._replace(event_at=at(1.1)),
             Tick(at(43))]
    out = diagnostics(fold_records(recs))
    assert [(d["reason"], d["observed_at"]) for d in out] == [
        ("GangPreempting", format_time(at(42.1)))]
    assert [v["preempted_at"] for v in out[0]["facts"]["victims"]] == [
        format_time(at(1.0)), format_time(at(1.1))]


def test_a_preemption_that_cannot_make_the_gang_fit_is_not_told_as_one_it_waits_for():
    """Rule PR8 (a new user's run: 3 x 1 GPU at high priority on 2 GPUs held by two
    low-priority pods). Gang ns/g of minMember 3, each member 1 GPU; the cluster has 2 GPUs
    allocatable (ROOM_0): 3000 milli-GPUs to place against 2000 the cluster could ever free,
    so no preemption can make it fit (capacity.cannot_fit). The scheduler still preempts v-0
    and v-1 (grace 30 s) at t=1.0/1.1; they are gone at t=31/31.2; a failure with no victims
    left at t=32. No ``GangPreempting`` ("the gang binds once the victims are gone" would be
    false); the episode's ``GangUnschedulable`` is told at its settle time (t=0.5 + 10 s)
    while the victims terminate, and ``GangPreemptionWasted`` once they are gone (then the
    episode's new facts: g-2 failed too)."""
    recs: list = [member(f"g-{i}", 0, min_available="3") for i in range(3)]
    recs += [failed("g-0", 0.5, 1, GPU, None)]
    recs += [preempted("v-0", "node-a", "g-0", 1.0), preempted("v-1", "node-b", "g-1", 1.1)]
    for i in range(2, 30):
        recs.append(failed("g-0" if i % 2 else "g-1", 1.5 + i, i, TERMINATING,
                           "victims-terminating"))
    midway = folded(recs[:20])
    from streams.core.explain import findings

    assert [f["reason"] for f in findings(midway)] == ["GangUnschedulable"]
    recs += [preempted("v-0", "node-a", "g-0", 31.0, type_="Deleted"),
             preempted("v-1", "node-b", "g-1", 31.2, type_="Deleted"),
             failed("g-2", 32, 40, NO_VICTIMS, "no-victims")]
    out = diagnostics(fold_records(recs, 60))
    assert [(d["reason"], d["observed_at"]) for d in out] == [
        ("GangUnschedulable", format_time(at(10.5))),
        ("GangPreemptionWasted", format_time(at(32))),
        ("GangUnschedulable", format_time(at(32)))]  # g-2 now among the unfit: new facts
    assert "preemption cannot make room" in out[0]["message"] or \
        "freeing capacity cannot make room" in out[0]["message"], out[0]["message"]
