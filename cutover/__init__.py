"""cutover: move Kafka workloads, and the Iceberg tables fed from them, between clusters."""

__version__ = "0.1.0"
