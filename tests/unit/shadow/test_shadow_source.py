"""The Kafka options Spark gets (pure): librdkafka properties for the Java client, read_committed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cutover.errors import UsageError
from cutover.kafka.java_client import java_properties
from cutover.shadow.source import reader_options


def test_java_properties_translate_sasl_and_tls(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n")
    props = java_properties("old", {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL",
                                    "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u",
                                    "sasl.password": 'p"w', "ssl.ca.location": str(ca),
                                    "socket.connection.setup.timeout.ms": "5000"})
    assert props == {
        "bootstrap.servers": "h:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "ssl.truststore.location": str(ca), "ssl.truststore.type": "PEM",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="u" password="p\\"w";'}
    with pytest.raises(UsageError, match=r"sasl\.mechanism 'GSSAPI'"):
        java_properties("new", {"sasl.mechanism": "GSSAPI", "sasl.username": "u"})


def test_reader_options_read_committed_from_explicit_offsets() -> None:
    opts = reader_options("new", {"bootstrap.servers": "h:1"}, "orders", {1: 7, 0: -2}, 500)
    assert json.loads(opts["startingOffsets"]) == {"orders": {"0": -2, "1": 7}}
    assert (opts["kafka.isolation.level"], opts["maxOffsetsPerTrigger"], opts["kafka.bootstrap.servers"]) == (
        "read_committed", "500", "h:1")


def _key_and_cert(tmp: Path, traditional: bool) -> tuple[Path, Path, bytes]:
    """A self-signed client certificate; the key as PKCS#8 or as traditional (PKCS#1) PEM."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "app")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    fmt = serialization.PrivateFormat.TraditionalOpenSSL if traditional else serialization.PrivateFormat.PKCS8
    key_file, cert_file = tmp / "app.key", tmp / "app.pem"
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pkcs8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
    return key_file, cert_file, pkcs8


@pytest.mark.parametrize("traditional", [False, True], ids=["pkcs8", "pkcs1"])
def test_client_certificate_reaches_java_as_pem_contents(tmp_path: Path, traditional: bool) -> None:
    """Java's ssl.keystore.key / ssl.keystore.certificate.chain take PEM text, not file paths,
    and only PKCS#8 keys: a librdkafka mTLS cluster becomes a PEM key store Java can load."""
    key_file, cert_file, pkcs8 = _key_and_cert(tmp_path, traditional)
    props = java_properties("new", {"bootstrap.servers": "h:1", "security.protocol": "SSL",
                                    "ssl.ca.location": str(cert_file), "ssl.certificate.location": str(cert_file),
                                    "ssl.key.location": str(key_file)})
    assert props["ssl.keystore.type"] == "PEM"
    assert props["ssl.keystore.certificate.chain"] == cert_file.read_text()
    assert props["ssl.keystore.key"] == pkcs8.decode()
    assert props["ssl.keystore.key"].startswith("-----BEGIN PRIVATE KEY-----")
    assert (props["ssl.truststore.location"], props["ssl.truststore.type"]) == (str(cert_file), "PEM")
    assert "ssl.key.location" not in props and "ssl.certificate.location" not in props


def test_inline_pem_and_endpoint_check_translate(tmp_path: Path) -> None:
    _key_file, cert_file, pkcs8 = _key_and_cert(tmp_path, traditional=False)
    props = java_properties("old", {"security.protocol": "SSL", "ssl.ca.pem": "CA-PEM",
                                    "ssl.certificate.pem": cert_file.read_text(), "ssl.key.pem": pkcs8.decode(),
                                    "ssl.endpoint.identification.algorithm": "none"})
    assert props == {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.certificates": "CA-PEM",
                     "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": cert_file.read_text(),
                     "ssl.keystore.key": pkcs8.decode(), "ssl.endpoint.identification.algorithm": ""}


