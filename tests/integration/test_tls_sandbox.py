"""Clusters on TLS and on two Kafka releases: the old one on Kafka 3.9.1 with SASL_SSL (SCRAM
over TLS), the new one on Kafka 4.1.1 with mTLS (client certificates, principal = the
certificate's CN, ACLs enforced). Certificates come from a CA
the sandbox makes at `up`. The mirror, plan check, status and the shadow's Spark Kafka source
all go through them; no key material or password reaches an output."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import KafkaError, Producer

from cutover.local.sandbox import Sandbox
from cutover.plan import load_plan
from tests.conftest import cutover
from tests.integration.conftest import shaped_sandbox
from tests.integration.kafka_util import create_topic, produce, read_all
from tests.integration.mirror_util import mirror_a_topic_and_a_group, scoped_plan
from tests.integration.shadow_util import as_rec, produce_txn, rows


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    with shaped_sandbox(tmp_path_factory, "tls", "--security", "old=sasl_ssl", "--security", "new=mtls",
                        "--kafka-version", "old=3.9.1", timeout=300) as box:
        yield box


def _secrets(box: Sandbox) -> list[str]:
    return [line.split("=", 1)[1] for line in box.secrets_file.read_text().splitlines() if "=" in line]


def _key_material(box: Sandbox) -> list[str]:
    """The base64 body lines of every private key the sandbox made."""
    return [line for key in (box.dir / "tls").glob("*.key.pem") for line in key.read_text().splitlines()
            if line and not line.startswith("-----")]


def _leaks(box: Sandbox, *outputs: str) -> list[str]:
    text = "".join(outputs)
    return [s for s in _secrets(box) + _key_material(box) if s in text]


def test_certificates_keys_and_status(tls: Sandbox) -> None:
    folder = tls.dir / "tls"
    for name in ("old-broker", "new-broker", "new-admin", "new-reader"):
        for suffix in (".pem", ".key.pem", ".p12", ".jks"):
            assert (folder / f"{name}{suffix}").is_file(), f"{name}{suffix}"
        for private in (".key.pem", ".p12", ".jks"):
            assert stat.S_IMODE((folder / f"{name}{private}").stat().st_mode) == 0o600, f"{name}{private}"
    assert stat.S_IMODE((folder / "ca.key.pem").stat().st_mode) == 0o600
    assert (folder / "ca.pem").is_file() and (folder / "truststore.jks").is_file()
    assert stat.S_IMODE(tls.secrets_file.stat().st_mode) == 0o600
    assert "CUTOVER_SANDBOX_TLS_STORE_PASSWORD" in tls.secrets_file.read_text()
    assert not _leaks(tls, tls.plan_file.read_text())

    status = cutover("local", "status", "--dir", str(tls.dir), "-o", "json")
    assert status.code == 0, status.err
    assert status.json()["old"]["security"] == "SASL_SSL/SCRAM-SHA-256"
    assert status.json()["new"]["security"] == "SSL (client certificates required)"
    assert status.json()["new"]["users"] == ["admin", "reader"]
    assert (status.json()["old"]["kafka_version"], status.json()["new"]["kafka_version"]) == ("3.9.1", "4.1.1")
    assert "Kafka version: 3.9.1" in (tls.dir / "old" / "broker.log").read_text()
    assert "Kafka version: 4.1.1" in (tls.dir / "new" / "broker.log").read_text()
    create_topic(load_plan(tls.plan_file).cluster("old"), "checked.orders")  # an empty cluster: nothing to mirror
    check = cutover("plan", "check", "--plan", str(tls.plan_file), "-o", "json")
    assert check.code == 0, (check.out, check.err)
    assert not _leaks(tls, status.out, status.err, check.out, check.err)
    again = cutover("local", "up", "--security", "new=tls", "--dir", str(tls.dir))
    assert again.code == 2
    assert "already exists with different settings (new: mtls, Kafka 4.1.1, 1 broker(s))" in again.err
    newer = cutover("local", "up", "--kafka-version", "old=4.1.1", "--dir", str(tls.dir))
    assert newer.code == 2 and "(old: sasl_ssl, Kafka 3.9.1, 1 broker(s))" in newer.err
    unknown = cutover("local", "up", "--kafka-version", "old=2.8.0", "--dir", str(tls.dir))
    assert unknown.code == 2 and "'old=2.8.0'" in unknown.err and "3.9.1" in unknown.err


def test_the_api_list_is_read_over_sasl_ssl_and_mtls_as_the_plans_clients_connect(tls: Sandbox) -> None:
    """The capability probe's ApiVersions request goes over the plan's TLS (its CA, and the client
    certificate for mTLS), before any SASL: both clusters list every API cutover asks about."""
    from cutover.kafka import capabilities

    for side in ("old", "new"):
        report = capabilities.listed(load_plan(tls.plan_file).cluster(side), side, 10)
        assert report.apis is not None and [f.capability.name for f in report.missing()] == [], side


def test_a_client_certificate_is_the_principal_acls_apply(tls: Sandbox, ns: str) -> None:
    admin = load_plan(tls.plan_file).cluster("new")
    topic = f"{ns}.certs"
    create_topic(admin, topic, 1)
    produce(admin, topic, [{"key": b"k", "value": b"v"}])
    folder = tls.dir / "tls"
    reader = {**admin, "ssl.certificate.location": str(folder / "new-reader.pem"),
              "ssl.key.location": str(folder / "new-reader.key.pem")}
    assert [(r.key, r.value) for r in read_all(reader, topic)] == [(b"k", b"v")]
    failures: list[KafkaError] = []
    producer = Producer({**reader, "message.timeout.ms": 10000})
    producer.produce(topic, b"forbidden", on_delivery=lambda err, _m: failures.append(err))
    producer.flush(20)
    assert [e.code() for e in failures] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    # No certificate at all: the broker refuses the handshake.
    anonymous = {k: v for k, v in admin.items() if k not in ("ssl.certificate.location", "ssl.key.location")}
    run = cutover("plan", "check", "--plan", str(_plan_with(tls, ns, "new", anonymous)), "--timeout", "5",
                  timeout=60)
    assert run.code == 1 and "new cluster" in run.out, run.out + run.err


def _plan_with(box: Sandbox, ns: str, side: str, props: dict[str, str]) -> Path:
    data = yaml.safe_load(box.plan_file.read_text())
    data["clusters"][side] = props
    data["env_file"] = str(box.secrets_file)
    out = box.dir / f"{ns}-{side}.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def test_mirror_from_sasl_ssl_to_mtls_copies_records_and_groups_exactly(tls: Sandbox, tmp_path: Path,
                                                                        ns: str) -> None:
    outputs = mirror_a_topic_and_a_group(load_plan(tls.plan_file), scoped_plan(tls.plan_file, ns, tmp_path), ns,
                                         f"{ns}.orders")
    assert not _leaks(tls, *outputs)


@pytest.mark.slow  # a long scenario: CI runs it in a slow lane (.ci/run)
def test_shadow_reads_the_mtls_cluster_with_spark(tls: Sandbox, tmp_path: Path, ns: str) -> None:
    """Spark's Java Kafka client gets the client certificate as a PEM key store; neither it nor
    any password reaches the output or Spark's event log (what the history server shows)."""
    from tests.integration.shadow_util import shadow_plan

    topic, events = f"{ns}.events", tmp_path / "spark-events"
    events.mkdir()
    plan = shadow_plan(tls.plan_file, ns, tmp_path,
                       [{"topic": topic, "old": f"{ns}.old", "new": f"{ns}.events", "format": "raw"}],
                       conf={"spark.sql.shuffle.partitions": "4", "spark.eventLog.enabled": "true",
                             "spark.eventLog.dir": events.as_uri(), "spark.eventLog.compress": "false"})
    new = plan.cluster("new")
    create_topic(new, topic, 2)
    produce_txn(new, topic, f"{ns}-tx", [([{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 2}
                                           for i in range(30)], True)])
    run = cutover("shadow", "--plan", str(plan.file), "-o", "json", timeout=300)
    assert run.code == 0, run.err[-3000:]
    assert run.json()["tables"][0]["rows"] == 30
    assert [as_rec(r) for r in rows(plan, f"{ns}.events")] == read_all(new, topic, 2)
    assert not _leaks(tls, run.out, run.err)
    logged = [f.read_text(errors="replace") for f in events.rglob("*") if f.is_file()]
    for what in ("SparkListenerEnvironmentUpdate", "SparkListenerSQLExecutionStart", f"{ns}.events"):
        assert what in "".join(logged), what  # every property and each query's plan are in it
    assert not _leaks(tls, *logged)


