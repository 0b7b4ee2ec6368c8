"""A pod deleted while no watch producer ran (``gangstate.roster/v1``, docs/watching.md).

A new ``gangstate watch`` process lists every object that exists, but it does not know what
the process before it published, so a pod deleted meanwhile gets no ``DELETED`` and stayed a
member of its gang for good (a new user's run: a pod force-deleted while the watch was
stopped was still listed after the restart). Now the watch, once its first lists are
published, sends each partition of ``gang-events`` the gang pods it knows, and for each gang
named the fold drops the members the roster does not name. The fold's side with hand-made
records; the watch's side against the TEST API SERVER (``tests.doubles.apiserver``); the real
restart is the cluster tier's (``tests/cluster/test_cluster_living.py``).
"""

from __future__ import annotations

import json
from typing import Any

from producers.clusters import for_cluster
from streams.core.fold import PartitionFold
from streams.core.records import RosterObserved, Tick
from streams.kafka.partitions import partition_of
from streams.kafka.publishing import roster_records
from streams.wire.traces import fold_lines
from tests.doubles.apiserver import ApiServerDouble, eventually
from tests.fixtures.builders import at, pod
from tests.unit.test_watch import SETTINGS, MemoryPublisher, pod as kube_pod, run_watcher

PARTITIONS = 8
G = "ns/g"
P = partition_of(G, PARTITIONS)


def scheduled() -> list[Any]:
    """ns/g of minMember 2: g-0 and g-1 created at t=0, bound to n1 at t=1 (Running)."""
    return [pod(f"g-{i}", 0) for i in range(2)] + [
        pod(f"g-{i}", 1, rv="2", type_="MODIFIED", node="n1", phase="Running")
        for i in range(2)]


