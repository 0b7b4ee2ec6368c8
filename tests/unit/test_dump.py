"""A cluster dump (``kubectl get nodes,pods,podgroups,events -o json``) read as a trace
(``producers.watch.dump``): detected by content, gzipped or not, turned into the records the watcher
publishes, and folded by every command that takes a trace."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from producers.watch.dump import DumpError, read_dump, records_of_dump, trace_lines
from streams.cli import main
from tests.fixtures.builders import kube_pod

RECORDING = Path(__file__).resolve().parents[3] / "shared" / "data" / "koord-v1.8.0" / \
    "gpu-short.json.gz"
GANG = {"gang.scheduling.koordinator.sh/name": "train",
        "gang.scheduling.koordinator.sh/min-available": "2"}


def pod(name: str, uid: str, created: str, scheduler: str = "koord-scheduler") -> dict:
    return kube_pod(name, "ml", uid=uid, rv="10", created=created, annotations=GANG,
                    scheduler=scheduler)


def event(name: str, pod_name: str, uid: str, when: str, reason: str = "FailedScheduling",
          message: str = "0/2 nodes are available: 2 Insufficient cpu.") -> dict:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": "ml", "uid": f"ev-{name}",
                         "creationTimestamp": when},
            "involvedObject": {"kind": "Pod", "namespace": "ml", "name": pod_name, "uid": uid},
            "reason": reason, "message": message, "type": "Warning", "eventTime": when,
            "reportingComponent": "koord-scheduler", "count": 1}


def dump() -> dict:
    """Two gang pods of koord-scheduler (created 10:00:00 and 10:00:02), one pod of a
    scheduler the watch does not follow (volcano), a Node, a FailedScheduling Event of
    train-1 (10:00:05, listed before the pods), one of a pod that is not in the dump (an earlier train-0, 09:59:00) and a Pulled Event."""
    return {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "n1"}},
        event("e2", "train-1", "uid-1", "2026-12-01T10:00:05Z"),
        event("e1", "train-0", "uid-old", "2026-12-01T09:59:00Z"),
        event("e3", "train-0", "uid-0", "2026-12-01T10:00:06Z", reason="Pulled",
              message="pulled"),
        pod("train-1", "uid-1", "2026-12-01T10:00:02Z"),
        pod("train-0", "uid-0", "2026-12-01T10:00:00Z"),
        pod("web", "uid-web", "2026-12-01T10:00:01Z", scheduler="volcano"),
    ]}


def test_records_follow_event_time_and_what_is_left_out_is_counted() -> None:
    out = records_of_dump(dump())
    assert [(r["schema"], r["observed_at"],
             r["object"]["metadata"]["name"] if "object" in r else r["pod"]["name"])
            for r in out.records] == [
        ("gangstate.kube/v1", "2026-12-01T10:00:00.000000Z", "train-0"),
        ("gangstate.kube/v1", "2026-12-01T10:00:02.000000Z", "train-1"),
        ("gangstate.kube/v1", "2026-12-01T10:00:05.000000Z", "e2"),
        ("gangstate.cycle/v1", "2026-12-01T10:00:05.000000Z", "train-1")]
    cycle = out.records[-1]
    assert (cycle["gang"], cycle["stage"], cycle["status"], cycle["reason"], cycle["cycle"]) == (
        "ml/train", "Filter", "Unschedulable", "Insufficient cpu", None)
    assert out.skipped == {"other-scheduler": 1, "pod-gone": 1, "event-reason": 1}
    assert out.used == {"nodes": 1}
    assert "capacity" not in cycle  # train-1 requests no cpu: no room to report


def test_detection_by_content(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps(records_of_dump(dump()).records[0]) + "\n")
    assert read_dump(trace) is None
    plain = tmp_path / "dump.json"
    plain.write_text(json.dumps(dump(), indent=2))
    compact = tmp_path / "compact.json"  # e.g. through `jq -c`: one line, still a List
    compact.write_text(json.dumps(dump()) + "\n")
    assert read_dump(compact) == dump()
    zipped = tmp_path / "dump.json.gz"
    zipped.write_bytes(gzip.compress(json.dumps(dump()).encode()))
    assert read_dump(plain) == read_dump(zipped) == dump()
    assert [n for n, _ in trace_lines(plain)] == [1, 2, 3, 4]
    not_a_list = tmp_path / "pod.json"
    not_a_list.write_text(json.dumps(pod("x", "u", "2026-12-01T10:00:00Z"), indent=2))
    with pytest.raises(DumpError, match="not a Kubernetes List \\(kind 'Pod'\\)"):
        read_dump(not_a_list)
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("hello\n")
    with pytest.raises(DumpError, match="neither a JSON-lines trace nor a Kubernetes List"):
        read_dump(garbage)


def test_fold_and_explain_take_a_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "dump.json.gz"
    path.write_bytes(gzip.compress(json.dumps(dump()).encode()))
    assert main(["fold", str(path), "--at", "2026-12-01T10:01:00Z", "-o", "json"]) == 0
    folded = json.loads(capsys.readouterr().out)
    assert folded["gangs"]["ml/train"]["members"] == 2
    # train-1's own fit error starts a failure episode, reported once its 10 s settle ends
    assert [(d["reason"], d["observed_at"], d["message"]) for d in folded["diagnostics"]] == [
        ("GangUnschedulable", "2026-12-01T10:00:15.000000Z",
         "gang ml/train cannot be scheduled: train-1 did not fit (Insufficient cpu on 2 of 2 "
         "nodes); none of minMember 2 members fit; the scheduler rejects the whole gang and "
         "retries it")]
    assert main(["explain", "pod", "ml/train-1", "--from", str(path), "--at",
                 "2026-12-01T10:01:00Z"]) == 0
    assert "Last cycle:     Filter Unschedulable (Insufficient cpu), cycle number unknown" in \
        capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "kind": "Pod"\n}\n')
    assert main(["fold", str(bad)]) == 2
    assert "not a Kubernetes List" in capsys.readouterr().err


@pytest.mark.skipif(not RECORDING.exists(), reason="the shared recording is not here")
def test_the_recorded_dump_of_the_real_scheduler() -> None:
    """4,441 FailedScheduling Events; 1,687 of them are about the 3 pods in the dump, the
    other 2,754 about an earlier incarnation of the same names (other uids): dropped. Each of
    the 3 pods' PodScheduled=False condition (reason Unschedulable, lastTransitionTime
    03:41:27Z, the latest attempt's message) is one more cycle record, at that time."""
    out = records_of_dump(read_dump(RECORDING))
    schemas = [r["schema"] for r in out.records]
    assert schemas.count("gangstate.cycle/v1") == 1687 + 3
    conditions = [r for r in out.records if r["schema"] == "gangstate.cycle/v1"
                  and r["source"].get("kind") == "condition"]
    assert [(r["observed_at"], r["pod"]["name"], r["status"], r["culprit"])
            for r in conditions] == [
        ("2026-12-01T03:41:27.000000Z", "gb-0", "Rejected", "sc-b/gb-2"),
        ("2026-12-01T03:41:27.000000Z", "gb-1", "Rejected", "sc-b/gb-2"),
        ("2026-12-01T03:41:27.000000Z", "gb-2", "Unschedulable", "sc-b/gb-2")]
    assert schemas.count("gangstate.kube/v1") == 3 + 1687
    assert out.skipped == {"pod-gone": 2754}
    assert out.used == {"nodes": 2}
    # every record whose culprit's fit error is Insufficient nvidia.com/gpu carries the room of
    # the 2 nodes of 1 GPU (nothing bound): 2 allocatable, 2 free, room for 2 members of 1 GPU
    rooms = {json.dumps(r["capacity"], sort_keys=True) for r in out.records
             if r["schema"] == "gangstate.cycle/v1" and "capacity" in r}
    assert [json.loads(r) for r in rooms] == [{
        "resource": "nvidia.com/gpu", "request": 1000, "allocatable": 2000, "free": 2000,
        "nodes": 2, "room": 2, "largest": 1000,
        # the recorded pods have no priority class: priority 0, none lower to preempt
        "priority": 0, "room_preempting": 2}]
    assert {r["gang"] for r in out.records if r["schema"] == "gangstate.cycle/v1"} == {"sc-b/gb"}


