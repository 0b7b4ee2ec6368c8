"""The command line's conventions (kubectl's): --version, usage errors on stderr with exit 2,
-n/-A, -o yaml|wide|name, NS/NAME or -n NS NAME, the old flag spellings kept hidden, and a bad
environment variable as one line (``streams.cli``, ``streams.cli.options``,
``streams.settings``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from streams.cli import main
from streams.settings import Settings, SettingsError

CASES = Path(__file__).resolve().parents[1] / "cases"
TRACE = str(CASES / "insufficient-members" / "trace.jsonl")
AT = "2026-11-02T09:04:00Z"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        status = main(list(argv))
    except SystemExit as done:
        status = int(done.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--version") == (0, "gangstate 0.1.0\n", "")


@pytest.mark.parametrize("argv, message", [
    pytest.param(["get", "gangs", "-n", "a", "-A"], "exclude each other", id="n-and-A"),
    pytest.param(["explain", "pod", "lonely"], "'lonely' is not NAMESPACE/NAME", id="no-namespace"),
    pytest.param(["explain", "pod", "a/p", "-n", "b"], "is in namespace 'a', not -n b",
                 id="two-namespaces"),
    pytest.param(["get", "gangs", "-o", "toml"], "'toml' is not one of", id="bad-output"),
    pytest.param(["nope"], "No such command 'nope'", id="unknown-command"),
    pytest.param(["worker", "--http-port", "1", "--web-port", "2"], "different values",
                 id="port-twice"),
    pytest.param(["sink", "--kubeconfig", "k", "--in-cluster"], "exclude each other",
                 id="kubeconfig-and-in-cluster"),
])
def test_usage_errors_go_to_stderr_with_exit_2(capsys: pytest.CaptureFixture[str],
                                               argv: list[str], message: str) -> None:
    status, out, err = run(capsys, *argv)
    assert (status, out) == (2, "")
    assert message in err


def test_get_gangs_wide_name_and_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "get", "gangs", "--from", TRACE, "--at", AT, "-o", "name")
    assert (status, out) == (0, "gang/team-a/llm-pretrain\n")
    status, out, _ = run(capsys, "get", "gangs", "--from", TRACE, "--at", AT, "-o", "wide")
    header, row = out.splitlines()
    assert header.split() == ["NAMESPACE", "NAME", "SCHEDULER", "PHASE", "MEMBERS", "MIN",
                              "MEMBER", "BOUND", "UNBOUND", "WAITING", "REPRESENTATIVE"]
    assert row.split() == ["team-a", "llm-pretrain", "koord-scheduler", "Gathering", "3", "4",
                           "0", "3", "0", "<none>"]
    status, out, _ = run(capsys, "get", "gangs", "--from", TRACE, "--at", AT, "-o", "yaml")
    assert yaml.safe_load(out)["gangs"][0]["members"] == 3


def test_a_pod_by_namespace_flag_is_the_same_pod(capsys: pytest.CaptureFixture[str]) -> None:
    by_ref = run(capsys, "explain", "pod", "team-a/llm-pretrain-worker-0", "--from", TRACE,
                 "--at", AT, "-o", "yaml")
    by_flag = run(capsys, "explain", "pod", "-n", "team-a", "llm-pretrain-worker-0", "--from",
                  TRACE, "--at", AT, "-o", "yaml")
    assert by_ref == by_flag and by_ref[0] == 0
    assert yaml.safe_load(by_ref[1])["held_at"] == "PreEnqueue"


@pytest.mark.parametrize("variable, value, message", [
    ("GANGSTATE_PARTITIONS", "eight", "GANGSTATE_PARTITIONS='eight': Input should be a valid integer"),
    ("GANGSTATE_PARTITIONS", "0", "GANGSTATE_PARTITIONS='0': Input should be greater than 0"),
    ("GANGSTATE_GRACE_SECONDS", "nan", "GANGSTATE_GRACE_SECONDS='nan'"),
])
def test_a_bad_environment_variable_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str],
                                                variable: str, value: str, message: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match="^" + message.replace("(", r"\(")):
        Settings.from_env()
    status, out, err = run(capsys, "tap", "diagnostics", "--bootstrap", "127.0.0.1:1")
    assert (status, out) == (2, "")
    assert err.startswith(f"gangstate: {message}") and err.count("\n") == 1


def test_the_environment_has_one_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "k:9092")
    monkeypatch.setenv("GANGSTATE_TOPIC_PREFIX", "t.")
    monkeypatch.setenv("GANGSTATE_PARTITIONS", "3")
    settings = Settings.from_env()
    assert (settings.bootstrap, settings.topics.gang_events, settings.partitions) == (
        "k:9092", "t.gang-events", 3)


def test_python_m_streams_cli_and_the_kubectl_plugin_name(tmp_path: Path) -> None:
    run_ = subprocess.run([sys.executable, "-m", "streams.cli", "--version"],
                          capture_output=True, text=True, timeout=60)
    assert (run_.returncode, run_.stdout) == (0, "gangstate 0.1.0\n")
    plugin = tmp_path / "kubectl-gangstate"
    plugin.write_text("import sys\nfrom streams.cli import main\nsys.exit(main())\n")
    run_ = subprocess.run([sys.executable, str(plugin), "explain", "pod", "x"],
                          capture_output=True, text=True, timeout=60)
    assert run_.returncode == 2
    assert "Usage: kubectl gangstate explain pod" in run_.stderr
