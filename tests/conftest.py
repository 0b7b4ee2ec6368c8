"""Session-wide fixtures: one real Kafka broker for the whole test session.

``kafka_bootstrap`` starts the embedded single-node Kafka 4 (``deploy/kafka/broker.py``) once
per session, or uses ``KAFKA_BOOTSTRAP_SERVERS`` when set (then nothing is started).
``kafka_settings`` gives each test its own topic prefix and Faust application id, with the
topics created, so tests share the broker without sharing data.
"""

from __future__ import annotations

import os
import uuid
from typing import Iterator

import pytest

from streams.kafka.publishing import ensure_topics
from streams.settings import Settings, Topics
from streams.core.fold import FoldSettings
from streams.dev.localkafka import broker_module


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """``host:port`` of a real Kafka broker for this session."""
    given = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if given:
        yield given
        return
    broker = broker_module().LocalKafka()
    try:
        yield broker.start(timeout=120)
    finally:
        broker.stop()


@pytest.fixture
def kafka_settings(kafka_bootstrap: str) -> Settings:
    """Settings with a topic prefix and app id no other test uses; topics created."""
    run = uuid.uuid4().hex[:10]
    settings = Settings(bootstrap=kafka_bootstrap, topics=Topics(f"test-{run}."),
                        partitions=8, app_id=f"gangstate-test-{run}", fold=FoldSettings())
    ensure_topics(settings)
    return settings
