"""Why a TLS handshake failed, in words: a loopback TLS listener with a certificate that is
expired, signed by another CA or made for another host (no Kafka needed to fail a handshake)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from cutover.errors import UsageError
from cutover.kafka import tls

NOW = dt.datetime.now(dt.UTC)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _ca(folder: Path, cn: str) -> tuple[rsa.RSAPrivateKey, x509.Certificate, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn)).public_key(key.public_key())
            .serial_number(1).not_valid_before(NOW - dt.timedelta(days=10)).not_valid_after(NOW + dt.timedelta(days=10))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    path = folder / f"{cn}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert, path


def _server_cert(folder: Path, ca: tuple[rsa.RSAPrivateKey, x509.Certificate, Path], names: list[x509.GeneralName],
                 not_after: dt.datetime) -> tuple[Path, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (x509.CertificateBuilder().subject_name(_name("broker")).issuer_name(ca[1].subject)
            .public_key(key.public_key()).serial_number(2).not_valid_before(NOW - dt.timedelta(days=5))
            .not_valid_after(not_after).add_extension(x509.SubjectAlternativeName(names), critical=False)
            .sign(ca[0], hashes.SHA256()))
    cert_file, key_file = folder / "server.pem", folder / "server.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@pytest.fixture
def listener() -> Iterator[dict[str, object]]:
    """A loopback TLS listener; `serve(cert, key)` starts it and returns host:port."""
    state: dict[str, object] = {}
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(5)
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve(cert: Path, key: Path) -> str:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)

        def loop() -> None:
            while not stop.is_set():
                try:
                    conn, _ = sock.accept()
                except TimeoutError:
                    continue
                try:
                    conn.settimeout(2)
                    with ctx.wrap_socket(conn, server_side=True):
                        pass
                except (ssl.SSLError, OSError):
                    conn.close()

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        state["thread"] = thread
        return f"127.0.0.1:{sock.getsockname()[1]}"

    state["serve"] = serve
    yield state
    stop.set()
    if "thread" in state:
        state["thread"].join(5)  # type: ignore[attr-defined]
    sock.close()


LOOPBACK = [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]


@pytest.mark.parametrize(("case", "words"), [
    ("expired", ["certificate has expired", "not valid after"]),
    ("other-host", ["does not name 127.0.0.1", "ssl.endpoint.identification.algorithm=none"]),
    ("other-ca", ["not trusted by ssl.ca.location", "point ssl.ca.location at the CA"]),
    ("fine", []),
])
def test_a_failed_handshake_is_named(tmp_path: Path, listener: dict[str, object], case: str,
                                     words: list[str]) -> None:
    ca = _ca(tmp_path, "sandbox-ca")
    names = [x509.DNSName("broker.example")] if case == "other-host" else LOOPBACK
    not_after = NOW - dt.timedelta(days=1) if case == "expired" else NOW + dt.timedelta(days=5)
    cert, key = _server_cert(tmp_path, ca, names, not_after)
    bootstrap = listener["serve"](cert, key)  # type: ignore[operator]
    trusted = _ca(tmp_path, "another-ca")[2] if case == "other-ca" else ca[2]
    found = tls.diagnose({"bootstrap.servers": bootstrap, "security.protocol": "SSL",
                          "ssl.ca.location": str(trusted)})
    if not words:
        assert found is None
        return
    assert found is not None
    text = " ".join(found)
    assert all(w in text for w in words), text


def test_a_certificate_kafka_accepts_is_not_called_untrusted_under_strict_x509(
        tmp_path: Path, listener: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    """Python 3.13 verifies in X.509 strict mode by default; librdkafka does not. These test certificates lack
    an authority key identifier, which strict mode refuses: the diagnosis must still find nothing wrong."""
    default = ssl.create_default_context

    def strict(*args: Any, **kwargs: Any) -> ssl.SSLContext:  # what 3.13's default context does
        ctx = default(*args, **kwargs)
        ctx.verify_flags |= ssl.VERIFY_X509_STRICT
        return ctx

    monkeypatch.setattr(ssl, "create_default_context", strict)
    ca = _ca(tmp_path, "sandbox-ca")
    bootstrap = listener["serve"](*_server_cert(tmp_path, ca, LOOPBACK, NOW + dt.timedelta(days=5)))  # type: ignore[operator]
    assert tls.diagnose({"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(ca[2])}) \
        is None


def test_a_plaintext_client_at_a_tls_listener_is_told_so(tmp_path: Path, listener: dict[str, object]) -> None:
    ca = _ca(tmp_path, "sandbox-ca")
    bootstrap = listener["serve"](*_server_cert(tmp_path, ca, LOOPBACK, NOW + dt.timedelta(days=5)))  # type: ignore[operator]
    found = tls.diagnose({"bootstrap.servers": bootstrap})
    assert found is not None and "is a TLS listener" in found[0] and "SSL or SASL_SSL" in found[1]


def test_tls_files_are_checked_with_their_setting_and_path(tmp_path: Path) -> None:
    ca = _ca(tmp_path, "sandbox-ca")[2]
    tls.check_files("old", {"ssl.ca.location": str(ca)})
    with pytest.raises(UsageError, match=r"clusters\.old\.ssl\.key\.location: .*missing\.key does not exist"):
        tls.check_files("old", {"ssl.ca.location": str(ca), "ssl.key.location": str(tmp_path / "missing.key")})
    junk = tmp_path / "junk.pem"
    junk.write_text("junk")
    with pytest.raises(UsageError, match=r"clusters\.new\.ssl\.ca\.location: .*junk\.pem holds no PEM certificate"):
        tls.check_files("new", {"ssl.ca.location": str(junk)})
    junk.chmod(0)
    if not os.access(junk, os.R_OK):  # root reads anything
        with pytest.raises(UsageError, match=r"cannot be read \(Permission denied\)"):
            tls.check_files("new", {"ssl.ca.location": str(junk)})
