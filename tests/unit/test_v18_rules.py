"""Koordinator v1.8.0 rules that changed since the releases gangstate was first written from,
one named scenario each, with values worked out from the source.

K = ``pkg/scheduler/plugins/coscheduling/`` of ``github.com/koordinator-sh/koordinator@v1.8.0``,
KS = ``pkg/scheduler/`` of kubernetes v1.35.2. Rule ids are those of docs/koordinator-rules.md.
Times are seconds after ``tests.fixtures.builders.T0``; the grace period is 10 s.
"""

from __future__ import annotations

from typing import Any

from streams.core.decide import hold, skips_gang_checks
from streams.core.explain import why_pod
from streams.core.spec import RawSettings, parse_spec
from streams.core.state import from_wire, summary, to_wire
from streams.core.timefmt import format_time
from tests.fixtures.builders import at, attempt, cycle, fold_records, pod, podgroup

GPU_FIT = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def run(records: list[Any], end: float | None = None) -> tuple[list[dict[str, Any]], dict]:
    store: dict = {}
    outputs = fold_records(records, end, store=store)
    for state in store.values():  # every state survives the table's wire form
        assert from_wire(to_wire(state)) == state
    return outputs, store


def told(outputs: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(o["observed_at"], o["reason"], o["facts"]) for o in outputs]


# -- S19, T3: the waiting time ----------------------------------------------------------------

def test_s19_a_fractional_waiting_time_is_used_exactly():
    """K core/gang.go:156-165 keeps the parsed time.Duration: ``1500ms`` is 1.5 s. p0 waits at
    Permit from t=1, so its GangPermitTimeout is due at t=2.5 (not t=2)."""
    spec, fallbacks = parse_spec("ns/g", RawSettings("2", waiting_time="1500ms"), "Pod/p0")
    assert (spec.waiting_micros, spec.waiting_seconds, fallbacks) == (1_500_000, 1.5, ())
    outputs, _ = run([pod("p0", 0, waiting_time="1500ms"), pod("p1", 0, waiting_time="1500ms"),
                      cycle("p0", 1, 1, "Permit", "Wait")], 10)
    assert told(outputs) == [(format_time(at(2.5)), "GangPermitTimeout",
                              {"waiting": 1, "min_member": 2, "waiting_seconds": 1.5})]
    assert outputs[0]["message"] == (
        "gang ns/g: 1 member waited at Permit for the full waiting time of 1.5s without "
        "minMember 2 ready together; they are rejected and retried")


def test_t3_kube_scheduler_caps_a_permit_wait_at_15_minutes():
    """Koordinator keeps ``1h`` (K core/gang.go:156-165), but kube-scheduler caps every Permit
    wait at 15 min (KS framework/runtime/framework.go:52,1708-1711): the timeout comes 900 s
    after the wait began (t=1 -> t=901), and the cap is told as a silent fallback."""
    outputs, _ = run([pod("p0", 0, waiting_time="1h"), pod("p1", 0, waiting_time="1h"),
                      cycle("p0", 1, 1, "Permit", "Wait")], 1000)
    invalid = {"field": "waiting-time", "value": "1h", "effective": "900s"}
    assert told(outputs) == [
        (format_time(at(0)), "GangSpecInvalid", invalid),   # to p0
        (format_time(at(0)), "GangSpecInvalid", invalid),   # again to p1, which joined later
        (format_time(at(901)), "GangPermitTimeout",
         {"waiting": 1, "min_member": 2, "waiting_seconds": 900})]
    assert outputs[0]["message"] == (
        "gang ns/g: waiting-time '1h' is longer than kube-scheduler lets a pod wait at Permit; "
        "members wait at most 900s (15 minutes)")
    # 15m exactly is no fallback; a PodGroup's scheduleTimeoutSeconds is capped the same way
    assert parse_spec("ns/g", RawSettings("2", waiting_time="15m"), "Pod/p0")[1] == ()
    spec, fallbacks = parse_spec("ns/g", RawSettings("2", waiting_time="3600s"), "PodGroup/g",
                                 from_podgroup=True)
    assert (spec.permit_wait_seconds, [tuple(f) for f in map(lambda f: (f.field, f.value,
                                                                        f.effective),
                                                          fallbacks)]) == (
        900, [("scheduleTimeoutSeconds", "3600", "900s")])


# -- S31: updates of terminated pods ----------------------------------------------------------

def test_s31_an_update_of_a_terminated_pod_cannot_initialise_the_gang():
    """K core/gang_cache.go:182-184: onPodUpdate returns for a Succeeded or Failed pod. p0 was
    added without min-available (not initialised); its update that adds the annotation comes
    when it has failed: the gang stays uninitialised. The same update of a running pod
    initialises it."""
    base = [pod("p0", 0, min_available=None)]
    _, store = run(base + [pod("p0", 5, rv="2", type_="MODIFIED", min_available="1",
                                phase="Failed")])
    assert (store["ns/g"].spec, store["ns/g"].phase) == (None, "NotInitialized")
    _, store = run(base + [pod("p0", 5, rv="2", type_="MODIFIED", min_available="1",
                                phase="Running")])
    assert store["ns/g"].spec.min_member == 1


