"""Every Kafka client of gangstate against a secured broker: TLS, SASL PLAIN, SCRAM-SHA-256 and
SCRAM-SHA-512 (issue 15).

The broker is the local Kafka 4 (``deploy/kafka/broker.py``) with three more listeners (SSL,
SASL_SSL, SASL_PLAINTEXT), a certificate signed by a CA made here, and SCRAM users written when
its storage is formatted (``tests/fixtures/securekafka.py``). Each client is configured as a
user would: the ``KAFKA_*`` variables (``Settings.from_env``) or the command-line flags.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from streams.settings import KafkaSecurity, Settings
from tests.fixtures.securekafka import USERS, secured_broker

pytestmark = pytest.mark.kafka

CASES = Path(__file__).resolve().parents[1] / "cases"

# (listener, sasl mechanism): one of each protocol, each mechanism at least once
CONNECTIONS = [("SSL", None), ("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-256"),
               ("SASL_PLAINTEXT", "SCRAM-SHA-512")]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Path]]:
    """A started secured broker and the folder of its CA (``ca.pem``)."""
    folder = tmp_path_factory.mktemp("tls")
    broker = secured_broker(folder)
    broker.start(timeout=120)
    try:
        yield broker, folder / "ca.pem"
    finally:
        broker.stop()


def env_for(broker: Any, ca: Path, listener: str, mechanism: str | None,
            password: str | None = None) -> dict[str, str]:
    """The ``KAFKA_*`` variables a user sets for ``listener`` with ``mechanism``."""
    env = {"KAFKA_BOOTSTRAP_SERVERS": broker.address(listener),
           "KAFKA_SECURITY_PROTOCOL": listener}
    if listener.endswith("SSL"):
        env["KAFKA_SSL_CAFILE"] = str(ca)
    if mechanism:
        user, secret = USERS[mechanism]
        env.update(KAFKA_SASL_MECHANISM=mechanism, KAFKA_SASL_USERNAME=user,
                   KAFKA_SASL_PASSWORD=password if password is not None else secret)
    return env


def settings_for(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Settings:
    """``Settings.from_env()`` under ``env``, with a topic prefix and app id of its own."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    run = uuid.uuid4().hex[:8]
    monkeypatch.setenv("GANGSTATE_TOPIC_PREFIX", f"sec-{run}.")
    monkeypatch.setenv("GANGSTATE_APP_ID", f"gangstate-sec-{run}")
    return Settings.from_env()


@pytest.mark.parametrize("listener,mechanism", CONNECTIONS)
def test_admin_producer_and_reader_speak_each_protocol(secured: tuple[Any, Path],
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       listener: str,
                                                       mechanism: str | None) -> None:
    """``ensure_topics`` (admin), ``Publisher`` (producer, as replay and watch use it) and
    ``read_all`` (the consumer of tap and the demo) over the secured listener; a record goes in
    and comes back."""
    from streams.kafka.publishing import Publisher, ensure_topics
    from streams.kafka.reading import read_all

    broker, ca = secured
    settings = settings_for(monkeypatch, env_for(broker, ca, listener, mechanism))
    assert settings.security.protocol == listener
    assert settings.security.mechanism == mechanism
    ensure_topics(settings)
    publisher = Publisher(settings)
    record = {"schema": "gangstate.tick/v1", "observed_at": "2026-11-02T09:00:00Z"}
    publisher.send_json(settings.topics.gang_events, "team-a/llm", record)
    publisher.close()
    assert read_all(settings, [settings.topics.gang_events]) == {
        settings.topics.gang_events: [record]}


@pytest.mark.parametrize("listener,mechanism", CONNECTIONS)
def test_reachability_check_speaks_tls_and_sasl(secured: tuple[Any, Path], listener: str,
                                                mechanism: str | None) -> None:
    """The demo's check (``_kafka_reachable``): true with the right settings; false without
    them (the listener refuses a PLAINTEXT client) and false with a wrong password."""
    from streams.cli.pipeline import _kafka_reachable

    broker, ca = secured
    address = broker.address(listener)
    user, secret = USERS[mechanism] if mechanism else (None, None)
    right = KafkaSecurity(protocol=listener, sasl_mechanism=mechanism, sasl_username=user,
                          sasl_password=secret,
                          ssl_cafile=str(ca) if listener.endswith("SSL") else None).check()
    assert _kafka_reachable(address, right, timeout=5.0)
    assert not _kafka_reachable(address, KafkaSecurity(), timeout=3.0)
    if mechanism:
        wrong = KafkaSecurity(protocol=listener, sasl_mechanism=mechanism, sasl_username=user,
                              sasl_password="not-the-password",
                              ssl_cafile=right.ssl_cafile).check()
        assert not _kafka_reachable(address, wrong, timeout=3.0)


