"""Production-shaped clusters: three brokers each (replication factor 3, min.insync.replicas
2), SASL_SSL on both, the old cluster on Kafka 3.9.1 and the new one on 4.1.1. Partition
leaders and the mirror's transaction coordinator are SIGKILLed while the mirror copies live
transactional traffic, the target refuses writes below min.insync.replicas for a while, and
the new cluster is restarted broker by broker under the shadow; every record must still
arrive exactly once, and groups exactly translated.

Marked `production`: scripts/test leaves it out (it starts six more brokers), CI runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, load_plan
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


def _transaction_coordinator(props: Mapping[str, str], transactional_id: str) -> int:
    """The broker coordinating a transactional id: the leader of its __transaction_state
    partition (Java's String.hashCode, made non-negative, modulo the 5 partitions)."""
    h = 0
    for ch in transactional_id:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return _leader(props, "__transaction_state", (h & 0x7FFFFFFF) % 5)


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


def test_leaders_and_the_coordinator_killed_while_the_mirror_copies(three: Sandbox, tmp_path: Path, ns: str) -> None:
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
        txn_id = f"__cutover.mirror.forward.{ns}.shard-0-of-1"
        victims: list[tuple[str, Callable[[], int], str]] = [
            ("old", lambda: _leader(old, topic, 0), "the leader of partition 0"),
            ("new", lambda: _leader(new, topic, 0), "the leader of partition 0"),
            ("new", lambda: _transaction_coordinator(new, txn_id), "the mirror's transaction coordinator")]
        for side, find, what in victims:
            leader = find()  # asked at its turn: leaders move after each kill
            three.stop(side, kill=True, node=leader)  # SIGKILL, mid-transaction
            before = position(scoped)
            wait_for(lambda: position(scoped) > before + 100 or proc.poll() is not None, 240,  # noqa: B023
                     f"the mirror to go on copying with {side} broker {leader} ({what}) killed")
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


def _set_min_isr(props: Mapping[str, str], topic: str, value: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("min.insync.replicas", value, incremental_operation=AlterConfigOpType.SET)])
    client = AdminClient(dict(props))  # kept: the futures die with the client
    for fut in client.incremental_alter_configs([resource]).values():
        fut.result(timeout=30)


def test_target_refuses_writes_below_min_insync_replicas_then_recovers(three: Sandbox, tmp_path: Path,
                                                                       ns: str) -> None:
    """min.insync.replicas 3 on the target topic and one of its brokers down: every write to
    it is refused (NOT_ENOUGH_REPLICAS) until the broker is back; the mirror waits it out."""
    plan = load_plan(three.plan_file)
    old, new, topic = plan.cluster("old"), plan.cluster("new"), f"{ns}.isr"
    create_topic(old, topic, 2)
    scoped = scoped_plan(three.plan_file, ns, tmp_path)
    traffic = Traffic(old, topic, 2, seed=31, txn_id=f"{ns}-producer")
    traffic.round(40)
    assert cutover("mirror", "--plan", str(scoped), "--until-caught-up").code == 0
    _set_min_isr(new, topic, "3")  # not a copied config: the mirror leaves it as set here
    feed = Feed(traffic, records=20, pause=0.1)
    ready = tmp_path / "ready"
    proc = start_mirror(scoped, "--ready-file", str(ready))
    victim = 1 + (_leader(new, topic, 0) % 3)  # a follower: the partition keeps its leader
    try:
        wait_for(lambda: ready.exists() or proc.poll() is not None, 180, "the mirror to start copying")
        three.stop("new", kill=True, node=victim)
        stalled, sent = position(scoped), traffic.n
        wait_for(lambda: traffic.n > sent + 150, 120, "the source to move on while the target refuses writes")
        refused = position(scoped)
        # At most the transaction that was committing when the broker died gets through.
        assert refused <= stalled + 60, f"the target accepted writes below min.insync.replicas ({stalled} -> {refused})"
        assert proc.poll() is None, proc.communicate()
        three.start("new", node=victim)
        wait_for(lambda: position(scoped) > refused + 100, 240, "the mirror to go on once the ISR is back")
    finally:
        feed.finish()
        three.start("new", node=victim)  # (no-op when it runs) so the mirror can finish its transaction
        if proc.poll() is None:
            code, _out, err = stop(proc, timeout=180)
            assert code == 0, err[-3000:]
    run = cutover("mirror", "--plan", str(scoped), "--until-caught-up", "-o", "json", timeout=300)
    assert run.code == 0, run.err
    assert content(read_all(new, topic, 2, timeout=60)) == content(read_all(old, topic, 2, timeout=60))


def test_rolling_restart_of_the_new_cluster_under_the_shadow(three: Sandbox, tmp_path: Path, ns: str) -> None:
    from tests.integration.shadow_util import as_rec, kill_group, rows, shadow_plan, start_shadow

    topic = f"{ns}.events"
    plan = shadow_plan(three.plan_file, ns, tmp_path,
                       [{"topic": topic, "old": f"{ns}.old", "new": f"{ns}.events", "format": "raw"}])
    new = plan.cluster("new")
    create_topic(new, topic, 3)
    feed = Feed(Traffic(new, topic, 3, seed=41, txn_id=f"{ns}-producer"), records=10, pause=0.2)
    log = tmp_path / "shadow.log"
    proc = start_shadow(plan, log, "--follow")
    try:
        wait_for(lambda: _table_rows(plan, f"{ns}.events") > 50, 300, "the shadow's first rows")
        for node in (1, 2, 3):  # a rolling restart: one broker at a time, the next once it is back
            three.stop("new", node=node)
            before = _table_rows(plan, f"{ns}.events")
            wait_for(lambda: _table_rows(plan, f"{ns}.events") > before, 180,  # noqa: B023
                     f"the shadow to commit with broker {node} down")
            three.start("new", node=node)
        feed.finish()
        expected = read_all(new, topic, 3, timeout=60)
        wait_for(lambda: _table_rows(plan, f"{ns}.events") >= len(expected), 240, "the shadow to catch up")
        assert proc.poll() is None, log.read_text()[-3000:]
    finally:
        feed.finish()
        if proc.poll() is None:
            kill_group(proc)
    assert [as_rec(r) for r in rows(plan, f"{ns}.events")] == expected  # exactly once, field by field


def _table_rows(plan: Plan, table: str) -> int:
    from cutover.lake import tables
    from tests.integration.shadow_util import rows

    return len(rows(plan, table)) if tables.exists(plan, table) else 0


def test_the_demo_migrates_and_rolls_back_on_the_production_shape(three: Sandbox) -> None:
    """The README's demo path (full-migration runbook: mirror, shadow, verify, promote, live
    traffic on the new cluster, rollback carrying it back) on three brokers, TLS + SASL, old
    on Kafka 3.9.1 and new on 4.1.1."""
    from tests.integration.demo_util import run_demo

    run_demo(three.dir)
