"""The fold and the decision rules: named scenarios with values worked out by hand.

Each scenario feeds core records into one ``PartitionFold`` (as a Kafka partition or
``gangstate fold`` would) and compares the outputs and the final state.
"""

from __future__ import annotations

from streams.core.fold import FoldSettings, PartitionFold
from streams.core.records import Tick
from streams.core.state import from_wire, summary, to_wire
from streams.core.timefmt import format_time
from tests.fixtures.builders import ack, at, attempt, cycle, fold_records, pod, podgroup


def run(records, end: float | None = None, grace: float = 10.0):
    """Feed records (keyed by their gang, acks by group) and optionally tick at ``end``."""
    store: dict = {}
    fold = PartitionFold(store, FoldSettings(grace_seconds=grace))
    outputs = []
    for rec in records:
        key = getattr(rec, "gang", None) or getattr(rec, "gang_group")
        outputs += fold.feed(key, rec)
    if end is not None:
        outputs += fold.feed(None, Tick(at(end)))
    return outputs, store


def reasons(outputs):
    return [(o.get("reason") or o["type"], o.get("facts") or o.get("epoch")) for o in outputs]


def test_a_burst_that_completes_within_the_grace_period_stays_quiet():
    outputs, store = run([pod("p0", 0, min_available="3"), pod("p1", 4, min_available="3"),
                          pod("p2", 9.9, min_available="3")], end=3600)
    assert outputs == []
    assert summary(store["ns/g"])["phase"] == "Ready"


def test_insufficient_warns_after_grace_updates_on_change_and_ends_with_satisfied():
    outputs, _ = run([pod("p0", 0, min_available="4"), pod("p1", 1, min_available="4"),
                      pod("p2", 30, min_available="4"), pod("p3", 60, min_available="4")])
    assert reasons(outputs) == [
        ("GangMembersInsufficient", {"members": 2, "min_member": 4, "total_number": 4}),
        ("GangMembersInsufficient", {"members": 3, "min_member": 4, "total_number": 4}),
        ("GangMembersSatisfied", {"members": 4, "min_member": 4}),
    ]
    # The timer's output carries its due time (first pod + 10 s), not the next record's time.
    assert [o["observed_at"] for o in outputs] == [format_time(at(10)), format_time(at(30)),
                                                    format_time(at(60))]
    assert outputs[0]["message"] == ("gang ns/g has 2 of minMember 4 pods; scheduling is held at "
                                     "PreEnqueue until 2 more exist")
    assert outputs[0]["id"].startswith("ns/g#GangMembersInsufficient#")
    assert [i["name"] for i in outputs[1]["involved"]] == ["p0", "p1", "p2"]


def test_membership_changes_inside_a_condition_do_not_restart_its_grace_period():
    outputs, _ = run([pod("p0", 0, min_available="4"), pod("p1", 8, min_available="4")], end=11)
    assert reasons(outputs) == [("GangMembersInsufficient",
                                 {"members": 2, "min_member": 4, "total_number": 4})]
    assert outputs[0]["observed_at"] == format_time(at(10))


def test_stale_and_duplicate_watch_events_change_nothing():
    first, store = run([pod("p0", 0, rv="5"), pod("p0", 1, rv="7", type_="MODIFIED",
                                                  node="n1")])
    state = store["ns/g"]
    fold = PartitionFold(store)
    fold.feed("ns/g", pod("p0", 2, rv="6", type_="MODIFIED"))           # older
    fold.feed("ns/g", pod("p0", 3, rv="7", type_="MODIFIED", node="n1"))  # duplicate
    assert store["ns/g"] is state
    assert store["ns/g"].members["uid-p0"].node == "n1"


def test_a_deleted_uid_is_not_brought_back_by_a_late_stale_added():
    _, store = run([pod("p0", 0, rv="5"), pod("p1", 0, rv="6"),
                    pod("p0", 1, rv="9", type_="DELETED"), pod("p0", 2, rv="5")])
    assert sorted(m.name for m in store["ns/g"].members.values()) == ["p1"]


def test_a_pod_recreated_with_the_same_name_is_a_new_member():
    outputs, store = run([pod("w0", 0), pod("w1", 0),
                          pod("w1", 60, uid="uid-w1-new", rv="9"),
                          pod("w1", 60.3, rv="10", type_="DELETED")], end=3600)
    state = store["ns/g"]
    assert [(uid, m.name) for uid, m in state.members.items()] == [
        ("uid-w0", "w0"), ("uid-w1-new", "w1")]
    assert outputs == []


def test_integer_resource_versions_compare_as_numbers():
    _, store = run([pod("p0", 0, rv="9"), pod("p0", 1, rv="10", type_="MODIFIED", node="n")])
    assert store["ns/g"].members["uid-p0"].rv == "10"


def _failed_cycle_trace():
    """Numbered cycle records that are not the shim's (the contract's first form, old traces):
    w0 and w1 wait at Permit, w2 does not fit in cycle 12, w0 and w1 are released."""
    return [
        pod("w0", 0, min_available="3"), pod("w1", 0, min_available="3"),
        pod("w2", 0, min_available="3"),
        cycle("w0", 1, 10, "Permit", "Wait", representative="ns/w0"),
        cycle("w1", 2, 11, "Permit", "Wait", representative="ns/w0"),
        cycle("w2", 3, 12, "Filter", "Unschedulable", reason="Insufficient nvidia.com/gpu",
              representative="ns/w0")._replace(message=GPU_FIT),
        cycle("w0", 3.1, 12, "PostFilter", "Rejected", representative="ns/w0"),
        cycle("w1", 3.1, 12, "PostFilter", "Rejected", representative="ns/w0"),
    ]


