"""gangstate's hold of a gang that cannot fit, on the real scheduler (issue 24; docs/shim.md
"Holding a gang that cannot fit"; rules H1-H5, ``streams/core/rules/holding.py``).

A chain of its own with holds on (``FoldSettings.holds``; TTL 20 s, renewed every 5 s) and the
shim build of koord-scheduler v1.8.0 publishing into its topics. The session's two nodes have
1 ``nvidia.com/gpu`` each:
- a gang of 3 x 1 GPU (minMember 3) can never fit: held (``HoldGang`` Applied, ``GangHeld``),
  the scheduler's ``FailedScheduling`` storm stops; a third GPU node joins: released
  (``ReleaseGang`` ``CapacityChanged``, ``GangReleased``) and bound;
- the same gang next to a high-priority pod it cannot preempt (on a third node): held; the
  blocker is deleted: released the same way and bound;
- a high-priority gang of 2 x 1 GPU that fits by preempting two low-priority pods is never held;
- with gangstate's worker stopped, the shim lets the hold lapse (TTL) and the scheduler tries
  the gang again.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from streams.core.fold import FoldSettings
from streams.dev.localcluster import (Chain, controlplane_module, create_namespace, gang_pod,
                                     pod_events)
from streams.kafka.publishing import ensure_topics
from streams.kafka.reading import read_all
from streams.settings import Settings, Topics
from tests.cluster.conftest import GRACE_SECONDS, STRANDED_SECONDS
from tests.cluster.kube import wait_for
from tests.cluster.test_cluster_chain import describe_gang
from tests.cluster.test_cluster_living import (HIGH, LOW, pods_of,  # noqa: F401
                                               priority_classes)
from tests.cluster.test_cluster_scenarios import describe

TTL_SECONDS = 20
RENEW_SECONDS = 5


@pytest.fixture(scope="module")
def hold_chain(local_cluster: Any, kafka_bootstrap: str,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    """A chain with holds on, and the shim build publishing into its topics and reading its
    commands; Koordinator's own build again afterwards."""
    run = uuid.uuid4().hex[:8]
    settings = Settings(bootstrap=kafka_bootstrap, topics=Topics(f"hold-{run}."),
                        partitions=4, app_id=f"gangstate-hold-{run}",
                        fold=FoldSettings(grace_seconds=GRACE_SECONDS,
                                          stranded_seconds=STRANDED_SECONDS, holds=True,
                                          hold_ttl_seconds=TTL_SECONDS,
                                          hold_renew_seconds=RENEW_SECONDS))
    ensure_topics(settings)
    chain = Chain(local_cluster, settings, tmp_path_factory.mktemp("hold-chain-logs"))
    chain.start(ready_timeout=180)
    local_cluster.use_shim({"KAFKA_BOOTSTRAP_SERVERS": settings.bootstrap,
                            **settings.security.env(),
                            "GANGSTATE_TOPIC_PREFIX": settings.topics.prefix,
                            "GANGSTATE_SHIM_ID": f"hold-shim-{run}"}, timeout=120)
    try:
        yield chain
    finally:
        local_cluster.use_shim(None, timeout=120)
        chain.stop()


def commands_of(chain: Chain, gang: str) -> list[dict[str, Any]]:
    """gangstate's commands for gang group ``gang`` so far, in order."""
    t = chain.settings.topics
    return [c for c in read_all(chain.settings, [t.commands])[t.commands]
            if c.get("gang_group") == gang]


def told(core: client.CoreV1Api, ns: str, pods: list[str], reason: str) -> list[dict[str, Any]]:
    """gangstate's Events of ``reason`` on any of ``pods``."""
    return [e for p in pods for e in pod_events(core, ns, p)
            if e["from"] == "gangstate" and e["reason"] == reason]


def attempts(cluster: Any, ns: str) -> int:
    """The scheduling attempts of pods of ``ns`` that failed so far, as koord-scheduler logs them
    when they happen (``Unable to schedule pod``, kube-scheduler v1.35.2 schedule_one.go); its
    ``FailedScheduling`` Events are no measure of now: it throttles their writes and creates
    them up to a minute late (docs/shim.md)."""
    marker = f'pod="{ns}/'
    return sum(1 for line in cluster.log_path("koord-scheduler").read_text(
        errors="replace").splitlines() if "Unable to schedule pod" in line and marker in line)


