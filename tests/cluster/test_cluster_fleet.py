"""One gangstate for a fleet of clusters, on two real control planes (issue 27, docs/fleet.md).

Two local control planes, ``east`` (the session's) and ``west`` (this module's), each with its
own koord-scheduler v1.8.0 (the shim build, ``GANGSTATE_CLUSTER`` set), its own watch
producer and its own Event sink (each with that cluster's credentials, the shipped RBAC), on
one Kafka and one worker. Both have namespace ``fleet`` and gang ``fleet/llm`` (minMember 3,
1 ``nvidia.com/gpu`` a member; each cluster has 2 GPUs):

- in ``east`` it has 2 of its 3 pods: held at PreEnqueue, told ``GangMembersInsufficient``;
- in ``west`` it has all 3: it never fits, told ``GangUnschedulable``, then held by gangstate
  (``HoldGang`` for ``west`` only, applied by west's shim, ``GangHeld``).

Each cluster's pods get only their own cluster's Events; the worker's table has both gangs
apart (``get gangs --all-clusters``, ``get fleet``); a restart of east's watch producer does
not disturb west; the offline fold of the merged log says what each cluster's sink wrote.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any, Iterator

import pytest
from kubernetes import client

from streams.core.fold import FoldSettings
from streams.dev.localcluster import (Chain, controlplane_module, create_namespace, gang_pod,
                                     pod_events)
from streams.kafka.publishing import ensure_topics
from streams.kafka.reading import read_all
from streams.settings import Settings, Topics
from tests.cluster.conftest import GRACE_SECONDS, STRANDED_SECONDS
from tests.cluster.kube import assert_events_agree_with_fold, wait_for

NS, GANG = "fleet", "llm"
TTL_SECONDS, RENEW_SECONDS = 20, 5


def shim_env(settings: Settings, cluster: str, run: str) -> dict[str, str]:
    """The shim build's environment for ``cluster`` of the fleet's Kafka."""
    return {"KAFKA_BOOTSTRAP_SERVERS": settings.bootstrap or "", **settings.security.env(),
            "GANGSTATE_TOPIC_PREFIX": settings.topics.prefix,
            "GANGSTATE_SHIM_ID": f"fleet-shim-{cluster}-{run}", "GANGSTATE_CLUSTER": cluster}


@pytest.fixture(scope="module")
def fleet(local_cluster: Any, kafka_bootstrap: str,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``east`` (the session's control plane: the worker, its watch and sink) and ``west`` (a
    second control plane: its watch and sink) on one Kafka; each scheduler the shim build of
    its cluster. Yields ``{"settings", "east", "west"}`` (chains) and ``"core"`` (cluster ->
    admin CoreV1Api)."""
    run = uuid.uuid4().hex[:8]
    settings = Settings(bootstrap=kafka_bootstrap, topics=Topics(f"fleet-{run}."),
                        partitions=4, app_id=f"gangstate-fleet-{run}",
                        fold=FoldSettings(grace_seconds=GRACE_SECONDS,
                                          stranded_seconds=STRANDED_SECONDS, holds=True,
                                          hold_ttl_seconds=TTL_SECONDS,
                                          hold_renew_seconds=RENEW_SECONDS))
    ensure_topics(settings)
    cp = controlplane_module()
    west = cp.LocalCluster(shim=shim_env(settings, "west", run),
                           progress=lambda line: print(line, flush=True))
    west.start(timeout=180)
    chains: list[Chain] = []
    try:
        east_chain = Chain(local_cluster, settings, tmp_path_factory.mktemp("fleet-east"),
                           cluster_id="east")
        chains.append(east_chain.start(ready_timeout=180))
        west_chain = Chain(west, settings, tmp_path_factory.mktemp("fleet-west"),
                           cluster_id="west", components=("watch", "sink"))
        chains.append(west_chain.start(ready_timeout=120))
        local_cluster.use_shim(shim_env(settings, "east", run), timeout=120)
        core = {"east": client.CoreV1Api(local_cluster.api_client("admin")),
                "west": client.CoreV1Api(west.api_client("admin"))}
        yield {"settings": settings, "east": east_chain, "west": west_chain, "core": core}
    finally:
        local_cluster.use_shim(None, timeout=120)
        for chain in chains:
            chain.stop()
        west.stop()


def ours(core: client.CoreV1Api, pods: list[str]) -> dict[str, list[tuple[str, str]]]:
    """gangstate's Events on each of ``pods`` of namespace ``fleet``: ``(reason, message)``."""
    return {p: [(e["reason"], e["message"]) for e in pod_events(core, NS, p)
                if e["from"] == "gangstate"] for p in pods}


def reasons(core: client.CoreV1Api, pods: list[str]) -> set[str]:
    """The reasons of gangstate's Events on any of ``pods``."""
    return {r for rows in ours(core, pods).values() for r, _ in rows}


def commands(settings: Settings) -> list[dict[str, Any]]:
    """Every command the worker wrote so far."""
    topic = settings.topics.commands
    return read_all(settings, [topic])[topic]


