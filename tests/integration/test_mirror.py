"""cutover mirror on real clusters: every committed record exactly once, groups translated exactly."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from cutover.local.sandbox import Sandbox
from cutover.plan import Plan
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic, produce, read_all
from tests.integration.mirror_util import Traffic, commit, content, first_record, scoped_plan

COMPACT = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.001",
           "delete.retention.ms": "100", "max.message.bytes": "3000000"}


@dataclass
class Mirrored:
    ns: str
    plan: Path
    events: str
    compacted: str
    groups: dict[str, dict[tuple[str, int], int]]
    result: dict[str, Any]


def _compact(old: dict[str, str], topic: str) -> None:
    """Write several versions of a few keys (and tombstones) until the cleaner has removed some."""
    versions = [{"key": f"c{i % 7}".encode(), "value": None if i % 11 == 0 else f"v{i}".encode(),
                 "partition": i % 2} for i in range(120)]
    produce(old, topic, versions)
    filler = iter(range(10_000))

    def compacted() -> bool:
        produce(old, topic, [{"key": f"f{next(filler)}".encode(), "value": b"x", "partition": p} for p in (0, 1)])
        return len(read_all(old, topic, 2, timeout=10)) < 60

    wait_for(compacted, 90, f"the log cleaner to compact {topic}", interval=1.0)


@pytest.fixture(scope="module")
def mirrored(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Mirrored:
    from cutover.plan import load_plan

    ns = f"mx{uuid.uuid4().hex[:6]}"
    old = load_plan(sandbox.plan_file).cluster("old")
    events, compacted = f"{ns}.events", f"{ns}.compacted"
    create_topic(old, events, 3, **{"max.message.bytes": "3000000", "retention.ms": "86400000"})
    create_topic(old, compacted, 2, **COMPACT)
    traffic = Traffic(old, events, 3, seed=7, txn_id=f"{ns}-producer")
    for i in range(8):
        traffic.round(25, big=i in (2, 5))
    admin = AdminClient(old)  # keep a reference while its futures run
    for fut in admin.delete_records([TopicPartition(events, 0, 5)]).values():
        fut.result(30)
    _compact(old, compacted)

    groups = _position_groups(old, ns, events, compacted, traffic.aborted)
    for g, offsets in groups.items():
        commit(old, g, offsets)
    plan = scoped_plan(sandbox.plan_file, ns, tmp_path_factory.mktemp(ns))
    run = cutover("mirror", "--plan", str(plan), "--until-caught-up", "-o", "json")
    assert run.code == 0, run.err
    return Mirrored(ns, plan, events, compacted, groups, run.json())


def _position_groups(old: dict[str, str], ns: str, events: str, compacted: str,
                     aborted: list[tuple[int, int]]) -> dict[str, dict[tuple[str, int], int]]:
    """Groups at the start, middle and end of partitions, in compacted gaps, and around aborted transactions."""
    ev, co = read_all(old, events, 3), read_all(old, compacted, 2)
    c = Consumer({**old, "group.id": "ends"})
    consumer_ends = {(t, p): c.get_watermark_offsets(TopicPartition(t, p), timeout=10)
                     for t, n in ((events, 3), (compacted, 2)) for p in range(n)}
    c.close()
    groups: dict[str, dict[tuple[str, int], int]] = {f"{ns}.{g}": {} for g in ("start", "mid", "end", "gap", "abort")}
    for (t, p), (low, high) in consumer_ends.items():
        recs = [r for r in (ev if t == events else co) if r.partition == p]
        groups[f"{ns}.start"][(t, p)] = low
        groups[f"{ns}.mid"][(t, p)] = recs[len(recs) // 2].offset
        groups[f"{ns}.end"][(t, p)] = high
        present = {r.offset for r in recs}
        holes = [o for o in range(low, high) if o not in present]
        assert holes, f"{t}/{p} has no gap to test"
        groups[f"{ns}.gap"][(t, p)] = holes[len(holes) // 2]
    for p, off in aborted:
        groups[f"{ns}.abort"][(events, p)] = off + 1  # the abort marker, or the next aborted record
    assert groups[f"{ns}.abort"], "the traffic aborted no transaction"
    return groups


def test_every_committed_record_is_copied_field_by_field(mirrored: Mirrored, plan: Plan) -> None:
    for topic, n in ((mirrored.events, 3), (mirrored.compacted, 2)):
        source, target = read_all(plan.cluster("old"), topic, n), read_all(plan.cluster("new"), topic, n)
        assert content(target) == content(source), topic
    source = read_all(plan.cluster("old"), mirrored.events, 3)
    assert any(r.key is None for r in source) and any(r.value is None for r in source)
    assert any(r.value and len(r.value) > 1_000_000 for r in source) and any(r.headers for r in source)
    assert min(r.offset for r in source if r.partition == 0) >= 5  # log start above 0
    assert mirrored.result["records"] == sum(len(read_all(plan.cluster("old"), t, n))
                                             for t, n in ((mirrored.events, 3), (mirrored.compacted, 2)))
    assert mirrored.result["gaps"] == []


def test_topics_are_created_with_partitions_and_configs(mirrored: Mirrored, plan: Plan) -> None:
    new = AdminClient(plan.cluster("new"))
    meta = new.list_topics(timeout=10).topics
    assert len(meta[mirrored.events].partitions) == 3 and len(meta[mirrored.compacted].partitions) == 2
    res = ConfigResource(ResourceType.TOPIC, mirrored.compacted)
    conf = {k: v.value for k, v in new.describe_configs([res])[res].result(30).items()}
    assert conf["cleanup.policy"] == "compact" and conf["max.message.bytes"] == "3000000"
    assert conf["segment.ms"] == "100" and conf["message.timestamp.type"] == "CreateTime"


def test_groups_read_the_same_next_record_on_both_clusters(mirrored: Mirrored, plan: Plan) -> None:
    compared = 0
    for group, offsets in mirrored.groups.items():
        for (topic, p) in offsets:
            on_old = first_record(plan.cluster("old"), group, topic, p)
            on_new = first_record(plan.cluster("new"), group, topic, p)
            assert (on_old and content([on_old])) == (on_new and content([on_new])), (group, topic, p)
            compared += 1
    assert compared >= 20
    synced = {g["group"]: g for g in mirrored.result["groups"]}
    assert set(synced) == set(mirrored.groups) and all(not g["skipped"] for g in synced.values())


def test_translate_reports_what_was_committed(mirrored: Mirrored) -> None:
    group = f"{mirrored.ns}.mid"
    run = cutover("offsets", "translate", "--plan", str(mirrored.plan), "--group", group, "-o", "json")
    assert run.code == 0, run.err
    rows = {(r["topic"], r["partition"]): r for r in run.json()["partitions"]}
    assert {tp: r["source_offset"] for tp, r in rows.items()} == mirrored.groups[group]
    from cutover.kafka.clients import ClusterRef
    from cutover.kafka.offsets import group_info
    from cutover.plan import load_plan

    on_new = group_info(ClusterRef("new", load_plan(mirrored.plan).cluster("new")), group).offsets
    assert {tp: r["target_offset"] for tp, r in rows.items()} == on_new


def test_translate_names_the_selection_for_a_group_outside_it(mirrored: Mirrored) -> None:
    run = cutover("offsets", "translate", "--plan", str(mirrored.plan), "--group", "not-selected-billing")
    assert run.code == 2, run.err
    assert "consumer group not-selected-billing is not in the plan's selection (groups.include" in run.err
    assert "fix: name a selected group, or add it to groups.include in the plan" in run.err


def test_rerun_copies_nothing_and_status_shows_no_lag(mirrored: Mirrored) -> None:
    again = cutover("mirror", "--plan", str(mirrored.plan), "--until-caught-up", "-o", "json")
    assert again.code == 0, again.err
    assert again.json()["records"] == 0
    status = cutover("mirror", "status", "--plan", str(mirrored.plan), "-o", "json")
    assert status.code == 0, status.err
    s = status.json()
    assert s["lag"] == 0 and len(s["partitions"]) == 5 and s["gaps"] == []
    assert all(p["position"] == p["source_end"] for p in s["partitions"])
    assert all(p["last_group_sync"] for p in s["partitions"])
    assert {g["group"] for g in s["groups"]} == set(mirrored.groups)


def test_empty_selection_lists_the_topics_that_exist(sandbox: Sandbox, tmp_path: Path, ns: str) -> None:
    plan = scoped_plan(sandbox.plan_file, ns, tmp_path)
    run = cutover("mirror", "--plan", str(plan), "--until-caught-up")
    assert run.code == 2 and "matches no topic" in run.err and "topics there:" in run.err
    assert "Traceback" not in run.err


def test_refuses_a_target_topic_holding_foreign_records(sandbox: Sandbox, plan: Plan, tmp_path: Path,
                                                         ns: str) -> None:
    topic = f"{ns}.taken"
    create_topic(plan.cluster("old"), topic, 2)
    produce(plan.cluster("old"), topic, [{"value": b"src", "partition": 0}])
    create_topic(plan.cluster("new"), topic, 1)
    produce(plan.cluster("new"), topic, [{"value": b"someone else", "partition": 0}])
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path)
    run = cutover("mirror", "--plan", str(scoped), "--until-caught-up")
    assert run.code == 3, run.err
    assert "has 1 partitions, the source has 2" in run.err and "holds 1 records" in run.err
    assert "--allow-existing-target" in run.err
    assert [r.value for r in read_all(plan.cluster("new"), topic, 1)] == [b"someone else"]
    assert len(AdminClient(plan.cluster("new")).list_topics(timeout=10).topics[topic].partitions) == 1

    adopt = cutover("mirror", "--plan", str(scoped), "--until-caught-up", "--allow-existing-target", "-o", "json")
    assert adopt.code == 0, adopt.err
    assert [r.value for r in read_all(plan.cluster("new"), topic, 2)] == [b"someone else", b"src"]


def test_follows_partition_increases(sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    from confluent_kafka.admin import NewPartitions

    topic = f"{ns}.growing"
    create_topic(plan.cluster("old"), topic, 1)
    produce(plan.cluster("old"), topic, [{"value": b"a", "partition": 0}])
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path)
    assert cutover("mirror", "--plan", str(scoped), "--until-caught-up").code == 0
    admin = AdminClient(plan.cluster("old"))
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
    produce(plan.cluster("old"), topic, [{"value": b"b", "partition": 2}])
    run = cutover("mirror", "--plan", str(scoped), "--until-caught-up", "-o", "json")
    assert run.code == 0, run.err
    assert content(read_all(plan.cluster("new"), topic, 3)) == content(read_all(plan.cluster("old"), topic, 3))
    assert json.loads(run.out)["records"] == 1
