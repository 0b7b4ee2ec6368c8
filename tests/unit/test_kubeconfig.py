"""``gangstate watch`` and ``gangstate sink`` verify the API server's certificate against the
kubeconfig's certificate-authority (``streams.kube.kubeconfig``).

The TEST API SERVER serves HTTPS with a certificate signed by a throw-away CA made with the
``openssl`` command (skipped without it). With the kubeconfig naming that CA, both commands'
clients reach it; naming another CA, or none (the system's CAs), the TLS handshake fails:
verification is on. ``insecure-skip-tls-verify`` is obeyed, with a WARNING.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest
from kubernetes import client

from producers.watch.running import _api_client
from streams.events.sink import _transport
from tests.doubles.apiserver import ApiServerDouble
from tests.fixtures.builders import kube_pod

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(folder: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=folder)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ca.pem`` (the cluster's CA), ``server.pem``/``server.key`` (127.0.0.1, signed by
    it) and ``other-ca.pem`` (a CA that signed nothing here)."""
    d = tmp_path_factory.mktemp("pki")
    _ca(d, "ca")
    _ca(d, "other-ca")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kube-apiserver",
             "-keyout", "server.key", "-out", "server.csr", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.pem",
             cwd=d)
    return d


@pytest.fixture
def server(pki: Path) -> Iterator[ApiServerDouble]:
    with ApiServerDouble(tls=(str(pki / "server.pem"), str(pki / "server.key"))) as s:
        s.apply(kube_pod("w-0", "team-a", uid=None, rv=None, scheduler=None, phase=None))
        yield s


def kubeconfig(tmp_path: Path, server: ApiServerDouble, cluster: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: {server.url}
{cluster}
users:
- name: gangstate
  user:
    token: test-token
contexts:
- name: ctx
  context: {{cluster: c, user: gangstate}}
current-context: ctx
""")
    return path


def args(path: Path) -> argparse.Namespace:
    return argparse.Namespace(kubeconfig=str(path), context=None, in_cluster=False,
                              dry_run=False)


def _list_pods(path: Path) -> list[str]:
    api = client.CoreV1Api(_api_client(args(path)))
    return [p.metadata.name for p in api.list_pod_for_all_namespaces().items]


def test_the_watch_verifies_the_api_server_against_the_kubeconfig_ca(
        tmp_path: Path, pki: Path, server: ApiServerDouble) -> None:
    good = kubeconfig(tmp_path, server, f"    certificate-authority: {pki / 'ca.pem'}")
    configuration = _api_client(args(good)).configuration
    assert configuration.verify_ssl is True
    assert configuration.ssl_ca_cert == str(pki / "ca.pem")
    assert server.url.startswith("https://")
    assert _list_pods(good) == ["w-0"]
    for cluster in (f"    certificate-authority: {pki / 'other-ca.pem'}", ""):
        with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
            _list_pods(kubeconfig(tmp_path, server, cluster))


def test_the_sink_verifies_the_api_server_against_the_kubeconfig_ca_data(
        tmp_path: Path, pki: Path, server: ApiServerDouble) -> None:
    import base64

    data = base64.b64encode((pki / "ca.pem").read_bytes()).decode()
    good = _transport(args(kubeconfig(tmp_path, server,
                                      f"    certificate-authority-data: {data}")))
    assert good.api_client.configuration.verify_ssl is True  # type: ignore[attr-defined]
    assert good("GET", "/api/v1/namespaces/team-a/events/nope").status == 404
    other = base64.b64encode((pki / "other-ca.pem").read_bytes()).decode()
    bad = _transport(args(kubeconfig(tmp_path, server,
                                     f"    certificate-authority-data: {other}")))
    with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
        bad("GET", "/api/v1/namespaces/team-a/events/nope")


def test_a_kubeconfig_that_skips_verification_is_obeyed_with_a_warning(
        tmp_path: Path, server: ApiServerDouble, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="streams.kube.kubeconfig")
    path = kubeconfig(tmp_path, server, "    insecure-skip-tls-verify: true")
    assert _api_client(args(path)).configuration.verify_ssl is False
    assert [r.getMessage() for r in caplog.records] == [
        f"TLS verification of the API server {server.url} is OFF: the kubeconfig sets "
        "insecure-skip-tls-verify; give it the cluster's certificate-authority instead"]
