"""librdkafka's failure lines, as it writes them, explained with the fix (`cutover.kafka.diagnose`).

The lines are copied from librdkafka 2.x runs against real listeners (the integration tests in
test_sandbox.py and test_secure_sandbox.py make them live); DNS and a dropped SYN cannot be
played on loopback, so their lines are tested here only.
"""

from __future__ import annotations

import pytest

from cutover.kafka.diagnose import explain

PLAIN = {"bootstrap.servers": "127.0.0.1:9092"}
SASL = {"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "app", "sasl.password": "s3cret-pw"}


@pytest.mark.parametrize(("props", "lines", "kind", "words"), [
    (SASL, ["sasl_plaintext://127.0.0.1:9092/bootstrap: SASL PLAIN mechanism handshake failed: Broker: Unsupported "
            "SASL mechanism: broker's supported mechanisms: SCRAM-SHA-256,SCRAM-SHA-512 (after 301ms in state "
            "AUTH_HANDSHAKE)"],
     "sasl-mechanism", ["does not offer SASL mechanism PLAIN (it offers: SCRAM-SHA-256, SCRAM-SHA-512)",
                        "set sasl.mechanism to SCRAM-SHA-256 or SCRAM-SHA-512"]),
    (SASL, ["sasl_plaintext://127.0.0.1:9092/bootstrap: SASL PLAIN mechanism handshake failed: Broker: Request not "
            "valid in current SASL state: broker's supported mechanisms:  (after 2ms in state AUTH_HANDSHAKE)"],
     "not-sasl", ["127.0.0.1:9092 is not a SASL listener", "set security.protocol to PLAINTEXT"]),
    ({**SASL, "security.protocol": "SASL_SSL"},
     ["sasl_ssl://127.0.0.1:9092/bootstrap: SASL PLAIN mechanism handshake failed: Broker: Request not valid in "
      "current SASL state: broker's supported mechanisms:  (after 2ms in state AUTH_HANDSHAKE)"],
     "not-sasl", ["set security.protocol to SSL"]),
    (SASL, ["sasl_plaintext://127.0.0.1:9092/bootstrap: SASL authentication error: Authentication failed during "
            "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256 (after 310ms in state "
            "AUTH_REQ)"],
     "denied", ["refused the credentials of user app (PLAIN)", "check sasl.username and sasl.password"]),
    (PLAIN, ["kafka.example.invalid:9092/bootstrap: Failed to resolve 'kafka.example.invalid:9092': Name or "
             "service not known (after 3ms in state CONNECT)", "1/1 brokers are down"],
     "dns", ["the host name in kafka.example.invalid:9092 does not resolve from here (Name or service not known)",
             "check the host names in bootstrap.servers"]),
    (PLAIN, ["127.0.0.1:9092/bootstrap: Receive failed: Invalid response size 1397966893 (0..100000000): increase "
             "receive.message.max.bytes (after 0ms in state APIVERSION_QUERY)"],
     "not-kafka", ["127.0.0.1:9092 is not a Kafka listener", "('SSH-'...)"]),
    (PLAIN, ["1/1 brokers are down", "FAIL [rdkafka#producer-1] [thrd:127.0.0.1:9092/bootstrap]: 127.0.0.1:9092/"
             "bootstrap: Connection setup timed out in state APIVERSION_QUERY (after 3003ms in state "
             "APIVERSION_QUERY)"],
     "silent", ["accepted the connection but never answered Kafka's first request", "an HTTP or other server"]),
    (PLAIN, ["FAIL [rdkafka#producer-2] [thrd:127.0.0.1:9092/bootstrap]: 127.0.0.1:9092/bootstrap: Disconnected: "
             "connection closed by peer: receive 0 after POLLIN (after 0ms in state UP)"],
     "closed", ["closed the connection as soon as the client spoke", "e.g. SASL_PLAINTEXT or SASL_SSL"]),
    (PLAIN, ["FAIL [rdkafka#producer-1] [thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect to "
             "ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT)"],
     "refused", ["nothing listens on 127.0.0.1:1 (connection refused)"]),
    (PLAIN, ["10.255.255.1:9092/bootstrap: Connection setup timed out in state CONNECT (after 5004ms in state "
             "CONNECT)"],
     "connect-timeout", ["did not accept a connection within 5004 ms", "firewall"]),
    (PLAIN, ["Failed to get metadata: Local: Required feature not supported by broker"],
     "controller", ["127.0.0.1:9092 does not answer Kafka's Metadata request", "most likely a KRaft controller "
                    "listener", "point bootstrap.servers at the brokers' listener"]),
    (PLAIN, ["Failed to get metadata: Local: Required feature not supported by broker",
             "PROBE controller 127.0.0.1:9093"],
     "controller", ["127.0.0.1:9093 is a KRaft controller listener, not a broker's: it lists the controllers' APIs "
                    "and not Metadata", "not at a KRaft controller's (controller.listener.names)"]),
    (PLAIN, ["1/1 brokers are down", "PROBE http 127.0.0.1:8080: HTTP/1.0 200 OK"],
     "not-kafka", ["127.0.0.1:8080 is an HTTP server, not a Kafka listener: it answered HTTP (HTTP/1.0 200 OK)",
                   "check the port in bootstrap.servers"]),
    (PLAIN, ["127.0.0.1:8083/bootstrap: Receive failed: Invalid response size 1213486160 (0..100000000): increase "
             "receive.message.max.bytes (after 1ms in state APIVERSION_QUERY)"],
     "not-kafka", ["127.0.0.1:8083 is an HTTP server, not a Kafka listener: it answered Kafka's first request with "
                   "HTTP"]),
], ids=["sasl-mechanism", "not-a-sasl-listener", "not-a-sasl-listener-tls", "credentials", "dns", "not-kafka",
        "silent", "closed-at-once", "refused", "connect-timeout", "controller-unconfirmed", "controller-probed",
        "http-probed", "http-answered"])
def test_each_failure_is_named_with_its_fix(props: dict[str, str], lines: list[str], kind: str,
                                            words: list[str]) -> None:
    found = explain(lines, props)
    assert found is not None and found.kind == kind
    for w in words:
        assert w in f"{found.what} fix: {found.fix}", (found.what, found.fix)
    assert "s3cret-pw" not in found.what + found.fix


def test_the_specific_cause_wins_over_a_generic_one_and_unknown_lines_name_none() -> None:
    lines = ["1/1 brokers are down", "127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection "
             "refused (after 0ms in state CONNECT)", "127.0.0.1:9092/bootstrap: Failed to resolve 'x:1': Temporary "
             "failure in name resolution (after 1ms in state CONNECT)"]
    found = explain(lines, PLAIN)
    assert found is not None and found.kind == "dns"
    assert explain(["1/1 brokers are down", "Local: Broker transport failure"], PLAIN) is None
    # a SASL client whose broker closes the connection is not told to switch to SASL
    closed = ["127.0.0.1:9092/bootstrap: Disconnected: connection closed by peer (after 0ms in state UP)"]
    assert explain(closed, SASL) is None
    # nor is a plaintext client whose broker closed a connection that had been up for minutes (a restart)
    restart = ["127.0.0.1:9092/3: Disconnected: connection closed by peer: receive 0 after POLLIN (after 600012ms in "
               "state UP)"]
    assert explain(restart, PLAIN) is None


def test_only_causes_no_wait_can_change_end_a_wait_at_once() -> None:
    from cutover.kafka.diagnose import decisive

    plaintext = ("FAIL [thrd:ssl://127.0.0.1:9092/bootstrap]: ssl://127.0.0.1:9092/bootstrap: SSL handshake failed: "
                 "error:0A000126:SSL routines::unexpected eof while reading (after 2ms in state SSL_HANDSHAKE)")
    assert decisive([plaintext], {"security.protocol": "SSL"})
    closed = ("FAIL [thrd:ssl://127.0.0.1:12796/bootstrap]: ssl://127.0.0.1:12796/bootstrap: SSL handshake failed: "
              "Disconnected: SSL connection closed by peer: connecting to a PLAINTEXT broker listener? (after 1ms in "
              "state SSL_HANDSHAKE)")  # the same mistake, as librdkafka words it on another run
    assert decisive([closed], {"security.protocol": "SSL"})
    assert decisive(["FAIL [thrd:x]: Failed to resolve 'kafka-olld:9092': Name or service not known"], {})
    went_away = "FAIL [thrd:x]: SSL handshake failed: Disconnected: connection reset by peer"
    refused = ("FAIL [thrd:127.0.0.1:9092/bootstrap]: 127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: "
               "Connection refused (after 0ms in state CONNECT)")
    assert not decisive([went_away, refused], {})  # a broker restarting: worth waiting for
    assert decisive(["Failed to get metadata: Local: Required feature not supported by broker"], {})
    assert decisive(["PROBE http 127.0.0.1:8080: HTTP/1.1 404 Not Found"], {})


@pytest.mark.parametrize(("props", "who"), [
    (SASL, "user app (PLAIN)"),
    ({"ssl.certificate.location": "/etc/app.pem"}, "the client certificate /etc/app.pem"),
    ({"sasl.mechanism": "OAUTHBEARER"}, "its OAUTHBEARER principal"),
    ({}, "its principal"),
])
def test_whose_credentials_are_named_without_the_secret(props: dict[str, str], who: str) -> None:
    from cutover.kafka.diagnose import who as whose

    assert whose(props) == who


def test_an_error_text_loses_its_address_and_timing_but_nothing_else() -> None:
    from cutover.kafka.diagnose import bare

    assert bare("sasl_plaintext://127.0.0.1:9092/bootstrap: SASL authentication error: Authentication failed "
                "(after 310ms in state AUTH_REQ)") == "SASL authentication error: Authentication failed"
    assert bare("Failed to get metadata: Local: Broker transport failure") == \
        "Failed to get metadata: Local: Broker transport failure"


def test_one_broker_of_several_refusing_credentials_is_not_decisive_every_one_is() -> None:
    """A broker restarting in a KRaft cluster with SCRAM refuses credentials until it has read its metadata
    (seen in CI: a rolling restart's reads failed at once with 'refused the credentials'); the others still
    let the client in. Refused by every bootstrap broker, or by the only one: the credentials are wrong."""
    from cutover.kafka.diagnose import decisive

    def denied(port: int) -> str:
        return (f"sasl_ssl://127.0.0.1:{port}/bootstrap: SASL authentication error: Authentication failed during "
                "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256 (after 12ms in state "
                "AUTH_REQ)")

    three = {**SASL, "bootstrap.servers": "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"}
    assert not decisive([denied(9093)], three)
    assert not decisive([denied(9093), denied(9093), denied(9092)], three)
    assert decisive([denied(9094), denied(9093), denied(9092)], three)
    assert decisive([denied(9092)], {**SASL, "bootstrap.servers": "127.0.0.1:9092"})


def test_a_broker_error_it_does_not_name_is_its_answer_not_an_unreachable_cluster() -> None:
    """UNKNOWN_SERVER_ERROR (Tansu 0.6.0 refusing a record its Iceberg table cannot take): the cluster answered, so
    "could not reach" and "check bootstrap.servers" would send the operator the wrong way."""
    from confluent_kafka import KafkaError, KafkaException

    from cutover.errors import UnreachableError
    from cutover.kafka.clients import ClusterRef

    ref = ClusterRef("new", {"bootstrap.servers": "127.0.0.1:9"})
    err = ref.failure(KafkaException(KafkaError(KafkaError.UNKNOWN)), "writing records")
    assert not isinstance(err, UnreachableError)
    assert str(err).startswith("the new cluster (127.0.0.1:9) failed writing records with an error it did not name "
                               "(UNKNOWN_SERVER_ERROR)"), err
    assert "its log says why" in err.fix and "schema" in err.fix  # type: ignore[attr-defined]
