"""Hooks and the routing file (pure): context, failures, atomic writes, no secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cutover.errors import CutoverError
from cutover.switch import hooks, routing
from cutover.switch.journal import Journal
from tests.unit.switch.switch_support import unit_plan


def test_hooks_get_their_context_and_a_failure_names_the_hook(tmp_path: Path) -> None:
    script = tmp_path / "hook.sh"
    script.write_text('#!/bin/sh\necho "$CUTOVER_PLAN_NAME $CUTOVER_STEP $CUTOVER_ACTIVE $CUTOVER_NEW_BOOTSTRAP"'
                      ' > "$1"\n[ "$CUTOVER_STEP" = bad ] && { echo "cannot freeze"; exit 7; }\nexit 0\n')
    script.chmod(0o755)
    plan = unit_plan(tmp_path, hooks={"freeze_producers": f"./hook.sh {tmp_path / 'out'}"})
    assert hooks.run(plan, "freeze_producers", hooks.environment(plan, step="good", active="new"), 30) == {
        "hook": "freeze_producers", "exit": 0}
    assert (tmp_path / "out").read_text().split() == ["unit", "good", "new", "new:9092"]
    # CUTOVER_PLAN is the plan's file, as the CLI reads it: a cutover command in a hook finds the plan
    assert hooks.environment(plan)["CUTOVER_PLAN"] == str(plan.file.resolve())
    with pytest.raises(hooks.HookFailed, match=r"freeze_producers .* exited 7; its last lines:\n    cannot freeze"):
        hooks.run(plan, "freeze_producers", hooks.environment(plan, step="bad"), 30)
    assert hooks.run(plan, "resume", {}, 30) is None  # no hook for the event: nothing runs
    script.chmod(0o644)
    assert hooks.check(plan) == [f"hooks.freeze_producers: {script} is not executable (fix: chmod +x {script})"]
    script.unlink()
    assert hooks.check(plan) == [f"hooks.freeze_producers: {script} does not exist (fix: create the script, or fix "
                                 f"the path (a relative path is from the plan's folder, {tmp_path}))"]


def test_routing_is_replaced_atomically_and_holds_no_secret(tmp_path: Path) -> None:
    plan = unit_plan(tmp_path, clusters={"old": {"bootstrap.servers": "old:9092"},
                                     "new": {"bootstrap.servers": "new:9092", "sasl.password": "s3cret"}})
    assert routing.active(plan) == "old"
    routing.write(plan, "new", "r1")
    text = (tmp_path / "routing.json").read_text()
    assert json.loads(text)["bootstrap.servers"] == "new:9092" and "s3cret" not in text
    assert routing.active(plan) == "new" and not list(tmp_path.glob(".routing.json.tmp"))
    (tmp_path / "routing.json").write_text("{not json")
    with pytest.raises(CutoverError, match=r"routing file .* cannot be read"):
        routing.active(plan)


def test_secrets_in_hook_output_and_the_journal_are_masked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "leaky.sh"
    script.write_text('#!/bin/sh\necho "connecting with pw-Zq81x"\nexit 1\n')
    script.chmod(0o755)
    plan = unit_plan(tmp_path, hooks={"resume": "./leaky.sh"},
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


def test_the_drills_sink_hooks_pause_and_run_every_connector_of_the_plan(tmp_path: Path) -> None:
    """The drill's operator hooks for Iceberg's sink: one per writer event, each running cutover.drill.sink
    with the action and the cluster the event means, the switch plan and the sandbox."""
    import subprocess
    import sys

    from cutover.drill import sink

    made = sink.hooks(tmp_path / "hooks", tmp_path / "switch-plan.yaml", tmp_path / "sandbox")
    assert set(made) == {"stop_old_writer", "start_new_writer", "stop_new_writer", "start_old_writer"}
    for event, (action, cluster) in {"stop_old_writer": ("pause", "old"), "start_new_writer": ("run", "new"),
                                     "stop_new_writer": ("pause", "new"), "start_old_writer": ("run", "old")}.items():
        text = Path(made[event]).read_text()
        assert text.startswith("#!/bin/sh\n") and Path(made[event]).stat().st_mode & 0o111
        assert f'"{sys.executable}" -m cutover.drill.sink {action} {cluster} ' in text
        assert f'--plan "{tmp_path / "switch-plan.yaml"}" --sandbox "{tmp_path / "sandbox"}"' in text
    pairs = [{"topic": "a", "old": "lake.a", "new": "lake.a2", "writer_offsets": "iceberg-connect",
              "connector": "a-sink", "connect_url": "http://127.0.0.1:1"},
             {"topic": "b", "old": "lake.b", "new": "lake.b2", "old_offset_columns": {"partition": "p", "offset": "o"}}]
    plan = unit_plan(tmp_path, tables=pairs, catalog={"name": "lake", "uri": f"sqlite:///{tmp_path}/c.db",
                                                       "warehouse": f"file://{tmp_path}/wh"})
    assert [p.old for p in sink.pairs(plan)] == ["lake.a"]
    assert sink.config(plan, sink.pairs(plan)[0])["iceberg.tables"] == "lake.a"
    # a bad action is refused by the module's own argument parser, before any cluster is asked
    bad = subprocess.run([sys.executable, "-m", "cutover.drill.sink", "stop", "old", "--plan", str(plan.file),
                          "--sandbox", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "invalid choice: 'stop'" in bad.stderr
