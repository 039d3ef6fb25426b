"""promote, rollback, complete and cancel refused by a precondition, on the sandbox: with --execute -o json
the checks go to stdout as the dry run gives them (exit 3 still), nothing is journaled, and each refusing
precondition names every failing item. Refusals that need no mirror, no table and no Spark."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive
from cutover.switch import journal
from tests.conftest import cutover
from tests.integration.kafka_util import create_topic, produce


def _plan(sandbox: Sandbox, ns: str, tmp: Path, **more: Any) -> Plan:
    return derive(sandbox.plan_file, tmp / f"{ns}.yaml", merge=True, name=ns,
                  topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}\\..*"]},
                  switch={"journal_dir": str(tmp / "journal")}, routing={"file": str(tmp / "routing.json")},
                  mirror={"state_prefix": f"__cutover_{ns}"},  # its own state: other plans mirror beside it
                  tables=[], **more)


def _refused(checks: list[dict[str, Any]]) -> dict[str, str]:
    return {c["name"]: c["reason"] for c in checks if not c["passed"]}


def test_an_executed_switch_that_a_precondition_refuses_prints_the_checks_in_json_and_writes_nothing(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    main = _plan(sandbox, ns, tmp_path, hooks={"freeze_producers": str(tmp_path / "no-such-hook")},
                 gates={"max_mirror_lag": 10})
    orders, payments = f"{ns}.orders", f"{ns}.payments"
    for topic in (orders, payments):
        create_topic(plan.cluster("old"), topic, 2)
    # orders is mirrored, then falls behind; payments never is: both are named, and each partition
    only_orders = derive(main.file, tmp_path / "orders.yaml", merge=True, topics={"include": [f"{ns}\\.orders"]})
    produce(plan.cluster("old"), orders, [{"value": b"%d" % i, "partition": i % 2} for i in range(10)])
    assert cutover("mirror", "--plan", str(only_orders.file), "--until-caught-up").code == 0
    produce(plan.cluster("old"), orders, [{"value": b"%d" % i, "partition": i % 2} for i in range(50)])

    dry = cutover("promote", "--plan", str(main.file), "--dry-run", "-o", "json")
    assert dry.code == 3, dry.err
    run = cutover("promote", "--plan", str(main.file), "--execute", "-o", "json")
    assert run.code == 3, run.err
    assert "promote refused by 2 precondition(s)" in run.err
    shown = run.json()
    assert (shown["action"], shown["plan"], shown["dry_run"], shown["passed"], shown["phase"]) == \
        ("promote", ns, False, False, "ready")
    assert _refused(shown["checks"]) == _refused(dry.json()["checks"])  # the same verdicts as the dry run's
    assert _refused(shown["checks"])["mirror-lag"] == (
        f"the mirror has not started on 2 partition(s): {payments}/0, {payments}/1 (run cutover mirror); "
        f"mirror lag > gate 10 on 2 partition(s): {orders}/0 (25), {orders}/1 (25)")
    assert "no-such-hook" in _refused(shown["checks"])["hooks"]
    assert not (journal.directory(main) / "journal.jsonl").exists() and not (tmp_path / "routing.json").exists()

    for action, name, reason in (("rollback", "phase", "there is nothing to roll back (phase ready)"),
                                 ("complete", "phase", "complete follows a finished promote; the phase is ready"),
                                 ("cancel", "hooks", "no-such-hook")):
        run = cutover(action, "--plan", str(main.file), "--execute", "-o", "json")
        assert run.code == 3 and f"error: {action} refused by" in run.err, (action, run.err)
        assert run.json()["action"] == action and reason in _refused(run.json()["checks"])[name], run.out
    assert not (journal.directory(main) / "journal.jsonl").exists()

    lock = journal.acquire(journal.directory(main), "promote")  # another promote runs
    try:
        run = cutover("promote", "--plan", str(main.file), "--execute", "-o", "json")
    finally:
        os.close(lock)
    assert run.code == 3 and "another promote or rollback is running" in run.err, run.err
    assert _refused(run.json()["checks"])["not-running"].startswith("another promote or rollback is running")


def test_a_dry_run_with_verify_says_that_verify_runs_at_execute_and_what_it_read_instead(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    main = _plan(sandbox, ns, tmp_path)
    main = derive(main.file, main.file, tables=[{"topic": f"{ns}.orders", "old": f"{ns}.legacy", "new": f"{ns}.orders",
                                                 "schema": [{"name": "seq", "type": "long"}]}])
    dry = cutover("promote", "--plan", str(main.file), "--dry-run", "--verify", "-o", "json")
    assert dry.code == 3, dry.err
    assert _refused(dry.json()["checks"])["verify-passed"] == (
        f"{ns}.orders has never been verified (run cutover verify, or promote --verify); with --verify, promote "
        "--execute runs cutover verify before this check: the dry run changes nothing, so it read the last "
        "recorded results")


def test_a_dry_run_that_cannot_say_what_a_step_would_do_says_so_and_exits_1(
        sandbox: Sandbox, ns: str, tmp_path: Path, silent_port: int) -> None:
    """cancel's dry run with the old cluster hanging: its preconditions ask only the new cluster and pass, but
    a step cannot list what it would remove (the mirror's state, found through the old cluster's id). That is
    no "would find nothing": exit 1, each step named with why, `explained` false in JSON."""
    hung = _plan(sandbox, ns, tmp_path, clusters={"old": {"bootstrap.servers": f"127.0.0.1:{silent_port}"}})
    run = cutover("cancel", "--plan", str(hung.file), "--dry-run", "--timeout", "3", "-o", "json", timeout=120)
    assert run.code == 1, run.err
    shown = run.json()
    assert shown["passed"] and shown["explained"] is False
    unknown = {s["name"]: s["unknown"] for s in shown["steps"] if s["unknown"]}
    assert "remove-mirror-state" in unknown, shown["steps"]
    assert all(f"127.0.0.1:{silent_port}" in u[0] for u in unknown.values()), unknown
    assert f"the dry run could not say what {len(unknown)} step(s) would do" in run.err, run.err
    assert "fix: make what each names" in run.err
    assert "a bug in cutover" not in run.err and "Traceback" not in run.err
