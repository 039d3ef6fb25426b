"""Production-shaped clusters: three brokers each (replication factor 3, min.insync.replicas
2), SASL_SSL on both, the old cluster on Kafka 3.9.1 and the new one on 4.1.1. Partition
leaders are SIGKILLed on both clusters while the mirror copies live transactional traffic;
every record must still be on the new cluster exactly once, and groups exactly translated.

Marked `production`: scripts/test leaves it out (it starts six more brokers), CI runs it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from cutover.local.sandbox import Sandbox
from cutover.plan import load_plan
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic, read_all
from tests.integration.mirror_util import (
    Feed,
    Traffic,
    commit,
    content,
    first_record,
    position,
    scoped_plan,
    start_mirror,
    stop,
)

pytestmark = pytest.mark.production


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    box = Sandbox(tmp_path_factory.mktemp("three"))
    run = cutover("local", "up", "--brokers", "old=3", "--brokers", "new=3", "--kafka-version", "old=3.9.1",
                  "--security", "old=sasl_ssl", "--security", "new=sasl_ssl", "--dir", str(box.dir), timeout=600)
    assert run.code == 0, run.err
    yield box
    box.down()


def _leader(props: Mapping[str, str], topic: str, partition: int) -> int:
    meta = AdminClient(dict(props)).list_topics(topic, timeout=20)
    return int(meta.topics[topic].partitions[partition].leader)


def test_every_broker_is_listed_and_topics_default_to_three_replicas(three: Sandbox, ns: str) -> None:
    status = cutover("local", "status", "--dir", str(three.dir), "-o", "json")
    assert status.code == 0, status.err
    for side, version in (("old", "3.9.1"), ("new", "4.1.1")):
        c = status.json()[side]
        assert [b["broker"] for b in c["brokers"]] == [1, 2, 3] and all(b["running"] for b in c["brokers"])
        assert c["bootstrap"] == ",".join(b["bootstrap"] for b in c["brokers"])
        assert (c["kafka_version"], c["security"]) == (version, "SASL_SSL/SCRAM-SHA-256")
    assert "broker 3" in cutover("local", "status", "--dir", str(three.dir)).out
    plan = load_plan(three.plan_file)
    assert plan.spec.mirror.replication_factor == 3
    old, topic = plan.cluster("old"), f"{ns}.replicated"
    create_topic(old, topic, 2)
    client = AdminClient(dict(old))
    meta = client.list_topics(topic, timeout=20).topics[topic]
    assert all(len(p.replicas) == 3 for p in meta.partitions.values())

    def min_isr() -> str | None:  # a broker may not know the new topic yet: ask again
        try:
            configs = client.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
            return str(next(iter(configs.values())).result(timeout=20)["min.insync.replicas"].value)
        except KafkaException:
            return None

    assert wait_for(min_isr, 30, f"{topic}'s configs") == "2"
    missing = cutover("local", "stop", "old", "--broker", "4", "--dir", str(three.dir))
    assert missing.code == 2 and "the old cluster has no broker 4: it has 3" in missing.err


def test_leaders_killed_on_both_clusters_while_the_mirror_copies(three: Sandbox, tmp_path: Path, ns: str) -> None:
    plan = load_plan(three.plan_file)
    old, new, topic = plan.cluster("old"), plan.cluster("new"), f"{ns}.orders"
    create_topic(old, topic, 3)
    scoped = scoped_plan(three.plan_file, ns, tmp_path)
    feed = Feed(Traffic(old, topic, 3, seed=21, txn_id=f"{ns}-producer"), records=30, pause=0.1)
    ready = tmp_path / "ready"
    proc = start_mirror(scoped, "--ready-file", str(ready))
    stops: list[str] = []
    try:
        wait_for(lambda: ready.exists() or proc.poll() is not None, 180, "the mirror to start copying")
        wait_for(lambda: position(scoped) > 100, 180, "the mirror to copy the first records")
        for side, props in (("old", old), ("new", new)):
            leader = _leader(props, topic, 0)
            three.stop(side, kill=True, node=leader)  # SIGKILL, mid-transaction on both sides
            before = position(scoped)
            wait_for(lambda: position(scoped) > before + 100 or proc.poll() is not None, 240,  # noqa: B023
                     f"the mirror to go on copying with {side} broker {leader} killed")
            if proc.poll() is not None:  # where it must stop: a clear message, and a clean restart
                code, _out, err = stop(proc)
                stops.append(f"{side}: exit {code}: {err[-2000:]}")
                assert code in (1, 3) and "Traceback" not in err, stops[-1]
                ready.unlink(missing_ok=True)
                proc = start_mirror(scoped, "--ready-file", str(ready))
            three.start(side, node=leader)
    finally:
        feed.finish()
        if proc.poll() is None:
            code, _out, err = stop(proc, timeout=120)
            assert code == 0, err[-3000:]
    source = read_all(old, topic, 3, timeout=60)
    for p in range(3):  # a group part-way through each partition
        commit(old, f"{ns}.app", {(topic, p): len([r for r in source if r.partition == p]) // 2})
    run = cutover("mirror", "--plan", str(scoped), "--until-caught-up", "-o", "json", timeout=300)
    assert run.code == 0, run.err
    source, target = read_all(old, topic, 3, timeout=60), read_all(new, topic, 3, timeout=60)
    assert len(source) > 300
    assert content(target) == content(source)  # every record once, in order, field by field
    for p in range(3):
        on_old, on_new = first_record(old, f"{ns}.app", topic, p), first_record(new, f"{ns}.app", topic, p)
        assert on_old is not None and on_new is not None and content([on_old]) == content([on_new])
    print("mirror stops during the faults:", stops or "none")
