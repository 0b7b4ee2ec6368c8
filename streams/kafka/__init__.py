"""Kafka for every component: settings and topic names (``settings``), topic creation and the
durable producer (``publishing``), reading topics without a consumer group (``reading``).

Where it sits: below the worker, the producers, the Event sink and the CLI; above the wire and
the core. Must not: decide anything about gangs."""
