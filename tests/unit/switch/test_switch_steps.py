"""Promote and rollback as data (pure): the step lists, the dry run, hand-over problems."""

from __future__ import annotations

from pathlib import Path

from cutover.switch import journal, steps
from cutover.switch.effects import DryRun
from cutover.switch.journal import Journal
from tests.unit.switch.switch_support import journal_run, unit_plan


def test_promote_steps_and_the_rollback_chosen_by_the_point_of_no_return(tmp_path: Path) -> None:
    plan = unit_plan(tmp_path)
    names = [s.name for s in steps.promote(plan)]
    assert names == ["hold", "arm-reverse-mirror", "freeze-producers", "wait-quiet", "drain-mirror",
                     "stop-consumers", "sync-groups", "check-drained", "start-reverse-mirror", "switch-clients",
                     "hand-over:legacy.orders", "resume", "reverse-mirror-running"]
    no_reverse = unit_plan(tmp_path, switch={"reverse_mirror": False})
    assert not {"arm-reverse-mirror", "start-reverse-mirror", "reverse-mirror-running"} & {
        s.name for s in steps.promote(no_reverse)}

    with Journal.open(tmp_path / "early", "promote") as j:
        journal_run(j, "promote", "a", ["hold", "freeze-producers", "wait-quiet", "drain-mirror", "stop-consumers",
                                 "sync-groups", "start-reverse-mirror"], crashed_in=None)
    early = journal.read(tmp_path / "early")
    assert [s.name for s in steps.rollback(plan, early)] == ["stop-reverse-mirror", "reopen-mirror", "resume"]

    with Journal.open(tmp_path / "armed", "promote") as j:  # refused at wait-quiet: the armed process is stopped
        journal_run(j, "promote", "a", ["hold", "arm-reverse-mirror", "freeze-producers"], crashed_in="wait-quiet")
    armed = journal.read(tmp_path / "armed")
    assert [s.name for s in steps.rollback(plan, armed)] == ["stop-reverse-mirror", "reopen-mirror", "resume"]

    with Journal.open(tmp_path / "late", "promote") as j:
        journal_run(j, "promote", "a", ["hold", "switch-clients"], crashed_in="hand-over:legacy.orders")
    late = journal.read(tmp_path / "late")
    assert [s.name for s in steps.rollback(plan, late)] == [
        "freeze-producers", "wait-quiet", "drain-reverse-mirror", "stop-consumers", "sync-groups",
        "check-drained", "switch-clients", "hand-back:legacy.orders", "reopen-mirror", "resume"]


def test_the_dry_run_says_every_step_and_changes_nothing(tmp_path: Path) -> None:
    plan = unit_plan(tmp_path, hooks={"freeze_producers": "./freeze.sh --all"})
    fx = DryRun(plan, outside=lambda _plan, _direction, _timeout: {"billing": [("audit", 0), ("audit", 1)]})
    for step in steps.promote(plan):
        step.act(fx)
    text = "\n".join(fx.lines)
    assert ("group billing also reads audit (partitions 0, 1), which this plan does not mirror: those offsets are "
            "left alone (its consumers of those topics must keep reading the old cluster)") in text
    assert "run hook freeze_producers: " + str(tmp_path / "freeze.sh") + " --all cluster=old" in text
    assert "no stop_consumers hook: the operator does it by hand" in text
    assert f"write {tmp_path / 'routing.json'}: active=new" in text
    assert "check the old cluster took no write since the drain; copy any late record" in text
    assert "legacy.orders: read the old writer's positions (offset columns of legacy.orders)" in text
    # the freeze hook's return is the evidence: no still floor at wait-quiet, a 1 s confirmation at check-drained
    assert ("once the freeze_producers hook has returned (evidence the producers stopped), wait until no transaction "
            "is open on its partitions") in text
    assert "keep the freeze until its end offsets have stood still for 1s since wait-quiet" in text
    assert "start the reverse mirror (new -> old) in the background, without waiting for it" in text
    assert fx.lines[-1].startswith("wait until the reverse mirror owns its partitions")  # after resume
    assert not (tmp_path / "routing.json").exists()

    by_hand = DryRun(unit_plan(tmp_path, gates={"quiet_period": "10s"}), outside=lambda _p, _d, _t: {})
    for step in steps.promote(by_hand.plan):
        step.act(by_hand)
    text = "\n".join(by_hand.lines)  # no freeze hook, no evidence: the whole quiet period
    assert "wait until the old cluster's end offsets stand still for 0.5s and no transaction is open" in text
    assert "keep the freeze until its end offsets have stood still for 10s since wait-quiet" in text


