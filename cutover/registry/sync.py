"""`cutover registry sync`: the selected topics' subjects, old registry to new, every schema under its id.

The sync is planned from the live registries, read-only, then carried out: the same
`SyncPlan` is printed by --dry-run and executed by --execute. Nothing is kept on disk: a
re-run (after a kill, a crash of either registry, or new registrations on the source) plans
again from what the two registries hold and does only what is left.

Refusals, before anything is written (exit 3): the target holds a different schema under a
needed id, or a needed subject has versions on the target that the source lacks (or under
another id). How the target keeps the ids is its strategy (registry/strategies.py: IMPORT
mode, or Apicurio 2.x's admin import), chosen by asking it; every version written is read back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from cutover.errors import Refused, UsageError
from cutover.plan import ClusterSide, Plan
from cutover.registry import strategies
from cutover.registry.client import RegistryClient, Version
from cutover.registry.keeping import Copy

Action = Literal["copy", "present", "refused"]


@dataclass(frozen=True)
class Move:
    """One version and what the sync does with it."""

    version: Version
    action: Action
    #: why it is copied although deleted, or why it is refused
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {**self.version.as_dict(), "action": self.action, "note": self.note}


@dataclass(frozen=True)
class SyncPlan:
    """What a sync finds and would do; `--dry-run` prints it, `--execute` carries it out."""

    source: str
    target: str
    subjects: tuple[str, ...]
    moves: tuple[Move, ...]
    #: (subject or None for the global level, source level, target level) where they differ
    compatibility: tuple[tuple[str | None, str, str | None], ...]
    #: soft-deleted versions of moved subjects that the sync leaves alone (soft_deleted: skip)
    skipped_deleted: tuple[Version, ...]
    refusals: tuple[str, ...]
    #: how the target keeps ids: the name of its strategy (strategies.STRATEGIES)
    method: str = "import-mode"
    executed: bool = False
    copied: tuple[Version, ...] = field(default=())

    @property
    def to_copy(self) -> list[Move]:
        return [m for m in self.moves if m.action == "copy"]

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "subjects": list(self.subjects),
                "versions": [m.as_dict() for m in self.moves],
                "compatibility": [{"subject": s, "source": a, "target": b} for s, a, b in self.compatibility],
                "skipped_deleted": [v.as_dict() for v in self.skipped_deleted],
                "refusals": list(self.refusals), "method": self.method, "executed": self.executed,
                "copied": len(self.copied), "to_copy": len(self.to_copy),
                "present": sum(1 for m in self.moves if m.action == "present")}


def clients(plan: Plan, timeout: float, reverse: bool = False) -> tuple[RegistryClient, RegistryClient]:
    """(source, target) registries: old to new, or new to old for the way back."""
    reg = plan.spec.registry
    if reg is None:
        raise UsageError(f"{plan.file}: the plan has no registry section",
                         fix="add registry: {old: {url: ...}, new: {url: ...}} (see samples/plan.yaml)")
    old, new = RegistryClient("old", reg.old, timeout), RegistryClient("new", reg.new, timeout)
    return (new, old) if reverse else (old, new)


def selected_subjects(plan: Plan, source: RegistryClient, topics: Iterable[str]) -> list[str]:
    """The subjects that belong to the selected topics (TopicNameStrategy: <topic>-key and <topic>-value)
    and those the plan's registry.subjects selects, among those the source holds."""
    assert plan.spec.registry is not None
    present = source.subjects(deleted=True)
    wanted = {f"{t}-{part}" for t in topics for part in ("key", "value")}
    chosen = {s for s in present if s in wanted or plan.spec.registry.subjects.matches(s)}
    return sorted(chosen)


def _versions(client: RegistryClient, subject: str) -> tuple[list[Version], list[Version]]:
    """(live versions, soft-deleted versions) of a subject, oldest first."""
    live = set(client.versions(subject))
    out: tuple[list[Version], list[Version]] = ([], [])
    for v in client.versions(subject, deleted=True):
        got = client.version(subject, v, deleted=True)
        if got is None:
            continue
        deleted = v not in live
        out[1 if deleted else 0].append(Version(got.subject, got.version, got.id, got.schema, deleted))
    return out


