"""`cutover complete` and `cutover cancel` on the sandbox: what each refuses, lists, removes and keeps, how the
mirror services they retire end (exit 8), a complete killed mid-way and finished by its re-run, and the
completion record that ends the plan.

The demo (test_drill.py, test_three_brokers.py) ends with complete on its table pairs too: there the final verify
runs and the shadow's leftovers go as the plan's complete section says.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer

from cutover.kafka.clients import ClusterRef
from cutover.kafka.inspect import list_groups, partition_counts
from cutover.kafka.offsets import commit_group, group_info
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive
from cutover.switch import background, journal
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic, produce, read_all


def _plan(sandbox: Sandbox, ns: str, tmp: Path, **extra: Any) -> Plan:
    return derive(sandbox.plan_file, tmp / f"{ns}.yaml", merge=True, name=ns,
                  topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}\\..*"]},
                  # a state_prefix of its own: state topics shared with another plan are never removed
                  mirror={"group_sync_interval": "1s", "state_prefix": f"__cutover_{ns}"},
                  spark={"checkpoint_dir": str(tmp / "ck")},
                  gates={"quiet_period": "1s"}, routing={"file": str(tmp / "routing.json")},
                  switch={"journal_dir": str(tmp / "journal"), "quiet_timeout": "60s", "groups_timeout": "60s"},
                  **extra)


def _kill_hook(folder: Path, kills: Path) -> str:
    """A hook that SIGKILLs cutover when a file named action.event.step is in `kills`."""
    path = folder / "kill"
    path.write_text("#!/bin/sh\n"
                    f'f="{kills}/$CUTOVER_ACTION.$CUTOVER_EVENT.$CUTOVER_STEP"\n'
                    'if [ -f "$f" ]; then rm -f "$f"; kill -9 $PPID; while kill -0 $PPID 2>/dev/null; do :; done; fi\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _state_topics(plan: Plan) -> dict[str, list[str]]:
    from cutover.kafka.clients import admin

    prefix = plan.spec.mirror.state_prefix
    return {side: sorted(t for t in admin(ClusterRef.of(plan, side)).list_topics(timeout=30).topics
                         if t.startswith(f"{prefix}.mirror.")) for side in ("old", "new")}


def _mirrored(plan: Plan, ns: str, records: int, committed: tuple[int, int]) -> tuple[str, str]:
    """Topic {ns}.orders (two partitions, `records` records) and group {ns}.billing (at `committed`) on the old
    cluster, mirrored to the new one."""
    topic, group = f"{ns}.orders", f"{ns}.billing"
    create_topic(plan.cluster("old"), topic, 2)
    produce(plan.cluster("old"), topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(records)])
    commit_group(ClusterRef.of(plan, "old"), group, {(topic, 0): committed[0], (topic, 1): committed[1]})
    assert cutover("mirror", "--plan", str(plan.file), "--until-caught-up").code == 0
    return topic, group


def _mirror(plan: Plan, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "cutover", "mirror", "--plan", str(plan.file), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _ended_with_8(proc: subprocess.Popen[str], timeout: float) -> str:
    try:
        _out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 8, (proc.returncode, err[-2000:])
    return err


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_complete_retires_the_mirror_services_survives_a_kill_and_ends_the_plan(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    kills = tmp_path / "kills"
    kills.mkdir()
    kill = _kill_hook(tmp_path, kills)
    main = _plan(sandbox, ns, tmp_path, tables=[], hooks={"before_step": kill, "after_step": kill})
    old, new = plan.cluster("old"), plan.cluster("new")
    topic, group = _mirrored(main, ns, 20, (4, 6))
    # Another plan between the same clusters with the same state_prefix: the state topics hold its state too.
    # (In two shards: state is keyed by shard layout, so two plans that both ran as 0/1 would overwrite each
    # other's checkpoints; see the limitations page.)
    other = derive(main.file, tmp_path / "other.yaml", name=f"{ns}_other", topics={"include": [f"{ns}x\\..*"]},
                   groups={"include": [f"{ns}x\\..*"]}, switch={"journal_dir": str(tmp_path / "other-journal")})
    create_topic(old, f"{ns}x.other", 2)
    produce(old, f"{ns}x.other", [{"value": b"other", "partition": p} for p in (0, 1)])
    for shard in ("0/2", "1/2"):
        assert cutover("mirror", "--plan", str(other.file), "--until-caught-up", "--shard", shard).code == 0
    forward = _mirror(main)  # the forward mirror as a service
    try:
        promoted = cutover("promote", "--plan", str(main.file), "--execute", "-o", "json")
        assert promoted.code == 0, promoted.err
        assert "the switch closed this mirror" in _ended_with_8(forward, 120)
    finally:
        if forward.poll() is None:
            os.killpg(forward.pid, signal.SIGKILL)
    produce(new, topic, [{"value": b"new-%d" % i, "partition": 0} for i in range(5)])  # clients write on new now
    background.stop(main)  # the reverse mirror, from here on as a supervised service instead of promote's
    reverse = _mirror(main, "--reverse")
    try:
        wait_for(lambda: len(read_all(old, topic, 2, timeout=5)) == 25, 90, "the reverse mirror to carry 5 back")

        # A consumer still reading the old cluster's selected topic: refused, naming it; nothing changes.
        stray = Consumer({**old, "group.id": f"{ns}.stray", "auto.offset.reset": "earliest"})
        stray.subscribe([topic])
        try:
            wait_for(lambda: stray.poll(0.2) is not None or stray.assignment(), 60, "the stray consumer to join")
            dry = cutover("complete", "--plan", str(main.file), "--dry-run", "-o", "json")
            assert dry.code == 3, dry.err
            reasons = {c["name"]: c["reason"] for c in dry.json()["checks"] if not c["passed"]}
            assert reasons == {"no-readers-on-old": f"consumers still read the old cluster's selected topics: group "
                               f"{ns}.stray ({topic}); move them to the new cluster (or stop them) first"}
            refused = cutover("complete", "--plan", str(main.file), "--execute")
            assert refused.code == 3 and "no-readers-on-old" in refused.err
        finally:
            stray.close()
        assert reverse.poll() is None  # the refusal retired nothing
        names = [s["name"] for s in cutover("complete", "--plan", str(main.file), "--dry-run", "-o",
                                            "json").json()["steps"]]
        assert names == ["retire-mirrors", "remove-mirror-state"]  # no table pairs in this plan

        # Killed right after retiring the mirrors: the supervised reverse mirror has ended (exit 8), the
        # phase says completing, and promote and rollback are refused until a re-run finishes it.
        (kills / "complete.after_step.retire-mirrors").touch()
        killed = cutover("complete", "--plan", str(main.file), "--execute")
        assert killed.code == -signal.SIGKILL, killed.err
        assert "the migration ended: cutover complete" in _ended_with_8(reverse, 120)
    finally:
        if reverse.poll() is None:
            os.killpg(reverse.pid, signal.SIGKILL)
    status = cutover("status", "--plan", str(main.file), "-o", "json").json()
    assert status["phase"] == "completing"
    assert cutover("rollback", "--plan", str(main.file), "--execute").code == 3

    done = cutover("complete", "--plan", str(main.file), "--execute", "-o", "json")
    assert done.code == 0, done.err
    result = done.json()
    assert result["phase"] == "completed" and [s["name"] for s in result["steps"]] == ["retire-mirrors",
                                                                                       "remove-mirror-state"]
    prefix = main.spec.mirror.state_prefix
    # The reverse mirror's state (on the old cluster) was this plan's alone: removed. The forward one's (on the
    # new cluster) holds the other plan's too: kept, with this plan's mirrors marked ended in it.
    assert sorted((i["kind"], i["name"], i["where"]) for i in result["removed"]) == [
        ("state-topic", f"{prefix}.mirror.{t}", "old cluster") for t in ("offsets", "progress")]
    shared = (f"the forward mirror's state (kept: it holds another plan's state too: topic "
              f"{ns}x.other; this plan's mirrors are marked ended in it)")
    assert sorted((k["kind"], k["name"], k["where"], k["note"]) for k in result["kept"]) == [
        ("state-topic", f"{prefix}.mirror.{t}", "new cluster", shared) for t in ("offsets", "progress")]
    assert _state_topics(main) == {"old": [], "new": [f"{prefix}.mirror.offsets", f"{prefix}.mirror.progress"]}
    for shard in ("0/2", "1/2"):  # the other plan goes on
        assert cutover("mirror", "--plan", str(other.file), "--until-caught-up", "--shard", shard).code == 0

    # The record replaced the journal; status tells the story from it; the plan is done.
    folder = journal.directory(main)
    assert not (folder / "journal.jsonl").exists() and (folder / journal.RECORD).exists()
    assert Path(result["journal"]).exists() and Path(result["journal"]).parent == folder / "archive"
    status = cutover("status", "--plan", str(main.file), "-o", "json")
    assert status.code == 0, status.err
    s = status.json()
    assert s["phase"] == "completed" and s["ended"]["at"] == result["at"]
    assert [a["action"] for a in s["attempts"]] == ["promote", "complete"]
    assert [a["outcome"] for a in s["attempts"]] == ["done", "done"] and s["attempts"][1]["runs"] == 2
    again = cutover("promote", "--plan", str(main.file), "--dry-run", "-o", "json")
    assert again.code == 3 and "this migration was completed at" in again.out
    assert cutover("complete", "--plan", str(main.file), "--execute").code == 0  # already: nothing to do

    # A mirror service started again ends at once, either way: the forward state says the plan ended.
    assert "the migration ended" in _ended_with_8(_mirror(main), 60)
    assert "the migration ended" in _ended_with_8(_mirror(main, "--reverse"), 60)
    # Nothing was lost on either side: 25 records each, the group where the clients left it.
    assert len(read_all(old, topic, 2)) == len(read_all(new, topic, 2)) == 25
    assert group_info(ClusterRef.of(plan, "new"), group).offsets == {(topic, 0): 4, (topic, 1): 6}


def _catalog_leftovers(plan: Plan, ns: str) -> None:
    """What the shadow leaves in the catalog, made with pyiceberg: the new table with a snapshot and a commit
    branch of a run that stopped, and its dead-letter table."""
    import pyarrow as pa
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    from cutover.lake import catalog as catalog_mod

    assert plan.spec.catalog is not None
    cat = catalog_mod.load(plan.spec.catalog)
    cat.create_namespace_if_not_exists(ns)
    table = cat.create_table(f"{ns}.orders", Schema(NestedField(1, "seq", LongType(), required=False)))
    table.append(pa.table({"seq": pa.array([1, 2, 3], pa.int64())}))
    snapshot = table.current_snapshot()
    assert snapshot is not None
    table.manage_snapshots().create_branch(snapshot.snapshot_id, "cutover_deadrun").commit()
    cat.create_table(f"{ns}.orders_dead_letter", Schema(NestedField(1, "error", LongType(), required=False)))


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_cancel_lists_then_removes_what_cutover_made_and_leaves_the_old_cluster_alone(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    from cutover.lake import tables

    main = _plan(sandbox, ns, tmp_path, tables=[{"topic": f"{ns}.orders", "old": f"{ns}.legacy",
                                                 "new": f"{ns}.orders", "key": ["seq"]}])
    old, new = plan.cluster("old"), plan.cluster("new")
    topic, group = _mirrored(main, ns, 30, (7, 9))
    _catalog_leftovers(main, ns)
    checkpoints = tmp_path / "ck" / ns / f"{ns}.orders"
    checkpoints.mkdir(parents=True)
    (checkpoints / "offsets").write_text("v1\n")
    assert group in list_groups(ClusterRef.of(plan, "new"))

    member = Consumer({**new, "group.id": group})  # a consumer already on the new cluster: refused
    member.subscribe([topic])
    try:
        wait_for(lambda: member.poll(0.2) is not None or member.assignment(), 60, "the member to join")
        dry = cutover("cancel", "--plan", str(main.file), "--dry-run", "-o", "json")
        assert dry.code == 3, dry.err
        reasons = {c["name"]: c["reason"] for c in dry.json()["checks"] if not c["passed"]}
        # the table was committed to seconds ago, as a shadow still running would
        assert reasons.pop("shadow-stopped").startswith(f"the shadow still commits to {ns}.orders (last commit ")
        assert reasons == {"groups-idle-on-new": f"consumer groups have active members on the new cluster: {group} "
                           "(1)"}
    finally:
        member.close()

    # Once the table has taken no commit for three triggers (15 s at least), the shadow counts as stopped.
    dry = wait_for(lambda: (d := cutover("cancel", "--plan", str(main.file), "--dry-run", "-o", "json")).code != 3
                   and d, 60, "the cancel's preconditions to hold", interval=1)
    assert dry.code == 0, dry.err
    would = {s["name"]: s["would"] for s in dry.json()["steps"]}
    prefix = main.spec.mirror.state_prefix
    assert would["remove-groups"] == [f"remove group {group} (new cluster): offsets the mirror translated and "
                                      "committed"]
    assert sorted(would["remove-shadow-tables"]) == sorted([
        f"remove new-table {ns}.orders (catalog): the shadow's table",
        f"remove dead-letter-table {ns}.orders_dead_letter (catalog): records the shadow could not decode",
        f"remove checkpoints {checkpoints} (disk): Spark's checkpoints of the shadow's runs"])
    assert would["remove-mirrored-topics"] == [f"keep   mirrored-topic {topic} (new cluster): a topic the mirror "
                                               "created and filled (kept: remove it too with "
                                               "--delete-mirrored-topics)"]
    assert would["remove-mirror-state"] == [f"remove state-topic {prefix}.mirror.{t} (new cluster): the forward "
                                            "mirror's state" for t in ("progress", "offsets")]
    # The dry run changed nothing.
    assert group in list_groups(ClusterRef.of(plan, "new")) and tables.exists(main, f"{ns}.orders")
    assert checkpoints.exists() and not journal.directory(main).joinpath("journal.jsonl").exists()

    done = cutover("cancel", "--plan", str(main.file), "--execute", "--delete-mirrored-topics", "-o", "json")
    assert done.code == 0, done.err
    result = done.json()
    assert result["phase"] == "cancelled" and result["kept"] == []
    assert sorted((i["kind"], i["name"]) for i in result["removed"]) == sorted([
        ("group", group), ("new-table", f"{ns}.orders"), ("dead-letter-table", f"{ns}.orders_dead_letter"),
        ("checkpoints", str(checkpoints)), ("mirrored-topic", topic),
        ("state-topic", f"{prefix}.mirror.progress"), ("state-topic", f"{prefix}.mirror.offsets")])
    assert group not in list_groups(ClusterRef.of(plan, "new"))
    assert not tables.exists(main, f"{ns}.orders") and not tables.exists(main, f"{ns}.orders_dead_letter")
    assert not checkpoints.exists() and topic not in partition_counts(ClusterRef.of(plan, "new"))
    assert _state_topics(main)["new"] == []
    # The old cluster keeps everything: its records and the group's offsets.
    assert sorted(r.value for r in read_all(old, topic, 2)) == sorted(b"%d" % i for i in range(30))
    assert group_info(ClusterRef.of(plan, "old"), group).offsets == {(topic, 0): 7, (topic, 1): 9}
    s = cutover("status", "--plan", str(main.file), "-o", "json").json()
    assert s["phase"] == "cancelled" and [a["action"] for a in s["attempts"]] == ["cancel"]
    refused = cutover("promote", "--plan", str(main.file), "--execute")
    assert refused.code == 3 and "this migration was cancelled at" in refused.err


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_a_shadow_service_ends_with_8_when_the_switch_hands_its_table_to_the_other_clusters_writer(
        sandbox: Sandbox, plan: Plan, spark: Any, ns: str, tmp_path: Path) -> None:
    """The old pipeline's stand-in (cutover shadow --follow writing the canonical table from the old cluster) is
    still running when promote hands the table over: at its next batch it ends with exit 8, writing nothing
    more, and a restart by its supervisor ends with 8 at once."""
    import pytest

    from cutover.kafka.inspect import cluster_id
    from cutover.lake import tables
    from cutover.shadow.writer import HandedOver
    from cutover.switch import handover
    from tests.integration.shadow_util import shadow, shadow_plan, start_shadow

    pair = {"topic": f"{ns}.orders", "schema": [{"name": "seq", "type": "long", "nullable": False}]}
    stand_in = shadow_plan(sandbox.plan_file, ns, tmp_path, [{**pair, "old": f"{ns}.unused", "new": f"{ns}.legacy"}])
    canonical = derive(stand_in.file, tmp_path / "canonical.yaml", tables=[{**pair, "old": f"{ns}.legacy",
                                                                            "new": f"{ns}.orders"}])
    old = plan.cluster("old")
    create_topic(old, f"{ns}.orders", 1)
    produce(old, f"{ns}.orders", [{"value": b'{"seq": %d}' % i} for i in range(10)])

    def rows() -> int:
        return sum(tables.table_offsets(stand_in, f"{ns}.legacy").positions.values())

    service = start_shadow(stand_in, tmp_path / "shadow.log", "--follow", "--cluster", "old")
    try:
        wait_for(lambda: tables.exists(stand_in, f"{ns}.legacy") and rows() == 10, 180, "the stand-in's first rows")
        # promote's hand-over, as the switch writes it: the new cluster's positions stamped on the table
        new_id = cluster_id(ClusterRef.of(plan, "new"))
        handover.stamp(spark, canonical, canonical.spec.tables[0], new_id, {0: 0}, {"direction": "forward",
                                                                                     "run": "test"}, 0)
        produce(old, f"{ns}.orders", [{"value": b'{"seq": %d}' % i} for i in range(10, 15)])  # the next batch
        service.wait(180)
    finally:
        if service.poll() is None:
            os.killpg(service.pid, signal.SIGKILL)
    log = (tmp_path / "shadow.log").read_text()
    assert service.returncode == 8, log[-3000:]
    assert f"table {ns}.legacy was handed over: its newest stamp is cluster {new_id}'s" in log
    held = tables.table_offsets(stand_in, f"{ns}.legacy")
    assert held.cluster_id == new_id and held.positions == {0: 0}  # nothing written after the hand-over
    # Its supervisor's restart ends at once, the same way.
    with pytest.raises(HandedOver, match=f"table {ns}.legacy was handed over"):
        shadow(stand_in, cluster="old")
