"""gangstate: event-sourced gang state for Kubernetes gang scheduling.

Package map (a wiring diagram, inputs first):
- ``streams.wire.contracts``: pydantic models of the v1 wire records (the public interface).
- ``streams.core``: the functional core: gang membership and spec rules, the fold and the
  decision rules. Pure; imports no Faust, Kafka or Kubernetes (enforced by import-linter).
- ``streams.wire.decoding``: raw bytes / trace lines -> core records, with a reason on failure.
- ``streams.wire.traces``: ``gangstate fold`` over a trace file, no broker.
- ``streams.worker.app``: the Faust worker (thin shell around the core).
- ``streams.cli``: the ``gangstate`` command.
"""

__version__ = "0.1.0"
