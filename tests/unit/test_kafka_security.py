"""Kafka security settings: the ``KAFKA_*`` variables and flags -> every client's arguments
(issue 15). The clients against a secured broker: tests/kafka/test_secured_kafka.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.settings import KafkaSecurity, Settings, SettingsError


def test_default_is_plaintext(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_SECURITY_PROTOCOL", raising=False)
    settings = Settings.from_env()
    assert settings.security == KafkaSecurity()
    assert settings.kafka_python(client_id="x") == {
        "bootstrap_servers": settings.bootstrap, "security_protocol": "PLAINTEXT",
        "client_id": "x"}


def test_scram_over_tls_from_the_environment(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    password = tmp_path / "password"
    password.write_text("s3cret\n")
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("KAFKA_SASL_USERNAME", "gangstate")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD_FILE", str(password))
    monkeypatch.delenv("KAFKA_SASL_PASSWORD", raising=False)
    monkeypatch.setenv("KAFKA_SSL_CHECK_HOSTNAME", "false")
    security = Settings.from_env().security
    assert (security.protocol, security.mechanism, security.sasl_username,
            security.sasl_password) == ("SASL_SSL", "SCRAM-SHA-512", "gangstate", "s3cret")
    config = security.kafka_python()
    assert config["sasl_mechanism"] == "SCRAM-SHA-512"
    assert config["sasl_plain_username"] == "gangstate"
    assert config["ssl_context"].check_hostname is False
    assert "s3cret" not in repr(security)  # the password stays out of logs and reprs
    # the worker child process gets the same value back
    assert security.env()["KAFKA_SASL_PASSWORD"] == "s3cret"


def test_faust_credentials_carry_mechanism_and_tls() -> None:
    import faust

    from streams.worker.app import faust_credentials

    sasl = faust_credentials(KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256",
                                           sasl_username="u", sasl_password="p"))
    creds = sasl["broker_credentials"]
    assert isinstance(creds, faust.SASLCredentials)
    assert (creds.mechanism.value, creds.protocol.value, creds.username, creds.password) == (
        "SCRAM-SHA-256", "SASL_SSL", "u", "p")
    plain_sasl = faust_credentials(KafkaSecurity(protocol="SASL_PLAINTEXT", sasl_username="u",
                                                 sasl_password="p"))["broker_credentials"]
    assert (plain_sasl.mechanism.value, plain_sasl.protocol.value) == ("PLAIN",
                                                                       "SASL_PLAINTEXT")
    assert set(faust_credentials(KafkaSecurity(protocol="SSL"))) == {"ssl_context"}
    assert faust_credentials(KafkaSecurity()) == {}


@pytest.mark.parametrize("security,message", [
    (KafkaSecurity(protocol="SASL_SSL"), "KAFKA_SASL_USERNAME"),
    (KafkaSecurity(protocol="SSL", sasl_mechanism="PLAIN"), "needs KAFKA_SECURITY_PROTOCOL"),
    (KafkaSecurity(protocol="SSL", ssl_cafile="/nonexistent/ca.pem"), "no such file"),
    (KafkaSecurity(protocol="TLS"), "not one of"),
])
def test_unusable_combinations_are_one_line_errors(security: KafkaSecurity,
                                                   message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        security.check()


def test_cli_reports_a_bad_security_setting(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from streams.cli import main

    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.delenv("KAFKA_SASL_USERNAME", raising=False)
    assert main(["tap", "gang-events", "--bootstrap", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "KAFKA_SASL_USERNAME" in err[0]
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "SSL-ish")
    assert main(["tap", "gang-events", "--bootstrap", "127.0.0.1:1"]) == 2
    assert "KAFKA_SECURITY_PROTOCOL" in capsys.readouterr().err
