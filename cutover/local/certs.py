"""The sandbox's certificates: one CA per sandbox, a server certificate per cluster and a
client certificate per user, as PEM (librdkafka, Spark) and as PKCS#12 and JKS key stores
(the brokers and Java clients).

Everything is made locally at `cutover local up` with the `cryptography` library (and the
JDK's keytool for JKS). Private keys and key stores are written with mode 0600; the key
stores' password lives only in the sandbox's secrets.env.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cutover import jvm
from cutover.errors import SandboxError

VALID_DAYS = 825  # what browsers and most TLS stacks accept for a leaf certificate


@dataclass(frozen=True)
class Identity:
    """One certificate with its key: PEM files and key stores, all under the TLS folder."""

    folder: Path
    name: str

    @property
    def cert(self) -> Path:
        return self.folder / f"{self.name}.pem"

    @property
    def key(self) -> Path:
        return self.folder / f"{self.name}.key.pem"

    @property
    def p12(self) -> Path:
        return self.folder / f"{self.name}.p12"

    @property
    def jks(self) -> Path:
        return self.folder / f"{self.name}.jks"


def ca_file(folder: Path) -> Path:
    return folder / "ca.pem"


def truststore(folder: Path) -> Path:
    """The CA as a JKS trust store (Java clients); the brokers read ca.pem as a PEM trust store."""
    return folder / "truststore.jks"


def _write(path: Path, data: bytes, private: bool) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    tmp.replace(path)


def ensure_ca(folder: Path, store_password: str) -> None:
    """The sandbox's CA (made once; kept across up/down so the certificates stay valid)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    if ca_file(folder).is_file():
        return
    folder.mkdir(parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"cutover sandbox CA {folder.parent.name}")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            # key identifiers: X.509 strict verification (Python 3.13's default) asks for them
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256()))
    _write(folder / "ca.key.pem", key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()), private=True)
    _write(ca_file(folder), cert.public_bytes(serialization.Encoding.PEM), private=False)
    _keytool(folder, "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_file(folder)),
             "-keystore", str(truststore(folder)), "-storetype", "JKS", "-storepass", store_password)


def issue(folder: Path, name: str, common_name: str, store_password: str, server: bool) -> Identity:
    """A certificate signed by the sandbox CA (made once): a server's names 127.0.0.1 and localhost."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ident = Identity(folder, name)
    if ident.jks.is_file():
        return ident
    ca_cert = x509.load_pem_x509_certificate(ca_file(folder).read_bytes())
    ca_key = serialization.load_pem_private_key((folder / "ca.key.pem").read_bytes(), password=None)
    assert isinstance(ca_key, rsa.RSAPrivateKey)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = dt.datetime.now(dt.UTC)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
               .issuer_name(ca_cert.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
               .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
               .add_extension(x509.ExtendedKeyUsage(
                   [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH] if server
                   else [ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write(ident.key, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()), private=True)
    _write(ident.cert, cert.public_bytes(serialization.Encoding.PEM) + ca_file(folder).read_bytes(), private=False)
    _write(ident.p12, pkcs12.serialize_key_and_certificates(
        name.encode(), key, cert, [ca_cert],
        serialization.BestAvailableEncryption(store_password.encode())), private=True)
    jks_tmp = ident.jks.with_name(ident.jks.name + ".tmp")
    jks_tmp.unlink(missing_ok=True)
    _keytool(folder, "-importkeystore", "-noprompt", "-srckeystore", str(ident.p12), "-srcstoretype", "PKCS12",
             "-srcstorepass", store_password, "-destkeystore", str(jks_tmp), "-deststoretype", "JKS",
             "-deststorepass", store_password)
    os.chmod(jks_tmp, 0o600)
    jks_tmp.replace(ident.jks)
    return ident


def _keytool(folder: Path, *args: str) -> None:
    keytool = Path(jvm.java()).with_name("keytool")
    lean = (f"-J{flag}" for flag in jvm.LEAN)
    done = subprocess.run([str(keytool), *lean, *args], capture_output=True, text=True, check=False, cwd=folder)
    if done.returncode != 0:
        # keytool's arguments hold the store password: only its own output is quoted.
        raise SandboxError(f"keytool failed writing a key store in {folder}:\n{(done.stdout + done.stderr)[-800:]}",
                           fix=f"remove {folder} (cutover local down --purge) and run up again")


def make_all(folder: Path, store_password: str, tls: Sequence[str], mtls: Sequence[str],
             users: Sequence[str]) -> None:
    """The CA, each TLS cluster's server certificate and, for each mTLS cluster, each user's client one."""
    ensure_ca(folder, store_password)
    for side in tls:
        issue(folder, f"{side}-broker", f"{side}-broker", store_password, server=True)
    for side in mtls:
        for user in users:
            issue(folder, f"{side}-{user}", user, store_password, server=False)
