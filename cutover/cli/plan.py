"""`cutover plan ...`: validate a plan and check what it points at."""

from __future__ import annotations

import click

from cutover.cli.options import output_option, plan_option, timeout_option
from cutover.output import Format, emit


@click.group("plan")
def plan_group() -> None:
    """Validate a migration plan and check the clusters and catalog it names."""


@plan_group.command("check")
@plan_option
@output_option
@timeout_option(10.0)
@click.option("--offline", is_flag=True, help="Only validate the file; connect to nothing.")
def check_cmd(plan_file: str, fmt: Format, timeout: float, offline: bool) -> int:
    """Validate the plan, then connect to both clusters and the catalog and report what they hold.

    Exit 0 when the plan is valid and everything it names answered; 2 when the plan is
    invalid; 1 when a cluster or the catalog could not be reached.
    """
    from cutover import probe
    from cutover.plan import load_plan

    plan = load_plan(plan_file)
    if offline:
        emit({"plan": str(plan.file), "name": plan.name, "valid": True}, fmt,
             lambda r: f"plan {r['name']} ({r['plan']}): valid")
        return 0
    report = probe.check(plan, timeout)
    emit(report, fmt, probe.render)
    return 0 if report["ok"] else 1
