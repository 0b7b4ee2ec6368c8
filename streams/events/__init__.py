"""Diagnostics written to Kubernetes as Events: the recorder's pure decisions (``recorder``:
keys, spam filter, correlator), the request bodies (``bodies``) and the one side that talks to
the API server and Kafka (``sink``).

Where it sits: a runtime component (``gangstate sink``), above Kafka, the wire and the core."""
