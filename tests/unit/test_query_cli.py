"""``gangstate get gangs``, ``describe gang``, ``explain pod`` against the offline fold
(``--from TRACE``) of every handed case, and their errors.

Each case is a named scenario: the trace, the time the state is taken at, and what a person must
read, worked out by hand from the trace (tests/cases/*/trace.jsonl). The server path is tested
against a real worker in tests/kafka/test_worker_web.py.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path

import pytest

from streams.cli import main
from streams.core.timefmt import parse_time
from streams.wire.traces import fold_trace
from streams.query.answers import gang_detail
from tests.fixtures.tracegen import gated_representative

CASES = Path(__file__).resolve().parents[1] / "cases"
END = "2026-11-29T00:00:00Z"
DELETED_AT_END = "2026-11-02T09:15:00Z"
"""Within 600 s of the deletion in ``deleted_trace`` (09:10:05): the tombstone is still kept."""


@dataclass(frozen=True)
class Scenario:
    """What the three commands must say about one case at one time."""

    case: str
    at: str
    gang: str
    row: list[str]            # the `get gangs` line: namespace, name, phase, members, bound,
                              # waiting, representative
    findings: list[str]       # `describe gang` findings, as "TYPE REASON"
    pod: str
    held_at: str
    reasons: list[str]        # `explain pod` reasons, in order
    unblock: list[str]        # `explain pod` unblock lines

    @property
    def trace(self) -> str:
        return str(CASES / self.case / "trace.jsonl")


def not_yet_attempted(group: str) -> str:
    """explain's reason for a pending pod of a gang that passes its checks and has no attempt
    yet (``streams.core.explain._explain_queue``; Koordinator v1.8.0 keeps one pod of the group
    in the queue, ``core/gang.go:572-586``)."""
    return (f"NotYetAttempted: the gang passes its checks and the scheduler has not attempted "
            f"this pod yet: koord-scheduler v1.8.0 keeps one pod of gang group {group} (its "
            f"representative) in the scheduling queue and hands the others out one per cycle "
            f"when that pod is popped; which pod is the representative is not in any Event "
            f"(the scheduler shim reports it)")


SCENARIOS = [
    Scenario("insufficient-members", "2026-11-02T09:04:00Z", "team-a/llm-pretrain",
             ["team-a", "llm-pretrain", "Gathering", "3/4", "0", "0", "<none>"],
             ["Warning GangMembersInsufficient"], "team-a/llm-pretrain-worker-0", "PreEnqueue",
             ["GangMembersInsufficient: gang team-a/llm-pretrain has 3 of minMember 4 pods; "
              "scheduling is held at PreEnqueue until 1 more exists"],
             ["create 1 more pod of gang team-a/llm-pretrain, or lower min-available to 3"]),
    Scenario("insufficient-members", END, "team-a/llm-pretrain",
             ["team-a", "llm-pretrain", "Ready", "4/4", "0", "0", "<none>"],
             [], "team-a/llm-pretrain-worker-3", "<none>",
             [not_yet_attempted("team-a/llm-pretrain")], []),
    Scenario("invalid-spec-values", END, "nlp/gpt-distill",
             ["nlp", "gpt-distill", "Ready", "2/2", "0", "0", "<none>"],
             ["Warning GangSpecInvalid", "Warning GangSpecInvalid"], "nlp/gpt-distill-0",
             "<none>",
             [not_yet_attempted("nlp/gpt-distill"),
              "GangSpecInvalid: gang nlp/gpt-distill: mode 'nonstrict' is not valid; the "
              "scheduler silently uses Strict",
              "GangSpecInvalid: gang nlp/gpt-distill: waiting-time '1h30' is not valid; the "
              "scheduler silently uses 600s"], []),
    Scenario("podgroup-missing", "2026-11-02T09:01:00Z", "vision/resnet-ddp",
             ["vision", "resnet-ddp", "NotInitialized", "2/?", "0", "0", "<none>"],
             ["Warning GangNotInitialized"], "vision/resnet-ddp-1", "PreEnqueue",
             ["GangNotInitialized: gang vision/resnet-ddp is not initialized: 2 pods name it, "
              "but no PodGroup and no valid min-available annotation gives its spec; scheduling is "
              "held at PreEnqueue"],
             ["create PodGroup vision/resnet-ddp (scheduling.sigs.k8s.io/v1alpha1) with "
              "spec.minMember, or remove the pod-group.scheduling.sigs.k8s.io label and set the "
              "gang.scheduling.koordinator.sh/min-available annotation"]),
    Scenario("podgroup-missing", END, "vision/resnet-ddp",
             ["vision", "resnet-ddp", "Ready", "2/2", "0", "0", "<none>"],
             [], "vision/resnet-ddp-1", "<none>", [not_yet_attempted("vision/resnet-ddp")], []),
    Scenario("recreated-same-name", END, "team-c/bert-large",
             ["team-c", "bert-large", "Ready", "4/4", "0", "0", "<none>"],
             [], "team-c/bert-large-worker-1", "<none>",
             [not_yet_attempted("team-c/bert-large")], []),
    Scenario("spec-conflict", END, "research/rl-rollout",
             ["research", "rl-rollout", "Ready", "4/4", "0", "0", "<none>"],
             ["Warning GangSpecConflict"], "research/rl-rollout-2", "<none>",
             [not_yet_attempted("research/rl-rollout"),
              "GangSpecConflict: gang research/rl-rollout: members disagree on min-available "
              "('2' on rl-rollout-2, rl-rollout-3; '4' on rl-rollout-0, rl-rollout-1); the "
              "scheduler keeps the value of the object that initialised the gang"], []),
]
IDS = [f"{s.case}@{s.at[11:16]}" for s in SCENARIOS]



def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


def section(text: str, title: str) -> list[str]:
    """The lines of a ``Title:`` section (up to the next blank or unindented line)."""
    lines = text.splitlines()
    start = lines.index(f"{title}:") + 1
    body = []
    for line in lines[start:]:
        if not line.startswith("  "):
            break
        body.append(line.strip())
    return body


def test_every_handed_case_has_a_scenario() -> None:
    assert sorted({s.case for s in SCENARIOS}) == sorted(
        p.name for p in CASES.iterdir() if (p / "trace.jsonl").is_file())


@pytest.mark.parametrize("s", SCENARIOS, ids=IDS)
def test_get_gangs(s: Scenario, capsys) -> None:
    status, out, _ = run(capsys, "get", "gangs", "--from", s.trace, "--at", s.at)
    assert status == 0
    header, *rows = [line.split() for line in out.splitlines()]
    assert header == ["NAMESPACE", "NAME", "SCHEDULER", "PHASE", "MEMBERS", "BOUND", "WAITING",
                      "REPRESENTATIVE"]
    assert rows == [s.row[:2] + ["koord-scheduler"] + s.row[2:]]  # the cases are Koordinator's
    # Columns are aligned: every line has its PHASE column at the same offset.
    offsets = {line.index(word) for line, word in zip(out.splitlines(), ["PHASE", *[s.row[2]]])}
    assert len(offsets) == 1


@pytest.mark.parametrize("s", SCENARIOS, ids=IDS)
def test_describe_gang(s: Scenario, capsys) -> None:
    status, out, _ = run(capsys, "describe", "gang", s.gang, "--from", s.trace, "--at", s.at)
    assert status == 0
    ns, name = s.gang.split("/")
    assert f"Name:           {name}\n" in out and f"Namespace:      {ns}\n" in out
    assert f"Phase:          {s.row[2]}\n" in out
    findings = section(out, "Findings")
    if s.findings:
        assert findings[0].split() == ["TYPE", "REASON", "SINCE", "MESSAGE"]
        assert [" ".join(f.split()[:2]) for f in findings[1:]] == s.findings
    else:
        assert findings == ["<none>"]
    pods = section(out, "Pods")
    assert len(pods) - 1 == int(s.row[3].split("/")[0])


@pytest.mark.parametrize("s", SCENARIOS, ids=IDS)
def test_explain_pod_says_why_and_what_would_unblock_it_in_one_screen(s: Scenario,
                                                                     capsys) -> None:
    status, out, _ = run(capsys, "explain", "pod", s.pod, "--from", s.trace, "--at", s.at)
    assert status == 0
    assert out.startswith(f"Pod:            {s.pod}\n")
    assert f"Held at:        {s.held_at}\n" in out
    why = section(out, "Why it is pending")
    if s.held_at == "<none>":
        assert why[0] == "no gang condition known to gangstate holds it"
        why = why[1:]
    assert why == s.reasons
    unblock = section(out, "What would unblock it")
    assert unblock == ([f"- {u}" for u in s.unblock] or ["<nothing gangstate can name>"])
    assert len(out.splitlines()) <= 24  # one screen


def test_explain_pod_as_in_issue_7(capsys) -> None:
    status, out, _ = run(capsys, "explain", "pod", "team-a/llm-pretrain-worker-0", "--from",
                         str(CASES / "insufficient-members" / "trace.jsonl"),
                         "--at", "2026-11-02T09:04:00Z")
    assert status == 0
    assert "GangMembersInsufficient" in out and "create 1 more pod" in out
    assert ("Gang:           team-a/llm-pretrain (Gathering: 3 of minMember 4 pods, 0 bound, "
            "0 waiting at Permit)\n") in out
    assert "Last cycle:     100 PreEnqueue Gated (GangBasicCheckUnsatisfied)\n" in out


def test_describe_gang_shows_spec_findings_since_and_history(capsys) -> None:
    trace = str(CASES / "insufficient-members" / "trace.jsonl")
    status, out, _ = run(capsys, "describe", "gang", "team-a/llm-pretrain", "--from", trace,
                         "--at", "2026-11-02T09:04:00Z")
    assert status == 0
    assert "Min member:     4\n" in out and "Mode:           Strict\n" in out
    assert "Members:        3 (0 bound, 0 waiting at Permit)\n" in out
    finding = section(out, "Findings")[1].split()
    assert finding[:3] == ["Warning", "GangMembersInsufficient", "2026-11-02T09:00:00.000000Z"]
    history = section(out, "History")
    assert history[1].split()[0] == "2026-11-02T09:00:00.000000Z"
    # The hold began at 09:00:00; its warning fired when the 10 s grace period ended.
    assert history[-1].split()[:3] == ["2026-11-02T09:00:10.000000Z", "emitted",
                                       "GangMembersInsufficient"]
    assert history[-1].endswith("grace period ended")


def gated_trace(tmp_path: Path) -> Path:
    """The shim's gated representative (``tracegen.gated_representative``) as a trace file."""
    trace = tmp_path / "gated.jsonl"
    trace.write_text("\n".join(gated_representative()) + "\n")
    return trace


