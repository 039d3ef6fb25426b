"""Sample traffic for drills and the demo: an orders and payments event generator, and a consumer group.

The producer writes JSON events keyed by customer, with headers, mostly plain and
every tenth batch in a transaction (one in five of those aborted: their records are
never part of the ledger). The consumer takes records in batches, commits each batch, and only
then counts its records as processed, so its group's committed offset is always exactly what
it processed: a batch whose commit fails is read again, not counted twice.

Both follow the routing file (the cluster the switch says is active) and obey control
files that the switch's hooks write in the drill's folder: `pause` (the producer
flushes, acknowledges with `producer.paused`, waits, then reconnects to the routed
cluster) and `stop` (the consumer commits, leaves its group, acknowledges with
`consumer.stopped`, waits, then rejoins on the routed cluster).
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from cutover.drill import codec
from cutover.drill.codec import Codec
from cutover.errors import CutoverError
from cutover.kafka.clients import ClusterRef
from cutover.kafka.offsets import again_while_transient
from cutover.plan import Plan
from cutover.switch import routing


@dataclass(frozen=True)
class Sent:
    cluster: str
    topic: str
    partition: int
    offset: int
    seq: int


def event(topic: str, seq: int, version: int = 1, encoding: Codec | None = None,
          json_keys: bool = False) -> tuple[bytes, bytes, list[Any]]:
    """One sample record (key, value, headers) of `topic`, with this sequence number."""
    return _event(topic, seq, random.Random(seq), version, encoding or codec.JsonCodec(), json_keys)


def _event(topic: str, seq: int, rnd: random.Random, version: int,
           encoding: Codec, json_keys: bool = False) -> tuple[bytes, bytes, list[Any]]:
    """`json_keys`: the key as a JSON string (`"c042"`), for a platform whose tables read keys as JSON (Tansu)."""
    customer = f"c{rnd.randint(1, 50):03d}"
    if topic.endswith("payments"):
        body: dict[str, Any] = {"seq": seq, "payment_id": f"p{seq}", "order_id": f"o{rnd.randint(1, 10**6)}",
                                "amount": round(rnd.uniform(1, 500), 2), "method": rnd.choice(["card", "sepa"])}
    else:
        body = {"seq": seq, "order_id": f"o{seq}", "customer": customer, "amount": round(rnd.uniform(1, 900), 2),
                "currency": rnd.choice(["EUR", "USD"]), "created_at": int(time.time() * 1000)}
        if version >= 2:
            body["channel"] = rnd.choice(["web", "app", "store"])  # the schema change of a drill
    headers = [("source", b"cutover-drill"), ("trace", uuid.uuid4().hex[:16].encode())]
    return (json.dumps(customer) if json_keys else customer).encode(), encoding.encode(topic, body), headers


class _Worker:
    """A background thread that the switch's hooks pause through control files (see the module doc).

    Not a dataclass itself: the subclasses are, and declare `ctl` among their own fields.
    """

    role: ClassVar[str]
    ctl: Path

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        (self.ctl / f"{self.role}.running").touch()
        self._thread = threading.Thread(target=self._run, name=f"drill-{self.role}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(60)
        (self.ctl / f"{self.role}.running").unlink(missing_ok=True)
        if self._thread and self._thread.is_alive():
            # still in a send or a transaction: what it sends next would not be in what the checks count
            raise CutoverError(f"the drill's {self.role} did not stop within 60s (a send or a transaction is stuck)",
                               fix="read the drill's log for the cluster's errors; the checks after this step "
                                   "would count its records wrongly")

    def _run(self) -> None:
        raise NotImplementedError

    def _held(self, flag: str, ack: str) -> None:
        """Acknowledge a hold, wait until the hook lifts it (or the drill stops), then go on."""
        (self.ctl / ack).touch()
        while (self.ctl / flag).exists() and not self._stop.wait(0.05):
            pass
        (self.ctl / ack).unlink(missing_ok=True)


@dataclass
class Traffic(_Worker):
    role: ClassVar[str] = "producer"
    plan: Plan
    ctl: Path
    topics: list[str]
    rate: float = 100.0
    transactions: bool = True
    #: keys as JSON strings (see `_event`)
    json_keys: bool = False
    version: int = 1
    #: Sequence numbers start at the drill's start time in microseconds, so records of earlier
    #: drills on the same topics are told apart from this one's.
    first_seq: int = field(default_factory=lambda: int(time.time() * 1_000_000))
    sent: list[Sent] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def count(self) -> int:
        with self._lock:
            return len(self.sent)

    def mine(self, seq: int) -> bool:
        """Whether a record with this sequence number can be one of this traffic's."""
        return self.first_seq <= seq < self.first_seq + 10**9

    def _run(self) -> None:
        rnd, seq, batch = random.Random(7), self.first_seq, 0
        while not self._stop.is_set():
            side = routing.active(self.plan)
            ref = ClusterRef.of(self.plan, side)  # its clients log through cutover, not on stderr
            encoding = codec.for_cluster(self.plan, side)
            plain = Producer(ref.config(**{"enable.idempotence": True, "acks": "all", "linger.ms": 5}))
            txn = Producer(ref.config(**{"transactional.id": f"cutover-drill-{self.plan.name}-{side}"})) \
                if self.transactions else None
            if txn:
                _persist(txn.init_transactions, 30)
            try:
                while not self._stop.is_set() and not (self.ctl / "pause").exists():
                    batch += 1
                    in_txn = txn is not None and batch % 10 == 0
                    abort = in_txn and rnd.random() < 0.2
                    pending: list[Sent] = []
                    producer = txn if in_txn and txn else plain
                    if in_txn and txn:
                        txn.begin_transaction()
                    for _ in range(5):
                        topic = self.topics[seq % len(self.topics)]
                        key, value, headers = _event(topic, seq, rnd, self.version, encoding, self.json_keys)
                        producer.produce(topic, key=key, value=value, headers=headers,
                                         on_delivery=self._acked(side, seq, pending, keep=not in_txn))
                        seq += 1
                    if in_txn and txn and self._end_transaction(txn, commit=not abort):
                        with self._lock:
                            self.sent.extend(pending)
                    else:
                        plain.poll(0)
                    self._stop.wait(5 / self.rate)  # pacing: five records per turn
            except KafkaException as exc:  # not transient: say so (the drill fails on it), start again
                self.errors.append(f"producer on the {side} cluster: {exc.args[0]}")
                self._stop.wait(1)
                continue
            if plain.flush(30) or (txn and txn.flush(30)):
                self.errors.append("records still unacknowledged after 30 s")
            self._held("pause", "producer.paused")

    @staticmethod
    def _end_transaction(txn: Producer, commit: bool) -> bool:
        """Commit (True) or abort the open transaction, asking again while the coordinator is
        moving; a commit the coordinator says must be aborted is aborted (its records were never sent)."""
        txn.flush(30)
        if commit:
            try:
                _persist(txn.commit_transaction, 30)
                return True
            except KafkaException as exc:
                if not exc.args[0].txn_requires_abort():
                    raise
        _persist(txn.abort_transaction, 30)
        return False

    def _acked(self, side: str, seq: int, pending: list[Sent], keep: bool) -> Any:
        def done(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                self.errors.append(f"record {seq} not acknowledged: {err}")
                return
            sent = Sent(side, msg.topic(), msg.partition(), msg.offset(), seq)
            if keep:
                with self._lock:
                    self.sent.append(sent)
            else:
                pending.append(sent)
        return done


@dataclass
class GroupConsumer(_Worker):
    role: ClassVar[str] = "consumer"
    plan: Plan
    ctl: Path
    topics: list[str]
    group: str
    seen: list[Sent] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: What the consumer is doing now, and since when (monotonic): said when a drill's wait fails.
    doing: tuple[str, float] = ("starting", 0.0)
    assigned: str = "assignment not looked at yet"
    last_error: str = ""

    def count(self) -> int:
        with self._lock:
            return len(self.seen)

    def _now(self, what: str) -> None:
        self.doing = (what, time.monotonic())

    def _failed(self, msg: Any) -> bool:
        if msg.error():
            self.last_error = str(msg.error())
            return True
        return False

    def state(self) -> str:
        """Where the consumer stands, in words: what it is doing and for how long, what it holds."""
        what, since = self.doing
        said = f"; last error: {self.last_error}" if self.last_error else ""
        return f"{what} for {time.monotonic() - since:.0f}s; {self.assigned}{said}"

    def _run(self) -> None:
        while not self._stop.is_set():
            side = routing.active(self.plan)
            # A topic created a moment before subscribing can be missing from the metadata the
            # consumer first gets; it joins the subscription at the next metadata refresh, which
            # is 5 minutes by default. The sample group looks again every 10 seconds.
            consumer = Consumer(ClusterRef.of(self.plan, side).config(**{
                "group.id": self.group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "isolation.level": "read_committed", "topic.metadata.refresh.interval.ms": 10_000}))
            consumer.subscribe(self.topics)
            self._now(f"consuming on the {side} cluster")
            try:
                if self._consume(side, consumer):
                    continue  # joined without a topic it subscribed to: join again
            except KafkaException as exc:
                # Not transient (the group moved on without this member): start again from the
                # group's committed offsets. The record processed but not committed comes again,
                # and an exactly-once expectation counts it as the duplicate it is.
                self.errors.append(f"consumer on the {side} cluster: {exc.args[0]}")
                self._stop.wait(1)
                continue
            finally:
                self._now(f"leaving its group on the {side} cluster")
                with contextlib.suppress(KafkaException, RuntimeError):
                    consumer.close()
            self._now("held by the switch")
            self._held("stop", "consumer.stopped")

    def _consume(self, side: str, consumer: Consumer) -> bool:
        """Process records until stopped (False), or until the member's assignment has stayed without
        a subscribed topic that exists (True: the caller joins again)."""
        encoding = codec.for_cluster(self.plan, "new" if side == "new" else "old")
        looked, short = time.monotonic(), 0
        while not self._stop.is_set() and not (self.ctl / "stop").exists():
            if time.monotonic() - looked >= ASSIGNMENT_CHECK:
                looked = time.monotonic()
                short = short + 1 if _unassigned(consumer, self.topics) else 0
                if short >= 2:
                    return True
                self.assigned = _held_partitions(consumer)
            batch = [m for m in consumer.consume(BATCH, 0.2) if not self._failed(m)]
            if not batch:
                continue
            got = [Sent(side, str(m.topic()), int(m.partition() or 0), int(m.offset() or 0),
                        encoding.decode(str(m.topic()), m.value())["seq"]) for m in batch]
            ends: dict[tuple[str, int], int] = {}
            for r in got:
                ends[(r.topic, r.partition)] = max(ends.get((r.topic, r.partition), 0), r.offset + 1)
            self._now(f"committing on the {side} cluster")
            _persist(consumer.commit, offsets=[TopicPartition(t, p, o) for (t, p), o in ends.items()],
                     asynchronous=False)
            with self._lock:  # processed once committed: a batch whose commit failed comes again
                self.seen.extend(got)
            self._now(f"consuming on the {side} cluster")
        return False


#: Records the sample consumer takes, processes and commits at a time (at most): committing each
#: record alone, it fell behind 100 records a second on a loaded machine (a commit to three replicas
#: each time), and the demo's last wait found tens of thousands still to read.
BATCH = 500

#: Seconds between looks at whether the sample group's member was assigned every subscribed topic.
ASSIGNMENT_CHECK = 10.0


def _held_partitions(consumer: Consumer) -> str:
    try:
        held = sorted(f"{tp.topic}[{tp.partition}]" for tp in consumer.assignment())
    except (KafkaException, RuntimeError):
        return "assignment unknown"
    return f"assigned {', '.join(held)}" if held else "assigned nothing"


def _unassigned(consumer: Consumer, topics: list[str]) -> set[str]:
    """Subscribed topics that exist, while the member holds partitions of others but none of them.

    librdkafka does not rebalance again for a topic that appeared in the metadata while the
    group was rebalancing (confluentinc/librdkafka#3008), so a topic created just before the
    sample group subscribed can stay unassigned for good; joining again picks it up. An empty
    assignment (still joining, or the coordinator away) is not judged.
    """
    try:
        assigned = {tp.topic for tp in consumer.assignment()}
        if not assigned:
            return set()
        meta = consumer.list_topics(timeout=5)
    except KafkaException:
        return set()
    return {t for t in topics if t in meta.topics and meta.topics[t].error is None and meta.topics[t].partitions
            and t not in assigned}


def _persist(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call, again while Kafka's answer is transient (a coordinator or leader moving or loading,
    as after a broker restart or a preferred-leader election), for up to three minutes."""
    return again_while_transient(lambda: call(*args, **kwargs), 180, lambda: time.sleep(0.5), _REJOIN)


#: A consumer that is not polling cannot rejoin its group, so asking again cannot help: start again.
_REJOIN = frozenset({KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION,
                     KafkaError.UNKNOWN_MEMBER_ID})
