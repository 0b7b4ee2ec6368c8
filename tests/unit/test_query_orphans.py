"""``explain pod`` finds a pod dropped with its gang's deleted PodGroup (rule M5): such a pod is
no live member of any gang (Koordinator v1.8.0 ``pkg/scheduler/plugins/coscheduling/core/
gang_cache.go:295-310`` removes the gang with its children), yet the gang's state keeps it
(``GangState.orphans``) and ``why_pod`` explains it; the query layer must route to it. Found on
the real cluster tier (``tests/cluster/test_cluster_v18.py``, the deleted-PodGroup scenario),
where ``gangstate explain pod`` answered ``not a live member of any known gang`` (fixed on main
in the same way, ``answers._knows_pod``)."""

from __future__ import annotations

from typing import Any

import pytest

from streams.query.answers import NotFound, explain_pod, find_gang_of_pod
from tests.fixtures.builders import fold_records, pod, podgroup


def fold(records: list[Any]) -> dict:
    store: dict = {}
    fold_records(records, store=store)
    return store


def deleted_podgroup_store() -> dict:
    """PodGroup ns/g (minMember 2) with pending pods p0, p1; the PodGroup deleted at t=20."""
    return fold([podgroup(0, 2), pod("p0", 0, waits_for_podgroup=True, min_available=None),
                 pod("p1", 1, waits_for_podgroup=True, min_available=None),
                 podgroup(20, 2, rv="2", type_="DELETED")])


def test_a_pod_dropped_with_its_podgroup_is_explained_by_its_gang() -> None:
    store = deleted_podgroup_store()
    assert store["ns/g"].members == {}
    assert find_gang_of_pod(store.values(), "ns/p1") is store["ns/g"]
    for gang in (None, "ns/g"):
        why = explain_pod(store, "ns/p1", gang)
        assert (why["member"], why["orphan"], why["held_at"]) == (False, True, "PreEnqueue")


def test_a_pod_of_no_gang_is_still_not_found() -> None:
    store = deleted_podgroup_store()
    assert find_gang_of_pod(store.values(), "ns/p9") is None
    assert find_gang_of_pod(store.values(), "other/p1") is None
    with pytest.raises(NotFound, match="pod ns/p9 is not a live member of any known gang"):
        explain_pod(store, "ns/p9")
    with pytest.raises(NotFound, match="pod ns/p9 is not a live member of gang ns/g"):
        explain_pod(store, "ns/p9", "ns/g")
