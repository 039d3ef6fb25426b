"""Tansu (a second Kafka implementation, crates.io `tansu` 0.6.0) as the sandbox's new cluster: it runs on
127.0.0.1 only and keeps its log across stop and start; the capability probe names what it lacks, each
answer checked; plan check, assess and the mirror say so before anything is written.

Marked `tansu`: it needs the binary scripts/tansu builds once per machine (CI's tansu lane runs it)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cutover.kafka import capabilities
from cutover.local.sandbox import Sandbox
from cutover.plan import load_plan
from tests.conftest import cutover
from tests.integration.conftest import shaped_sandbox
from tests.integration.kafka_util import produce
from tests.integration.listen_util import listening

pytestmark = pytest.mark.tansu

#: What Tansu 0.6.0 lacks, as its ApiVersions answer and the real probe found them.
LACKS = {"transactions": "ApiVersions lacks EndTxn", "describe-producers": "ApiVersions lacks DescribeProducers",
         "list-transactions": "ApiVersions lacks ListTransactions", "acls": "ApiVersions lacks DeleteAcls",
         "create-partitions": "ApiVersions lacks CreatePartitions",
         "new-consumer-groups": "ApiVersions lacks ConsumerGroupHeartbeat"}


@pytest.fixture(scope="module")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """Set CUTOVER_TEST_TANSU=DIR to reuse a sandbox of this shape that is up."""
    with shaped_sandbox(tmp_path_factory, "tansu", "--platform", "new=tansu", reuse_env="CUTOVER_TEST_TANSU",
                        timeout=300) as box:
        yield box


def _topics(props: dict[str, str]) -> set[str]:
    return set(AdminClient(dict(props)).list_topics(timeout=30).topics)


def _read(props: dict[str, str], topic: str, count: int) -> list[tuple[int, bytes | None, bytes | None, int,
                                                                         list[tuple[str, bytes]] | None]]:
    consumer = Consumer({**props, "group.id": f"read-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        for _ in range(200):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append((msg.offset(), msg.key(), msg.value(), msg.timestamp()[1], msg.headers()))
            if len(got) >= count:
                break
    finally:
        consumer.close()
    return got


def test_tansu_runs_as_the_new_cluster_on_loopback_and_keeps_its_log_across_a_restart(tansu: Sandbox,
                                                                                       ns: str) -> None:
    status = tansu.status()
    new = status["new"]
    assert (new["platform"], new["kafka_version"], new["running"], len(new["brokers"])) == ("tansu", "0.6.0", True, 1)
    assert status["old"]["platform"] == "kafka"
    assert {address for address, _port in listening(new["pid"])} == {"127.0.0.1"}
    props = dict(load_plan(tansu.plan_file).cluster("new"))
    admin = AdminClient(props)
    admin.create_topics([NewTopic(ns, 1, 1)])[ns].result(30)
    records = [{"key": f"k{i}".encode(), "value": f"v{i}".encode(), "timestamp": 1_700_000_000_000 + i,
                "headers": [("h", f"{i}".encode())], "partition": 0} for i in range(5)]
    produce(props, ns, records)
    want = [(i, f"k{i}".encode(), f"v{i}".encode(), 1_700_000_000_000 + i, [("h", f"{i}".encode())])
            for i in range(5)]
    assert _read(props, ns, 5) == want
    tansu.stop("new")
    assert not tansu.status()["new"]["running"]
    tansu.start("new")
    assert _read(props, ns, 5) == want  # the log in its SQLite file, kept


def test_the_probe_names_what_tansu_lacks_and_deletes_its_scratch_topic(tansu: Sandbox) -> None:
    props = dict(load_plan(tansu.plan_file).cluster("new"))
    report = capabilities.probe(props, "new", 30)
    assert {f.capability.name: f.evidence for f in report.missing()} == LACKS, [f.as_dict() for f in report.findings]
    assert report.get("read-committed").supported is None  # no transaction can be ended: nothing to hide
    assert report.get("headers").supported is True and report.get("timestamps").supported is True
    assert report.get("idempotent-producer").supported is True
    assert not [t for t in _topics(props) if t.startswith("__cutover-probe-")]


def test_plan_check_assess_and_the_mirror_name_the_missing_transactions_before_writing_anything(
        tansu: Sandbox) -> None:
    props = dict(load_plan(tansu.plan_file).cluster("new"))
    check = cutover("plan", "check", "--plan", str(tansu.plan_file), "-o", "json", timeout=120)
    found = [f for f in json.loads(check.out)["findings"] if f["check"] == "capabilities"]
    assert [f["problem"].split(":")[0] for f in found] == [
        "the new cluster lacks transactions (ApiVersions lacks EndTxn)"]
    assert check.code == 3
    before = _topics(props)
    mirror = cutover("mirror", "--plan", str(tansu.plan_file), "--until-caught-up", timeout=120)
    assert mirror.code == 3, mirror.err
    assert "cutover mirror cannot run on the new cluster: transactions: ApiVersions lacks EndTxn" in mirror.err
    assert "Traceback" not in mirror.err and "a bug in cutover" not in mirror.err
    assert _topics(props) == before  # no state topic, no target topic
    assess = json.loads(cutover("assess", "--plan", str(tansu.plan_file), "--sample", "0", "--probe", "0",
                                "-o", "json", timeout=300).out)
    row = next(r for r in assess["rows"] if r["key"] == "kafka-semantics")
    assert row["verdict"] == "blocker"
    reasons = [f["reason"] for f in row["findings"]]
    assert any(r.startswith("the new cluster lacks transactions (ApiVersions lacks EndTxn)") for r in reasons)
    assert any(r.startswith("the new cluster lacks acls (ApiVersions lacks DeleteAcls)") for r in reasons)