def test_json_output_is_the_views_document(capsys, tmp_path) -> None:
    trace = gated_trace(tmp_path)
    status, out, _ = run(capsys, "describe", "gang", "team-g/g", "--from",
                         str(trace), "--at", END, "-o", "json")
    assert status == 0
    state = fold_trace(trace, parse_time(END)).states["team-g/g"]
    assert json.loads(out) == json.loads(json.dumps(gang_detail(state)))
    status, out, _ = run(capsys, "explain", "pod", "team-g/g-0", "--from",
                         str(trace), "--at", END, "-o", "json")
    doc = json.loads(out)
    assert (doc["held_at"], doc["held_by"]) == ("PreEnqueue", "schedulingGates of team-g/g-0")
    status, out, _ = run(capsys, "explain", "pod", "team-g/u-1", "--from",
                         str(trace), "--at", END, "-o", "json")
    assert json.loads(out)["last_cycle"] == {
        "cycle": 40, "stage": "PreEnqueue", "status": "UnschedulableAndUnresolvable",
        "reason": "RepresentativeExists"}
    status, out, _ = run(capsys, "get", "gangs", "--from", str(trace), "--at", END, "-o", "json")
    assert [g["gang"] for g in json.loads(out)["gangs"]] == ["team-g/g"]


def test_several_traces_are_merged_and_filtered(capsys, tmp_path) -> None:
    traces = [a for case in sorted(CASES.iterdir()) if (case / "trace.jsonl").is_file()
              for a in ("--from", str(case / "trace.jsonl"))]
    traces += ["--from", str(gated_trace(tmp_path))]
    status, out, _ = run(capsys, "get", "gangs", *traces, "--at", END, "-n", "team-a")
    assert status == 0
    assert [line.split()[:5] for line in out.splitlines()[1:]] == [
        ["team-a", "llm-pretrain", "koord-scheduler", "Ready", "4/4"]]
    status, out, _ = run(capsys, "get", "gangs", *traces, "--at", END, "--phase", "Scheduling")
    assert [line.split()[1] for line in out.splitlines()[1:]] == ["g"]
    status, out, err = run(capsys, "get", "gangs", *traces, "--at", END, "-n", "nobody")
    assert (status, out, err) == (0, "", "No gangs found in namespace nobody.\n")
    status, _, err = run(capsys, "get", "gangs", *traces, "--phase", "Stuck")
    assert status == 2 and "unknown phase 'Stuck'" in err


