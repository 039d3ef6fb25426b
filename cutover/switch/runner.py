"""The two walkers of a step list: `execute` (journaled, locked, resumable) and `explain` (dry-run)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from cutover.common import iso_millis_z
from cutover.errors import CutoverError, ExitCode, Refused
from cutover.interrupt import cleaning
from cutover.output import progress
from cutover.plan import Plan
from cutover.secrets import scrub
from cutover.switch import background, checks, endings, journal, leftovers, routing, steps
from cutover.switch.effects import DryRun, Live
from cutover.switch.journal import Action, History, Journal
from cutover.switch.results import Explanation, FreezeWindow, StepPlan, StepRow, SwitchResult


@dataclass(frozen=True)
class Options:
    dry_run: bool = False
    #: Run cutover verify now instead of relying on the last recorded result.
    verify_now: bool = False
    timeout: float = 30.0
    #: complete and cancel: what they keep, or remove besides.
    leave: leftovers.Leave = leftovers.DEFAULT


class Refusal(Refused):
    """Preconditions refused (exit 3): `checks` is every precondition's verdict, which the CLI prints as the
    dry run does, for automation that runs --execute -o json."""

    def __init__(self, message: str, *, fix: str, checks: Explanation) -> None:
        super().__init__(message, fix=fix)
        self.checks = checks


class StepFailed(CutoverError):
    """A switch step failed; the journal says where, and a re-run continues there. `checks`: the
    preconditions' verdicts when the step was the hold whose recheck refused."""

    def __init__(self, message: str, *, fix: str, exit_code: ExitCode, checks: Explanation | None = None) -> None:
        super().__init__(message, fix=fix)
        self.exit_code = exit_code
        self.checks = checks


def _checks(plan: Plan, action: Action, history: History, opts: Options, locked: bool) -> list[checks.Check]:
    out = [checks.phase(history, action)]
    if not locked:
        out.append(checks.lock_free(plan))
    out.append(checks.hooks_runnable(plan))
    if action not in journal.ENDINGS:
        out.append(checks.routing_usable(plan))
    if history.started_steps(action) - {steps.HOLD, endings.FINAL_VERIFY}:
        return out  # a re-run continues an attempt whose preconditions held when it began
    if action in journal.ENDINGS:
        return out + _ending_checks(plan, action, history, opts)
    if action == "promote":
        if plan.spec.tables:
            run_now = None
            if opts.verify_now and not opts.dry_run:
                def run_now() -> None:
                    from cutover.verify import run as verify_run
                    verify_run.verify(plan, verify_run.Options())
            out += [checks.verified(plan, run_now, at_execute=opts.verify_now and opts.dry_run),
                    checks.tables_handover(plan)]
        out += [checks.mirror_lag(plan, opts.timeout), checks.groups_idle(plan, "old", "new", opts.timeout)]
        if plan.spec.readers:
            out.append(checks.readers_movable(plan))
        if plan.spec.registry is not None:
            out.append(checks.registry_ids(plan, "forward", opts.timeout))
        if plan.spec.rights is not None:
            out.append(checks.rights_match(plan, "forward", opts.timeout))
    elif steps.past_point_of_no_return(history):
        out.append(checks.groups_idle(plan, "new", "old", opts.timeout))
        if plan.spec.registry is not None:
            out.append(checks.registry_ids(plan, "reverse", opts.timeout))
        if plan.spec.rights is not None:
            out.append(checks.rights_match(plan, "reverse", opts.timeout))
    return out


def _ending_checks(plan: Plan, action: Action, history: History, opts: Options) -> list[checks.Check]:
    out = []
    if action == "complete":
        if plan.spec.tables:
            out.append(checks.verified_since_promote(plan, history))
        out.append(checks.no_readers_on_old(plan, opts.timeout))
    else:
        out.append(checks.groups_idle(plan, "new", "new", opts.timeout))
    if plan.spec.tables and (action == "cancel" or plan.spec.complete.drop_new_tables):
        out.append(checks.shadow_stopped(plan, [p.new for p in plan.spec.tables]))
    return out


def _build(plan: Plan, action: Action, history: History) -> list[steps.Step]:
    if action == "complete":
        return endings.complete(plan)
    if action == "cancel":
        return endings.cancel(plan)
    return steps.promote(plan) if action == "promote" else steps.rollback(plan, history)


def explain(plan: Plan, action: Action, opts: Options) -> Explanation:
    """Dry-run: every precondition evaluated live, every step said; nothing changed, nothing journaled."""
    history = journal.read(journal.directory(plan))
    outcomes = checks.evaluate(_checks(plan, action, history, opts, locked=False))
    done = history.done_steps(action)

    def say(step: steps.Step) -> StepPlan:
        fx = DryRun(plan, action=action, leave=opts.leave, timeout=opts.timeout)
        if step.name not in done:
            step.act(fx)
        return StepPlan(step.name, step.does, step.name in done, tuple(fx.lines), tuple(fx.unknown))

    todo = _build(plan, action, history)
    with ThreadPoolExecutor(max(1, len(todo)), thread_name_prefix="dry-run") as pool:  # read-only, side by side
        listed = list(pool.map(say, todo))
    return Explanation(action, plan.name, history.phase(), tuple(outcomes), tuple(listed))


