"""Helpers for mirror tests: a plan scoped to one test's topics, traffic, and record comparison."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from confluent_kafka import OFFSET_STORED, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from cutover.plan import Plan, derive
from tests.integration.kafka_util import Rec, rec

BIG = 1_500_000  # bytes: above the 1 MB client and broker defaults
PRODUCER = {"message.max.bytes": 3_000_000, "linger.ms": 5}


def switch_marked(plan_file: Path, forward: Literal["open", "closed"] = "closed", action: str = "promote") -> None:
    """Mark the plan's forward mirror in its state on the new cluster as the switch does: closed by promote's
    drain-mirror step (what lets a reverse mirror run), open again by rollback's reopen-mirror step. For tests of
    the mirror alone: a whole promote costs a minute."""
    from cutover.mirror import state as st
    from cutover.plan import load_plan

    st.set_mark(load_plan(plan_file), forward, action, f"test-{action}")


def scoped_plan(plan_file: Path, ns: str, out: Path, **mirror: Any) -> Path:
    """The sandbox plan, restricted to this test's topics and groups, with its own name."""
    return derive(plan_file, out / f"{ns}.yaml", merge=True, name=ns, topics={"include": [f"{ns}\\..*"]},
                  groups={"include": [f"{ns}\\..*"]}, mirror={"group_sync_interval": "1s", **mirror}).file


def start_mirror(plan: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "cutover", "mirror", "--plan", str(plan), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM, timeout: float = 60) -> tuple[int, str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def content(records: list[Rec]) -> list[tuple[Any, ...]]:
    """What must survive the mirror, per record: everything but the offset."""
    return [(r.partition, r.key, r.value, r.headers, r.timestamp) for r in records]


class Traffic:
    """Random source traffic: committed and aborted transactions, null keys, tombstones, headers, big values."""

    def __init__(self, props: Mapping[str, str], topic: str, partitions: int, seed: int, txn_id: str) -> None:
        self.topic, self.partitions, self.rnd = topic, partitions, random.Random(seed)
        self.props, self.txn_id = props, txn_id
        self.plain = Producer({**props, **PRODUCER, "enable.idempotence": True})
        self.txn = self._transactional()
        self.aborted: list[tuple[int, int]] = []  # (partition, offset) of aborted records
        self.n = 0
        self.epoch_ms = int(time.time() * 1000) - 3_600_000  # an hour ago: explicit, and within retention

    def _record(self, big: bool = False) -> dict[str, Any]:
        self.n += 1
        r = self.rnd.random()
        key = None if r < 0.15 else f"k{self.rnd.randint(0, 40)}".encode()
        value = None if 0.15 <= r < 0.25 else (os.urandom(BIG) if big else f"v{self.n}-{r:.6f}".encode())
        headers = [("trace", f"{self.n}".encode()), ("dup", b"1"), ("dup", None)] if r > 0.5 else None
        return {"key": key, "value": value, "headers": headers, "partition": self.rnd.randrange(self.partitions),
                "timestamp": self.epoch_ms + self.n}

    def round(self, records: int = 20, big: bool = False) -> None:
        """Some plain records, one committed and maybe one aborted transaction."""
        for _ in range(records):
            self.plain.produce(self.topic, **self._record())
        if big:
            self.plain.produce(self.topic, **self._record(big=True))
        assert self.plain.flush(30) == 0
        for commit in (True, self.rnd.random() < 0.5):
            self.txn.begin_transaction()
            delivered: list[tuple[int, int]] = []
            on_delivery = lambda _e, m, into=delivered: into.append((m.partition(), m.offset()))  # noqa: E731
            for _ in range(self.rnd.randint(1, 8)):
                self.txn.produce(self.topic, on_delivery=on_delivery, **self._record())
            self.txn.flush(30)
            if commit and self._commit():
                continue
            self.txn.abort_transaction(120)
            self.aborted += delivered

    def _transactional(self) -> Producer:
        producer = Producer({**self.props, **PRODUCER, "transactional.id": self.txn_id})
        producer.init_transactions(60)
        return producer

    def recover(self) -> None:
        """After a failed round: abort what is open, or start a new transactional producer
        (same id, so it fences the old one) when this one cannot go on."""
        try:
            self.txn.abort_transaction(60)
        except KafkaException as exc:
            if exc.args[0].fatal() or not exc.args[0].retriable():
                self.txn = self._transactional()

    def _commit(self) -> bool:
        """Commit the open transaction; False when it must be aborted instead. A broker that
        dies under a transaction (a fault test) can hold a commit for a while: ask again."""
        deadline = time.monotonic() + 180
        while True:
            try:
                self.txn.commit_transaction(30)
                return True
            except KafkaException as exc:
                err = exc.args[0]
                if err.txn_requires_abort():
                    return False
                if not err.retriable() or time.monotonic() > deadline:
                    raise


class Feed:
    """Live traffic for fault tests: `Traffic.round()` in a background thread until `finish()`."""

    def __init__(self, traffic: Traffic, records: int = 40, pause: float = 0.05, steady: bool = False) -> None:
        self.traffic, self.records, self.pause = traffic, records, pause
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._run, daemon=True)]
        if steady:  # plain records beside the rounds, which a transaction stuck on a killed broker can stall
            self.threads.append(threading.Thread(target=self._steady, daemon=True))
        for t in self.threads:
            t.start()

    def _steady(self) -> None:
        """Plain records at a steady pace on their own idempotent producer: a broker killed under a
        transaction can hold the rounds for minutes (the transactional producer waits out its
        delivery timeout, then its abort), and a fault test needs records to flow meanwhile."""
        producer = Producer({**self.traffic.props, **PRODUCER, "enable.idempotence": True})
        rnd, n = random.Random(99), 0
        while not self.stop.is_set():
            n += 1
            with contextlib.suppress(KafkaException, BufferError):
                producer.produce(self.traffic.topic, value=b"steady %d" % n, key=b"k%d" % (n % 7),
                                 partition=rnd.randrange(self.traffic.partitions),
                                 timestamp=self.traffic.epoch_ms + n)
            producer.poll(0)
            self.stop.wait(self.pause)
        producer.flush(30)

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.traffic.round(self.records)
            except (KafkaException, AssertionError) as exc:
                # A broker killed under the traffic (a fault test): records not acknowledged
                # are simply not part of the source; the next round goes on.
                self.errors.append(str(exc))
                with contextlib.suppress(KafkaException):
                    self.traffic.recover()
                self.stop.wait(1)
            self.stop.wait(self.pause)

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)


