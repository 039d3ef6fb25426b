"""Every shipped runbook, run on the sandbox with reduced parameters; a failing expectation; a
malformed runbook; a sandbox fault against a plan that is not the sandbox. Real everything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from cutover.drill import model, runner
from cutover.drill.demo import ORDERS
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive
from tests.conftest import cutover

pytestmark = pytest.mark.usefixtures("spark")

#: full-migration runs through `cutover demo` below (the same runbook on the demo plan); platform-table-pilot through
#: `cutover demo --platform new=tansu` in test_tansu_lake.py (it needs Tansu writing its tables), and
#: platform-table-schema-change there too
RUNBOOKS = sorted(p for p in (Path(__file__).parents[2] / "runbooks").glob("*.yaml")
                  if p.stem not in ("full-migration", "platform-table-pilot", "platform-table-schema-change"))
SMALL = {"rate": "100", "records": "150", "backlog": "600"}


def drill_plan(sandbox: Sandbox, ns: str, tmp: Path) -> Plan:
    return derive(
        sandbox.plan_file, tmp / "plan.yaml", merge=True,
        name=ns, topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}\\..*"]},
        mirror={"group_sync_interval": "1s"}, spark={"trigger_interval": "1s", "checkpoint_dir": str(tmp / "ck")},
        gates={"quiet_period": "2s", "max_lag_rows": {"old_ahead": 500}},
        tables=[{"topic": f"{ns}.orders", "old": f"{ns}_legacy.orders", "new": f"{ns}.orders", "schema": ORDERS,
                 "old_offset_columns": {"partition": "kafka_partition", "offset": "kafka_offset"}}])


def _params(path: Path, ns: str) -> dict[str, str]:
    declared = model.load(path).parameters
    out = {k: v for k, v in SMALL.items() if k in declared}
    if "group" in declared:
        out["group"] = f"{ns}.billing"
    return out


#: Runbooks whose Spark restarts or waits make them long (about a minute or more): in the slow
#: suite (scripts/test -m slow), which CI also runs.
SLOW_RUNBOOKS = {"writer-crash-between-commits", "open-transaction-at-freeze", "maintenance-during-shadow",
                 # about half a minute each: in the slow suite so that the default one stays under 15 minutes
                 "operator-machine-dies-mid-switch", "catalog-outage-during-shadow", "schema-change-mid-stream",
                 "broker-restart-during-backfill",
                 # 20 s and more: the default suite stays under 15 minutes
                 "replay"}
#: Runbooks that also run with the catalog on REST and on PostgreSQL over S3 (pytest -m lake), and
#: those of them where the storage and a catalog server matter but not which catalog: REST only.
LAKE_RUNBOOKS = {"maintenance-during-shadow", "catalog-outage-during-shadow", "storage-outage-during-shadow"}
REST_ONLY_RUNBOOKS = {"maintenance-during-shadow", "storage-outage-during-shadow",
                      # on PostgreSQL, test_lake's kill test takes the catalog down under shadow commits
                      "catalog-outage-during-shadow"}
#: Runbooks that need the catalog and storage servers: skipped on the SQLite sandbox.
SERVER_RUNBOOKS = {"storage-outage-during-shadow"}
#: Runbooks whose REST run covers the SQLite one, skipped there to save CI's time: maintenance-during-shadow
#: (on SQLite, test_shadow_faults' compaction and expiry under a running shadow and the demo's maintenance
#: step cover the table's maintenance on local files).
ONCE_ON_SERVERS = {"maintenance-during-shadow"}


def _runbook_marks(path: Path) -> list[pytest.MarkDecorator]:
    return ([pytest.mark.slow] if path.stem in SLOW_RUNBOOKS else []) + \
        ([pytest.mark.lake(only="rest") if path.stem in REST_ONLY_RUNBOOKS else pytest.mark.lake]
         if path.stem in LAKE_RUNBOOKS else [])


@pytest.mark.parametrize("path", [pytest.param(p, marks=_runbook_marks(p)) for p in RUNBOOKS],
                         ids=[p.stem for p in RUNBOOKS])
def test_every_shipped_runbook_passes_on_the_sandbox(sandbox: Sandbox, ns: str, tmp_path: Path, path: Path) -> None:
    if path.stem in SERVER_RUNBOOKS | ONCE_ON_SERVERS and sandbox.status()["catalog"]["kind"] == "sqlite":
        why = ("takes the storage server away, and the SQLite sandbox keeps its warehouse on local files"
               if path.stem in SERVER_RUNBOOKS else "runs once, on REST; on SQLite, test_shadow_faults' compaction "
               "test and the demo's maintenance step cover the table's maintenance")
        pytest.skip(f"{path.stem} {why} (CUTOVER_TEST_CATALOG=rest pytest -m lake runs it)")
    plan = drill_plan(sandbox, ns, tmp_path)
    rb = model.load(path, _params(path, ns))
    result = runner.run(rb, plan, runner.Options(auto=True, report_dir=tmp_path / "report",
                                                 sandbox_dir=sandbox.dir))
    assert result["passed"], (result["failed_step"], [(s["name"], s["outcome"]) for s in result["steps"]])
    assert [s["outcome"] for s in result["steps"]] == ["passed"] * len(rb.steps)
    assert result["sandbox"] and json.loads((tmp_path / "report" / "result.json").read_text())["passed"]
    page = (tmp_path / "report" / "report.html").read_text()
    assert ('id="line2d_' in page or not result["samples"]) and "<b>PASSED</b>drill " in page
    assert _processes_mentioning(tmp_path / "report") == []  # nothing the drill started outlives it


def _processes_mentioning(folder: Path) -> list[str]:
    """Command lines of running processes that name `folder` (a background mirror, shadow or reverse mirror)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(folder) in text:
            found.append(text[:200])
    return found