def test_a_member_failing_a_numbered_cycle_is_a_failure_episode_and_no_command():
    """koord-scheduler v1.8.0 switches no representative after a failed member, and a switch
    changes nothing there (docs/shim.md): no command. The failed cycle folds into the failure
    episode like an Event's attempt: w2 is the culprit with its own message as fit error, the
    2 members waiting at Permit then fit (alreadyWaitForBound), one round; told once, 10 s
    (episode_settle_seconds) after the failure, with 3 failed attempts in the last minute
    (w2's failure and the 2 releases)."""
    outputs, store = run(_failed_cycle_trace(), end=60)
    assert [o for o in outputs if o["schema"] == "gangstate.command/v1"] == []
    assert unschedulable(outputs) == [(format_time(at(13)), {
        "unfit": {"w2": GPU_FIT}, "fit": 2, "min_member": 3, "since": format_time(at(3)),
        "rounds": 1, "attempts_per_minute": 3}, MESSAGE_W2)]
    assert [o["reason"] for o in outputs] == ["GangUnschedulable"]
    state = store["ns/g"]
    assert summary(state)["phase"] == "Scheduling" and state.cycle == 12
    assert state.commands.epoch == 0


def _elect_trace():
    """w0 (the representative, gated at PreEnqueue) is deleted at t=2 while w1 waits."""
    return [pod("w0", 0), pod("w1", 0),
            cycle("w0", 1, 10, "PreEnqueue", "Gated", representative="ns/w0"),
            pod("w0", 2, rv="9", type_="DELETED")]


def test_the_epoch_is_never_reset_even_when_every_pod_goes_away():
    trace = _elect_trace() + [pod("w1", 3, rv="9", type_="DELETED")]
    trace += [pod("x0", 6, min_available="3"), pod("x1", 6, min_available="3"),
              pod("x2", 6, min_available="3"),
              cycle("x0", 7, 20, "PreEnqueue", "Gated", representative="ns/x0"),
              pod("x0", 8, rv="9", type_="DELETED", min_available="3")]
    outputs, store = run(trace)
    commands = [o for o in outputs if o["schema"] == "gangstate.command/v1"]
    assert [(c["id"], c["epoch"], c["representative"]) for c in commands] == [
        ("ns/g#1", 1, "ns/w1"), ("ns/g#2", 2, "ns/x1")]
    assert store["ns/g"].spec.min_member == 3  # re-initialised from the new pods


def test_an_applied_ack_moves_the_representative_and_a_duplicate_ack_changes_nothing():
    outputs, store = run(_elect_trace() + [ack(4, 1, "Applied", "ns/w1")])
    state = store["ns/g"]
    assert state.commands.representative == "ns/w1"
    fold = PartitionFold(store)
    assert fold.feed("ns/g", ack(5, 1, "Applied", "ns/w1")) == []
    assert store["ns/g"] is state


def test_a_deleted_representative_gets_an_elected_successor():
    trace = [pod("w0", 0), pod("w1", 0), pod("w2", 0, min_available="2"),
             cycle("w0", 1, 10, "PreEnqueue", "Gated", representative="ns/w0"),
             pod("w0", 2, rv="9", type_="DELETED")]
    outputs, store = run(trace)
    commands = [o for o in outputs if o["schema"] == "gangstate.command/v1"]
    assert [(c["type"], c["expected_representative"], c["representative"], c["epoch"])
            for c in commands] == [("ElectRepresentative", "ns/w0", "ns/w1", 1)]
    assert store["ns/g"].commands.representative is None


def test_not_initialized_then_podgroup_too_small_then_satisfied():
    trace = [pod("p0", 0, min_available=None, waits_for_podgroup=True),
             pod("p1", 1, min_available=None, waits_for_podgroup=True),
             podgroup(30, 3), pod("p2", 40, min_available=None, waits_for_podgroup=True)]
    outputs, store = run(trace)
    assert reasons(outputs) == [
        ("GangNotInitialized", {"members": 2}),
        ("GangMembersInsufficient", {"members": 2, "min_member": 3, "total_number": 3}),
        ("GangMembersSatisfied", {"members": 3, "min_member": 3}),
    ]
    assert [i["kind"] for i in outputs[1]["involved"]] == ["Pod", "Pod", "PodGroup"]
    assert store["ns/g"].spec_source == "PodGroup/g"


def test_podgroup_labelled_pods_never_initialise_from_their_annotations():
    outputs, store = run([pod("p0", 0, min_available="1", waits_for_podgroup=True)], end=60)
    assert store["ns/g"].spec is None
    assert reasons(outputs) == [("GangNotInitialized", {"members": 1})]


def test_scheduled_then_deleted_with_its_last_pod():
    trace = [pod("p0", 0), pod("p1", 0),
             pod("p0", 5, rv="2", type_="MODIFIED", node="n1"),
             pod("p1", 6, rv="2", type_="MODIFIED", node="n2")]
    outputs, store = run(trace)
    assert reasons(outputs) == [("GangScheduled", {"bound": 2, "min_member": 2})]
    assert outputs[0]["type"] == "Normal"
    assert summary(store["ns/g"])["phase"] == "Scheduled"
    # A gang built from pod annotations goes with its last pod (Koordinator M3).
    _, store = run(trace + [pod("p0", 100, rv="3", type_="DELETED", node="n1"),
                            pod("p1", 100, rv="3", type_="DELETED", node="n2")])
    info = summary(store["ns/g"])
    assert (info["phase"], info["deleted_at"], info["deleted_by"], info["min_member"]) == (
        "Deleted", format_time(at(100)), "Pod/p1", None)
    assert store["ns/g"].ever_scheduled is False


