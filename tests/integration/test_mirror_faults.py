"""cutover mirror under faults and in its other modes: SIGKILL loops, fencing, follow mode with
metrics and continuous group sync, oversized records, retention gaps, shards, and reverse."""

from __future__ import annotations

import json
import re
import signal
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from cutover.kafka.clients import ClusterRef
from cutover.kafka.offsets import group_info
from cutover.local.sandbox import Sandbox, free_port
from cutover.plan import Plan
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic, produce, read_all
from tests.integration.mirror_util import (
    Traffic,
    commit,
    content,
    first_record,
    killed_at_random_moments,
    position,
    scoped_plan,
    start_mirror,
    stop,
    switch_marked,
)


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_kill_loop_leaves_every_record_exactly_once(sandbox: Sandbox, tmp_path: Path, ns: str) -> None:
    killed_at_random_moments(sandbox.plan_file, ns, tmp_path)


def test_a_second_process_for_the_same_shard_fences_the_first(sandbox: Sandbox, plan: Plan, tmp_path: Path,
                                                              ns: str) -> None:
    topic = f"{ns}.fenced"
    create_topic(plan.cluster("old"), topic, 2)
    produce(plan.cluster("old"), topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(100)])
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path)
    first = start_mirror(scoped, "--shard", "0/1")
    wait_for(lambda: position(scoped) >= 100, 60, "the first mirror to copy the records")
    second = start_mirror(scoped, "--shard", "0/1")
    sent = 0

    def fenced() -> bool:
        # The first learns it is fenced at its next transaction: keep giving it one until the
        # second process has taken over (it may still be starting when the first record comes).
        nonlocal sent
        produce(plan.cluster("old"), topic, [{"value": b"after", "partition": 0}])
        sent += 1
        return first.poll() is not None

    wait_for(fenced, 60, "the first mirror to be fenced", interval=0.5)
    err = first.stderr.read() if first.stderr else ""
    assert first.returncode == 1 and "taken over by another mirror process" in err and "Traceback" not in err
    wait_for(lambda: position(scoped) >= 100 + sent, 60, "the second mirror to copy the new records")
    code, _out, err = stop(second)
    assert code == 0, err
    assert content(read_all(plan.cluster("new"), topic, 2)) == content(read_all(plan.cluster("old"), topic, 2))


@pytest.mark.slow  # a long scenario: CI runs it in a slow lane (.ci/run)
def test_follow_mode_syncs_groups_serves_metrics_and_stops_cleanly(sandbox: Sandbox, plan: Plan, tmp_path: Path,
                                                                   ns: str) -> None:
    old, new, topic = plan.cluster("old"), plan.cluster("new"), f"{ns}.live"
    create_topic(old, topic, 2)
    produce(old, topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(50)])
    scoped, port = scoped_plan(sandbox.plan_file, ns, tmp_path), free_port()
    proc = start_mirror(scoped, "--metrics-port", str(port))
    try:
        def metrics() -> str:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    return str(r.read().decode())
            except OSError:
                return ""

        lag_zero = f'cutover_mirror_lag_records{{direction="forward",partition="1",topic="{topic}"}} 0.0'
        wait_for(lambda: lag_zero in metrics(), 60, "the lag metric to reach 0")
        assert "cutover_mirror_records_total" in metrics()

        group, ref_new = f"{ns}.billing", ClusterRef("new", new)
        commit(old, group, {(topic, 0): 10, (topic, 1): 20})
        wait_for(lambda: group_info(ref_new, group).offsets == {(topic, 0): 10, (topic, 1): 20}, 60,
                 "the running mirror to sync the group")

        # an active member on the target: the mirror leaves the group alone
        member = Consumer({**new, "group.id": group, "enable.auto.commit": False})
        member.subscribe([topic])
        wait_for(lambda: member.poll(0.2) is not None or group_info(ref_new, group).active, 60, "a target member")
        commit(old, group, {(topic, 0): 15})
        wait_for(lambda: "active members" in _sync_reason(scoped, group), 60, "the sync to report the member")
        assert group_info(ref_new, group).offsets[(topic, 0)] == 10
        member.close()
        # the member gone, the running mirror syncs the offset it held back; wait for it, or its
        # round (read the target, then commit) could land after the commit below and undo it
        wait_for(lambda: group_info(ref_new, group).offsets[(topic, 0)] == 15, 60,
                 "the running mirror to sync the group once the member left")

        # further on the target than the translation: never moved back without --allow-rewind
        commit(new, group, {(topic, 0): 25})
        commit(old, group, {(topic, 0): 5})
        run = cutover("offsets", "sync", "--plan", str(scoped), "-o", "json")
        skipped = run.json()["groups"][0]["skipped"]
        assert [s["partition"] for s in skipped] == [0] and "--allow-rewind" in skipped[0]["reason"]
        assert group_info(ref_new, group).offsets[(topic, 0)] == 25
        rewind = cutover("offsets", "sync", "--plan", str(scoped), "--allow-rewind", "-o", "json")
        assert rewind.code == 0 and group_info(ref_new, group).offsets[(topic, 0)] == 5
    finally:
        code, out, err = stop(proc, signal.SIGTERM)
    assert code == 0, err
    # a follow-mode mirror is always reading or writing a batch: the clean stop names which
    assert re.search(r"SIGTERM: finishing (the transaction in flight|the batch being read \(committed in one "
                     r"transaction\)), then stopping", err), err
    assert "mirrored 50 records" in out


