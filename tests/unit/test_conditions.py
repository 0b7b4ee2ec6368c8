"""The pods' own ``PodScheduled`` condition as a source beside the scheduler's Events
(``producers.watch.conditions``, ``GangRouter``; issue 22).

kube-scheduler v1.35.2 writes every failed attempt twice: a ``FailedScheduling`` Event
(``schedule_one.go:1108-1109``, throttled on the scheduler's side, 38-66 s late under storms on
the real koord-scheduler v1.8.0) and the pod's ``PodScheduled=False`` condition with the same
message, patched only when it changed (``schedule_one.go:1110-1116,1147-1154``). Tables of
named scenarios: what the router publishes for a sequence of watch events, and what the fold
makes of the published records (one explanation per attempt, at the earliest source).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from producers.watch.conditions import changed_condition, condition_attempt, failed_condition
from producers.watch.watching import GangRouter, Publish
from streams.core.explain import why_pod
from streams.core.timefmt import format_time, parse_time
from streams.wire.traces import fold_lines
from tests.fixtures.builders import kube_pod

T0 = parse_time("2026-11-02T09:00:00Z")
S = 1_000_000
CPU_FIT = "0/2 nodes are available: 2 Insufficient cpu."
OWN = (CPU_FIT + " preemption: 0/2 nodes are available: 2 No preemption victims found for "
       "incoming pod.")
RELEASED = ('0/1 nodes are available: 1 GangGroup "team-a/train" gets rejected due to member '
            'Pod "team-a/w-1" is unschedulable with reason "0/2 nodes are available: 2 '
            'Insufficient cpu.", alreadyWaitForBound: 1.')


def pod(name: str, rv: str, *, condition: tuple[str, str, Any] | None = None,
        node: str | None = None, mode: str | None = None, cpu: str = "1") -> dict[str, Any]:
    """A gang pod of ``team-a/train`` (min-available 2) at resourceVersion ``rv``, with a
    ``PodScheduled`` condition ``(status, reason, message)`` (lastTransitionTime T0+1 s)."""
    conditions = None if condition is None else [
        {"type": "PodScheduled", "status": condition[0], "reason": condition[1],
         "message": condition[2], "lastTransitionTime": "2026-11-02T09:00:01Z"}]
    return kube_pod(name, "team-a", rv=rv, gang="train", min_available=2, mode=mode or None,
                    node=node, cpu=cpu, conditions=conditions)


def event(name: str, pod_name: str, message: str, count: int = 1) -> dict[str, Any]:
    """A koord-scheduler FailedScheduling Event of pod ``team-a/<pod_name>``."""
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}"},
            "involvedObject": {"kind": "Pod", "namespace": "team-a", "name": pod_name,
                               "uid": f"uid-{pod_name}"},
            "reason": "FailedScheduling", "message": message, "type": "Warning",
            "reportingComponent": "koord-scheduler", "count": count}


def run(steps: list[tuple[int, str, str, dict[str, Any]]], router: GangRouter | None = None,
        ) -> list[dict[str, Any]]:
    """Route ``(at, resource, type, object)`` steps as one watch stream would hand them over
    (``prev``: the stream's last object of the same uid); the published records, in order."""
    router = router or GangRouter()
    known: dict[str, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    for at, resource, type_, obj in steps:
        uid = obj["metadata"]["uid"]
        prev = known.get(uid) if resource == "pods" else None
        if resource == "pods":
            known[uid] = obj
        out += [a.record for a in router.route(resource, type_, obj, prev, at)
                if isinstance(a, Publish)]
    return out


def conditions_of(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["schema"] == "gangstate.cycle/v1"
            and r["source"].get("kind") == "condition"]


def fold(records: list[dict[str, Any]], at: int | None = None) -> Any:
    return fold_lines(((n, json.dumps(r).encode()) for n, r in enumerate(records, start=1)), at)


def tick(at: int) -> dict[str, Any]:
    return {"schema": "gangstate.tick/v1", "observed_at": format_time(at)}


# -- the pure reading of the condition ---------------------------------------------------------

FAILED = ("False", "Unschedulable", OWN)


@pytest.mark.parametrize("name, obj, prev, changed", [
    ("a new pod with a failed condition", pod("w-1", "2", condition=FAILED), None, True),
    ("the condition appears", pod("w-1", "3", condition=FAILED), pod("w-1", "2"), True),
    ("same reason and message: no new attempt visible",
     pod("w-1", "4", condition=FAILED), pod("w-1", "3", condition=FAILED), False),
    ("another message: a new attempt",
     pod("w-1", "5", condition=FAILED), pod("w-1", "4", condition=("False", "Unschedulable",
                                                                    RELEASED)), True),
    ("SchedulerError is a failed attempt too (schedule_one.go:1045-1048)",
     pod("w-1", "6", condition=("False", "SchedulerError", "binding rejected")), None, True),
    ("PodScheduled=True is no failure", pod("w-1", "7", condition=("True", "", "")), None,
     False),
    ("a bound pod's stale False is no failure",
     pod("w-1", "8", condition=FAILED, node="n1"), None, False),
    ("another reason (not kube-scheduler's)",
     pod("w-1", "9", condition=("False", "SchedulingGated", "gated")), None, False),
    ("no condition", pod("w-1", "10"), None, False),
    ("a message that is not a string (not what an API server serves)",
     pod("w-1", "11", condition=("False", "Unschedulable", 42)), None, False),
    ("conditions that are not a list", {**pod("w-1", "12"), "status": {"conditions": "x"}},
     None, False),
])
def test_changed_condition(name: str, obj: dict[str, Any], prev: dict[str, Any] | None,
                           changed: bool) -> None:
    assert (changed_condition(obj, prev) is not None) is changed, name


def test_a_bad_last_transition_time_is_left_out_not_published() -> None:
    """A lastTransitionTime that is not a string would fail the contract at the worker (a dead
    letter); it is left out, so the attempt id has an empty time and the record is valid."""
    obj = pod("w-1", "2", condition=FAILED)
    obj["status"]["conditions"][0]["lastTransitionTime"] = 12
    [record] = conditions_of(run([(T0, "pods", "ADDED", obj)]))
    assert record["source"]["last_transition_time"] == ""
    assert record["source"]["uid"].startswith("cond:uid-w-1::")


def test_the_attempt_id_is_the_pod_the_transition_and_the_message() -> None:
    cond = failed_condition(pod("w-1", "2", condition=FAILED))
    assert cond is not None
    attempt = condition_attempt("uid-w-1", cond)
    assert attempt.startswith("cond:uid-w-1:2026-11-02T09:00:01Z:") and len(attempt) == \
        len("cond:uid-w-1:2026-11-02T09:00:01Z:") + 16
    assert condition_attempt("uid-w-1", {**cond, "message": RELEASED}) != attempt
    assert condition_attempt("uid-w-1", dict(cond)) == attempt  # a relist: the same attempt
    # with the pod's resourceVersion: the same message again on a later version of the pod
    # (after another message) is a new attempt; the same version (a relist) is not
    assert condition_attempt("uid-w-1", cond, "7") == attempt + "@7" \
        == condition_attempt("uid-w-1", dict(cond), "7")
    assert condition_attempt("uid-w-1", cond, "9") != attempt + "@7"


# -- the router: watch events -> records --------------------------------------------------------

ADDED = [(T0, "pods", "ADDED", pod("w-0", "1")), (T0, "pods", "ADDED", pod("w-1", "2"))]


@pytest.mark.parametrize("name, steps, expected", [
    ("a pod MODIFIED with the condition gives one cycle record",
     ADDED + [(T0 + S, "pods", "MODIFIED", pod("w-1", "3", condition=FAILED))],
     [("w-1", "Filter", "Unschedulable", "team-a/w-1", "FIT")]),
    ("the same condition again (another change of the pod) gives none",
     ADDED + [(T0 + S, "pods", "MODIFIED", pod("w-1", "3", condition=FAILED)),
              (T0 + 2 * S, "pods", "MODIFIED", pod("w-1", "4", condition=FAILED))],
     [("w-1", "Filter", "Unschedulable", "team-a/w-1", "FIT")]),
    ("a new message is a new attempt",
     ADDED + [(T0 + S, "pods", "MODIFIED", pod("w-0", "3", condition=FAILED)),
              (T0 + 2 * S, "pods", "MODIFIED",
               pod("w-0", "4", condition=("False", "Unschedulable", RELEASED)))],
     [("w-0", "Filter", "Unschedulable", "team-a/w-0", "FIT"),
      ("w-0", "PostFilter", "Rejected", "team-a/w-1", "F3")]),
    ("a pod listed with its condition (watcher start: no previous state) gives one",
     [(T0, "pods", "SYNC", pod("w-1", "3", condition=FAILED))],
     [("w-1", "Filter", "Unschedulable", "team-a/w-1", "FIT")]),
    ("bound: nothing", ADDED + [(T0 + S, "pods", "MODIFIED",
                                 pod("w-1", "3", condition=("True", "", ""), node="n1"))], []),
    ("deleted: nothing", ADDED + [(T0 + S, "pods", "DELETED",
                                   pod("w-1", "3", condition=FAILED))], []),
])
def test_router_condition_records(name: str, steps: list[Any],
                                   expected: list[tuple[str, ...]]) -> None:
    got = conditions_of(run(steps))
    assert [(r["pod"]["name"], r["stage"], r["status"], r.get("culprit"), r["source"]["form"])
            for r in got] == expected, name
    for r in got:
        assert r["cycle"] is None and r["scheduler"] == "koord-scheduler"
        assert r["source"]["uid"].startswith(f"cond:uid-{r['pod']['name']}:")
        assert r["source"]["count"] == 1 and "event" not in r["source"]
        assert r["source"]["last_transition_time"] == "2026-11-02T09:00:01Z"


def test_a_condition_record_is_valid_and_carries_the_capacity_facts() -> None:
    """The same facts as a record from the Event: the culprit's fit error and the room of the
    known nodes (2 nodes of 8 cpu, nothing bound: a 1-cpu member fits 16 times)."""
    from streams.wire.contracts import INPUT_ADAPTER
    from streams.wire.decoding import decode_input

    router = GangRouter()
    for n in ("n1", "n2"):
        router.route("nodes", "ADDED", {"metadata": {"name": n, "uid": n},
                                        "status": {"allocatable": {"cpu": "8"}}}, None, 0)
    [record] = conditions_of(run(ADDED + [(T0 + S, "pods", "MODIFIED",
                                           pod("w-1", "3", condition=FAILED))], router))
    assert record["fit_error"] == CPU_FIT and record["reason"] == "Insufficient cpu"
    assert record["capacity"] == {"resource": "cpu", "request": 1000, "allocatable": 16000,
                                  "free": 16000, "nodes": 2, "room": 16, "largest": 8000,
                                  # no priority: 0, as kube-scheduler reads it; nothing bound
                                  "priority": 0, "room_preempting": 16}
    assert record["message"] == OWN  # the condition's whole message (never cut at 1024 bytes)
    INPUT_ADAPTER.validate_json(json.dumps(record))  # the contract model accepts it
    decoded = decode_input(json.dumps(record).encode()).record
    assert decoded.from_condition and decoded.attempt == f"{record['source']['uid']}#1"


# -- the fold: one explanation per attempt, at the earliest source ------------------------------

W0_COND = (T0 + S, "pods", "MODIFIED", pod("w-0", "3", condition=("False", "Unschedulable",
                                                                  RELEASED)))
W1_COND = (T0 + S, "pods", "MODIFIED", pod("w-1", "4", condition=FAILED))


def _events(at: int) -> list[Any]:
    return [(at, "events", "ADDED", event("w-1.1", "w-1", OWN)),
            (at, "events", "ADDED", event("w-0.1", "w-0", RELEASED))]


UNFIT = {"unfit": {"w-1": CPU_FIT}, "fit": 1, "min_member": 2}


@pytest.mark.parametrize("name, steps, diagnostics, rounds, per_minute", [
    ("conditions only: explained 10 s (the settling time) after the conditions",
     ADDED + [W1_COND, W0_COND, (T0 + 70 * S, "pods", "MODIFIED", pod("w-0", "9",
                                 condition=("False", "Unschedulable", RELEASED)))],
     [("2026-11-02T09:00:11.000000Z", "2026-11-02T09:00:01.000000Z")], 0, 0),
    ("a condition then its Event 50 s later: the explanation comes at the condition's time, "
     "the Events add the rounds and the attempts, no second explanation",
     ADDED + [W1_COND, W0_COND] + _events(T0 + 51 * S),
     [("2026-11-02T09:00:11.000000Z", "2026-11-02T09:00:01.000000Z")], 1, 2),
    ("an Event of the same attempt after it, at once: one explanation, counted once",
     ADDED + [W1_COND] + _events(T0 + S + 1) + [W0_COND],
     [("2026-11-02T09:00:11.000000Z", "2026-11-02T09:00:01.000000Z")], 1, 2),
    ("the Event first, its condition after: the same",
     ADDED + _events(T0 + S) + [W1_COND, W0_COND],
     [("2026-11-02T09:00:11.000000Z", "2026-11-02T09:00:01.000000Z")], 1, 2),
    ("Events only, 50 s late (before this change): explained 50 s later",
     ADDED + _events(T0 + 51 * S),
     [("2026-11-02T09:01:01.000000Z", "2026-11-02T09:00:51.000000Z")], 1, 2),
])
def test_fold_of_conditions_and_events(name: str, steps: list[Any],
                                       diagnostics: list[tuple[str, str]], rounds: int,
                                       per_minute: int) -> None:
    records = run(steps)
    end = T0 + 80 * S
    result = fold(records + [tick(end)])
    assert not result.errors
    got = [d for d in result.diagnostics if d["reason"] == "GangUnschedulable"]
    assert [(d["observed_at"], d["facts"]["since"]) for d in got] == diagnostics, name
    assert all({k: d["facts"][k] for k in UNFIT} == UNFIT for d in got)
    state = result.states["team-a/train"]
    from streams.core.episode import per_minute as attempts
    assert (state.episode.rounds, attempts(state.storm, state.clock)) == (rounds, per_minute)


def test_a_relisted_condition_is_the_same_attempt() -> None:
    """A watcher restart lists the pod again with the same condition (a new router, no
    previous state): the same attempt id, so the fold changes nothing."""
    first = run(ADDED + [W1_COND])
    again = run([(T0 + 30 * S, "pods", "SYNC", pod("w-0", "1")),
                 (T0 + 30 * S, "pods", "SYNC", pod("w-1", "4", condition=FAILED))])
    assert [r["source"]["uid"] for r in conditions_of(again)] == \
        [r["source"]["uid"] for r in conditions_of(first)]
    once, twice = fold(first + [tick(T0 + 30 * S)]), fold(first + again)
    assert twice.states["team-a/train"].recent_cycles == once.states["team-a/train"].recent_cycles
    assert twice.states["team-a/train"].episode == once.states["team-a/train"].episode
    assert twice.diagnostics == once.diagnostics


def test_not_yet_attempted_only_without_an_attempt_in_either_source() -> None:
    """Before any word of the scheduler, explain says NotYetAttempted; once the conditions
    tell the attempts (the Events still to come), it says why the gang does not fit."""
    before = fold(run(ADDED))
    assert "NotYetAttempted" in [r["reason"] for r in
                                 why_pod(before.states["team-a/train"], "team-a/w-0")["reasons"]]
    after = fold(run(ADDED + [W1_COND, W0_COND]) + [tick(T0 + 12 * S)])
    for name in ("team-a/w-0", "team-a/w-1"):
        answer = why_pod(after.states["team-a/train"], name)
        assert [r["reason"] for r in answer["reasons"]] == ["GangUnschedulable"], name
        assert answer["held_at"] == "Filter"


def _stranded_steps(with_condition: bool) -> list[Any]:
    """NonStrict gang of 3 (min-available 2): w-0 alone (held at PreEnqueue, refused), w-1
    (the hold ends), w-2 asking 100 cpu; w-0 and w-1 bind; w-2 is tried and does not fit, its
    Event 66 s late (the real figure) or never."""
    big = ("0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: "
           "2 No preemption victims found for incoming pod.")
    steps: list[Any] = [
        (T0, "pods", "ADDED", pod("w-0", "1", mode="NonStrict")),
        (T0 + S, "pods", "ADDED", pod("w-1", "2", mode="NonStrict")),
        (T0 + S, "pods", "ADDED", pod("w-2", "3", mode="NonStrict", cpu="100")),
        (T0 + 2 * S, "pods", "MODIFIED", pod("w-0", "4", mode="NonStrict", node="n1")),
        (T0 + 2 * S, "pods", "MODIFIED", pod("w-1", "5", mode="NonStrict", node="n2"))]
    if with_condition:
        steps.append((T0 + 2 * S, "pods", "MODIFIED",
                      pod("w-2", "6", mode="NonStrict", cpu="100",
                          condition=("False", "Unschedulable", big))))
    return steps


@pytest.mark.parametrize("name, with_condition, stranded", [
    ("tried and did not fit, its Event late: its condition tells the attempt", True, []),
    ("no attempt visible in either source: stranded 120 s after the bind", False, ["w-2"]),
])
def test_stranded_only_without_an_attempt_in_either_source(name: str, with_condition: bool,
                                                           stranded: list[str]) -> None:
    result = fold(run(_stranded_steps(with_condition)) + [tick(T0 + 130 * S)])
    told = [d["facts"]["stranded"] for d in result.diagnostics
            if d["reason"] == "GangMembersStranded"]
    assert told == ([stranded] if stranded else []), name


def test_an_own_fit_error_that_comes_back_after_a_rejection_is_a_new_attempt() -> None:
    """Found on the real scheduler (cluster scenario ``live-lowered``): w-1's condition says
    its own fit error (rv 2), then a release for another member (rv 3), then its own fit error
    again (rv 4; lastTransitionTime unchanged, the condition stayed False). Three condition
    records with three attempt ids; the fold ends with w-1's last cycle its own fit error, not
    the release (before the ids carried the resourceVersion, the third read as the first,
    already folded, and the release stayed its last cycle)."""
    steps = [(T0, "pods", "ADDED", pod("w-0", "1")),
             (T0, "pods", "ADDED", pod("w-1", "1")),
             (T0 + S, "pods", "MODIFIED", pod("w-1", "2", condition=FAILED)),
             (T0 + 2 * S, "pods", "MODIFIED", pod("w-1", "3", condition=(
                 "False", "Unschedulable", RELEASED))),
             (T0 + 3 * S, "pods", "MODIFIED", pod("w-1", "4", condition=FAILED))]
    records = conditions_of(run(steps))
    assert len({r["source"]["uid"] for r in records}) == 3
    state = fold(run(steps)).states["team-a/train"]
    last = state.members["uid-w-1"]
    assert (last.stage, last.status, last.reason) == ("Filter", "Unschedulable",
                                                      "Insufficient cpu")
