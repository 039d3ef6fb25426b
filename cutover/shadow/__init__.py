"""The parallel write path: Kafka topics into Iceberg tables with Spark, offsets stamped in every snapshot."""