def test_scheduled_then_finished_while_its_podgroup_remains():
    """A PodGroup gang outlives its pods (Koordinator M4): Finished, not Deleted."""
    trace = [podgroup(0, 2)] + [pod(p, 0, waits_for_podgroup=True, min_available=None)
                                for p in ("p0", "p1")] + [
        pod("p0", 5, rv="2", type_="MODIFIED", node="n1", waits_for_podgroup=True,
            min_available=None),
        pod("p1", 6, rv="2", type_="MODIFIED", node="n2", waits_for_podgroup=True,
            min_available=None),
        pod("p0", 100, rv="3", type_="DELETED", waits_for_podgroup=True, min_available=None),
        pod("p1", 100, rv="3", type_="DELETED", waits_for_podgroup=True, min_available=None)]
    outputs, store = run(trace)
    assert reasons(outputs) == [("GangScheduled", {"bound": 2, "min_member": 2})]
    info = summary(store["ns/g"])
    assert (info["phase"], info["members"], info["deleted_at"]) == ("Finished", 0, None)


def test_a_gang_deleted_with_its_last_pod_is_a_tombstone_until_a_pod_brings_it_back():
    trace = [pod("p0", 0), pod("p1", 1),
             pod("p0", 30, rv="2", type_="DELETED"), pod("p1", 31, rv="2", type_="DELETED")]
    outputs, store = run(trace, end=630)
    # p0 and p1 arrive within the grace period; the hold that begins when p0 goes (1 of 2)
    # ends a second later when p1 goes (nothing pending): nothing to say.
    assert outputs == []
    # The tombstone stays for the deleted-uid memory window (600 s) after its last record,
    # then the gang is removed from the table (streams/core/retention.py).
    assert "ns/g" not in run(trace, end=631)[1]
    state = store["ns/g"]
    assert (state.phase, state.exists, state.deleted_at, state.deleted_by) == (
        "Deleted", False, at(31), "Pod/p1")
    assert (state.spec, state.commands.representative) == (None, None)
    assert state.history[-1][1:] == ("phase Gathering -> Deleted; members 1 -> 0; "
                                     "spec from nothing", "Pod ns/p1 DELETED (resourceVersion 2)")
    from_table = from_wire(to_wire(state))
    assert from_table == state and from_table.phase == "Deleted"
    # A later record about the gang (a late cycle record) does not bring it back.
    _, store = run(trace + [cycle("p1", 40, 9, "PreEnqueue", "Gated")])
    assert store["ns/g"].phase == "Deleted"
    # A new pod of the gang starts it again, initialised from that pod.
    _, store = run(trace + [pod("q0", 50)])
    state = store["ns/g"]
    assert (state.phase, state.deleted_at, state.deleted_by, state.spec_source) == (
        "Gathering", None, None, "Pod/q0")


def test_a_podgroup_gang_is_deleted_when_its_podgroup_and_its_pods_are_gone():
    lone = [podgroup(0, 2), podgroup(20, 2, rv="2", type_="DELETED")]
    _, store = run(lone)
    state = store["ns/g"]
    assert (state.phase, state.deleted_at, state.deleted_by) == ("Deleted", at(20), "PodGroup/g")
    _, store = run(lone + [podgroup(30, 3, rv="3")])  # recreated: a new, unscheduled gang
    assert (store["ns/g"].phase, store["ns/g"].deleted_at) == ("Gathering", None)


def test_a_podgroup_delete_drops_the_gang_with_its_children_m5():
    # M5 (Koordinator v1.8.0 core/gang_cache.go:295-310): the PodGroup's delete removes the
    # gang with all its children; p0 outlives it as an orphan, unknown to the gang cache.
    trace = [podgroup(0, 2), pod("p0", 1, waits_for_podgroup=True, min_available=None),
             podgroup(20, 2, rv="2", type_="DELETED")]
    _, store = run(trace)
    state = store["ns/g"]
    assert (state.phase, state.deleted_by, len(state.members)) == ("Deleted", "PodGroup/g", 0)
    assert [m.name for m in state.orphans.values()] == ["p0"]
    # deleting the orphan forgets it; the gang stays deleted (by its PodGroup)
    _, store = run(trace + [pod("p0", 30, rv="2", type_="DELETED", waits_for_podgroup=True,
                                min_available=None)])
    assert (store["ns/g"].phase, store["ns/g"].deleted_by, dict(store["ns/g"].orphans)) == (
        "Deleted", "PodGroup/g", {})
    # a PodGroup created again starts a gang with no children (core/gang_cache.go:225-235)
    _, store = run(trace + [podgroup(40, 2, rv="3", uid="pg-2")])
    state = store["ns/g"]
    assert (state.phase, len(state.members), len(state.orphans)) == ("Gathering", 0, 1)
    # the orphan's next event makes it a child again (core/gang_cache.go:124-149)
    _, store = run(trace + [podgroup(40, 2, rv="3", uid="pg-2"),
                            pod("p0", 50, rv="3", type_="MODIFIED", waits_for_podgroup=True,
                                min_available=None)])
    state = store["ns/g"]
    assert (state.phase, len(state.members), len(state.orphans)) == ("Gathering", 1, 0)
    # a relist of the orphan at the same resourceVersion is no event: still an orphan
    _, store = run(trace + [pod("p0", 50, rv="1", type_="ADDED", waits_for_podgroup=True,
                                min_available=None)])
    assert len(store["ns/g"].orphans) == 1 and not store["ns/g"].members


