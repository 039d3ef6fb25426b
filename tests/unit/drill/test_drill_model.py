"""Runbooks: loading, parameters, validation before anything runs, Markdown, reports (pure logic)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cutover.drill import model, report, show
from cutover.drill.context import Drill, StepResult
from cutover.drill.model import RunbookError
from cutover.drill.ops import OPS
from cutover.drill.ops.traffic import TrafficArgs, WaitArgs
from cutover.plan import load_plan

RUNBOOKS = sorted((Path(__file__).parents[3] / "runbooks").glob("*.yaml"))


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rb.yaml"
    path.write_text(text)
    return path


GOOD = """
name: small
purpose: A small drill.
parameters:
  records: {default: 100, description: how many}
  rate: {default: 50}
steps:
  - name: traffic
    action: traffic.start
    with: {rate: "{{rate}}"}
  - action: traffic.wait
    with: {records: "{{records}}", within: 2m}
  - manual: "Page the on-call: {{records}} records are in flight"
  - name: nothing lost
    expect: exactly-once
    with: {where: new}
"""


def test_a_runbook_loads_with_typed_parameters_and_overrides(tmp_path: Path) -> None:
    rb = model.load(_write(tmp_path, GOOD), {"records": "250"})
    assert [(s.number, s.name, s.kind, s.op) for s in rb.steps] == [
        (1, "traffic", "action", "traffic.start"), (2, "traffic.wait", "action", "traffic.wait"),
        (3, "manual", "manual", "manual"), (4, "nothing lost", "expect", "exactly-once")]
    assert rb.steps[0].args == TrafficArgs(rate=50.0)
    assert rb.steps[1].args == WaitArgs(records=250, within=120.0)
    assert rb.steps[2].args == "Page the on-call: 250 records are in flight"
    assert rb.parameters == {"records": 250, "rate": 50}


def test_a_malformed_runbook_names_file_line_step_and_key(tmp_path: Path) -> None:
    bad = _write(tmp_path, """
name: broken
purpose: Everything wrong at once.
parameters:
  n: {default: 3}
steps:
  - name: typo in the op
    action: traffic.strat
  - name: two kinds
    action: traffic.start
    expect: lag-below
  - name: wrong type
    expect: lag-below
    with: {records: lots}
  - name: unknown key
    fault: cluster.stop
    with: {cluster: old, hard: true}
  - name: unknown parameter
    action: traffic.wait
    with: {records: "{{m}}"}
  - name: wrong type
    fault: writer.pause
""")
    with pytest.raises(RunbookError) as err:
        model.load(bad, {"nope": "1"})
    problems = err.value.problems
    where = str(bad)
    assert err.value.message == "7 problems in the runbook (nothing was run)"
    assert f"{where}:8: step 1 (typo in the op): steps[0].action: unknown action 'traffic.strat' (fix: one of" \
        in problems[1]
    assert "traffic.start" in problems[1]
    assert problems[0] == "--param nope: the runbook has no such parameter (it has: n)"
    assert f"{where}:9: step 2 (two kinds): steps[1]: a step has exactly one of action, fault, manual, expect; " \
           "found action, expect" in problems[2]
    assert f"{where}:14: step 3 (wrong type): steps[2].with.records: expected a whole number, found str 'lots'" \
           in problems[3]
    assert f"{where}:17: step 4 (unknown key): steps[3].with.hard: unknown key" in problems[4]
    assert "step 5 (unknown parameter): steps[4]: unknown parameter(s) m" in problems[5]
    assert problems[6] == f"{where}: step name 'wrong type' is used twice (fix: names identify steps in reports)"


@pytest.mark.parametrize("path", RUNBOOKS, ids=[p.stem for p in RUNBOOKS])
def test_every_shipped_runbook_is_valid_and_renders(path: Path) -> None:
    rb = model.load(path)
    text = show.markdown(rb)
    assert text.startswith(f"# {rb.name}\n") and "## Steps" in text
    assert all(f"{s.number}. **" in text for s in rb.steps)
    assert any(s.kind == "expect" for s in rb.steps), "a drill proves something"


def test_show_marks_sandbox_faults(tmp_path: Path) -> None:
    rb = model.load(_write(tmp_path, """
