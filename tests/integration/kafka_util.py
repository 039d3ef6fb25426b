"""Small real-Kafka helpers for tests: create topics, produce, read back everything."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def create_topic(props: Mapping[str, str], name: str, partitions: int = 1, **config: str) -> None:
    admin = AdminClient(dict(props))
    admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(timeout=30)


def produce(props: Mapping[str, str], topic: str, records: list[dict[str, Any]]) -> None:
    producer = Producer({**props, "enable.idempotence": True, "linger.ms": 5})
    errors: list[Any] = []
    for r in records:
        producer.produce(topic, on_delivery=lambda err, _m: errors.append(err) if err else None, **r)
    assert producer.flush(30) == 0, "records still in flight after 30s"
    assert not errors, errors


def read_all(props: Mapping[str, str], topic: str, partitions: int = 1, timeout: float = 30) -> list[Rec]:
    """Every record now in the topic, in partition/offset order."""
    consumer = Consumer({**props, "group.id": f"reader-{topic}", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Rec] = []
        pending = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append(Rec(msg.partition(), msg.offset(), msg.key(), msg.value(),
                           tuple(msg.headers() or ()), msg.timestamp()[1]))
            if msg.offset() + 1 >= ends[msg.partition()]:
                pending.discard(msg.partition())
        assert not pending, f"partitions {pending} of {topic} not read to their end within {timeout}s"
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()
