"""Promote and rollback as data (pure): the step lists, the dry run, hand-over problems."""

from __future__ import annotations

from pathlib import Path

from cutover.switch import journal, steps
from cutover.switch.effects import DryRun
from cutover.switch.journal import Journal
from tests.unit.switch_support import journal_run, unit_plan


def test_promote_steps_and_the_rollback_chosen_by_the_point_of_no_return(tmp_path: Path) -> None:
    plan = unit_plan(tmp_path)
    names = [s.name for s in steps.promote(plan)]
    assert names == ["hold", "arm-reverse-mirror", "freeze-producers", "wait-quiet", "drain-mirror",
                     "stop-consumers", "sync-groups", "check-drained", "start-reverse-mirror", "switch-clients",
                     "hand-over:legacy.orders", "resume"]
    no_reverse = unit_plan(tmp_path, switch={"reverse_mirror": False})
    assert not {"arm-reverse-mirror", "start-reverse-mirror"} & {s.name for s in steps.promote(no_reverse)}

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
    assert not (tmp_path / "routing.json").exists()


def test_a_table_pair_must_say_where_its_old_writer_stands(tmp_path: Path) -> None:
    plan = unit_plan(tmp_path, tables=[{"topic": "t", "old": "a.b", "new": "c.d"},
                                   {"topic": "u", "old": "a.e", "new": "c.f", "writer_offsets": "group"},
                                   {"topic": "v", "old": "a.g", "new": "c.h", "writer_offsets": "group",
                                    "writer_group": "lake-writer"}])
    problems = [p.handover_problem() for p in plan.spec.tables]
    assert problems[0] and "old_offset_columns is not set" in problems[0]
    assert problems[1] and "writer_group is not set" in problems[1]
    assert problems[2] is None