def bound(core: client.CoreV1Api, ns: str, names: list[str]) -> dict[str, str] | None:
    """``name -> node`` once every pod of ``names`` is Running, else ``None``."""
    pods = pods_of(core, ns)
    nodes = {n: pods[n].spec.node_name for n in names
             if n in pods and pods[n].status.phase == "Running"}
    return nodes if len(nodes) == len(names) else None


def delete_pods(core: client.CoreV1Api, ns: str, names: list[str]) -> None:
    """Delete ``names`` at once (grace 0) and wait until they are gone."""
    for name in names:
        try:
            core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
        except ApiException as err:
            if err.status != 404:
                raise
    wait_for(f"{names} of {ns} gone", lambda: not set(names) & set(pods_of(core, ns)), 60)


def delete_node(core: client.CoreV1Api, name: str) -> None:
    """Delete Node ``name`` (gone already is fine)."""
    try:
        core.delete_node(name)
    except ApiException as err:
        if err.status != 404:
            raise


def why(chain: Chain, core: client.CoreV1Api, ns: str, gang: str) -> str:
    """What a failed wait shows: the pods and their Events, ``describe gang`` and the gang's
    commands so far."""
    answered = [line for line in chain.cluster.log_path("koord-scheduler").read_text(
        errors="replace").splitlines() if gang in line and "answered" in line]
    return "\n".join([describe(core, ns, chain), describe_gang(chain, gang),
                      f"commands: {commands_of(chain, gang)}", "shim:", *answered[-10:]])


def recreate_pod(core: client.CoreV1Api, ns: str, name: str) -> None:
    """Delete pod ``name`` and create it again from its own spec (what its controller does when
    told to delete it): the labels, annotations and spec it had, no node, a new uid."""
    pod = core.read_namespaced_pod(name, ns)
    spec = pod.spec
    spec.node_name = None
    body = client.V1Pod(metadata=client.V1ObjectMeta(
        name=name, namespace=ns, labels=pod.metadata.labels,
        annotations=pod.metadata.annotations), spec=spec)
    delete_pods(core, ns, [name])
    core.create_namespaced_pod(ns, body)


def held(chain: Chain, core: client.CoreV1Api, ns: str, gang: str,
         pods: list[str]) -> dict[str, Any]:
    """Wait until ``gang`` is held: a ``HoldGang`` (reason ``GangCannotFit``) and the
    ``GangHeld`` Event; return the Event.

    koord-scheduler v1.8.0 sometimes strands a member of a gang it keeps failing (refused at
    PreEnqueue, never retried; seen in one CI run in about five): the gang's rounds stop, no
    storm is left to hold and gangstate rightly tells ``GangMembersStranded`` instead. Then the
    wait does what that Event advises (delete the member so that its controller creates it
    again), up to 3 times, and waits for the hold again."""
    def hold_or_stranded() -> Any:
        live = pods_of(core, ns)
        return [c for c in commands_of(chain, gang) if c["type"] == "HoldGang"] \
            or [p for p in pods if p in live and any(
                e["from"] == "gangstate" and e["reason"] == "GangMembersStranded"
                for e in pod_events(core, ns, p, uid=live[p].metadata.uid))]

    for _ in range(4):
        found = wait_for(f"a HoldGang for {gang}", hold_or_stranded, 120,
                         describe=lambda: why(chain, core, ns, gang))
        if isinstance(found[0], dict):
            break
        for name in found:  # stranded by the scheduler: recreate, as the Event advises
            recreate_pod(core, ns, name)
    else:
        pytest.fail(f"{gang}: members stranded 4 times\n{why(chain, core, ns, gang)}")
    hold = [c for c in commands_of(chain, gang) if c["type"] == "HoldGang"][0]
    assert (hold["type"], hold["reason"], hold["ttl_seconds"]) == (
        "HoldGang", "GangCannotFit", TTL_SECONDS), hold
    return wait_for(f"GangHeld on {gang}", lambda: told(core, ns, pods, "GangHeld"), 60,
                    describe=lambda: why(chain, core, ns, gang))[0]


