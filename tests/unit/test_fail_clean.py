"""Every command fails clean (issue 21, item 4): an unreachable broker, worker or API server, a
missing, unreadable or invalid kubeconfig, a SIGTERM or Ctrl-C at any moment: one line on
stderr (what, where, what to do), the exit status of the table in ``streams.kafka.waiting``
(README "Exit statuses"), never a traceback; interactive commands say they are waiting at the
first failed attempt and give up after ``--timeout``; long-running ones retry, log that they
wait, and answer ``/readyz`` with 503 and the reason.

Each case runs the real ``gangstate`` entry point (``.venv/bin/gangstate``) as a subprocess
against 127.0.0.1 ports that refuse connections (bound, then closed); no Kafka is needed.
Conditions are waited on by reading the process's stderr until the line appears (or a
deadline passes), never by sleeping.
"""

from __future__ import annotations

import json
import os
import queue
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest
import requests
import tenacity

from producers.watch.watching import WatchConfig, Watcher
from streams.settings import Settings
from streams.kafka.waiting import Backoff, Failure, Readiness, Unreachable, retry
from tests.doubles.apiserver import ApiServerDouble

GANGSTATE = str(Path(sys.executable).parent / "gangstate")
ROOT = Path(__file__).resolve().parents[2]
TRACE = str(Path(__file__).resolve().parents[1] / "cases" / "insufficient-members"
            / "trace.jsonl")
KAFKA_HINT = "check the address, or start a local broker with `python deploy/kafka/broker.py run`"
DEADLINE = 60.0
"""Seconds a line may take to appear before the test fails (a generous bound, not a timing)."""


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound to find a free one, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("KAFKA_BOOTSTRAP_SERVERS", "GANGSTATE_SERVER", "KUBECONFIG")}
    env.update(extra)
    return env


def gangstate(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GANGSTATE, *args], capture_output=True, text=True, timeout=120,
                          env=environment(**env))


class Running:
    """A ``gangstate`` process whose stderr (with stdout) is read line by line in a thread."""

    def __init__(self, *args: str, **env: str) -> None:
        self.proc = subprocess.Popen([GANGSTATE, *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     env=environment(**env))
        self.lines: list[str] = []
        self._new: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._new.put(line.rstrip("\n"))
        self._new.put(None)

    def wait_for(self, text: str) -> str:
        """The first line containing ``text`` (fails after ``DEADLINE`` or at the end)."""
        for line in self.lines:
            if text in line:
                return line
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                line = self._new.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line with {text!r} in {DEADLINE} s: {self.lines}")
            if line is None:
                raise AssertionError(f"ended ({self.proc.wait()}) without {text!r}: "
                                     f"{self.lines}")
            self.lines.append(line)
            if text in line:
                return line

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, list[str]]:
        """Send ``signum``; the exit status and every line once the process has ended."""
        self.proc.send_signal(signum)
        status = self.proc.wait(timeout=DEADLINE)
        while (line := self._new.get(timeout=DEADLINE)) is not None:
            self.lines.append(line)
        return status, self.lines

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def running() -> Iterator[list[Running]]:
    started: list[Running] = []
    yield started
    for proc in started:
        proc.kill()


def no_traceback(text: str) -> None:
    assert "Traceback" not in text, text


# -- the one retry loop ----------------------------------------------------------------------

def test_retry_says_it_waits_once_and_gives_up_at_the_deadline() -> None:
    now, said, calls = [0.0], [], [0]

    def attempt() -> None:  # each attempt takes 1 s and fails
        calls[0] += 1
        now[0] += 1.0
        raise Unreachable("refused")

    with pytest.raises(Failure) as failed:
        retry(attempt, who="gangstate x", waiting="W at a (A)", deadline=3.5, say=said.append,
              give_up="do Y", clock=lambda: now[0], rand=lambda: 0.0)
    # attempts end at 1, 2, 3 s (before the deadline: tried again) and 4 s (past it)
    assert (calls[0], said) == (4, ["gangstate x: waiting for W at a (A) ..."])
    assert (str(failed.value), failed.value.status) == (
        "cannot reach W at a (A) after 4 s (refused); do Y", 1)


