"""The embedded single-node Kafka of the demo, the tests and CI: ``deploy.kafka.broker``."""
