"""`cutover registry sync` and `cutover registry audit`: schemas move with the topics, ids kept."""

from __future__ import annotations

import click

from cutover.cli.options import output_option, plan_option, timeout_option
from cutover.errors import DifferencesFound, Refused, UsageError
from cutover.output import Format, emit


@click.group("registry")
def registry_group() -> None:
    """Move the schema registry with its ids, and check that records' schema ids mean the same schemas."""


@registry_group.command("sync")
@plan_option
@click.option("--dry-run", is_flag=True, help="Read both registries and print what would be copied; write nothing.")
@click.option("--execute", is_flag=True, help="Copy what is missing, every version under its id.")
@click.option("--reverse", is_flag=True, help="New registry to old (the way back, after promote).")
@output_option
@timeout_option(whole=False)
def sync_cmd(plan_file: str, dry_run: bool, execute: bool, reverse: bool, fmt: Format, timeout: float) -> int:
    """Copy the selected topics' subjects (TopicNameStrategy, plus registry.subjects) from the old
    registry to the new one: every version under its own id and version, references first, in
    IMPORT mode; compatibility levels after. Idempotent: a re-run copies only what is left.

    Exit 3, nothing written, when the target holds a different schema under a needed id or a
    needed subject has versions there that the source lacks.

    \b
    Example:
      cutover registry sync --plan plan.yaml --dry-run
      cutover registry sync --plan plan.yaml --execute -o json
    """
    from cutover.plan import load_plan
    from cutover.registry import sync

    if dry_run == execute:
        raise UsageError("registry sync needs exactly one of --dry-run and --execute",
                         fix="see what would be copied with --dry-run first")
    plan = load_plan(plan_file)
    if reverse:  # new -> old only after a promote (mirror/direction.py)
        from cutover.mirror import direction

        direction.chosen(plan, True, "registry sync", execute, timeout)
    result = sync.run(plan, execute, timeout, reverse)
    emit(result, fmt, sync.render)
    if result.refusals:
        raise Refused(f"registry sync refused: {len(result.refusals)} conflict(s) on the target; nothing written",
                      fix="see REFUSED above: the target must not hold other schemas under the ids and subjects moved")
    return 0


@registry_group.command("audit")
@plan_option
@click.option("--all", "full", is_flag=True, help="Read every record (default: a sample spread over each "
              "partition's retained range).")
@click.option("--cluster", type=click.Choice(["old", "new"]), default="new", show_default=True,
              help="The cluster whose records are read.")
@output_option
@timeout_option(whole=False)
def audit_cmd(plan_file: str, full: bool, cluster: str, fmt: Format, timeout: float) -> int:
    """Read the selected framed topics, collect every schema id in keys and values, and check each one
    against both registries: present on both, the same schema. Exit 4 on any failure.

    \b
    Example:
      cutover registry audit --plan plan.yaml
      cutover registry audit --plan plan.yaml --all -o json
    """
    from cutover.plan import load_plan
    from cutover.registry import audit

    result = audit.audit(load_plan(plan_file), "new" if cluster == "new" else "old", full, timeout)
    emit(result, fmt, audit.render)
    if not result.passed:
        raise DifferencesFound(f"registry audit found {len(result.failures)} failure(s)",
                               fix="run cutover registry sync --execute, then audit again; records that are not "
                                   "framed come from a producer that does not use the registry")
    return 0
