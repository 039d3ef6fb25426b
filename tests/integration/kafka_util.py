"""Small real-Kafka helpers for tests: create topics, produce, read back everything."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cutover.kafka.offsets import transient
from tests.conftest import wait_for


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def create_topic(props: Mapping[str, str], name: str, partitions: int = 1, **config: str) -> None:
    """Create the topic and wait until every broker's metadata has it, each partition with a leader
    (on three brokers the controller's answer comes first: a client asking another broker at once
    was told there is no such topic)."""
    admin = AdminClient(dict(props))
    # The broker's default replication factor: 1 on a one-broker sandbox, 3 on three brokers.
    admin.create_topics([NewTopic(name, partitions, -1, config=config)])[name].result(timeout=30)
    for address in props["bootstrap.servers"].split(","):
        one = AdminClient({**props, "bootstrap.servers": address})
        wait_for(lambda: _listed(one, name, partitions), 30, f"{address} to list topic {name}")  # noqa: B023


def _listed(client: AdminClient, name: str, partitions: int) -> bool:
    meta = client.list_topics(name, timeout=10).topics.get(name)
    return meta is not None and meta.error is None and len(meta.partitions) == partitions and all(
        p.leader >= 0 for p in meta.partitions.values())


def produce(props: Mapping[str, str], topic: str, records: list[dict[str, Any]]) -> None:
    producer = Producer({**props, "enable.idempotence": True, "linger.ms": 5})
    errors: list[Any] = []
    for r in records:
        producer.produce(topic, on_delivery=lambda err, _m: errors.append(err) if err else None, **r)
    assert producer.flush(30) == 0, "records still in flight after 30s"
    assert not errors, errors


def read_all(props: Mapping[str, str], topic: str, partitions: int = 1, timeout: float = 30) -> list[Rec]:
    """Every committed record now in the topic, in partition/offset order (read_committed).

    A partition is done at the consumer's end-of-partition event at or past the end
    offset seen at the start, so transaction markers and aborted records at the end
    of a log (whose offsets hold no readable record) are handled.
    """
    consumer = Consumer({**props, "group.id": f"reader-{topic}", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    try:
        ends = {p: _end(consumer, topic, p, timeout) for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: list[Rec] = []
        pending = set(range(partitions))
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF and msg.offset() >= ends[msg.partition()]:
                    pending.discard(msg.partition())
                continue
            out.append(rec(msg))
        assert not pending, f"partitions {pending} of {topic} not read to their end within {timeout}s"
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def _end(consumer: Consumer, topic: str, partition: int, timeout: float) -> int:
    """The high watermark, waiting out a leader that is still being elected (a broker just restarted)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return int(consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)[1])
        except KafkaException as exc:
            if not transient(exc.args[0]) or time.monotonic() > deadline:
                raise
            consumer.poll(0.2)


def committed(props: Mapping[str, str], group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offset per partition (-1001: none), read as cutover reads groups: asked again while
    the group's coordinator loads or moves (a consumer's committed() raised NOT_COORDINATOR here under load)."""
    from cutover.kafka.clients import ClusterRef
    from cutover.kafka.offsets import group_info

    held = group_info(ClusterRef("cluster", dict(props)), group, 30).offsets
    return {p: held.get((topic, p), -1001) for p in range(partitions)}


def rec(msg: Message) -> Rec:
    return Rec(msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1])
