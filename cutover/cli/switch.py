"""`cutover promote`, `cutover rollback` and `cutover status`: the switch, and where it stands."""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING

import click

from cutover.cli.options import Seconds, output_option, plan_option, stop_on_signals, timeout_option
from cutover.errors import UnreachableError, UsageError
from cutover.output import Format, emit, progress, table

if TYPE_CHECKING:
    from cutover.switch.journal import Action
    from cutover.switch.results import Explanation, SwitchResult


def _switch_command(action: Action, doc: str) -> click.Command:
    def command(plan_file: str, dry_run: bool, execute: bool, fmt: Format, timeout: float,
                verify: bool = False, keep_state: bool = False, delete_mirrored_topics: bool = False) -> int:
        from cutover.plan import load_plan
        from cutover.switch import leftovers, runner

        if dry_run and execute:
            raise UsageError("--dry-run and --execute exclude each other", fix="pick one")
        if not dry_run and not execute and not sys.stdin.isatty():
            raise UsageError(f"cutover {action} changes the clusters and needs --execute",
                             fix=f"see the steps first with cutover {action} --dry-run")
        plan = load_plan(plan_file)
        opts = runner.Options(dry_run=not execute, verify_now=verify, timeout=timeout,
                              leave=leftovers.Leave(keep_state, delete_mirrored_topics))
        if dry_run:  # say what would happen; refuse (exit 3) when a precondition does
            explained = runner.explain(plan, action, opts)
            emit(explained, fmt, render_explained)
            if not explained.passed:
                raise runner.refusal(explained)
            if explained.unknown:
                raise UnreachableError(f"the dry run could not say what {len(explained.unknown)} step(s) would do:\n"
                                       + "\n".join(f"  - {u}" for u in explained.unknown),
                                       fix=f"make what each names reachable, then run cutover {action} --dry-run "
                                           "again")
            return 0
        if not execute:  # a person at a terminal: show the plan, then ask
            progress(render_explained(runner.explain(plan, action, opts)))
            if not click.confirm(f"{action} now?", err=True):
                return 0
        try:
            result = runner.execute(plan, action, dataclasses.replace(opts, dry_run=False))
        except (runner.Refusal, runner.StepFailed) as exc:
            if exc.checks is not None:  # refused: every precondition's verdict, as the dry run prints them
                emit(exc.checks, fmt, render_explained)
            raise
        emit(result, fmt, render_result)
        return 0

    if action == "promote":
        command = click.option("--verify", is_flag=True,
                               help="Run cutover verify now instead of using its last recorded result.")(command)
    if action == "cancel":
        command = click.option("--delete-mirrored-topics", is_flag=True,
                               help="Delete the topics the mirror created on the new cluster too (their data "
                                    "stays on the old cluster).")(command)
    if action in ("complete", "cancel"):
        command = click.option("--keep-state", is_flag=True,
                               help="Keep both mirrors' state topics (marked ended: no mirror of this plan runs "
                                    "again).")(command)
    for decorate in (timeout_option(whole=False), output_option,
                     click.option("--execute", is_flag=True, help="Really do it (without it, a terminal asks to "
                                  "confirm)."),
                     click.option("--dry-run", is_flag=True, help="Evaluate every precondition and print the "
                                  "steps; change nothing."),
                     plan_option, click.command(action, help=doc)):
        command = decorate(command)
    assert isinstance(command, click.Command)
    return command


def render_explained(r: Explanation) -> str:
    head = "dry run: nothing was changed" if r.dry_run else "refused by a precondition"
    lines = [f"{r.action} plan for {r.plan} (phase {r.phase}); {head}", "preconditions:"]
    lines += [f"  {'ok     ' if c.refusal is None else 'REFUSED'} {c.name}: {c.refusal or c.expects}"
              for c in r.checks]
    if not r.dry_run:
        return "\n".join(lines)
    lines.append("steps:")
    for i, s in enumerate(r.steps, 1):
        lines.append(f"  {i:2}. {s.name}: {s.does}" + ("  [done earlier]" if s.done_earlier else ""))
        lines += [f"        would {w}" for w in s.would]
    return "\n".join(lines)