def test_a_table_value_stored_before_deletions_were_kept_reads_as_a_live_gang():
    _, store = run([pod("p0", 0)])
    wire = to_wire(store["ns/g"])
    old = {k: v for k, v in wire.items() if k not in ("da", "db")}
    assert from_wire(old) == store["ns/g"] and from_wire(old).phase == "Gathering"


def test_finished_pods_leaving_one_by_one_raise_no_warning():
    trace = [pod("p0", 0), pod("p1", 0),
             pod("p0", 5, rv="2", type_="MODIFIED", node="n1", phase="Succeeded"),
             pod("p1", 5, rv="2", type_="MODIFIED", node="n2", phase="Succeeded"),
             pod("p0", 100, rv="3", type_="DELETED", node="n1", phase="Succeeded")]
    outputs, _ = run(trace, end=3600)
    assert [o["reason"] for o in outputs] == ["GangScheduled"]


def test_a_cycle_record_seen_twice_is_applied_once():
    trace = _failed_cycle_trace()[:6]
    once, _ = run(trace, end=60)
    twice, _ = run(trace + [trace[-1]], end=60)
    assert once == twice
    assert [o["facts"]["attempts_per_minute"] for o in once] == [1]  # not 2


MODE = {"field": "mode", "value": "nonstrict", "effective": "Strict"}


def named(outputs):
    """``(id, observed_at, reason, involved pod names)`` of each diagnostic."""
    return [(o["id"], o["observed_at"], o["reason"],
             [i["name"] for i in o["involved"] if i["kind"] == "Pod"]) for o in outputs]


def test_spec_invalid_is_reported_once_per_field_then_sent_to_each_pod_that_joins():
    outputs, _ = run([pod("p0", 0, mode="nonstrict"), pod("p1", 1, mode="nonstrict")])
    assert reasons(outputs) == [("GangSpecInvalid", MODE), ("GangSpecInvalid", MODE)]
    # ids: sha256 of {"effective":"Strict","field":"mode","value":"nonstrict"}, then of
    # {"facts":{...the same...},"pods":["uid-p1"]} (canonical JSON, first 12 hex digits)
    assert named(outputs) == [
        ("ns/g#GangSpecInvalid#23487113bf2a", format_time(at(0)), "GangSpecInvalid", ["p0"]),
        ("ns/g#GangSpecInvalid#1702bd0d9780", format_time(at(1)), "GangSpecInvalid", ["p1"])]


def test_recreated_pods_of_a_gang_with_invalid_settings_each_get_its_diagnostic():
    """Issue 11: both pods of a `mode: nonstrict` gang deleted, then recreated (new uids) by
    their controller: each new pod is named by a GangSpecInvalid of its own."""
    trace = [pod("p0", 0, mode="nonstrict"), pod("p1", 1, mode="nonstrict"),
             pod("p0", 20, rv="2", type_="DELETED", mode="nonstrict"),
             pod("p1", 21, rv="2", type_="DELETED", mode="nonstrict"),
             pod("q0", 30, mode="nonstrict"), pod("q1", 31, mode="nonstrict")]
    outputs, store = run(trace, end=3600)
    assert named(outputs) == [
        ("ns/g#GangSpecInvalid#23487113bf2a", format_time(at(0)), "GangSpecInvalid", ["p0"]),
        ("ns/g#GangSpecInvalid#1702bd0d9780", format_time(at(1)), "GangSpecInvalid", ["p1"]),
        ("ns/g#GangSpecInvalid#97aba009b971", format_time(at(30)), "GangSpecInvalid", ["q0"]),
        ("ns/g#GangSpecInvalid#4139e8464d99", format_time(at(31)), "GangSpecInvalid", ["q1"])]
    assert all(o["facts"] == MODE and o["type"] == "Warning" for o in outputs)
    assert [o["involved"] for o in outputs[2:]] == [
        [{"kind": "Pod", "namespace": "ns", "name": "q0", "uid": "uid-q0"}],
        [{"kind": "Pod", "namespace": "ns", "name": "q1", "uid": "uid-q1"}]]
    assert outputs[2]["message"] == ("gang ns/g: mode 'nonstrict' is not valid; the scheduler "
                                     "silently uses Strict")
    assert store["ns/g"].spec_source == "Pod/q0"
    # A replay gives the same ids; the same records again change nothing.
    assert run(trace, end=3600)[0] == outputs
    assert fold_records(trace, store=store) == []


def test_pods_recreated_with_the_same_names_get_the_diagnostic_under_their_new_uids():
    trace = [pod("p0", 0, mode="nonstrict"), pod("p1", 1, mode="nonstrict"),
             pod("p0", 20, rv="2", type_="DELETED", mode="nonstrict"),
             pod("p1", 21, rv="2", type_="DELETED", mode="nonstrict"),
             pod("p0", 30, uid="uid-p0-b", rv="3", mode="nonstrict"),
             pod("p1", 31, uid="uid-p1-b", rv="3", mode="nonstrict")]
    outputs, _ = run(trace)
    assert [(o["id"], o["involved"][0]["uid"]) for o in outputs[2:]] == [
        ("ns/g#GangSpecInvalid#53ed5d86ebb0", "uid-p0-b"),
        ("ns/g#GangSpecInvalid#29d9cd321133", "uid-p1-b")]


