"""The query side of a fleet (issue 27): rows name their cluster, ``get gangs`` reads one
cluster (``--cluster``, ``--context`` through ``GANGSTATE_CLUSTER_CONTEXTS``,
``$GANGSTATE_CLUSTER``, ``default``) or all of them (``--all-clusters``), ``describe gang`` and
``explain pod`` resolve a name within one cluster, and ``get fleet`` sums each cluster
(``streams.query.answers.fleet_summary``).

The fleet of these tests, folded from records that carry a ``cluster`` field (``default``:
none), read at 2026-12-01T03:42:00Z. Three clusters have a gang ``team-a/llm``, each a
different gang:

| cluster | gang | records | phase | open Warning findings |
|---|---|---|---|---|
| default | team-a/llm | 2 pods, min-available 3 | Gathering (2/3) | GangMembersInsufficient |
| default | team-z/gone | 1 pod, added then deleted (03:40:03, 117 s before: its tombstone is kept) | Deleted | - |
| eu-1 | team-a/llm | 2 pods, min-available 2 | Ready (2/2) | - |
| eu-1 | team-b/etl | 2 pods, min-available 2, bound to n-1 and n-2 | Scheduled (2/2, 2 bound) | - (GangScheduled is Normal) |
| eu-1 | team-c/done | PodGroup minMember 1, its one pod bound then deleted | Finished | - |
| us-2 | team-a/llm | 1 pod of PodGroup llm, which does not exist | NotInitialized (1/?) | GangNotInitialized |
| us-2 | sc-b/gb | the real koord-scheduler excerpt (tests/data/README.md) | Scheduling (3/3) | GangUnschedulable |

The excerpt's 42 FailedScheduling Events (03:41:27-03:41:28) all fall within the 60 s before
03:42:00 (tests/unit/test_query_cli.py counts the same 42 for ``describe gang``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from producers.watch.watching import GangRouter, Publish
from streams.cli.query import format_fleet
from streams.core.fold import PartitionFold
from streams.core.records import Tick
from streams.core.settings import FoldSettings
from streams.core.timefmt import format_time, parse_time
from streams.query.answers import (NotFound, explain_pod, fleet_summary, gang_rows,
                                   resolve_gang)
from streams.settings import SettingsError, cluster_contexts, parse_cluster_contexts
from streams.wire.decoding import decode_input
from streams.wire.traces import fold_lines
from tests.fixtures.builders import at, attempt, kube_pod, pod, pod_line
from tests.unit.test_cli_conventions import run

AT = "2026-12-01T03:42:00Z"
DATA = Path(__file__).resolve().parents[1] / "data"
PG_LABEL = "pod-group.scheduling.sigs.k8s.io"


def _stamp(record: dict[str, Any], cluster: str) -> dict[str, Any]:
    return record if cluster == "default" else {**record, "cluster": cluster}


def pod_record(cluster: str, ns: str, name: str, t: int, *, gang: str | None = None,
               min_available: int | None = None, node: str | None = None,
               phase: str = "Pending", type_: str = "ADDED",
               podgroup: str | None = None) -> dict[str, Any]:
    """A Pod watch record of ``cluster`` at 03:40:``t``."""
    obj = kube_pod(name, ns, uid=f"uid-{cluster}-{ns}-{name}", rv=str(100 + t), gang=gang,
                   min_available=min_available, node=node, phase=phase,
                   labels={PG_LABEL: podgroup} if podgroup else None,
                   created=f"2026-12-01T03:40:{t:02d}Z")
    return _stamp(pod_line(obj, f"2026-12-01T03:40:{t:02d}.000000Z", type_), cluster)


def podgroup_record(cluster: str, ns: str, name: str, t: int, min_member: int) -> dict[str, Any]:
    """A PodGroup (scheduling.sigs.k8s.io) watch record of ``cluster`` at 03:40:``t``."""
    obj = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
           "metadata": {"name": name, "namespace": ns, "uid": f"uid-pg-{cluster}-{name}",
                        "creationTimestamp": f"2026-12-01T03:40:{t:02d}Z",
                        "resourceVersion": str(100 + t)},
           "spec": {"minMember": min_member}, "status": {"phase": "Pending"}}
    return _stamp({"schema": "gangstate.kube/v1", "observed_at":
                   f"2026-12-01T03:40:{t:02d}.000000Z", "resource": "podgroups",
                   "type": "ADDED", "object": obj}, cluster)


def excerpt_records(cluster: str) -> list[dict[str, Any]]:
    """The real excerpt's records (as the watch producer publishes them) in ``cluster``."""
    items = json.loads((DATA / "koord-v1.8.0-gpu-short-excerpt.json").read_text())["items"]
    router, out = GangRouter(), []
    for item in items:
        if item["kind"] in ("Pod", "Event"):
            when = parse_time(item.get("eventTime") or "2026-12-01T03:41:27Z")
            out += [_stamp(a.record, cluster) for a in router.route(
                "pods" if item["kind"] == "Pod" else "events", "SYNC", item, None, when)
                if isinstance(a, Publish)]
    return out


