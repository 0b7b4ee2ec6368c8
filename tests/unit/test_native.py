"""Native gangs (kube-scheduler's GangScheduling, Kubernetes v1.37): raw watch records through
the decoder and the fold, with the outputs worked out by hand from the rules NG1-NG8
(docs/native-gang-rules.md). Grace period: the default 10 s."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from streams.core.fold import FoldSettings, PartitionFold
from streams.core.native import (KOORDINATOR, KUBE_SCHEDULER, gang_key, native_gang_of_pod,
                                 scheduler_of, settings_of_native_podgroup, split_gang)
from streams.core.records import Tick
from streams.core.state import from_wire, to_wire
from streams.core.timefmt import format_time
from streams.wire.decoding import DecodeError, decode_input
from tests.fixtures.builders import at, kube_pod, pod_line

NS = "team-n"
G = f"{NS}/llm@kube-scheduler"


def native_pod(name: str, group: str = "llm", *, rv: str = "1", node: str | None = None,
               phase: str = "Pending", gates: tuple[str, ...] = (),
               scheduler: str = "default-scheduler") -> dict[str, Any]:
    obj = kube_pod(name, NS, rv=rv, scheduler=scheduler, node=node, phase=phase, gates=gates,
                   gpu="1")
    obj["spec"]["schedulingGroup"] = {"podGroupName": group}
    return obj


def native_podgroup(name: str = "llm", min_count: int | None = 3, *, rv: str = "1",
                    basic: bool = False, parent: str | None = None,
                    conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    policy: dict[str, Any] = {"basic": {}} if basic else {"gang": given_min(min_count)}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    obj: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                           "metadata": {"name": name, "namespace": NS, "uid": f"uid-pg-{name}",
                                        "resourceVersion": rv}, "spec": spec}
    if conditions:
        obj["status"] = {"conditions": conditions}
    return obj


def given_min(min_count: int | None) -> dict[str, Any]:
    return {} if min_count is None else {"minCount": min_count}


def line(obj: dict[str, Any], t: float, type_: str = "ADDED", resource: str = "pods") -> bytes:
    rec = pod_line(obj, format_time(at(t)), type_)
    rec["resource"] = resource
    return json.dumps(rec).encode()


def pg_line(obj: dict[str, Any], t: float, type_: str = "ADDED") -> bytes:
    return line(obj, t, type_, "podgroups")


def fold(lines: list[bytes], end: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    store: dict[str, Any] = {}
    folder = PartitionFold(store, FoldSettings())
    outputs: list[dict[str, Any]] = []
    for raw in lines:
        decoded = decode_input(raw)
        outputs += folder.feed(decoded.key, decoded.record or Tick(at(0)))
    outputs += folder.feed(None, Tick(at(end)))
    return outputs, store


def diagnostics(outputs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(o["reason"], o["message"]) for o in outputs
            if o.get("schema") == "gangstate.diagnostic/v1"]


# -- ids and membership ---------------------------------------------------------------------


def test_gang_ids_keep_the_schedulers_apart() -> None:
    assert gang_key("team-a", "llm") == "team-a/llm"
    assert gang_key("team-a", "llm", KUBE_SCHEDULER) == "team-a/llm@kube-scheduler"
    assert split_gang("team-a/llm@kube-scheduler") == ("team-a", "llm", KUBE_SCHEDULER)
    assert split_gang("team-a/llm") == ("team-a", "llm", KOORDINATOR)
    assert scheduler_of("team-a/llm") == KOORDINATOR


@pytest.mark.parametrize(("spec", "expected"), [
    ({"schedulingGroup": {"podGroupName": "llm"}, "schedulerName": "default-scheduler"},
     "ns/llm@kube-scheduler"),
    ({"schedulingGroup": {"podGroupName": "llm"}}, "ns/llm@kube-scheduler"),
    # NG1: Koordinator's profile never runs kube-scheduler's GangScheduling
    ({"schedulingGroup": {"podGroupName": "llm"}, "schedulerName": "koord-scheduler"}, None),
    ({"schedulingGroup": {}}, None),
    ({"schedulerName": "default-scheduler"}, None),
])
def test_a_pod_is_a_native_member_by_its_scheduling_group(spec: dict[str, Any],
                                                          expected: str | None) -> None:
    assert native_gang_of_pod("ns", spec) == expected


def test_native_podgroup_settings() -> None:
    s = settings_of_native_podgroup({"schedulingPolicy": {"gang": {"minCount": 4}},
                                     "parentCompositePodGroupName": "job"})
    assert (s.min_available, s.policy, s.parent) == ("4", "Gang", "job")
    assert settings_of_native_podgroup({"schedulingPolicy": {"basic": {}}}).policy == "Basic"


def test_the_same_name_under_two_schedulers_is_two_gangs() -> None:
    koord = kube_pod("k-0", NS, labels={"pod-group.scheduling.sigs.k8s.io": "llm"})
    native = native_pod("n-0")
    assert decode_input(line(koord, 1)).key == f"{NS}/llm"
    assert decode_input(line(native, 1)).key == G
    koord_pg = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                "metadata": {"name": "llm", "namespace": NS, "uid": "u1",
                             "resourceVersion": "1"}, "spec": {"minMember": 2}}
    assert decode_input(pg_line(koord_pg, 1)).key == f"{NS}/llm"
    assert decode_input(pg_line(native_podgroup(), 1)).key == G


def test_a_native_podgroup_name_too_long_is_rejected_with_the_reason() -> None:
    with pytest.raises(DecodeError, match="podGroupName: 254 characters"):
        decode_input(line(native_pod("p", "x" * 254), 1))


def test_workloads_are_published_but_not_folded() -> None:
    workload = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
                "metadata": {"name": "job", "namespace": NS, "uid": "u9",
                             "resourceVersion": "1"}}
    decoded = decode_input(line(workload, 1, resource="workloads"))
    assert (decoded.key, decoded.record, decoded.skipped) == (None, None, "workloads")


# -- the hold at PreEnqueue ----------------------------------------------------------------


def test_too_few_pods_is_told_after_the_grace_period_in_kube_schedulers_words() -> None:
    outputs, store = fold([pg_line(native_podgroup(min_count=3), 0),
                           line(native_pod("llm-0"), 1), line(native_pod("llm-1"), 2)], end=30)
    assert diagnostics(outputs) == [(
        "GangMembersInsufficient",
        "PodGroup team-n/llm has 2 of minCount 3 pods; kube-scheduler holds them at "
        "PreEnqueue (waiting for minCount pods from a gang to appear in scheduling queue) "
        "until 1 more exists")]
    diag = next(o for o in outputs if o["reason"] == "GangMembersInsufficient")
    assert diag["gang"] == G
    assert diag["facts"] == {"members": 2, "min_member": 3, "total_number": 3}
    assert diag["observed_at"] == format_time(at(11))  # held since the 2nd pod at 1 s
    assert store[G].phase == "Gathering"


def test_a_missing_podgroup_then_created_ends_the_hold() -> None:
    outputs, _ = fold([line(native_pod("llm-0"), 0), line(native_pod("llm-1"), 0.5),
                       pg_line(native_podgroup(min_count=2), 20)], end=30)
    assert diagnostics(outputs) == [
        ("GangNotInitialized",
         "PodGroup team-n/llm (scheduling.k8s.io) does not exist: 2 pods name it in "
         "spec.schedulingGroup; kube-scheduler keeps them out of its scheduling queue until it "
         "is created"),
        ("GangMembersSatisfied",
         "PodGroup team-n/llm has 2 of minCount 2 pods; no longer held")]


def test_terminated_pods_do_not_count_for_min_count() -> None:
    # NG4: kube-scheduler's pod informers leave out Succeeded and Failed pods
    outputs, _ = fold([pg_line(native_podgroup(min_count=2), 0),
                       line(native_pod("llm-0"), 1),
                       line(native_pod("llm-1", phase="Failed"), 1)], end=20)
    facts = [o["facts"] for o in outputs if o.get("reason") == "GangMembersInsufficient"]
    assert facts == [{"members": 1, "min_member": 2, "total_number": 2}]


def test_a_basic_podgroup_holds_nothing() -> None:
    outputs, store = fold([pg_line(native_podgroup(basic=True), 0),
                           line(native_pod("llm-0"), 1)], end=30)
    assert diagnostics(outputs) == []
    assert store[G].phase == "NotInitialized"


def test_a_gated_member_holds_the_whole_podgroup() -> None:
    # NG7: kube-scheduler queues the PodGroup's pods as one entity, gated as soon as one pod
    # is: held although 2 ungated pods are enough for minCount 2; lifting the gate ends it
    gated = native_pod("llm-2", gates=("example.com/quota",))
    lifted = native_pod("llm-2", rv="2")
    outputs, _ = fold([pg_line(native_podgroup(min_count=2), 0),
                       line(native_pod("llm-0"), 1), line(native_pod("llm-1"), 1),
                       line(gated, 1), line(lifted, 20, "MODIFIED")], end=30)
    assert diagnostics(outputs) == [
        ("GangMemberGated",
         "PodGroup team-n/llm has 3 pods (minCount 2), 1 with scheduling gates (llm-2 waits for "
         "example.com/quota); kube-scheduler queues the PodGroup's pods as one and holds all "
         "of them at PreEnqueue until the gates of that pod are removed (by the controller "
         "that set them)"),
        ("GangMembersUngated",
         "PodGroup team-n/llm has 3 pods, none with scheduling gates (minCount 2); no longer "
         "held at PreEnqueue")]


def test_a_deleted_podgroup_keeps_its_pods_members() -> None:
    # NG2: the pod group state keeps its pods when the PodGroup goes; they wait for it again
    _, store = fold([pg_line(native_podgroup(min_count=1), 0),
                     line(native_pod("llm-0"), 1),
                     pg_line(native_podgroup(min_count=1, rv="2"), 2, "DELETED")], end=5)
    state = store[G]
    assert [m.name for m in state.members.values()] == ["llm-0"]
    assert state.orphans == {}
    assert state.spec is None and state.deleted_at is None


# -- scheduled, lost ------------------------------------------------------------------------


def test_scheduled_then_below_min_count() -> None:
    scheduled = [{"type": "PodGroupInitiallyScheduled", "status": "True",
                  "reason": "Scheduled"}]
    lines = [pg_line(native_podgroup(min_count=2), 0),
             line(native_pod("llm-0"), 1), line(native_pod("llm-1"), 1),
             line(native_pod("llm-0", rv="2", node="node-a"), 2, "MODIFIED"),
             line(native_pod("llm-1", rv="2", node="node-b"), 2, "MODIFIED"),
             pg_line(native_podgroup(min_count=2, rv="2", conditions=scheduled), 2, "MODIFIED"),
             line(native_pod("llm-1", rv="3", node="node-b"), 5, "DELETED")]
    outputs, store = fold(lines, end=60)
    reasons = [r for r, _ in diagnostics(outputs)]
    assert reasons == ["GangScheduled", "GangBelowMinCount"]
    messages = dict(diagnostics(outputs))
    assert messages["GangScheduled"] == "PodGroup team-n/llm is scheduled: 2 of minCount 2 pods bound"
    assert messages["GangBelowMinCount"].startswith(
        "PodGroup team-n/llm was scheduled and is now below minCount: llm-1 deleted; 1 of "
        "minCount 2 pod remains bound; its PodGroupInitiallyScheduled condition stays True")
    assert store[G].podgroup.conditions == ("PodGroupInitiallyScheduled=True/Scheduled",)
    assert from_wire(to_wire(store[G])) == store[G]


def test_no_koordinator_rule_reaches_a_native_gang() -> None:
    # a native PodGroup has no Koordinator spec to find invalid and no gang group of peers:
    # the spec family (GangSpecInvalid) and the group's summaries never run for it
    lines = [pg_line(native_podgroup(min_count=2), 0), line(native_pod("llm-0"), 1)]
    outputs, _ = fold(lines, end=30)
    schemas = {o["schema"] for o in outputs}
    assert schemas == {"gangstate.diagnostic/v1"}
    assert [o["reason"] for o in outputs] == ["GangMembersInsufficient"]


# -- the query side: both schedulers in one table ---------------------------------------------


def _both_trace(tmp_path: Any) -> str:
    """A Koordinator gang and a native gang both named team-n/llm: the Koordinator one (2 of
    min-available 2 pods, Ready), the native one (2 of minCount 3 pods, held)."""
    koord = [kube_pod(f"k-{i}", NS, gang="llm", min_available=2) for i in range(2)]
    lines = [line(p, 0.5) for p in koord]
    lines += [pg_line(native_podgroup(min_count=3), 0), line(native_pod("llm-0"), 1),
              line(native_pod("llm-1"), 2)]
    trace = tmp_path / "both.jsonl"
    trace.write_bytes(b"\n".join(lines) + b"\n")
    return str(trace)


def test_get_gangs_shows_each_gangs_scheduler(tmp_path: Any,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from streams.cli import main

    trace, end = _both_trace(tmp_path), format_time(at(30))
    assert main(["get", "gangs", "--from", trace, "--at", end]) == 0
    header, *rows = [ln.split() for ln in capsys.readouterr().out.splitlines()]
    assert header[:5] == ["NAMESPACE", "NAME", "SCHEDULER", "PHASE", "MEMBERS"]
    assert [r[:5] for r in rows] == [["team-n", "llm", "koord-scheduler", "Ready", "2/2"],
                                     ["team-n", "llm", "kube-scheduler", "Gathering", "2/3"]]
    assert main(["get", "gangs", "--from", trace, "--at", end,
                 "--scheduler", "kube-scheduler", "-o", "name"]) == 0
    assert capsys.readouterr().out == "gang/team-n/llm@kube-scheduler\n"


def test_describe_asks_which_scheduler_when_both_have_the_name(
        tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from streams.cli import main

    trace, end = _both_trace(tmp_path), format_time(at(30))
    assert main(["describe", "gang", "team-n/llm", "--from", trace, "--at", end]) == 1
    assert capsys.readouterr().err == (
        "gangstate describe: gang team-n/llm names 2 gangs: team-n/llm, "
        "team-n/llm@kube-scheduler; say which with --scheduler, or give the id\n")
    assert main(["describe", "gang", "team-n/llm", "--scheduler", "kube-scheduler",
                 "--from", trace, "--at", end]) == 0
    out = capsys.readouterr().out
    fields = dict(re.findall(r"^(\w[\w ]*):\s+(.*)$", out, re.M))
    assert (fields["Name"], fields["Scheduler"], fields["PodGroup"], fields["Min count"],
            fields["Permit wait"], fields["Members"]) == (
        "llm", "kube-scheduler", "llm", "3", "300s (fixed)", "2 (0 bound)")
    # Koordinator's notions are not shown for kube-scheduler's gang
    assert not {"Representative", "Epoch", "Mode", "Total number", "Storm"} & set(fields)
    assert "GangMembersInsufficient" in out and "PodGroup team-n/llm has 2 of minCount 3" in out


def test_explain_a_native_pod(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from streams.cli import main

    trace, end = _both_trace(tmp_path), format_time(at(30))
    assert main(["explain", "pod", "team-n/llm-0", "--from", trace, "--at", end]) == 0
    out = capsys.readouterr().out
    assert "Gang:           team-n/llm@kube-scheduler (Gathering: 2 of minCount 3 pods" in out
    assert "Held at:        PreEnqueue (GangScheduling)\n" in out
    assert ("  - create 1 more pod naming PodGroup team-n/llm in spec.schedulingGroup, or lower "
            "its spec.schedulingPolicy.gang.minCount to 2\n") in out


# -- a composite group short of its quorum (NG6) ------------------------------------------------


def composite(name: str = "job", min_groups: int = 2, rv: str = "1") -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-cpg-{name}",
                         "resourceVersion": rv},
            "spec": {"schedulingPolicy": {"gang": {"minGroupCount": min_groups}}}}


def test_a_ready_child_of_a_composite_short_of_quorum_is_told_why() -> None:
    # job needs 2 children with their pods: a has 2 of 2, b 1 of 2, so the tree is held and
    # a is told of the composite, b of its own shortfall
    lines = [line(composite(), 0, resource="compositepodgroups"),
             pg_line(native_podgroup("a", 2, parent="job"), 0),
             pg_line(native_podgroup("b", 2, parent="job"), 0),
             line(native_pod("a-0", "a"), 1), line(native_pod("a-1", "a"), 1),
             line(native_pod("b-0", "b"), 1)]
    outputs, store = fold(lines, end=30)
    told = {(o["gang"], o["reason"]): o for o in outputs
            if o.get("schema") == "gangstate.diagnostic/v1"}
    assert sorted(told) == [(f"{NS}/a@kube-scheduler", "GangCompositeIncomplete"),
                            (f"{NS}/b@kube-scheduler", "GangMembersInsufficient")]
    a = told[(f"{NS}/a@kube-scheduler", "GangCompositeIncomplete")]
    assert a["facts"] == {"composite": "job", "members": 2, "min_member": 2,
                          "ready_groups": 1, "min_group_count": 2}
    assert a["message"] == (
        "PodGroup team-n/a has 2 of minCount 2 pods, but CompositePodGroup team-n/job has 1 "
        "of minGroupCount 2 child groups with their minCount pods; kube-scheduler holds the "
        "whole tree at PreEnqueue (waiting for composite pod group \"job\" tree to meet "
        "quorum) until 1 more group has its minCount pods")
    assert a["gang_group"] == f"{NS}/composite:job@kube-scheduler"
    job = store[f"{NS}/composite:job@kube-scheduler"]
    assert (job.phase, job.name, job.scheduler) == ("Gathering", "job", KUBE_SCHEDULER)


def test_the_composite_tree_complete_ends_the_hold_of_every_child() -> None:
    lines = [line(composite(), 0, resource="compositepodgroups"),
             pg_line(native_podgroup("a", 2, parent="job"), 0),
             pg_line(native_podgroup("b", 2, parent="job"), 0),
             line(native_pod("a-0", "a"), 1), line(native_pod("a-1", "a"), 1),
             line(native_pod("b-0", "b"), 1), line(native_pod("b-1", "b"), 20)]
    outputs, store = fold(lines, end=40)
    told = [(o["gang"].split("/")[1], o["reason"]) for o in outputs
            if o.get("schema") == "gangstate.diagnostic/v1"]
    # at 11 s both graces end: b warns at once; a first asks job for its count as of 11 s
    # (its hold depends on the other groups' news), then warns. b-1 at 20 s ends both holds:
    # the summary b sends job is folded (and job's to a) before b's own outputs are listed
    assert told == [("b@kube-scheduler", "GangMembersInsufficient"),
                    ("a@kube-scheduler", "GangCompositeIncomplete"),
                    ("a@kube-scheduler", "GangMembersSatisfied"),
                    ("b@kube-scheduler", "GangMembersSatisfied")]
    at_20 = [o["observed_at"] for o in outputs if o.get("reason") == "GangMembersSatisfied"]
    assert at_20 == [format_time(at(20))] * 2
    assert store[f"{NS}/composite:job@kube-scheduler"].phase == "Ready"


def test_a_child_whose_composite_does_not_exist() -> None:
    lines = [pg_line(native_podgroup("a", 1, parent="job"), 0), line(native_pod("a-0", "a"), 1)]
    outputs, _ = fold(lines, end=30)
    told = [(o["reason"], o["facts"]) for o in outputs
            if o.get("schema") == "gangstate.diagnostic/v1"]
    assert told == [("GangCompositeIncomplete", {"composite": "job", "members": 1,
                                                 "min_member": 1, "exists": False})]


def test_a_native_failure_episode_outlives_kube_schedulers_silent_retries() -> None:
    # NG10: kube-scheduler retries a pod group every 18 s but writes its Event series once in
    # 30 minutes; 20 minutes after the last failure seen the episode is still open (a
    # Koordinator gang's would have closed after 600 s), 32 minutes after it is not
    from streams.core.explain import findings
    from streams.core.state import as_of

    big = f"{NS}/big@kube-scheduler"
    fit_error = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    # the cycle record the watch producer derives from big-2's FailedScheduling Event
    cycle = {"schema": "gangstate.cycle/v1", "observed_at": format_time(at(1)),
             "scheduler": "default-scheduler", "cycle": None,
             "pod": {"namespace": NS, "name": "big-2", "uid": "uid-big-2"}, "gang": big,
             "gang_group": big, "stage": "Filter", "status": "Unschedulable",
             "reason": "Insufficient nvidia.com/gpu", "message": fit_error,
             "culprit": f"{NS}/big-2", "fit_error": fit_error,
             "source": {"event": f"{NS}/e1", "uid": "ev-1", "count": 1}}
    lines = [pg_line(native_podgroup("big", 3), 0)]
    lines += [line(native_pod(f"big-{i}", "big"), 0.5) for i in range(3)]
    lines.append(json.dumps(cycle).encode())
    _, store = fold(lines, end=20 * 60)
    assert [f["reason"] for f in findings(store[big])] == ["GangUnschedulable"]
    assert [f["reason"] for f in findings(as_of(store[big], at(32 * 60)))] == []


def test_describe_finds_a_composite_pod_group_by_its_name(tmp_path: Any,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    from streams.cli import main

    lines = [line(composite(), 0, resource="compositepodgroups"),
             pg_line(native_podgroup("a", 2, parent="job"), 0),
             line(native_pod("a-0", "a"), 1)]
    trace = tmp_path / "composite.jsonl"
    trace.write_bytes(b"\n".join(lines) + b"\n")
    assert main(["describe", "gang", "team-n/job", "--from", str(trace),
                 "--at", format_time(at(30)), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["gang"], doc["phase"], doc["members"], doc["min_member"]) == (
        "team-n/composite:job@kube-scheduler", "Gathering", 0, 2)
