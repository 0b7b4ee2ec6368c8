"""The gang gauges of a fleet (``streams.worker.metrics.TableCollector``): every series has a
``cluster`` label, and at most ``max_clusters`` clusters (``GANGSTATE_METRICS_MAX_CLUSTERS``,
default 20) keep their own value, the first in cluster id order; the gangs of the others are
summed under ``cluster="other"``."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streams.core.decide import HELD_REASONS
from streams.core.fold import PartitionFold
from streams.core.native import SCHEDULERS
from streams.core.settings import FoldSettings
from streams.query.answers import PHASES
from streams.settings import Environment
from streams.worker.metrics import MAX_CLUSTERS, TableCollector, labelled_clusters
from tests.fixtures.builders import attempt, pod

SHORT = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def samples(collector: TableCollector) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the collector: ``(name, sorted labels) -> value``."""
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def gangs(got: dict[Any, float], cluster: str, phase: str,
          scheduler: str = "koord-scheduler") -> float | None:
    return got.get(("gangstate_gangs", (("cluster", cluster), ("phase", phase),
                                        ("scheduler", scheduler))))


def held(got: dict[Any, float], cluster: str, reason: str,
         scheduler: str = "koord-scheduler") -> float | None:
    return got.get(("gangstate_pods_held_preenqueue", (("cluster", cluster), ("reason", reason),
                                                       ("scheduler", scheduler))))


def clusters_of(got: dict[Any, float], name: str) -> set[str]:
    return {dict(labels)["cluster"] for (n, labels) in got if n == name}


def fleet(n: int, storm_in: tuple[str, ...] = ()) -> dict[str, Any]:
    """``n`` clusters ``c00`` .. ``c<n-1>``, each with gang ``ns/g`` of one pod (minMember 2:
    Gathering, its one pod held for GangMembersInsufficient); in the clusters ``storm_in`` the
    gang has its second pod too and that pod failed to fit 5 times (t=1..5: 5 FailedScheduling
    Events per minute at the gang's clock, t=5; the gang is Scheduling and nothing holds it)."""
    store: dict[str, Any] = {}
    fold = PartitionFold(store, FoldSettings())
    for i in range(n):
        key = f"c{i:02d}:ns/g"
        fold.feed(key, pod("g-0", 0))
        if key.split(":")[0] in storm_in:
            fold.feed(key, pod("g-1", 0))
            for t in range(1, 6):
                fold.feed(key, attempt("g-1", t, f"ev-{i}", "Filter", "Unschedulable",
                                       count=t, reason="Insufficient nvidia.com/gpu",
                                       culprit="g-1", fit_error=SHORT, waited=0))
    return store


def test_the_default_bound_is_20_and_read_from_the_environment(monkeypatch) -> None:
    monkeypatch.delenv("GANGSTATE_METRICS_MAX_CLUSTERS", raising=False)
    assert MAX_CLUSTERS == 20 and Environment().metrics_max_clusters == 20
    monkeypatch.setenv("GANGSTATE_METRICS_MAX_CLUSTERS", "3")
    assert Environment().metrics_max_clusters == 3


def test_the_kept_clusters_are_the_first_in_id_order() -> None:
    assert labelled_clusters(["us-2", "eu-1", "default", "eu-1"], 2) == {"default", "eu-1"}
    assert labelled_clusters(["b", "a-1", "a"], 5) == {"a", "a-1", "b"}


def test_21_clusters_are_20_and_other() -> None:
    """21 clusters c00..c20, one Gathering gang each: c00..c19 (the first 20 in id order) have
    their own series, c20's gang is counted under other: gangstate_gangs{cluster="other",
    phase="Gathering"} = 1, and its one held pod under other too. Every labelled cluster and
    other have every scheduler x phase series (zeros included): 21 x 2 x 8 = 336."""
    got = samples(TableCollector(fleet(21)))
    labelled = {f"c{i:02d}" for i in range(20)}
    assert clusters_of(got, "gangstate_gangs") == labelled | {"other"}
    assert clusters_of(got, "gangstate_pods_held_preenqueue") == labelled | {"other"}
    assert len([k for k in got if k[0] == "gangstate_gangs"]) == 21 * len(SCHEDULERS) * len(
        PHASES) == 336
    assert len([k for k in got if k[0] == "gangstate_pods_held_preenqueue"]) == 21 * len(
        SCHEDULERS) * len(HELD_REASONS)
    for cluster in ("c00", "c19", "other"):
        assert gangs(got, cluster, "Gathering") == 1
        assert gangs(got, cluster, "Ready") == 0
        assert gangs(got, cluster, "Gathering", "kube-scheduler") == 0
        assert held(got, cluster, "GangMembersInsufficient") == 1
    assert gangs(got, "c20", "Gathering") is None
    assert sum(v for (n, _), v in got.items() if n == "gangstate_gangs") == 21


def test_23_clusters_sum_the_3_past_the_bound_under_other() -> None:
    got = samples(TableCollector(fleet(23)))
    assert gangs(got, "other", "Gathering") == 3  # c20, c21, c22
    assert held(got, "other", "GangMembersInsufficient") == 3
    assert gangs(got, "c19", "Gathering") == 1


def test_a_smaller_bound_and_no_other_below_it() -> None:
    store = fleet(3)
    got = samples(TableCollector(store, max_clusters=2))
    assert clusters_of(got, "gangstate_gangs") == {"c00", "c01", "other"}
    assert gangs(got, "other", "Gathering") == 1
    got = samples(TableCollector(store))
    assert clusters_of(got, "gangstate_gangs") == {"c00", "c01", "c02"}


def test_the_storm_gauge_names_its_cluster_and_keeps_other_gangs_apart() -> None:
    """Storms in c01 (kept) and in c20 and c21 (other, max 20): each gang 5 Events per minute.
    A kept cluster's gang is labelled by its id; under other by its key, so that the two
    ns/g of c20 and c21 stay two series."""
    got = samples(TableCollector(fleet(22, storm_in=("c01", "c20", "c21"))))
    storm = {labels: v for (n, labels), v in got.items()
             if n == "gangstate_scheduler_failed_events_per_minute"}
    assert storm == {(("cluster", "c01"), ("gang", "ns/g")): 5,
                     (("cluster", "other"), ("gang", "c20:ns/g")): 5,
                     (("cluster", "other"), ("gang", "c21:ns/g")): 5}
    # c01's gang is Scheduling (g-1 in a failed cycle), nothing held; other: c21 and c20
    # Scheduling
    assert gangs(got, "c01", "Scheduling") == 1 and gangs(got, "c01", "Gathering") == 0
    assert gangs(got, "other", "Scheduling") == 2 and gangs(got, "other", "Gathering") == 0


def test_the_default_cluster_is_labelled_default() -> None:
    store: dict[str, Any] = {}
    fold = PartitionFold(store, FoldSettings())
    fold.feed("ns/g", pod("g-0", 0))
    fold.feed("eu-1:ns/g", pod("g-0", 0))
    fold.feed("eu-1:ns/g", pod("g-1", 0))
    got = samples(TableCollector(store))
    assert clusters_of(got, "gangstate_gangs") == {"default", "eu-1"}
    assert gangs(got, "default", "Gathering") == 1 and gangs(got, "eu-1", "Ready") == 1
    assert gangs(got, "eu-1", "Gathering") == 0


def test_an_empty_table_has_the_default_clusters_zeros() -> None:
    got = samples(TableCollector({}))
    assert clusters_of(got, "gangstate_gangs") == {"default"}
    assert sum(v for (n, _), v in got.items() if n.startswith("gangstate_")) == 0