def fleet_records() -> list[dict[str, Any]]:
    """The fleet of the module docstring, in observed_at order."""
    records = [
        pod_record("default", "team-a", "llm-0", 0, gang="llm", min_available=3),
        pod_record("default", "team-a", "llm-1", 1, gang="llm", min_available=3),
        pod_record("default", "team-z", "gone-0", 2, gang="gone", min_available=1),
        pod_record("default", "team-z", "gone-0", 3, gang="gone", min_available=1,
                   type_="DELETED"),
        pod_record("eu-1", "team-a", "llm-0", 0, gang="llm", min_available=2),
        pod_record("eu-1", "team-a", "llm-1", 1, gang="llm", min_available=2),
        pod_record("eu-1", "team-b", "etl-0", 2, gang="etl", min_available=2, node="n-1",
                   phase="Running"),
        pod_record("eu-1", "team-b", "etl-1", 3, gang="etl", min_available=2, node="n-2",
                   phase="Running"),
        podgroup_record("eu-1", "team-c", "done", 4, 1),
        pod_record("eu-1", "team-c", "done-0", 5, podgroup="done", node="n-1",
                   phase="Running"),
        pod_record("eu-1", "team-c", "done-0", 6, podgroup="done", node="n-1",
                   phase="Succeeded", type_="DELETED"),
        pod_record("us-2", "team-a", "llm-0", 7, podgroup="llm"),
    ]
    records += excerpt_records("us-2")
    return sorted(records, key=lambda r: r["observed_at"])


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("fleet") / "fleet.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in fleet_records()))
    return str(path)


@pytest.fixture(scope="module")
def states() -> dict[str, Any]:
    result = fold_lines([(n, json.dumps(r).encode()) for n, r in enumerate(fleet_records())],
                        parse_time(AT))
    assert result.errors == [] and result.set_aside == []
    return result.states


@pytest.fixture(autouse=True)
def _no_configured_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GANGSTATE_CLUSTER", raising=False)
    monkeypatch.delenv("GANGSTATE_CLUSTER_CONTEXTS", raising=False)


def words(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()]


# -- the answers --------------------------------------------------------------------------------

def test_the_three_team_a_llm_gangs_are_three_keys(states) -> None:
    assert sorted(states) == ["eu-1:team-a/llm", "eu-1:team-b/etl", "eu-1:team-c/done",
                              "team-a/llm", "team-z/gone", "us-2:sc-b/gb", "us-2:team-a/llm"]
    assert [(states[k].cluster, states[k].gang, states[k].phase) for k in (
        "team-a/llm", "eu-1:team-a/llm", "us-2:team-a/llm")] == [
        ("default", "team-a/llm", "Gathering"), ("eu-1", "team-a/llm", "Ready"),
        ("us-2", "team-a/llm", "NotInitialized")]


def test_rows_name_their_cluster_and_filter_by_it(states) -> None:
    default = gang_rows(states.values())
    assert default == [{"cluster": "default", "gang": "team-a/llm", "namespace": "team-a",
                        "name": "llm", "scheduler": "koord-scheduler", "phase": "Gathering",
                        "members": 2, "bound": 0, "waiting": 0, "min_member": 3,
                        "representative": None}]
    eu = gang_rows(states.values(), cluster="eu-1")
    assert [(r["cluster"], r["gang"], r["phase"], r["members"], r["bound"]) for r in eu] == [
        ("eu-1", "team-a/llm", "Ready", 2, 0), ("eu-1", "team-b/etl", "Scheduled", 2, 2),
        ("eu-1", "team-c/done", "Finished", 0, 0)]
    every = gang_rows(states.values(), cluster=None)
    # sorted by cluster, then namespace/name; the Deleted tombstone left out as before
    assert [(r["cluster"], r["gang"]) for r in every] == [
        ("default", "team-a/llm"), ("eu-1", "team-a/llm"), ("eu-1", "team-b/etl"),
        ("eu-1", "team-c/done"), ("us-2", "sc-b/gb"), ("us-2", "team-a/llm")]
    assert [r["gang"] for r in gang_rows(states.values(), phase="Deleted", cluster=None)] == [
        "team-z/gone"]
    assert gang_rows(states.values(), cluster="ap-3") == []
    with pytest.raises(ValueError, match="cluster 'EU-1' is not a DNS-1123 label"):
        gang_rows(states.values(), cluster="EU-1")


