"""The Spark Kafka source for a plan's cluster: librdkafka properties rendered for the Java client.

The plan names clusters with librdkafka property names (what the mirror uses); Spark's
Kafka source runs the Java client. The common security settings translate one to one
or into a JAAS line; anything else passes through as `kafka.<name>`, which both
clients share for most keys. Records are read `read_committed`: the mirror writes the
new cluster in transactions, and an aborted batch must never reach a table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from cutover.errors import UsageError

_JAAS = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
#: librdkafka-only keys with no Java meaning: dropped rather than passed on.
_LIBRDKAFKA_ONLY = {"socket.connection.setup.timeout.ms", "enable.ssl.certificate.verification", "debug",
                    "statistics.interval.ms", "api.version.request", "broker.version.fallback"}
_RENAMED = {"ssl.ca.location": "ssl.truststore.location", "ssl.certificate.location": "ssl.keystore.certificate.chain",
            "ssl.key.location": "ssl.keystore.key"}


def java_properties(side: str, props: Mapping[str, str]) -> dict[str, str]:
    """Java Kafka client properties for the same cluster (without the `kafka.` prefix)."""
    out: dict[str, str] = {}
    for key, value in props.items():
        if key in _LIBRDKAFKA_ONLY or key in ("sasl.username", "sasl.password"):
            continue
        if key == "sasl.mechanism":
            out["sasl.mechanism"] = value
        elif key in _RENAMED:
            out[_RENAMED[key]] = value
            if key == "ssl.ca.location":
                out["ssl.truststore.type"] = "PEM"
        else:
            out[key] = value
    mechanism = props.get("sasl.mechanism") or props.get("sasl.mechanisms")
    if "sasl.username" in props:
        module = _JAAS.get((mechanism or "").upper())
        if module is None:
            raise UsageError(f"clusters.{side}: Spark cannot log in with sasl.mechanism {mechanism!r} from "
                             "sasl.username/sasl.password",
                             fix=f"use one of {', '.join(_JAAS)}, or give sasl.jaas.config directly")
        out.pop("sasl.mechanisms", None)
        out["sasl.mechanism"] = mechanism.upper()  # type: ignore[union-attr]
        user = props["sasl.username"].replace('"', '\\"')
        password = props.get("sasl.password", "").replace('"', '\\"')
        out["sasl.jaas.config"] = f'{module} required username="{user}" password="{password}";'
    return out


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
