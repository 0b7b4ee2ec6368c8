"""gangstate's deployment pieces: the local Kafka broker (``deploy.kafka.broker``) and the local
control plane (``deploy.cluster.controlplane``), standard-library modules that also run as
scripts; beside them the Dockerfile and the Kubernetes manifests (``deploy/kubernetes/``, data,
not Python). Imported by ``streams.dev`` (demos, local services) and the tests; imports nothing
of gangstate itself."""