def test_tls_files_that_cannot_be_read_are_named_before_spark_starts(tmp_path: Path) -> None:
    key_file, cert_file, _ = _key_and_cert(tmp_path, traditional=False)
    missing = tmp_path / "nope.key"
    with pytest.raises(UsageError) as err:
        java_properties("new", {"ssl.certificate.location": str(cert_file), "ssl.key.location": str(missing)})
    assert "clusters.new.ssl.key.location" in str(err.value) and str(missing) in str(err.value)
    assert err.value.fix and "path" in err.value.fix
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    with pytest.raises(UsageError, match=r"clusters\.old\.ssl\.certificate\.location.*no PEM certificate"):
        java_properties("old", {"ssl.certificate.location": str(garbage), "ssl.key.location": str(key_file)})
    with pytest.raises(UsageError, match=r"clusters\.old: ssl\.key\.location without ssl\.certificate\.location"):
        java_properties("old", {"ssl.key.location": str(key_file)})
    with pytest.raises(UsageError, match=r"clusters\.new\.ssl\.ca\.location"):
        java_properties("new", {"ssl.ca.location": str(missing)})


def test_every_secret_option_spark_gets_is_redacted(tmp_path: Path) -> None:
    """The options that carry a password or key material match Spark's redaction regex."""
    import re

    from cutover.lake.spark import REDACTED_OPTIONS

    key_file, cert_file, _ = _key_and_cert(tmp_path, traditional=False)
    opts = reader_options("new", {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL",
                                  "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "pw",
                                  "ssl.certificate.location": str(cert_file), "ssl.key.location": str(key_file),
                                  "ssl.key.password": "kpw", "ssl.ca.pem": "CA"}, "t", {}, 10)
    secret = {k for k in opts if any(s in opts[k] for s in ("pw", "PRIVATE KEY", "CERTIFICATE", "CA"))}
    assert secret == {"kafka.sasl.jaas.config", "kafka.ssl.keystore.key", "kafka.ssl.keystore.certificate.chain",
                      "kafka.ssl.key.password", "kafka.ssl.truststore.certificates"}
    assert all(re.search(REDACTED_OPTIONS, k) for k in secret)
    assert not re.search(REDACTED_OPTIONS, "kafka.bootstrap.servers")


def test_every_catalog_secret_spark_gets_is_redacted_in_its_event_log() -> None:
    """Catalog tokens, REST credentials, S3 keys and database passwords match the key regex
    Spark masks settings by (event log, UI); the catalog's plain settings do not."""
    import re

    from cutover.lake.catalog import spark_conf
    from cutover.lake.spark import REDACTED_CONF
    from cutover.plan.model import Catalog

    rest = spark_conf(Catalog(uri="http://127.0.0.1:1", name="lake", type="rest", properties={
        "token": "t0k3n", "credential": "id:s3cr3t", "s3.access-key-id": "AKIA1",
        "s3.secret-access-key": "SECRET1", "s3.endpoint": "http://127.0.0.1:2"}))
    sql = spark_conf(Catalog(uri="postgresql+psycopg2://iceberg:pa55@127.0.0.1:5432/iceberg", name="lake"))
    conf = {**rest, **sql}
    secret = {k for k, v in conf.items() if any(s in v for s in ("t0k3n", "s3cr3t", "AKIA1", "SECRET1", "pa55"))}
    assert secret == {"spark.sql.catalog.lake.token", "spark.sql.catalog.lake.credential",
                      "spark.sql.catalog.lake.s3.access-key-id", "spark.sql.catalog.lake.s3.secret-access-key",
                      "spark.sql.catalog.lake.jdbc.password"}
    assert all(re.search(REDACTED_CONF, k) for k in secret)
    plain = set(conf) - secret
    assert "spark.sql.catalog.lake.s3.endpoint" in plain and "spark.sql.catalog.lake.uri" in plain
    assert not [k for k in plain if re.search(REDACTED_CONF, k)]
