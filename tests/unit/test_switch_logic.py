"""Pure logic of the switch: the journal and its lock, step lists, waits, hooks, routing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cutover.errors import CutoverError, Refused
from cutover.plan import Plan, load_plan
from cutover.switch import hooks, journal, routing, steps, waits
from cutover.switch.effects import DryRun
from cutover.switch.journal import Journal


def _plan(tmp_path: Path, **extra: Any) -> Plan:
    data = {"name": "unit", "clusters": {"old": {"bootstrap.servers": "old:9092"},
                                         "new": {"bootstrap.servers": "new:9092"}},
            "tables": [{"topic": "orders", "old": "legacy.orders", "new": "cutover.orders",
                        "old_offset_columns": {"partition": "p", "offset": "o"}}],
            "routing": {"file": "routing.json"}, **extra}
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_plan(path)


def _run(j: Journal, action: str, run: str, done: list[str], crashed_in: str | None = None,
         finished: bool = False) -> None:
    j.append("begin", action=action, run=run, mode="execute", steps=[])
    for name in done:
        j.append("step-start", run=run, step=name)
        j.append("step-end", run=run, step=name, outcome="done", detail={"n": name})
    if crashed_in:
        j.append("step-start", run=run, step=crashed_in)
    if finished:
        j.append("end", action=action, run=run, outcome="done", detail={"past_point_of_no_return": True})


def test_journal_folds_crashed_runs_into_one_attempt(tmp_path: Path) -> None:
    with Journal.open(tmp_path, "promote") as j:
        _run(j, "promote", "a", ["hold", "freeze-producers"], crashed_in="wait-quiet")
        _run(j, "promote", "b", ["wait-quiet"], crashed_in="drain-mirror")
    h = journal.read(tmp_path)
    assert h.phase() == "promoting"
    assert set(h.done_steps("promote")) == {"hold", "freeze-producers", "wait-quiet"}
    assert h.started_steps("promote") == {"hold", "freeze-producers", "wait-quiet", "drain-mirror"}
    assert [r.run for r in h.promote_attempt()] == ["a", "b"]


def test_a_finished_promote_then_rollback_attempts(tmp_path: Path) -> None:
    with Journal.open(tmp_path, "promote") as j:
        _run(j, "promote", "a", ["hold"], crashed_in="freeze-producers")
        _run(j, "promote", "b", ["freeze-producers", "switch-clients"], finished=True)
        _run(j, "rollback", "c", ["freeze-producers"], crashed_in="wait-quiet")
    h = journal.read(tmp_path)
    assert h.phase() == "rolling-back"
    assert [r.run for r in h.promote_attempt()] == ["a", "b"]
    assert [r.run for r in h.rollback_attempt()] == ["c"]
    assert set(h.done_steps("rollback")) == {"freeze-producers"}
    assert h.done_steps("promote") == {}  # the latest run is a rollback: promote has no open attempt
    assert steps.past_point_of_no_return(h)


def test_a_torn_last_line_is_ignored_but_a_corrupt_middle_line_is_refused(tmp_path: Path) -> None:
    with Journal.open(tmp_path, "promote") as j:
        _run(j, "promote", "a", ["hold"])
    path = tmp_path / "journal.jsonl"
    with path.open("a") as f:
        f.write('{"v": 1, "event": "step-st')  # the machine died mid-write
    assert set(journal.read(tmp_path).done_steps("promote")) == {"hold"}
    path.write_text("garbage\n" + path.read_text())
    with pytest.raises(journal.JournalError, match=r"journal\.jsonl:1"):
        journal.read(tmp_path)


def test_a_torn_tail_is_cut_back_before_the_next_entry_is_appended(tmp_path: Path) -> None:
    """A crash mid-write leaves a fragment; the next writer must not fuse its entry onto it."""
    with Journal.open(tmp_path, "promote") as j:
        _run(j, "promote", "a", ["hold"], crashed_in="freeze-producers")
    path = tmp_path / "journal.jsonl"
    whole = path.read_bytes()
    with path.open("ab") as f:
        f.write(b'{"v": 1, "event": "step-end", "run": "a", "st')  # the machine died mid-write
    with Journal.open(tmp_path, "promote") as j:  # the re-run opens the journal and goes on
        assert path.read_bytes() == whole, "the torn fragment is cut back on open, before any append"
        _run(j, "promote", "b", ["freeze-producers"], finished=True)
    h = journal.read(tmp_path)  # every later reader can read every line
    assert h.phase() == "promoted" and [r.run for r in h.runs] == ["a", "b"]
    assert all(json.loads(line) for line in path.read_bytes().splitlines())


def test_an_unknown_journal_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "journal.jsonl").write_text(json.dumps({"v": 99, "event": "begin"}) + "\n")
    with pytest.raises(journal.JournalError, match="version 99"):
        journal.read(tmp_path)


def test_the_lock_refuses_a_second_operator_and_dies_with_its_holder(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys; from pathlib import Path; from cutover.switch.journal import acquire\n"
        f"acquire(Path({str(tmp_path)!r}), 'promote'); print('held', flush=True); sys.stdin.read()")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # holds the lock until killed
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(Refused, match=f'"pid": {holder.pid}'):
            journal.acquire(tmp_path, "rollback")
        assert journal.holder(tmp_path) is not None
    finally:
        holder.kill()
        holder.wait()
    assert journal.holder(tmp_path) is None  # SIGKILL released it: no stale lock
    os.close(journal.acquire(tmp_path, "rollback"))


def test_promote_steps_and_the_rollback_chosen_by_the_point_of_no_return(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    names = [s.name for s in steps.promote(plan)]
    assert names == ["hold", "freeze-producers", "wait-quiet", "drain-mirror", "stop-consumers", "sync-groups",
                     "start-reverse-mirror", "switch-clients", "hand-over:legacy.orders", "resume"]
    no_reverse = _plan(tmp_path, switch={"reverse_mirror": False})
    assert "start-reverse-mirror" not in [s.name for s in steps.promote(no_reverse)]

    with Journal.open(tmp_path / "early", "promote") as j:
        _run(j, "promote", "a", ["hold", "freeze-producers", "wait-quiet", "drain-mirror", "stop-consumers",
                                 "sync-groups", "start-reverse-mirror"], crashed_in=None)
    early = journal.read(tmp_path / "early")
    assert [s.name for s in steps.rollback(plan, early)] == ["stop-reverse-mirror", "reopen-mirror", "resume"]

    with Journal.open(tmp_path / "late", "promote") as j:
        _run(j, "promote", "a", ["hold", "switch-clients"], crashed_in="hand-over:legacy.orders")
    late = journal.read(tmp_path / "late")
    assert [s.name for s in steps.rollback(plan, late)] == [
        "freeze-producers", "wait-quiet", "drain-reverse-mirror", "stop-consumers", "sync-groups",
        "switch-clients", "hand-back:legacy.orders", "reopen-mirror", "resume"]


def test_the_dry_run_says_every_step_and_changes_nothing(tmp_path: Path) -> None:
    plan = _plan(tmp_path, hooks={"freeze_producers": "./freeze.sh --all"})
    fx = DryRun(plan, outside=lambda _plan, _direction: {"billing": [("audit", 0), ("audit", 1)]})
    for step in steps.promote(plan):
        step.act(fx)
    text = "\n".join(fx.lines)
    assert ("group billing also reads audit (partitions 0, 1), which this plan does not mirror: those offsets are "
            "left alone (its consumers of those topics must keep reading the old cluster)") in text
    assert "run hook freeze_producers: " + str(tmp_path / "freeze.sh") + " --all cluster=old" in text
    assert "no stop_consumers hook: the operator does it by hand" in text
    assert f"write {tmp_path / 'routing.json'}: active=new" in text
    assert "legacy.orders: read the old writer's positions (offset columns of legacy.orders)" in text
    assert not (tmp_path / "routing.json").exists()


class FakeClock(waits.Clock):
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def test_quiet_waits_for_a_still_period_and_refuses_when_writes_go_on() -> None:
    ends = iter([{("t", 0): (5, 5)}, {("t", 0): (6, 6)}, {("t", 0): (7, 7)}] + [{("t", 0): (7, 7)}] * 100)
    done = waits.quiet(lambda: next(ends), period=2.0, deadline=30, where="old", clock=FakeClock())
    assert done["moves"] == 2 and done["quiet_seconds"] == pytest.approx(3.0)

    counter = iter(range(10_000))
    with pytest.raises(Refused, match=r"writes keep arriving on old after the freeze: .* t/0 from offset"):
        waits.quiet(lambda: {("t", 0): (n := next(counter), n)}, period=2.0, deadline=5, where="old",
                    clock=FakeClock())


def test_quiet_waits_out_an_open_transaction_then_refuses_naming_it() -> None:
    """High watermarks that stand still are not enough: a transaction left open holds the last stable
    offset below them, and what lies behind it is not readable committed, so it would not be mirrored."""
    resolved = iter([{("t", 0): (20, 12), ("t", 1): (4, 4)}] * 8 + [{("t", 0): (21, 21), ("t", 1): (4, 4)}] * 100)
    done = waits.quiet(lambda: next(resolved), period=2.0, deadline=30, where="old", clock=FakeClock())
    assert done["ends"] == {"t/0": 21, "t/1": 4} and done["open_transactions_seen"] == 1

    with pytest.raises(Refused) as refused:
        waits.quiet(lambda: {("t", 0): (20, 12), ("t", 1): (4, 4)}, period=2.0, deadline=10, where="the old cluster",
                    clock=FakeClock(), bootstrap="127.0.0.1:9092")
    text = refused.value.message + (refused.value.fix or "")
    assert "a transaction is open on the old cluster on t/0: offsets 12..19 are undecided" in text
    assert "kafka-transactions.sh --bootstrap-server 127.0.0.1:9092 describe-producers --topic t --partition 0" in text
    assert "abort --topic t --partition 0 --start-offset 12" in text and "t/1" not in text


def test_hold_waits_while_the_postpone_file_exists(tmp_path: Path) -> None:
    plan = _plan(tmp_path, switch={"postpone_file": "hold"})
    (tmp_path / "hold").touch()

    class Removing(FakeClock):
        def sleep(self, seconds: float) -> None:
            super().sleep(seconds)
            if self.t >= 3:
                (tmp_path / "hold").unlink(missing_ok=True)

    assert waits.hold(plan, Removing())["held_seconds"] == pytest.approx(3.0)


def test_hooks_get_their_context_and_a_failure_names_the_hook(tmp_path: Path) -> None:
    script = tmp_path / "hook.sh"
    script.write_text('#!/bin/sh\necho "$CUTOVER_PLAN $CUTOVER_STEP $CUTOVER_ACTIVE $CUTOVER_NEW_BOOTSTRAP"'
                      ' > "$1"\n[ "$CUTOVER_STEP" = bad ] && { echo "cannot freeze"; exit 7; }\nexit 0\n')
    script.chmod(0o755)
    plan = _plan(tmp_path, hooks={"freeze_producers": f"./hook.sh {tmp_path / 'out'}"})
    assert hooks.run(plan, "freeze_producers", hooks.environment(plan, step="good", active="new"), 30) == {
        "hook": "freeze_producers", "exit": 0}
    assert (tmp_path / "out").read_text().split() == ["unit", "good", "new", "new:9092"]
    with pytest.raises(hooks.HookFailed, match=r"freeze_producers .* exited 7; its last lines:\n    cannot freeze"):
        hooks.run(plan, "freeze_producers", hooks.environment(plan, step="bad"), 30)
    assert hooks.run(plan, "resume", {}, 30) is None  # no hook for the event: nothing runs
    script.chmod(0o644)
    assert hooks.check(plan) == [f"hook freeze_producers: {script} does not exist or is not executable"]


def test_routing_is_replaced_atomically_and_holds_no_secret(tmp_path: Path) -> None:
    plan = _plan(tmp_path, clusters={"old": {"bootstrap.servers": "old:9092"},
                                     "new": {"bootstrap.servers": "new:9092", "sasl.password": "s3cret"}})
    assert routing.active(plan) == "old"
    routing.write(plan, "new", "r1")
    text = (tmp_path / "routing.json").read_text()
    assert json.loads(text)["bootstrap.servers"] == "new:9092" and "s3cret" not in text
    assert routing.active(plan) == "new" and not list(tmp_path.glob(".routing.json.tmp"))
    (tmp_path / "routing.json").write_text("{not json")
    with pytest.raises(CutoverError, match=r"routing file .* cannot be read"):
        routing.active(plan)


def test_a_table_pair_must_say_where_its_old_writer_stands(tmp_path: Path) -> None:
    plan = _plan(tmp_path, tables=[{"topic": "t", "old": "a.b", "new": "c.d"},
                                   {"topic": "u", "old": "a.e", "new": "c.f", "writer_offsets": "group"},
                                   {"topic": "v", "old": "a.g", "new": "c.h", "writer_offsets": "group",
                                    "writer_group": "lake-writer"}])
    problems = [p.handover_problem() for p in plan.spec.tables]
    assert problems[0] and "old_offset_columns is not set" in problems[0]
    assert problems[1] and "writer_group is not set" in problems[1]
    assert problems[2] is None


def test_secrets_in_hook_output_and_the_journal_are_masked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "leaky.sh"
    script.write_text('#!/bin/sh\necho "connecting with pw-Zq81x"\nexit 1\n')
    script.chmod(0o755)
    plan = _plan(tmp_path, hooks={"resume": "./leaky.sh"},
                 clusters={"old": {"bootstrap.servers": "old:9092"},
                           "new": {"bootstrap.servers": "new:9092", "sasl.password": "pw-Zq81x"}})
    with pytest.raises(hooks.HookFailed) as failed:
        hooks.run(plan, "resume", {}, 30)
    err = capsys.readouterr().err
    assert "connecting with *****" in err and "pw-Zq81x" not in err
    with Journal.open(tmp_path / "j", "promote") as j:
        j.append("step-end", run="r", step="resume", outcome="failed", error=failed.value.message)
    text = (tmp_path / "j" / "journal.jsonl").read_text()
    assert "pw-Zq81x" not in text and "*****" in text