def test_a_name_is_resolved_within_one_cluster(states) -> None:
    assert resolve_gang(states, "team-a/llm").cluster == "default"
    assert resolve_gang(states, "team-a/llm", cluster="eu-1").key == "eu-1:team-a/llm"
    assert resolve_gang(states, "team-a/llm", cluster="us-2").phase == "NotInitialized"
    with pytest.raises(NotFound, match="^gang sc-b/gb not found$"):
        resolve_gang(states, "sc-b/gb")
    with pytest.raises(NotFound, match="^gang team-b/etl not found in cluster us-2$"):
        resolve_gang(states, "team-b/etl", cluster="us-2")
    # a key is no name: it never escapes the chosen cluster
    with pytest.raises(NotFound, match=r"^gang eu-1:team-a/llm not found \(a namespace has no "
                                       r"':'; for cluster eu-1's gang: team-a/llm --cluster "
                                       r"eu-1\)$"):
        resolve_gang(states, "eu-1:team-a/llm")


@pytest.mark.parametrize("argv", [
    ["describe", "gang", "eu-1:team-a/llm"],
    ["describe", "gang", "llm", "-n", "eu-1:team-a"],
    ["explain", "pod", "team-a/llm-0", "--gang", "eu-1:team-a/llm"],
])
def test_a_key_given_as_a_name_is_a_usage_error(capsys, trace, argv) -> None:
    status, out, err = run(capsys, *argv, "--from", trace, "--at", AT)
    assert (status, out) == (2, "")
    assert err.strip().splitlines()[-1].endswith(
        "'eu-1:team-a/llm' is not NAMESPACE/NAME: a namespace has no ':' (for gang team-a/llm "
        "of cluster eu-1, give team-a/llm --cluster eu-1)")


def test_explain_pod_finds_the_pod_of_its_cluster(states) -> None:
    """llm-0 is a pod of each cluster's team-a/llm: each answer is its own gang's."""
    default = explain_pod(states, "team-a/llm-0")
    assert "cluster" not in default and default["gang_phase"] == "Gathering"
    assert [r["reason"] for r in default["reasons"]] == ["GangMembersInsufficient"]
    us = explain_pod(states, "team-a/llm-0", cluster="us-2")
    assert (us["cluster"], us["gang"], us["held_at"]) == ("us-2", "team-a/llm", "PreEnqueue")
    assert [r["reason"] for r in us["reasons"]] == ["GangNotInitialized"]
    eu = explain_pod(states, "team-a/llm-0", "team-a/llm", cluster="eu-1")
    assert (eu["cluster"], eu["gang_phase"], eu["held_at"]) == ("eu-1", "Ready", None)
    with pytest.raises(NotFound, match="^pod sc-b/gb-0 is not a live member of any known "
                                       "gang in cluster eu-1$"):
        explain_pod(states, "sc-b/gb-0", cluster="eu-1")
    # the fold's clock is asked for the gang's key (the partition of eu-1's, us-2's key)
    asked: list[str] = []
    explain_pod(states, "sc-b/gb-0", now=lambda key: asked.append(key) or None, cluster="us-2")
    assert asked == ["us-2:sc-b/gb"]


NOT_HEARD = {"last_tick": None, "tick_behind_seconds": None}
"""A cluster whose watch producer's ticks were not folded (a trace)."""


def test_the_fleet_summary_of_the_fleet(states) -> None:
    """Worked out from the table of the module docstring."""
    assert fleet_summary(states.items()) == [
        {"cluster": "default", "gangs": 1,
         "phases": {"NotInitialized": 0, "Gathering": 1, "Ready": 0, "Scheduling": 0,
                    "Scheduled": 0, "Degraded": 0, "other": 0},
         "warning_gangs": 1, "warnings": 1, "failed_events_per_minute": 0, **NOT_HEARD},
        {"cluster": "eu-1", "gangs": 3,
         "phases": {"NotInitialized": 0, "Gathering": 0, "Ready": 1, "Scheduling": 0,
                    "Scheduled": 1, "Degraded": 0, "other": 1},
         "warning_gangs": 0, "warnings": 0, "failed_events_per_minute": 0, **NOT_HEARD},
        {"cluster": "us-2", "gangs": 2,
         "phases": {"NotInitialized": 1, "Gathering": 0, "Ready": 0, "Scheduling": 1,
                    "Scheduled": 0, "Degraded": 0, "other": 0},
         "warning_gangs": 2, "warnings": 2, "failed_events_per_minute": 42, **NOT_HEARD}]