def test_a_gang_that_cannot_fit_is_held_and_released_when_a_node_joins(
        local_cluster: Any, hold_chain: Chain, core_v1: client.CoreV1Api) -> None:
    """3 x 1 GPU, minMember 3, on 2 GPUs: held, the storm stops (fewer than 5 failed attempts
    in 10 s, against about 500 unheld: about 3,000 a minute, docs/shim.md);
    a node with 1 GPU joins: ``ReleaseGang`` ``CapacityChanged``, ``GangReleased``, and the
    three members are Running, one of them on the new node."""
    ns, name = "hold-node", "big"
    gang, pods = f"{ns}/{name}", [f"big-{i}" for i in range(3)]
    node = "hold-gpu-3"
    create_namespace(core_v1, ns)
    try:
        for p in pods:
            core_v1.create_namespaced_pod(ns, gang_pod(ns, p, gang=name, min_available=3, gpu=1))
        event = held(hold_chain, core_v1, ns, gang, pods)
        assert "nvidia.com/gpu" in event["message"], event
        # the hold is applied: a round under way may still end
        time.sleep(2)  # a window, not a wait: what is measured is what does not happen
        before = attempts(local_cluster, ns)
        time.sleep(10)
        assert attempts(local_cluster, ns) - before < 5
        local_cluster.add_node(controlplane_module().NodeSpec(name=node, gpu=1))
        nodes = wait_for(f"{pods} Running", lambda: bound(core_v1, ns, pods), 90,
                         describe=lambda: describe(core_v1, ns, hold_chain))
        assert node in nodes.values()
        released = [c for c in commands_of(hold_chain, gang) if c["type"] == "ReleaseGang"]
        assert [c["reason"] for c in released][:1] == ["CapacityChanged"], released
        wait_for(f"GangReleased on {gang}", lambda: told(core_v1, ns, pods, "GangReleased"), 60)
    finally:
        delete_pods(core_v1, ns, pods)
        delete_node(core_v1, node)


def test_a_gang_held_by_a_blocker_is_released_when_the_blocker_goes(
        local_cluster: Any, hold_chain: Chain, core_v1: client.CoreV1Api,
        priority_classes: dict[str, int]) -> None:
    """A third node of 1 GPU joins and a high-priority pod (1000) takes one of the 3 GPUs; a
    gang of 3 x 1 GPU at priority 0 cannot preempt it (room for 2 even once preemption evicted
    every pod it may): held; the blocker is deleted: ``ReleaseGang`` ``CapacityChanged`` (the
    watch producer's capacity record of the freed GPU), ``GangReleased``, and the three members
    are Running, one on each node."""
    ns, name = "hold-blocker", "big"
    gang, pods = f"{ns}/{name}", [f"big-{i}" for i in range(3)]
    node = "hold-gpu-b"
    create_namespace(core_v1, ns)
    local_cluster.add_node(controlplane_module().NodeSpec(name=node, gpu=1))
    try:
        core_v1.create_namespaced_pod(ns, gang_pod(ns, "blocker", gpu=1, priority_class=HIGH))
        wait_for("the blocker Running", lambda: bound(core_v1, ns, ["blocker"]), 60)
        for p in pods:
            core_v1.create_namespaced_pod(ns, gang_pod(ns, p, gang=name, min_available=3, gpu=1))
        event = held(hold_chain, core_v1, ns, gang, pods)
        assert "even once preemption evicted every pod it may" in event["message"], event
        assert [c["type"] for c in commands_of(hold_chain, gang)
                if c["type"] == "ReleaseGang"] == []
        delete_pods(core_v1, ns, ["blocker"])
        nodes = wait_for(f"{pods} Running", lambda: bound(core_v1, ns, pods), 90,
                         describe=lambda: why(hold_chain, core_v1, ns, gang))
        assert len(set(nodes.values())) == 3, nodes
        released = [c for c in commands_of(hold_chain, gang) if c["type"] == "ReleaseGang"]
        assert [c["reason"] for c in released][:1] == ["CapacityChanged"], released
        gone = wait_for(f"GangReleased on {gang}",
                        lambda: told(core_v1, ns, pods, "GangReleased"), 60)
        assert "nvidia.com/gpu changed" in gone[0]["message"], gone
    finally:
        delete_pods(core_v1, ns, ["blocker", *pods])
        delete_node(core_v1, node)


