"""Tests of deploy/kafka/broker.py: the embedded single-node Kafka used by the demo, tests and CI.

They need java 17+ and the Kafka jars (fetched once with mvn into ~/.cache/gangstate or
$GANGSTATE_CACHE), and no other project code. This module starts its own broker (module scope),
independent of the session-wide one in tests/conftest.py, plus short-lived ones for the
start/stop checks.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import uuid
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from deploy.kafka import broker

pytestmark = pytest.mark.kafka

BROKER_PY = Path(__file__).resolve().parents[2] / "deploy" / "kafka" / "broker.py"


@pytest.fixture(scope="module")
def own_kafka():
    """A LocalKafka for this module only; stopped (and its temp workdir removed) afterwards."""
    kafka = broker.LocalKafka()
    kafka.start(timeout=120)
    yield kafka
    kafka.stop()


def _topic(prefix: str) -> str:
    """A topic name no other test uses."""
    return f"test-local-kafka-{prefix}-{uuid.uuid4().hex[:8]}"


def _consume(bootstrap: str, topic: str, expect: int, **kwargs) -> list:
    """Read from the start of ``topic`` until ``expect`` records arrived or 20 s passed."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=f"g-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **kwargs,
    )
    try:
        consumer.subscribe([topic])
        records: list = []
        deadline = time.monotonic() + 20
        while len(records) < expect and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        # A little longer, to catch records that should not be there.
        for batch in consumer.poll(timeout_ms=500).values():
            records.extend(batch)
        return records
    finally:
        consumer.close()


def test_bootstrap_is_loopback_and_answers_metadata(own_kafka):
    host, _, port = own_kafka.bootstrap.rpartition(":")
    assert host == "127.0.0.1"
    assert int(port) == own_kafka.port != own_kafka.controller_port
    answer = broker.metadata(own_kafka.bootstrap)
    assert answer["brokers"] == [{"node_id": 1, "host": "127.0.0.1", "port": own_kafka.port}]
    assert answer["cluster_id"] == own_kafka.cluster_id
    assert own_kafka.log_path.exists()


def test_produce_and_consume_one_record(own_kafka):
    topic = _topic("one")
    producer = KafkaProducer(bootstrap_servers=own_kafka.bootstrap, acks="all")
    try:
        meta = producer.send(topic, key=b"gang-a", value=b"hello").get(timeout=30)
    finally:
        producer.close()
    assert meta.offset == 0
    records = _consume(own_kafka.bootstrap, topic, 1)
    assert [(r.key, r.value) for r in records] == [(b"gang-a", b"hello")]


def test_admin_creates_topic_with_eight_partitions(own_kafka):
    topic = _topic("eight")
    admin = KafkaAdminClient(bootstrap_servers=own_kafka.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=8, replication_factor=1)])
        described = admin.describe_topics([topic])
    finally:
        admin.close()
    assert len(described) == 1 and described[0]["error_code"] == 0
    # kafka-python 3.x names the field partition_index (older releases: partition).
    indexes = [p.get("partition_index", p.get("partition")) for p in described[0]["partitions"]]
    assert sorted(indexes) == list(range(8))


def test_auto_created_topic_gets_eight_partitions(own_kafka):
    topic = _topic("auto")
    producer = KafkaProducer(bootstrap_servers=own_kafka.bootstrap, acks="all")
    try:
        producer.send(topic, value=b"x").get(timeout=30)
        assert producer.partitions_for(topic) == set(range(8))
    finally:
        producer.close()


def test_transactional_producer_commit_visible_abort_not(own_kafka):
    topic = _topic("tx")
    producer = KafkaProducer(
        bootstrap_servers=own_kafka.bootstrap,
        transactional_id=f"tx-{uuid.uuid4().hex[:8]}",
        acks="all",
        enable_idempotence=True,
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, value=b"aborted", partition=0)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, value=b"committed-1", partition=0)
        producer.send(topic, value=b"committed-2", partition=3)
        producer.commit_transaction()
    finally:
        producer.close()
    records = _consume(own_kafka.bootstrap, topic, 2, isolation_level="read_committed")
    assert sorted(r.value for r in records) == [b"committed-1", b"committed-2"]


