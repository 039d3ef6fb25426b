"""The reverse mirror (new -> old) and the commands of its direction, against the real sandbox: refused before
any promote, writing nothing on the old cluster (and old -> new writes nothing after promote); after promote, a
reverse mirror started by hand says whom it takes the direction over from, the one fenced says by whom, and
`cutover status` names the owner."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from socket import gethostname
from typing import Any

import pytest

from cutover.kafka.clients import ClusterRef
from cutover.kafka.inspect import list_groups
from cutover.kafka.offsets import commit_group
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive, load_plan
from cutover.switch import background, journal
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic, produce
from tests.integration.mirror_util import scoped_plan, stop, switch_marked


def _old_side(plan: Plan, ns: str) -> tuple[list[str], list[str]]:
    """The old cluster's topics and groups of this test (its names, its state prefix): what a reverse command
    would write there. The sandbox is shared, so only this test's names are compared."""
    from cutover.kafka.clients import admin

    old = ClusterRef.of(plan, "old")
    topics = sorted(t for t in admin(old).list_topics(timeout=30).topics if ns in t)
    return topics, [g for g in list_groups(old, 30) if ns in g]


@pytest.mark.slow  # a long scenario: CI runs it in a slow lane (.ci/run)
def test_every_reverse_command_before_any_promote_is_refused_and_writes_nothing(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    old, topic = plan.cluster("old"), f"{ns}.orders"
    create_topic(old, topic, 2)
    produce(old, topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(20)])
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path, state_prefix=f"__cutover_{ns}")
    assert cutover("mirror", "--plan", str(scoped), "--until-caught-up").code == 0
    # a group on the new cluster alone: a reverse sync would commit it on the old one
    commit_group(ClusterRef.of(plan, "new"), f"{ns}.app", {(topic, 0): 4, (topic, 1): 6})
    before = _old_side(load_plan(scoped), ns)
    assert before == ([topic], [])

    for args in (["mirror", "--reverse", "--until-caught-up"], ["mirror", "--reverse"],
                 ["mirror", "--reverse", "--workers", "2"], ["offsets", "sync", "--reverse"],
                 ["mirror", "status", "--reverse"], ["offsets", "translate", "--reverse", "--group", f"{ns}.app"]):
        run = cutover(*args, "--plan", str(scoped))
        assert run.code == 3, (args, run.code, run.err)
        command = " ".join(args[:next(i for i, a in enumerate(args) if a.startswith("--"))])
        assert run.err.startswith(f"error: cutover {command} --reverse: there has been no promote of plan {ns} ") \
            and "\n  fix: drop --reverse" in run.err, (args, run.err)
        assert "Traceback" not in run.err and run.out == "", (args, run.out)
        assert _old_side(load_plan(scoped), ns) == before, args
    # the other commands of the way back: refused before they read a checkpoint or ask a registry
    extra = derive(scoped, tmp_path / "extra.yaml", merge=True,
                   registry={"old": {"url": "http://127.0.0.1:1"}, "new": {"url": "http://127.0.0.1:2"}},
                   readers=[{"name": "query", "kind": "spark-checkpoint", "checkpoint": str(tmp_path / "ck")}])
    for args in (["readers", "translate", "--reverse", "--reader", "query", "--execute"],
                 ["registry", "sync", "--reverse", "--execute"]):
        run = cutover(*args, "--plan", str(extra.file))
        assert run.code == 3 and run.err.startswith(f"error: cutover {' '.join(args[:2])} --reverse: there has been "
                                                    f"no promote of plan {ns} "), (args, run.code, run.err)
    # the forward mirror goes on as before
    assert cutover("mirror", "--plan", str(scoped), "--until-caught-up").code == 0

    # After promote the forward direction writes nothing: a group sync old -> new is refused, nothing committed.
    commit_group(ClusterRef.of(plan, "old"), f"{ns}.billing", {(topic, 0): 2, (topic, 1): 3})
    before = _old_side(load_plan(scoped), ns)
    switch_marked(scoped)
    run = cutover("offsets", "sync", "--plan", str(scoped))
    assert run.code == 3 and run.err.startswith(f"error: cutover offsets sync: promote closed the forward mirror of "
                                                f"plan {ns} (run test-promote, "), run.err
    assert f"{ns}.billing" not in list_groups(ClusterRef.of(plan, "new"), 30)

    # After a rollback the clients write to the old cluster again: what writes new -> old is refused, what
    # reads the reverse direction's story answers.
    switch_marked(scoped, "open", "rollback")
    for args in (["mirror", "--reverse", "--until-caught-up"], ["offsets", "sync", "--reverse"]):
        run = cutover(*args, "--plan", str(scoped))
        assert run.code == 3 and f"plan {ns} was rolled back (cutover rollback run test-rollback" in run.err, \
            (args, run.err)
        assert "fix: drop --reverse" in run.err and _old_side(load_plan(scoped), ns) == before, args
    shown = cutover("mirror", "status", "--reverse", "--plan", str(scoped), "-o", "json")
    assert shown.code == 0 and shown.json()["direction"] == "reverse", shown.err
    assert _old_side(load_plan(scoped), ns) == before


