"""TLS settings of a cluster: the files they name, and why a handshake failed.

librdkafka reports a failed TLS handshake as "Broker transport failure", or at best as an
OpenSSL error line. When a TLS cluster cannot be reached, `diagnose` makes one handshake
of its own with the same CA, client certificate and host-name rule (Python's ssl module),
and says what is wrong in words: the certificate expired, is signed by another CA, does
not name the host, the listener is not TLS, or the broker wants a client certificate.
Nothing here ever prints a key or a password.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Mapping
from pathlib import Path

from cutover.errors import UsageError
from cutover.kafka import listener

#: librdkafka settings that name PEM files, and what each must hold.
FILES = {"ssl.ca.location": "CERTIFICATE", "ssl.certificate.location": "CERTIFICATE",
         "ssl.key.location": "PRIVATE KEY"}


def uses_tls(props: Mapping[str, str]) -> bool:
    return props.get("security.protocol", "PLAINTEXT").upper() in ("SSL", "SASL_SSL")


def pem_file(side: str, key: str, path: str, kind: str) -> str:
    """The text of a PEM file a TLS setting names; a clear error when it cannot be used."""
    where = f"clusters.{side}.{key}"
    try:
        text = Path(path).expanduser().read_text()
    except FileNotFoundError:
        raise UsageError(f"{where}: {path} does not exist",
                         fix=f"give the path of the PEM file in {key}, readable by the user running cutover") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a text file"
        raise UsageError(f"{where}: {path} cannot be read ({reason})",
                         fix=f"make {path} readable by the user running cutover, or point {key} at the right "
                             "path") from None
    if f"-----BEGIN {kind}" not in text and not (kind == "PRIVATE KEY" and "PRIVATE KEY-----" in text):
        raise UsageError(f"{where}: {path} holds no PEM {kind.lower()} (no '-----BEGIN {kind}' line)",
                         fix=f"point {key} at a PEM file (convert DER or PKCS#12 with openssl first)")
    return text


def check_files(side: str, props: Mapping[str, str]) -> None:
    """Every TLS file the cluster's settings name exists, is readable and holds PEM."""
    for key, kind in FILES.items():
        if key in props:
            pem_file(side, key, props[key], kind)


def context(props: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS context a client with these properties uses: their CA (or the system's), the client
    certificate if any, host names checked unless ssl.endpoint.identification.algorithm is none."""
    ctx = ssl.create_default_context(cafile=props.get("ssl.ca.location"))
    # Judge as librdkafka's OpenSSL does: Python 3.13 turns on X.509 strict mode by default, which
    # refuses certificates Kafka's clients accept (a CA without an authority key identifier).
    ctx.verify_flags &= ~ssl.VERIFY_X509_STRICT
    if props.get("ssl.endpoint.identification.algorithm", "https").lower() in ("none", ""):
        ctx.check_hostname = False
    if "ssl.certificate.location" in props and "ssl.key.location" in props:
        ctx.load_cert_chain(props["ssl.certificate.location"], props["ssl.key.location"],
                            props.get("ssl.key.password"))
    return ctx


def diagnose(props: Mapping[str, str], timeout: float = 3.0) -> tuple[str, str] | None:
    """(what is wrong, the fix) for the first bootstrap server's TLS, or None if the
    handshake succeeds, the host cannot be reached at all, or the cluster is not on TLS."""
    bootstrap = props.get("bootstrap.servers", "").split(",")[0].strip()
    server = listener.first_server(props)
    if server is None:
        return None
    host, port = server
    if not uses_tls(props):
        return _tls_where_plaintext_expected(host, port, timeout)
    ca = props.get("ssl.ca.location")
    client_cert = "ssl.certificate.location" in props and "ssl.key.location" in props
    try:
        ctx = context(props)
    except (OSError, ssl.SSLError):
        return None  # the files themselves: check_files names them
    trusted_by = f"ssl.ca.location ({ca})" if ca else "the system's CA store (no ssl.ca.location)"
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw, \
                ctx.wrap_socket(raw, server_hostname=host) as conn:
            # TLS 1.3 sends a refused client certificate's alert after the handshake.
            conn.settimeout(0.5)
            with contextlib.suppress(TimeoutError, socket.timeout):
                conn.recv(1)
        return None
    except ssl.SSLCertVerificationError as exc:
        reason = exc.verify_message or str(exc)
        if "expired" in reason:
            return (f"the broker's certificate has expired ({_not_after(host, port, timeout)})",
                    "renew the broker's certificate; a client cannot work around an expired one")
        if "not yet valid" in reason:
            return ("the broker's certificate is not valid yet", "check the clocks of this machine and the broker")
        if "mismatch" in reason.lower():
            return (f"the broker's certificate does not name {host} ({reason})",
                    "use a host name the certificate lists in bootstrap.servers (and the brokers' advertised "
                    "listeners); ssl.endpoint.identification.algorithm=none turns the check off, for tests only")
        return (f"the broker's certificate is not trusted by {trusted_by}: {reason}",
                "point ssl.ca.location at the CA (PEM) that signed the brokers' certificates")
    except ssl.SSLError as exc:
        text = f"{exc.reason or ''} {exc}".lower()
        if "wrong_version_number" in text or "wrong version number" in text or "record layer" in text \
                or "packet length" in text:
            return (f"{bootstrap} does not speak TLS", "set security.protocol to PLAINTEXT or SASL_PLAINTEXT, "
                    "or use the brokers' TLS listener")
        if any(s in text for s in ("certificate required", "certificate_required", "bad certificate",
                                   "bad_certificate", "handshake failure", "unknown ca", "unknown_ca")):
            if not client_cert:
                return ("the broker requires a client certificate (mTLS) and the plan gives none",
                        "set ssl.certificate.location and ssl.key.location (PEM) for this cluster")
            return ("the broker refused the client certificate (signed by a CA it does not trust, expired, or "
                    "not for client authentication)",
                    "use a client certificate signed by the CA in the brokers' ssl.truststore")
        if listener.api_keys(host, port, timeout) is not None:  # a Kafka plaintext listener closes on a hello
            return (f"{bootstrap} does not speak TLS: it answers Kafka in plaintext", "set security.protocol to "
                    "PLAINTEXT or SASL_PLAINTEXT, or use the brokers' TLS listener")
        return (f"the TLS handshake with {bootstrap} failed: {exc.reason or exc}",
                "check the TLS settings of this cluster against its listener")
    except OSError:
        return None


def _tls_where_plaintext_expected(host: str, port: int, timeout: float) -> tuple[str, str] | None:
    """A plaintext client at a TLS listener: the broker's answer to a TLS hello says so."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw, \
                ctx.wrap_socket(raw, server_hostname=host):
            pass
    except (ssl.SSLError, OSError):
        return None
    return (f"{host}:{port} is a TLS listener and the plan's security.protocol is not",
            "set security.protocol to SSL or SASL_SSL, with ssl.ca.location")


def _not_after(host: str, port: int, timeout: float) -> str:
    """When the broker's certificate ended (read without verifying it)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw, \
                ctx.wrap_socket(raw, server_hostname=host) as conn:
            der = conn.getpeercert(binary_form=True)
    except (ssl.SSLError, OSError):
        return "date unknown"
    if not der:
        return "date unknown"
    from cryptography import x509

    return f"not valid after {x509.load_der_x509_certificate(der).not_valid_after_utc:%Y-%m-%d %H:%M} UTC"
