"""The rights commands' work, for the CLI and the switch: read both clusters, then plan, apply or
audit. `direction` forward goes old -> new (promote); reverse new -> old (rollback), the
principal map inverted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from cutover.kafka.clients import ClusterRef
from cutover.kafka.inspect import list_groups, partition_counts
from cutover.plan import Plan, variables
from cutover.plan.model import ClusterSide
from cutover.rights import apply as applying
from cutover.rights import audit as auditing
from cutover.rights import inventory
from cutover.rights.diff import RightsDiff, Selected, diff

Direction = Literal["forward", "reverse"]


def sides(direction: Direction) -> tuple[ClusterSide, ClusterSide]:
    return ("old", "new") if direction == "forward" else ("new", "old")


def principal_map(plan: Plan, direction: Direction) -> dict[str, str]:
    given = dict(plan.spec.rights.principals) if plan.spec.rights else {}
    return given if direction == "forward" else {new: old for old, new in given.items()}


def selection(plan: Plan, side: ClusterSide, timeout: float) -> Selected:
    ref = ClusterRef.of(plan, side)
    topics = tuple(sorted(t for t in partition_counts(ref, timeout) if plan.spec.topics.matches(t)))
    groups = tuple(g for g in list_groups(ref, timeout) if plan.spec.groups.matches(g))
    return Selected(topics, groups)


@dataclass
class Reading:
    source: inventory.Inventory
    target: inventory.Inventory
    selected: Selected
    notes: list[str] = field(default_factory=list)


def read(plan: Plan, direction: Direction, timeout: float, quotas: bool = True) -> Reading:
    """Both clusters' inventories; without `quotas` their client quotas are not read (the audit
    compares ACL decisions only, and each quota read starts a JVM)."""
    src, dst = sides(direction)
    reading = Reading(inventory.read(plan, src, timeout, quotas), inventory.read(plan, dst, timeout, quotas),
                      selection(plan, src, timeout))
    for inv in (reading.source, reading.target):
        if not inv.authorizer.enabled:
            reading.notes.append(f"the {inv.side} cluster runs no authorizer: it enforces no ACL, every "
                                 "principal may do everything there")
        elif not (plan.spec.rights and plan.spec.rights.super_users_of(inv.side)):
            reading.notes.append(f"the {inv.side} cluster does not reveal its super.users (nor "
                                 f"allow.everyone.if.no.acl.found): declare them in rights.{inv.side} if a principal "
                                 "in scope is one")
    return reading


def plan_rights(plan: Plan, direction: Direction, timeout: float) -> tuple[Reading, RightsDiff]:
    reading = read(plan, direction, timeout)
    src, dst = sides(direction)
    passwords = dict(plan.spec.rights.scram_passwords) if plan.spec.rights else {}
    found = diff(reading.source, reading.target, reading.selected, principal_map(plan, direction),
                 plan.cluster(src), plan.cluster(dst), passwords)
    if not reading.source.authorizer.enabled:
        found.create = [c for c in found.create if c.acl is None]  # it holds no ACL to copy
    found.notes[:0] = reading.notes
    return reading, found


def plan_report(reading: Reading, found: RightsDiff, owned: bool) -> dict[str, Any]:
    return {
        "source": found.source, "target": found.target,
        "selected": {"topics": list(reading.selected.topics), "groups": list(reading.selected.groups)},
        "principals": found.principals,
        "per_principal": found.by_principal(),
        "counts": {"create": len(found.create), "extra": len(found.extra), "cannot": len(found.cannot),
                   "delete": len(found.extra) if owned else 0},
        "clusters": {inv.side: {"authorizer": inv.authorizer.enabled, "acls": len(inv.acls),
                                "scram_users": len(inv.scram), "quota_entities": len(inv.quotas),
                                "settings": inv.settings}
                     for inv in (reading.source, reading.target)},
        "notes": found.notes,
    }


def apply(plan: Plan, execute: bool, timeout: float, say: Callable[[str], None]) -> dict[str, Any]:
    reading, found = plan_rights(plan, "forward", timeout)
    owned = bool(plan.spec.rights and plan.spec.rights.owned)
    report = plan_report(reading, found, owned)
    if execute:
        done = applying.apply(ClusterRef.of(plan, "new"), found, variables(plan), owned, timeout, say)
        report["applied"] = done.as_dict()
    else:
        report["would"] = {"create": [c.describe() for c in found.create],
                           "delete": [c.describe() for c in found.extra] if owned else []}
    return report


@dataclass
class AuditResult:
    findings: list[auditing.Finding]
    counts: dict[str, int]
    notes: list[str]
    allow_extra: bool

    @property
    def blocking(self) -> list[auditing.Finding]:
        return [f for f in self.findings if f.kind != "extra" or not self.allow_extra]

    def as_dict(self) -> dict[str, Any]:
        return {"passed": not self.blocking, "counts": self.counts, "notes": self.notes,
                "missing": [f.as_dict() for f in self.findings if f.kind == "missing"],
                "extra": [f.as_dict() for f in self.findings if f.kind == "extra"],
                "credentials": [f.as_dict() for f in self.findings if f.kind == "credentials"],
                "extra_allowed": self.allow_extra}


def audit(plan: Plan, direction: Direction, timeout: float) -> AuditResult:
    reading = read(plan, direction, timeout, quotas=False)
    findings, counts = auditing.compare(reading.source, reading.target, reading.selected,
                                        principal_map(plan, direction))
    rights = plan.spec.rights
    if rights and rights.credentials and direction == "forward":
        findings += auditing.prove(plan.cluster("new"), rights.credentials, timeout)
    elif rights and rights.credentials:
        reading.notes.append("rights.credentials are proved on the new cluster only (the audit without --reverse): "
                             "the way back uses the old cluster's own credentials")
    return AuditResult(findings, counts, reading.notes, bool(rights and rights.allow_extra))


def refusal(plan: Plan, direction: Direction, timeout: float) -> str | None:
    """For the switch's rights-match precondition: None, or every blocking finding."""
    return judge(audit(plan, direction, timeout).blocking)


def judge(blocking: list[auditing.Finding]) -> str | None:
    """Every blocking finding in one reason (pure), none left for a second run to find."""
    if not blocking:
        return None
    return (f"{len(blocking)} rights finding(s): " + "; ".join(f.describe() for f in blocking)
            + "; see cutover rights audit, fix with cutover rights apply")
