"""The cluster tier: one real control plane (etcd, kube-apiserver and kube-controller-manager
v1.35.2, KWOK v0.8.0 as the kubelets, koord-scheduler v1.8.0;
``deploy/cluster/controlplane.py``) and one gangstate chain (``gangstate watch`` → Kafka →
``gangstate worker`` → ``gangstate sink``, real processes with the shipped RBAC) for the whole
test session; the tests of Kubernetes' own gang scheduling ask for a second control plane,
``native_cluster`` (v1.37.2 with kube-scheduler, started only for them). Every test of this
folder is marked ``cluster``; run the tier alone with ``.venv/bin/python -m pytest -m cluster``
(or skip it with ``-m 'not cluster'``).

The binaries are built on first use (a cold build takes ~5-20 min on 2 cores, see
``docs/cluster.md``) and cached under ``~/.cache/gangstate/controlplane/``. Each scenario works
in a namespace of its own (``streams.dev.localcluster.create_namespace``); namespaces vanish with
the control plane.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from kubernetes import client

from streams.kafka.publishing import ensure_topics
from streams.settings import Settings, Topics
from streams.core.fold import FoldSettings
from streams.dev.localcluster import Chain, controlplane_module

GRACE_SECONDS = 10.0
STRANDED_SECONDS = 20.0
"""``GangMembersStranded`` 20 s after a round ran (120 s by default), so the tier sees it."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark this folder's tests ``cluster``; when the binaries are not built yet (``bash
    .ci/setup.sh --cluster`` builds them), the first one may take the cold build's time."""
    here = Path(__file__).parent
    mine = [item for item in items if here in Path(str(item.fspath)).parents]
    for item in mine:
        item.add_marker(pytest.mark.cluster)
    cp = controlplane_module()
    koordinator = [i for i in mine if "native_cluster" not in getattr(i, "fixturenames", ())]
    native = [i for i in mine if "native_cluster" in getattr(i, "fixturenames", ())]
    if koordinator and not cp.is_built():
        koordinator[0].add_marker(pytest.mark.timeout(3600))
    if native and not cp.is_built(flavour="native"):
        native[0].add_marker(pytest.mark.timeout(3600))


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A started ``LocalCluster`` (two fake nodes: 8 cpu, 32Gi, 1 ``nvidia.com/gpu`` each)."""
    cp = controlplane_module()
    cluster = cp.LocalCluster(progress=lambda line: print(line, flush=True))
    cluster.start(timeout=180)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def native_cluster() -> Iterator[Any]:
    """A started native ``LocalCluster``: k8s.io/kubernetes v1.37.2 with Kubernetes' own gang
    scheduling (kube-scheduler as ``default-scheduler`` with GangScheduling; the
    scheduling.k8s.io v1beta1 PodGroup and v1alpha3 CompositePodGroup APIs; docs/cluster.md)
    on the same two fake nodes. Started only when a test asks for it (its cold build is its
    own, ``bash .ci/setup.sh --cluster`` makes it), stopped at the end of the session."""
    cp = controlplane_module()
    cluster = cp.LocalCluster(progress=lambda line: print(line, flush=True), flavour="native")
    cluster.start(timeout=180)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def chain(local_cluster: Any, kafka_bootstrap: str,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    """gangstate's chain on ``local_cluster``, with its own topics, started once. Holds off
    (on by default): the scenarios that run the shim build on it (``test_cluster_shim.py``)
    watch the scheduler's own rounds of gangs that never fit; holds have their chain in
    ``test_cluster_holding.py``."""
    run = uuid.uuid4().hex[:8]
    settings = Settings(bootstrap=kafka_bootstrap, topics=Topics(f"cluster-{run}."),
                        partitions=4, app_id=f"gangstate-cluster-{run}",
                        fold=FoldSettings(grace_seconds=GRACE_SECONDS,
                                          stranded_seconds=STRANDED_SECONDS, holds=False))
    ensure_topics(settings)
    logdir = tmp_path_factory.mktemp("chain-logs")
    chain = Chain(local_cluster, settings, logdir)
    chain.start(ready_timeout=180)
    try:
        yield chain
    finally:
        chain.stop()


@pytest.fixture(scope="session")
def core_v1(local_cluster: Any) -> Iterator[client.CoreV1Api]:
    """A CoreV1Api as the cluster admin (the test's own hands, not gangstate's). Also starts
    the session's ``EventClock`` (``tests.cluster.kube.CLOCK``: when each Event became visible,
    for the time until the user sees gangstate's Event) on its own client."""
    from tests.cluster import kube

    kube.CLOCK = kube.EventClock(client.CoreV1Api(local_cluster.api_client("admin")))
    kube.CLOCK.start()
    try:
        yield client.CoreV1Api(local_cluster.api_client("admin"))
    finally:
        kube.CLOCK.stop()


@pytest.fixture(scope="session")
def custom_objects(local_cluster: Any) -> client.CustomObjectsApi:
    """A CustomObjectsApi as the cluster admin (PodGroups)."""
    return client.CustomObjectsApi(local_cluster.api_client("admin"))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """After the tier: a table of what the scheduler and gangstate wrote per scenario, in the
    terminal summary (and written to ``$GANGSTATE_CLUSTER_REPORT`` when set)."""
    from tests.cluster.kube import report_table

    text = report_table()
    if not text:
        return
    target = os.environ.get("GANGSTATE_CLUSTER_REPORT")
    if target:
        Path(target).write_text(text + "\n")
    terminalreporter.write_sep("-", "cluster tier: Events per scenario")
    terminalreporter.write_line(text)