def test_a_table_pair_must_say_where_its_old_writer_stands(tmp_path: Path) -> None:
    plan = unit_plan(tmp_path, tables=[{"topic": "t", "old": "a.b", "new": "c.d"},
                                   {"topic": "u", "old": "a.e", "new": "c.f", "writer_offsets": "group"},
                                   {"topic": "v", "old": "a.g", "new": "c.h", "writer_offsets": "group",
                                    "writer_group": "lake-writer"}])
    problems = [p.handover_problem() for p in plan.spec.tables]
    assert problems[0] and "old_offset_columns is not set" in problems[0]
    assert problems[1] and "writer_group is not set" in problems[1]
    assert problems[2] is None


def test_each_declared_reader_is_moved_before_the_point_of_no_return_and_moved_back_by_rollback(
        tmp_path: Path) -> None:
    (tmp_path / "ck" / "offsets").mkdir(parents=True)
    (tmp_path / "ck" / "commits").mkdir()
    (tmp_path / "ck" / "offsets" / "3").write_text('v1\n{"batchWatermarkMs":0}\n{"orders":{"0":12}}')
    (tmp_path / "ck" / "commits" / "3").write_text('v1\n{"nextBatchWatermarkMs":0}')
    plan = unit_plan(tmp_path, readers=[{"name": "q", "kind": "spark-checkpoint", "checkpoint": "ck"}],
                     hooks={"stop_reader": "./stop.sh"})
    names = [s.name for s in steps.promote(plan)]
    assert names.index("sync-groups") < names.index("move-reader:q") < names.index("check-drained") \
        < names.index("switch-clients") < names.index("start-reader:q") < names.index("resume")

    fx = DryRun(plan, outside=lambda _plan, _direction, _timeout: {})
    for step in steps.promote(plan):
        fx.step = step.name
        step.act(fx)
    text = "\n".join(fx.lines)
    assert f"run hook stop_reader: {tmp_path / 'stop.sh'} cluster=old reader=q" in text
    assert (f"reader q: read the last committed batch of {tmp_path / 'ck'} (now: batch 3 committed, next records "
            "at {'orders': {'0': 12}}), translate its Kafka positions exactly to the new cluster") in text
    assert sorted(f.name for f in (tmp_path / "ck" / "offsets").iterdir()) == ["3"]  # a dry run writes nothing

    with Journal.open(tmp_path / "early", "promote") as j:  # stopped after the reader moved, before the switch
        journal_run(j, "promote", "a", ["hold", "freeze-producers", "wait-quiet", "drain-mirror", "stop-consumers",
                                        "sync-groups", "move-reader:q"], crashed_in="check-drained")
    assert [s.name for s in steps.rollback(plan, journal.read(tmp_path / "early"))] == [
        "move-reader:q", "start-reader:q", "reopen-mirror", "resume"]
    with Journal.open(tmp_path / "late", "promote") as j:
        journal_run(j, "promote", "a", ["hold", "sync-groups", "move-reader:q", "switch-clients"], finished=True)
    late = [s.name for s in steps.rollback(plan, journal.read(tmp_path / "late"))]
    assert late.index("sync-groups") < late.index("move-reader:q") < late.index("switch-clients") \
        < late.index("start-reader:q") < late.index("resume")
    with Journal.open(tmp_path / "before", "promote") as j:  # the reader was not moved yet: nothing to move back
        journal_run(j, "promote", "a", ["hold", "freeze-producers"], crashed_in="wait-quiet")
    assert not [n for n in (s.name for s in steps.rollback(plan, journal.read(tmp_path / "before"))) if "reader" in n]