def test_the_fleet_summary_counts_by_hand() -> None:
    """Hand-built states, folded by ``PartitionFold`` under their keys (the cluster is the
    key's). eu-1: ns/g (minMember 2: g-0, g-1) whose g-1 fails to fit once a second at
    t=1..30, its own Event each time; ns/h (minMember 3: h-0 only, a GangMembersInsufficient
    hold). us-2: ns/g (minMember 2: g-0 only, held too). Phases: eu-1 ns/g Scheduling (g-1's
    last attempt failed at Filter: a member in a cycle), the two held ones Gathering. Findings:
    eu-1 ns/g has its open
    episode (GangUnschedulable), eu-1 ns/h and us-2 ns/g their hold: 3 Warning gangs, one
    each. The storm of eu-1 ns/g read at its own clock (t=30): the 30 Events of the seconds
    in (t=-30, t=30]: 30; read at t=61: those in (1, 61]: t=2..30, 29; at t=90: none."""
    store: dict[str, Any] = {}
    fold = PartitionFold(store, FoldSettings())
    short = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    for rec in [pod("g-0", 0), pod("g-1", 0)] + [
            attempt("g-1", t, "ev-g1", "Filter", "Unschedulable", count=t,
                    reason="Insufficient nvidia.com/gpu", culprit="g-1", fit_error=short,
                    waited=0) for t in range(1, 31)]:
        fold.feed("eu-1:ns/g", rec)
    fold.feed("eu-1:ns/h", pod("h-0", 5, gang="ns/h", min_available="3"))
    fold.feed("us-2:ns/g", pod("g-0", 7))
    assert sorted(store) == ["eu-1:ns/g", "eu-1:ns/h", "us-2:ns/g"]
    rows = fleet_summary(store.items())
    assert [(r["cluster"], r["gangs"], r["phases"]["Gathering"], r["phases"]["Scheduling"],
             r["warning_gangs"], r["warnings"], r["failed_events_per_minute"])
            for r in rows] == [("eu-1", 2, 1, 1, 2, 2, 30), ("us-2", 1, 1, 0, 1, 1, 0)]
    assert sum(rows[0]["phases"].values()) == 2 and sum(rows[1]["phases"].values()) == 1
    later = fleet_summary(store.items(), lambda key: at(61))
    assert [r["failed_events_per_minute"] for r in later] == [29, 0]
    quiet = fleet_summary(store.items(), lambda key: at(90))
    assert [r["failed_events_per_minute"] for r in quiet] == [0, 0]
    assert fleet_summary([]) == []


def test_clusters_heard_by_their_ticks_have_rows_and_a_last_tick() -> None:
    """``PartitionFold.heard``: eu-1's watch producer ticked at t=10, idle-3's at t=12 (a
    connected cluster with no gang), us-2's at t=39 and t=40; the fold's own final tick (no
    producer) is no cluster's. eu-1 has gang ns/h (held: 1 of minMember 3). Rows: every
    cluster heard, eu-1 with its gang, idle-3 and us-2 with none; behind the latest tick
    (us-2's, t=40): 30 s, 28 s, 0 s."""
    store: dict[str, Any] = {}
    fold = PartitionFold(store, FoldSettings())
    fold.feed(None, Tick(at(10), "eu-1"))
    fold.feed("eu-1:ns/h", pod("h-0", 11, gang="ns/h", min_available="3"))
    for t, cluster in ((12, "idle-3"), (39, "us-2"), (40, "us-2")):
        fold.feed(None, Tick(at(t), cluster))
    fold.feed(None, Tick(at(50)))
    assert fold.heard == {"eu-1": at(10), "idle-3": at(12), "us-2": at(40)}
    rows = fleet_summary(store.items(), heard=fold.heard)
    assert [(r["cluster"], r["gangs"], r["warning_gangs"], r["last_tick"],
             r["tick_behind_seconds"]) for r in rows] == [
        ("eu-1", 1, 1, format_time(at(10)), 30), ("idle-3", 0, 0, format_time(at(12)), 28),
        ("us-2", 0, 0, format_time(at(40)), 0)]
    assert [line.split()[-2:] for line in format_fleet(rows).splitlines()[1:]] == [
        ["30s", "behind"], ["28s", "behind"], ["0s", "behind"]]
    # a tick record's cluster, as the decoder reads it: absent is default
    assert decode_input('{"schema": "gangstate.tick/v1", "observed_at": '
                        '"2026-12-01T00:00:00Z", "cluster": "eu-1"}').record.cluster == "eu-1"
    assert decode_input('{"schema": "gangstate.tick/v1", '
                        '"observed_at": "2026-12-01T00:00:00Z"}').record.cluster == "default"