def first_record(props: Mapping[str, str], group: str, topic: str, partition: int,
                 timeout: float = 20) -> Rec | None:
    """The record a member of `group` reads first on this partition (None at the end)."""
    consumer = Consumer({**props, "group.id": group, "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed", "auto.offset.reset": "error"})
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_STORED)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is None:
                return rec(msg)
            if err.code() == KafkaError._PARTITION_EOF:
                return None
            raise AssertionError(f"{group} on {topic}/{partition}: {err.str()}")
        raise AssertionError(f"{group} on {topic}/{partition}: nothing read within {timeout}s")
    finally:
        consumer.close()


def commit(props: Mapping[str, str], group: str, offsets: Mapping[tuple[str, int], int],
           timeout: float = 60) -> None:
    """Commit a group's offsets, again while the broker answers that its coordinator is moving or still
    loading (a sandbox just started: CI saw COORDINATOR_LOAD_IN_PROGRESS in the first test after one)."""
    from cutover.kafka.offsets import again_while_transient

    consumer = Consumer({**props, "group.id": group, "enable.auto.commit": False})
    chosen = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
    try:
        again_while_transient(lambda: consumer.commit(offsets=chosen, asynchronous=False), timeout,
                              lambda: time.sleep(0.2))
    finally:
        consumer.close()


