"""The functional core of gangstate: gang membership and spec rules, the fold, the decisions.

Pure and deterministic: gang state and every diagnostic and command are functions of the event
log alone (the records' ``observed_at`` is the only clock). Imports nothing from Faust, Kafka,
aiokafka or Kubernetes (enforced by import-linter, see ``pyproject.toml``).
"""
