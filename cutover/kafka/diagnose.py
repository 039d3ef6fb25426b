"""What librdkafka's connection, SASL and DNS failures mean, in words, with the fix.

librdkafka ends most failed connections with "Broker transport failure" or "1/1 brokers
are down"; the cause is only in its error callbacks and its FAIL log lines. `explain`
reads those lines and names what happened: nothing listens there, the host name does not
resolve, the port is not a Kafka listener, the listener wants another security protocol,
the broker offers other SASL mechanisms, or it refused the credentials; and what a probe of the
listener's found (`cutover.kafka.listener`: a controller's listener, an HTTP server). TLS
handshakes are diagnosed apart, by making one (`cutover.kafka.tls`). Pure text in, text out: no secret is
ever in these lines (librdkafka does not log passwords), and none is added.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from cutover.kafka import listener

Kind = Literal["sasl-mechanism", "not-sasl", "denied", "dns", "controller", "not-kafka", "silent", "closed",
               "refused", "connect-timeout"]

#: Kinds that name the cause better than a TLS handshake or an authentication error code could.
BEFORE_TLS: frozenset[Kind] = frozenset({"sasl-mechanism", "not-sasl", "dns", "controller"})
#: Kinds no wait can change: the client is set up wrong for this listener (or the name is wrong).
#: Refused and silent connections are not among them: a broker that restarts refuses for a while.
DECISIVE: frozenset[Kind] = frozenset({"sasl-mechanism", "not-sasl", "denied", "dns", "controller", "not-kafka"})


#: What a TLS handshake failure says when the setup is wrong, not when a broker went away mid-handshake.
_TLS_SETUP = ("unexpected eof", "certificate", "wrong version", "unknown ca", "protocol version", "packet length",
              "no shared cipher", "handshake failure", "plaintext broker listener")


def decisive(lines: Iterable[str], props: Mapping[str, str]) -> bool:
    """Whether librdkafka's lines already say the cluster cannot be used as configured: a TLS handshake
    that failed (a TLS client at a plaintext listener, or a certificate not trusted), or a DECISIVE kind."""
    texts = [t for t in lines if t]
    if any("SSL handshake failed" in t and any(k in t.lower() for k in _TLS_SETUP) for t in texts):
        return True
    found = explain(texts, props)
    if found is not None and found.kind == "denied":
        return _denied_by_all(texts, props)
    return found is not None and found.kind in DECISIVE


def _denied_by_all(texts: list[str], props: Mapping[str, str]) -> bool:
    """Whether every bootstrap broker refused the credentials. One of several refusing is not the answer: a
    broker restarting in a KRaft cluster refuses SCRAM credentials until it has read its metadata, while the
    others let the client in."""
    servers = {s.strip() for s in props.get("bootstrap.servers", "").split(",") if s.strip()}
    refused = {_address(t, props) for t in texts if _denied(t, props) is not None}
    return len(servers) <= 1 or servers <= refused


def all_refused(lines: Iterable[str], props: Mapping[str, str]) -> bool:
    """Whether every recent line is a refused connection (nothing else, such as an answer, was heard)."""
    texts = [t for t in lines if t and "brokers are down" not in t]
    return bool(texts) and all((d := explain([t], props)) is not None and d.kind == "refused" for t in texts)


_ADDRESS = re.compile(r"(?:[a-z_]+://)?(\[?[\w.:-]+?\]?:\d+)/(?:bootstrap|\d+):")


@dataclass(frozen=True)
class Diagnosis:
    kind: Kind
    what: str
    fix: str


def explain(lines: Iterable[str], props: Mapping[str, str]) -> Diagnosis | None:
    """The most specific cause in librdkafka's error and log lines, or None when they name none."""
    texts = [t for t in lines if t]
    for rule in _RULES:
        for text in texts:
            found = rule(text, props)
            if found is not None:
                return found
    return None


def _address(text: str, props: Mapping[str, str]) -> str:
    m = _ADDRESS.search(text)
    return m.group(1) if m else props.get("bootstrap.servers", "?").split(",")[0].strip()


def _protocol(props: Mapping[str, str]) -> str:
    return props.get("security.protocol", "PLAINTEXT").upper()