def test_retry_of_a_long_running_component_keeps_readiness() -> None:
    readiness = Readiness("starting", check=lambda: None)
    seen: list[str | None] = []

    def attempt() -> int:  # fails twice, then answers
        seen.append(readiness.state())
        if len(seen) < 3:
            raise Unreachable("refused")
        return 7

    assert retry(attempt, who="gangstate w", waiting="Kafka at k (K)", readiness=readiness,
                 rand=lambda: 0.0) == 7
    assert seen == ["starting", "waiting for Kafka at k (K)", "waiting for Kafka at k (K)"]
    assert readiness.answer() == (200, "ready\n")
    readiness.check = lambda: "not listed yet: pods"
    assert readiness.answer() == (503, "not ready: not listed yet: pods\n")


class Pauses(threading.Event):
    """A ``stop`` that is never set and records the pauses ``retry`` asks of it (seconds)
    instead of waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.asked.append(timeout if timeout is not None else -1.0)
        return False


def test_retry_waits_the_capped_full_jitter_schedule() -> None:
    # BACKOFF_BASE 0.5 s doubling, BACKOFF_CAP 10 s, the draw pinned at 0.5: before retry k
    # (0-based) 0.5 * min(10, 0.5 * 2**k) = 0.25, 0.5, 1, 2, 4, then 0.5 * 10 = 5 from k=5 on
    pauses, calls = Pauses(), [0]

    def attempt() -> int:  # fails 7 times, then answers
        calls[0] += 1
        if calls[0] <= 7:
            raise Unreachable("refused")
        return 7

    assert retry(attempt, who="gangstate w", waiting="W", stop=pauses, rand=lambda: 0.5) == 7
    assert pauses.asked == [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


def test_backoff_draws_what_tenacity_wait_random_exponential_draws() -> None:
    # with the default draw (random.random), Backoff(0.5, 10) is tenacity's own
    # wait_random_exponential(multiplier=0.5, max=10), delay for delay, from the same seed
    def delays(wait: tenacity.wait.wait_base) -> list[float]:
        random.seed(2026)
        out = []
        for n in range(1, 13):
            state = tenacity.RetryCallState(None, None, (), {})
            state.attempt_number = n
            out.append(wait(state))
        return out

    ours = delays(Backoff(0.5, 10.0))
    assert ours == delays(tenacity.wait_random_exponential(multiplier=0.5, max=10))
    assert all(0 <= d < min(10.0, 0.5 * 2 ** k) for k, d in enumerate(ours))


def test_retry_ends_when_stopped() -> None:
    stop = threading.Event()

    def attempt() -> None:
        stop.set()  # a SIGTERM during the attempt
        raise Unreachable("refused")

    assert retry(attempt, who="gangstate w", waiting="W", stop=stop) is None


# -- interactive commands: a waiting line, then one line and exit 1 after --timeout -----------

def test_tap_says_it_waits_for_kafka_then_gives_up_with_one_line() -> None:
    port = closed_port()
    run = gangstate("tap", "diagnostics", "--timeout", "3",
                    KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{port}")
    no_traceback(run.stdout + run.stderr)
    assert (run.returncode, run.stdout) == (1, "")
    waiting, failed = run.stderr.splitlines()
    assert waiting == (f"gangstate tap: waiting for Kafka at 127.0.0.1:{port} "
                       f"(KAFKA_BOOTSTRAP_SERVERS) ...")
    assert failed.startswith(f"gangstate tap: cannot reach Kafka at 127.0.0.1:{port} "
                             f"(KAFKA_BOOTSTRAP_SERVERS) after ")
    assert failed.endswith(f"(KafkaTimeoutError: Unable to bootstrap from 127.0.0.1:{port}); "
                           f"{KAFKA_HINT}")


def test_replay_names_the_flag_the_address_came_from() -> None:
    port = closed_port()
    run = gangstate("replay", TRACE, "--bootstrap", f"127.0.0.1:{port}", "--timeout", "0")
    no_traceback(run.stdout + run.stderr)
    assert (run.returncode, run.stdout) == (1, "")
    # --timeout 0: no waiting, the one line at the first failed attempt
    [line] = run.stderr.splitlines()
    assert re.fullmatch(rf"gangstate replay: cannot reach Kafka at 127\.0\.0\.1:{port} "
                        rf"\(--bootstrap\) after [01] s \(KafkaTimeoutError: Unable to "
                        rf"bootstrap from 127\.0\.0\.1:{port}\); check the address, .*", line), line


@pytest.mark.parametrize("argv", [["get", "gangs"], ["describe", "gang", "team-a/llm-pretrain"],
                                  ["explain", "pod", "team-a/llm-pretrain-worker-0"]],
                         ids=["get", "describe", "explain"])
def test_query_commands_wait_for_the_worker_then_give_up(argv: list[str]) -> None:
    port = closed_port()
    run = gangstate(*argv, "--timeout", "2", GANGSTATE_SERVER=f"http://127.0.0.1:{port}")
    no_traceback(run.stdout + run.stderr)
    assert (run.returncode, run.stdout) == (1, "")
    where = f"the gangstate worker at http://127.0.0.1:{port} (GANGSTATE_SERVER)"
    assert run.stderr.splitlines() == [
        f"gangstate {argv[0]}: waiting for {where} ...",
        f"gangstate {argv[0]}: cannot reach {where} after 2 s (ConnectionError); start one "
        f"with `gangstate worker --http-port PORT`, or set --server / GANGSTATE_SERVER"]


@pytest.mark.parametrize("signum, status, line", [
    (signal.SIGTERM, 143, "gangstate tap: stopped by SIGTERM"),
    (signal.SIGINT, 130, "gangstate tap: interrupted"),
], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_tap_waits_is_one_line(running: list[Running], signum: int, status: int,
                                              line: str) -> None:
    port = closed_port()
    proc = Running("tap", "diagnostics", KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{port}")
    running.append(proc)
    proc.wait_for("gangstate tap: waiting for Kafka at")
    got, lines = proc.stop(signum)
    no_traceback("\n".join(lines))
    assert (got, lines[-1]) == (status, line)
    # click ends the line of a ^C with an empty one
    assert len([text for text in lines if text]) == 2, lines


def test_sigterm_while_a_query_waits(running: list[Running]) -> None:
    port = closed_port()
    proc = Running("get", "gangs", "--server", f"http://127.0.0.1:{port}")
    running.append(proc)
    proc.wait_for("gangstate get: waiting for the gangstate worker")
    got, lines = proc.stop()
    no_traceback("\n".join(lines))
    assert (got, lines[-1]) == (143, "gangstate get: stopped by SIGTERM")


# -- the kubeconfig: checked first, one line, exit 2 ------------------------------------------

@pytest.mark.parametrize("command", ["watch", "sink"])
@pytest.mark.parametrize("case", ["missing", "directory", "not-yaml", "no-context"])
def test_a_bad_kubeconfig_is_one_line_and_exit_2(tmp_path: Path, command: str,
                                                 case: str) -> None:
    path = {"missing": tmp_path / "nonexistent", "directory": tmp_path}.get(
        case, tmp_path / "kubeconfig")
    if case == "not-yaml":
        path.write_text("clusters: [\n")
    elif case == "no-context":
        path.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    # Kafka unreachable too: the kubeconfig is reported before anything waits for it
    run = gangstate(command, "--kubeconfig", str(path),
                    KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{closed_port()}")
    no_traceback(run.stdout + run.stderr)
    assert run.returncode == 2
    [line] = run.stderr.splitlines()
    expected = {
        "missing": f"gangstate {command}: cannot read the kubeconfig {path} (--kubeconfig): "
                   f"No such file or directory; give a readable one with --kubeconfig or "
                   f"KUBECONFIG, or --in-cluster in a pod",
        "directory": f"gangstate {command}: cannot read the kubeconfig {path} (--kubeconfig): "
                     f"Is a directory; give a readable one with --kubeconfig or KUBECONFIG, "
                     f"or --in-cluster in a pod",
        "not-yaml": f"gangstate {command}: the kubeconfig {path} (--kubeconfig) cannot be "
                    f"used: while parsing a flow node expected the node content, but found "
                    f"'<stream end>' in \"{path}\", line 2, column 1; check it with `kubectl "
                    f"--kubeconfig {path} config view`",
        "no-context": f"gangstate {command}: the kubeconfig {path} (--kubeconfig) cannot be "
                      f"used: Invalid kube-config file. Expected key current-context in "
                      f"{path}; check it with `kubectl --kubeconfig {path} config view`",
    }[case]
    assert line == expected


def test_the_kubeconfig_of_the_environment_is_named_as_such(tmp_path: Path) -> None:
    missing = tmp_path / "kubeconfig"
    run = gangstate("watch", KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:1", KUBECONFIG=str(missing))
    assert run.returncode == 2
    assert run.stderr.startswith(f"gangstate watch: cannot read the kubeconfig {missing} "
                                 f"(KUBECONFIG): No such file or directory")


def test_in_cluster_outside_a_pod_is_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE")}
    run = subprocess.run([GANGSTATE, "sink", "--in-cluster", "--bootstrap", "127.0.0.1:1"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 2
    assert run.stderr == ("gangstate sink: --in-cluster: no ServiceAccount here (Service "
                          "host/port is not set.); run it in a pod, or give --kubeconfig\n")


# -- long-running components: retry with a logged line, /readyz 503, SIGTERM exits 0 ----------

def kubeconfig_of(tmp_path: Path, server: str) -> str:
    """A kubeconfig whose one context points at ``server`` with a token."""
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "{server}"}}
users:
- name: u
  user: {{token: "t"}}
contexts:
- name: c
  context: {{cluster: c, user: u}}
current-context: c
""")
    return str(path)