def mirror_a_topic_and_a_group(admin: Plan, mirror_plan: Path, ns: str, topic: str) -> list[str]:
    """Produce 40 records (with headers) and a group on the old cluster, mirror until caught
    up, and check every record field by field and the group's exact position on the new
    cluster; returns the commands' outputs (for leak checks)."""
    from tests.conftest import cutover
    from tests.integration.kafka_util import create_topic, produce, read_all

    old, new = admin.cluster("old"), admin.cluster("new")
    create_topic(old, topic, partitions=2)
    produce(old, topic, [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 2,
                          "headers": [("h", b"%d" % i)]} for i in range(40)])
    commit(old, f"{ns}.app", {(topic, 0): 7, (topic, 1): 12})
    run = cutover("mirror", "--plan", str(mirror_plan), "--until-caught-up", "-o", "json")
    assert run.code == 0, run.err
    assert content(read_all(new, topic, 2)) == content(read_all(old, topic, 2))
    for p in (0, 1):
        on_old, on_new = first_record(old, f"{ns}.app", topic, p), first_record(new, f"{ns}.app", topic, p)
        assert on_old and on_new and content([on_old]) == content([on_new])
    status = cutover("mirror", "status", "--plan", str(mirror_plan), "-o", "json")
    assert status.code == 0 and status.json()["lag"] == 0
    return [run.out, run.err, status.out, status.err]


def position(plan_file: Path) -> int:
    """How many source offsets the mirror has committed progress for, over all partitions."""
    from tests.conftest import cutover

    run = cutover("mirror", "status", "--plan", str(plan_file), "-o", "json")
    return sum(p["position"] or 0 for p in run.json()["partitions"]) if run.code == 0 else 0


def killed_at_random_moments(plan_file: Path, ns: str, tmp: Path, kills: int = 10, pause: float = 0,
                             **mirror: Any) -> int:
    """The randomized exactly-once test: transactional traffic (committed and aborted, tombstones,
    headers, big values) flows into a topic on the old cluster while the mirror is SIGKILLed at
    random moments `kills` times; one last run catches up, and the new cluster must then hold
    the old one's records exactly, field by field, each once. `mirror`: plan keys of the mirror (its mode).
    Returns how many starts found records a killed process had written beyond its progress (idempotent mode).
    `pause`: seconds between the traffic's rounds of 40 records (0: as fast as it goes)."""
    from cutover.plan import load_plan
    from tests.conftest import cutover, wait_for
    from tests.integration.kafka_util import create_topic, read_all

    scoped = scoped_plan(plan_file, ns, tmp, **mirror)
    plan = load_plan(scoped)
    old, topic = plan.cluster("old"), f"{ns}.orders"
    found = 0
    create_topic(old, topic, 4)
    feed = Feed(Traffic(old, topic, 4, seed=11, txn_id=f"{ns}-producer"), pause=pause)
    rnd, killed, proc = random.Random(3), 0, None
    try:
        while killed < kills:
            ready = tmp / f"ready-{killed}"
            proc = start_mirror(scoped, "--ready-file", str(ready))
            wait_for(lambda: ready.exists() or proc.poll() is not None, 120, "the mirror to start copying")  # noqa: B023
            try:
                proc.wait(timeout=rnd.uniform(0.3, 2.5))  # a random moment while it copies
            except subprocess.TimeoutExpired:
                proc.kill()
                found += "a batch cut short left" in proc.communicate(timeout=30)[1]
                killed += 1
            else:
                raise AssertionError(f"the mirror exited by itself: {proc.communicate()}")
        assert position(scoped) > 0, "no progress was committed between the kills"
    finally:
        feed.finish()
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    run = cutover("mirror", "--plan", str(scoped), "--until-caught-up", "-o", "json")
    assert run.code == 0, run.err
    source, target = read_all(old, topic, 4, timeout=60), read_all(plan.cluster("new"), topic, 4, timeout=60)
    assert len(source) > 500
    assert content(target) == content(source)
    return found + ("a batch cut short left" in run.err)
