"""librdkafka client properties (what the plan's clusters are written in) rendered for Kafka's Java client: the
Spark job's Kafka source, the Java helpers (cutover.kafka.java_admin) and the sandbox's Connect worker.

The common security settings translate one to one or into a JAAS line; anything else passes through, which
both clients share for most keys.
"""

from __future__ import annotations

from collections.abc import Mapping

from cutover.errors import UsageError
from cutover.kafka.tls import pem_file

_JAAS = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
#: librdkafka-only keys with no Java meaning: dropped rather than passed on.
_LIBRDKAFKA_ONLY = {"socket.connection.setup.timeout.ms", "enable.ssl.certificate.verification", "debug",
                    "statistics.interval.ms", "api.version.request", "broker.version.fallback"}
#: Keys whose value Java reads as librdkafka does, under another name (truststore files as PEM).
_RENAMED = {"ssl.ca.location": "ssl.truststore.location", "ssl.ca.pem": "ssl.truststore.certificates"}
#: The client certificate: librdkafka takes files (or PEM text); Java's PEM key store takes
#: the PEM text itself (`ssl.keystore.certificate.chain`, `ssl.keystore.key`), never a path.
_CLIENT_CERT = ("ssl.certificate.location", "ssl.key.location", "ssl.certificate.pem", "ssl.key.pem")


def java_properties(side: str, props: Mapping[str, str]) -> dict[str, str]:
    """Java Kafka client properties for the same cluster (without the `kafka.` prefix).

    TLS files are read here, in the driver, so a missing or unreadable certificate or key
    is named before Spark starts rather than in an executor's log.
    """
    out: dict[str, str] = {}
    for key, value in props.items():
        if key in _LIBRDKAFKA_ONLY or key in ("sasl.username", "sasl.password") or key in _CLIENT_CERT:
            continue
        if key in _RENAMED:
            if key == "ssl.ca.location":
                pem_file(side, key, value, "CERTIFICATE")  # Java reads the file itself: check it now
            out["ssl.truststore.type"] = "PEM"
            out[_RENAMED[key]] = value
        elif key == "ssl.endpoint.identification.algorithm":
            out[key] = "" if value.lower() == "none" else value  # Java turns the check off with ""
        elif key == "ssl.keystore.location":
            out[key] = value
            out.setdefault("ssl.keystore.type", "PKCS12")  # librdkafka's key store is PKCS#12
        else:
            out[key] = value
    out.update(_client_certificate(side, props))
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


def _client_certificate(side: str, props: Mapping[str, str]) -> dict[str, str]:
    """The client certificate and key as a Java PEM key store (mTLS), or nothing."""
    chain = props.get("ssl.certificate.pem")
    if chain is None and "ssl.certificate.location" in props:
        chain = pem_file(side, "ssl.certificate.location", props["ssl.certificate.location"], "CERTIFICATE")
    key = props.get("ssl.key.pem")
    if key is None and "ssl.key.location" in props:
        key = pem_file(side, "ssl.key.location", props["ssl.key.location"], "PRIVATE KEY")
    if chain is None and key is None:
        return {}
    if chain is None or key is None:
        have, lacks = ("ssl.key.location", "ssl.certificate.location") if chain is None else (
            "ssl.certificate.location", "ssl.key.location")
        raise UsageError(f"clusters.{side}: {have} without {lacks}: a client certificate needs both",
                         fix=f"add {lacks} (PEM), or remove {have}")
    return {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": chain,
            "ssl.keystore.key": _pkcs8(side, key, props.get("ssl.key.password"))}


def _pkcs8(side: str, pem: str, password: str | None) -> str:
    """The key as PKCS#8 PEM, the only form Java's PEM key store reads (librdkafka also reads
    PKCS#1 and SEC1 keys); encrypted again with ssl.key.password when it was encrypted."""
    if "-----BEGIN PRIVATE KEY-----" in pem or "-----BEGIN ENCRYPTED PRIVATE KEY-----" in pem:
        return pem
    from cryptography.hazmat.primitives import serialization

    secret = password.encode() if password else None
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=secret)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"clusters.{side}.ssl.key.location: the private key cannot be read ({exc})",
                         fix="check ssl.key.password, or give the key as PEM (PKCS#8 or PKCS#1)") from None
    crypt: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(secret) if secret else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, crypt).decode()