def _mechanism(text: str, props: Mapping[str, str]) -> Diagnosis | None:
    m = re.search(r"SASL (\S+) mechanism handshake failed: .*supported mechanisms: ?(.*?)\s*(?:\(after|$)", text)
    if m is None or not m.group(2).strip():
        return None
    wanted, offered = m.group(1), [s.strip() for s in m.group(2).split(",") if s.strip()]
    return Diagnosis("sasl-mechanism",
                     f"the broker at {_address(text, props)} does not offer SASL mechanism {wanted} (it offers: "
                     f"{', '.join(offered)})",
                     f"set sasl.mechanism to {' or '.join(offered)} (with a user made for it), or enable {wanted} "
                     "on the brokers' listener")


def _not_sasl(text: str, props: Mapping[str, str]) -> Diagnosis | None:
    if not re.search(r"mechanism handshake failed: .*supported mechanisms:\s*(\(after|$)", text):
        return None
    plain = "SSL" if _protocol(props) == "SASL_SSL" else "PLAINTEXT"
    return Diagnosis("not-sasl",
                     f"{_address(text, props)} is not a SASL listener: the broker refused the SASL handshake "
                     f"(the plan's security.protocol is {_protocol(props)})",
                     f"set security.protocol to {plain} and drop the sasl.* settings for this listener, or point "
                     "bootstrap.servers at the brokers' SASL listener")


def _denied(text: str, props: Mapping[str, str]) -> Diagnosis | None:
    if not re.search(r"Authentication failed|SASL authentication error|invalid credentials", text):
        return None
    return Diagnosis("denied", f"the broker refused the credentials of {who(props)}", denied_fix(props))


def who(props: Mapping[str, str]) -> str:
    """Whose credentials a client presents, in words: `user NAME (MECHANISM)`, or its certificate."""
    if props.get("sasl.username"):
        return f"user {props['sasl.username']} ({props.get('sasl.mechanism', 'GSSAPI')})"
    if props.get("ssl.certificate.location"):
        return f"the client certificate {props['ssl.certificate.location']}"
    mechanism = props.get("sasl.mechanism")
    return f"its {mechanism} principal" if mechanism else "its principal"


def denied_fix(props: Mapping[str, str]) -> str:
    """What to check when a cluster refused a client's credentials."""
    mech = props.get("sasl.mechanism", "GSSAPI")
    if not props.get("sasl.username"):
        return f"check the {mech} settings of this cluster in the plan, and that the principal exists on the brokers"
    return (f"check sasl.username and sasl.password (or the variable or env_file it comes from), and that the user "
            f"exists on the brokers for {mech}")


def bare(text: str) -> str:
    """librdkafka's error text without the broker address it starts with and the timing it ends with."""
    text = re.sub(r"^(?:[a-z_]+://)?\[?[\w.:-]+?\]?:\d+/(?:bootstrap|\d+): ", "", text)
    return re.sub(r"\s*\(after \d+ms in state \w+\)$", "", text)


def _dns(text: str, props: Mapping[str, str]) -> Diagnosis | None:
    m = re.search(r"Failed to resolve '([^']*)': ([^(]*)", text)
    if m is None:
        return None
    return Diagnosis("dns", f"the host name in {m.group(1)} does not resolve from here ({m.group(2).strip()})",
                     "check the host names in bootstrap.servers, and this machine's DNS or /etc/hosts")


def _not_kafka(text: str, props: Mapping[str, str]) -> Diagnosis | None:
    m = re.search(r"Invalid response size (\d+)", text)
    if m is None:
        return None
    first = int(m.group(1)).to_bytes(4, "big", signed=False) if int(m.group(1)) < 1 << 32 else b""
    shown = first.decode("ascii") if first and all(32 <= b < 127 for b in first) else first.hex()
    if shown == "HTTP":
        return _http_server(_address(text, props), "it answered Kafka's first request with HTTP")
    return Diagnosis("not-kafka",
                     f"{_address(text, props)} is not a Kafka listener: it answered Kafka's first request with "
                     f"bytes that are not Kafka ({shown!r}...)",
                     "check the port in bootstrap.servers: it must be a broker's listener (see the brokers' "
                     "advertised.listeners)")