def test_tls_refuses_a_broker_signed_by_another_ca(secured: tuple[Any, Path],
                                                   tmp_path: Path) -> None:
    """``KAFKA_SSL_CAFILE`` is what is trusted: a CA that did not sign the broker's certificate
    makes the connection fail."""
    from streams.cli.pipeline import _kafka_reachable
    from tests.fixtures.securekafka import make_tls

    broker, _ca = secured
    other_ca, _ = make_tls(tmp_path / "other")
    assert not _kafka_reachable(broker.address("SSL"), KafkaSecurity(
        protocol="SSL", ssl_cafile=str(other_ca)).check(), timeout=3.0)


def test_cli_flags_configure_tap(secured: tuple[Any, Path], tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``gangstate tap`` with ``--security-protocol``, ``--sasl-mechanism``,
    ``--sasl-username``, ``--sasl-password-file`` and ``--ssl-cafile`` (no ``KAFKA_*``
    variable set) reads a record written over SCRAM-SHA-512 on SASL_SSL."""
    from streams.cli import main
    from streams.kafka.publishing import Publisher, ensure_topics

    broker, ca = secured
    for name in ("KAFKA_BOOTSTRAP_SERVERS", "KAFKA_SECURITY_PROTOCOL", "KAFKA_SASL_MECHANISM",
                 "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD", "KAFKA_SSL_CAFILE"):
        monkeypatch.delenv(name, raising=False)
    user, secret = USERS["SCRAM-SHA-512"]
    password_file = tmp_path / "password"
    password_file.write_text(secret + "\n")
    prefix = f"flags-{uuid.uuid4().hex[:8]}."
    flags = ["--bootstrap", broker.address("SASL_SSL"), "--prefix", prefix,
             "--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512",
             "--sasl-username", user, "--sasl-password-file", str(password_file),
             "--ssl-cafile", str(ca)]
    settings = Settings().with_flags(broker.address("SASL_SSL"), prefix, {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": user, "sasl_password_file": str(password_file),
        "ssl_cafile": str(ca)})
    ensure_topics(settings)
    publisher = Publisher(settings)
    publisher.send_json(settings.topics.diagnostics, "team-a/llm", {"id": "d1"})
    publisher.close()
    capsys.readouterr()
    assert main(["tap", "diagnostics", "--from-beginning", *flags]) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == [{"id": "d1"}]


def test_sink_consumes_diagnostics_over_scram(secured: tuple[Any, Path],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The Event sink's consumer group over SASL_SSL + SCRAM-SHA-256: the diagnostics of the
    spec-conflict case (folded offline: 2 GangSpecConflict diagnostics) become the same Event
    writes as when the sink reads them from a file (7: 3 creates, 3 patches, 1 create)."""
    from streams.events.sink import DryRunTransport, EventSink, consume
    from streams.kafka.publishing import Publisher, ensure_topics
    from streams.core.timefmt import parse_time
    from streams.wire.traces import fold_trace

    broker, ca = secured
    settings = settings_for(monkeypatch, env_for(broker, ca, "SASL_SSL", "SCRAM-SHA-256"))
    ensure_topics(settings)
    diagnostics = fold_trace(CASES / "spec-conflict" / "trace.jsonl",
                             parse_time("2026-11-29T00:00:00Z")).diagnostics
    publisher = Publisher(settings)
    for diagnostic in diagnostics:
        publisher.send_json(settings.topics.diagnostics, diagnostic["gang"], diagnostic)
    publisher.close()
    expected: list[str] = []
    offline = EventSink(DryRunTransport(expected.append), instance="secured")
    for diagnostic in diagnostics:
        offline.write(diagnostic)
    lines: list[str] = []
    sink = EventSink(DryRunTransport(lines.append), instance="secured")
    stop = threading.Event()
    thread = threading.Thread(target=consume, args=(settings, sink, stop), daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(lines) < len(expected):
        time.sleep(0.2)
    stop.set()
    thread.join(15)
    assert len(diagnostics) == 2
    assert [json.loads(line)["verb"] for line in expected] == ["create"] * 3 + ["patch"] * 3 + [
        "create"]
    assert lines == expected


def test_worker_and_demo_over_sasl_ssl_scram512(secured: tuple[Any, Path],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole Kafka path on SASL_SSL + SCRAM-SHA-512: the demo (its admin, the Faust worker
    child process with its table loader, the replay producer, the readers) on one bundled
    case; its diagnostics and commands match the offline fold (exit 0)."""
    from streams.dev.demo import run_demo

    broker, ca = secured
    settings = settings_for(monkeypatch, env_for(broker, ca, "SASL_SSL", "SCRAM-SHA-512"))
    out: list[str] = []
    status = run_demo([CASES / "spec-conflict" / "trace.jsonl"], settings=settings,
                      write=out.append, timeout=120)
    assert status == 0, "\n".join(out)
    assert any("identical" in line for line in out)