def test_a_gang_that_fits_by_preempting_is_never_held(
        hold_chain: Chain, core_v1: client.CoreV1Api,
        priority_classes: dict[str, int]) -> None:
    """Two low-priority pods (10) on both GPUs; a high-priority gang (1000) of 2 x 1 GPU preempts
    them; gangstate issues no ``HoldGang`` for it. The gang then runs, or koord-scheduler v1.8.0
    binds one member and leaves the other refused at PreEnqueue, never retried (seen on the real
    scheduler in one CI run of four: ``hi-1`` bound on node-a, ``hi-0`` told
    ``GangMembersStranded``), or binds neither after both preempted (one later CI run); in
    every case the preemption was tried and no hold was issued."""
    ns, name = "hold-preempt", "hi"
    gang, pods = f"{ns}/{name}", ["hi-0", "hi-1"]
    create_namespace(core_v1, ns)
    try:
        for i in range(2):
            core_v1.create_namespaced_pod(ns, gang_pod(ns, f"low-{i}", gpu=1,
                                                       priority_class=LOW))
        wait_for("both low pods Running", lambda: bound(core_v1, ns, ["low-0", "low-1"]), 60)
        for p in pods:
            core_v1.create_namespaced_pod(ns, gang_pod(ns, p, gang=name, min_available=2, gpu=1,
                                                       priority_class=HIGH))
        # it preempted: the scheduler deleted both victims for the gang's members
        wait_for("both low pods preempted", lambda: not {"low-0", "low-1"} & set(
            pods_of(core_v1, ns)), 120, describe=lambda: describe(core_v1, ns, hold_chain))
        try:
            wait_for(f"{pods} Running, or a member stranded by koord-scheduler",
                     lambda: bound(core_v1, ns, pods)
                     or told(core_v1, ns, pods, "GangMembersStranded"), 120,
                     describe=lambda: describe(core_v1, ns, hold_chain))
        except pytest.fail.Exception:
            # a third outcome of koord-scheduler v1.8.0 (one CI run): each member preempted a
            # victim, then hi-0 was refused at PreEnqueue ("representative ... already
            # exists") and neither was tried again within 120 s; gangstate told only
            # GangUnschedulable (a gap: closing note of issue 27). No hold either way.
            assert not any(pods_of(core_v1, ns)[p].spec.node_name for p in pods)
        assert [c for c in commands_of(hold_chain, gang) if c["type"] == "HoldGang"] == []
    finally:
        delete_pods(core_v1, ns, ["low-0", "low-1", *pods])


def test_a_hold_lapses_when_gangstate_stops(
        hold_chain: Chain, core_v1: client.CoreV1Api, tmp_path: Path) -> None:
    """Held as above; then gangstate's worker stops (no renewal): within the TTL (20 s) and the
    shim's 1 s sweep the hold lapses, the members are activated and the scheduler's failed
    attempts start again. Last in the module: the chain's worker stays
    stopped."""
    ns, name = "hold-lapse", "big"
    gang, pods = f"{ns}/{name}", [f"big-{i}" for i in range(3)]
    create_namespace(core_v1, ns)
    try:
        for p in pods:
            core_v1.create_namespaced_pod(ns, gang_pod(ns, p, gang=name, min_available=3, gpu=1))
        held(hold_chain, core_v1, ns, gang, pods)
        worker = hold_chain.procs.pop("worker")
        controlplane_module().terminate(worker, 20)
        stopped_at = time.monotonic()
        before = attempts(hold_chain.cluster, ns)
        wait_for("the scheduler trying the gang again", lambda: attempts(hold_chain.cluster, ns)
                 > before + 20, TTL_SECONDS + RENEW_SECONDS + 30)
        # not before the TTL of the last renewal could have passed (renewed every 5 s)
        assert time.monotonic() - stopped_at >= TTL_SECONDS - RENEW_SECONDS - 1
    finally:
        delete_pods(core_v1, ns, pods)
