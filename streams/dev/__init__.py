"""Development and demonstration: the local Kafka (``localkafka``) and control plane with the
whole chain as processes (``localcluster``), a worker as a subprocess (``worker_process``), and
the two demos (``demo``, ``cluster_demo``).

Where it sits: above every runtime component and producer, below the CLI. Nothing in a
deployment imports it."""