def _other_ca(folder: Path) -> Path:
    from cutover.local import certs

    certs.ensure_ca(folder, "unused-store-password")
    return certs.ca_file(folder)


@pytest.mark.parametrize(("side", "change", "words"), [
    ("new", {"ssl.ca.location": "{tmp}/no-such/ca.pem"},
     ["clusters.new.ssl.ca.location: {tmp}/no-such/ca.pem does not exist", "fix: give the path of the PEM file"]),
    ("new", {"ssl.key.location": "{tmp}/ca.pem"},
     ["clusters.new.ssl.key.location: {tmp}/ca.pem holds no PEM private key"]),
    ("old", {"ssl.ca.location": "{other_ca}"},
     ["old cluster", "the broker's certificate is not trusted by ssl.ca.location ({other_ca})",
      "fix: point ssl.ca.location at the CA"]),
    ("new", {"ssl.certificate.location": None, "ssl.key.location": None},
     ["new cluster", "the broker requires a client certificate (mTLS) and the plan gives none",
      "fix: set ssl.certificate.location and ssl.key.location"]),
    ("old", {"security.protocol": "SASL_PLAINTEXT"},
     ["old cluster", "is a TLS listener and the plan's security.protocol is not", "fix: set security.protocol to SSL"]),
], ids=["missing-ca-file", "key-file-not-pem", "wrong-ca", "no-client-certificate", "plaintext-client"])
def test_bad_tls_settings_are_named_with_the_fix(tls: Sandbox, tmp_path: Path, ns: str, side: str,
                                                 change: dict[str, str | None], words: list[str]) -> None:
    other_ca = _other_ca(tmp_path / "other")
    (tmp_path / "ca.pem").write_text("not a key\n")
    fill = {"tmp": str(tmp_path), "other_ca": str(other_ca)}
    props = yaml.safe_load(tls.plan_file.read_text())["clusters"][side]
    for key, value in change.items():
        if value is None:
            props.pop(key, None)
        else:
            props[key] = value.format(**fill)
    # each is named at once; 20 s bounds it on a loaded machine, whose start took seconds of a 5 s --timeout
    run = cutover("plan", "check", "--plan", str(_plan_with(tls, ns, side, props)), "--timeout", "20", timeout=90)
    assert run.code == 1, run.out + run.err
    for w in words:
        assert w.format(**fill) in run.out, run.out
    assert "Traceback" not in run.err and not _leaks(tls, run.out, run.err)


def test_the_shadow_names_a_bad_client_key_before_spark_starts(tls: Sandbox, tmp_path: Path, ns: str) -> None:
    from cutover.plan import derive

    bad_key = tmp_path / "client.key"
    bad_key.write_text("-----BEGIN RSA PRIVATE KEY-----\nnot a key\n-----END RSA PRIVATE KEY-----\n")
    props = yaml.safe_load(tls.plan_file.read_text())["clusters"]["new"]
    props["ssl.key.location"] = str(bad_key)
    plan = derive(_plan_with(tls, ns, "new", props), tmp_path / "shadow.yaml", merge=True, name=ns,
                  tables=[{"topic": f"{ns}.t", "old": f"{ns}.old", "new": f"{ns}.new", "format": "raw"}])
    run = cutover("shadow", "--plan", str(plan.file), timeout=120)
    assert run.code != 0 and "starting Spark" not in run.err, run.err
    assert "clusters.new" in run.err and "fix:" in run.err and "Traceback" not in run.err, run.err
