"""`cutover mirror` and `cutover offsets`: copy topics and groups, show progress, translate offsets."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cutover.cli.options import metrics_options, output_option, plan_option, stop_on_signals, timeout_option
from cutover.errors import UsageError
from cutover.output import Format, emit, progress, table

if TYPE_CHECKING:
    from cutover.mirror.runner import RunSummary
    from cutover.mirror.state import Direction
    from cutover.plan import Plan

_reverse = click.option("--reverse", is_flag=True,
                        help="New to old (for rollback) instead of old to new.")


@click.group("mirror", invoke_without_command=True)
@click.option("--plan", "plan_file", envvar="CUTOVER_PLAN", metavar="FILE", type=click.Path(dir_okay=False),
              help="The migration plan (YAML). Env: CUTOVER_PLAN.  [required]")
@click.option("--until-caught-up", is_flag=True,
              help="Stop once every partition reaches the source end seen at start (after a final group sync).")
@click.option("--follow", is_flag=True, help="Run until stopped (the default), as shadow --follow does.")
@click.option("--shard", default="0/1", show_default=True, metavar="I/N",
              help="Mirror only this process's share of the partitions (deterministic split).")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True, metavar="N",
              help="Run the plan's N shards as N worker processes of this command (one core each).")
@_reverse
@click.option("--allow-existing-target", is_flag=True,
              help="Adopt target topics that already hold records or have fewer partitions.")
@click.option("--allow-rewind", is_flag=True, help="Let group sync move a target group backwards.")
@metrics_options
@click.option("--ready-file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Create FILE once the mirror owns its partitions and is copying (for supervisors).")
@click.option("--idle-when-closed", is_flag=True,
              help="When the switch closes this mirror (exit 8), stay up idle until stopped, for supervisors "
                   "that restart every exit (a Kubernetes StatefulSet).")
@click.option("--armed-file", type=click.Path(dir_okay=False), metavar="FILE", hidden=True,
              help="(promote) Start armed: create FILE once started, then wait for --go-file before copying.")
@click.option("--go-file", type=click.Path(dir_okay=False), metavar="FILE", hidden=True)
@click.option("--armed-by", type=int, metavar="PID", hidden=True,
              help="(promote) While armed, exit without copying if this parent process goes.")
@click.option("--started-by", type=click.Choice(["hand", "promote"]), default="hand", hidden=True,
              help="(promote) Who started this process, for its owner record in the mirror's state.")
@output_option
@timeout_option(whole=False)
@click.pass_context
def mirror_group(ctx: click.Context, plan_file: str | None, until_caught_up: bool, follow: bool, shard: str,
                 workers: int,
                 reverse: bool,
                 allow_existing_target: bool, allow_rewind: bool, metrics_port: int | None, metrics_host: str | None,
                 ready_file: str | None,
                 idle_when_closed: bool, armed_file: str | None, go_file: str | None, armed_by: int | None,
                 started_by: str, fmt: Format, timeout: float) -> int:
    """Copy the plan's topics and consumer-group offsets, exactly once, from the old cluster to the new.

    Runs until SIGINT/SIGTERM (finishing the transaction in flight, if one is open) or,
    with --until-caught-up, until the source end offsets seen at start are reached.
    Progress goes to stderr; the summary to stdout. Exit 8 when promote closed this forward
    mirror: its end, as designed (the shipped service files treat it as done).
    """
    if ctx.invoked_subcommand:
        return 0
    if not plan_file:
        raise UsageError("cutover mirror needs --plan FILE (or CUTOVER_PLAN)", fix="cutover mirror --plan plan.yaml")
    if follow and until_caught_up:
        raise UsageError("--follow and --until-caught-up contradict each other", fix="give one of them")
    from cutover.mirror import runner
    from cutover.mirror.shard import Shard
    from cutover.plan import load_plan

    if armed_file and not (go_file and armed_by):
        raise UsageError("--armed-file needs --go-file and --armed-by", fix="these are for cutover promote only")
    if workers > 1 and (shard != "0/1" or armed_file):
        raise UsageError(f"--workers {workers} runs shards 0/{workers} to {workers - 1}/{workers} itself; it cannot "
                         f"be combined with {'--shard ' + shard if shard != '0/1' else '--armed-file'}",
                         fix=f"drop --shard and run one command with --workers {workers}, or run one process "
                             "per shard with --shard I/N and no --workers")
    if ready_file:
        _can_create("--ready-file", Path(ready_file))
    plan = load_plan(plan_file)
    _not_ended(plan, f"mirror{' --reverse' if reverse else ''}", service=True)
    opts = runner.Options(direction="reverse" if reverse else "forward", shard=Shard.parse(shard),
                          until_caught_up=until_caught_up, allow_existing_target=allow_existing_target,
                          allow_rewind=allow_rewind, timeout=timeout,
                          metrics_at=plan.metrics_endpoint("reverse_mirror" if reverse else "mirror", metrics_port,
                                                           metrics_host),
                          on_ready=(lambda: Path(ready_file).touch()) if ready_file else None, started_by=started_by)
    with stop_on_signals() as stop:
        if workers > 1:
            from cutover.mirror import workers as supervisor

            if reverse:  # once, before any worker starts
                runner.refuse_reverse(plan, timeout)
            summary = supervisor.supervise(Path(plan_file), opts, workers, stop)
        else:
            if armed_file and go_file and armed_by:
                from cutover.switch import background

                opts = replace(opts, gate=lambda: background.await_go(Path(armed_file), Path(go_file), armed_by,
                                                                      stop))
            try:
                summary = runner.run(plan, opts, stop)
            except runner.ClosedBySwitch as closed:
                if not idle_when_closed:
                    raise
                if ready_file:
                    Path(ready_file).unlink(missing_ok=True)
                progress(f"{closed.message}; idle until stopped (--idle-when-closed)")
                stop.wait()
                return int(closed.exit_code)
    emit(summary, fmt, _render_summary)
    return 0


def _not_ended(plan: Plan, what: str, service: bool) -> None:
    """Refuse what writes for a plan whose migration complete or cancel ended, as its completion record says. The
    mirrors' state says so too, but complete and cancel delete it unless kept: without the record a mirror started
    then would find no state, and give another reason (or none). Exit 8 for the mirror (a service: done, as
    designed), 3 for a one-off command."""
    from cutover.errors import Refused
    from cutover.mirror.runner import ClosedBySwitch
    from cutover.switch import journal

    folder = journal.directory(plan)
    record = journal.read_record(folder)
    if record is None:
        return
    message = (f"cutover {what}: the migration ended: cutover {record.get('action')} finished at {record.get('at')} "
               f"(record {folder / journal.RECORD}): neither of its mirrors runs again")
    if service:
        raise ClosedBySwitch(message, fix="nothing to do: remove this mirror's service (exit code 8 tells the shipped "
                                          "systemd units and Kubernetes manifest it is done)")
    raise Refused(f"{message}; nothing was written",
                  fix="nothing to do; to migrate again, write a new plan (another name)")


def _can_create(option: str, file: Path) -> None:
    """Refuse, before any cluster is asked, a file the command would fail to create once it owns its partitions."""
    folder = file.absolute().parent
    if not folder.is_dir():
        raise UsageError(f"{option} {file}: the folder {folder} does not exist",
                         fix=f"create it (mkdir -p {folder}) or give a file in an existing folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {file}: this user may not create files in {folder}",
                         fix="give a file in a folder this user may write to")


def _render_summary(s: RunSummary) -> str:
    lines = [f"mirrored {s.records:,} records ({s.bytes / 1e6:.1f} MB) {s.direction} in {s.seconds}s, "
             f"{s.transactions} transactions, {len(s.partitions)} partitions (shard {s.shard})"]
    for p in s.gaps:
        for start, end in p.gaps:
            lines.append(f"DATA LOSS: {p.topic}/{p.partition} offsets {start}..{end - 1} were deleted on "
                         "the source before they were mirrored")
    return "\n".join(lines + _render_groups([o.as_dict() for o in s.groups]))


def _render_groups(outcomes: list[dict[str, Any]]) -> list[str]:
    lines = []
    for g in outcomes:
        state = g["reason"] or f"{len(g['committed'])} partitions in sync"
        lines.append(f"group {g['group']}: {state}")
        lines += [f"  skipped {s['topic']}/{s['partition']}: {s['reason']}" for s in g["skipped"]]
    return lines


def _direction(plan: Plan, reverse: bool, what: str, writes: bool, timeout: float) -> Direction:
    """See mirror/direction.py: refused (writing nothing) when that way may not be used now."""
    from cutover.mirror import direction

    return direction.chosen(plan, reverse, what, writes, timeout)


@mirror_group.command("status")
@plan_option
@_reverse
@output_option
@timeout_option(whole=True)
def status_cmd(plan_file: str, reverse: bool, fmt: Format, timeout: float) -> int:
    """Per partition: source end offset, mirrored position, lag, last group sync; and any data loss."""
    from cutover.mirror import status
    from cutover.plan import load_plan

    plan = load_plan(plan_file)
    result = status.status(plan, _direction(plan, reverse, "mirror status", False, timeout), timeout)
    emit(result, fmt, status.render)
    return 0


@click.group("offsets")
def offsets_group() -> None:
    """Translate consumer-group offsets between the clusters through the mirror's exact offset map, and
    commit them now."""


@offsets_group.command("translate")
@plan_option
@click.option("--group", required=True, help="The consumer group.")
@_reverse
@output_option
@timeout_option(whole=True)
def translate_cmd(plan_file: str, group: str, reverse: bool, fmt: Format, timeout: float) -> int:
    """Per partition: the group's committed offset on the source cluster and the exact offset on the target.

    Exit 0 when every partition translated; 1 when some are beyond what the mirror has copied.
    """
    from cutover.mirror import groups
    from cutover.plan import load_plan

    plan = load_plan(plan_file)
    direction = _direction(plan, reverse, "offsets translate", False, timeout)
    result = [t.as_dict() for t in groups.translate_group(plan, group, direction, timeout)]
    emit({"group": group, "direction": "reverse" if reverse else "forward", "partitions": result}, fmt,
         lambda r: table([[p["topic"], str(p["partition"]), str(p["source_offset"]),
                           str(p["target_offset"]) if p["target_offset"] is not None else f"- ({p['reason']})"]
                          for p in r["partitions"]], ["topic", "partition", "source", "target"]))
    return 0 if all(p["target_offset"] is not None for p in result) else 1


@offsets_group.command("sync")
@plan_option
@_reverse
@click.option("--allow-rewind", is_flag=True, help="Let the sync move a target group backwards.")
@output_option
@timeout_option(whole=True)
def sync_cmd(plan_file: str, reverse: bool, allow_rewind: bool, fmt: Format, timeout: float) -> int:
    """Translate and commit the selected groups' offsets now (only groups with no active members on the target)."""
    from cutover.mirror import groups
    from cutover.plan import load_plan

    plan = load_plan(plan_file)
    _not_ended(plan, f"offsets sync{' --reverse' if reverse else ''}", service=False)
    outcomes = groups.sync_now(plan, _direction(plan, reverse, "offsets sync", True, timeout), allow_rewind,
                               timeout)
    emit({"groups": [o.as_dict() for o in outcomes]}, fmt,
         lambda r: "\n".join(_render_groups(r["groups"])) or "no selected group has committed offsets")
    return 0