def test_a_pod_recreated_while_its_gang_is_held_gets_the_hold_warning():
    """min-available 3, two pods: warned at the end of the grace period (10 s). p0 is replaced
    by q0 before the hold's refresh is due: the facts are the warned ones again (2 of 3), so
    nothing is re-emitted to the gang, and q0 alone is told."""
    trace = [pod("p0", 0, min_available="3"), pod("p1", 1, min_available="3"),
             pod("p0", 12, rv="2", type_="DELETED", min_available="3"),
             pod("q0", 13, min_available="3")]
    outputs, _ = run(trace, end=3600)
    facts = {"members": 2, "min_member": 3, "total_number": 3}
    assert reasons(outputs) == [("GangMembersInsufficient", facts)] * 2
    assert named(outputs) == [
        ("ns/g#GangMembersInsufficient#0d1ab417551b", format_time(at(10)),
         "GangMembersInsufficient", ["p0", "p1"]),
        ("ns/g#GangMembersInsufficient#ed1a5fd20b90", format_time(at(13)),
         "GangMembersInsufficient", ["q0"])]


def test_a_member_that_joins_with_news_gets_the_news_not_a_resend():
    """p2 joins the warned hold of 2 of 4 after the refresh interval: the hold is re-emitted
    with the new facts to every member (p2 included), nothing is re-sent."""
    trace = [pod("p0", 0, min_available="4"), pod("p1", 1, min_available="4"),
             pod("p2", 30, min_available="4")]
    outputs, _ = run(trace)
    assert [(o["facts"]["members"], [i["name"] for i in o["involved"]]) for o in outputs] == [
        (2, ["p0", "p1"]), (3, ["p0", "p1", "p2"])]


def test_a_pod_recreated_with_its_old_name_rejoins_a_disagreement():
    trace = [pod("p0", 0, min_available="2"), pod("p1", 1, min_available="3"),
             pod("p1", 5, rv="2", type_="DELETED", min_available="3"),
             pod("p1", 6, uid="uid-p1-b", rv="3", min_available="3")]
    outputs, _ = run(trace)
    conflict = {"field": "min-available", "values": {"2": ["p0"], "3": ["p1"]}}
    assert reasons(outputs) == [("GangSpecConflict", conflict)] * 2
    assert [(o["id"], [i["uid"] for i in o["involved"]]) for o in outputs] == [
        ("ns/g#GangSpecConflict#7ec84db16774", ["uid-p0", "uid-p1"]),
        ("ns/g#GangSpecConflict#78776041285f", ["uid-p1-b"])]


def test_a_deleted_uid_that_comes_back_is_not_a_new_member():
    """A DELETED seen before its pod's last update (resourceVersion 5 after 4): the uid is
    remembered, its Event exists already, nothing is re-sent."""
    trace = [pod("p0", 0, mode="nonstrict"), pod("p1", 1, mode="nonstrict"),
             pod("p1", 2, rv="4", type_="DELETED", mode="nonstrict"),
             pod("p1", 3, rv="5", mode="nonstrict")]
    outputs, store = run(trace)
    assert [[i["name"] for i in o["involved"]] for o in outputs] == [["p0"], ["p1"]]
    assert len(store["ns/g"].members) == 2


def test_spec_conflict_lists_who_says_what():
    outputs, _ = run([pod("p0", 0, min_available="2"), pod("p1", 1, min_available="3")])
    assert reasons(outputs) == [("GangSpecConflict", {"field": "min-available",
                                                      "values": {"2": ["p0"], "3": ["p1"]}})]


def test_the_state_survives_its_wire_form():
    _, store = run(_failed_cycle_trace() + [ack(4, 1, "Applied", "ns/w2"), podgroup(5, 3),
                                            pod("w1", 6, rv="9", type_="DELETED")])
    state = store["ns/g"]
    assert state.episode is not None
    assert from_wire(to_wire(state)) == state
    assert to_wire(from_wire(to_wire(state))) == to_wire(state)
    # a table value stored before the failed-member switch was retired carries "cc" (the
    # cycle of the last command) and "sk" (consecutive switches): read, and ignored
    assert from_wire({**to_wire(state), "cc": 12, "sk": 1}) == state


def test_a_stored_state_remembers_applied_cycle_records_in_either_wire_form():
    first = cycle("w1", 1, 7, "Filter", "Unschedulable", reason="Insufficient nvidia.com/gpu")
    _, store = run([pod("w0", 0, min_available="2"), pod("w1", 0, min_available="2"), first])
    wire = to_wire(store["ns/g"])
    assert len(wire["rc"]) == 1 and isinstance(wire["rc"][0], int)
    # a table value written before the keys were hashed lists the record itself
    old = {**wire, "rc": [["koord-scheduler", 7, "ns/w1", "Filter", "Unschedulable"]]}
    for stored in (wire, old):
        state = from_wire(stored)
        fold = PartitionFold({"ns/g": state})
        assert fold.feed("ns/g", first) == []  # the duplicate changes nothing
        assert fold.store["ns/g"] is state
        fold.feed("ns/g", cycle("w1", 2, 8, "Filter", "Unschedulable",
                                reason="Insufficient nvidia.com/gpu"))
        assert fold.store["ns/g"].cycle == 8  # a new record is applied


