"""Gangs removed from the table once gone (streams/core/retention.py, docs/contracts.md "Gangs
removed from the table"): a deleted gang stays for the deleted-uid memory window (600 s of
event time) after its last record, then is removed (or, when its gang group issued commands,
shrunk to a remnant that keeps the epoch); a churn of short-lived gangs leaves a table of the
gangs of the last window only."""

from __future__ import annotations

import json

from streams.core.fold import FoldSettings, PartitionFold
from streams.core.records import Tick
from streams.core.retention import gone_at, is_gone, remnant
from streams.core.state import Commands, GangState
from streams.core.timefmt import format_time, parse_time
from streams.wire.decoding import decode_input
from tests.fixtures.builders import kube_pod, pod_line

T = parse_time("2026-11-02T09:00:00Z")
S = 1_000_000


def pod(at: int, gang: str, name: str, kind: str = "ADDED", rv: str = "1") -> bytes:
    ns, g = gang.split("/")
    return json.dumps(pod_line(kube_pod(name, ns, rv=rv, gang=g, min_available=2,
                                        node="node-1", phase="Running"),
                               format_time(at), kind)).encode()


def feed(fold: PartitionFold, raw: bytes) -> list:
    d = decode_input(raw)
    return fold.feed(d.key, d.record)


def short_lived(fold: PartitionFold, gang: str, start: int, life: int = 10 * S) -> None:
    """Two bound pods at ``start``, both deleted ``life`` later: the gang is Deleted then."""
    for i in range(2):
        feed(fold, pod(start, gang, f"{gang.split('/')[1]}-{i}"))
    for i in range(2):
        feed(fold, pod(start + life, gang, f"{gang.split('/')[1]}-{i}", "DELETED", "2"))


def test_a_deleted_gang_is_removed_600_s_after_its_last_record():
    store: dict[str, GangState] = {}
    fold = PartitionFold(store)
    short_lived(fold, "ns/a", T)  # deleted at T + 10 s
    assert store["ns/a"].phase == "Deleted"
    assert gone_at(store["ns/a"], 600 * S) == T + 610 * S
    fold.feed(None, Tick(T + 609 * S))
    assert "ns/a" in store
    fold.feed(None, Tick(T + 610 * S))
    assert "ns/a" not in store


def test_a_live_gang_is_never_removed():
    store: dict[str, GangState] = {}
    fold = PartitionFold(store)
    feed(fold, pod(T, "ns/live", "live-0"))
    feed(fold, pod(T, "ns/live", "live-1"))
    fold.feed(None, Tick(T + 10**6 * S))
    assert store["ns/live"].phase == "Scheduled"
    assert gone_at(store["ns/live"], 600 * S) is None


def test_a_late_stale_event_within_the_window_does_not_revive_the_gang():
    store: dict[str, GangState] = {}
    fold = PartitionFold(store)
    short_lived(fold, "ns/b", T)
    feed(fold, pod(T + 300 * S, "ns/b", "b-0", "ADDED", "1"))  # stale: rv 1 < deletion's 2
    assert store["ns/b"].phase == "Deleted"
    fold.feed(None, Tick(T + 610 * S))
    assert "ns/b" not in store


def test_a_gang_group_that_issued_commands_keeps_its_epoch_in_a_remnant():
    store: dict[str, GangState] = {}
    fold = PartitionFold(store)
    short_lived(fold, "ns/c", T)
    deleted = store["ns/c"].copy()
    deleted.commands = Commands(epoch=3)  # its group issued 3 commands
    store["ns/c"] = deleted
    fold.rebuild_timers()
    fold.feed(None, Tick(T + 610 * S))
    kept = store["ns/c"]
    assert kept == GangState(gang="ns/c", clock=T + 10 * S, commands=Commands(epoch=3),
                             deleted_at=T + 10 * S, deleted_by="Pod/c-1")
    assert kept == remnant(kept) and gone_at(kept, 600 * S) is None
    assert not is_gone(kept, T + 10**6 * S, 600 * S, None)
    feed(fold, pod(T + 700 * S, "ns/c", "c-new"))  # the gang is created again
    assert store["ns/c"].commands.epoch == 3 and len(store["ns/c"].members) == 1


def test_a_churn_of_short_lived_gangs_leaves_only_the_last_window():
    store: dict[str, GangState] = {}
    fold = PartitionFold(store, FoldSettings())
    for i in range(2000):  # gang i: created at T + i s, deleted at T + i + 10 s
        short_lived(fold, f"churn/g{i}", T + i * S)
    # the last record is at T + 2009 s: gangs with i + 610 <= 2009 are gone (i <= 1399)
    assert len(store) == 600
    assert sorted(store) == sorted(f"churn/g{i}" for i in range(1400, 2000))


def test_a_gang_with_orphan_pods_is_not_removed():
    from tests.fixtures.builders import at, pod as pod_event, podgroup

    store: dict[str, GangState] = {}
    fold = PartitionFold(store)
    fold.feed("ns/g", podgroup(0, 2))
    fold.feed("ns/g", pod_event("p0", 1, waits_for_podgroup=True, min_available=None))
    fold.feed("ns/g", podgroup(20, 2, rv="2", type_="DELETED"))  # p0 stays, an orphan
    state = store["ns/g"]
    assert not state.members and state.podgroup is None and list(state.orphans) == ["uid-p0"]
    assert gone_at(state, 600 * S) is None
    fold.feed(None, Tick(at(20 + 10**5)))
    assert "ns/g" in store
