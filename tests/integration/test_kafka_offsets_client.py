"""The offset helpers use the admin client they are given, although an idle AdminClient is falsy.

`len(AdminClient)` is the length of its outbound queue, so an idle client is false in a boolean
context: `client or admin(ref)` opened a new client (connections, metadata) on every call. The
switch's offset reads took 1 to 3 s instead of a few milliseconds when a new client met an
unknown leader. Real Kafka: a real, idle AdminClient on the sandbox's old cluster; the factory
that opens new clients is counted (it still opens real ones).
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from cutover.kafka import offsets
from cutover.kafka.clients import ClusterRef, admin
from cutover.plan import Plan
from tests.integration.kafka_util import create_topic


def test_offset_helpers_use_the_real_idle_admin_client_they_are_given(
        plan: Plan, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = ClusterRef("old", plan.cluster("old"))
    props = ref.config()
    topic, group = f"{ns}.events", f"{ns}.group"
    create_topic(props, topic, partitions=3)
    producer = Producer(props)
    for p, n in ((0, 4), (2, 7)):
        for i in range(n):
            producer.produce(topic, value=b"%d" % i, partition=p)
    assert producer.flush(30) == 0

    client = admin(ref, warm_for=30)
    assert len(client) == 0 and not client  # the trap: an idle, working client is falsy
    opened: list[str] = []

    def counted(ref_: ClusterRef, warm_for: float | None = None) -> object:
        opened.append(ref_.name)
        return admin(ref_, warm_for)

    monkeypatch.setattr(offsets, "admin", counted)
    tps = [(topic, 0), (topic, 1), (topic, 2)]
    assert offsets.log_offsets(ref, tps, "end", 30, client) == {(topic, 0): 4, (topic, 1): 0, (topic, 2): 7}
    assert offsets.log_offsets(ref, tps, "start", 30, client) == {tp: 0 for tp in tps}
    offsets.commit_group(ref, group, {(topic, 0): 3, (topic, 2): 5}, 30, client)
    info = offsets.group_info(ref, group, 30, client)
    assert info.offsets == {(topic, 0): 3, (topic, 2): 5} and info.members == 0
    assert offsets.group_members(ref, [group], 30, client) == {group: 0}
    assert opened == [], f"new admin clients were opened although one was given: {opened}"

    assert offsets.log_offsets(ref, [(topic, 2)], "end", 30) == {(topic, 2): 7}  # the counter does count
    assert len(opened) == 1


def test_the_offsets_of_more_groups_than_one_client_takes_are_read_and_committed(plan: Plan, ns: str) -> None:
    """More than GROUPS_PER_CLIENT groups spread their requests over several admin clients; each must live
    until its answers are in (a client without a reference is destroyed, and its requests never answered:
    a mirror syncing 200 groups failed after 30 s with "could not reach the old cluster")."""
    ref = ClusterRef("old", plan.cluster("old"))
    topic = f"{ns}.many"
    create_topic(ref.config(), topic, partitions=2)
    groups = [f"{ns}.g{i:03d}" for i in range(2 * offsets.GROUPS_PER_CLIENT + 10)]
    wanted = {g: {(topic, 0): i % 7, (topic, 1): i % 5 + 1} for i, g in enumerate(groups)}
    assert offsets.commit_groups(ref, wanted, 30) == {}
    info = offsets.groups_info(ref, groups, 30)
    assert {g: i.offsets for g, i in info.items()} == wanted