name: f
purpose: p
steps:
  - fault: cluster.stop
    with: {cluster: new, kill: true}
"""))
    assert "**Fault** `cluster.stop`: cluster.stop *(sandbox; by hand elsewhere)*" in show.markdown(rb)
    assert OPS[("fault", "cluster.stop")].injected and not OPS[("fault", "mirror.kill")].injected


def test_the_report_names_the_failed_step_and_what_did_not_run(tmp_path: Path) -> None:
    rb = model.load(_write(tmp_path, GOOD))
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text("clusters: {old: {bootstrap.servers: 'a:1'}, new: {bootstrap.servers: 'b:1'}}\n")
    drill = Drill(load_plan(plan_file), tmp_path, None, True)
    drill.results = [StepResult(1, "traffic", "action", "traffic.start", 100.0, 101.0, "passed"),
                     StepResult(2, "traffic.wait", "action", "traffic.wait", 101.0, 130.0, "failed",
                                error="120 more records produced: not within 120s")]
    drill.samples = [{"t": 100.0, "lag": 5, "freshness": {"a.b": 2.0}}, {"t": 120.0, "lag": 0, "freshness": {}}]
    r = report.result(rb, drill.plan, drill, 100.0)
    assert not r["passed"]
    assert r["failed_step"] == {"number": 2, "name": "traffic.wait",
                                "error": "120 more records produced: not within 120s"}
    assert r["not_run"] == [{"number": 3, "name": "manual"}, {"number": 4, "name": "nothing lost"}]
    report.write(tmp_path, r)
    assert json.loads((tmp_path / "result.json").read_text())["failed_step"]["number"] == 2
    page = (tmp_path / "report.html").read_text()
    assert "failed at step 2 (traffic.wait)" in page and 'id="line2d_' in page and "not run: manual, nothing lost" \
        in page


def test_a_wait_on_progress_outlasts_its_stall_while_work_moves_and_fails_when_it_stops() -> None:
    import time

    from cutover.drill.ops.base import ExpectationFailed, while_progressing

    left = [6]

    def slowly() -> int:  # one less each call: 6 calls of 0.01 s, longer than the 0.03 s stall
        left[0] = max(0, left[0] - 1)
        return left[0]
    started = time.monotonic()
    while_progressing(0.03, "work", slowly, every=0.01)
    assert left[0] == 0 and time.monotonic() - started >= 0.04

    stuck = [3]
    with pytest.raises(ExpectationFailed, match=r"^work: no progress for 0s, 3 still to go$"):
        while_progressing(0.03, "work", lambda: stuck[0], every=0.01)


@pytest.mark.parametrize(("param", "said"), [
    ("rate=fast", "error: --param rate=fast: rate is a number (its default is 100) (fix: --param rate=VALUE with "
                  "such a value)"),
    ("rate=0", "step 1 (sample traffic): steps[0].with.rate: must be above 0, found 0.0 (from --param rate=0)"),
    ("records=-5", "step 4 (traffic on the old cluster): steps[3].with.records: must be above 0, found -5 (from "
                   "--param records=-5)"),
])
def test_a_bad_param_is_named_as_the_param_not_as_the_runbook(param: str, said: str) -> None:
    from tests.conftest import cutover

    run = cutover("drill", "show", "full-migration", "--param", param)
    assert run.code == 2 and said in run.err and "Traceback" not in run.err, run.err


def test_a_param_of_a_whole_number_takes_a_fraction_and_a_flag_takes_yes_and_no() -> None:
    assert model._typed("2.5", 100) == 2.5 and model._typed("7", 100) == 7
    assert model._typed("no", True) is False and model._typed("yes", False) is True
    assert model._typed("maybe", True) is None and model._typed("x", 1.0) is None
