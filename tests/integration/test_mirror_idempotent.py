"""The mirror's idempotent mode (mirror.mode: idempotent, for targets without transactions), on Apache Kafka:
a batch cut short between its records and its progress is found on the target at the next start, matched to
the source record by record and recorded as copied, never written twice; the offset map stays exact (a group
is translated onto the records recovered); a record beyond the progress that is not the source's is refused,
naming both offsets; and SIGKILLed at random moments it leaves every record exactly once.

The same mode against Tansu, which has no transactions at all, is in test_tansu.py."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from cutover.kafka.clients import ClusterRef
from cutover.kafka.inspect import cluster_id
from cutover.local.sandbox import Sandbox
from cutover.mirror import state as st
from cutover.plan import Plan, load_plan
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import Rec, create_topic, produce, read_all
from tests.integration.mirror_util import (
    commit,
    content,
    first_record,
    killed_at_random_moments,
    scoped_plan,
    start_mirror,
    switch_marked,
)

#: Recent: the old cluster's retention (7 days) deletes older records at its next check, a mirror then
#: rightly reports them lost (a run in a long-lived sandbox did).
T0 = int(time.time() * 1000) - 3_600_000


def _records(start: int, count: int, partitions: int) -> list[dict[str, object]]:
    return [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % partitions, "timestamp": T0 + i,
             "headers": [("seq", b"%d" % i), ("empty", None)]} for i in range(start, start + count)]


def _cut_short(plan: Plan, topic: str, source: list[Rec], landed: dict[int, int], forged: bool = False) -> None:
    """Leave the target as a mirror process killed mid-batch does: its intent for the records after its progress
    (every source record past what the target holds), then the first `landed[p]` of them written to partition p,
    and no progress. `forged`: the first one written is not the source's record (another writer's)."""
    rt = st.route(plan)
    target = read_all(plan.cluster("new"), topic, 2)
    entries, copies = [], []
    for p, n in sorted(landed.items()):
        mine = [r for r in source if r.partition == p]
        have = [r for r in target if r.partition == p]
        todo = mine[len(have):]
        entries.append([topic, p, todo[0].offset, have[-1].offset + 1, len(todo)])
        for i, r in enumerate(todo[:n]):
            value = b"not the source's" if forged and i == 0 else r.value
            copies.append({"key": r.key, "value": value, "partition": p, "timestamp": r.timestamp,
                           "headers": list(r.headers)})
    st.note(rt, [st.intent_record(cluster_id(ClusterRef.of(plan, "old")), "0/1", entries)])
    produce(plan.cluster("new"), topic, copies)


def _mirrored(scoped: Path, ns: str, plan: Plan) -> tuple[str, list[Rec]]:
    topic = f"{ns}.orders"
    create_topic(plan.cluster("old"), topic, 2)
    produce(plan.cluster("old"), topic, _records(0, 30, 2))
    run = cutover("mirror", "--plan", str(scoped), "--until-caught-up", "-o", "json")
    assert run.code == 0, run.err
    produce(plan.cluster("old"), topic, _records(30, 20, 2))
    return topic, read_all(plan.cluster("old"), topic, 2)


@pytest.mark.parametrize("state_cluster", ["new", "old"])
def test_a_batch_cut_short_is_recorded_from_the_target_and_never_written_twice(sandbox: Sandbox, plan: Plan,
                                                                               tmp_path: Path, ns: str,
                                                                               state_cluster: str) -> None:
    """With the state on the new cluster (the default) or on the old one (for a target that cannot keep it)."""
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path, mode="idempotent", state_cluster=state_cluster,
                         state_prefix=f"__{ns}")
    topic, source = _mirrored(scoped, ns, plan)
    has_state = {side: f"__{ns}.mirror.offsets" in AdminClient(dict(plan.cluster(side))).list_topics(timeout=30).topics
                 for side in ("old", "new")}
    assert has_state == {"old": state_cluster == "old", "new": state_cluster == "new"}
    _cut_short(load_plan(scoped), topic, source, {0: 4, 1: 0})
    run = cutover("mirror", "--plan", str(scoped), "--until-caught-up", "-o", "json")
    assert run.code == 0, run.err
    assert "a batch cut short left 4 records" in run.err and f"{topic}/0: 4" in run.err
    assert run.json()["records"] == 20  # the 4 found on the target, recorded; 16 written
    target = read_all(plan.cluster("new"), topic, 2)
    assert content(target) == content(source)  # each once, field by field
    assert [r.offset for r in target] == [r.offset for r in source]  # no markers on either side: the same offsets
    # The map is exact across the recovered records: a group inside them reads the same record on both sides.
    commit(plan.cluster("old"), f"{ns}.app", {(topic, 0): 17, (topic, 1): 24})
    assert cutover("mirror", "--plan", str(scoped), "--until-caught-up").code == 0
    for p, want in ((0, 17), (1, 24)):
        on_old, on_new = first_record(plan.cluster("old"), f"{ns}.app", topic, p), \
            first_record(plan.cluster("new"), f"{ns}.app", topic, p)
        assert on_old is not None and on_new is not None and on_old.offset == want
        assert content([on_new]) == content([on_old])


def test_a_foreign_record_beyond_the_progress_is_refused_naming_both_offsets(sandbox: Sandbox, plan: Plan,
                                                                             tmp_path: Path, ns: str) -> None:
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path, mode="idempotent")
    topic, source = _mirrored(scoped, ns, plan)
    _cut_short(load_plan(scoped), topic, source, {1: 2}, forged=True)
    before = read_all(plan.cluster("new"), topic, 2)
    run = cutover("mirror", "--plan", str(scoped), "--until-caught-up")
    assert run.code == 1, run.err
    assert (f"{topic} partition 1: the record at offset 15 on the new cluster" in run.err
            and "is not the source's record at offset 15 (value differs): another writer wrote to that partition"
            in run.err), run.err
    assert "Traceback" not in run.err and "a bug in cutover" not in run.err
    assert read_all(plan.cluster("new"), topic, 2) == before  # nothing written


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_kill_loop_in_idempotent_mode_leaves_every_record_exactly_once(sandbox: Sandbox, tmp_path: Path,
                                                                      ns: str) -> None:
    found = killed_at_random_moments(sandbox.plan_file, ns, tmp_path, mode="idempotent")
    print(f"{found} of 11 starts found records a killed process had written beyond its progress")


def test_the_switch_waits_for_a_running_idempotent_mirror_to_stop_and_refuses_one_that_does_not(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    """Without transactions nothing fences a running mirror: the switch's drain waits until it has stopped at its
    next group sync (seeing the switch's mark), and refuses, naming it, when it does not stop."""
    from cutover.errors import Refused
    from cutover.mirror import runner

    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path, mode="idempotent")  # groups synced every second
    mirror_plan = load_plan(scoped)
    create_topic(plan.cluster("old"), f"{ns}.orders", 1)
    produce(plan.cluster("old"), f"{ns}.orders", _records(0, 10, 1))
    ready = tmp_path / "ready"
    proc = start_mirror(scoped, "--ready-file", str(ready))
    try:
        wait_for(lambda: ready.exists() or proc.poll() is not None, 120, "the mirror to start copying")
        switch_marked(scoped)
        assert runner.fence_layouts(mirror_plan, "forward", 30) == ["0/1"]
        assert proc.wait(timeout=30) == 8  # closed by the switch: done
        owners = cutover("mirror", "status", "--plan", str(scoped), "-o", "json").json()["owners"]
        assert [(o["shard"], o["ended"]) for o in owners] == [("0/1", "closed by the switch")]
        # One that does not stop (stopped by SIGSTOP: alive, never at a sync): refused after the wait, named.
        switch_marked(scoped, "open", "rollback")
        ready.unlink()
        proc = start_mirror(scoped, "--ready-file", str(ready))
        wait_for(lambda: ready.exists() or proc.poll() is not None, 120, "the mirror to start again")
        wait_for(lambda: any(o["ended"] is None for o in cutover("mirror", "status", "--plan", str(scoped), "-o",
                                                                 "json").json()["owners"]), 30, "its owner record")
        proc.send_signal(signal.SIGSTOP)
        switch_marked(scoped)
        with pytest.raises(Refused) as refused:
            runner.fence_layouts(mirror_plan, "forward", 2)
        assert f"shard 0/1 still runs (pid {proc.pid} on host" in str(refused.value), refused.value
        assert "cannot be fenced" in str(refused.value)
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.communicate(timeout=30)
