"""The scheduler shim: its pure fencing core (``fencing``) and its Kafka shell (``shim``).

Where it sits: a producer and the consumer of ``commands``, above Kafka, the wire and the core."""