def plan_sync(plan: Plan, source: RegistryClient, target: RegistryClient, topics: Iterable[str]) -> SyncPlan:
    """Read both registries and decide, version by version; nothing is written."""
    assert plan.spec.registry is not None
    copy_deleted = plan.spec.registry.soft_deleted == "copy"
    subjects = selected_subjects(plan, source, topics)
    needed: dict[tuple[str, int], tuple[Version, str]] = {}
    skipped: list[Version] = []
    queue = list(subjects)
    while queue:
        subject = queue.pop(0)
        live, deleted = _versions(source, subject)
        for v in live + (deleted if copy_deleted else []):
            needed[(v.subject, v.version)] = (v, "soft-deleted on the source: copied, then soft-deleted"
                                              if v.deleted else "")
        if not copy_deleted:
            skipped += deleted
        for v in live + deleted:
            for _name, ref_subject, ref_version in v.schema.references:
                if (ref_subject, ref_version) not in needed:
                    got = source.version(ref_subject, ref_version, deleted=True)
                    if got is not None:
                        deleted_ref = ref_version not in source.versions(ref_subject)
                        ref = Version(got.subject, got.version, got.id, got.schema, deleted_ref)
                        needed[(ref_subject, ref_version)] = (ref, f"referenced by {v.subject} version {v.version}"
                                                              + (" (soft-deleted on the source: copied live)"
                                                                 if deleted_ref else ""))
    skipped = [v for v in skipped if (v.subject, v.version) not in needed]
    moves, refusals = _decide(source, target, [needed[k] for k in _dependency_order(needed)])
    compat = _compatibility(source, target, sorted({v.subject for v, _ in needed.values()}))
    method = strategies.for_sync(target).name
    return SyncPlan(source.describe(), target.describe(), tuple(sorted({v.subject for v, _ in needed.values()})),
                    tuple(moves), tuple(compat), tuple(skipped), tuple(refusals), method)


def _dependency_order(needed: dict[tuple[str, int], tuple[Version, str]]) -> list[tuple[str, int]]:
    """Referenced versions before those that reference them; otherwise by id, then subject and version."""
    order: list[tuple[str, int]] = []
    placed: set[tuple[str, int]] = set()

    def place(key: tuple[str, int], path: tuple[tuple[str, int], ...]) -> None:
        if key in placed or key not in needed or key in path:
            return
        for _n, s, v in needed[key][0].schema.references:
            place((s, v), (*path, key))
        placed.add(key)
        order.append(key)

    for key in sorted(needed, key=lambda k: (needed[k][0].id, k)):
        place(key, ())
    return order


def _decide(source: RegistryClient, target: RegistryClient,
            wanted: list[tuple[Version, str]]) -> tuple[list[Move], list[str]]:
    moves: list[Move] = []
    refusals: list[str] = []
    by_subject: dict[str, dict[int, int]] = {}
    for v, _ in wanted:
        by_subject.setdefault(v.subject, {})[v.version] = v.id
    target_versions: dict[str, dict[int, Version]] = {}
    for subject, source_versions in by_subject.items():
        held = {}
        for n in target.versions(subject, deleted=True):
            got = target.version(subject, n, deleted=True)
            if got is not None:
                held[n] = got
        target_versions[subject] = held
        live = set(target.versions(subject))  # a soft-deleted version the source never had is only reported
        everywhere = set(source.versions(subject, True))  # asked once, not per version held
        extra = sorted(n for n in held if n in live and n not in source_versions and n not in everywhere)
        if extra:
            refusals.append(f"subject {subject} has version(s) {', '.join(map(str, extra))} on {target.describe()} "
                            f"that {source.describe()} lacks (ids "
                            f"{', '.join(str(held[n].id) for n in extra)}): the target is not a copy of the source")
    for v, note in wanted:
        at_target = target_versions[v.subject].get(v.version)
        if at_target is not None and at_target.id != v.id:
            text = (f"subject {v.subject} version {v.version} is id {at_target.id} on {target.describe()} but id "
                    f"{v.id} on {source.describe()}")
            refusals.append(text)
            moves.append(Move(v, "refused", text))
            continue
        held_schema = target.schema(v.id)
        if held_schema is not None and held_schema.canonical() != v.schema.canonical():
            text = (f"id {v.id} ({v.subject} version {v.version}) holds a different {held_schema.type} schema on "
                    f"{target.describe()}: copying would make records with this id decode with the wrong schema")
            refusals.append(text)
            moves.append(Move(v, "refused", text))
            continue
        present = at_target is not None and held_schema is not None
        moves.append(Move(v, "present" if present else "copy", note))
    return moves, refusals


