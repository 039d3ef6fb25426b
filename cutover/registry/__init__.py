"""Schema registries: the Confluent API client, the wire format, sync with ids, and the audit."""
