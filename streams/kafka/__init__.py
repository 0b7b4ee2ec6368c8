"""Kafka for every component: topic creation and the durable producer (``publishing``), reading
topics without a consumer group (``reading``), the waits and exit statuses (``waiting``), log
lines at most once per 10 s (``logs``), partitions (``partitions``). Settings and topic names
are ``streams.settings``.

Where it sits: below the worker, the producers, the Event sink and the CLI; above the settings,
the wire and the core. Must not: decide anything about gangs."""
