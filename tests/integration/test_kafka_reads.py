"""Reading a range of committed records while producers keep writing: the read ends at the range's end, not
at an end-of-partition event that live traffic never lets come (the demo's rollback step timed out on CI
reading a topic its traffic was still writing: "could not reach the old cluster … while reading …: no
answer")."""

from __future__ import annotations

import threading

from confluent_kafka import Producer

from cutover.kafka.clients import ClusterRef
from cutover.kafka.offsets import committed_records, log_offsets, undecided
from cutover.plan import Plan
from cutover.shadow.status import committed_between
from tests.integration.kafka_util import create_topic, produce


class _Traffic:
    """One record every 2 ms into each partition until stopped: every fetch finds something new."""

    def __init__(self, props: dict[str, str], topic: str, partitions: int) -> None:
        self.producer = Producer({**props, "enable.idempotence": True, "linger.ms": 0})
        self.topic, self.partitions = topic, partitions
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.halt.wait(0.002):  # paced; ends as soon as it is told
            for p in range(self.partitions):
                self.producer.produce(self.topic, value=b"later", partition=p)
            self.producer.poll(0)

    def __enter__(self) -> _Traffic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.halt.set()
        self.thread.join(30)
        assert not self.thread.is_alive()
        assert self.producer.flush(30) == 0


def test_a_range_is_read_to_its_end_while_producers_keep_writing(plan: Plan, ns: str) -> None:
    old, topic = plan.cluster("old"), f"{ns}.live"
    create_topic(old, topic, 2)
    for p in (0, 1):
        produce(old, topic, [{"value": f"{p}-{i}".encode(), "partition": p} for i in range(20 + 5 * p)])
    tx = Producer({**old, "transactional.id": f"{ns}-aborted"})  # the range ends in aborted records and a marker
    tx.init_transactions(30)
    tx.begin_transaction()
    tx.produce(topic, value=b"aborted", partition=0)
    assert tx.flush(30) == 0  # written, then aborted
    tx.abort_transaction(30)
    ref = ClusterRef.of(plan, "old")
    assert undecided(ref, [(topic, 0)], wait=30) == {}  # the abort's marker is written
    ends = log_offsets(ref, [(topic, 0), (topic, 1)], "end")
    assert ends == {(topic, 0): 22, (topic, 1): 25}

    with _Traffic(old, topic, 2):
        assert committed_between(ref, topic, 1, 5, 25, timeout=10) == 20
        assert committed_between(ref, topic, 0, 10, 22, timeout=10) == 10  # the aborted record is not counted
        got = sorted((m.partition(), m.offset(), m.value()) for m in committed_records(
            ref, [(topic, 0, 0), (topic, 1, 3)], "reading", timeout=10, until=ends))
        assert got == [(0, i, f"0-{i}".encode()) for i in range(20)] + \
            [(1, i, f"1-{i}".encode()) for i in range(3, 25)]
        later = log_offsets(ref, [(topic, 0), (topic, 1)], "end")
        assert all(later[tp] > ends[tp] for tp in ends), "the traffic wrote nothing while the range was read"
