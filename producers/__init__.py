"""Producers: everything that writes into gangstate's input topic.

- ``streams.kafka.publishing``: topic creation and the durable kafka-python producer.
- ``producers.replay``: ``gangstate replay`` of a historical trace.
Producers only move data; gang logic lives in ``streams.core``.
"""
