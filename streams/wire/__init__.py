"""The wire: gangstate's v1 records as they travel (``contracts``), bytes to core records
(``decoding``) and JSON-lines traces read and folded offline (``traces``).

Where it sits: just above the pure core; below Kafka, the worker, the producers and the CLI.
Must not: import Faust, Kafka clients or Kubernetes, or anything above it."""
