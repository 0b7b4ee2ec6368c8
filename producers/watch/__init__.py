"""The watch producer: list+watch of Pods, PodGroups and scheduler Events into ``gang-events``
(``watching``), and the pure parsing of scheduler Events (``scheduler_events``).

Where it sits: a producer, above Kafka, the wire and the core. Must not: decide anything about
gangs (that is the fold's job)."""
