"""Producers: everything that writes into gangstate's input topic, ``gang-events``.

- ``producers.watch``: list+watch of a cluster's Pods, PodGroups and scheduler Events.
- ``producers.shim``: the scheduler shim (cycle records and acks in, commands applied, fenced).
- ``producers.simulate``: a Koordinator-like gang scheduler in virtual time.
- ``producers.replay``: ``gangstate replay`` of a historical trace.
Producers only move data; gang logic lives in ``streams.core``; topics and the durable producer
are in ``streams.kafka``.
"""