def test_s31_a_terminated_update_does_not_make_the_group_once_satisfied():
    """A pod first seen bound in an update that also reports it Succeeded is ignored by the
    gang cache (K core/gang_cache.go:182-184), so it never reaches addBoundPod
    (core/gang.go:489-507): the group is not once satisfied and a new member is still held.
    p0 pending at t=0 starts a hold that ends at t=5 (nothing pending, no warning yet); p1 at
    t=6 starts another, warned at t=16 with 2 children (a finished pod is still a child, M1:
    K core/gang.go:396-415)."""
    records = [pod("p0", 0, min_available="3"),
               pod("p0", 5, rv="2", type_="MODIFIED", min_available="3", node="n1",
                   phase="Succeeded"),
               pod("p1", 6, min_available="3")]
    outputs, store = run(records, 20)
    assert not store["ns/g"].once_satisfied
    assert told(outputs) == [(format_time(at(16)), "GangMembersInsufficient",
                              {"members": 2, "min_member": 3, "total_number": 3})]


# -- M2, P4: once satisfied -------------------------------------------------------------------

def _replaced(policy: str | None) -> list[Any]:
    """Gang of minMember 3: w0-w2 bound at t=5; w1 and w2 deleted at t=20; a replacement w3
    created at t=30 (2 children < 3)."""
    extra = {} if policy is None else {"match_policy": policy}
    recs = [pod(f"w{i}", 0, min_available="3", **extra) for i in range(3)]
    recs += [pod(f"w{i}", 5, rv="2", type_="MODIFIED", min_available="3", node=f"n{i}",
                 phase="Running", **extra) for i in range(3)]
    recs += [pod(f"w{i}", 20, rv="3", type_="DELETED", min_available="3", node=f"n{i}",
                 phase="Running", **extra) for i in (1, 2)]
    return recs + [pod("w3", 30, min_available="3", **extra)]


def test_m2_p4_a_replacement_pod_of_a_once_satisfied_gang_is_not_held():
    """With the default match policy (once-satisfied), the binds at t=5 make the group
    OnceResourceSatisfied (K core/gang.go:489-507), and PreEnqueue passes every later pod
    without the basic check (K core/core.go:213-216): no GangMembersInsufficient for w3,
    although the gang has 2 of minMember 3 pods."""
    outputs, store = run(_replaced(None), 100)
    state = store["ns/g"]
    assert (state.once_satisfied, skips_gang_checks(state), hold(state)) == (True, True, None)
    # the two deletions are told as a loss 5 s later (streams.core.lost), not as a hold
    assert told(outputs)[1:] == [(format_time(at(25)), "GangMembersLost", {
        "lost": {"w1": "deleted", "w2": "deleted"}, "remaining": 1, "min_member": 3,
        "match_policy": "once-satisfied"})]
    why = why_pod(state, "ns/w3")
    assert (why["held_at"], [r["reason"] for r in why["reasons"]]) == (None, ["GangOnceSatisfied"])
    assert summary(state)["once_satisfied"] is True


def test_m2_p4_with_match_policy_waiting_and_running_the_replacement_is_held():
    """Match policy waiting-and-running never skips the checks (K core/core.go:213-216 asks
    for once-satisfied): w3 is held at PreEnqueue, warned at t=40 (30 + 10 s grace)."""
    outputs, store = run(_replaced("waiting-and-running"), 100)
    assert store["ns/g"].once_satisfied and not skips_gang_checks(store["ns/g"])
    assert told(outputs)[1:] == [
        (format_time(at(25)), "GangMembersLost", {
            "lost": {"w1": "deleted", "w2": "deleted"}, "remaining": 1, "min_member": 3,
            "match_policy": "waiting-and-running"}),
        (format_time(at(40)), "GangMembersInsufficient",
         {"members": 2, "min_member": 3, "total_number": 3})]


def test_m2_p4_a_once_satisfied_gang_has_no_gang_failure_episode():
    """After the group was once satisfied, AfterPostFilter rejects no gang (K core/core.go:
    372-374) and BeforePreFilter opens no gang scheduling context (core/core.go:301-304): a
    replacement that does not fit fails on its own; no GangUnschedulable, and explain gives the
    pod's own fit error."""
    records = _replaced(None) + [
        attempt("w3", 31 + i, "ev-w3", "Filter", "Unschedulable", count=i + 1,
                reason="Insufficient nvidia.com/gpu", culprit="w3", fit_error=GPU_FIT)
        for i in range(20)]
    outputs, store = run(records, 100)
    assert [o["reason"] for o in outputs] == ["GangScheduled", "GangMembersLost"]
    state = store["ns/g"]
    assert state.episode is None
    why = why_pod(state, "ns/w3")
    assert (why["held_at"], [r["reason"] for r in why["reasons"]]) == (
        "Filter", ["GangOnceSatisfied", "PodUnschedulable"])
    assert why["unblock"] == ["free capacity for this pod (Insufficient nvidia.com/gpu); no "
                              "other member has to fit with it"]


