"""The chain itself on the real control plane: what the real cluster showed went wrong with it
(shared brief ``real-cluster.md``, last section) stays fixed.

- a watcher restart relists every stored scheduler Event, those of deleted pods included: they
  are dropped and counted (``pod-gone``), never dead-lettered;
- a deleted gang is not listed by ``gangstate get gangs``;
- the components log no WARNING or ERROR while doing their normal work.
"""

from __future__ import annotations

import json
import re
import urllib.request

from kubernetes import client

from streams.dev.localcluster import Chain, gang_pod
from streams.kafka.reading import read_topic
from tests.cluster.kube import wait_for
from tests.cluster.test_cluster_scenarios import create, create_namespace, delete_pods


def dead_letters(chain: Chain) -> list[dict]:
    return [value for _key, value in read_topic(chain.settings,
                                                chain.settings.topics.dead_letters)]


def pod_gone(chain: Chain) -> float:
    """The watcher's count of Events dropped because their pod did not show up within the
    hold (``gangstate_watch_records_dropped_total{reason="pod-gone"}``); 0 while its metrics
    do not answer yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{chain.watch_port}/metrics",
                                    timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return 0.0
    found = re.search(r'^gangstate_watch_records_dropped_total\{reason="pod-gone"\} (\S+)$',
                      text, re.M)
    return float(found.group(1)) if found else 0.0


def get_gangs(chain: Chain, namespace: str) -> str:
    out = chain.gangstate("get", "gangs", "-n", namespace, "--server", chain.server)
    assert out.returncode == 0, out.stderr
    return out.stdout


def describe_gang(chain: Chain, ref: str) -> str:
    out = chain.gangstate("describe", "gang", ref, "--server", chain.server)
    return out.stdout + out.stderr


def test_watcher_restart_after_deleted_pods_writes_no_dead_letter_and_lists_no_deleted_gang(
        chain: Chain, core_v1: client.CoreV1Api,
        custom_objects: client.CustomObjectsApi) -> None:
    ns = "sc-restart"
    create_namespace(core_v1, ns)
    create(core_v1, custom_objects, [
        gang_pod(ns, "x-0", gang="x", min_available=2),
        gang_pod(ns, "x-1", gang="x", min_available=2, cpu="100")])
    wait_for("the scheduler's FailedScheduling Events",
             lambda: len(core_v1.list_namespaced_event(ns).items) >= 3, 60)
    wait_for("the gang listed", lambda: re.search(r"^sc-restart\s+x\s", get_gangs(chain, ns),
                                                 re.M), 60)
    delete_pods(core_v1, ns, ["x-0", "x-1"])
    wait_for("the pods gone", lambda: not core_v1.list_namespaced_pod(ns).items, 60)
    # the scheduler's Events outlive the pods (event TTL: 1 h)
    stored = core_v1.list_namespaced_event(ns).items
    assert len(stored) >= 3
    wait_for("the deleted gang unlisted", lambda: get_gangs(chain, ns) == "", 60,
             describe=lambda: get_gangs(chain, ns) + describe_gang(chain, f"{ns}/x"))
    before = len(dead_letters(chain))
    log = chain.logdir / "watch.log"
    offset = log.stat().st_size
    chain.restart("watch")
    # the restarted watcher lists every stored Event again, those of the deleted pods too,
    # and holds each for 10 s in case its pod shows up, then drops it as pod-gone: wait until
    # its count (from 0 at the restart) covers the scheduler's Events of the deleted pods
    wait_for("the restarted watcher connected to Kafka",
             lambda: "connected to Kafka at" in log.read_text(errors="replace")[offset:], 60)
    held = sum(1 for e in stored if e.reason == "FailedScheduling" and (
        e.reporting_component or (e.source.component if e.source else "")) == "koord-scheduler")
    wait_for(f"the restarted watcher's {held} held Events of {ns} dropped as pod-gone",
             lambda: pod_gone(chain) >= held, 60,
             describe=lambda: f"pod-gone drops so far: {pod_gone(chain)}")
    assert chain.alive()["watch"]
    assert len(dead_letters(chain)) == before, json.dumps(dead_letters(chain)[before:])[:2000]
    after = log.read_text(errors="replace")[offset:]
    assert [line for line in after.splitlines() if " WARNING " in line or " ERROR " in line] == []
    assert get_gangs(chain, ns) == ""