def test_timers_rebuilt_from_the_store_fire_as_before():
    store: dict = {}
    fold = PartitionFold(store)
    fold.feed("ns/g", pod("p0", 0, min_available="3"))
    restarted = PartitionFold(store)       # a worker restart: timers are not stored
    restarted.rebuild_timers()
    outputs = restarted.feed(None, Tick(at(60)))
    assert reasons(outputs) == [("GangMembersInsufficient",
                                 {"members": 1, "min_member": 3, "total_number": 3})]


def test_members_waiting_at_permit_past_the_waiting_time_raise_a_timeout():
    trace = [pod("w0", 0, min_available="3", waiting_time="60s"),
             pod("w1", 0, min_available="3", waiting_time="60s"),
             pod("w2", 0, min_available="3", waiting_time="60s"),
             cycle("w0", 5, 10, "Permit", "Wait", representative="ns/w0"),
             cycle("w1", 6, 11, "Permit", "Wait", representative="ns/w0")]
    outputs, store = run(trace, end=3600)
    assert reasons(outputs) == [("GangPermitTimeout",
                                 {"waiting": 2, "min_member": 3, "waiting_seconds": 60})]
    assert outputs[0]["observed_at"] == format_time(at(65))  # first Wait + waiting time
    assert store["ns/g"].history[-1][2] == "Permit waiting time ended"


def test_the_schedulers_own_timeout_records_are_reported():
    trace = [pod("w0", 0), pod("w1", 0),
             cycle("w0", 5, 10, "Permit", "Wait", representative="ns/w0"),
             cycle("w0", 20, 10, "Permit", "Timeout", representative="ns/w0")]
    outputs, _ = run(trace)
    assert reasons(outputs) == [("GangPermitTimeout",
                                 {"waiting": 1, "min_member": 2, "waiting_seconds": 600})]


def test_a_wait_that_ends_in_time_raises_nothing():
    trace = [pod("w0", 0), pod("w1", 0),
             cycle("w0", 5, 10, "Permit", "Wait", representative="ns/w0"),
             cycle("w1", 6, 11, "Permit", "Wait", representative="ns/w0"),
             pod("w0", 7, rv="2", type_="MODIFIED", node="n0"),
             pod("w1", 7, rv="2", type_="MODIFIED", node="n1")]
    outputs, _ = run(trace, end=3600)
    assert [o["reason"] for o in outputs] == ["GangScheduled"]


def test_a_large_gang_arriving_pod_by_pod_is_reported_every_refresh_interval_not_every_pod():
    trace = [pod(f"w{i}", i * 0.1, min_available="300") for i in range(300)]
    outputs, _ = run(trace, end=3600)
    got = [(o["observed_at"], o["reason"], o["facts"].get("members")) for o in outputs]
    assert got == [
        (format_time(at(10)), "GangMembersInsufficient", 100),   # grace: pods 0..99 exist
        (format_time(at(20)), "GangMembersInsufficient", 200),   # refresh, latest facts
        (format_time(at(29.9)), "GangMembersSatisfied", 300),
    ]


def test_a_change_inside_the_refresh_interval_is_sent_when_it_ends():
    trace = [pod("p0", 0, min_available="4"), pod("p1", 12, min_available="4")]
    outputs, _ = run(trace, end=3600)
    assert [(o["observed_at"], o["facts"]["members"]) for o in outputs] == [
        (format_time(at(10)), 1), (format_time(at(20)), 2)]


def test_describe_explains_a_deletion_by_its_last_pod_or_its_podgroup():
    from streams.core.explain import deletion

    _, store = run([pod("p0", 0), pod("p0", 30, rv="2", type_="DELETED")])
    assert deletion(store["ns/g"]) == (
        f"{format_time(at(30))}: its last pod, ns/p0, was deleted (a gang without a PodGroup "
        f"ends with its last pod); a new pod of the gang starts it again")
    _, store = run([podgroup(0, 2), podgroup(20, 2, rv="2", type_="DELETED")])
    assert deletion(store["ns/g"]) == (
        f"{format_time(at(20))}: its PodGroup ns/g was deleted and no pod of the gang is left; "
        f"a new PodGroup or pod of the gang starts it again")
    _, store = run([pod("p0", 0)])
    assert deletion(store["ns/g"]) is None


# -- records without a cycle number (derived from scheduler Events) ----------------------------

GPU = "Insufficient nvidia.com/gpu"


def _gang_of_three():
    return [pod("w0", 0, min_available="3"), pod("w1", 0, min_available="3"),
            pod("w2", 0, min_available="3")]


GPU_FIT = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
CPU_FIT = "0/2 nodes are available: 2 Insufficient cpu."


def own(name: str, t: float, uid: str, fit: str = GPU_FIT):
    """A member's own fit error (catalogue row FIT): it is the culprit."""
    reason = "Insufficient cpu" if fit == CPU_FIT else GPU
    return attempt(name, t, uid, "Filter", "Unschedulable", reason=reason, culprit=name,
                   fit_error=fit)


def released(name: str, t: float, uid: str, culprit: str, waited: int, fit: str = GPU_FIT):
    """A waiting member released by the culprit's failure (row F3)."""
    return attempt(name, t, uid, "PostFilter", "Rejected", reason="GangGroupRejected",
                   culprit=culprit, fit_error=fit, waited=waited)


