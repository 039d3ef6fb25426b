"""cutover promote and rollback on the real sandbox, with a live producer and consumer group
driven by the plan's hooks, SIGKILLs at every step, and the canonical table handed over
and back. Real Kafka, mirror, Spark, catalog; nothing mocked."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from cutover.drill.context import control_hooks
from cutover.drill.demo import ORDERS
from cutover.drill.traffic import GroupConsumer, Traffic
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive
from cutover.switch import background, journal
from cutover.verify import run as verify_run
from cutover.verify.results import LastVerify
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic, read_all
from tests.integration.shadow_util import rows, shadow

pytestmark = pytest.mark.usefixtures("spark")

PARTITIONS = 3
PROMOTE = ["hold", "arm-reverse-mirror", "freeze-producers", "wait-quiet", "drain-mirror", "stop-consumers",
           "sync-groups", "check-drained", "start-reverse-mirror", "switch-clients"]
ROLLBACK = ["freeze-producers", "wait-quiet", "drain-reverse-mirror", "stop-consumers", "sync-groups", "check-drained",
            "switch-clients"]


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _writes(script: Path, props: dict[str, str], topic: str, values: str, partition: int) -> str:
    """A hook line that writes the records `values` (a Python expression) to one partition, then waits for them."""
    script.write_text("from confluent_kafka import Producer\n"
                      f"p = Producer({props!r})\n"
                      f"[p.produce({topic!r}, v, partition={partition}) for v in {values}]\n"
                      "assert p.flush(30) == 0\n")
    return f'"{sys.executable}" "{script}"\n'


def _hooks(folder: Path, ctl: Path, kills: Path) -> dict[str, str]:
    """The drill's hooks that drive the sample traffic through its control files, plus one that SIGKILLs
    cutover on cue and one that keeps the old writer's restart offsets."""
    kill = (f'f="{kills}/$CUTOVER_ACTION.$CUTOVER_EVENT.$CUTOVER_STEP"\n'
            'if [ -f "$f" ]; then rm -f "$f"; echo "killing cutover at $CUTOVER_STEP"; kill -9 $PPID; '
            'while kill -0 $PPID 2>/dev/null; do :; done; fi\n')
    return {
        **control_hooks(folder, ctl),
        "switch_clients": _script(folder / "switch", 'echo "clients now use $CUTOVER_ACTIVE"\n'),
        "start_old_writer": _script(folder / "old-writer", f'echo "$CUTOVER_OFFSETS" > "{ctl}/old-writer.json"\n'),
        "before_step": _script(folder / "before", kill),
        "after_step": _script(folder / "after", kill),
    }


def _plan(sandbox: Sandbox, ns: str, tmp: Path, hooks: dict[str, str], tables: bool = True, **pair: Any) -> Plan:
    return derive(
        sandbox.plan_file, tmp / f"{ns}.yaml", merge=True,
        name=ns, topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}\\..*"]},
        mirror={"group_sync_interval": "1s"}, spark={"checkpoint_dir": str(tmp / "ck")},
        # verify runs beside live traffic, once the mirror trails by less than 200 records
        gates={"quiet_period": "2s", "verify_max_age": "1h", "max_lag_rows": {"old_ahead": 200}},
        switch={"journal_dir": str(tmp / "journal"), "quiet_timeout": "60s", "groups_timeout": "60s",
                "hook_timeout": "120s"},
        routing={"file": str(tmp / "routing.json")}, hooks=hooks,
        tables=[{"topic": f"{ns}.orders", "old": f"{ns}.legacy", "new": f"{ns}.orders",
                 "schema": [{"name": "seq", "type": "long", "nullable": False}],
                 "old_offset_columns": {"partition": "kafka_partition", "offset": "kafka_offset"}, **pair}]
        if tables else [])


def _legacy(plan: Plan, tmp: Path) -> Plan:
    """A plan whose shadow writes the legacy table from the old cluster: the old pipeline's stand-in."""
    pair = dataclasses.asdict(plan.spec.tables[0])
    pair = {k: v for k, v in pair.items() if v is not None and k != "new_writer"}  # the stand-in writes it
    return derive(plan.file, tmp / "legacy.yaml", name=f"{plan.name}_legacy",
                  tables=[{**pair, "old": f"{plan.name}.unused", "new": pair["old"]}])


def _switch(plan: Plan, action: str, kills: Path, steps: list[str], *args: str) -> tuple[int, dict[str, Any]]:
    """Run `cutover ACTION --execute` until it finishes, SIGKILLed once after each step (and once before two)."""
    for s in steps:
        (kills / f"{action}.after_step.{s}").touch()
    for s in steps[2:4]:
        (kills / f"{action}.before_step.{s}").touch()
    return _until_done(plan, action, kills, 3 * len(steps) + 3, *args)


def _switch_killed_once(plan: Plan, action: str, kills: Path, step: str) -> dict[str, Any]:
    """Run `cutover ACTION --execute` until it finishes, SIGKILLed once, right after `step`."""
    (kills / f"{action}.after_step.{step}").touch()
    killed, result = _until_done(plan, action, kills, 3)
    assert killed == 1
    return result


