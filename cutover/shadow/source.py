"""The Spark Kafka source for a plan's cluster: its reader options.

The plan names clusters with librdkafka property names (what the mirror uses); Spark's
Kafka source runs the Java client, whose properties cutover.kafka.java_client renders,
each passed as `kafka.<name>`. Records are read `read_committed`: the mirror writes the
new cluster in transactions, and an aborted batch must never reach a table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from cutover.kafka.java_client import java_properties


def reader_options(side: str, props: Mapping[str, str], topic: str, starting: Mapping[int, int],
                   max_records_per_batch: int) -> dict[str, str]:
    """Options of `spark.readStream.format("kafka")` for one topic from explicit start offsets.

    `starting` holds partition -> offset; -2 means the earliest offset. Partitions that
    appear later start at their earliest offset (Spark's rule for new partitions).
    """
    options = {f"kafka.{k}": v for k, v in java_properties(side, props).items()}
    options.update({
        "subscribe": topic,
        "startingOffsets": json.dumps({topic: {str(p): o for p, o in sorted(starting.items())}}),
        "kafka.isolation.level": "read_committed",
        "includeHeaders": "true",
        "failOnDataLoss": "true",
        "maxOffsetsPerTrigger": str(max_records_per_batch),
    })
    return options