def failed_round(t: float, culprit: str = "w2", fit: str = GPU_FIT):
    """One failed round of koord-scheduler v1.8.0 (episode.py): the two other members fit and
    wait, the culprit fails, they are released (3 Events)."""
    others = [n for n in ("w0", "w1", "w2") if n != culprit]
    tag = f"{t}"
    return [own(culprit, t, f"f{tag}", fit),
            released(others[0], t + 0.01, f"r{tag}a", culprit, 2, fit),
            released(others[1], t + 0.02, f"r{tag}b", culprit, 2, fit)]


MESSAGE_W2 = ("gang ns/g cannot be scheduled: w2 did not fit (Insufficient nvidia.com/gpu on 2 "
              "of 2 nodes); at most 2 of minMember 3 members fit at once; the scheduler rejects "
              "the whole gang and retries it")


def unschedulable(outputs):
    return [(o["observed_at"], o["facts"], o["message"]) for o in outputs
            if o.get("reason") == "GangUnschedulable"]


def test_an_attempt_without_a_cycle_is_reported_without_inventing_a_number():
    """One failed attempt: the episode's GangUnschedulable, due 10 s (episode_settle_seconds)
    after it; no cycle number is invented."""
    outputs, store = run(_gang_of_three() + [own("w1", 1, "e1")], end=11)
    assert reasons(outputs) == [("GangUnschedulable", {
        "unfit": {"w1": GPU_FIT}, "fit": 0, "min_member": 3,
        "since": format_time(at(1)), "rounds": 1, "attempts_per_minute": 1})]
    assert outputs[0]["observed_at"] == format_time(at(11))
    assert outputs[0]["message"] == (
        "gang ns/g cannot be scheduled: w1 did not fit (Insufficient nvidia.com/gpu on 2 of 2 "
        "nodes); none of minMember 3 members fit; the scheduler rejects the whole gang and "
        "retries it")
    state = store["ns/g"]
    assert state.cycle is None and state.members["uid-w1"].cycle is None
    assert (state.members["uid-w1"].stage, state.members["uid-w1"].status) == (
        "Filter", "Unschedulable")
    assert summary(state)["last_cycle"] is None
    assert state.history[-1][1:] == ("emitted GangUnschedulable", "failure episode settled")
    assert from_wire(to_wire(state)) == state
    # a table value stored before episodes were kept (no "ep", no "sw") reads as none
    old = {k: v for k, v in to_wire(state).items() if k not in ("ep", "sw")}
    assert (from_wire(old).episode, from_wire(old).storm) == (None, ())


def test_the_same_event_twice_is_one_attempt_and_a_higher_count_is_a_new_one():
    first = attempt("w1", 1, "e1", "Filter", "Unschedulable", reason=GPU)
    _, store = run(_gang_of_three() + [first])
    state = store["ns/g"]
    fold = PartitionFold(store)
    # a relist re-derives the same record (same Event uid and count), later
    assert fold.feed("ns/g", first._replace(at=at(50))) == []
    assert store["ns/g"] is state
    # the Event aggregated one more failure (count 2): a new attempt, applied
    fold.feed("ns/g", attempt("w1", 51, "e1", "PostFilter", "Rejected", count=2,
                              reason="GangGroupRejected"))
    assert store["ns/g"].members["uid-w1"].status == "Rejected"


def test_an_episode_is_one_diagnostic_over_many_rounds():
    """60 failed rounds, one per second, w2 the culprit each time: one GangUnschedulable at
    t=11 (the first failure at t=1 + 10 s), with the rounds (t=1..10) and attempts (30) as they
    were then; the 50 rounds after it change no fact."""
    records = _gang_of_three()
    for t in range(1, 61):
        records += failed_round(t)
    outputs, store = run(records, end=120)
    assert unschedulable(outputs) == [(format_time(at(11)), {
        "unfit": {"w2": GPU_FIT}, "fit": 2, "min_member": 3, "since": format_time(at(1)),
        "rounds": 10, "attempts_per_minute": 30}, MESSAGE_W2)]
    assert [o["reason"] for o in outputs] == ["GangUnschedulable"]
    ep = store["ns/g"].episode
    assert (ep.since, ep.last_at, ep.rounds, ep.fit) == (at(1), at(60.02), 60, 2)


def test_late_events_of_a_gang_whose_pods_are_all_gone_say_nothing():
    """Rounds fail at t=1..20 (GangUnschedulable at t=11); every pod is deleted at t=25; the
    scheduler's Events of w2's last attempts still arrive at t=27 and t=40 (recorded on
    koord-scheduler v1.8.0: tests/cases/recorded/gpu-short, cpu-heavy-member). The one
    diagnostic stays the one at t=11: a gang with no pod left is told nothing (before, a second
    GangUnschedulable named no pod and a minMember of None)."""
    records = _gang_of_three()
    for t in range(1, 21):
        records += failed_round(t)
    records += [pod(n, 25, rv="2", type_="DELETED", min_available="3") for n in ("w0", "w1", "w2")]
    records += [own("w2", 27, "late1"), own("w2", 40, "late2")]
    outputs, _ = run(records, end=120)
    assert [when for when, _facts, _msg in unschedulable(outputs)] == [format_time(at(11))]
    assert all(o["involved"] for o in outputs if "involved" in o)