@pytest.mark.skipif(not RECORDING.exists(), reason="the shared recording is not here")
def test_fold_of_the_recorded_dump_names_the_culprits_and_the_shortage_once(capsys) -> None:
    """issue 14: the recording (1,687 attempts of the 3 pods in ~14 s) folds to one
    diagnostic naming the culprits and the shortage (3 GPUs needed, 2 in the cluster), and
    every member's explain gives the same answer."""
    assert main(["fold", str(RECORDING), "-o", "json"]) == 0
    folded = json.loads(capsys.readouterr().out)
    text = ("gang sc-b/gb cannot be scheduled: gb-0, gb-1 and gb-2 did not fit (Insufficient "
            "nvidia.com/gpu on 2 of 2 nodes); at most 2 of minMember 3 members fit at once; the "
            "scheduler rejects the whole gang and retries it; it needs 3 x 1 nvidia.com/gpu (3 "
            "members to place); the cluster has 2 allocatable on 2 nodes, room for 2 "
            "members now: freeing capacity cannot make room, it takes a new node (at least 1 "
            "nvidia.com/gpu more), or min-available would have to drop to 2")
    assert [(d["reason"], d["message"]) for d in folded["diagnostics"]] == [
        ("GangUnschedulable", text)]
    answers = set()
    for name in ("gb-0", "gb-1", "gb-2"):
        assert main(["explain", "pod", f"sc-b/{name}", "--from", str(RECORDING)]) == 0
        out = capsys.readouterr().out
        answers.add(out[out.index("Why it is pending:"):])
    assert len(answers) == 1 and f"GangUnschedulable: {text}" in answers.pop()