def test_m2_a_deleted_gang_forgets_that_it_was_once_satisfied():
    """An annotation gang is deleted with its last pod (K core/gang.go:298-302) and its
    GangGroupInfo with it (core/gang_cache.go:206-220): a gang of the same name starts again
    not once satisfied, and a lone new pod of minMember 2 is held."""
    records = [pod("p0", 0, min_available="1"),
               pod("p0", 1, rv="2", type_="MODIFIED", min_available="1", node="n1"),
               pod("p0", 5, rv="3", type_="DELETED", min_available="1", node="n1"),
               pod("q0", 10, min_available="2")]
    outputs, store = run(records, 30)
    assert not store["ns/g"].once_satisfied
    assert told(outputs)[-1] == (format_time(at(20)), "GangMembersInsufficient",
                                 {"members": 1, "min_member": 2, "total_number": 2})


def test_m6_a_late_failure_of_a_bound_member_is_not_its_last_cycle():
    """kube-scheduler never attempts a pod with ``spec.nodeName`` (KS eventhandlers.go:142-145,
    166-178,469-472: an assigned pod goes to the cache, not the queue), and its Events are
    written through a rate-limited recorder: a FailedScheduling Event seen after the bind tells
    an attempt made before it. s2/hi (minMember 2): hi-0 and hi-1 bound on n1 at t=1 (the
    Scheduled Events, then the pods with nodeName n1, Running); at t=3 a GangGroupRejected
    Event of hi-0 (hi-1 named the culprit) arrives. hi-0's last cycle stays Bind/Bound
    (Scheduled); the attempt still counts in the storm window (1 failed attempt in the last
    minute at t=3); the group is once satisfied with the default match policy, so no failure
    episode (P4) and nothing more is told than GangScheduled."""
    gang = "s2/hi"
    records: list[Any] = []
    for name in ("hi-0", "hi-1"):
        records += [pod(name, 0, gang=gang)]
    for name in ("hi-0", "hi-1"):
        records += [attempt(name, 1, f"ev-{name}", "Bind", "Bound", reason="Scheduled",
                            gang=gang),
                    pod(name, 1, rv="2", type_="MODIFIED", gang=gang, node="n1",
                        phase="Running")]
    records += [attempt("hi-0", 3, "ev-late", "PreFilter", "UnschedulableAndUnresolvable",
                        reason="GangGroupRejected", gang=gang, culprit="hi-1",
                        fit_error=GPU_FIT)]
    outputs, store = run(records, 30)
    state = store[gang]
    assert [o["reason"] for o in outputs] == ["GangScheduled"]
    bound = {"uid": "uid-hi-0", "phase": "Running", "node": "n1", "resource_version": "2",
             "stage": "Bind", "status": "Bound", "reason": "Scheduled", "cycle": None,
             "gates": [], "terminating": False}
    shown = summary(state)
    assert shown["pods"]["s2/hi-0"] == bound
    assert shown["pods"]["s2/hi-1"] == {**bound, "uid": "uid-hi-1"}
    assert (shown["bound"], shown["failing"], shown["failed_attempts_per_minute"]) == (2, None, 1)
    assert why_pod(state, "s2/hi-0")["last_cycle"] == {
        "cycle": None, "stage": "Bind", "status": "Bound", "reason": "Scheduled"}
    # the same record for a member not bound yet is its last cycle (as before)
    _, pending = run(records[:2] + records[-1:], 30)
    late = pending[gang].members["uid-hi-0"]
    assert (late.stage, late.status, late.reason) == (
        "PreFilter", "UnschedulableAndUnresolvable", "GangGroupRejected")