def _compatibility(source: RegistryClient, target: RegistryClient,
                   subjects: list[str]) -> list[tuple[str | None, str, str | None]]:
    out: list[tuple[str | None, str, str | None]] = []
    for subject in (None, *subjects):
        level, held = source.compatibility(subject), target.compatibility(subject)
        if level and level != held:
            out.append((subject, level, held))
    return out


def execute(sync: SyncPlan, source: RegistryClient, target: RegistryClient) -> SyncPlan:
    """Carry out a plan without refusals: IMPORT mode on each subject written, every version posted with
    its id and version (compatibility checks off for the subject while it is written), read back, and
    the source's compatibility levels set last."""
    if sync.refusals:
        raise Refused(f"registry sync from {source.describe()} to {target.describe()} refused, nothing written: "
                      + "; ".join(sync.refusals),
                      fix="the target must hold nothing else under the ids and subjects moved: remove what it holds "
                          "there (it is not a copy of the source), or move to an empty registry")
    compat = {s: lvl for s, lvl, _ in sync.compatibility if s is not None}
    copied = strategies.named(sync.method).write(target, [Copy(m.version, m.note) for m in sync.to_copy], compat)
    for compat_subject, level, _before in sync.compatibility:
        target.set_compatibility(level, compat_subject)
    return SyncPlan(sync.source, sync.target, sync.subjects, sync.moves, sync.compatibility, sync.skipped_deleted,
                    sync.refusals, sync.method, executed=True, copied=tuple(copied))


def release(source: RegistryClient, target: RegistryClient, subjects: Iterable[str]) -> list[str]:
    """After the switch: let the target's producers register the moved subjects (its strategy's release)."""
    return strategies.for_sync(target).release(source, target, subjects)


def render(sync: SyncPlan) -> str:
    lines = [f"registry sync: {sync.source} -> {sync.target} ({sync.method})",
             f"  subjects: {', '.join(sync.subjects) or 'none'}"]
    for m in sync.moves:
        lines.append(f"  {m.action:8} {m.version.subject} v{m.version.version} id {m.version.id} "
                     f"({m.version.schema.type.lower()})" + (f": {m.note}" if m.note else ""))
    for v in sync.skipped_deleted:
        lines.append(f"  skipped  {v.subject} v{v.version} id {v.id}: soft-deleted on the source "
                     "(registry.soft_deleted: skip)")
    for subject, a, b in sync.compatibility:
        lines.append(f"  compatibility {subject or '(global)'}: {b or 'default'} -> {a}")
    for r in sync.refusals:
        lines.append(f"  REFUSED: {r}")
    done = len(sync.copied) if sync.executed else 0
    lines.append(f"  {'copied' if sync.executed else 'would copy'} {done if sync.executed else len(sync.to_copy)} "
                 f"version(s); {sum(1 for m in sync.moves if m.action == 'present')} already present")
    return "\n".join(lines)


def topics_of(plan: Plan, side: ClusterSide, timeout: float) -> list[str]:
    """The plan's selected topics on one cluster."""
    from cutover.kafka import inspect
    from cutover.kafka.clients import ClusterRef

    return plan.spec.topics.select(list(inspect.partition_counts(ClusterRef.of(plan, side), timeout)))


def run(plan: Plan, execute_it: bool, timeout: float, reverse: bool = False) -> SyncPlan:
    """Plan the sync from the live registries; carry it out with `execute_it`."""
    source, target = clients(plan, timeout, reverse)
    source.probe()
    target.probe()
    sync = plan_sync(plan, source, target, topics_of(plan, "new" if reverse else "old", timeout))
    if not execute_it or sync.refusals:
        return sync  # refused: the caller reports it (exit 3); nothing was written
    return execute(sync, source, target)
