"""What listens at a bootstrap address, asked with one request of cutover's own.

librdkafka says little about a listener that is not a broker's: a KRaft controller's listener
answers its Metadata request with "Required feature not supported by broker", and a server that
waits for a line of text (an HTTP server) never answers Kafka's binary request at all, so the
client sees silence until its connection setup times out, like a hung broker. One ApiVersions
request (the one request every Kafka listener answers, before any SASL handshake) tells a
controller from a broker by the APIs it lists; when nothing answers it, an HTTP request tells an
HTTP server from a hung broker. Plaintext only: on a TLS listener the handshake speaks first
(`cutover.kafka.tls`).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
from collections.abc import Mapping

#: The Kafka APIs that tell a broker from a KRaft controller: Metadata (brokers only), Vote and
#: BeginQuorumEpoch (the controllers' quorum).
METADATA, VOTE, BEGIN_QUORUM_EPOCH = 3, 52, 53
#: The marker of a line this module adds to a cluster's failure lines (`diagnose` reads it).
PREFIX = "PROBE"


def first_server(props: Mapping[str, str]) -> tuple[str, int] | None:
    """(host, port) of the first bootstrap server, or None when it cannot be read."""
    first = props.get("bootstrap.servers", "").split(",")[0].strip()
    host, _, port = first.rpartition(":")
    return (host.strip("[]"), int(port)) if host and port.isdigit() else None


def api_keys(host: str, port: int, timeout: float) -> frozenset[int] | None:
    """The API keys the listener's ApiVersions (v0) answer lists; None when it gives no Kafka answer."""
    versions = api_versions(host, port, timeout)
    return None if versions is None else frozenset(versions)


def api_versions(host: str, port: int, timeout: float,
                 tls: ssl.SSLContext | None = None) -> dict[int, tuple[int, int]] | None:
    """{api key: (min, max)} from the listener's ApiVersions (v0) answer, over TLS with `tls`; None when it
    gives no Kafka answer within `timeout`."""
    client_id = b"cutover"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw, \
                (tls.wrap_socket(raw, server_hostname=host) if tls is not None else raw) as conn:
            conn.sendall(struct.pack(">i", len(body)) + body)
            head = _read(conn, 4)
            size = struct.unpack(">i", head)[0] if head is not None else -1
            answer = _read(conn, size) if 10 <= size < 1 << 20 else None
    except (OSError, ssl.SSLError, ValueError):  # unreachable, a failed handshake, unreadable key files
        return None
    return parse_api_versions(answer, 7) if answer is not None else None


def parse_api_versions(answer: bytes, correlation: int) -> dict[int, tuple[int, int]] | None:
    """An ApiVersions v0 response body (after the size): {api key: (min, max)}; None when it is not one."""
    if len(answer) < 10:
        return None
    got, error, count = struct.unpack(">ihi", answer[:10])
    if got != correlation or error != 0 or not 0 <= count <= (len(answer) - 10) // 6:
        return None
    return {key: (low, high) for key, low, high in
            (struct.unpack(">hhh", answer[10 + 6 * i:16 + 6 * i]) for i in range(count))}


def http_status(host: str, port: int, timeout: float) -> str | None:
    """The status line an HTTP server answers a request for / with; None when the listener is not one."""
    request = f"GET / HTTP/1.0\r\nHost: {host}\r\nUser-Agent: cutover\r\n\r\n".encode()
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.sendall(request)
            got = b""
            while b"\n" not in got and len(got) < 200:
                chunk = conn.recv(200 - len(got))
                if not chunk:
                    break
                got += chunk
    except OSError:
        return None
    line = got.split(b"\n", 1)[0].strip()
    return line.decode("ascii", "replace") if line.startswith(b"HTTP/") else None


def identify(props: Mapping[str, str], timeout: float) -> str | None:
    """A line for `diagnose` naming what the first bootstrap server is, when it is not a broker's listener:
    `PROBE controller ADDRESS` or `PROBE http ADDRESS: STATUS LINE`. None when it is a broker, when nothing
    could be learnt within `timeout` (twice: the ApiVersions request, then the HTTP one), or on TLS."""
    server = first_server(props)
    if server is None or props.get("security.protocol", "PLAINTEXT").upper() in ("SSL", "SASL_SSL"):
        return None
    host, port = server
    address = f"{host}:{port}"
    keys = api_keys(host, port, timeout)
    if keys is not None:
        return f"{PREFIX} controller {address}" if is_controller(keys) else None
    status = http_status(host, port, timeout)
    return f"{PREFIX} http {address}: {status}" if status else None


def is_controller(keys: frozenset[int]) -> bool:
    """Whether ApiVersions lists a KRaft controller's APIs: the quorum's, and no Metadata."""
    return METADATA not in keys and bool(keys & {VOTE, BEGIN_QUORUM_EPOCH})


def _read(conn: socket.socket, size: int) -> bytes | None:
    data = b""
    with contextlib.suppress(TimeoutError, socket.timeout):
        while len(data) < size:
            chunk = conn.recv(size - len(data))
            if not chunk:
                break
            data += chunk
    return data if len(data) == size else None