@pytest.mark.parametrize("argv, message", [
    (["describe", "gang", "team-a/nope"], "gangstate describe: gang team-a/nope not found\n"),
    (["explain", "pod", "team-a/ghost"],
     "gangstate explain: pod team-a/ghost is not a live member of any known gang\n"),
    (["explain", "pod", "team-a/llm-pretrain-worker-0", "--gang", "team-a/other"],
     "gangstate explain: gang team-a/other not found\n"),
    (["explain", "pod", "team-a/ghost", "--gang", "team-a/llm-pretrain"],
     "gangstate explain: pod team-a/ghost is not a live member of gang team-a/llm-pretrain\n"),
    # Before worker-3 exists, it is nobody's member.
    (["explain", "pod", "team-a/llm-pretrain-worker-3", "--at", "2026-11-02T09:04:00Z"],
     "gangstate explain: pod team-a/llm-pretrain-worker-3 is not a live member of any known "
     "gang\n"),
])
def test_unknown_gang_or_pod_exits_1(argv, message, capsys) -> None:
    trace = str(CASES / "insufficient-members" / "trace.jsonl")
    status, out, err = run(capsys, *argv, "--from", trace)
    assert (status, out, err) == (1, "", message)


def test_unreachable_server_exits_1(capsys, monkeypatch) -> None:
    """Unreachable after --timeout (0: at the first attempt) is a runtime failure, exit 1
    (waiting for it: tests/unit/test_fail_clean.py)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        monkeypatch.setenv("GANGSTATE_SERVER", f"http://127.0.0.1:{port}")
        status, out, err = run(capsys, "get", "gangs", "--timeout", "0")
    assert status == 1 and out == ""
    assert err == (f"gangstate get: cannot reach the gangstate worker at http://127.0.0.1:"
                   f"{port} (GANGSTATE_SERVER) after 0 s (ConnectionError); start one with "
                   f"`gangstate worker --http-port PORT`, or set --server / GANGSTATE_SERVER\n")


def test_a_worker_that_answers_503_is_not_called_unreachable(capsys) -> None:
    """A worker that answers 503 (another worker of its group gone, or no partitions yet) was
    reached: after --timeout the line says what it answered, not "cannot reach ... start one"
    (a new user's run, with one of two workers killed)."""
    import http.server
    import threading

    class Busy(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"error": "worker http://10.0.3.7:6066 did not answer (ClientConnectorError)"}'
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Busy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        status, out, err = run(capsys, "get", "fleet", "--server", base, "--timeout", "0")
    finally:
        server.shutdown()
    assert (status, out) == (1, "")
    assert err == (f"gangstate get: the gangstate worker at {base} (--server) could not answer "
                   f"in 0 s (503: worker http://10.0.3.7:6066 did not answer "
                   f"(ClientConnectorError)); ask again once its group is settled (its /readyz "
                   f"says why not)\n")


@pytest.mark.parametrize("server, where", [
    ("notaurl", "--server"), ("127.0.0.1:6066", "--server"), ("ftp://host:1", "--server"),
    ("http://:6066", "--server"), ("http://host:99999", "--server"), ("http://h:x", "--server"),
    ("http://h:6066/?a=1", "--server"),
])
def test_a_server_that_is_no_address_is_a_usage_error_at_once(server, where, capsys) -> None:
    """An address no retry can mend is exit 2 at once, with the form to give (a new user
    waited 30 s for ``--server notaurl``); a good one is retried (above)."""
    status, out, err = run(capsys, "get", "gangs", "--server", server)
    assert (status, out, err) == (2, "", f"gangstate get: {where}: {server!r} is not a "
                                         f"worker's address: give http://HOST:PORT (e.g. "
                                         f"http://127.0.0.1:6066)\n")


def test_at_without_a_trace_is_a_usage_error(capsys) -> None:
    """--at reads a trace; a worker answers as of its own clocks, and a new user's
    ``explain pod ... --at T`` against a worker silently printed the current state."""
    status, out, err = run(capsys, "explain", "pod", "sb/pg-2", "--at", "2026-12-05T03:03:00Z",
                           "--server", "http://127.0.0.1:6066")
    assert (status, out, err) == (2, "", "gangstate explain: --at needs --from TRACE: a worker "
                                         "answers as of its latest records (its partitions' "
                                         "clocks)\n")


def test_a_server_with_a_path_is_a_usage_error(capsys) -> None:
    status, out, err = run(capsys, "get", "gangs", "--server", "http://127.0.0.1:6066/gangs")
    assert (status, out, err) == (2, "", "gangstate get: --server: 'http://127.0.0.1:6066/gangs' "
                                         "is not a worker's address: give http://HOST:PORT "
                                         "without a path (e.g. http://127.0.0.1:6066; the "
                                         "command adds /gangs, /fleet, ...)\n")


def _resolver_says(monkeypatch, errno: int) -> None:
    import socket

    def getaddrinfo(host, *args, **kwargs):
        raise socket.gaierror(errno, "from the test's resolver")
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_a_worker_host_no_resolver_knows_fails_at_once(capsys, monkeypatch) -> None:
    """A host name that does not exist (EAI_NONAME) is no worker starting up: one line, exit
    1, without the 30 s of retries (a new user waited them for a typo)."""
    import socket

    _resolver_says(monkeypatch, socket.EAI_NONAME)
    status, out, err = run(capsys, "get", "gangs", "--server", "http://gangstate-wrker:6066")
    assert (status, out, err) == (1, "", "gangstate get: --server: cannot resolve host "
                                         "'gangstate-wrker' of http://gangstate-wrker:6066 (no "
                                         "such name); give the worker's address, e.g. "
                                         "http://127.0.0.1:6066\n")


def test_a_temporary_resolver_failure_is_retried(monkeypatch) -> None:
    """EAI_AGAIN (the resolver did not answer) may mend: it is a failed attempt, retried."""
    import socket

    import requests

    from streams.cli.query import _unknown_host

    for errno, expected in ((socket.EAI_AGAIN, None), (socket.EAI_NONAME, "w.example")):
        _resolver_says(monkeypatch, errno)
        with pytest.raises(requests.ConnectionError) as failed:
            requests.get("http://w.example:6066/gangs", timeout=1)
        assert _unknown_host(failed.value) == expected


def test_good_worker_addresses_pass() -> None:
    from streams.cli.query import server_url_problem

    assert [server_url_problem(u) for u in (
        "http://127.0.0.1:6066", "https://gangstate.example.com", "http://[::1]:6066/",
        "http://gangstate-worker.gangstate.svc:6066")] == [None] * 4


def test_unreadable_trace_exits_2(tmp_path, capsys) -> None:
    status, _, err = run(capsys, "get", "gangs", "--from", str(tmp_path / "missing.jsonl"))
    assert status == 2
    assert err == (f"gangstate get: cannot read {tmp_path / 'missing.jsonl'}: "
                   f"No such file or directory\n")


def test_a_name_without_namespace_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["explain", "pod", "llm-pretrain-worker-0"])
    assert exit_.value.code == 2
    assert "'llm-pretrain-worker-0' is not NAMESPACE/NAME" in capsys.readouterr().err


