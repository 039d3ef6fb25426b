"""The operational view: what `plan check` reads of every server a migration needs (probe.py) and the metrics
`cutover exporter` serves to Prometheus (exporter.py)."""
