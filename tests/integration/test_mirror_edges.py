"""cutover mirror at the edges production reaches: a shard that died inside a transaction, a
source log that went backwards, topics that change while the mirror runs. Real brokers."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer

from cutover.local.sandbox import Sandbox
from cutover.mirror import state as st
from cutover.mirror.copier import transactional_id
from cutover.mirror.shard import Shard
from cutover.plan import Plan, load_plan
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic, produce, read_all
from tests.integration.mirror_util import content, scoped_plan, start_mirror, stop

#: A process that opens a transaction on the mirror's state topics as a shard does, writes its
#: state record, and is then SIGKILLed before it commits: a shard that died mid-transaction.
ZOMBIE = """
import json, sys
from confluent_kafka import Producer
props, txn_id, topics, key = json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
p = Producer({**props, "transactional.id": txn_id, "transaction.timeout.ms": 6000})
p.init_transactions(30)
p.begin_transaction()
for t in topics:
    p.produce(t, key=key.encode(), value=json.dumps({"v": 2, "p": []}).encode(), partition=0)
assert p.flush(30) == 0
print("open", flush=True)
sys.stdin.read()  # holds the transaction open until it is killed
"""


def _count(props: dict[str, str], topic: str, partitions: int) -> int:
    """Records in a topic now; -1 while the topic is not there yet (the mirror is creating it)."""
    try:
        return len(read_all(props, topic, partitions, timeout=10))
    except KafkaException:
        return -1


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_a_shard_that_died_mid_transaction_does_not_hide_another_shards_progress(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    old, new, topic = plan.cluster("old"), plan.cluster("new"), f"{ns}.orders"
    create_topic(old, topic, 4)
    me = next(Shard(i, 2) for i in (0, 1) if Shard(i, 2).owns(topic, 0))
    other = Shard(1 - me.index, 2)
    mine = [p for p in range(4) if me.owns(topic, p)]
    produce(old, topic, [{"value": b"a%d" % i, "partition": mine[i % len(mine)]} for i in range(60)])
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path)
    ready = tmp_path / "ready"
    running = start_mirror(scoped, "--shard", str(me), "--ready-file", str(ready))
    wait_for(lambda: ready.exists() or running.poll() is not None, 120, "the shard to start copying")
    wait_for(lambda: _count(new, topic, 4) == 60, 60, "the shard to copy the first records")

    # The other shard dies with a transaction open on the state topics (its records and its progress in it).
    rt = st.route(load_plan(scoped))
    source = json.loads(cutover("mirror", "status", "--plan", str(scoped), "-o", "json").out)["source_cluster"]
    zombie = subprocess.Popen(
        [sys.executable, "-c", ZOMBIE, json.dumps(new), transactional_id(rt, ns, other),
         json.dumps([rt.offsets_topic, rt.progress_topic]), json.dumps(["delta", source, str(other), 0])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert zombie.stdout is not None and zombie.stdout.readline().strip() == "open"
    finally:
        zombie.kill()
        zombie.wait(30)

    # The running shard goes on copying and commits its progress behind the open transaction ...
    produce(old, topic, [{"value": b"b%d" % i, "partition": mine[i % len(mine)]} for i in range(60)])
    wait_for(lambda: _count(new, topic, 4) == 120, 60, "the shard to copy the later records")
    code, _out, err = stop(running)
    assert code == 0, err
    # ... and restarts while that transaction is still open: it must read its own progress to the end.
    again = cutover("mirror", "--plan", str(scoped), "--shard", str(me), "--until-caught-up", "-o", "json")
    assert again.code == 0, again.err
    assert again.json()["records"] == 0, "the restart copied records again: it read stale progress"
    assert content(read_all(new, topic, 4)) == content(read_all(old, topic, 4))


def test_a_source_log_that_went_backwards_stops_the_mirror_instead_of_copying_again(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    """A position beyond the log end (a recreated topic, an unclean leader election) is not retention."""
    from confluent_kafka.admin import AdminClient

    old, new, topic = plan.cluster("old"), plan.cluster("new"), f"{ns}.orders"
    create_topic(old, topic, 1)
    produce(old, topic, [{"value": b"first life %d" % i} for i in range(10)])
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path)
    assert cutover("mirror", "--plan", str(scoped), "--until-caught-up").code == 0
    admin = AdminClient(old)
    admin.delete_topics([topic])[topic].result(30)
    wait_for(lambda: topic not in admin.list_topics(timeout=10).topics, 60, "the topic to be deleted")
    wait_for(lambda: _recreated(old, topic), 60, "the topic to be created again")
    produce(old, topic, [{"value": b"second life %d" % i} for i in range(3)])

    run = cutover("mirror", "--plan", str(scoped), "--until-caught-up")
    assert run.code == 1, run.err
    assert f"{topic} partition 0: the mirror's position 10 is beyond the source's log end 3" in run.err
    assert "recreated" in run.err and "unclean leader election" in run.err and "Traceback" not in run.err
    assert [r.value for r in read_all(new, topic, 1)] == [b"first life %d" % i for i in range(10)]
    status = cutover("mirror", "status", "--plan", str(scoped), "-o", "json").json()
    assert status["gaps"] == []  # nothing was reported as lost to retention


def _recreated(props: dict[str, str], topic: str) -> bool:
    try:
        create_topic(props, topic, 1)
        return True
    except KafkaException:  # still being deleted
        return False


def test_topics_that_grow_or_change_configs_while_the_mirror_runs_are_followed_by_any_shard(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        ResourceType,
    )

    old, new, topic = plan.cluster("old"), plan.cluster("new"), f"{ns}.orders"
    create_topic(old, topic, 1)
    owner = next(Shard(i, 2) for i in (0, 1) if Shard(i, 2).owns(topic, 0))
    other = Shard(1 - owner.index, 2)  # owns none of the topic's partitions yet
    produce(old, topic, [{"value": b"one %d" % i} for i in range(5)])
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path)
    first = cutover("mirror", "--plan", str(scoped), "--shard", str(owner), "--until-caught-up")
    assert first.code == 0, first.err
    ready = tmp_path / "ready"
    running = start_mirror(scoped, "--shard", str(other), "--ready-file", str(ready))
    try:
        wait_for(lambda: ready.exists() or running.poll() is not None, 120, "the other shard to start")
        source, target = AdminClient(old), AdminClient(new)
        res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.ms", "12345678", incremental_operation=AlterConfigOpType.SET)])
        source.incremental_alter_configs([res])[res].result(30)

        def retention() -> str | None:
            described = target.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
            return next(iter(described.values())).result(30)["retention.ms"].value

        wait_for(lambda: retention() == "12345678", 60, "the running mirror to follow the config change")
        source.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
        wait_for(lambda: len(target.list_topics(timeout=10).topics[topic].partitions) == 4 or
                 running.poll() is not None, 60, "the running shard to grow the target topic")
        assert running.poll() is None, running.communicate()[1]
        produce(old, topic, [{"value": b"two %d" % i, "partition": i % 4} for i in range(20)])
        mine = [p for p in range(4) if other.owns(topic, p)]
        wait_for(lambda: _count_in(new, topic, mine) == 5 * len(mine), 60, "the running shard to copy its partitions")
    finally:
        code, _out, err = stop(running)
    assert code == 0, err
    assert cutover("mirror", "--plan", str(scoped), "--shard", str(owner), "--until-caught-up").code == 0
    assert content(read_all(new, topic, 4)) == content(read_all(old, topic, 4))


def _count_in(props: dict[str, str], topic: str, partitions: list[int]) -> int:
    return sum(1 for r in read_all(props, topic, 4) if r.partition in partitions)


class _Interleaving:
    """The mirror's real transactional producer, and another writer that puts one record on the target
    partition right after the mirror's second record of its first batch (flushed, so it lands between
    them): the only way a hole opens inside the mirror's range."""

    def __init__(self, real: Any, intruder: Producer, topic: str) -> None:
        self.real, self.intruder, self.topic, self.sent = real, intruder, topic, 0

    def produce(self, topic: str, *args: Any, **kwargs: Any) -> None:
        self.real.produce(topic, *args, **kwargs)
        self.sent += 1
        if self.sent == 2 and topic == self.topic:
            self.real.flush(30)
            self.intruder.produce(topic, value=b"intruder", partition=0)
            assert self.intruder.flush(30) == 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_another_writers_record_inside_a_batchs_range_makes_the_mirror_learn_every_offset(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A batch is written learning only each partition's first and last target offset; a record of
    another writer between them (a hole in the range) must not shift the map: the transaction is
    aborted and the batch written again with every record's offset."""
    from cutover.kafka.clients import ClusterRef
    from cutover.kafka.inspect import cluster_id
    from cutover.mirror import copier, runner

    old, new, topic = plan.cluster("old"), plan.cluster("new"), f"{ns}.intruded"
    create_topic(old, topic, 1)
    produce(old, topic, [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": 0} for i in range(200)])
    scoped = load_plan(scoped_plan(sandbox.plan_file, ns, tmp_path))
    intruder = Producer(new)

    class Intruded(copier.Copier):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.producer = _Interleaving(self.producer, intruder, topic)  # type: ignore[assignment]

    monkeypatch.setattr(runner, "Copier", Intruded)
    with caplog.at_level(logging.INFO, "cutover.mirror"):
        summary = runner.run(scoped, runner.Options(until_caught_up=True), threading.Event())
    assert summary.records == 200

    on_new = read_all(new, topic)
    assert [r.value for r in on_new] == [b"intruder"] + [b"v%d" % i for i in range(200)]
    at = {r.value: r.offset for r in on_new}
    rt = st.route(scoped, "forward")
    pm = st.load(rt, cluster_id(ClusterRef("old", old), 30)).partitions[(topic, 0)]
    assert [pm.translate(o) for o in range(200)] == [at[b"v%d" % o] for o in range(200)]
    assert pm.translate(200) == at[b"v199"] + 1
    assert "are not one range" in caplog.text  # the hole was seen, not stepped over


def test_a_catch_up_run_ends_at_its_goal_instead_of_waiting_out_the_batch_time(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    """A catch-up run (and the switch's drain, which is one) knows where it stops: its reads end once
    every partition reached the end offsets seen at its start. With a 600 s batch time, a run that
    waited out its partial batches would not finish within the deadline."""
    from cutover.mirror import runner

    old, new, topic = plan.cluster("old"), plan.cluster("new"), f"{ns}.goal"
    create_topic(old, topic, 3)
    sent = [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 3, "headers": [("h", b"%d" % i)]}
            for i in range(30)]
    produce(old, topic, sent)
    scoped = load_plan(scoped_plan(sandbox.plan_file, ns, tmp_path))
    done: list[runner.RunSummary] = []
    stop = threading.Event()
    worker = threading.Thread(target=lambda: done.append(runner.run(
        scoped, runner.Options(until_caught_up=True, batch_seconds=600), stop)), daemon=True)
    worker.start()
    try:
        wait_for(lambda: bool(done) or not worker.is_alive(), 120, "the catch-up run to end at its goal")
    finally:
        stop.set()
    assert done and done[0].records == 30
    assert content(read_all(new, topic, 3)) == content(read_all(old, topic, 3))


def test_a_batch_keeps_to_its_bytes_bound(plan: Plan, tmp_path: Path, ns: str, sandbox: Sandbox) -> None:
    """One consume call takes whatever the consumer has queued (up to 256 MB); the copier asks for
    only as many records as the bytes left allow at the records' mean size, so a transaction holds
    about `batch_bytes`, not everything queued."""
    from cutover.mirror import state as st
    from cutover.mirror.copier import Copier
    from cutover.mirror.offsetmap import PartitionMap

    old, topic = plan.cluster("old"), f"{ns}.bounded"
    create_topic(old, topic, 1)
    produce(old, topic, [{"key": b"k%d" % i, "value": b"%04d" % i + b"x" * 9_996, "partition": 0}
                         for i in range(200)])  # 10,000-byte values, 2 MB in all
    scoped = load_plan(scoped_plan(sandbox.plan_file, ns, tmp_path))
    copier = Copier(st.route(scoped, "forward"), f"{ns}.reader-test", Shard(), 1_000_000)
    try:
        copier.assign("test", {(topic, 0): PartitionMap(start_src=0, next_src=0, next_tgt=0)})
        first = copier.read(5, 1 << 30, 30)  # learns the records' size
        assert [m.offset() for m in first.messages] == [0, 1, 2, 3, 4]
        wait_for(lambda: copier.consumer.get_watermark_offsets(  # everything is queued by now
            copier.consumer.assignment()[0], cached=True)[1] == 200, 30, "the consumer to see all 200")
        second = copier.read(10_000, 100_000, 30)
        offsets = [m.offset() for m in second.messages]
        assert offsets == list(range(5, 5 + len(offsets)))
        assert 100_000 <= second.nbytes < 110_000, second.nbytes  # the bound, overshot by less than a record
        assert [m.value()[:4] for m in second.messages] == [b"%04d" % o for o in offsets]
    finally:
        copier.close()


def test_a_running_mirrors_view_of_its_progress_topic_reads_only_what_was_committed_since(
        sandbox: Sandbox, tmp_path: Path, ns: str) -> None:
    """At every group sync a running mirror asks its progress topic for the switch's marks and the topics
    it owns. The first read folds the topic from its start; each later one reads only what was committed
    since; a topic deleted and made again (shorter than what was read) is read from its start."""
    from confluent_kafka.admin import AdminClient

    scoped = load_plan(scoped_plan(sandbox.plan_file, ns, tmp_path, state_prefix=f"{ns}-state"))
    rt = st.route(scoped, "forward")
    st.ensure_topics(rt, 1)
    st.note(rt, [st.created_record("src", f"{ns}.a", 3), st.created_record("src", f"{ns}.b", 1),
                 st.created_record("elsewhere", f"{ns}.c", 1),
                 st.mark_record("src", ns, "open", "rollback", "r1")])
    reader = st.ProgressReader(rt, "src")
    first = reader.overview()
    assert first.topics == {f"{ns}.a", f"{ns}.b"} and first.marks[ns]["forward"] == "open"
    assert reader.records_read == 4
    assert reader.overview().marks[ns]["forward"] == "open" and reader.records_read == 4  # nothing new: none read
    st.note(rt, [st.mark_record("src", ns, "closed", "promote", "p1")])
    closed = reader.overview()
    assert closed.marks[ns] == {**closed.marks[ns], "forward": "closed", "action": "promote", "run": "p1"}
    assert closed.topics == first.topics and reader.records_read == 5  # the one record written since
    client = AdminClient(dict(scoped.cluster("new")))
    client.delete_topics([rt.progress_topic])[rt.progress_topic].result(30)
    wait_for(lambda: rt.progress_topic not in client.list_topics(timeout=10).topics, 30, "the topic to go")
    st.ensure_topics(rt, 1)  # made again, with one record: shorter than the five read
    st.note(rt, [st.created_record("src", f"{ns}.d", 2)])
    again = reader.overview()
    assert again.topics == {f"{ns}.d"} and again.marks == {}, again  # read from its start: nothing of before
    assert reader.records_read == 6
    client.delete_topics([rt.progress_topic])[rt.progress_topic].result(30)
    wait_for(lambda: rt.progress_topic not in client.list_topics(timeout=10).topics, 30, "the topic to go")
    assert reader.overview() == st.Overview()  # absent: nothing


@pytest.mark.slow  # 3,400 topics on each cluster: CI runs it in its slow lane
def test_a_selection_that_makes_more_metadata_records_than_one_request_takes_is_created(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    """A KRaft controller refuses whole a request that makes more than 10,000 metadata records, with
    POLICY_VIOLATION. Creating a topic makes one record for the topic, one a partition and one a config: the
    mirror's 3,400 topics of one partition (and one config) make 10,200 (three partitions each made 17,000, for
    the same proof at three times the brokers' work). The broker answers NOT_LEADER for the partitions it has
    not made yet. A mirror whose selection
    makes more than one request takes creates every topic, waits until the new cluster has made them, and
    copies their records."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from cutover.kafka import batches

    old, new = plan.cluster("old"), plan.cluster("new")
    topics = [f"{ns}.t{i:04d}" for i in range(3400)]
    admin = AdminClient(old)
    for request in batches.split([NewTopic(t, 1, -1) for t in topics], batches.topic_records):
        for fut in admin.create_topics(request).values():
            fut.result(60)
    wait_for(lambda: _answers_offsets(old, topics, 1), 180, "the old cluster to lead all 3,400 partitions")
    placed = [(topics[0], 0), (topics[1700], 0), (topics[-1], 0)]
    for t, p in placed:
        produce(old, t, [{"key": b"k", "value": t.encode(), "partition": p, "headers": [("h", b"1")]}])
    try:
        run = cutover("mirror", "--plan", str(scoped_plan(sandbox.plan_file, ns, tmp_path)), "--until-caught-up",
                      "-o", "json")
        assert run.code == 0, run.err
        assert run.json()["records"] == 3
        listed = AdminClient(new).list_topics(timeout=30).topics
        assert sorted(t for t in listed if t.startswith(f"{ns}.")) == topics
        assert all(len(listed[t].partitions) == 1 for t in topics)

        def first(props: dict[str, str], t: str, p: int) -> tuple[Any, ...]:
            c = Consumer({**props, "group.id": f"{ns}-read", "enable.auto.commit": False,
                          "isolation.level": "read_committed"})
            c.assign([TopicPartition(t, p, 0)])
            try:
                got: list[Any] = []
                wait_for(lambda: bool(got.extend(m for m in c.consume(1, 1.0) if m.error() is None) or got),
                         60, f"a record in {t}/{p} on {props['bootstrap.servers']}")
                m = got[0]
                return m.topic(), m.partition(), m.key(), m.value(), m.headers(), m.timestamp()
            finally:
                c.close()
        assert [first(new, t, p) for t, p in placed] == [first(old, t, p) for t, p in placed]
    finally:
        for props in (old, new):
            AdminClient(props).delete_topics(topics, operation_timeout=60)


def _answers_offsets(props: dict[str, str], topics: list[str], partitions: int) -> bool:
    """Whether the cluster answers the end offset of every partition of the topics within 15 s (a partition it
    was just told to create answers NOT_LEADER until its broker has made its log). A new client each time: one
    that asked too early keeps its stale metadata."""
    import concurrent.futures

    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    asked = {TopicPartition(t, p): OffsetSpec.latest() for t in topics for p in range(partitions)}
    client = AdminClient(props)
    client.list_topics(timeout=10)  # a cold client's ListOffsets of thousands of topics went unanswered
    futures = list(client.list_offsets(asked, request_timeout=10).values())
    answered, waiting = concurrent.futures.wait(futures, timeout=15)
    return not waiting and all(f.exception() is None for f in answered)