def _until_done(plan: Plan, action: str, kills: Path, most: int, *args: str) -> tuple[int, dict[str, Any]]:
    for killed in range(most):
        proc = subprocess.Popen([sys.executable, "-m", "cutover", action, "--plan", str(plan.file), "--execute",
                                 "-o", "json", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        out, err = proc.communicate(timeout=600)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # a Spark JVM left behind by the killed driver
        if proc.returncode == 0:
            assert not list(kills.iterdir()), f"kills not reached: {sorted(kills.iterdir())}"
            return killed, json.loads(out)
        assert proc.returncode == -signal.SIGKILL, f"{action} failed ({proc.returncode}):\n{err}"
    raise AssertionError(f"{action} did not finish")


@dataclasses.dataclass(frozen=True)
class LiveApp:
    plan: Plan
    ctl: Path
    kills: Path
    topic: str
    producer: Traffic
    consumer: GroupConsumer

    def settle(self) -> None:
        """Pause the producer and wait until the consumer group has processed everything it produced."""
        (self.ctl / "pause").touch()
        wait_for(lambda: (self.ctl / "producer.paused").exists(), 60, "the producer to pause")
        wait_for(lambda: self.consumer.count() >= self.producer.count(), 60,
                 "the consumer to process everything produced")

    def stop(self, mirror: subprocess.Popen[bytes] | None) -> None:
        self.producer.stop()
        self.consumer.stop()
        if mirror is not None and mirror.poll() is None:
            mirror.kill()
        background.stop(self.plan)


def _live_app(sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path, rate: float, **plan_args: Any) -> LiveApp:
    """A switch plan with the drill's hooks and the SIGKILL hooks, and the application, started: a producer
    and a consumer group on one topic that follow the routing file and the hooks."""
    ctl, kills = tmp_path / "ctl", tmp_path / "kills"
    ctl.mkdir()
    kills.mkdir()
    main = _plan(sandbox, ns, tmp_path, _hooks(tmp_path / "hooks", ctl, kills), **plan_args)
    topic = f"{ns}.orders"
    create_topic(plan.cluster("old"), topic, PARTITIONS)
    app = LiveApp(main, ctl, kills, topic, Traffic(main, ctl, [topic], rate=rate),
                  GroupConsumer(main, ctl, [topic], f"{ns}.billing"))
    app.producer.start()
    app.consumer.start()
    return app


@pytest.mark.slow
def test_promote_then_rollback_with_live_clients_and_kills_at_every_step(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    app = _live_app(sandbox, plan, ns, tmp_path, 100, schema=ORDERS)
    main, ctl, kills, topic, producer, consumer = app.plan, app.ctl, app.kills, app.topic, app.producer, app.consumer
    mirror = subprocess.Popen([sys.executable, "-m", "cutover", "mirror", "--plan", str(main.file)],
                              stdout=subprocess.DEVNULL, stderr=(tmp_path / "mirror.err").open("w"))
    try:
        wait_for(lambda: consumer.count() >= 150, 60, "the app to consume on the old cluster")
        legacy = _legacy(main, tmp_path)
        shadow(legacy, cluster="old")  # the old pipeline, up to now
        wait_for(lambda: cutover("mirror", "status", "--plan", str(main.file), "-o", "json").json()["lag"] < 200,
                 60, f"the mirror to catch up (its log: {tmp_path / 'mirror.err'})")
        shadow(main)

        dry = cutover("promote", "--plan", str(main.file), "--dry-run", "-o", "json")
        assert dry.code == 3, dry.err  # not verified yet: the one refusal; --verify below runs it
        assert [c["name"] for c in dry.json()["checks"] if not c["passed"]] == ["verify-passed"]
        assert [s["name"] for s in dry.json()["steps"]] == [*PROMOTE, f"hand-over:{ns}.legacy", "resume",
                                                            "reverse-mirror-running"]
        assert not (tmp_path / "journal").joinpath(ns, "journal.jsonl").exists()  # a dry run journals nothing

        # --verify: the first run verifies the tables now (Spark) before anything moves
        killed, promoted = _switch(main, "promote", kills, [*PROMOTE, f"hand-over:{ns}.legacy", "resume",
                                                            "reverse-mirror-running"], "--verify")
        assert killed == len(PROMOTE) + 3 + 2
        assert promoted["phase"] == "promoted" and promoted["freeze_window"]["seconds"] > 0
        assert json.loads((tmp_path / "routing.json").read_text())["active"] == "new"
        at_promote = producer.count()
        mirror.terminate()  # fenced by the drain: it could not copy on (and cannot, once records flow back)
        mirror.wait(60)

        wait_for(lambda: sum(1 for s in consumer.seen if s.cluster == "new") >= 150, 90,
                 "the app to produce and consume on the new cluster")
        shadow(main, canonical=True)  # cutover's writer of the canonical table, after promote
        killed, rolled = _switch(main, "rollback", kills, [*ROLLBACK, f"hand-back:{ns}.legacy", "reopen-mirror",
                                                           "resume"])
        assert killed == len(ROLLBACK) + 3 + 2
        on_new = [s for s in producer.sent if s.cluster == "new"]
        assert rolled["phase"] == "rolled-back" and rolled["carried_back"] == len(on_new) > 0
        assert json.loads((tmp_path / "routing.json").read_text())["active"] == "old"
        assert json.loads((ctl / "old-writer.json").read_text())[topic]  # the old writer's restart offsets

        consumed_before = consumer.count()
        wait_for(lambda: sum(1 for s in consumer.seen[consumed_before:] if s.cluster == "old") >= 100 and
                 producer.count() > at_promote + len(on_new) + 100, 90,
                 "the app to produce and consume on the old cluster again")
        app.settle()
    finally:
        app.stop(mirror)

    seqs = [s.seq for s in producer.sent]
    assert len(set(seqs)) == len(seqs) and not producer.errors  # every record acknowledged exactly once
    consumed = Counter(s.seq for s in consumer.seen)
    assert consumed == Counter(seqs), "each record processed exactly once: none re-read, none skipped"
    last_on_new = max(s.seq for s in on_new)
    assert all(s.cluster == "old" for s in producer.sent if s.seq > last_on_new)
    old_has = Counter(json.loads(r.value)["seq"] for r in read_all(plan.cluster("old"), topic, PARTITIONS))
    assert old_has == Counter(seqs), "the old cluster holds every record exactly once after the rollback"
    new_has = Counter(json.loads(r.value)["seq"] for r in read_all(plan.cluster("new"), topic, PARTITIONS))
    assert new_has == Counter(s for s in seqs if s <= last_on_new), "the new cluster: all up to the rollback, once"

    shadow(main, cluster="old", canonical=True)  # the old pipeline again, from where it was handed back
    in_table = Counter(r["seq"] for r in rows(main, f"{ns}.legacy"))
    assert in_table == Counter(seqs), "the canonical table holds every record exactly once through both switches"

    status = cutover("status", "--plan", str(main.file), "-o", "json")
    assert status.code == 0, status.err
    s = status.json()
    assert s["phase"] == "rolled-back" and s["routing"]["active"] == "old" and s["carried_back"] == len(on_new)
    assert [st["outcome"] for st in s["steps"]] == ["done"] * (len(ROLLBACK) + 3)
    forward = s["mirror"]["forward"]  # the old cluster took writes since: lag, expected after a rollback
    assert forward["lag"] > 0 and not forward["expected_to_run"] and "expected" in forward["role"], forward
    assert s["problems"] == [] and s["mirror"]["reverse"] is None  # not asked after a finished rollback
    # One cycle, two attempts, each folding the runs the SIGKILLs cut it into.
    assert s["cycle"] == 1 and [(a["cycle"], a["action"], a["outcome"], a["runs"]) for a in s["attempts"]] == [
        (1, "promote", "done", len(PROMOTE) + 3 + 3), (1, "rollback", "done", killed + 1)]
    assert s["attempts"][1]["carried_back"] == len(on_new) and s["attempts"][1]["freeze_window_seconds"] > 0
    assert forward["direction"] == "old -> new"
    text = cutover("status", "--plan", str(main.file))
    assert text.code == 0 and "(not running, as expected)" in text.out and "NOT OK" not in text.out, text.out
    assert text.out.startswith(f"plan {main.name}: phase rolled-back, cycle 1\nattempts:\n"), text.out
    history = journal.read(journal.directory(main))
    assert [r.outcome for r in history.runs].count("done") == 2
    again = cutover("promote", "--plan", str(main.file), "--dry-run", "-o", "json")  # a second cycle may begin
    assert {c["name"]: c["passed"] for c in again.json()["checks"]}["phase"] is True, again.out
    assert verify_run.last_result(main, f"{ns}.orders").passed  # type: ignore[union-attr]  # by promote --verify


def _tables_with_verify(plan: Plan, ns: str, result: dict[str, Any] | None) -> None:
    """The legacy and new tables (same columns) through pyiceberg, and a recorded verify result."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    from cutover.lake import catalog as catalog_mod

    assert plan.spec.catalog is not None
    cat = catalog_mod.load(plan.spec.catalog)
    schema = Schema(NestedField(1, "seq", LongType(), required=False))
    for name in (f"{ns}.legacy", f"{ns}.orders"):
        if not cat.table_exists(name):
            cat.create_namespace_if_not_exists(ns)
            cat.create_table(name, schema)
    if result is not None:
        verify_run.record(plan, f"{ns}.orders", LastVerify.from_property(json.dumps(result)))


def _refusals(plan: Plan, action: str = "promote") -> dict[str, str]:
    dry = cutover(action, "--plan", str(plan.file), "--dry-run", "-o", "json")
    assert dry.code == 3, (dry.code, dry.err)
    return {c["name"]: c["reason"] for c in dry.json()["checks"] if not c["passed"]}


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_each_precondition_refuses_with_its_reason_and_exit_3(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    from confluent_kafka import Consumer

    from tests.integration.kafka_util import produce

    main = derive((base := _plan(sandbox, ns, tmp_path, {})).file, base.file, merge=True, gates={"max_mirror_lag": 10})
    topic, group = f"{ns}.orders", f"{ns}.billing"
    create_topic(plan.cluster("old"), topic, 1)
    produce(plan.cluster("old"), topic, [{"value": b'{"seq": %d}' % i} for i in range(20)])
    assert cutover("mirror", "--plan", str(main.file), "--until-caught-up").code == 0
    produce(plan.cluster("old"), topic, [{"value": b'{"seq": %d}' % i} for i in range(20, 70)])
    _tables_with_verify(main, ns, None)
    member = Consumer({**plan.cluster("new"), "group.id": group})
    member.subscribe([topic])
    old_member = Consumer({**plan.cluster("old"), "group.id": group, "enable.auto.commit": False,
                           "auto.offset.reset": "earliest"})
    old_member.subscribe([topic])
    wait_for(lambda: old_member.poll(0.2) is not None, 30, "a record on the old cluster")
    old_member.commit(asynchronous=False)
    old_member.close()  # the group exists on old, with offsets, and has a member on new
    wait_for(lambda: member.poll(0.2) is not None or member.assignment(), 30, "the new member to join")
    lock = journal.acquire(journal.directory(main), "promote")
    try:
        refused = _refusals(main)
        assert "never been verified" in refused["verify-passed"]
        assert refused["mirror-lag"] == f"mirror lag > gate 10 on 1 partition(s): {topic}/0 (50)"
        assert refused["groups-idle-on-new"] == f"consumer groups have active members on the new cluster: {group} (1)"
        assert refused["not-running"].startswith('another promote or rollback holds the lock: {"what": "promote"')
        execute = cutover("promote", "--plan", str(main.file), "--execute")
        assert execute.code == 3 and "another promote or rollback is running" in execute.err
    finally:
        os.close(lock)
        member.close()
    execute = cutover("promote", "--plan", str(main.file), "--execute")
    assert execute.code == 3 and "promote refused by 2 precondition(s)" in execute.err, execute.err
    assert not journal.directory(main).joinpath("journal.jsonl").exists() and not (tmp_path / "routing.json").exists()

    now = dt.datetime.now(dt.UTC)
    _tables_with_verify(main, ns, {"at": now.isoformat(timespec="seconds"), "passed": False})
    assert "did not pass" in _refusals(main)["verify-passed"]
    _tables_with_verify(main, ns, {"at": (now - dt.timedelta(hours=2)).isoformat(timespec="seconds"),
                                   "passed": True})
    aged = _refusals(main)["verify-passed"]  # 120 min and the dry run's own time: 121 on a loaded machine
    assert re.search(r"is 12\d min old; gates\.verify_max_age is 60 min", aged), aged
    _tables_with_verify(main, ns, {"at": now.isoformat(timespec="seconds"), "passed": True,
                                   "lag": {"old_ahead": 250, "new_ahead": 0}})  # recorded under other gates
    assert ("the old table held 250 rows beyond the new table's position (gates.max_lag_rows.old_ahead is 200)"
            in _refusals(main)["verify-passed"])
    assert _refusals(main, "rollback") == {"phase": "there is nothing to roll back (phase ready)"}
    usage = cutover("promote", "--plan", str(main.file))
    assert usage.code == 2 and "needs --execute" in usage.err


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_every_precondition_is_checked_again_when_the_hold_is_released(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    """A promote held at the postpone file for hours must not switch on preconditions that held when it
    began: the mirror fell behind while it waited, so it refuses (exit 3) before the freeze, and its
    re-run checks everything again from the start."""
    from tests.integration.kafka_util import produce

    ctl = tmp_path / "ctl"
    ctl.mkdir()
    freeze = _script(tmp_path / "freeze", f'touch "{ctl}/frozen"\n')
    base = _plan(sandbox, ns, tmp_path, {"freeze_producers": freeze}, tables=False)
    main = derive(base.file, base.file, merge=True, gates={"max_mirror_lag": 10},
                  switch={"postpone_file": str(tmp_path / "hold"), "reverse_mirror": False})
    topic = f"{ns}.orders"
    create_topic(plan.cluster("old"), topic, 1)
    produce(plan.cluster("old"), topic, [{"value": b"%d" % i} for i in range(20)])
    assert cutover("mirror", "--plan", str(main.file), "--until-caught-up").code == 0
    (tmp_path / "hold").touch()
    held = subprocess.Popen([sys.executable, "-m", "cutover", "promote", "--plan", str(main.file), "--execute"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (s := cutover("status", "--plan", str(main.file), "-o", "json").json())["running"]
                 and s["steps"], 60, "promote to hold at the postpone file")
        produce(plan.cluster("old"), topic, [{"value": b"%d" % i} for i in range(20, 70)])  # nothing mirrors them
        (tmp_path / "hold").unlink()
        _out, err = held.communicate(timeout=120)
    finally:
        if held.poll() is None:
            held.kill()
    assert held.returncode == 3, err
    assert ("promote stopped at step hold: promote refused when the hold was released by 1 precondition(s):\n"
            f"  - mirror-lag: mirror lag > gate 10 on 1 partition(s): {topic}/0 (50)") in err, err
    assert not (ctl / "frozen").exists() and not (tmp_path / "routing.json").exists()
    s = cutover("status", "--plan", str(main.file), "-o", "json").json()
    assert s["phase"] == "promoting" and [(st["name"], st["outcome"]) for st in s["steps"]] == [("hold", "failed")]

    # Nothing changed at the hold, so the re-run checks every precondition again before it starts.
    again = cutover("promote", "--plan", str(main.file), "--execute")
    assert again.code == 3, again.err
    assert "promote refused by 1 precondition(s):\n  - mirror-lag: mirror lag > gate 10" in again.err, again.err
    assert cutover("mirror", "--plan", str(main.file), "--until-caught-up").code == 0
    done = cutover("promote", "--plan", str(main.file), "--execute", "-o", "json")
    assert done.code == 0, done.err
    assert done.json()["phase"] == "promoted" and (ctl / "frozen").exists()
    assert json.loads((tmp_path / "routing.json").read_text())["active"] == "new"


@pytest.mark.slow  # about a minute: in the slow suite, which CI also runs
def test_postpone_a_failing_hook_then_rollback_before_the_point_of_no_return(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    from tests.integration.kafka_util import produce

    ctl = tmp_path / "ctl"
    ctl.mkdir()
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    stop_hook = _script(hooks / "stop", 'echo "consumers refused to stop"\nexit 3\n')
    main = _plan(sandbox, ns, tmp_path, {
        "stop_consumers": stop_hook,
        "on_failure": _script(hooks / "failed", f'echo "$CUTOVER_STEP: $CUTOVER_ERROR" > "{ctl}/failure"\n'),
        "resume": _script(hooks / "resume", f'touch "{ctl}/resumed-$CUTOVER_ACTION-$CUTOVER_ACTIVE"\n'),
    }, tables=False)
    main = derive(main.file, main.file, merge=True, switch={"postpone_file": str(tmp_path / "hold"),
                                                            "quiet_timeout": "4s"})
    topic = f"{ns}.orders"
    create_topic(plan.cluster("old"), topic, 2)
    produce(plan.cluster("old"), topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(20)])
    assert cutover("mirror", "--plan", str(main.file), "--until-caught-up").code == 0
    writing = threading.Event()
    late: list[int] = []

    def unfrozen_producer() -> None:  # nothing freezes it: the quiet period can never be reached
        # One producer for the whole stream: a new one per record spends a second or more
        # starting on a loaded machine, long enough for the old cluster to look quiet.
        producer = Producer({**plan.cluster("old"), "enable.idempotence": True})
        while not writing.is_set():
            producer.produce(topic, value=b"late", partition=0)
            assert producer.flush(30) == 0
            late.append(1)
            writing.wait(0.05)

    (tmp_path / "hold").touch()
    first = subprocess.Popen([sys.executable, "-m", "cutover", "promote", "--plan", str(main.file), "--execute"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        held = wait_for(lambda: (s := cutover("status", "--plan", str(main.file), "-o", "json").json())["running"]
                        and s["steps"] and s, 60, "promote to hold at the postpone file")
        assert held["phase"] == "promoting" and held["steps"][0]["name"] == "hold"
        assert '"what": "promote"' in held["running"]
        second = cutover("promote", "--plan", str(main.file), "--execute")
        assert second.code == 3 and "another promote or rollback is running for this plan" in second.err
        producer = threading.Thread(target=unfrozen_producer)
        producer.start()
        wait_for(lambda: len(late) >= 3, 30, "writes to flow on the old cluster")
        (tmp_path / "hold").unlink()
        _out, err = first.communicate(timeout=120)
    finally:
        writing.set()
        if first.poll() is None:
            first.kill()
    producer.join(30)
    assert first.returncode == 3, err
    assert "promote stopped at step wait-quiet: writes keep arriving on the old cluster after the freeze" in err
    rerun = cutover("promote", "--plan", str(main.file), "--execute")  # continues at wait-quiet, now quiet
    err = rerun.err
    assert rerun.code == 1 and "[4/12] wait-quiet: wait until" in err and "hold: done earlier" in err, err
    assert ("promote stopped at step stop-consumers: hook stop_consumers (" + stop_hook + ") exited 3; "
            "its last lines:\n    consumers refused to stop") in err
    assert "cutover promote --execute again to continue from stop-consumers" in err
    assert (ctl / "failure").read_text().startswith("stop-consumers: hook stop_consumers")

    s = cutover("status", "--plan", str(main.file), "-o", "json").json()
    assert s["phase"] == "promoting" and s["running"] is None
    assert [(st["name"], st["outcome"]) for st in s["steps"]] == [
        ("hold", "done"), ("arm-reverse-mirror", "done"), ("freeze-producers", "done"), ("wait-quiet", "done"),
        ("drain-mirror", "done"), ("stop-consumers", "failed")]
    assert s["steps"][0]["detail"]["held_seconds"] > 0
    # no freeze_producers hook: no evidence that the producers stopped, so the whole quiet period is held
    assert s["steps"][3]["detail"]["evidence"] is None and s["steps"][3]["detail"]["hold_until_still_for"] == 2.0
    # the reverse mirror armed before the freeze goes with the promote that armed it, having copied nothing
    wait_for(lambda: cutover("status", "--plan", str(main.file), "-o", "json").json()["mirror"]["reverse_process"]
             is None, 30, "the armed reverse mirror to exit with its promote")
    assert "called off before the switch: exiting, nothing copied" in (
        journal.directory(main) / "reverse-mirror.log").read_text()

    dry = cutover("rollback", "--plan", str(main.file), "--dry-run", "-o", "json")
    assert dry.code == 0 and [st["name"] for st in dry.json()["steps"]] == [
        "stop-reverse-mirror", "reopen-mirror", "resume"]
    back = cutover("rollback", "--plan", str(main.file), "--execute", "-o", "json")
    assert back.code == 0, back.err
    assert back.json()["phase"] == "rolled-back" and not back.json()["past_point_of_no_return"]
    assert (ctl / "resumed-rollback-old").exists() and not (tmp_path / "routing.json").exists()

    _script(hooks / "stop", "exit 0\n")  # fixed: promote again, from the start
    again = cutover("promote", "--plan", str(main.file), "--execute", "-o", "json")
    assert again.code == 0, again.err
    assert [st["name"] for st in again.json()["steps"]][-4:] == ["start-reverse-mirror", "switch-clients", "resume",
                                                                "reverse-mirror-running"]
    assert (ctl / "resumed-promote-new").exists() and background.running(main)
    assert json.loads((tmp_path / "routing.json").read_text())["active"] == "new"
    again = cutover("promote", "--plan", str(main.file), "--execute", "-o", "json")
    assert again.code == 0 and again.json()["already_done"]
    # Past the point of no return the forward mirror refuses to start: a supervisor restarting it would
    # copy back what the reverse mirror carries to the old cluster. The switch says so in the mirror state.
    refused = cutover("mirror", "--plan", str(main.file), "--until-caught-up")
    assert refused.code == 8 and "the switch closed this mirror: promote closed the forward mirror" in refused.err, \
        refused.err

    journal_file = journal.directory(main) / "journal.jsonl"
    with journal_file.open("ab") as f:
        f.write(b'{"v": 1, "event": "begin", "action": "rollb')  # the operator's machine died mid-write
    back = cutover("rollback", "--plan", str(main.file), "--execute", "-o", "json")
    assert back.code == 0, back.err
    assert back.json()["carried_back"] == 0 and back.json()["past_point_of_no_return"]
    assert background.running(main) is None
    assert journal.read(journal.directory(main)).phase() == "rolled-back"  # the torn line was cut, not fused
    assert all(json.loads(line) for line in journal_file.read_bytes().splitlines())

    # The reverse mirror ran but carried nothing back (it only stepped over the forward mirror's last
    # commit marker): the forward mirror runs again, and a second promote goes all the way.
    forward = cutover("mirror", "--plan", str(main.file), "--until-caught-up")
    assert forward.code == 0, forward.err
    second = cutover("promote", "--plan", str(main.file), "--execute", "-o", "json")
    assert second.code == 0, second.err
    assert second.json()["phase"] == "promoted" and json.loads((tmp_path / "routing.json").read_text())["run"] == \
        second.json()["run"]
    assert cutover("rollback", "--plan", str(main.file), "--execute").code == 0


@pytest.mark.lake(only="rest")
def test_the_old_writers_position_can_come_from_its_consumer_group(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    from cutover.kafka.clients import ClusterRef
    from cutover.kafka.offsets import commit_group
    from cutover.switch import handover
    from tests.integration.kafka_util import produce

    writer = f"{ns}.lake-writer"
    main = _plan(sandbox, ns, tmp_path, {}, writer_offsets="group", writer_group=writer)
    topic = f"{ns}.orders"
    create_topic(plan.cluster("old"), topic, 3)
    produce(plan.cluster("old"), topic, [{"value": b"%d" % i, "partition": i % 3} for i in range(30)])
    commit_group(ClusterRef("old", plan.cluster("old")), writer, {(topic, 0): 4, (topic, 1): 7})
    positions, source = handover.writer_positions(None, main, main.spec.tables[0], 10)
    assert positions == {0: 4, 1: 7, 2: 0} and source == f"consumer group {writer}"  # 2: never read, log start


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_an_open_transaction_at_the_freeze_is_waited_out_or_refused_and_unmirrored_topics_stay_put(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    from confluent_kafka import Producer

    from cutover.kafka.clients import ClusterRef
    from cutover.kafka.offsets import group_info
    from tests.integration.kafka_util import produce
    from tests.integration.mirror_util import commit, content

    main = _plan(sandbox, ns, tmp_path, {}, tables=False)
    main = derive(main.file, main.file, merge=True, switch={"quiet_timeout": "8s"})
    old, new, topic = plan.cluster("old"), plan.cluster("new"), f"{ns}.orders"
    create_topic(old, topic, 2)
    produce(old, topic, [{"value": b"before %d" % i, "partition": i % 2} for i in range(20)])
    assert cutover("mirror", "--plan", str(main.file), "--until-caught-up").code == 0
    # A selected group that also reads a topic the plan does not mirror: that part is left alone.
    audit, group = f"{ns}_audit", f"{ns}.billing"
    create_topic(old, audit, 1)
    produce(old, audit, [{"value": b"audit %d" % i} for i in range(5)])
    commit(old, group, {(topic, 0): 5, (topic, 1): 6, (audit, 0): 3})
    dry = cutover("promote", "--plan", str(main.file), "--dry-run", "-o", "json")
    assert dry.code == 0, dry.err  # evaluated before anything is frozen
    sync_step = next(s for s in dry.json()["steps"] if s["name"] == "sync-groups")
    assert any(f"group {group} also reads {audit} (partitions 0), which this plan does not mirror" in line
               for line in sync_step["would"]), sync_step
    # An exactly-once application paused mid-transaction, and other producers' records behind it.
    app = Producer({**old, "transactional.id": f"{ns}-eos-app", "transaction.timeout.ms": 300_000})
    app.init_transactions(30)
    app.begin_transaction()
    for i in range(3):
        app.produce(topic, value=b"in the open transaction %d" % i, partition=0)
    assert app.flush(30) == 0
    produce(old, topic, [{"value": b"behind it %d" % i, "partition": i % 2} for i in range(10)])
    try:
        refused = cutover("promote", "--plan", str(main.file), "--execute")
        assert refused.code == 3, refused.err
        assert f"a transaction is open on the old cluster on {topic}/0: offsets 10..17 are undecided" in refused.err
        assert f"describe-producers --topic {topic} --partition 0" in refused.err
        assert "promote stopped at step wait-quiet" in refused.err
        assert not (tmp_path / "routing.json").exists()
        wait_for(lambda: background.running(main) is None, 30, "the armed reverse mirror to exit with its promote")

        # The re-run waits at wait-quiet; the application commits meanwhile: promote goes through.
        rerun = subprocess.Popen([sys.executable, "-m", "cutover", "promote", "--plan", str(main.file), "--execute"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        history = journal.directory(main)
        def waiting() -> bool:  # in wait-quiet for longer than the quiet period: it has seen the transaction
            runs = journal.read(history).runs
            steps = runs[-1].steps if len(runs) == 2 else []
            return bool(steps) and steps[-1].name == "wait-quiet" and steps[-1].outcome is None and \
                time.time() - steps[-1].started > 3
        wait_for(waiting, 60, "the re-run to wait at wait-quiet")
        app.commit_transaction(30)
        _out, err = rerun.communicate(timeout=300)
        assert rerun.returncode == 0, err
        steps = {s.name: s for s in journal.read(history).runs[-1].steps}
        assert steps["wait-quiet"].detail["open_transactions_seen"] == 1
        assert steps["sync-groups"].detail["unmirrored"] == {group: [{"topic": audit, "partitions": [0]}]}
        assert group_info(ClusterRef("new", new), group).offsets == {(topic, 0): 5, (topic, 1): 6}
        assert content(read_all(new, topic, 2)) == content(read_all(old, topic, 2))  # nothing left behind
        assert len(read_all(new, topic, 2)) == 33
    finally:
        background.stop(main)


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_a_record_a_missed_producer_writes_after_the_drain_is_copied_before_the_clients_switch(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    """A producer the freeze missed writes on the old cluster after the drain (here: while the consumers
    stop): promote copies it, and syncs the groups again, before the point of no return, so nothing
    is left behind on the cluster the clients leave. And the reverse mirror, armed before the freeze,
    copies none of what the freeze's drain carried forward (here: records written as the freeze began)
    back to the old cluster, only what the clients write on the new one."""
    from cutover.kafka.clients import ClusterRef
    from cutover.kafka.offsets import commit_group, group_info
    from tests.integration.kafka_util import produce
    from tests.integration.mirror_util import content

    old, new, topic, group = plan.cluster("old"), plan.cluster("new"), f"{ns}.orders", f"{ns}.billing"
    stop = _script(tmp_path / "stop", _writes(tmp_path / "late.py", old, topic, "[b'late']", 1))
    # five records written as the freeze begins, after the reverse mirror is armed
    freeze = _script(tmp_path / "freeze", _writes(tmp_path / "last.py", old, topic,
                                                  "[b'last %d' % i for i in range(5)]", 0))
    main = _plan(sandbox, ns, tmp_path, {"stop_consumers": stop, "freeze_producers": freeze}, tables=False)
    create_topic(old, topic, 2)
    produce(old, topic, [{"value": b"before %d" % i, "partition": i % 2} for i in range(20)])
    commit_group(ClusterRef("old", old), group, {(topic, 0): 10, (topic, 1): 10})  # read everything
    assert cutover("mirror", "--plan", str(main.file), "--until-caught-up").code == 0
    try:
        promoted = cutover("promote", "--plan", str(main.file), "--execute", "-o", "json")
        assert promoted.code == 0, promoted.err
        on_new = read_all(new, topic, 2)
        assert content(on_new) == content(read_all(old, topic, 2)) and len(on_new) == 26  # the late one too
        steps = {s.name: s for s in journal.read(journal.directory(main)).runs[-1].steps}
        assert steps["check-drained"].detail["late_offsets"] == {f"{topic}/1": 1}, steps["check-drained"].detail
        assert steps["arm-reverse-mirror"].detail["armed"] is True
        assert steps["start-reverse-mirror"].detail["armed_before_freeze"] is True
        assert steps["arm-reverse-mirror"].detail["pid"] == steps["start-reverse-mirror"].detail["pid"]
        # after resume, the one let go inside the window is confirmed running (the clients did not wait for it)
        assert steps["reverse-mirror-running"].detail["pid"] == steps["start-reverse-mirror"].detail["pid"]
        # the freeze hook returned: evidence; the ends needed to stand still only for the confirmation window
        assert steps["wait-quiet"].detail["evidence"] == "the freeze_producers hook returned"
        assert steps["wait-quiet"].detail["hold_until_still_for"] == 1.0
        produce(new, topic, [{"value": b"after %d" % i, "partition": i % 2} for i in range(4)])
        wait_for(lambda: len(read_all(old, topic, 2)) >= 30, 60, "the reverse mirror to carry the new writes back")
        on_old = read_all(old, topic, 2)
        assert sorted(r.value for r in on_old) == sorted(
            [b"before %d" % i for i in range(20)] + [b"last %d" % i for i in range(5)] + [b"late"]
            + [b"after %d" % i for i in range(4)]), [r.value for r in on_old]
        assert "copying them before the clients switch" in promoted.err
        late_copy = [r for r in on_new if r.partition == 1][-1]
        assert late_copy.value == b"late"
        # the group had read all 10 of partition 1 before the late record: it reads the late one next
        offsets = group_info(ClusterRef("new", new), group).offsets
        assert offsets[(topic, 1)] == late_copy.offset, offsets
        # on partition 0 it had read the ten before the freeze: it reads the first written as the freeze began next
        first_last = next(r for r in on_new if r.partition == 0 and r.value == b"last 0")
        assert offsets[(topic, 0)] == first_last.offset, offsets
    finally:
        background.stop(main)


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_a_record_a_missed_producer_writes_on_the_new_cluster_during_rollback_is_carried_back(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    """Rollback's check-drained, as promote's: a record written on the new cluster after the reverse drain
    (here: while the consumers stop) is carried back, and the groups synced again, before the clients
    return to the old cluster."""
    from cutover.kafka.clients import ClusterRef
    from cutover.kafka.offsets import commit_group, group_info
    from tests.integration.kafka_util import produce

    old, new, topic, group = plan.cluster("old"), plan.cluster("new"), f"{ns}.orders", f"{ns}.billing"
    late = _writes(tmp_path / "late.py", new, topic, "[b'late']", 1)
    stop = _script(tmp_path / "stop", f'[ "$CUTOVER_ACTION" = rollback ] && {late}exit 0\n')
    main = _plan(sandbox, ns, tmp_path, {"stop_consumers": stop}, tables=False)
    create_topic(old, topic, 2)
    produce(old, topic, [{"value": b"before %d" % i, "partition": i % 2} for i in range(20)])
    assert cutover("mirror", "--plan", str(main.file), "--until-caught-up").code == 0
    try:
        promoted = cutover("promote", "--plan", str(main.file), "--execute")
        assert promoted.code == 0, promoted.err
        produce(new, topic, [{"value": b"after %d" % i, "partition": i % 2} for i in range(4)])
        on_new = read_all(new, topic, 2)
        commit_group(ClusterRef("new", new), group, {(t, p): max(r.offset for r in on_new if r.partition == p) + 1
                                                     for t, p in [(topic, 0), (topic, 1)]})  # read everything
        back = cutover("rollback", "--plan", str(main.file), "--execute", "-o", "json")
        assert back.code == 0, back.err
        steps = {s.name: s for s in journal.read(journal.directory(main)).runs[-1].steps}
        assert steps["check-drained"].detail["late_offsets"] == {f"{topic}/1": 1}, steps["check-drained"].detail
        on_old = read_all(old, topic, 2)
        assert sorted(r.value for r in on_old) == sorted(
            [b"before %d" % i for i in range(20)] + [b"after %d" % i for i in range(4)] + [b"late"])
        late_copy = [r for r in on_old if r.partition == 1][-1]
        assert late_copy.value == b"late"
        # the group had read everything on the new cluster before the late record: it reads the late one next
        offsets = group_info(ClusterRef("old", old), group).offsets
        assert offsets[(topic, 1)] == late_copy.offset, offsets
        assert offsets[(topic, 0)] > max(r.offset for r in on_old if r.partition == 0), offsets
    finally:
        background.stop(main)


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_a_table_the_platform_writes_is_handed_over_by_the_routing_file_once_it_caught_up_and_back(
        sandbox: Sandbox, spark: Any, tmp_path: Path, ns: str) -> None:
    """tables[].new_writer: tansu (the layout of Tansu's Iceberg sink; on Tansu itself in test_tansu_lake.py): promote
    names the platform's table in the routing file only once it holds every record the mirror copied, per
    partition (else it stops at that step, naming the partitions, and resumes there); rollback names the old
    pipeline's table again."""
    from cutover.lake import tables
    from tests.integration.kafka_util import produce
    from tests.integration.test_verify import TANSU_LAYOUT

    main = _plan(sandbox, ns, tmp_path, {}, new=f"{ns}.tansu", new_writer="tansu", key=["seq"],
                 old_offset_columns={"partition": "kafka_partition", "offset": "kafka_offset",
                                     "timestamp": "kafka_timestamp"})
    topic = f"{ns}.orders"
    create_topic(main.cluster("old"), topic, PARTITIONS)
    produce(main.cluster("old"), topic, [{"value": json.dumps({"seq": i}).encode(), "partition": i % PARTITIONS}
                                         for i in range(12)])
    assert cutover("mirror", "--plan", str(main.file), "--until-caught-up").code == 0
    shadow(_legacy(main, tmp_path), cluster="old")
    layout = TANSU_LAYOUT.replace("named_struct('id', id, 'name', name, 'amount', amount, 'score', score)",
                                  "named_struct('seq', seq)").replace("concat('\"k', id", "concat('\"k', seq")
    spark.sql(layout.format(t=tables.qualified(main, f"{ns}.tansu"), old=tables.qualified(main, f"{ns}.legacy"))
              + " WHERE seq <> 4")  # the platform's table one record short on partition 1
    verify_run.record(main, f"{ns}.tansu", LastVerify.from_property(json.dumps(
        {"at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "passed": True})))
    short = cutover("promote", "--plan", str(main.file), "--execute", "--timeout", "5", timeout=600)
    assert short.code == 1, short.err
    assert f"table {ns}.tansu did not catch up within 5s" in short.err and "partition 1: 3 of 4" in short.err
    routing = tmp_path / "routing.json"
    assert not routing.exists()  # the clients were not switched
    spark.sql(f"INSERT INTO {tables.qualified(main, f'{ns}.tansu')} SELECT"  # the record arrives
              + layout.split(" AS SELECT", 1)[1].format(old=tables.qualified(main, f"{ns}.legacy")) + " WHERE seq = 4")
    done = cutover("promote", "--plan", str(main.file), "--execute", "-o", "json", timeout=600)
    assert done.code == 0, done.err
    assert json.loads(routing.read_text())["tables"] == {f"{ns}.legacy": f"{ns}.tansu"}
    back = cutover("rollback", "--plan", str(main.file), "--execute", "-o", "json", timeout=600)
    assert back.code == 0, back.err
    assert json.loads(routing.read_text())["tables"] == {f"{ns}.legacy": f"{ns}.legacy"}
    background.stop(main)