def _runbook(tmp: Path, steps: list[dict[str, Any]]) -> Path:
    path = tmp / "rb.yaml"
    path.write_text(yaml.safe_dump({"name": "check", "purpose": "a test drill", "steps": steps}))
    return path


def test_a_failing_expectation_stops_the_drill_and_the_report_names_it(
        sandbox: Sandbox, ns: str, tmp_path: Path) -> None:
    plan = drill_plan(sandbox, ns, tmp_path)
    rb = _runbook(tmp_path, [
        {"name": "traffic", "action": "traffic.start", "with": {"rate": 50}},
        {"name": "some records", "action": "traffic.wait", "with": {"records": 20}},
        {"name": "impossibly fast", "expect": "step-within", "with": {"step": "some records", "seconds": 0}},
        {"name": "never reached", "action": "traffic.stop"},
    ])
    run = cutover("drill", str(rb), "--plan", str(plan.file), "--auto", "--report", str(tmp_path / "r"),
                  "--dir", str(sandbox.dir), "-o", "json")
    assert run.code == 4, run.err
    assert "drill check failed at step 3 (impossibly fast): step 'some records' took" in run.err
    result = json.loads((tmp_path / "r" / "result.json").read_text())
    assert result["failed_step"]["name"] == "impossibly fast" and result["not_run"] == [
        {"number": 4, "name": "never reached"}]
    assert "failed at step 3 (impossibly fast)" in (tmp_path / "r" / "report.html").read_text()

    going = cutover("drill", str(rb), "--plan", str(plan.file), "--auto", "--keep-going", "--report",
                    str(tmp_path / "r2"), "--dir", str(sandbox.dir), "-o", "json")
    assert going.code == 4, going.err
    assert [s["outcome"] for s in going.json()["steps"]] == ["passed", "passed", "failed", "passed"]
    assert going.json()["failed_step"]["name"] == "impossibly fast"