def test_m6_a_late_gang_rejection_of_a_once_satisfied_group_is_not_a_last_cycle():
    """Found on the real scheduler (cluster scenario ``live-lowered``): a group once satisfied
    with the default match policy skips every gang check (P4), so a GangGroupRejected record
    seen after that tells an attempt made before it (its Event's series written late). s2/g
    (minMember 2): g-0, g-1 bound at t=1; g-2's own failure at t=2 (Insufficient
    nvidia.com/gpu); at t=3 a late GangGroupRejected of g-2 (g-1 named): g-2's last cycle stays
    its own failure, and explain keeps saying it fails on its own. A group not yet satisfied
    still takes the rejection as g-2's last cycle."""
    gang = "s2/g"
    records: list[Any] = [pod(n, 0, gang=gang) for n in ("g-0", "g-1", "g-2")]
    for name in ("g-0", "g-1"):
        records += [attempt(name, 1, f"ev-{name}", "Bind", "Bound", reason="Scheduled",
                            gang=gang),
                    pod(name, 1, rv="2", type_="MODIFIED", gang=gang, node="n1",
                        phase="Running")]
    own = attempt("g-2", 2, "ev-own", "Filter", "Unschedulable",
                  reason="Insufficient nvidia.com/gpu", gang=gang, culprit="g-2",
                  fit_error=GPU_FIT)
    late = attempt("g-2", 3, "ev-late", "PreFilter", "UnschedulableAndUnresolvable",
                   reason="GangGroupRejected", gang=gang, culprit="g-1", fit_error=GPU_FIT)
    _, store = run(records + [own, late], 30)
    m = store[gang].members["uid-g-2"]
    assert (m.stage, m.status, m.reason) == ("Filter", "Unschedulable",
                                             "Insufficient nvidia.com/gpu")
    why = why_pod(store[gang], "s2/g-2")
    assert why["held_at"] == "Filter"
    assert [r["reason"] for r in why["reasons"]] == ["GangOnceSatisfied", "PodUnschedulable"]
    assert why["reasons"][1]["facts"] == {"reason": "Insufficient nvidia.com/gpu"}
    # before any member is bound the group is not once satisfied: the rejection is current
    _, early = run(records[:3] + [own, late], 30)
    m = early[gang].members["uid-g-2"]
    assert (m.stage, m.reason) == ("PreFilter", "GangGroupRejected")


def test_m7_a_member_rejected_with_its_gang_waits_for_its_retry():
    """s2/g (minMember 2, lowered from 3 as in the cluster scenario ``live-lowered``): g-2 is
    rejected at Permit with its gang (GangGroupRejected, t=1); g-0 and g-1 bind at t=2, the
    group is once satisfied. g-2's last attempt is its gang's, from before: Coscheduling
    registers no cluster event (K coscheduling.go:109-112), so kube-scheduler retries it on
    another plugin's event or within 300 s (KS scheduling_queue.go:66). explain says so: held
    at SchedulingQueue, WaitingForRetry with that reason and stage, nothing to do for the gang;
    never "no gang condition"."""
    gang = "s2/g"
    records: list[Any] = [pod(n, 0, gang=gang) for n in ("g-0", "g-1", "g-2")]
    records += [attempt("g-2", 1, "ev-rej", "Permit", "Rejected", reason="GangGroupRejected",
                        gang=gang, culprit="g-1", fit_error=GPU_FIT)]
    for name in ("g-0", "g-1"):
        records += [attempt(name, 2, f"ev-{name}", "Bind", "Bound", reason="Scheduled",
                            gang=gang),
                    pod(name, 2, rv="2", type_="MODIFIED", gang=gang, node="n1",
                        phase="Running")]
    _, store = run(records, 30)
    why = why_pod(store[gang], "s2/g-2")
    assert (why["held_at"], why["held_by"]) == ("SchedulingQueue",
                                                "kube-scheduler's unschedulable pods")
    assert [r["reason"] for r in why["reasons"]] == ["GangOnceSatisfied", "WaitingForRetry"]
    assert why["reasons"][1]["facts"] == {"reason": "GangGroupRejected", "stage": "Permit",
                                          "at_most_seconds": 300}
    assert why["reasons"][1]["message"] == (
        "its last attempt was rejected with its gang (GangGroupRejected at Permit) before the "
        "gang was once satisfied; kube-scheduler retries it on its own when a cluster event "
        "moves it out of its unschedulable pods, or after at most 300 s there")
    assert why["unblock"] == ["nothing to do for the gang: the pod is retried on its own; if "
                              "it does not fit then, its own fit error tells what it needs"]


# -- M5: a PodGroup delete drops the gang with its children ----------------------------------