def deleted_trace(tmp_path: Path) -> str:
    """The trace of ``invalid-spec-values`` (gpt-distill-0 at 09:00:00, gpt-distill-1 at
    09:00:01, no PodGroup), then both pods deleted, at 09:10:00 and 09:10:05."""
    lines = (CASES / "invalid-spec-values" / "trace.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    for record, when in zip(records, ("09:10:00", "09:10:05")):
        gone = json.loads(json.dumps(record))
        gone["type"] = "DELETED"
        gone["observed_at"] = f"2026-11-02T{when}.000000Z"
        gone["object"]["metadata"]["resourceVersion"] = "2000" + when[-1]
        records.append(gone)
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_a_deleted_gang_is_not_listed_and_describe_says_when_and_why(tmp_path, capsys) -> None:
    trace = deleted_trace(tmp_path)
    # 600 s after its last record a deleted gang is removed from the table altogether
    status, out, _ = run(capsys, "get", "gangs", "--from", trace, "--at", END, "--phase",
                         "deleted")
    assert (status, out) == (0, "")
    status, out, err = run(capsys, "get", "gangs", "--from", trace, "--at", DELETED_AT_END)
    assert (status, out, err) == (0, "", "No gangs found.\n")
    status, out, _ = run(capsys, "get", "gangs", "--from", trace, "--at", DELETED_AT_END,
                         "--phase", "deleted")
    assert [line.split() for line in out.splitlines()[1:]] == [
        ["nlp", "gpt-distill", "koord-scheduler", "Deleted", "0/?", "0", "0", "<none>"]]
    # Before the second deletion the gang still has one pod.
    status, out, _ = run(capsys, "get", "gangs", "--from", trace, "--at",
                         "2026-11-02T09:10:04Z")
    assert [line.split()[:5] for line in out.splitlines()[1:]] == [
        ["nlp", "gpt-distill", "koord-scheduler", "Gathering", "1/2"]]
    status, out, _ = run(capsys, "describe", "gang", "nlp/gpt-distill", "--from", trace,
                         "--at", DELETED_AT_END)
    assert status == 0
    assert out.splitlines()[2:5] == [
        "Scheduler:      koord-scheduler",
        "Phase:          Deleted",
        "Deleted:        2026-11-02T09:10:05.000000Z: its last pod, nlp/gpt-distill-1, was "
        "deleted (a gang without a PodGroup ends with its last pod); a new pod of the gang "
        "starts it again"]
    assert "Spec from:      <none>\n" in out and section(out, "Pods") == ["<none>"]
    assert section(out, "Findings") == ["<none>"]
    assert section(out, "History")[-1].split()[:5] == [
        "2026-11-02T09:10:05.000000Z", "phase", "Gathering", "->", "Deleted;"]
    status, out, err = run(capsys, "explain", "pod", "nlp/gpt-distill-1", "--from", trace,
                           "--at", DELETED_AT_END)
    assert (status, err) == (1, "gangstate explain: pod nlp/gpt-distill-1 is not a live member "
                                "of any known gang\n")


def test_explain_pod_of_a_gang_known_from_real_scheduler_events(capsys, tmp_path) -> None:
    """Outcomes from scheduler Events carry no cycle number; explain says so instead of
    printing one (the real koord-scheduler v1.8.0 excerpt, tests/data/README.md). Every member
    gets the same answer: the gang's failure episode, naming who did not fit and why."""
    from producers.watch.watching import GangRouter, Publish

    items = json.loads((Path(__file__).resolve().parents[1] / "data" /
                        "koord-v1.8.0-gpu-short-excerpt.json").read_text())["items"]
    router, lines = GangRouter(), []
    for item in items:
        if item["kind"] in ("Pod", "Event"):
            at = parse_time(item.get("eventTime") or "2026-12-01T03:41:27Z")
            lines += [json.dumps(a.record) for a in router.route(
                "pods" if item["kind"] == "Pod" else "events", "SYNC", item, None, at)
                if isinstance(a, Publish)]
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    answers = {}
    for name in ("gb-0", "gb-1", "gb-2"):
        status, out, _ = run(capsys, "explain", "pod", f"sc-b/{name}", "--from", str(trace))
        assert status == 0
        assert "cycle None" not in out and "None Filter" not in out
        answers[name] = out.split("Held at:", 1)[1]
    assert answers["gb-0"] == answers["gb-1"] == answers["gb-2"] == (
        "        Filter (Coscheduling)\n"
        "\n"
        "Why it is pending:\n"
        "  GangUnschedulable: gang sc-b/gb cannot be scheduled: gb-0, gb-1 and gb-2 did not fit "
        "(Insufficient nvidia.com/gpu on 2 of 2 nodes); at most 2 of minMember 3 members fit at "
        "once; the scheduler rejects the whole gang and retries it\n"
        "\n"
        "What would unblock it:\n"
        "  - free capacity so that 1 more member fits alongside the 2 that fit (Insufficient "
        "nvidia.com/gpu on 2 of 2 nodes), or lower minMember to 2; the gang is retried as a "
        "whole\n")
    status, out, _ = run(capsys, "explain", "pod", "sc-b/gb-1", "--from", str(trace))
    assert ("Last cycle:     Filter Unschedulable (Insufficient nvidia.com/gpu), cycle number "
            "unknown\n") in out
    # describe gang: the episode (15 own fit errors + 1 round end = 16 rounds) and the storm
    # (all 42 attempts of the excerpt fall within the last 60 s of the gang's clock)
    status, out, _ = run(capsys, "describe", "gang", "sc-b/gb", "--from", str(trace))
    # the last failure: item 2793 (a release naming gb-1); item 3126, an Unreserve release,
    # names a member that was unreserved, not one that did not fit. Since: the pods, listed
    # at 03:41:27Z with their PodScheduled=False condition, are the first word of a failure
    # (the first Event is of 03:41:27.291286); the conditions count no round and no attempt
    assert ("Failing:        since 2026-12-01T03:41:27.000000Z, 16 rounds, last failure "
            "2026-12-01T03:41:28.355863Z\n") in out
    assert ("Storm:          42 FailedScheduling Events per minute (the last 60 s of event "
            "time)\n") in out


def test_the_representative_line_says_whether_a_shim_reports_the_gang() -> None:
    """``Representative:`` of a Koordinator gang without one: not known when no scheduler shim
    reports the gang (koord-scheduler keeps it in memory), none now when a shim does (a new
    user read the first as "no shim ran" although one did); a native gang has none; an older
    worker's document (no ``shim_reports``) reads as without a shim."""
    from streams.cli.query import _representative

    assert [_representative(None, "koord-scheduler", shim) for shim in (False, True, None)] == [
        "<not known without the scheduler shim (koord-scheduler keeps it in memory)>",
        "<none now (the scheduler shim reports none for this gang)>",
        "<not known without the scheduler shim (koord-scheduler keeps it in memory)>"]
    assert _representative(None, "kube-scheduler", True) == (
        "<none: kube-scheduler's GangScheduling has no representative>")
    assert _representative("ns/g-0", "koord-scheduler", False) == "ns/g-0"
