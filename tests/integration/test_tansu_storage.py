"""Tansu 0.6.0's other storage engine, dynostore (memory:// here; s3:// is the same engine over object storage),
asked what the sandbox's SQLite storage cannot do: describe a group. It can, but its latest offset is wrong after
a batch of several records, so the sandbox stays on SQLite (docs/limitations.md says both). This test fails when
a Tansu release changes either answer: then the sandbox's storage should be chosen again.

Marked `tansu`: it needs the binary scripts/tansu builds once per machine (CI's tansu lane runs it)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cutover.local import broker, tansu
from cutover.local.ports import free_port
from tests.conftest import wait_for
from tests.integration.mirror_util import commit

pytestmark = pytest.mark.tansu


@pytest.fixture
def on_memory(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A Tansu broker on 127.0.0.1 with its log in memory (dynostore): its client properties."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    with open(tmp_path / "tansu.log", "wb") as log:
        proc = subprocess.Popen([str(tansu.require()), "broker", "--cluster-id", "storage-test", "--listener-url",
                                 url, "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
                                stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        wait_for(lambda: broker.accepts(port), 30, "Tansu to accept connections")
        yield {"bootstrap.servers": f"127.0.0.1:{port}"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_on_dynostore_a_group_is_described_but_the_latest_offset_is_wrong_after_a_batch(
        on_memory: dict[str, str]) -> None:
    admin = AdminClient(on_memory)
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(30)
    producer = Producer(on_memory)
    for i in range(7):  # one batch of seven records
        producer.produce("t", b"v%d" % i, key=b"k%d" % i)
    assert producer.flush(30) == 0
    commit(on_memory, "g", {("t", 0): 3})
    described = admin.describe_consumer_groups(["g"], request_timeout=10)["g"].result(20)
    assert described.group_id == "g"  # SQLite storage closes the connection here
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g")])["g"].result(20)
    assert [(p.topic, p.partition, p.offset) for p in offsets.topic_partitions] == [("t", 0, 3)]
    consumer = Consumer({**on_memory, "group.id": "reader", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("t", 0, 0)])
        values: list[bytes] = []

        def read() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
            return len(values) >= 7

        wait_for(read, 30, "the seven records")  # fetched past the latest offset it answers below
        assert values == [b"v%d" % i for i in range(7)]
        # Kafka (and Tansu on SQLite) answers 7; dynostore answers 1: a mirror or reader that trusts the
        # latest offset would think six records are not there.
        assert consumer.get_watermark_offsets(TopicPartition("t", 0), timeout=10, cached=False) == (0, 1)
    finally:
        consumer.close()
