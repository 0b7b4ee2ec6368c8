"""gangstate: event-sourced gang state for Kubernetes gang scheduling.

Package map, from the bottom layer up (``docs/architecture.md`` draws the tree; import-linter
checks that each layer imports only the ones below it):
- ``streams.core``: the functional core: gang membership and spec rules, the fold, the decision
  rules and the explanations. Pure; imports nothing but the standard library.
- ``streams.wire``: the v1 records (contracts, schema ids), decoding to core records, traces.
- ``streams.kafka``, ``streams.kube``: settings and topics, publishing and reading Kafka; how to
  reach the API server.
- ``streams.query``: the answers of get, describe and explain.
- ``streams.worker``, ``streams.events``: the Faust worker; diagnostics written as Events.
- ``streams.dev``: demos and local services (Kafka, the control plane, a worker process).
- ``streams.cli``: the ``gangstate`` command.
The producers (watch, replay) are the package ``producers``; the scheduler shim is Go (``shim/``).
"""

__version__ = "0.1.0"