def test_m5_pods_left_by_a_deleted_podgroup_are_told_why_they_wait():
    """PodGroup g (minMember 2) with pending p0, p1; deleted at t=20 (K core/gang_cache.go:
    295-310 removes the gang with its children): the pods are refused with ``can't find gang``
    (core/core.go:202-206), warned at t=30. Created again at t=40: a gang with no children
    (core/gang_cache.go:225-235), so PreEnqueue finds 0 of 2 (child pod not collect enough);
    the new facts are told at t=40 (the refresh interval after t=30 has passed)."""
    records = [podgroup(0, 2), pod("p0", 0, waits_for_podgroup=True, min_available=None),
               pod("p1", 1, waits_for_podgroup=True, min_available=None),
               podgroup(20, 2, rv="2", type_="DELETED")]
    outputs, store = run(records, 35)
    assert told(outputs) == [(format_time(at(30)), "GangNotInitialized",
                              {"members": 0, "orphaned": 2, "podgroup_deleted": "g"})]
    assert outputs[0]["message"] == (
        "gang ns/g was removed from the scheduler's gang cache with its PodGroup g; its 2 "
        "remaining pods are held at PreEnqueue (can't find gang) until the PodGroup exists "
        "again and each pod is created again")
    assert [i["name"] for i in outputs[0]["involved"]] == ["p0", "p1"]
    why = why_pod(store["ns/g"], "ns/p1")
    assert (why["member"], why["orphan"], why["held_at"]) == (False, True, "PreEnqueue")
    assert why["unblock"] == [
        "create PodGroup ns/g again (scheduling.sigs.k8s.io/v1alpha1, with spec.minMember), "
        "then delete the gang's pods so that their controller creates them again: the "
        "scheduler forgot them with the old PodGroup and runs PreEnqueue again only for a pod "
        "being created"]

    again, store = run(records + [podgroup(40, 2, rv="3", uid="pg-2")], 45)
    assert told(again)[1:] == [(format_time(at(40)), "GangMembersInsufficient",
                                {"members": 0, "min_member": 2, "total_number": 2,
                                 "orphaned": 2, "podgroup_deleted": None})]
    # each pod's next event brings it back: with both, the gang has its 2 children
    back, store = run(records + [podgroup(40, 2, rv="3", uid="pg-2")] + [
        pod(name, 50, rv="2", type_="MODIFIED", waits_for_podgroup=True, min_available=None)
        for name in ("p0", "p1")], 70)
    assert (len(store["ns/g"].members), dict(store["ns/g"].orphans), hold(store["ns/g"])) == (
        2, {}, None)
    assert told(back)[-1] == (format_time(at(50)), "GangMembersSatisfied",
                              {"members": 2, "min_member": 2})


# -- P6: a gang whose groups omit it ------------------------------------------------------------

def test_p6_the_gangs_own_count_is_not_checked_when_its_groups_omit_it():
    """Gang a (minMember 3, one pod) lists only gang b in its groups; K core/core.go:247-264
    checks the gangs of that list, so a's own shortfall holds nothing: a is told only that its
    list omits it (S25), and b, complete, does not hold it either."""
    outputs, store = run([pod("a-0", 0, gang="ns/a", min_available="3", groups='["ns/b"]'),
                          pod("b-0", 0, gang="ns/b", min_available="1", groups='["ns/b"]')], 60)
    assert told(outputs) == [(format_time(at(0)), "GangSpecInvalid",
                              {"field": "groups", "value": '["ns/b"]',
                               "effective": '["ns/b"]'})]
    assert hold(store["ns/a"]) is None


# -- P7, P8: the representative gate ----------------------------------------------------------

def test_p8_explain_names_the_representative_the_others_wait_behind():
    """One pod per gang group passes PreEnqueue (K core/core.go:240, core/gang.go:572-586);
    the others are refused with ``representative pod %s of gangGroupID %s already exists``.
    The scheduler shim's record names p0 the representative; p0 is gated, so it does not move
    (KS framework/plugins/schedulinggates/scheduling_gates.go:48-57)."""
    records = [pod("p0", 0, min_available="1", gates=("example.com/quota",)),
               pod("p1", 0, min_available="1"),
               cycle("p0", 1, 7, "PreEnqueue", "Gated", reason="SchedulingGates",
                     representative="ns/p0")]
    _, store = run(records, 30)
    why = why_pod(store["ns/g"], "ns/p1")
    assert (why["held_at"], why["held_by"]) == (
        "PreEnqueue", "Coscheduling, behind the representative ns/p0")
    assert [r["message"] for r in why["reasons"]] == [
        "koord-scheduler v1.8.0 lets one pod of gang group ns/g into its scheduling queue, the "
        "representative ns/p0; this pod is refused at PreEnqueue (representative pod ns/p0 of "
        "gangGroupID ns/g already exists) until the representative's round hands it out; it "
        "waits for its scheduling gates (example.com/quota)"]
    rep = why_pod(store["ns/g"], "ns/p0")
    assert rep["held_by"] == "schedulingGates of ns/p0"


def test_p7_a_member_not_attempted_yet_is_told_so_without_naming_a_representative():
    """From Events alone the representative is unknown (no Event names it): a pending member
    of a gang that passes its checks and has no attempt is 'not yet attempted'
    (K core/core.go:228-238 during a round; core/gang.go:572-586 before it)."""
    _, store = run([pod("p0", 0), pod("p1", 0)], 30)
    why = why_pod(store["ns/g"], "ns/p1")
    assert (why["held_at"], [r["reason"] for r in why["reasons"]]) == (None, ["NotYetAttempted"])