# -- the context mapping ------------------------------------------------------------------------

def test_the_context_mapping() -> None:
    assert parse_cluster_contexts("kind-eu=eu-1,prod-us=us-2") == {"kind-eu": "eu-1",
                                                                    "prod-us": "us-2"}
    assert parse_cluster_contexts(" kind-eu = eu-1 , ,arn:aws:eks:eu-west-1:1:cluster/p=eu-1,") \
        == {"kind-eu": "eu-1", "arn:aws:eks:eu-west-1:1:cluster/p": "eu-1"}
    assert parse_cluster_contexts("") == {}
    for text, message in [
            ("kind-eu", "'kind-eu' is not CONTEXT=CLUSTER (e.g. kind-eu=eu-1)"),
            ("=eu-1", "'=eu-1' is not CONTEXT=CLUSTER"),
            ("kind-eu=EU_1", "context 'kind-eu': cluster 'EU_1' is not a DNS-1123 label"),
            ("kind-eu=", "context 'kind-eu': cluster '' is not a DNS-1123 label"),
            ("a=eu-1,a=us-2", "context 'a' is given two clusters, 'eu-1' and 'us-2'")]:
        with pytest.raises(ValueError) as err:
            parse_cluster_contexts(text)
        assert str(err.value).startswith(message), text


def test_a_bad_context_mapping_is_one_line(monkeypatch, capsys, trace) -> None:
    monkeypatch.setenv("GANGSTATE_CLUSTER_CONTEXTS", "kind-eu=EU")
    with pytest.raises(SettingsError, match="^GANGSTATE_CLUSTER_CONTEXTS='kind-eu=EU': "):
        cluster_contexts()
    status, out, err = run(capsys, "describe", "gang", "team-a/llm", "--context", "kind-eu",
                           "--from", trace, "--at", AT)
    assert (status, out) == (2, "")
    assert err.startswith("gangstate: GANGSTATE_CLUSTER_CONTEXTS='kind-eu=EU': ")
    assert "cluster 'EU' is not a DNS-1123 label" in err and err.count("\n") == 1


def test_a_bad_cluster_id_in_the_environment_is_one_plain_line(monkeypatch, capsys,
                                                                trace) -> None:
    """``GANGSTATE_CLUSTER=Bad_1``: exit 2 and the variable, its value and why, without
    pydantic's ``Value error,`` in between (a new user's run)."""
    monkeypatch.setenv("GANGSTATE_CLUSTER", "Bad_1")
    status, out, err = run(capsys, "get", "fleet", "--from", trace, "--at", AT)
    assert (status, out) == (2, "")
    assert err == ("gangstate: GANGSTATE_CLUSTER='Bad_1': cluster 'Bad_1' is not a DNS-1123 "
                   "label (lowercase letters, digits and '-', starting and ending with a "
                   "letter or digit)\n")


# -- the commands -------------------------------------------------------------------------------

HEADER = ["NAMESPACE", "NAME", "SCHEDULER", "PHASE", "MEMBERS", "BOUND", "WAITING",
          "REPRESENTATIVE"]

ALL_CLUSTERS = """\
CLUSTER   NAMESPACE   NAME   SCHEDULER         PHASE            MEMBERS   BOUND   WAITING   REPRESENTATIVE
default   team-a      llm    koord-scheduler   Gathering        2/3       0       0         <none>
eu-1      team-a      llm    koord-scheduler   Ready            2/2       0       0         <none>
eu-1      team-b      etl    koord-scheduler   Scheduled        2/2       2       0         <none>
eu-1      team-c      done   koord-scheduler   Finished         0/1       0       0         <none>
us-2      sc-b        gb     koord-scheduler   Scheduling       3/3       0       0         <none>
us-2      team-a      llm    koord-scheduler   NotInitialized   1/?       0       0         <none>
"""


