"""Which ``gang-events`` partition a key lands on, computed as Kafka's clients do.

Where it sits: beside the topics (``streams.settings``); the worker's table co-partitions
its changelog with it, and its HTTP views use it to tell the gangs they own. Pure arithmetic.
"""

from __future__ import annotations

from kafka.partitioner.default import murmur2


def partition_of(key: str, partitions: int) -> int:
    """Kafka's default partition of a UTF-8 key (murmur2, as kafka-python's and aiokafka's
    default partitioners compute it)."""
    return (murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % partitions
