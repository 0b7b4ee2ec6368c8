"""Producers: everything that writes into gangstate's input topic, ``gang-events``.

- ``producers.watch``: list+watch of a cluster's Pods, PodGroups and scheduler Events.
- ``producers.replay``: ``gangstate replay`` of a historical trace.
The scheduler shim, the other writer of ``gang-events``, is Go (``shim/``, docs/shim.md).
Producers only move data; gang logic lives in ``streams.core``; topics and the durable producer
are in ``streams.kafka``.
"""