def test_m2_the_flag_belongs_to_the_gang_group_and_outlives_a_deleted_gang_of_it():
    """Gangs a (minMember 1) and b (minMember 2) form one gang group; all three pods are bound
    at t=5, so the group is OnceResourceSatisfied (K core/ganggroup.go:29-32: one flag on the
    GangGroupInfo all gangs of the group share). b's two pods are deleted at t=20: gang b is
    deleted with its last pod (K core/gang.go:298-302) but the GangGroupInfo stays while a
    lives (K core/gang_cache.go:206-220). b's replacement b-2 at t=30 (1 of minMember 2) joins
    a once-satisfied group: not held."""
    groups = '["ns/a","ns/b"]'
    a = {"gang": "ns/a", "min_available": "1", "groups": groups}
    b = {"gang": "ns/b", "min_available": "2", "groups": groups}
    records = [pod("a-0", 0, **a), pod("b-0", 0, **b), pod("b-1", 0, **b)]
    records += [pod(name, 5, rv="2", type_="MODIFIED", node="n1", phase="Running", **kind)
                for name, kind in (("a-0", a), ("b-0", b), ("b-1", b))]
    records += [pod(name, 20, rv="3", type_="DELETED", node="n1", phase="Running", **b)
                for name in ("b-0", "b-1")]
    records += [pod("b-2", 30, **b)]
    outputs, store = run(records, 60)
    assert store["ns/a"].once_satisfied and store["ns/b"].once_satisfied
    assert hold(store["ns/b"]) is None
    assert [o["reason"] for o in outputs if o["schema"] == "gangstate.diagnostic/v1"
            and o["observed_at"] > format_time(at(20))] == []


# -- stranded at PreEnqueue: refused while held, never retried ---------------------------------

def _late_podgroup(attempts: list[Any]) -> list[Any]:
    """p0-p2 carry the label of PodGroup g before it exists (not initialised: refused at
    PreEnqueue from t=0, 1, 2, K core/core.go:209-212); PodGroup g (minMember 2) at t=10: the
    hold ends, the gang cache activates one child (K core/gang_cache.go:236-249), its round
    hands out members until 2 wait at Permit and the group is allowed (the context is cleared,
    K core/core.go:192-194)."""
    recs = [pod(f"p{i}", i, waits_for_podgroup=True, min_available=None) for i in range(3)]
    return recs + [podgroup(10, 2)] + attempts


def _bound(name: str, t: float) -> list[Any]:
    return [attempt(name, t, f"ev-{name}", "Bind", "Bound", reason="Scheduled"),
            pod(name, t, rv="2", type_="MODIFIED", node="n1", phase="Pending",
                waits_for_podgroup=True, min_available=None)]


def test_a_member_refused_while_held_and_left_out_of_the_round_is_stranded():
    """The real scheduler bound 2 of the 3 and never attempted the third
    (tests/cluster/test_cluster_v18.py): nothing re-runs PreEnqueue for it (Coscheduling
    registers no events, K coscheduling.go:109-112; KS backend/queue/scheduling_queue.go:
    1225-1229). Told 120 s after the first attempt since the hold ended (t=11 -> t=131),
    naming p2 only."""
    outputs, store = run(_late_podgroup(_bound("p0", 11) + _bound("p1", 11.5)), 200)
    stranded = [o for o in outputs if o["reason"] == "GangMembersStranded"]
    assert told(stranded) == [(format_time(at(131)), "GangMembersStranded",
                               {"stranded": ["p2"], "after_seconds": 121})]
    assert [i["name"] for i in stranded[0]["involved"]] == ["p2"]
    assert stranded[0]["message"] == (
        "gang ns/g: p2 was refused at PreEnqueue and koord-scheduler will not retry it: it runs "
        "PreEnqueue again only for a pod being created, and no round of the gang group has "
        "handed it out in 121s; delete it so that its controller creates it again (or create "
        "it again yourself: a pod without a controller is created again by no one)")
    why = why_pod(store["ns/g"], "ns/p2")
    assert (why["held_at"], [r["reason"] for r in why["reasons"]]) == (
        "PreEnqueue", ["GangMembersStranded"])


def test_before_it_is_told_stranded_explain_says_the_member_was_refused_not_that_nothing_holds_it(
        ) -> None:
    """The same gang at t=60, before the warning (t=131): the gang reads Scheduled (2 of 2
    bound, once satisfied), but p2 is not free to go: refused at PreEnqueue at its creation
    (t=2, no Event) and left out of the round that ran at t=11 (p0's attempt). explain says
    so, held at PreEnqueue, instead of 'no gang condition holds it' and GangOnceSatisfied
    (a new user's run saw that during the wait)."""
    _, store = run(_late_podgroup(_bound("p0", 11) + _bound("p1", 11.5)), 60)
    why = why_pod(store["ns/g"], "ns/p2")
    assert (why["gang_phase"], why["held_at"], why["held_by"]) == (
        "Scheduled", "PreEnqueue", "Coscheduling, refused earlier")
    assert [(r["reason"], r["facts"]) for r in why["reasons"]] == [
        ("RefusedAtPreEnqueue", {"refused_at": format_time(at(2)), "gang_group": "ns/g"})]
    assert why["reasons"][0]["message"] == (
        f"the pod was refused at PreEnqueue at {format_time(at(2))} (no Event) and not "
        f"attempted since: it waits among the unschedulable pods until a round of gang group "
        f"ns/g hands it out, which no cluster event triggers; koord-scheduler runs PreEnqueue "
        f"again otherwise only for a pod being created")
    assert why["unblock"] == [
        f"a round of gang group ns/g ran at {format_time(at(11))} and did not hand it out: "
        f"unless a later one does, gangstate tells GangMembersStranded; to move it now, "
        f"delete ns/p2 so that its controller creates it again (or create it again yourself): "
        f"koord-scheduler runs PreEnqueue again only for a pod being created"]
    # the members bound are not held
    assert why_pod(store["ns/g"], "ns/p0")["held_at"] is None