def refusal(explained: Explanation, when: str = "") -> Refusal:
    """The refusal of every failing precondition, named in the message, all verdicts kept for stdout."""
    failed = [o for o in explained.checks if o.refusal]
    lines = "\n".join(f"  - {o.name}: {o.refusal}" for o in failed)
    action = explained.action
    return Refusal(f"{action} refused{when} by {len(failed)} precondition(s):\n{lines}",
                   fix=f"fix what each says, then run cutover {action} again (--dry-run checks without acting)",
                   checks=explained)


def _refused(plan: Plan, action: Action, history: History, outcomes: list[checks.Outcome],
             when: str = "") -> Refusal | None:
    """The refusal of an execution (no step ran, or the hold's recheck), or None when every check held."""
    if not any(o.refusal for o in outcomes):
        return None
    return refusal(Explanation(action, plan.name, history.phase(), tuple(outcomes), (), dry_run=False), when)


def execute(plan: Plan, action: Action, opts: Options) -> SwitchResult:
    try:
        return _execute(plan, action, opts)
    except journal.Locked as exc:  # the not-running precondition, found by the lock itself
        lock = checks.lock_free(plan)
        refused = _refused(plan, action, journal.read(journal.directory(plan)),
                           [checks.Outcome(lock.name, lock.expects, exc.message)])
        assert refused is not None
        raise refused from None


def _execute(plan: Plan, action: Action, opts: Options) -> SwitchResult:
    folder = journal.directory(plan)
    with Journal.open(folder, action) as j:
        history = j.history
        if action == "promote" and history.phase() == "promoted":
            progress("already promoted: nothing to do (cutover status shows the steps)")
            return _result(plan, action, history, None, already=True)
        if action in journal.ENDINGS and history.phase() == ("completed" if action == "complete" else "cancelled"):
            if history.runs:  # the record is written; the journal's move to the archive was cut short
                journal.close(folder, history.ended or {})
            progress(f"already {history.phase()}: nothing to do (record {folder / journal.RECORD})")
            return _ended(plan, action, history.ended or {}, already=True)
        refused = _refused(plan, action, history, checks.evaluate(_checks(plan, action, history, opts, locked=True)))
        if refused is not None:
            raise refused
        todo = _build(plan, action, history)
        run = uuid.uuid4().hex[:12]
        done = history.done_steps(action)
        j.append("begin", action=action, run=run, mode="execute", steps=[s.name for s in todo])
        fx = Live(plan, action, run, opts.timeout, recheck=lambda: _recheck(plan, action, history, opts),
                  leave=opts.leave)
        for i, step in enumerate(todo, 1):
            if step.name in done:
                progress(f"[{i}/{len(todo)}] {step.name}: done earlier ({done[step.name].seconds}s)")
                continue
            progress(f"[{i}/{len(todo)}] {step.name}: {step.does}")
            _one(j, fx, run, step, action)
        if action in journal.ENDINGS:
            j.append("end", action=action, run=run, outcome="done", detail=_tally(j.history, action))
            record = _record(plan, action, j.history, run)
            journal.close(folder, record)
        else:
            summary = _summary(plan, action, j.history, past=steps.past_point_of_no_return(j.history))
            j.append("end", action=action, run=run, outcome="done", detail=summary)
    _quietly(lambda: fx.hook("on_success"), "on_success")
    if action in journal.ENDINGS:
        return _ended(plan, action, record)
    return _result(plan, action, j.history, run)


def _tally(history: History, action: Action) -> dict[str, Any]:
    """What an ending removed and kept, over all its runs."""
    rows = step_table(history.runs_of(action))
    return {"removed": [i for r in rows for i in r.detail.get("removed", [])],
            "kept": [i for r in rows for i in r.detail.get("kept", [])]}


def _record(plan: Plan, action: Action, history: History, run: str) -> dict[str, Any]:
    """The completion record: what ended the migration, when, every attempt, and where the journal went."""
    at = iso_millis_z(time.time())
    return {"action": action, "plan": plan.name, "run": run, "at": at,
            "record": str(journal.directory(plan) / journal.RECORD),
            "journal": f"journal-{at.replace(':', '').replace('.', '')}.jsonl",
            "attempts": [a.as_dict() for a in history.attempts()],
            "steps": [s.as_dict() for s in step_table(history.runs_of(action))], **_tally(history, action)}


def _ended(plan: Plan, action: Action, record: dict[str, Any], already: bool = False) -> SwitchResult:
    rows = tuple(StepRow(s["name"], s["outcome"], s["seconds"], s["started_at"], s["error"], s["detail"])
                 for s in record.get("steps", []))
    summary = {k: record.get(k) for k in ("at", "record", "journal", "removed", "kept")}
    summary["journal"] = str(journal.directory(plan) / "archive" / str(record.get("journal")))
    return SwitchResult(action, plan.name, record.get("run"), already, "completed" if action == "complete"
                        else "cancelled", rows, summary)