@pytest.mark.parametrize("command", ["worker", "watch", "sink"])
def test_long_running_components_wait_for_kafka_visibly_and_stop_clean(
        tmp_path: Path, running: list[Running], command: str) -> None:
    kafka, http = closed_port(), closed_port()
    args = [command, "--http-port", str(http)]
    if command != "worker":
        args += ["--kubeconfig", kubeconfig_of(tmp_path, f"http://127.0.0.1:{closed_port()}")]
    proc = Running(*args, KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{kafka}",
                   GANGSTATE_DATA_DIR=str(tmp_path / "data"))
    running.append(proc)
    line = proc.wait_for(f"gangstate {command}: waiting for Kafka at 127.0.0.1:{kafka}")
    assert line.endswith(f"(KAFKA_BOOTSTRAP_SERVERS): KafkaTimeoutError: Unable to bootstrap "
                         f"from 127.0.0.1:{kafka}; retrying in " + line.rsplit(" in ", 1)[1])
    ready = requests.get(f"http://127.0.0.1:{http}/readyz", timeout=10)
    assert (ready.status_code, ready.text) == (
        503, f"not ready: waiting for Kafka at 127.0.0.1:{kafka} (KAFKA_BOOTSTRAP_SERVERS)\n")
    # alive meanwhile (a liveness probe asks /metrics; the worker's are empty until Faust runs)
    assert requests.get(f"http://127.0.0.1:{http}/metrics", timeout=10).status_code == 200
    status, lines = proc.stop()
    no_traceback("\n".join(lines))
    assert status == 0
    # the libraries say nothing: every line is gangstate's own (the waiting lines, "stopping")
    assert all(f"gangstate {command}: waiting for Kafka" in line or "signal 15: stopping" in line
               for line in lines), lines