def test_with_a_shim_the_stranded_member_is_activated():
    """Rule ST5: the same gang with a scheduler shim reporting it (its PreEnqueue refusal of p2
    at t=2, ``gang has not init``): at t=131 ``GangMembersStranded`` says gangstate has the shim
    activate p2, and ``ActivateGang`` (reason ``MembersStranded``, epoch 1, no
    compare-and-swap) follows it; ``explain`` says nothing is to be done (seen on the real
    scheduler: tests/cluster/test_cluster_shim.py, the activated pod is bound)."""
    def by_shim(rec: Any, n: int) -> Any:  # the same attempt as the shim reports it
        return cycle(rec.pod.split("/")[1], (rec.at - at(0)) / 1e6, n, rec.stage, rec.status,
                     reason=rec.reason)._replace(shim="shim-a") if hasattr(rec, "stage") else rec

    refused = cycle("p2", 2, 1, "PreEnqueue", "UnschedulableAndUnresolvable",
                    reason="gang has not init")._replace(shim="shim-a")
    recs = _late_podgroup([by_shim(r, 5) for r in _bound("p0", 11) + _bound("p1", 11.5)])
    recs.insert(3, refused)
    outputs, store = run(recs, 200)
    stranded = [o for o in outputs if o.get("reason") == "GangMembersStranded"]
    assert told(stranded) == [(format_time(at(131)), "GangMembersStranded",
                               {"stranded": ["p2"], "after_seconds": 121, "activated": True})]
    assert stranded[0]["message"].endswith(
        "handed it out in 121s; gangstate asked the scheduler shim to activate it (ActivateGang)")
    (cmd,) = [o for o in outputs if o["schema"] == "gangstate.command/v1"]
    assert {k: cmd[k] for k in ("type", "reason", "epoch", "expected_representative",
                                "issued_at")} == {
        "type": "ActivateGang", "reason": "MembersStranded", "epoch": 1,
        "expected_representative": None, "issued_at": format_time(at(131))}
    why = why_pod(store["ns/g"], "ns/p2")
    assert why["unblock"][0].startswith("nothing to do: gangstate asked the scheduler shim to "
                                        "activate it (ActivateGang)")


def test_members_the_round_handed_out_are_not_stranded():
    """The same with PodGroup minMember 3: the round hands out all three (K core/core.go:
    164-179) and all are bound: nothing stranded."""
    recs = [pod(f"p{i}", i, waits_for_podgroup=True, min_available=None) for i in range(3)]
    recs += [podgroup(10, 3)] + _bound("p0", 11) + _bound("p1", 11.5) + _bound("p2", 12)
    outputs, store = run(recs, 300)
    assert "GangMembersStranded" not in [o["reason"] for o in outputs]
    assert store["ns/g"].n_refused == 0


def test_without_any_attempt_nothing_is_called_stranded():
    """No attempt at all after the hold ended (the scheduler down, or its queue long): no
    evidence that a round left anyone out, so nothing is said."""
    outputs, _ = run(_late_podgroup([]), 600)
    assert "GangMembersStranded" not in [o["reason"] for o in outputs]


def test_a_gang_outside_its_own_group_is_stranded_without_a_round():
    """a-0 (groups ["ns/b"]) was refused while gang b did not exist (K core/core.go:252-255);
    b-0 at t=20 ends the hold. Rounds of group [b] hand out b's pods only (K core/core.go:
    164-179), so a-0 is stranded: told 120 s after the hold ended (the real scheduler:
    tests/cluster/test_cluster_v18.py)."""
    outputs, _ = run([pod("a-0", 0, gang="ns/a", min_available="1", groups='["ns/b"]'),
                      pod("b-0", 20, gang="ns/b", min_available="1")], 200)
    assert [(t, f) for t, r, f in told(outputs) if r == "GangMembersStranded"] == [
        (format_time(at(140)), {"stranded": ["a-0"], "after_seconds": 120})]