def _recheck(plan: Plan, action: Action, history: History, opts: Options) -> dict[str, Any]:
    """After a hold: the preconditions the attempt began under, evaluated again now."""
    outcomes = checks.evaluate(_checks(plan, action, history, opts, locked=True))
    refused = _refused(plan, action, history, outcomes, when=" when the hold was released")
    if refused is not None:
        raise refused
    return {"rechecked": [o.name for o in outcomes]}


def _one(j: Journal, fx: Live, run: str, step: steps.Step, action: str) -> None:
    j.append("step-start", run=run, step=step.name)
    fx.step = step.name
    started = time.monotonic()
    try:
        fx.hook("before_step")
        detail = step.act(fx) or {}
        fx.hook("after_step")
    except BaseException as exc:
        message = exc.message if isinstance(exc, CutoverError) else f"{type(exc).__name__}: {exc}"
        j.append("step-end", run=run, step=step.name, outcome="failed", error=message)
        j.append("end", action=action, run=run, outcome="failed", detail={"step": step.name})
        with cleaning():  # the operator's on_failure hook runs to its end, Ctrl-C or not
            background.disarm(fx.plan)  # an armed reverse mirror goes with the promote that stopped
            _quietly(lambda: fx.hook("on_failure", error=scrub(message)[:2000]), "on_failure")
        if not isinstance(exc, CutoverError):
            raise
        code = exc.exit_code if exc.exit_code != ExitCode.USAGE else ExitCode.ERROR
        raise StepFailed(f"{action} stopped at step {step.name}: {message}", exit_code=code,
                         checks=exc.checks if isinstance(exc, Refusal) else None,
                         fix=(exc.fix + "; " if exc.fix else "") + f"then run cutover {action} --execute again to "
                         f"continue from {step.name}" + (", or cutover rollback --execute to go back"
                                                         if action == "promote" else "")) from None
    j.append("step-end", run=run, step=step.name, outcome="done", detail=detail)
    progress(f"  done in {time.monotonic() - started:.1f}s")


def _quietly(call: Callable[[], Any], what: str) -> None:
    try:
        call()
    except CutoverError as exc:
        progress(f"warning: hook {what} failed: {exc.message}")


def window(history: History, action: Action) -> FreezeWindow | None:
    """The freeze window of the latest attempt: from the producer freeze to the clients' switch."""
    records = [s for r in history.runs_of(action) for s in r.steps]
    start = min((s.started for s in records if s.name == steps.FREEZE_STARTS), default=None)
    end = max((s.ended for s in records if s.name == steps.FREEZE_ENDS and s.outcome == "done" and s.ended),
              default=None)
    if start is None:
        return None
    return FreezeWindow(iso_millis_z(start), iso_millis_z(end) if end else None,
                        round(end - start, 3) if end else None)


def _summary(plan: Plan, action: Action, history: History, past: bool) -> dict[str, Any]:
    frozen = window(history, action)
    out: dict[str, Any] = {"freeze_window": frozen.as_dict() if frozen else None, "past_point_of_no_return": past}
    if action == "rollback":
        drained = history.done_steps("rollback").get("drain-reverse-mirror")
        before = history.last_finished("rollback")  # this attempt is not finished yet: the previous cycle's
        prior = _carried_total(before.detail) if before else 0
        total = _carried_total(drained.detail) if drained else prior
        out["carried_back"], out["carried_back_total"] = total - prior, total
    out["routing"] = routing.read(plan)
    return out


def _carried_total(detail: dict[str, Any]) -> int:
    """Records carried back in every cycle up to this one (a journal from before cycles: the one rollback's)."""
    return int(detail.get("carried_back_total", detail.get("carried_back")) or 0)


def _result(plan: Plan, action: Action, history: History, run: str | None, already: bool = False) -> SwitchResult:
    last = history.last_finished(action)
    return SwitchResult(action, plan.name, run, already, history.phase(), tuple(step_table(history.runs_of(action))),
                        dict(last.detail) if last else {})


def step_table(runs: list[journal.RunRecord]) -> list[StepRow]:
    """Each step of an attempt once: its last record (a re-run's repeat wins over the crashed try)."""
    latest: dict[str, journal.StepRecord] = {}
    order: list[str] = []
    for r in runs:
        for s in r.steps:
            if s.name not in latest:
                order.append(s.name)
            if s.name not in latest or latest[s.name].outcome != "done":
                latest[s.name] = s
    return [StepRow(n, latest[n].outcome or "interrupted", latest[n].seconds, iso_millis_z(latest[n].started),
                    latest[n].error, latest[n].detail) for n in order]


def preconditions(plan: Plan, action: Action, history: History) -> list[checks.Check]:
    """The checks `action` evaluates for `plan` at this point of `history`, unevaluated (the docs' list)."""
    return _checks(plan, action, history, Options(dry_run=True), locked=False)