def render_result(r: SwitchResult) -> str:
    if r.already_done:
        return f"{r.action}: already done (phase {r.phase})"
    lines = [f"{r.action} done: phase {r.phase}",
             table([[s.name, s.outcome, "-" if s.seconds is None else f"{s.seconds:.1f}s"] for s in r.steps],
                   ["step", "outcome", "took"])]
    if r.action in ("complete", "cancel"):
        removed, kept = r.summary.get("removed") or [], r.summary.get("kept") or []
        lines += [f"removed {i['kind']} {i['name']} ({i['where']})" for i in removed]
        lines += [f"kept    {i['kind']} {i['name']} ({i['where']}): {i['note']}" for i in kept]
        lines.append(f"completion record: {r.summary.get('record')}; journal archived to {r.summary.get('journal')}")
    fw = r.freeze_window
    if fw and fw.seconds is not None:
        lines.append(f"freeze window: {fw.seconds:.1f}s (producers frozen {fw.frozen_at}, clients switched "
                     f"{fw.switched_at})")
    if r.carried_back is not None:
        lines.append(f"records written on the new cluster after promote and carried back: {r.carried_back:,}")
    if r.routing:
        lines.append(f"routing: active {r.routing['active']} ({r.routing['bootstrap.servers']})")
    return "\n".join(lines)


promote_cmd = _switch_command("promote", """Switch producers, consumers and tables to the new cluster.

Steps: hold (postpone file) -> freeze producers -> wait until quiet -> drain the mirror
-> stop consumers -> exact group sync -> reverse mirror on -> switch clients (routing
file) -> hand each table over -> resume. Every step is journaled; re-running after a
crash continues where it stopped. Exit 3 when a precondition refuses.
""")

rollback_cmd = _switch_command("rollback", """Go back to the old cluster, from any point of a promote.

Before clients switched it undoes what was done. After, it freezes producers on the
new cluster, drains the reverse mirror (nothing written after promote is lost),
translates groups back exactly, switches routing back, hands tables back and resumes.
""")


complete_cmd = _switch_command("complete", """Finish the migration after the last promote: nothing to go back to.

Steps: a final verify (stop unless it passes) -> retire both mirrors (marked ended,
fenced; a running one exits 8) -> remove the shadow's leftovers the plan's complete:
section names -> delete both mirrors' state topics (unless --keep-state). Then a
completion record, the journal archived. Refused while consumers still read the old
cluster's selected topics, or while the last verify is older than the promote.
""")

cancel_cmd = _switch_command("cancel", """Abandon the migration before any promote (or after a rollback).

Steps: retire both mirrors -> delete the groups the mirror committed on the new
cluster -> drop the shadow's tables, dead-letter tables, branches and checkpoints ->
delete the mirrored topics (only with --delete-mirrored-topics) -> delete the state
topics (unless --keep-state). The old cluster keeps everything. Then a completion
record, the journal archived.
""")


@click.command("status")
@plan_option
@click.option("--watch", is_flag=True, help="Show it live, a line each for the switch, the mirrors, the shadow, the "
              "readers and verify, red where something is wrong, until Ctrl-C.")
@click.option("--interval", type=Seconds(), default=5.0, show_default=True, metavar="SECONDS",
              help="With --watch: how often it is read again.")
@output_option
@timeout_option(whole=True)
def status_cmd(plan_file: str, watch: bool, interval: float, fmt: Format, timeout: float) -> int:
    """Where the migration stands: phase, steps, freeze window, mirror lag, last verify, routing.

    Exit 0 when every part answered and none is in error; 1 when one is (a cluster, the
    catalog or the routing file could not be read, a mirror has a DATA LOSS gap, a switch
    step failed), listed under `problems`. With --watch, live until Ctrl-C (exit 0).
    """
    from cutover.plan import load_plan
    from cutover.switch import status

    if watch:
        if fmt is Format.JSON:
            raise UsageError("--watch shows the status live for a person; -o json is for a single reading",
                             fix="drop -o json, or --watch (and run cutover status -o json as often as needed)")
        from cutover import interrupt
        from cutover.switch import watch as live

        interrupt.unbound()  # --timeout bounds each reading, not the watch
        with stop_on_signals() as stop:
            live.watch(load_plan(plan_file), interval, timeout, stop.wait)
        return 0
    report = status.status(load_plan(plan_file), timeout)
    emit(report, fmt, status.render)
    return 1 if report["problems"] else 0