def test_a_member_left_out_when_the_round_ended_in_success_is_stranded():
    """Three pods of min-available 2 created at once: t-1 opened the round, NextPod gave t-0,
    Permit allowed the group, and t-2, refused during that round (``gangGroup ... is scheduling
    and this pod has not been attempted``, K core/core.go:228-238), stayed Pending with no
    Event (seen on the real scheduler, docs/cluster.md). The first bind (t=1) ends the round
    (K core/core.go:192-194): t-2 is told 120 s later. (t-0 alone was a gang of 1 < 2 for a
    moment: that hold ended at t=0, so the count runs from there: 121 s.)"""
    recs = [pod(f"t-{i}", 0, min_available="2") for i in range(3)]
    recs += _bound("t-1", 1)[:1] + [pod("t-1", 1, rv="2", type_="MODIFIED", node="n1",
                                        min_available="2")]
    recs += _bound("t-0", 1.2)[:1] + [pod("t-0", 1.2, rv="2", type_="MODIFIED", node="n1",
                                          min_available="2")]
    outputs, _ = run(recs, 300)
    assert [(t, f) for t, r, f in told(outputs) if r == "GangMembersStranded"] == [
        (format_time(at(121)), {"stranded": ["t-2"], "after_seconds": 121})]


# -- commands on v1.8: the gated representative -------------------------------------------------

def _gated_rep_trace(shim: str) -> list[Any]:
    """u-0 (min-available 2) alone, refused; g with a scheduling gate completes the gang at
    t=1 (1 of 2 free of gates: GangMemberGated); u-1 at t=2 (2 of 2 free); at t=3 a record
    names g the group's representative (the shim's, when ``shim`` is set)."""
    gate = ("example.com/quota",)
    return [pod("u-0", 0), pod("g", 1, gates=gate), pod("u-1", 2),
            cycle("u-1", 3, 40, "PreEnqueue", "UnschedulableAndUnresolvable",
                  reason="RepresentativeExists", representative="ns/g")._replace(shim=shim)]


def test_a_gated_representative_is_switched_to_a_member_free_of_gates():
    """koord-scheduler v1.8.0 keeps only the representative in its queue (K core/core.go:240,
    core/gang.go:572-586); a gated one blocks the group until its gates go (KS
    framework/plugins/schedulinggates/scheduling_gates.go:48-57). The shim reported g as
    representative: one SwitchRepresentative to u-0, the earliest pending member free of
    gates, epoch 1 of the gang group."""
    outputs, store = run(_gated_rep_trace("shim-1"), 5)
    commands = [o for o in outputs if o["schema"] == "gangstate.command/v1"]
    assert [(c["id"], c["type"], c["expected_representative"], c["representative"],
             c["reason"], c["cycle"]) for c in commands] == [
        ("ns/g#1", "SwitchRepresentative", "ns/g", "ns/u-0", "RepresentativeGated", 40)]
    assert store["ns/g"].commands.epoch == 1


def test_the_switch_comes_when_the_member_that_completes_the_gang_is_seen_after_the_shim():
    """The shim's record naming g the representative can come before the Pod record of u-1
    (the scheduler refuses u-1 at once and never retries it): the switch is issued when that
    Pod record makes the gang pass its checks (seen on the cluster tier)."""
    trace = _gated_rep_trace("shim-1")
    early = [trace[0], trace[1], trace[3]._replace(at=at(1.5), pod="ns/g", pod_uid="uid-g"),
             trace[2]]
    outputs, _ = run(early, 5)
    commands = [o for o in outputs if o["schema"] == "gangstate.command/v1"]
    assert [(c["issued_at"], c["expected_representative"], c["representative"])
            for c in commands] == [(format_time(at(2)), "ns/g", "ns/u-0")]


def test_no_switch_from_records_that_are_not_the_shims_or_while_the_gang_is_held():
    """Without the shim no record names the representative (Events never do); and while
    fewer than minMember members are free of gates the gang is held (GangMemberGated): a
    switch would change nothing."""
    outputs, _ = run(_gated_rep_trace(""), 5)
    assert [o for o in outputs if o["schema"] == "gangstate.command/v1"] == []
    held = _gated_rep_trace("shim-1")
    held = held[:2] + held[3:]  # no u-1: 1 of 2 free of gates
    outputs, _ = run(held, 5)
    assert [o for o in outputs if o["schema"] == "gangstate.command/v1"] == []


def test_a_gated_representative_is_switched_at_most_once_per_ten_seconds():
    """The shim names g the representative again at t=3.5 and t=12.9 (before the command is
    applied, or after it was lost): no second command within GATED_SWITCH_INTERVAL_SECONDS
    of the first (t=3); at t=13 a second one, epoch 2. ``last_switch_at`` survives the wire
    form."""
    from streams.core.state import from_wire, to_wire

    trace = _gated_rep_trace("shim-1")
    again = [trace[3]._replace(at=at(t), cycle=c) for t, c in ((3.5, 41), (12.9, 42), (13, 43))]
    outputs, store = run(trace + again, 14)
    commands = [o for o in outputs if o["schema"] == "gangstate.command/v1"]
    assert [(c["epoch"], c["issued_at"], c["cycle"]) for c in commands] == [
        (1, format_time(at(3)), 40), (2, format_time(at(13)), 43)]
    state = store["ns/g"]
    assert state.commands.last_switch_at == at(13) and from_wire(to_wire(state)) == state
