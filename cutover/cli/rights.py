"""`cutover rights plan|apply|audit`: ACLs, client quotas and SCRAM users move with the workload,
and the switch refuses while any client would be denied on the other side."""

from __future__ import annotations

from typing import Any

import click

from cutover.cli.options import output_option, plan_option, timeout_option
from cutover.errors import DifferencesFound, UsageError
from cutover.output import Format, emit, progress


@click.group("rights")
def rights_group() -> None:
    """Carry ACLs, client quotas and SCRAM users to the new cluster, and audit the effective rights."""


def _render_plan(report: dict[str, Any]) -> str:
    lines = [f"rights of the selection ({len(report['selected']['topics'])} topic(s), "
             f"{len(report['selected']['groups'])} group(s)), {report['source']} -> {report['target']}:"]
    for side, info in sorted(report["clusters"].items()):
        state = f"{info['acls']} ACL(s)" if info["authorizer"] else "no authorizer"
        lines.append(f"  {side}: {state}, {info['quota_entities']} quota entit(ies), {info['scram_users']} SCRAM "
                     f"user(s); principals from {info['settings'].get('ssl.principal.mapping.rules') or 'DEFAULT'}")
    renamed = {o: n for o, n in report["principals"].items() if o != n}
    for old, new in sorted(renamed.items()):
        lines.append(f"  {old} is {new} on the {report['target']} cluster")
    for principal, parts in report["per_principal"].items():
        lines.append(f"{principal}:")
        for key, label in (("create", "create"), ("extra", "extra on the target"), ("cannot", "cannot copy")):
            lines += [f"  {label}: {line}" for line in parts[key]]
    if not report["per_principal"]:
        lines.append("nothing to create; the target holds nothing extra")
    for key, label in (("applied", "applied"), ("would", "would")):
        if key in report:
            done = report[key]
            lines.append(f"{label}: {len(done.get('created', done.get('create', [])))} created, "
                         f"{len(done.get('deleted', done.get('delete', [])))} deleted")
    lines += [f"note: {n}" for n in report["notes"]]
    return "\n".join(lines)


@rights_group.command("plan")
@plan_option
@output_option
@timeout_option(whole=False)
def plan_cmd(plan_file: str, fmt: Format, timeout: float) -> int:
    """Inventory the old cluster's rights that the plan's selection uses (ACLs of every resource
    type and pattern, client quotas, SCRAM users) and compare them with the new cluster's, per
    principal: what would be created, what the new cluster holds beyond them, what cannot be copied
    and why. Read-only.

    \b
    Example:
      cutover rights plan --plan plan.yaml
      cutover rights plan --plan plan.yaml -o json
    """
    from cutover.plan import load_plan
    from cutover.rights import run

    plan = load_plan(plan_file)
    reading, found = run.plan_rights(plan, "forward", timeout)
    emit(run.plan_report(reading, found, bool(plan.spec.rights and plan.spec.rights.owned)), fmt, _render_plan)
    return 0


@rights_group.command("apply")
@plan_option
@click.option("--dry-run", is_flag=True, help="Show what would be created (and deleted); change nothing.")
@click.option("--execute", is_flag=True, help="Create what is missing on the new cluster.")
@output_option
@timeout_option(whole=False)
def apply_cmd(plan_file: str, dry_run: bool, execute: bool, fmt: Format, timeout: float) -> int:
    """Create on the new cluster what `rights plan` says is missing: ACLs as they are (WRITE, DENY,
    PREFIXED, group, transactional-id and cluster entries), quotas (each read back), SCRAM users
    with the same mechanism and iterations from the env-file variables of rights.scram_passwords,
    principals renamed by rights.principals. Additive unless rights.owned: then what the new
    cluster holds beyond the old is deleted (the dry run lists it). Idempotent; after a kill,
    run it again.

    \b
    Example:
      cutover rights apply --plan plan.yaml --dry-run
      cutover rights apply --plan plan.yaml --execute
    """
    from cutover.plan import load_plan
    from cutover.rights import run

    if dry_run == execute:
        raise UsageError("rights apply needs exactly one of --dry-run and --execute "
                         + ("(got both)" if dry_run else "(got neither)"),
                         fix="see what would change with --dry-run first")
    emit(run.apply(load_plan(plan_file), execute, timeout, progress), fmt, _render_plan)
    return 0


def _render_audit(result: Any) -> str:
    data = result.as_dict()
    lines = [f"rights audit: {data['counts']['principals']} principal(s), {data['counts']['decisions']} decision(s) "
             "compared"]
    for f in result.findings:
        tag = "EXTRA (allowed)" if f.kind == "extra" and result.allow_extra else f.kind.upper()
        lines.append(f"  {tag}: {f.describe()}")
    lines += [f"note: {n}" for n in result.notes]
    lines.append("PASSED" if data["passed"] else f"FAILED: {len(result.blocking)} blocking finding(s)")
    return "\n".join(lines)


@rights_group.command("audit")
@plan_option
@click.option("--reverse", is_flag=True, help="New cluster to old (the way back, before a rollback).")
@output_option
@timeout_option(whole=False)
def audit_cmd(plan_file: str, reverse: bool, fmt: Format, timeout: float) -> int:
    """Compare the effective rights on both clusters, per principal, selected resource and operation,
    with the authorizer's rules (DENY first, prefixed patterns, the wildcard principal and host,
    super.users, implied DESCRIBE). MISSING: allowed on old, denied on new. EXTRA: allowed on new
    only (blocking unless rights.allow_extra). Principals with rights.credentials are proved by a
    real handshake on the new cluster. Exit 4 on a blocking finding.

    \b
    Example:
      cutover rights audit --plan plan.yaml
      cutover rights audit --plan plan.yaml -o json
    """
    from cutover.plan import load_plan
    from cutover.rights import run

    result = run.audit(load_plan(plan_file), "reverse" if reverse else "forward", timeout)
    emit(result, fmt, _render_audit)
    if result.blocking:
        refused = any(f.kind == "credentials" for f in result.blocking)
        raise DifferencesFound(f"rights audit found {len(result.blocking)} blocking finding(s)",
                               fix="run cutover rights apply --execute for what is missing; remove or allow "
                                   "(rights.allow_extra) what is extra" + (
                                       "; for CREDENTIALS, do what each finding's fix says" if refused else ""))
    return 0
