"""Static checks of docker-compose.yml and deploy/Dockerfile.

There is no Docker engine here, so these tests cannot run the stack; they parse the files and
check what a run depends on: images, ports, the apache/kafka image's KAFKA_* conventions (a
consistent KRaft combined node), the worker's bootstrap address, and the Dockerfile it builds.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def kafka_env(compose) -> dict[str, str]:
    env = compose["services"]["kafka"]["environment"]
    assert isinstance(env, dict), "use the mapping form for environment"
    return {k: str(v) for k, v in env.items()}


def _listeners(value: str) -> dict[str, tuple[str, int]]:
    """'NAME://host:port,...' -> {NAME: (host, port)}."""
    out = {}
    for item in value.split(","):
        m = re.fullmatch(r"([A-Z_]+)://([^:]*):(\d+)", item.strip())
        assert m, f"bad listener {item!r}"
        out[m.group(1)] = (m.group(2), int(m.group(3)))
    return out


def _dockerfile(compose) -> Path:
    build = compose["services"]["worker"]["build"]
    return (ROOT / build["context"] / build["dockerfile"]).resolve()


def test_services_and_images(compose):
    assert set(compose["services"]) == {"kafka", "worker"}
    assert compose["services"]["kafka"]["image"] == "apache/kafka:4.1.1"
    assert "image" not in compose["services"]["worker"], "the worker is built from this repo"


def test_kafka_image_matches_embedded_broker_version(compose):
    pom = (ROOT / "deploy" / "kafka" / "pom.xml").read_text()
    version = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom).group(1)
    assert compose["services"]["kafka"]["image"].endswith(":" + version)


def test_kafka_ports_publish_host_listener(compose, kafka_env):
    assert "19092:19092" in [str(p) for p in compose["services"]["kafka"]["ports"]]
    advertised = _listeners(kafka_env["KAFKA_ADVERTISED_LISTENERS"])
    assert ("kafka", 9092) in advertised.values()
    assert ("localhost", 19092) in advertised.values()


def test_kafka_kraft_combined_node_is_consistent(kafka_env):
    env = kafka_env
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    # The image's configure script refuses KRaft mode without CLUSTER_ID.
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", env["CLUSTER_ID"])
    listeners = _listeners(env["KAFKA_LISTENERS"])
    advertised = _listeners(env["KAFKA_ADVERTISED_LISTENERS"])
    protocols = dict(p.split(":") for p in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    controller = env["KAFKA_CONTROLLER_LISTENER_NAMES"]
    assert controller in listeners and controller not in advertised
    assert set(listeners) <= set(protocols) and set(advertised) <= set(listeners)
    for name in advertised:  # advertised ports are the ones listened on
        assert advertised[name][1] == listeners[name][1]
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] in advertised
    voter_id, _, voter = env["KAFKA_CONTROLLER_QUORUM_VOTERS"].partition("@")
    assert voter_id == env["KAFKA_NODE_ID"] == "1"
    assert voter == f"kafka:{listeners[controller][1]}"


def test_kafka_single_node_settings(kafka_env):
    for key in (
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR",
    ):
        assert kafka_env[key] == "1", key
    assert kafka_env["KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS"] == "0"
    assert kafka_env["KAFKA_NUM_PARTITIONS"] == "8"


def test_kafka_healthcheck_uses_a_kafka_request(compose):
    health = compose["services"]["kafka"]["healthcheck"]
    test = health["test"]
    command = " ".join(test) if isinstance(test, list) else test
    assert "/opt/kafka/bin/kafka-broker-api-versions.sh" in command
    assert "localhost:9092" in command
    assert health["retries"] >= 1


def test_worker_env_and_dependency(compose, kafka_env):
    worker = compose["services"]["worker"]
    assert worker["environment"]["KAFKA_BOOTSTRAP_SERVERS"] == "kafka:9092"
    assert "PLAINTEXT://kafka:9092" in kafka_env["KAFKA_ADVERTISED_LISTENERS"]
    assert worker["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert worker["command"] == ["gangstate", "worker"]


def test_dockerfile_builds_and_runs_gangstate_worker(compose):
    dockerfile = _dockerfile(compose)
    assert dockerfile == ROOT / "deploy" / "Dockerfile" and dockerfile.is_file()
    lines = [ln.strip() for ln in dockerfile.read_text().splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    froms = [ln for ln in lines if ln.startswith("FROM ")]
    assert froms == ["FROM python:3.11-slim AS build", "FROM python:3.11-slim"]
    cmd = [ln for ln in lines if ln.startswith("CMD ")]
    assert cmd and cmd[-1] == 'CMD ["gangstate", "worker"]'
    copied = [shlex.split(ln)[1:-1] for ln in lines if ln.startswith("COPY ")
              and not ln.startswith("COPY --from")]
    sources = {src.rstrip("/") for group in copied for src in group}
    assert {"pyproject.toml", "setup.py", "streams", "producers", "README.md",
            "requirements/runtime.txt"} <= sources


def test_dockerfile_compiles_the_core_and_installs_from_the_lock(compose):
    """Issue 15: the image ran the core as Python (no C compiler in python:3.11-slim, and the
    wheel lacked the stamp of the compiled sources) and installed unpinned packages. Now a
    build stage with gcc builds the wheel with the locked setuptools and mypy, and the image
    fails to build unless ``streams.core.COMPILED``."""
    text = _dockerfile(compose).read_text()
    build, image = text.split("\nFROM python:3.11-slim\n")
    assert "gcc" in build and "pip wheel --no-deps --no-build-isolation" in build
    for stage in (build, image):
        assert "pip install --require-hashes -r requirements/runtime.txt" in stage
    assert "COPY --from=build /wheels /wheels" in image
    assert "pip install --no-deps /wheels/*.whl" in image
    assert "c.COMPILED" in image
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"streams.core" = ["_compiled.json"]' in pyproject


def test_the_worker_has_a_writable_data_folder(compose):
    """Issue 15: the compose worker ran as a user who could write nowhere (Faust's data folder
    defaulted to ~/.cache under a root-owned /app). Now ``GANGSTATE_DATA_DIR`` is a named
    volume at /app/data, a folder the image gives to its user."""
    worker = compose["services"]["worker"]
    assert worker["environment"]["GANGSTATE_DATA_DIR"] == "/app/data"
    assert "worker-data:/app/data" in worker["volumes"]
    assert "worker-data" in compose["volumes"]
    lines = _dockerfile(compose).read_text().splitlines()
    assert any("mkdir -p /app/data" in ln for ln in lines)
    assert any("chown gangstate /app/data" in ln for ln in lines)
    assert "USER 10001" in lines
    assert any("GANGSTATE_DATA_DIR=/app/data" in ln for ln in lines)


def test_dockerfile_copies_what_pip_install_needs(compose):
    """Every COPY source exists in the repo (the build context), or `docker build` fails."""
    lines = _dockerfile(compose).read_text().splitlines()
    for line in lines:
        if line.startswith("COPY ") and not line.startswith("COPY --from"):
            for src in shlex.split(line)[1:-1]:
                assert (ROOT / src).exists(), f"{src} is copied by deploy/Dockerfile but missing"


def test_gangstate_console_script_is_declared():
    """`gangstate worker` in the image needs the console script from pyproject.toml."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^gangstate\s*=\s*"[\w.]+:\w+"', pyproject, re.M)