def fold(records: list[Any], end: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    store: dict[str, Any] = {}
    f = PartitionFold(store, partition_of=partition_of)
    outputs: list[dict[str, Any]] = []
    for rec in records:
        outputs += f.feed(getattr(rec, "gang", None) if not isinstance(rec, RosterObserved)
                          else None, rec)
    outputs += f.feed(None, Tick(at(end)))
    return outputs, store


def roster(t: float, gangs: dict[str, list[str]], partition: int = P,
           cluster: str = "default") -> RosterObserved:
    return RosterObserved(at(t), cluster, partition, PARTITIONS,
                          {g: frozenset(u) for g, u in gangs.items()})


def reasons(outputs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(o["observed_at"], o["reason"]) for o in outputs
            if o["schema"] == "gangstate.diagnostic/v1" and o["reason"] != "GangScheduled"]


def test_a_member_the_roster_does_not_name_is_deleted_and_its_loss_told() -> None:
    """g-1 was deleted while no watch ran; the new watch's roster at t=30 names g-0 only:
    g-1 is deleted at t=30 (its last version, 2), the gang reads Degraded, and the loss is
    told 5 s later (t=35), as for a DELETED seen live."""
    outputs, store = fold(scheduled() + [roster(30, {G: ["uid-g-0"]})], 60)
    state = store[G]
    assert sorted(m.name for m in state.members.values()) == ["g-0"]
    assert state.tombstones["uid-g-1"][0] == "2"
    assert state.phase == "Degraded"
    from streams.core.timefmt import format_time
    assert reasons(outputs) == [(format_time(at(35)), "GangMembersLost")]


def test_a_gang_the_roster_does_not_name_is_left_as_it_is() -> None:
    """A watch limited to other namespaces (``-n kube-system``) or scheduler names sends a
    roster that names no pod of ns/g: its silence proves nothing, so both members stay (a
    user's run: such a roster deleted every gang of the worker, and the full watch's relist
    did not bring them back). A gang whose every pod was deleted while no watch ran is
    therefore not cleaned up by a roster (docs/contracts.md)."""
    outputs, store = fold(scheduled() + [roster(30, {"other/x": ["uid-x"]})], 60)
    assert sorted(m.name for m in store[G].members.values()) == ["g-0", "g-1"]
    assert store[G].phase == "Scheduled"
    assert reasons(outputs) == []


def test_a_roster_of_another_partition_or_cluster_changes_nothing() -> None:
    """The roster of each other partition, and one of the gang's partition for cluster
    eu-1, do not name ns/g (it is not theirs): the gang keeps both members. So does a fold
    without a partitioner."""
    others = [roster(30, {}, p) for p in range(PARTITIONS) if p != P]
    _, store = fold(scheduled() + others + [roster(31, {}, cluster="eu-1")], 60)
    assert sorted(m.name for m in store[G].members.values()) == ["g-0", "g-1"]
    plain: dict[str, Any] = {}
    f = PartitionFold(plain)
    for rec in scheduled():
        f.feed(rec.gang, rec)
    f.feed(None, roster(30, {}))
    assert len(plain[G].members) == 2


def test_a_pod_named_again_after_the_roster_is_a_member_again() -> None:
    """A pod a roster dropped comes back with the very version it was dropped at (version 2:
    it still exists; a real DELETED is of a newer version than any live one) or a newer one;
    an older one (1) stays out."""
    records = scheduled() + [roster(30, {G: ["uid-g-0"]})]
    _, store = fold(records + [pod("g-1", 31, rv="1", type_="SYNC")], 40)
    assert sorted(m.name for m in store[G].members.values()) == ["g-0"]
    _, store = fold(records + [pod("g-1", 31, rv="2", type_="SYNC", node="n1",
                                   phase="Running")], 40)
    assert sorted(m.name for m in store[G].members.values()) == ["g-0", "g-1"]
    assert store[G].phase == "Scheduled"


class RosterPublisher(MemoryPublisher):
    """``MemoryPublisher`` that sends rosters as the real ``Publisher`` does, over 8
    partitions (``streams.kafka.publishing.roster_records``)."""

    def roster_all_partitions(self, at_micros: int, gangs: dict[str, list[str]],
                              cluster: str = "default") -> int:
        for p, record in enumerate(roster_records(at_micros, gangs, PARTITIONS, cluster)):
            self.send_json(SETTINGS.topics.gang_events, None, record, partition=p)
        return PARTITIONS


def rosters(publisher: MemoryPublisher) -> list[dict[str, Any]]:
    return [r for _, r in publisher.on(SETTINGS.topics.gang_events)
            if r["schema"] == "gangstate.roster/v1"]


def test_a_pod_deleted_while_the_watch_was_down_leaves_its_gang_after_the_restart() -> None:
    """The bug, end to end on the TEST API SERVER: a watch publishes w-0 and w-1 of
    team-a/train and stops; w-1 is deleted; a new watch (a new process: nothing remembered)
    lists w-0 only and sends one roster to each of the 8 partitions, after its list, naming
    w-0 for the gang. The offline fold of everything both published (what the worker folds)
    keeps w-0 alone; before, w-1 stayed a member."""
    with ApiServerDouble(bookmark_interval=0.1) as server:
        first = server.apply(kube_pod("w-0"))
        second = server.apply(kube_pod("w-1"))
        publisher = RosterPublisher()
        watcher = run_watcher(server, publisher)
        eventually(lambda: len(rosters(publisher)) == PARTITIONS)
        watcher.stop()
        server.delete("pods", "team-a", "w-1")
        restarted = run_watcher(server, publisher)
        eventually(lambda: len(rosters(publisher)) == 2 * PARTITIONS)
        restarted.stop()
    records = [r for _, r in publisher.on(SETTINGS.topics.gang_events)]
    last = rosters(publisher)[PARTITIONS:]
    uid0, uid1 = first["metadata"]["uid"], second["metadata"]["uid"]
    named = {g: u for r in last for g, u in r["gangs"].items()}
    assert named == {"team-a/train": [uid0]}
    assert [r["partition"] for r in last] == list(range(PARTITIONS))
    assert next(r for r in last if r["gangs"])["partition"] == \
        partition_of("team-a/train", PARTITIONS)
    # the new process's list comes first, then its rosters
    second_list = max(i for i, r in enumerate(records) if r["schema"] == "gangstate.kube/v1"
                      and r["type"] == "SYNC" and r["object"]["metadata"]["name"] == "w-0")
    assert second_list < records.index(last[0])
    lines = [(n, json.dumps(r).encode()) for n, r in enumerate(records, 1)]
    folded = fold_lines(lines, None, partition_of=partition_of)
    assert [m.name for m in folded.states["team-a/train"].members.values()] == ["w-0"]
    assert uid1 in folded.states["team-a/train"].tombstones
    # without the rosters (a fold that cannot place keys on partitions) w-1 stays
    stale = fold_lines(lines, None)
    assert sorted(m.name for m in stale.states["team-a/train"].members.values()) == \
        ["w-0", "w-1"]


def test_a_cluster_s_watch_sends_rosters_of_its_cluster() -> None:
    """Outside default the roster names the cluster and each gang lands on the partition of
    its key within the cluster (``eu-1:team-a/train``)."""
    publisher = RosterPublisher()
    sink = for_cluster(publisher, "eu-1")
    assert sink.roster_all_partitions(at(0), {"team-a/train": ["u1"]}) == PARTITIONS
    sent = rosters(publisher)
    assert {r["cluster"] for r in sent} == {"eu-1"}
    (named,) = [r for r in sent if r["gangs"]]
    assert named["partition"] == partition_of("eu-1:team-a/train", PARTITIONS)


def test_the_worker_counts_a_roster() -> None:
    """The worker's record counter knows the roster (it crashed the worker's agent on a
    KeyError the first time a roster reached it, on the real cluster)."""
    from streams.wire.decoding import decode_input
    from streams.worker.metrics import WorkerMetrics, schema_of

    decoded = decode_input(json.dumps(roster_records(at(0), {G: ["u"]}, PARTITIONS)[P]))
    assert schema_of(decoded) == "gangstate.roster/v1"
    metrics = WorkerMetrics()
    metrics.folded(decoded, [])
    assert metrics.registry.get_sample_value(
        "gangstate_records_total", {"schema": "gangstate.roster/v1"}) == 1