def _sync_reason(plan_file: Path, group: str) -> str:
    run = cutover("offsets", "sync", "--plan", str(plan_file), "-o", "json")
    return " ".join(g["reason"] or "" for g in run.json()["groups"] if g["group"] == group)


def test_a_record_too_large_for_the_target_stops_the_mirror_before_it(sandbox: Sandbox, plan: Plan,
                                                                      tmp_path: Path, ns: str) -> None:
    old, new, topic = plan.cluster("old"), plan.cluster("new"), f"{ns}.big"
    create_topic(old, topic, 1)
    create_topic(new, topic, 1, **{"max.message.bytes": "50000"})
    produce(old, topic, [{"value": b"a" * 100}, {"value": b"b" * 200_000}, {"value": b"c" * 100}])
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path)
    run = cutover("mirror", "--plan", str(scoped), "--until-caught-up")
    assert run.code == 1, run.err
    assert f"{topic} partition 0 offset 1" in run.err and "max.message.bytes" in run.err
    # refused before it was sent: in a transaction the producer would only give up after a minute
    assert "larger than the topic's max.message.bytes (50000)" in run.err
    assert [r.value for r in read_all(new, topic, 1)] == [b"a" * 100]

    admin = AdminClient(new)
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("max.message.bytes", "1000000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    again = cutover("mirror", "--plan", str(scoped), "--until-caught-up")
    assert again.code == 0, again.err
    assert content(read_all(new, topic, 1)) == content(read_all(old, topic, 1))


def test_records_lost_to_retention_are_reported_as_a_gap(sandbox: Sandbox, plan: Plan, tmp_path: Path,
                                                         ns: str) -> None:
    old, topic = plan.cluster("old"), f"{ns}.retained"
    create_topic(old, topic, 1)
    produce(old, topic, [{"value": b"%d" % i} for i in range(10)])
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path)
    assert cutover("mirror", "--plan", str(scoped), "--until-caught-up").code == 0
    produce(old, topic, [{"value": b"%d" % i} for i in range(10, 30)])
    admin = AdminClient(old)
    for fut in admin.delete_records([TopicPartition(topic, 0, 25)]).values():
        fut.result(30)
    run = cutover("mirror", "--plan", str(scoped), "--until-caught-up", "-o", "json")
    assert run.code == 0, run.err
    assert "DATA LOSS ON THE SOURCE" in run.err and "offsets 10..24 (15 records)" in run.err
    status = cutover("mirror", "status", "--plan", str(scoped), "-o", "json").json()
    assert status["gaps"] == [{"topic": topic, "partition": 0, "start": 10, "end": 25, "records": 15}]
    assert [r.value for r in read_all(plan.cluster("new"), topic, 1)] == [b"%d" % i for i in [*range(10), 25, 26,
                                                                                                27, 28, 29]]
    commit(old, f"{ns}.late", {(topic, 0): 12})  # inside the gap: the next record that exists
    translated = cutover("offsets", "translate", "--plan", str(scoped), "--group", f"{ns}.late", "-o", "json")
    target = translated.json()["partitions"][0]["target_offset"]
    assert [r.value for r in read_all(plan.cluster("new"), topic, 1) if r.offset == target] == [b"25"]