def test_get_gangs_reads_the_configured_cluster(capsys, monkeypatch, trace) -> None:
    status, out, _ = run(capsys, "get", "gangs", "--from", trace, "--at", AT)
    assert status == 0
    assert words(out) == [HEADER, ["team-a", "llm", "koord-scheduler", "Gathering", "2/3", "0",
                                   "0", "<none>"]]
    status, out, _ = run(capsys, "get", "gangs", "--from", trace, "--at", AT, "--cluster",
                         "us-2")
    assert words(out) == [HEADER,
                          ["sc-b", "gb", "koord-scheduler", "Scheduling", "3/3", "0", "0",
                           "<none>"],
                          ["team-a", "llm", "koord-scheduler", "NotInitialized", "1/?", "0",
                           "0", "<none>"]]
    monkeypatch.setenv("GANGSTATE_CLUSTER", "eu-1")
    status, out, _ = run(capsys, "get", "gangs", "--from", trace, "--at", AT)
    assert [w[:4] for w in words(out)[1:]] == [
        ["team-a", "llm", "koord-scheduler", "Ready"],
        ["team-b", "etl", "koord-scheduler", "Scheduled"],
        ["team-c", "done", "koord-scheduler", "Finished"]]
    status, out, err = run(capsys, "get", "gangs", "--from", trace, "--at", AT, "-n", "sc-b")
    assert (status, out, err) == (  # default has 1 gang, us-2 has 2 (the fleet's table)
        0, "", "No gangs found in namespace sc-b in cluster eu-1 (other clusters have 3 gangs "
               "in all: default, us-2; --cluster CLUSTER or --all-clusters shows them).\n")
    # --cluster wins over $GANGSTATE_CLUSTER
    status, out, _ = run(capsys, "get", "gangs", "--from", trace, "--at", AT, "--cluster",
                         "default", "-o", "name")
    assert (status, out) == (0, "gang/team-a/llm\n")


def test_get_gangs_all_clusters(capsys, trace) -> None:
    status, out, _ = run(capsys, "get", "gangs", "--from", trace, "--at", AT, "--all-clusters")
    assert (status, out) == (0, ALL_CLUSTERS)
    status, out, _ = run(capsys, "get", "gangs", "--from", trace, "--at", AT, "--all-clusters",
                         "-o", "name")
    assert out == ("gang/team-a/llm\ngang/eu-1:team-a/llm\ngang/eu-1:team-b/etl\n"
                   "gang/eu-1:team-c/done\ngang/us-2:sc-b/gb\ngang/us-2:team-a/llm\n")
    status, out, _ = run(capsys, "get", "gangs", "--from", trace, "--at", AT, "--all-clusters",
                         "-n", "team-a", "-o", "json")
    assert [(r["cluster"], r["gang"], r["phase"]) for r in json.loads(out)["gangs"]] == [
        ("default", "team-a/llm", "Gathering"), ("eu-1", "team-a/llm", "Ready"),
        ("us-2", "team-a/llm", "NotInitialized")]
    status, out, _ = run(capsys, "get", "gangs", "--from", trace, "--at", AT, "--all-clusters",
                         "-n", "team-a", "-o", "wide")
    assert words(out)[0][:2] == ["CLUSTER", "NAMESPACE"]
    assert [w[:3] + w[5:7] for w in words(out)[1:]] == [
        ["default", "team-a", "llm", "2", "3"], ["eu-1", "team-a", "llm", "2", "2"],
        ["us-2", "team-a", "llm", "1", "<none>"]]


@pytest.mark.parametrize("argv, message", [
    (["get", "gangs", "--cluster", "eu-1", "--all-clusters"],
     "--cluster and --all-clusters exclude each other"),
    (["get", "gangs", "--context", "kind-eu", "--all-clusters"],
     "--context and --all-clusters exclude each other"),
    (["describe", "gang", "team-a/llm", "--cluster", "eu-1", "--context", "kind-eu"],
     "--cluster and --context exclude each other"),
    (["explain", "pod", "team-a/llm-0", "--cluster", "Eu-1"],
     "cluster 'Eu-1' is not a DNS-1123 label"),
])
def test_cluster_usage_errors(capsys, argv, message) -> None:
    status, out, err = run(capsys, *argv)
    assert (status, out) == (2, "")
    assert f"Error: {message}" in err or message in err.splitlines()[-1]


