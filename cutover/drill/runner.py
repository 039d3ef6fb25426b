"""`cutover drill RUNBOOK`: walk a runbook's steps with live progress, keep the evidence.

Actions and faults act; an expectation that does not hold stops the drill (unless
--keep-going); an error in an action always stops it. Manual steps print their
instruction and wait for confirmation (unless --auto). Against a plan that is not the
local sandbox, sandbox faults become manual instructions with a note.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutover.common import NETWORK_TIMEOUT
from cutover.drill import report
from cutover.drill.context import Drill, StepResult
from cutover.drill.faults import ByHand
from cutover.drill.model import Runbook, Step
from cutover.drill.ops import OPS, ExpectationFailed
from cutover.drill.view import Sampler
from cutover.errors import CutoverError, ExitCode, UsageError
from cutover.interrupt import cleaning
from cutover.output import progress
from cutover.plan import Plan

if TYPE_CHECKING:
    from cutover.local.sandbox import Sandbox
    from cutover.shadow.metrics import ShadowMetrics


class DrillFailed(CutoverError):
    """A drill's expectation did not hold, or one of its steps failed."""

    exit_code = ExitCode.DIFFERENCES


@dataclass(frozen=True)
class Options:
    auto: bool = False
    keep_going: bool = False
    report_dir: Path | None = None
    sandbox_dir: Path | None = None
    #: Asks a person whether a manual step is done (the CLI's prompt); without one, a manual step needs --auto.
    confirm: Callable[[str], bool] | None = None
    #: seconds to wait for any one answer from a cluster, the catalog or the storage
    timeout: float = NETWORK_TIMEOUT


def sandbox_for(plan: Plan, folder: Path | None) -> Sandbox | None:
    """The local sandbox, when the plan's clusters are its clusters (else None: a real environment)."""
    from cutover.local.sandbox import Sandbox

    box = Sandbox(folder)
    if not box.exists():
        if folder is not None:  # named by --dir: a mistyped folder would turn every sandbox fault into a manual step
            raise UsageError(f"--dir {folder}: no sandbox there",
                             fix="give the sandbox's folder (cutover local status --dir DIR shows one), or leave "
                                 "--dir out to drill clusters that are not a local sandbox")
        return None
    try:
        st = box.status()
    except CutoverError:
        return None
    ours = {side: str(st[side].get("bootstrap", "")) for side in ("old", "new")}
    theirs = {side: plan.cluster(side).get("bootstrap.servers", "") for side in ("old", "new")}
    if ours != theirs and folder is not None:
        raise UsageError(f"--dir {folder}: that sandbox's clusters ({ours['old']}, {ours['new']}) are not the plan's "
                         f"({theirs['old']}, {theirs['new']})",
                         fix=f"give its plan ({box.plan_file}), or leave --dir out to drill the plan's clusters")
    return box if ours == theirs else None


def says(step: Step) -> str:
    if step.kind == "manual":
        return str(step.args)
    return OPS[(step.kind, step.op)].says(step.args)


def run(runbook: Runbook, plan: Plan, opts: Options) -> dict[str, Any]:
    box = sandbox_for(plan, opts.sandbox_dir)  # before anything is written: a wrong --dir is refused
    folder = opts.report_dir or Path.cwd() / "drill-reports" / f"{runbook.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    folder.mkdir(parents=True, exist_ok=True)
    drill = Drill(plan, folder.absolute(), box, opts.auto, opts.confirm, faults=box if box is not None else ByHand(),
                  timeout=opts.timeout, kills_switch=any(s.op == "switch.kill" for s in runbook.steps))
    drill.shadow_metrics = _shadow_metrics(plan)  # a port in use is named before any step runs
    if not drill.faults.automatic:
        progress("note: the plan's clusters are not the local sandbox's: sandbox faults become manual steps")
    started = time.time()
    try:
        with Sampler(drill):
            for step in runbook.steps:
                if not _one(drill, step, len(runbook.steps)) and not (opts.keep_going and _failed_check(drill)):
                    break
    finally:
        with cleaning():  # a Ctrl-C waits for the background processes to stop and the faults to be given back
            drill.close()
    result = report.result(runbook, plan, drill, started)
    report.write(folder, result)
    _remember(plan, runbook, result, folder)
    progress(f"drill report: {folder / 'report.html'}")
    return result


def _shadow_metrics(plan: Plan) -> ShadowMetrics:
    """What the drill's shadow runs count into, for its timeline; served on the plan's shadow port when given."""
    from cutover.shadow.metrics import ShadowMetrics

    at = plan.metrics_endpoint("shadow")
    return ShadowMetrics(None) if at is None else ShadowMetrics.serving(at)


def _remember(plan: Plan, runbook: Runbook, result: dict[str, Any], folder: Path) -> None:
    """One line in the plan's journal folder (drills.jsonl) per drill run with it: `cutover assess` reads
    when a drill last passed for this plan."""
    import json

    from cutover.switch import journal

    path = journal.directory(plan) / "drills.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    line = {"runbook": runbook.name, "passed": bool(result.get("passed")), "started": result.get("started"),
            "ended": result.get("ended"), "report": str(folder.absolute())}
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(line, sort_keys=True) + "\n")


def _failed_check(drill: Drill) -> bool:
    return drill.results[-1].outcome == "failed"


def _one(drill: Drill, step: Step, total: int) -> bool:
    r = StepResult(step.number, step.name, step.kind, step.op, time.time())
    drill.results.append(r)
    op = OPS.get((step.kind, step.op))
    by_hand = step.kind == "manual" or (op is not None and op.injected and not drill.faults.automatic)
    progress(f"[{step.number}/{total}] {step.kind} {step.name}: {says(step)}")
    try:
        if by_hand:
            note = "" if step.kind == "manual" else " (not the sandbox: do this by hand)"
            progress(f"  MANUAL: {says(step)}{note}")
            r.outcome = "manual"
            if not drill.auto and not (drill.confirm is not None and drill.confirm("  done?")):
                raise ExpectationFailed(f"step {step.number} ({step.name}) was not confirmed")
        else:
            assert op is not None
            r.detail = op.run(drill, step.args) or {}
            r.outcome = "passed"
    except ExpectationFailed as exc:
        r.outcome, r.error = "failed", exc.message
        progress(f"  FAILED: {exc.message}")
        return False
    except CutoverError as exc:
        r.outcome, r.error = "error", exc.message
        progress(f"  ERROR: {r.error}")
        return False
    finally:
        r.ended = time.time()
    progress(f"  {r.outcome} in {r.seconds:.1f}s")
    return True