def test_sigterm_before_a_component_has_its_handlers_is_exit_0(running: list[Running]) -> None:
    """A SIGTERM in the first moments (while the command is still being set up) ends a
    long-running component with 0 as well; here as soon as it has said anything."""
    proc = Running("sink", "--bootstrap", f"127.0.0.1:{closed_port()}", "--dry-run")
    running.append(proc)
    proc.wait_for("waiting for Kafka")
    status, lines = proc.stop()
    assert status == 0 and "Traceback" not in "\n".join(lines)


def test_an_http_port_in_use_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = gangstate("sink", "--dry-run", "--http-port", str(port), "--bootstrap",
                        "127.0.0.1:1")
    no_traceback(run.stdout + run.stderr)
    assert run.returncode == 2
    assert run.stderr.splitlines()[-1] == (f"gangstate sink: cannot listen on 127.0.0.1:{port} "
                                           f"(--http-port): Address already in use; choose "
                                           f"another port")


def test_a_dry_run_sink_whose_reader_goes_away_ends_quietly(tmp_path: Path) -> None:
    # `gangstate sink --dry-run --input F | head -c 300`: once head has read its bytes and
    # closed the pipe, the sink ends with status 0 at once; it used to log each later write as
    # a failed POST (BrokenPipeError) and retry it for minutes. The diagnostics of every
    # recorded case, one Event line of about 1 KB per pod each: more than a pipe's 64 KiB
    # buffer, so the sink is still writing when the reader has gone.
    diagnostics: list[dict[str, object]] = []
    for trace in sorted((ROOT / "tests/cases/recorded").glob("*/trace.jsonl")):
        fold = gangstate("fold", str(trace), "--output", "json", "--at", "2026-12-02T13:55:00Z")
        assert fold.returncode == 0, fold.stderr
        diagnostics += json.loads(fold.stdout)["diagnostics"]
    given = tmp_path / "diagnostics.json"
    given.write_text(json.dumps({"diagnostics": diagnostics, "commands": []}))
    proc = subprocess.Popen([GANGSTATE, "sink", "--dry-run", "--input", str(given)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=environment())
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith('{"body": ')
    proc.stdout.close()
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"the sink still runs 60 s after its reader went away:\n"
                    f"{proc.stderr.read()[-2000:]}")
    err = proc.stderr.read()
    assert code == 0, err
    no_traceback(err)
    assert "BrokenPipeError" not in err and "retrying" not in err, err


# -- the watch refused by the API server at its first list: one line, exit 1 -------------------

class _Sink:
    def send_json(self, *args: object, **kwargs: object) -> None:
        pass

    def flush(self) -> None:
        pass


def test_a_watch_forbidden_to_list_pods_gives_up_with_the_rule_it_needs() -> None:
    with ApiServerDouble() as server:
        server.allow_only([{"apiGroups": [""], "resources": ["events", "nodes"],
                            "verbs": ["list", "watch"]}])
        from kubernetes import client

        watcher = Watcher(client.ApiClient(server.configuration()), _Sink(),  # type: ignore[arg-type]
                          Settings(), WatchConfig(podgroups=False, native=False,
                                                  tick_interval=None, refused_for=0.5))
        runner = threading.Thread(target=watcher.run, daemon=True)
        runner.start()
        runner.join(DEADLINE)
        watcher.stop()
    assert not runner.is_alive()
    assert watcher.failure == (
        f"the API server at {server.url} forbids listing pods (API group '') cluster-wide "
        f"(403 Forbidden); grant the watch's user or ServiceAccount list and watch on it "
        f"(deploy/kubernetes/rbac.yaml)")