def test_describe_gang_picks_the_gang_of_the_cluster(capsys, monkeypatch, trace) -> None:
    status, out, _ = run(capsys, "describe", "gang", "team-a/llm", "--from", trace, "--at", AT)
    assert status == 0 and "Cluster:" not in out
    assert out.splitlines()[:4] == ["Name:           llm", "Namespace:      team-a",
                                    "Scheduler:      koord-scheduler",
                                    "Phase:          Gathering"]
    assert "Min member:     3\n" in out
    status, out, _ = run(capsys, "describe", "gang", "llm", "-n", "team-a", "--cluster", "eu-1",
                         "--from", trace, "--at", AT)
    assert status == 0
    assert out.splitlines()[:5] == ["Cluster:        eu-1", "Name:           llm",
                                    "Namespace:      team-a", "Scheduler:      koord-scheduler",
                                    "Phase:          Ready"]
    assert "Min member:     2\n" in out
    monkeypatch.setenv("GANGSTATE_CLUSTER_CONTEXTS", "kind-eu=eu-1,prod-us=us-2")
    status, out, _ = run(capsys, "describe", "gang", "team-a/llm", "--context", "prod-us",
                         "--from", trace, "--at", AT, "-o", "json")
    doc = json.loads(out)
    assert (status, doc["cluster"], doc["gang"], doc["phase"]) == (
        0, "us-2", "team-a/llm", "NotInitialized")
    assert [f["reason"] for f in doc["findings"]] == ["GangNotInitialized"]
    status, out, _ = run(capsys, "describe", "gang", "sc-b/gb", "--context", "prod-us",
                         "--from", trace, "--at", AT)
    assert ("Storm:          42 FailedScheduling Events per minute (the last 60 s of event "
            "time)\n") in out
    status, out, err = run(capsys, "describe", "gang", "sc-b/gb", "--context", "kind-eu",
                           "--from", trace, "--at", AT)
    assert (status, out, err) == (1, "", "gangstate describe: gang sc-b/gb not found in "
                                         "cluster eu-1\n")
    status, out, err = run(capsys, "describe", "gang", "sc-b/gb", "--context", "kind-us",
                           "--from", trace, "--at", AT)
    assert (status, out) == (2, "")
    assert err == ("gangstate describe: --context kind-us: no cluster for this kubeconfig "
                   "context (it maps kind-eu, prod-us); add kind-us=CLUSTER to "
                   "GANGSTATE_CLUSTER_CONTEXTS, or give --cluster CLUSTER\n")


def test_an_unmapped_context_without_a_mapping(capsys, trace) -> None:
    status, out, err = run(capsys, "explain", "pod", "team-a/llm-0", "--context", "kind-eu",
                           "--from", trace, "--at", AT)
    assert (status, out) == (2, "")
    assert err == ("gangstate explain: --context kind-eu: no cluster for this kubeconfig "
                   "context (GANGSTATE_CLUSTER_CONTEXTS is not set); add kind-eu=CLUSTER to "
                   "GANGSTATE_CLUSTER_CONTEXTS, or give --cluster CLUSTER\n")


def test_explain_pod_picks_the_pod_of_the_cluster(capsys, monkeypatch, trace) -> None:
    status, out, _ = run(capsys, "explain", "pod", "team-a/llm-0", "--from", trace, "--at", AT)
    assert status == 0 and out.startswith("Pod:            team-a/llm-0\n")
    assert "  GangMembersInsufficient: gang team-a/llm has 2 of minMember 3 pods" in out
    status, out, _ = run(capsys, "explain", "pod", "team-a/llm-0", "--cluster", "us-2",
                         "--from", trace, "--at", AT)
    assert status == 0
    assert out.splitlines()[:2] == ["Cluster:        us-2",
                                    "Pod:            team-a/llm-0"]
    assert "Held at:        PreEnqueue\n" in out and "  GangNotInitialized: " in out
    monkeypatch.setenv("GANGSTATE_CLUSTER_CONTEXTS", "kind-eu=eu-1")
    status, out, _ = run(capsys, "explain", "pod", "team-a/llm-0", "--context", "kind-eu",
                         "--gang", "team-a/llm", "--from", trace, "--at", AT, "-o", "json")
    doc = json.loads(out)
    assert (status, doc["cluster"], doc["gang_phase"], doc["held_at"]) == (
        0, "eu-1", "Ready", None)
    status, out, err = run(capsys, "explain", "pod", "sc-b/gb-0", "--from", trace, "--at", AT)
    assert (status, err) == (1, "gangstate explain: pod sc-b/gb-0 is not a live member of any "
                                "known gang\n")
    status, out, err = run(capsys, "explain", "pod", "team-a/llm-0", "--gang", "team-b/etl",
                           "--cluster", "us-2", "--from", trace, "--at", AT)
    assert (status, err) == (1, "gangstate explain: gang team-b/etl not found in cluster "
                                "us-2\n")