def _switch_plan(sandbox: Sandbox, ns: str, tmp: Path) -> Plan:
    """The cheapest plan a real promote takes: no tables, no hooks, a quiet period of a second; its own state
    prefix, journal and routing file."""
    return derive(sandbox.plan_file, tmp / f"{ns}.yaml", merge=True, name=ns,
                  topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}\\..*"]},
                  mirror={"group_sync_interval": "1s", "state_prefix": f"__cutover_{ns}"},
                  gates={"quiet_period": "1s"}, routing={"file": str(tmp / "routing.json")},
                  switch={"journal_dir": str(tmp / "journal"), "quiet_timeout": "60s", "groups_timeout": "60s"})


def _reverse_owners(plan: Plan) -> list[dict[str, Any]]:
    run = cutover("status", "--plan", str(plan.file), "-o", "json")
    reverse = run.json()["mirror"]["reverse"]
    assert reverse is not None and "error" not in reverse, run.err
    return list(reverse.get("owners", []))


# A real promote, with no table, hook or reader: 25 to 55 s here, so in the default suite.
@pytest.mark.slow  # a long scenario: CI runs it in a slow lane (.ci/run)
def test_a_reverse_mirror_started_by_hand_after_promote_says_whom_it_takes_over_and_status_names_it(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    main, new, topic, host = _switch_plan(sandbox, ns, tmp_path), plan.cluster("new"), f"{ns}.orders", gethostname()
    create_topic(plan.cluster("old"), topic, 2)
    produce(plan.cluster("old"), topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(20)])
    assert cutover("mirror", "--plan", str(main.file), "--until-caught-up").code == 0
    promoted = cutover("promote", "--plan", str(main.file), "--execute", "-o", "json")
    assert promoted.code == 0, promoted.err
    by_promote = background.running(main)
    assert by_promote is not None
    hand: subprocess.Popen[str] | None = None
    try:
        first = wait_for(lambda: _reverse_owners(main), 60,
                         "status to name promote's reverse mirror")
        assert [(o["shard"], o["pid"], o["host"], o["started_by"], o["alive"], o["ended"], o["took_over"])
                for o in first] == [("0/1", by_promote, host, "promote", True, None, None)]

        err_file = tmp_path / "hand.err"
        with err_file.open("w") as err:
            hand = subprocess.Popen([sys.executable, "-m", "cutover", "mirror", "--plan", str(main.file), "--reverse"],
                                    stdout=subprocess.PIPE, stderr=err, text=True)
        said = (f"taking over the reverse mirror's shard 0/1 from pid {by_promote} on host {host}, started by "
                "cutover promote at ")
        wait_for(lambda: said in err_file.read_text(), 60, "the hand-started mirror to say whom it takes over")

        def fenced() -> bool:  # the fenced one learns it at its next transaction: give it one
            produce(new, topic, [{"value": b"on new", "partition": 0}])
            return background.running(main) is None
        wait_for(fenced, 90, "promote's reverse mirror to stop, fenced", interval=1)
        log = (journal.directory(main) / "reverse-mirror.log").read_text()
        assert ("the reverse mirror's shard 0/1 was taken over by another mirror process" in log
                and f"runs now as pid {hand.pid} on host {host}, started by hand at " in log), log[-3000:]

        now = wait_for(lambda: [o for o in _reverse_owners(main) if o["pid"] == hand.pid], 60,
                       "status to name the hand-started reverse mirror")
        assert [(o["shard"], o["host"], o["started_by"], o["drain"], o["alive"], o["ended"]) for o in now] == [
            ("0/1", host, "hand", False, True, None)]
        assert {k: now[0]["took_over"][k] for k in ("pid", "host", "started_by")} == {
            "pid": by_promote, "host": host, "started_by": "promote"}
        text = cutover("status", "--plan", str(main.file)).out
        assert (f"shard 0/1: pid {hand.pid} on host {host}, started by hand at " in text
                and f"running; it took the shard over from pid {by_promote} on host {host} (started by cutover "
                    "promote)" in text), text

        code, _out, _err = stop(hand)
        assert code == 0, err_file.read_text()[-2000:]
        assert [(o["pid"], o["ended"], o["alive"]) for o in _reverse_owners(main)] == [(hand.pid, "stopped", False)]
    finally:
        if hand is not None and hand.poll() is None:
            hand.kill()
        background.stop(main)