def test_a_malformed_runbook_is_rejected_before_any_step_runs(sandbox: Sandbox, ns: str, tmp_path: Path) -> None:
    plan = drill_plan(sandbox, ns, tmp_path)
    rb = _runbook(tmp_path, [
        {"name": "traffic", "action": "traffic.start"},
        {"name": "bad", "fault": "cluster.stop", "with": {"cluster": "newer"}},
    ])
    run = cutover("drill", str(rb), "--plan", str(plan.file), "--auto", "--report", str(tmp_path / "r"))
    assert run.code == 2
    assert f"{rb}:" in run.err and "step 2 (bad): steps[1].with.cluster: expected one of 'old', 'new'" in run.err
    assert not (tmp_path / "r").exists()
    from cutover.kafka.clients import ClusterRef
    from cutover.kafka.inspect import partition_counts

    assert f"{ns}.orders" not in partition_counts(ClusterRef("old", plan.cluster("old")))  # traffic never started


def test_sandbox_faults_become_manual_steps_against_another_environment(
        sandbox: Sandbox, ns: str, tmp_path: Path) -> None:
    plan = drill_plan(sandbox, ns, tmp_path)
    rb = _runbook(tmp_path, [{"name": "stop new", "fault": "cluster.stop", "with": {"cluster": "new"}},
                             {"name": "tell someone", "manual": "Call the on-call"}])
    # No --dir (a mistyped one is refused), and the default sandbox's place holds none: another environment.
    run = cutover("drill", str(rb), "--plan", str(plan.file), "--auto", "--report", str(tmp_path / "r"),
                  "-o", "json", env={"CUTOVER_SANDBOX": str(tmp_path / "no-sandbox-here")})
    assert run.code == 0, run.err
    assert "MANUAL: stop the new cluster's broker (not the sandbox: do this by hand)" in run.err
    assert "MANUAL: Call the on-call" in run.err
    assert [s["outcome"] for s in run.json()["steps"]] == ["manual", "manual"]
    assert sandbox.status()["new"]["running"]


def test_a_manual_step_waits_for_confirmation_without_auto(sandbox: Sandbox, ns: str, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    plan = drill_plan(sandbox, ns, tmp_path)
    rb = _runbook(tmp_path, [{"name": "page", "manual": "Page the on-call"}])
    for answer, code in (("n\n", 4), ("y\n", 0)):
        done = subprocess.run([sys.executable, "-m", "cutover", "drill", str(rb), "--plan", str(plan.file),
                               "--report", str(tmp_path / answer.strip())], input=answer, capture_output=True,
                              text=True, env=dict(os.environ), timeout=120, check=False)
        assert done.returncode == code, done.stderr
        assert "MANUAL: Page the on-call" in done.stderr and "done?" in done.stderr


def test_the_sample_consumer_joins_a_topic_created_after_it_subscribed(sandbox: Sandbox, plan: Plan, ns: str,
                                                                       tmp_path: Path) -> None:
    """A drill's consumer group can subscribe before a topic is in its metadata (created a moment
    before, or just after). It must consume that topic within seconds, not at librdkafka's default
    metadata refresh five minutes later: a CI run lost a production test to exactly that."""
    from cutover.drill.traffic import GroupConsumer, event
    from tests.conftest import wait_for
    from tests.integration.kafka_util import create_topic, produce

    props = plan.cluster("old")
    early, late = f"{ns}.early", f"{ns}.late"

    def records(topic: str, seqs: range) -> list[dict[str, Any]]:
        return [dict(zip(("key", "value", "headers"), event(topic, seq), strict=True), partition=seq % 2)
                for seq in seqs]

    create_topic(props, early, 2)
    produce(props, early, records(early, range(10)))
    consumer = GroupConsumer(plan, tmp_path, [early, late], f"{ns}.group")
    consumer.start()
    try:
        # In its group, consuming, with metadata that does not have the late topic yet.
        wait_for(lambda: consumer.count() >= 10, 60, "the consumer to process the topic that exists")
        create_topic(props, late, 2)
        produce(props, late, records(late, range(10, 30)))
        wait_for(lambda: consumer.count() >= 30, 60, "the consumer to process the topic created after it subscribed")
    finally:
        consumer.stop()
    assert sorted((s.topic, s.seq) for s in consumer.seen) == \
        [(early, seq) for seq in range(10)] + [(late, seq) for seq in range(10, 30)]
    assert consumer.errors == []