def test_an_episode_is_told_again_when_the_culprit_changes_and_ends_when_a_member_binds():
    """t=1-20: w2 fails on GPUs (diagnostic at 11). t=30: w1 fails on cpu instead: another
    culprit, told at once (the last was 19 s earlier, more than refresh_seconds). t=31-35: the
    same facts, nothing. t=40: w0 is bound: the episode ends, and the gang group is once
    satisfied (M2). t=50: w2 fails again, but with the default match policy koord-scheduler
    v1.8.0 now schedules the gang's pods one by one without gang checks (P4, core/core.go:
    301-304, 372-374): no gang failure episode, no GangUnschedulable."""
    records = _gang_of_three()
    for t in range(1, 21):
        records += failed_round(t)
    for t in range(30, 36):
        records += failed_round(t, "w1", CPU_FIT)
    records += [pod("w0", 40, rv="2", min_available="3", node="n1")]
    records += failed_round(50)
    outputs, store = run(records, end=100)
    both = {"w1": CPU_FIT, "w2": GPU_FIT}
    assert [(when, facts["unfit"], facts["fit"], facts["since"], facts["rounds"])
            for when, facts, _ in unschedulable(outputs)] == [
        (format_time(at(11)), {"w2": GPU_FIT}, 2, format_time(at(1)), 10),
        (format_time(at(30)), both, 2, format_time(at(1)), 21)]
    assert unschedulable(outputs)[1][2] == (
        "gang ns/g cannot be scheduled: w1 did not fit (Insufficient cpu on 2 of 2 nodes); w2 "
        "did not fit (Insufficient nvidia.com/gpu on 2 of 2 nodes); at most 2 of minMember 3 "
        "members fit at once; the scheduler rejects the whole gang and retries it")
    assert store["ns/g"].episode is None and store["ns/g"].once_satisfied


def test_an_episode_ends_after_ten_quiet_minutes():
    """Failed rounds at t=1, t=300 (299 s later: the same episode, nothing new to tell) and
    t=1000 (700 s after the last failure, more than episode_quiet_seconds): a new episode, a
    new diagnostic."""
    outputs, store = run(_gang_of_three() + failed_round(1) + failed_round(300)
                         + failed_round(1000), end=1100)
    assert [(when, facts["since"], facts["rounds"]) for when, facts, _ in
            unschedulable(outputs)] == [(format_time(at(11)), format_time(at(1)), 1),
                                        (format_time(at(1010)), format_time(at(1000)), 1)]


def test_a_round_that_ends_without_a_failure_counts_once_and_shows_who_fit():
    """A failed round (w2), then a round where w2 was not handed out and w0, w1 both fit and
    were released together with ``all pending pods is already been attempted`` (row N1): one
    more round, and 2 members fit at once; a round end alone starts no episode."""
    end_of_round = [attempt(n, 5 + i / 100, f"n{n}", "Permit", "Rejected",
                            reason="GangRoundEnded") for i, n in enumerate(("w0", "w1"))]
    outputs, store = run(_gang_of_three() + end_of_round)
    assert store["ns/g"].episode is None and outputs == []
    outputs, store = run(_gang_of_three() + [own("w2", 1, "f1")] + end_of_round, end=20)
    assert [(facts["rounds"], facts["fit"]) for _, facts, _ in unschedulable(outputs)] == [
        (2, 2)]


def test_numbered_records_that_are_not_the_shims_fold_into_the_episode_of_the_attempts():
    """An old trace's numbered records after an Event's attempt: one episode. w1's own fit
    error (GPU, an Event) opens it at t=1; in cycle 40 w0 waits and w1 fails again with its
    own message (cpu): the readable fit error replaces the older one, 1 member fit
    (alreadyWaitForBound from the waiting count), 2 rounds, told at t=11."""
    outputs, store = run(_gang_of_three() + [
        own("w1", 1, "e1"),
        cycle("w0", 2, 40, "Permit", "Wait"),
        cycle("w1", 2.1, 40, "Filter", "Unschedulable", reason="Insufficient cpu")._replace(
            message=CPU_FIT)], end=60)
    assert unschedulable(outputs) == [(format_time(at(11)), {
        "unfit": {"w1": CPU_FIT}, "fit": 1, "min_member": 3, "since": format_time(at(1)),
        "rounds": 2, "attempts_per_minute": 2},
        "gang ns/g cannot be scheduled: w1 did not fit (Insufficient cpu on 2 of 2 nodes); at "
        "most 1 of minMember 3 members fits at once; the scheduler rejects the whole gang and "
        "retries it")]
    assert [o["reason"] for o in outputs] == ["GangUnschedulable"]
    assert store["ns/g"].cycle == 40 and store["ns/g"].members["uid-w1"].cycle == 40


def test_one_member_fitting_is_told_in_the_singular():
    """2 members, min 2; b1 never fits, b0 waited once when b1 failed (alreadyWaitForBound 1)."""
    records = [pod("b0", 0, min_available="2"), pod("b1", 0, min_available="2"),
               own("b1", 1, "f1", CPU_FIT), released("b0", 1.01, "r1", "b1", 1, CPU_FIT)]
    outputs, _ = run(records, end=20)
    assert [m for _, _, m in unschedulable(outputs)] == [
        "gang ns/g cannot be scheduled: b1 did not fit (Insufficient cpu on 2 of 2 nodes); at "
        "most 1 of minMember 2 members fits at once; the scheduler rejects the whole gang and "
        "retries it"]