def gangstate(*args: str) -> str:
    """``gangstate ARGS`` as a user runs it; its standard output (fails on a non-zero exit)."""
    done = subprocess.run([sys.executable, "-m", "streams.cli", *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_two_clusters_same_gang_names_each_told_its_own_story(fleet: dict[str, Any]) -> None:
    east, west = fleet["core"]["east"], fleet["core"]["west"]
    settings, server = fleet["settings"], fleet["east"].server
    pods = [f"{GANG}-{i}" for i in range(3)]
    for core in (east, west):
        create_namespace(core, NS)
    for p in pods[:2]:
        east.create_namespaced_pod(NS, gang_pod(NS, p, gang=GANG, min_available=3, gpu=1))
    for p in pods:
        west.create_namespaced_pod(NS, gang_pod(NS, p, gang=GANG, min_available=3, gpu=1))

    # east: held at PreEnqueue, short of one pod
    wait_for("GangMembersInsufficient in east",
             lambda: reasons(east, pods[:2]) >= {"GangMembersInsufficient"}, 90)
    [(_, short)] = ours(east, ["llm-0"])["llm-0"][:1]
    assert short.startswith("gang fleet/llm has 2 of minMember 3 pods"), short
    # west: never fits, then held by gangstate through west's shim only
    wait_for("GangHeld in west", lambda: "GangHeld" in reasons(west, pods), 180)
    told_west = reasons(west, pods)
    assert {"GangUnschedulable", "GangHeld"} <= told_west, told_west
    assert "GangMembersInsufficient" not in told_west
    unschedulable = [m for r, m in ours(west, ["llm-0"])["llm-0"] if r == "GangUnschedulable"]
    assert unschedulable and unschedulable[0].startswith("gang fleet/llm cannot be scheduled"), \
        unschedulable
    assert "at most 2 of minMember 3 members fit" in unschedulable[0]
    told_east = reasons(east, pods[:2])
    assert told_east.isdisjoint({"GangUnschedulable", "GangHeld"}), told_east

    # the commands: for west's gang group only, and applied by west's shim only
    held = [c for c in commands(settings) if c["type"] == "HoldGang"]
    assert held and {(c.get("cluster"), c["gang_group"]) for c in held} == {("west", "fleet/llm")}
    acks = [r for r in read_all(settings, [settings.topics.gang_events])[
        settings.topics.gang_events] if r.get("schema") == "gangstate.ack/v1"]
    assert acks and {(a.get("cluster"), a["gang_group"]) for a in acks} == {("west", "fleet/llm")}

    # the table: both gangs, apart
    rows = json.loads(gangstate("get", "gangs", "--all-clusters", "--server", server,
                                "-o", "json"))["gangs"]
    got = sorted((r["cluster"], r["namespace"], r["name"], r["phase"]) for r in rows
                 if r["namespace"] == NS)
    assert [(c, n, g) for c, n, g, _ in got] == [("east", NS, GANG), ("west", NS, GANG)], got
    table = gangstate("get", "gangs", "--all-clusters", "--server", server)
    assert table.splitlines()[0].split()[:3] == ["CLUSTER", "NAMESPACE", "NAME"], table
    print(table)
    print(gangstate("get", "fleet", "--server", server))
    # get fleet: a row per cluster, each cluster's watch producer heard by its ticks (about
    # one a second to every partition): neither is more than a few seconds behind the other
    behind = {r["cluster"]: r["tick_behind_seconds"] for r in json.loads(
        gangstate("get", "fleet", "--server", server, "-o", "json"))["clusters"]}
    assert all(behind.get(c) is not None and behind[c] <= 5 for c in ("east", "west")), behind

    # each cluster's Events are exactly what the offline fold of the merged log says for it
    assert_events_agree_with_fold(east, fleet["east"], NS, timeout=90)
    assert_events_agree_with_fold(west, fleet["west"], NS, timeout=90)


def test_a_restart_of_one_clusters_watch_does_not_disturb_the_other(
        fleet: dict[str, Any]) -> None:
    """After the scenario above: east's watch producer restarts (it lists everything again);
    meanwhile west gets a new short gang ``fleet/small`` (1 of minMember 2), told at once; no
    Event of either cluster is written again or changed, and both still agree with the
    offline fold."""
    east, west = fleet["core"]["east"], fleet["core"]["west"]
    pods = [f"{GANG}-{i}" for i in range(3)]
    before_east, before_west = ours(east, pods[:2]), ours(west, pods)
    counts = {c: {(e["reason"], e["count"]) for p in pods for e in pod_events(core, NS, p)
                  if e["from"] == "gangstate"} for c, core in (("east", east), ("west", west))}
    fleet["east"].restart("watch")
    west.create_namespaced_pod(NS, gang_pod(NS, "small-0", gang="small", min_available=2))
    wait_for("GangMembersInsufficient on west's small-0",
             lambda: "GangMembersInsufficient" in reasons(west, ["small-0"]), 90)
    assert reasons(east, ["small-0"]) == set()
    # east's watch is back: a pod of east is seen again (its own small gang, complete)
    for i in range(2):
        east.create_namespaced_pod(NS, gang_pod(NS, f"small-{i}", gang="small",
                                                min_available=2))
    wait_for("east's small gang told", lambda: "GangScheduled" in reasons(
        east, ["small-0", "small-1"]) or "GangMembersSatisfied" in reasons(
        east, ["small-0", "small-1"]), 90)
    assert ours(east, pods[:2]) == before_east
    assert all(set(before_west[p]) <= set(rows) for p, rows in ours(west, pods).items())
    after = {c: {(e["reason"], e["count"]) for p in pods for e in pod_events(core, NS, p)
                 if e["from"] == "gangstate"} for c, core in (("east", east), ("west", west))}
    assert after["east"] == counts["east"]
    assert_events_agree_with_fold(east, fleet["east"], NS, timeout=90)
    assert_events_agree_with_fold(west, fleet["west"], NS, timeout=90)
