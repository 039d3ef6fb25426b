"""The drills' exactly-once check against a transaction that is not decided yet: its records are neither
counted lost nor there (a run counted "2 records lost" on a loaded machine, the records of a transaction
whose commit markers were not written yet)."""

from __future__ import annotations

from collections import Counter

import pytest
from confluent_kafka import Producer

from cutover.drill import codec
from cutover.drill.ops import expect
from cutover.drill.ops.base import ExpectationFailed
from cutover.kafka.clients import ClusterRef
from cutover.kafka.offsets import undecided
from cutover.plan import Plan
from tests.integration.kafka_util import create_topic, produce


def test_records_of_an_open_transaction_are_waited_for_not_counted_lost(plan: Plan, ns: str) -> None:
    old, topic = plan.cluster("old"), f"{ns}.orders"
    create_topic(old, topic, 1)
    encoding = codec.for_cluster(plan, "old")
    produce(old, topic, [{"value": encoding.encode(topic, {"seq": i})} for i in range(3)])
    tx = Producer({**old, "transactional.id": f"{ns}-open"})
    tx.init_transactions(30)
    tx.begin_transaction()
    for i in (3, 4):
        tx.produce(topic, value=encoding.encode(topic, {"seq": i}), partition=0)
    assert tx.flush(30) == 0  # written, not committed: the last stable offset stays at 3

    assert undecided(ClusterRef.of(plan, "old"), [(topic, 0)], wait=0.5) == {(topic, 0): (3, 5)}
    with pytest.raises(ExpectationFailed, match=r"a transaction stayed open for 1s .* \(offsets 3\.\.4 undecided\)"):
        expect.topic_seqs(plan, "old", [topic], wait=1.0)

    tx.commit_transaction(30)  # read at once: the check waits for the markers, whenever they are written
    assert expect.topic_seqs(plan, "old", [topic]) == Counter({(topic, i): 1 for i in range(5)})
