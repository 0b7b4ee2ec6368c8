"""Explanations derived from the state: findings of a gang and why a pod is pending, for each
handed case (the pod's gang as the fold leaves it at the end of the trace, or earlier)."""

from __future__ import annotations

from streams.wire.contracts import parse_time
from streams.core.explain import findings, why_pod
from streams.wire.traces import fold_lines, fold_trace
from tests.fixtures.casecheck import CASES
from tests.fixtures.tracegen import pod

AT = parse_time("2026-11-29T00:00:00Z")


def fold_prefix(case: str, lines: int):
    raw = (CASES / case / "trace.jsonl").read_bytes().splitlines()[:lines]
    return fold_lines(enumerate(raw, 1), AT)


def test_a_pod_held_because_the_gang_is_short():
    state = fold_prefix("insufficient-members", 6).states["team-a/llm-pretrain"]
    why = why_pod(state, "team-a/llm-pretrain-worker-0")
    assert why["held_at"] == "PreEnqueue"
    assert [r["reason"] for r in why["reasons"]] == ["GangMembersInsufficient"]
    assert why["unblock"] == ["create 1 more pod of gang team-a/llm-pretrain, or lower "
                              "min-available to 3"]
    assert why["last_cycle"] == {"cycle": 100, "stage": "PreEnqueue", "status": "Gated",
                                 "reason": "GangBasicCheckUnsatisfied"}


def test_a_pod_held_because_its_podgroup_is_missing():
    state = fold_prefix("podgroup-missing", 2).states["vision/resnet-ddp"]
    why = why_pod(state, "vision/resnet-ddp-1")
    assert why["reasons"][0]["reason"] == "GangNotInitialized"
    assert why["unblock"][0].startswith("create PodGroup vision/resnet-ddp")


GPU_FIT = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def _waiting_then_failing(fail: bool):
    """Gang t/j (3 pods, min 3): j-0 and j-1 wait at Permit (numbered cycle records of an old
    trace, not the shim's); with ``fail``, j-2 does not fit in cycle 102 (its own message)."""
    import json

    from tests.fixtures.tracegen import cycle
    lines = [pod("t", f"j-{i}", i, 10 + i, gang="j", min_available=3,
                 extra={"gang.scheduling.koordinator.sh/mode": "NonStrict"}) for i in range(3)]
    lines += [cycle("t", "j-0", 5, 100, "Permit", "Wait", gang="t/j", representative="t/j-0"),
              cycle("t", "j-1", 6, 101, "Permit", "Wait", gang="t/j", representative="t/j-0")]
    if fail:
        failed = json.loads(cycle("t", "j-2", 7, 102, "Filter", "Unschedulable", gang="t/j",
                                  reason="Insufficient nvidia.com/gpu",
                                  representative="t/j-0"))
        lines.append(json.dumps({**failed, "message": GPU_FIT}))
    at = parse_time("2026-11-02T09:01:00Z")  # within the episode's 600 s
    return fold_lines(((n, l.encode()) for n, l in enumerate(lines, 1)), at).states["t/j"]


UNBLOCK_J = ("free capacity so that 1 more member fits alongside the 2 that fit (Insufficient "
             "nvidia.com/gpu on 2 of 2 nodes), or lower minMember to 2; the gang is retried as "
             "a whole")


def test_a_pod_whose_cycle_failed():
    """j-2's failure opens the gang's failure episode: j-2 the culprit, the 2 waiting fit."""
    why = why_pod(_waiting_then_failing(True), "t/j-2")
    assert (why["held_at"], why["held_by"]) == ("Filter", "Coscheduling")
    assert [r["reason"] for r in why["reasons"]] == ["GangUnschedulable"]
    facts = why["reasons"][0]["facts"]
    assert (facts["unfit"], facts["fit"], facts["min_member"]) == ({"j-2": GPU_FIT}, 2, 3)
    assert why["unblock"] == [UNBLOCK_J]


def test_a_pod_waiting_at_permit_while_another_member_fails():
    """koord-scheduler v1.8.0 rejects the whole gang group when one member does not fit
    (K core/core.go:376-378): the waiting j-1 gets the same answer as j-2."""
    why = why_pod(_waiting_then_failing(True), "t/j-1")
    assert (why["held_at"], why["held_by"]) == ("Filter", "Coscheduling")
    assert [r["reason"] for r in why["reasons"]] == ["GangUnschedulable"]
    assert why["unblock"] == [UNBLOCK_J]


def test_a_pod_waiting_at_permit_with_nothing_known_to_block_the_others():
    why = why_pod(_waiting_then_failing(False), "t/j-1")
    assert why["held_at"] == "Permit"
    assert [r["reason"] for r in why["reasons"]] == ["WaitingAtPermit"]
    assert why["reasons"][0]["facts"] == {"waiting": 2, "min_member": 3, "waiting_seconds": 600}
    assert why["unblock"] == ["wait for the other members to be scheduled; nothing is known "
                              "to block them yet"]


def test_findings_list_the_silent_fallbacks():
    state = fold_trace(CASES / "invalid-spec-values/trace.jsonl", AT).states["nlp/gpt-distill"]
    assert [(f["reason"], f["facts"]["field"]) for f in findings(state)] == [
        ("GangSpecInvalid", "mode"), ("GangSpecInvalid", "waiting-time")]


def test_a_pod_of_a_gang_blocked_by_its_group():
    lines = [pod("ml", "a-0", 0, 1, gang="a", min_available=1, groups=["ml/a", "ml/b"])]
    state = fold_lines(((n, l.encode()) for n, l in enumerate(lines, 1)), AT).states["ml/a"]
    why = why_pod(state, "ml/a-0")
    assert why["reasons"][0]["facts"] == {"gang_group": "ml/a,ml/b", "blocking_gang": "ml/b",
                                          "members": 0}
    assert why["unblock"] == ["create the pods of gang ml/b, or remove it from the groups "
                              "annotation"]


def test_an_unknown_pod_is_not_a_member():
    state = fold_trace(CASES / "spec-conflict/trace.jsonl", AT).states["research/rl-rollout"]
    why = why_pod(state, "research/nope")
    assert why["member"] is False and why["reasons"] == []


