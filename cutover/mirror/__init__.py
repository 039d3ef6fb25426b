"""cutover mirror: exactly-once topic copy, the exact offset map, and consumer-group translation."""