def test_fetch_is_idempotent_and_fast():
    first = broker.fetch()
    started = time.monotonic()
    second = broker.fetch()
    assert second == first
    assert time.monotonic() - started < 1.0
    assert any(first.glob("kafka_2.13-*.jar"))
    assert any(first.glob("log4j-core-*.jar"))


def _port_is_free(port: int) -> bool:
    """True when nothing accepts on 127.0.0.1:port and a server could bind it again."""
    with socket.socket() as probe:
        probe.settimeout(1)
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            return False
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as any server does
        try:
            server.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_second_instance_does_not_collide_and_stop_frees_port(own_kafka):
    with broker.LocalKafka() as other:
        assert other.port not in (own_kafka.port, own_kafka.controller_port)
        assert other.workdir != own_kafka.workdir
        assert broker.metadata(other.bootstrap)["cluster_id"] != own_kafka.cluster_id
        port, cport, workdir, pid = other.port, other.controller_port, other.workdir, other.pid
    assert not other.is_running()
    assert _port_is_free(port) and _port_is_free(cport)
    assert not workdir.exists(), "a temp workdir is removed by stop()"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(broker.BrokerError):
        other.bootstrap
    # The module's broker is untouched.
    assert broker.metadata(own_kafka.bootstrap)["brokers"]


def test_given_workdir_is_kept_and_busy_port_raises_with_log_tail(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        kafka = broker.LocalKafka(workdir=tmp_path / "k", port=taken)
        with pytest.raises(broker.BrokerError) as info:
            kafka.start(timeout=60)
    message = str(info.value)
    assert f"failed to bind to 127.0.0.1:{taken}" in message  # the cause, up front
    assert "server.log" in message  # and the log tails
    assert not kafka.is_running()
    assert (tmp_path / "k" / "server.properties").exists(), "a given workdir is not removed"
    kafka.stop()  # harmless after a failed start


def _run_broker(data_dir: Path) -> tuple["subprocess.Popen[str]", str, str]:
    """``broker.py run --data-dir DATA_DIR`` as a user runs it; returns the process, the
    bootstrap address it printed and its readiness line (stderr), once it printed them."""
    import subprocess

    proc = subprocess.Popen([sys.executable, str(BROKER_PY), "run", "--data-dir", str(data_dir),
                             "--timeout", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()  # blocks until the broker is ready (or the script exits)
    ready = proc.stderr.readline()
    assert first.startswith("KAFKA_BOOTSTRAP_SERVERS="), (first, ready, proc.stderr.read())
    return proc, first.strip().split("=", 1)[1], ready


def _stop_broker(proc: "subprocess.Popen[str]") -> None:
    import signal

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def test_run_with_a_data_dir_restarts_on_its_data(tmp_path):
    # before, `run` formatted a new, empty cluster at every start: the record was gone
    data_dir = tmp_path / "kafka"
    topic = _topic("kept")
    proc, bootstrap, ready = _run_broker(data_dir)
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        try:
            meta = producer.send(topic, key=b"gang-a", value=b"kept").get(timeout=30)
        finally:
            producer.close()
        assert meta.offset == 0
        cluster_id = broker.metadata(bootstrap)["cluster_id"]
        assert f"(cluster {cluster_id}; data kept in {data_dir.resolve() / 'data'})" in ready
    finally:
        _stop_broker(proc)
    meta_properties = (data_dir / "data" / "meta.properties").read_text()
    assert f"cluster.id={cluster_id}" in meta_properties

    proc, again, ready = _run_broker(data_dir)
    try:
        assert again == bootstrap  # the same port, unless --port says otherwise
        assert broker.metadata(again)["cluster_id"] == cluster_id  # not formatted again
        records = _consume(again, topic, 1)
        assert [(r.key, r.value, r.offset) for r in records] == [(b"gang-a", b"kept", 0)]
    finally:
        _stop_broker(proc)


def test_keep_data_needs_a_workdir():
    with pytest.raises(broker.BrokerError, match="keep_data needs a workdir"):
        broker.LocalKafka(keep_data=True)
