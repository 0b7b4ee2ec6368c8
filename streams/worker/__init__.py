"""The worker: the Faust app that folds ``gang-events`` into the gang table (``app``), its
Prometheus metrics (``metrics``) and its HTTP views (``web``).

Where it sits: a runtime component, above Kafka, the wire and the core. Must not: hold gang
rules (they are in ``streams.core``) or import the producers, the Event sink or the CLI."""
