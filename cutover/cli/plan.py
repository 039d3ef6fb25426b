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
@timeout_option(whole=True)
@click.option("--offline", is_flag=True, help="Only validate the file; connect to nothing.")
def check_cmd(plan_file: str, fmt: Format, timeout: float, offline: bool) -> int:
    """Validate the plan, then connect to both clusters, the catalog and the storage and report
    what they hold and what a later command would refuse (findings, each with its fix).

    Exit 0 when the plan is valid, everything it names answered and nothing would be refused;
    1 when a cluster, the catalog or the storage could not be used; 2 when the plan is
    invalid; 3 when everything answered but there are findings (not ready).
    """
    from cutover.observe import probe
    from cutover.plan import load_plan

    plan = load_plan(plan_file)
    if offline:
        report = probe.offline(plan)
        emit(report, fmt, lambda r: "\n".join([f"plan {r['name']} ({r['plan']}): valid",
                                                *probe.render_readers(r["readers"]),
                                                *probe.render_findings(r["findings"])]))
        return probe.exit_code(report)
    report = probe.check(plan, timeout)
    emit(report, fmt, probe.render)
    return probe.exit_code(report)


@plan_group.command("schema")
def schema_cmd() -> int:
    """Print a JSON Schema of the plan file on stdout, for editors (completion and checks as
    you type). It is generated from the plan's model, as the docs' plan reference is.

    \b
    Example:
      cutover plan schema > plan.schema.json
      # VS Code's YAML extension, in settings.json:
      #   "yaml.schemas": {"plan.schema.json": "plan.yaml"}
    """
    import json
    import sys

    from cutover.plan import reference

    sys.stdout.write(json.dumps(reference.json_schema(), indent=2) + "\n")
    return 0
