"""How gangstate reaches the Kubernetes API server (``kubeconfig``: one loader, TLS verified),
shared by the watch producer and the Event sink.

Where it sits: beside ``streams.kafka``, below the components that talk to the API server."""
