"""The Kafka options Spark gets (pure): librdkafka properties for the Java client, read_committed."""

from __future__ import annotations

import json

import pytest

from cutover.errors import UsageError
from cutover.shadow.source import java_properties, reader_options


def test_java_properties_translate_sasl_and_tls() -> None:
    props = java_properties("old", {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL",
                                    "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u",
                                    "sasl.password": 'p"w', "ssl.ca.location": "/ca.pem",
                                    "socket.connection.setup.timeout.ms": "5000"})
    assert props == {
        "bootstrap.servers": "h:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "ssl.truststore.location": "/ca.pem", "ssl.truststore.type": "PEM",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="u" password="p\\"w";'}
    with pytest.raises(UsageError, match=r"sasl\.mechanism 'GSSAPI'"):
        java_properties("new", {"sasl.mechanism": "GSSAPI", "sasl.username": "u"})


def test_reader_options_read_committed_from_explicit_offsets() -> None:
    opts = reader_options("new", {"bootstrap.servers": "h:1"}, "orders", {1: 7, 0: -2}, 500)
    assert json.loads(opts["startingOffsets"]) == {"orders": {"0": -2, "1": 7}}
    assert (opts["kafka.isolation.level"], opts["maxOffsetsPerTrigger"], opts["kafka.bootstrap.servers"]) == (
        "read_committed", "500", "h:1")
