"""Two workers, one consumer group, each on its own loopback address with the same port, as two
pods of ``worker.yaml`` would be (issue 15): each advertises its own address (``--http-bind``;
in Kubernetes ``POD_IP``), so a view asked of either worker for a gang the other owns is
forwarded there by Faust's table router and answered, never 404.

Before: every worker advertised ``http://127.0.0.1:<port>``; with one port for all (one per pod
in Kubernetes) a worker forwarded to itself and answered 404 for the other's gangs.

A fleet (issue 27): the handed cases are fed twice, as the ``default`` cluster's and as
``eu-1``'s; a gang is routed by its key (``eu-1:team-a/llm-pretrain`` is on partition 0, its
namesake of ``default`` on 3), so ``/gangs/NS/NAME?cluster=eu-1`` is answered by the owner of
the eu-1 gang.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest
import requests

from producers.replay import merged_by_time
from streams.kafka.partitions import partition_of
from streams.kafka.publishing import Publisher
from streams.kafka.reading import wait_group_stable
from streams.settings import Settings
from streams.core.cluster import split_key
from streams.query.answers import explain_pod, fleet_summary, gang_detail, gang_rows
from streams.wire.contracts import parse_time
from tests.fixtures.casecheck import handed_case_dirs
from tests.fixtures.throughkafka import caught_up, offline, worker_run
from tests.kafka.test_worker_web import plain

pytestmark = pytest.mark.kafka

AT = parse_time("2026-11-29T00:00:00Z")
ADDRESSES = ("127.0.0.1", "127.0.0.2")


def free_port_on_both() -> int:
    """A TCP port free on 127.0.0.1 and on 127.0.0.2."""
    for _ in range(50):
        with socket.socket() as one:
            one.bind((ADDRESSES[0], 0))
            port = one.getsockname()[1]
            with socket.socket() as two:
                try:
                    two.bind((ADDRESSES[1], port))
                except OSError:
                    continue
                return port
    raise RuntimeError("no port free on both loopback addresses")


def local_gangs(base: str) -> set[str]:
    """The keys of the gangs one worker owns, every cluster's (``/gangs?scope=local``: what it
    answers when another worker gathers)."""
    rows = requests.get(base + "/gangs", params={"all_clusters": "1", "scope": "local"},
                        timeout=10).json()
    return {row["gang"] if row["cluster"] == "default" else f"{row['cluster']}:{row['gang']}"
            for row in rows["gangs"]}


def in_eu_1(case: Path, folder: Path) -> Path:
    """The trace of ``case`` with every record of cluster ``eu-1``."""
    out = folder / f"{case.name}-eu-1.jsonl"
    out.write_text("".join(json.dumps({**json.loads(line), "cluster": "eu-1"}) + "\n"
                           for line in (case / "trace.jsonl").read_text().splitlines()))
    return out


def test_a_view_is_answered_by_either_worker(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             kafka_settings: Settings) -> None:
    monkeypatch.delenv("POD_IP", raising=False)
    settings = kafka_settings
    lines = merged_by_time([case / "trace.jsonl" for case in handed_case_dirs()] +
                           [in_eu_1(case, tmp_path) for case in handed_case_dirs()])
    expected = offline(lines, AT)
    port = free_port_on_both()
    bases = [f"http://{address}:{port}" for address in ADDRESSES]
    with contextlib.ExitStack() as stack:
        workers = [stack.enter_context(worker_run(
            settings, tmp_path / f"worker-{address}.log",
            extra_args=("--http-port", str(port), "--http-bind", address)))
            for address in ADDRESSES]
        alive = lambda: all(w.alive() for w in workers)  # noqa: E731
        logs = lambda: "\n".join((tmp_path / f"worker-{a}.log").read_text()[-1500:]  # noqa: E731
                                 for a in ADDRESSES)
        assert wait_group_stable(settings.bootstrap, settings.app_id, 90, alive=alive,
                                 security=settings.security, members=2), logs()
        publisher = Publisher(settings)
        workers[0].replay(lines, at=AT, publisher=publisher)
        publisher.close()
        caught_up(settings, alive, 120, logs)
        owned: list[set[str]] = []
        deadline = time.monotonic() + 60
        while True:  # both views up, both assignments settled, every gang owned once
            with contextlib.suppress(requests.RequestException, ValueError, KeyError):
                owned = [local_gangs(base) for base in bases]
                if sorted(owned[0] | owned[1]) == sorted(expected.states) and \
                        not owned[0] & owned[1]:
                    break
            assert time.monotonic() < deadline, (owned, logs())
            time.sleep(0.5)
        # the gangs are split between the two (partitions 0, 2, 3, 5 of 8 are used, by the
        # default cluster's keys and by eu-1's), so each worker is asked for gangs it does not
        # own
        assert owned[0] and owned[1], owned
        assert len(expected.states) == 10
        assert {partition_of(k, settings.partitions) for k in expected.states
                if k.startswith("eu-1:")} == {0, 3, 5}
        assert {partition_of(g, settings.partitions) for g in expected.states} == {0, 2, 3, 5}
        for base in bases:
            for key, state in sorted(expected.states.items()):
                cluster, gang = split_key(key)
                answer = requests.get(f"{base}/gangs/{gang}", params={"cluster": cluster},
                                      timeout=10)
                assert answer.status_code == 200, (base, key, answer.text)
                assert answer.json() == plain(gang_detail(state)), (base, key)
            for cluster in ("default", "eu-1"):
                for gang in ("team-a/llm-pretrain", None):  # without gang: found by the pod
                    why = requests.get(f"{base}/pods/team-a/llm-pretrain-worker-0/why",
                                       params={"gang": gang or "", "cluster": cluster},
                                       timeout=10)
                    assert why.status_code == 200, (base, cluster, gang, why.text)
                    assert why.json() == plain(explain_pod(expected.states,
                                                           "team-a/llm-pretrain-worker-0",
                                                           gang, cluster=cluster))
        # the lists and the fleet are the group's, whichever worker is asked: it gathers the
        # other's gangs (scope=local) and merges them; ticks without a cluster reached every
        # partition, so both heard the default cluster at AT
        everyone = plain(gang_rows(expected.states.values(), cluster=None))
        fleet = plain(fleet_summary(expected.states.items(), heard={"default": AT}))
        assert [r["gangs"] for r in fleet] == [5, 5]
        for base in bases:
            rows = requests.get(f"{base}/gangs", params={"all_clusters": "1"}, timeout=10)
            assert rows.status_code == 200, (base, rows.text)
            assert rows.json() == {"gangs": everyone}, base
            eu = requests.get(f"{base}/gangs", params={"cluster": "eu-1"}, timeout=10).json()
            assert [r["gang"] for r in eu["gangs"]] == sorted(
                split_key(k)[1] for k in expected.states if k.startswith("eu-1:"))
            answer = requests.get(f"{base}/fleet", timeout=10)
            assert answer.status_code == 200, (base, answer.text)
            assert answer.json() == {"clusters": fleet}, base
        # a worker that does not answer (hung: stopped) makes the gathered answer 503 after
        # PEER_TIMEOUT_SECONDS, never a part of the fleet passed off as all of it; it stays in
        # the group's assignment until its Kafka session times out (60 s)
        # (the same for a request forwarded to the owner of a gang: a 500 and a traceback
        # before, then the query command gave up at once)
        cluster, gang = split_key(sorted(owned[1])[0])
        os.killpg(workers[1].worker.pid, signal.SIGSTOP)
        try:
            answers = [requests.get(bases[0] + "/fleet", timeout=30),
                       requests.get(f"{bases[0]}/gangs/{gang}", params={"cluster": cluster},
                                    timeout=30)]
        finally:
            os.killpg(workers[1].worker.pid, signal.SIGCONT)
        for answer in answers:
            assert answer.status_code == 503, answer.text
            assert answer.json() == {"error": f"worker http://{ADDRESSES[1]}:{port} did not "
                                              f"answer (TimeoutError)"}, answer.text