def test_shards_split_the_partitions_and_together_copy_everything(sandbox: Sandbox, plan: Plan, tmp_path: Path,
                                                                  ns: str) -> None:
    old, topic = plan.cluster("old"), f"{ns}.wide"
    create_topic(old, topic, 6)
    produce(old, topic, [{"value": b"%d" % i, "partition": i % 6} for i in range(600)])
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path)
    procs = [start_mirror(scoped, "--until-caught-up", "--shard", f"{i}/2", "-o", "json") for i in range(2)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e for _o, e in results]
    shares = [{r["partition"] for r in json.loads(out)["partitions"]} for out, _e in results]
    assert shares[0] and shares[1] and not shares[0] & shares[1] and shares[0] | shares[1] == set(range(6))
    assert content(read_all(plan.cluster("new"), topic, 6)) == content(read_all(old, topic, 6))


@pytest.mark.slow  # a long scenario: CI runs it in a slow lane (.ci/run)
def test_reverse_mirror_carries_new_records_and_groups_back(sandbox: Sandbox, plan: Plan, tmp_path: Path,
                                                            ns: str) -> None:
    old, new, topic = plan.cluster("old"), plan.cluster("new"), f"{ns}.rollback"
    create_topic(old, topic, 2)
    traffic = Traffic(old, topic, 2, seed=5, txn_id=f"{ns}-producer")
    for _ in range(3):
        traffic.round(15)
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path)
    assert cutover("mirror", "--plan", str(scoped), "--until-caught-up").code == 0
    before = read_all(old, topic, 2)
    switch_marked(scoped)  # promoted: clients now write to the new cluster
    on_new = Traffic(new, topic, 2, seed=6, txn_id=f"{ns}-producer-new")
    for _ in range(3):
        on_new.round(15)
    run = cutover("mirror", "--reverse", "--plan", str(scoped), "--until-caught-up", "-o", "json")
    assert run.code == 0, run.err
    written_on_new = [r for r in read_all(new, topic, 2) if r.timestamp >= on_new.epoch_ms]
    expected = sorted(before + written_on_new, key=lambda r: r.partition)  # stable: old records first
    assert content(read_all(old, topic, 2)) == content(expected)
    assert run.json()["records"] == len(written_on_new)

    # groups on the new cluster, before and after the switch point, carried back exactly
    recs = read_all(new, topic, 2)
    ends = Consumer({**new, "group.id": "ends"})
    for i, cut in enumerate((0.2, 0.5, 0.8, 1.0)):
        positions = {}
        for p in (0, 1):
            offsets = [r.offset for r in recs if r.partition == p]
            at = int(cut * len(offsets))
            positions[(topic, p)] = offsets[at] if at < len(offsets) else \
                ends.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        commit(new, f"{ns}.g{i}", positions)
    ends.close()
    sync = cutover("offsets", "sync", "--reverse", "--plan", str(scoped), "-o", "json")
    assert sync.code == 0, sync.err
    for i in range(4):
        for p in (0, 1):
            a, b = first_record(new, f"{ns}.g{i}", topic, p), first_record(old, f"{ns}.g{i}", topic, p)
            assert (a and content([a])) == (b and content([b])), (i, p)