FLEET = """\
CLUSTER   GANGS   NOTINITIALIZED   GATHERING   READY   SCHEDULING   SCHEDULED   DEGRADED   OTHER   WARNINGS   STORM   LAST TICK
default   1       0                1           0       0            0           0          0       1          0       <none>
eu-1      3       0                0           1       0            1           0          1       0          0       <none>
us-2      2       1                0           0       1            0           0          0       2          42      <none>
"""


def test_get_fleet(capsys, trace) -> None:
    status, out, _ = run(capsys, "get", "fleet", "--from", trace, "--at", AT)
    assert (status, out) == (0, FLEET)
    status, out, _ = run(capsys, "get", "fleet", "--from", trace, "--at", AT, "-o", "json")
    doc = json.loads(out)
    assert [r["cluster"] for r in doc["clusters"]] == ["default", "eu-1", "us-2"]
    assert doc["clusters"][2] == {
        "cluster": "us-2", "gangs": 2,
        "phases": {"NotInitialized": 1, "Gathering": 0, "Ready": 0, "Scheduling": 1,
                   "Scheduled": 0, "Degraded": 0, "other": 0},
        "warning_gangs": 2, "warnings": 2, "failed_events_per_minute": 42, **NOT_HEARD}
    # 03:42:29: the Events of 03:41:27-28 are more than 60 s back, the last two (03:41:41,
    # items 3116 and 3126) are not; 03:42:42: none is left
    status, out, _ = run(capsys, "get", "fleet", "--from", trace, "--at",
                         "2026-12-01T03:42:29Z")
    assert words(out)[3] == ["us-2", "2", "1", "0", "0", "1", "0", "0", "0", "2", "2", "<none>"]
    status, out, _ = run(capsys, "get", "fleet", "--from", trace, "--at",
                         "2026-12-01T03:42:42Z")
    assert words(out)[3] == ["us-2", "2", "1", "0", "0", "1", "0", "0", "0", "2", "0", "<none>"]
    status, out, err = run(capsys, "get", "fleet", "--from", trace, "--at",
                           "2026-12-01T03:00:00Z")
    assert (status, out, err) == (0, "", "No gangs found.\n")


def test_help_shows_the_shapes(capsys) -> None:
    for argv, shapes in [
            (["get", "gangs"], ["--all-clusters", "--cluster CLUSTER", "--context CONTEXT",
                                "eu-1", "CONTEXT=CLUSTER", "GANGSTATE_CLUSTER_CONTEXTS"]),
            (["describe", "gang"], ["--cluster CLUSTER", "--context CONTEXT", "eu-1"]),
            (["explain", "pod"], ["--cluster CLUSTER", "--context CONTEXT", "eu-1"]),
            (["get", "fleet"], ["STORM", "WARNINGS", "eu-1", "DNS-1123"])]:
        status, out, _ = run(capsys, *argv, "--help")
        text = " ".join(out.split())
        assert status == 0 and all(s in text for s in shapes), (argv, out)


def test_from_names_the_cluster_of_each_trace(capsys) -> None:
    """``--from CLUSTER=TRACE``: one recorded case (gang sc-fits/ok, 2 of 2 bound) given as
    east's, as west's and as it is (default's) is three gangs; a bad cluster is one line."""
    case = str(Path(__file__).resolve().parents[1] / "cases" / "recorded" / "fits"
               / "trace.jsonl")
    status, out, _ = run(capsys, "get", "gangs", "--all-clusters", "--from", f"east={case}",
                         "--from", f"west={case}", "--from", case)
    assert status == 0
    assert [w[:5] for w in words(out)[1:]] == [
        ["default", "sc-fits", "ok", "koord-scheduler", "Scheduled"],
        ["east", "sc-fits", "ok", "koord-scheduler", "Scheduled"],
        ["west", "sc-fits", "ok", "koord-scheduler", "Scheduled"]]
    status, out, err = run(capsys, "get", "gangs", "--from", f"East={case}")
    assert (status, out) == (2, "")
    assert err == (f"gangstate get: --from East={case}: cluster 'East' is not a DNS-1123 label "
                   f"(lowercase letters, digits and '-', starting and ending with a letter or "
                   f"digit)\n")
