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


def test_a_pod_whose_cycle_failed():
    state = fold_trace(CASES / "member-fails-switch/trace.jsonl", AT).states["team-b/moe-finetune"]
    why = why_pod(state, "team-b/moe-finetune-worker-2")
    assert why["held_at"] == "Filter"
    assert why["reasons"][0]["facts"]["reasons"] == {"Insufficient nvidia.com/gpu": 1}
    assert "free capacity" in why["unblock"][0]


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


def test_a_pod_waiting_at_permit_while_another_member_fails():
    from tests.fixtures.tracegen import cycle
    lines = [pod("t", f"j-{i}", i, 10 + i, gang="j", min_available=3,
                 extra={"gang.scheduling.koordinator.sh/mode": "NonStrict"}) for i in range(3)]
    lines += [cycle("t", "j-0", 5, 100, "Permit", "Wait", gang="t/j", representative="t/j-0"),
              cycle("t", "j-1", 6, 101, "Permit", "Wait", gang="t/j", representative="t/j-0"),
              cycle("t", "j-2", 7, 102, "Filter", "Unschedulable", gang="t/j",
                    reason="Insufficient nvidia.com/gpu", representative="t/j-0")]
    state = fold_lines(((n, l.encode()) for n, l in enumerate(lines, 1)), AT).states["t/j"]
    why = why_pod(state, "t/j-1")
    assert why["held_at"] == "Permit"
    assert [r["reason"] for r in why["reasons"]] == ["WaitingAtPermit", "GangCycleRejected"]
    assert why["reasons"][0]["facts"] == {"waiting": 2, "min_member": 3, "waiting_seconds": 600}
    assert why["unblock"][0].startswith("free capacity for the failing members "
                                        "(Insufficient nvidia.com/gpu)")
