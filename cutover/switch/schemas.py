"""The schema registry at the switch: ids checked before, schemas synced before and within the freeze, and
the target registry's subjects made writable at the switch.

Promote syncs old -> new before the freeze (the bulk) and audits the new cluster's records;
within the freeze, after the drain, it syncs again (registrations made on the old registry
until the producers froze) and takes the moved subjects on the new registry out of IMPORT
mode, so the producers that switch can register there. Rollback does the same new -> old:
schemas registered on the new registry after promote go back under their ids. A clash (the
target holds another schema under a needed id) is a precondition's refusal, before the freeze.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from cutover.errors import CutoverError, Refused
from cutover.plan import Plan
from cutover.registry import audit as audit_mod
from cutover.registry import sync as sync_mod

Detail = dict[str, Any]


def _reverse(direction: str) -> bool:
    return direction == "reverse"


def refusal(plan: Plan, direction: str, timeout: float) -> str | None:
    """Why the registry would refuse the switch (read-only), or None: the sync's plan and, for promote, the
    audit of the new cluster's records, both gathered (a clash does not hide an unknown id), then judged."""
    if plan.spec.registry is None:
        return None
    planned = sync_mod.run(plan, False, timeout, _reverse(direction))
    audited: audit_mod.AuditResult | str | None = None
    if not _reverse(direction):
        try:
            audited = audit_mod.audit(plan, "new", False, timeout)
        except CutoverError as exc:  # said beside the sync's refusals, which still count
            audited = f"could not audit the new cluster's records: {exc.message}"
    return judge(planned.refusals, {m.version.id for m in planned.to_copy}, audited)


def judge(sync_refusals: Sequence[str], to_copy: Collection[int], audited: audit_mod.AuditResult | str | None,
          ) -> str | None:
    """Every clash of the sync and every audit failure that blocks (pure: the sync's refusals, the ids it
    would copy and the audit are given). An id missing on the new registry that the sync copies does not
    block; failures the audit only counted (beyond the ones it keeps per kind) are said as a count."""
    problems = list(sync_refusals)
    if isinstance(audited, str):
        problems.append(audited)
    elif audited is not None:
        failures, counted = audit_problems(audited, to_copy)
        problems += [f"registry audit of the new cluster: {line}" for line in failures] + counted
    return "; ".join(problems) or None


def audit_problems(audited: audit_mod.AuditResult, to_copy: Collection[int] = ()) -> tuple[list[str], list[str]]:
    """Each blocking failure of an audit of the new cluster, with where it was first found; and the failures
    of those kinds it only counted."""
    blocking = [f for f in audited.failures if not (f.kind == "missing-on-new" and f.schema_id in to_copy)]
    failures = [f"{f.kind}" + (f" at {f.topic}/{f.partition} offset {f.offset}" if f.topic is not None else "")
                + f": {f.text}" for f in blocking]
    kinds = {f.kind for f in blocking}
    counted = [f"and {n} more {kind} failure(s) beyond the {audit_mod.MAX_FAILURES} the audit keeps per kind "
               "(cutover registry audit lists them)" for kind, n in sorted(audited.more_failures.items())
               if kind in kinds]
    return failures, counted


def _synced(plan: Plan, direction: str, timeout: float) -> sync_mod.SyncPlan:
    """The sync carried out; a refusal (a clash that came after the precondition held) stops the step."""
    done = sync_mod.run(plan, True, timeout, _reverse(direction))
    if done.refusals:
        raise Refused("registry sync refused: " + "; ".join(done.refusals),
                      fix="the target registry must not hold other schemas under the ids moved")
    return done


def prepare(plan: Plan, direction: str, timeout: float) -> Detail:
    """Before the freeze: sync every schema, then (promote) audit the new cluster's records."""
    done = _synced(plan, direction, timeout)
    detail: Detail = {"copied": len(done.copied), "present": len(done.moves) - len(done.to_copy),
                      "method": done.method, "subjects": list(done.subjects)}
    if not _reverse(direction):
        result = audit_mod.audit(plan, "new", False, timeout)
        detail["audit"] = {"records": result.records, "ids": sorted(result.ids), "passed": result.passed}
        if not result.passed:
            failures, counted = audit_problems(result)
            raise Refused("registry audit of the new cluster failed: " + "; ".join([*failures, *counted]),
                          fix="run cutover registry audit --plan FILE for every failure; fix it, then promote again")
    return detail


def final(plan: Plan, direction: str, timeout: float) -> Detail:
    """Within the freeze: sync what was registered since, then open the target's moved subjects for writes."""
    done = _synced(plan, direction, timeout)
    source, target = sync_mod.clients(plan, timeout, _reverse(direction))
    opened = sync_mod.release(source, target, done.subjects)
    return {"copied": len(done.copied), "method": done.method, "writable": opened}


def explain(plan: Plan, direction: str, stage: str, timeout: float) -> str:
    """What prepare or final would do, from a read-only sync plan."""
    src, dst = ("new", "old") if _reverse(direction) else ("old", "new")
    try:
        planned = sync_mod.run(plan, False, timeout, _reverse(direction))
        counts = (f"{len(planned.to_copy)} version(s) to copy now ({planned.method}), "
                  f"{len(planned.moves) - len(planned.to_copy)} present, subjects: "
                  f"{', '.join(planned.subjects) or 'none'}")
    except Exception as exc:  # a dry run lists the step even when a registry does not answer
        counts = f"could not read the registries: {getattr(exc, 'message', exc)}"
    if stage == "prepare":
        audit = "; then audit the new cluster's framed records (every schema id on both registries)" \
            if not _reverse(direction) else ""
        return f"sync the {src} registry to the {dst} one, ids kept: {counts}{audit}"
    return (f"sync again what the {src} registry took since, then take the moved subjects on the {dst} registry out "
            f"of IMPORT mode so its producers can register: {counts}")