def native_pod(name: str, created: str, node: str | None = None) -> dict:
    """A member of native gang ml/llm (kube-scheduler's default profile, v1.37): 1 GPU."""
    obj = kube_pod(name, "ml", uid=f"uid-{name}", rv="10", created=created,
                   scheduler="default-scheduler", gpu="1", node=node)
    obj["spec"]["schedulingGroup"] = {"podGroupName": "llm"}
    return obj


def native_dump() -> dict:
    """``kubectl get nodes,pods,workloads,compositepodgroups,podgroups.scheduling.k8s.io,events
    -o json`` of a cluster with Kubernetes' own gang scheduling: 2 nodes of 1 GPU, Workload
    ``llm`` (a Job's), CompositePodGroup ``train``, PodGroup ``llm`` (minCount 3, child of
    ``train``) and its 3 pods of 1 GPU; kube-scheduler (``default-scheduler``) tried the gang
    in one pod-group cycle at 10:00:05: llm-2 did not fit, llm-0 and llm-1 fit and were
    refused for the gang (KS137 texts, tests/unit/test_scheduler_events.py)."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "n1"},
            "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "1"}}}
    refused = ("pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 "
               "remaining, pod group preemption: No preemption victims found for incoming "
               "preemptor")

    def native_event(name: str, pod_name: str, message: str) -> dict:
        return {**event(name, pod_name, f"uid-{pod_name}", "2026-12-01T10:00:05Z",
                        message=message), "reportingComponent": "default-scheduler"}

    return {"apiVersion": "v1", "kind": "List", "items": [
        node, {**node, "metadata": {"name": "n2", "uid": "n2"}},
        native_pod("llm-0", "2026-12-01T10:00:01Z"),
        native_pod("llm-1", "2026-12-01T10:00:01Z"),
        native_pod("llm-2", "2026-12-01T10:00:01Z"),
        {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
         "metadata": {"name": "llm", "namespace": "ml", "uid": "wl", "resourceVersion": "3",
                      "creationTimestamp": "2026-12-01T10:00:00Z"},
         "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "llm"},
                  "podGroupTemplates": [{"name": "workers",
                                         "schedulingPolicy": {"gang": {"minCount": 3}}}]}},
        {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
         "metadata": {"name": "train", "namespace": "ml", "uid": "cpg", "resourceVersion": "4",
                      "creationTimestamp": "2026-12-01T10:00:00Z"},
         "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 1}}}},
        {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
         "metadata": {"name": "llm", "namespace": "ml", "uid": "pg", "resourceVersion": "5",
                      "creationTimestamp": "2026-12-01T10:00:00Z"},
         "spec": {"schedulingPolicy": {"gang": {"minCount": 3}},
                  "parentCompositePodGroupName": "train",
                  "workloadRef": {"workloadName": "llm", "templateName": "workers"}}},
        native_event("llm-2.1", "llm-2", "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."),
        native_event("llm-0.1", "llm-0", refused),
        native_event("llm-1.1", "llm-1", refused),
    ]}


def test_a_dump_of_kubernetes_own_gangs() -> None:
    """Native PodGroups, CompositePodGroups and Workloads are read by their ``kind`` (the
    PodGroup's ``apiVersion`` tells it from Koordinator's), published under their ids, the
    gang's spec first; the pods of ``default-scheduler`` (followed by default) join their
    PodGroup's gang; kube-scheduler's Events become cycle records: llm-2's own fit error
    (culprit, fit error, the room of 2 nodes of 1 GPU) and the refusal of the two that fit
    (GS1: no culprit), whose gang group is the CompositePodGroup's."""
    out = records_of_dump(native_dump())
    gang = "ml/llm@kube-scheduler"
    assert [(r["schema"], r.get("resource") or r["source"]["form"],
             r["object"]["metadata"]["name"] if "object" in r else r["pod"]["name"])
            for r in out.records] == [
        ("gangstate.kube/v1", "workloads", "llm"),
        ("gangstate.kube/v1", "compositepodgroups", "train"),
        ("gangstate.kube/v1", "podgroups", "llm"),
        ("gangstate.kube/v1", "pods", "llm-0"),
        ("gangstate.kube/v1", "pods", "llm-1"),
        ("gangstate.kube/v1", "pods", "llm-2"),
        ("gangstate.kube/v1", "events", "llm-2.1"), ("gangstate.cycle/v1", "FIT", "llm-2"),
        ("gangstate.kube/v1", "events", "llm-0.1"), ("gangstate.cycle/v1", "GS1", "llm-0"),
        ("gangstate.kube/v1", "events", "llm-1.1"), ("gangstate.cycle/v1", "GS1", "llm-1")]
    assert out.records[2]["object"]["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert out.skipped == {} and out.used == {"nodes": 2}
    cycles = [r for r in out.records if r["schema"] == "gangstate.cycle/v1"]
    assert {(r["gang"], r["gang_group"], r["scheduler"]) for r in cycles} == {
        (gang, "ml/composite:train@kube-scheduler", "default-scheduler")}
    own, refused = cycles[0], cycles[1]
    assert (own["stage"], own["status"], own["culprit"], own["fit_error"]) == (
        "Filter", "Unschedulable", "ml/llm-2",
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
    assert own["capacity"] == {"resource": "nvidia.com/gpu", "request": 1000,
                               "allocatable": 2000, "free": 2000, "nodes": 2, "room": 2,
                               "largest": 1000, "priority": 0, "room_preempting": 2}
    assert (refused["stage"], refused["status"], refused["reason"]) == (
        "PostFilter", "Rejected", "GangMinCountUnsatisfiable")
    assert "culprit" not in refused and "capacity" not in refused


def test_fold_takes_a_dump_of_kubernetes_own_gangs(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "native.json"
    path.write_text(json.dumps(native_dump()))
    assert main(["fold", str(path), "--at", "2026-12-01T10:01:00Z", "-o", "json"]) == 0
    folded = json.loads(capsys.readouterr().out)
    assert folded["gangs"]["ml/llm@kube-scheduler"]["members"] == 3