def _http_probe(text: str, props: Mapping[str, str]) -> Diagnosis | None:
    m = re.match(rf"{listener.PREFIX} http (\S+): (.*)", text)
    if m is None:
        return None
    return _http_server(m.group(1), f"it answered HTTP ({m.group(2)}) to a request of cutover's, and nothing to "
                                    "Kafka's first request")


def _http_server(address: str, evidence: str) -> Diagnosis:
    return Diagnosis("not-kafka", f"{address} is an HTTP server, not a Kafka listener: {evidence}",
                     "check the port in bootstrap.servers: it must be a broker's listener (see the brokers' "
                     "advertised.listeners), not a REST, registry or web server's")


_CONTROLLER_FIX = ("point bootstrap.servers at the brokers' listener (the brokers' advertised.listeners), not at a "
                   "KRaft controller's (controller.listener.names): a client cannot use a controller's listener")


def _controller_probe(text: str, props: Mapping[str, str]) -> Diagnosis | None:
    m = re.match(rf"{listener.PREFIX} controller (\S+)", text)
    if m is None:
        return None
    return Diagnosis("controller",
                     f"{m.group(1)} is a KRaft controller listener, not a broker's: it lists the controllers' "
                     "APIs and not Metadata (librdkafka: Required feature not supported by broker)",
                     _CONTROLLER_FIX)


def _unsupported(text: str, props: Mapping[str, str]) -> Diagnosis | None:
    if "Required feature not supported by broker" not in text:
        return None
    return Diagnosis("controller",
                     f"{_address(text, props)} does not answer Kafka's Metadata request (Required feature not "
                     "supported by broker): most likely a KRaft controller listener, not a broker's",
                     _CONTROLLER_FIX)


def _silent(text: str, props: Mapping[str, str]) -> Diagnosis | None:
    m = re.search(r"Connection setup timed out in state (APIVERSION_QUERY|AUTH\w*|SSL_HANDSHAKE)", text)
    if m is None:
        return None
    return Diagnosis("silent",
                     f"{_address(text, props)} accepted the connection but never answered Kafka's first request "
                     f"(state {m.group(1)}): not a Kafka listener (an HTTP or other server on that port?), a "
                     "listener with another security protocol, or a hung broker",
                     "check the port and security.protocol against the brokers' listeners; if it is the broker's "
                     "port, check the broker's health")


def _closed(text: str, props: Mapping[str, str]) -> Diagnosis | None:
    # at once (within a second of the connection): a broker that restarts, or closes an idle
    # connection, does so minutes into it
    m = re.search(r"connection closed by peer.*\(after (\d+)ms in state (UP|APIVERSION_QUERY)", text)
    if m is None or int(m.group(1)) >= 1000:
        return None
    if _protocol(props).startswith("SASL"):
        return None
    return Diagnosis("closed",
                     f"{_address(text, props)} closed the connection as soon as the client spoke: the listener "
                     f"expects another security protocol (SASL?) than the plan's {_protocol(props)}",
                     "set security.protocol (and sasl.mechanism, sasl.username, sasl.password) to what this "
                     "listener expects, e.g. SASL_PLAINTEXT or SASL_SSL")


def _refused(text: str, props: Mapping[str, str]) -> Diagnosis | None:
    if "Connection refused" not in text:
        return None
    return Diagnosis("refused", f"nothing listens on {_address(text, props)} (connection refused)",
                     "check bootstrap.servers (host and port) and that the brokers are up")


def _connect_timeout(text: str, props: Mapping[str, str]) -> Diagnosis | None:
    m = re.search(r"Connection setup timed out in state CONNECT \(after (\d+)ms", text)
    if m is None:
        return None
    return Diagnosis("connect-timeout",
                     f"{_address(text, props)} did not accept a connection within {m.group(1)} ms (the host is "
                     "down, or a firewall drops the packets)",
                     "check the address and the network path from here to the brokers (firewalls, security "
                     "groups, VPN)")


_RULES = (_controller_probe, _http_probe, _mechanism, _not_sasl, _denied, _dns, _unsupported, _not_kafka, _closed,
          _silent, _refused, _connect_timeout)
