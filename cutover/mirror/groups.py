"""Consumer-group translation and sync, in either direction.

Forward (old to new) a group's committed offset goes through the forward map.
Reverse (new to old, for rollback) an offset below the reverse mirror's starting
point was written by the forward mirror, so it goes back through the forward map's
inverse; at or above it, through the reverse map. Either way the result is exact or
it is refused with a reason, never approximated.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import AdminClient

from cutover.common import TP
from cutover.errors import UsageError
from cutover.kafka.clients import DEFAULT_TIMEOUT, admin
from cutover.kafka.inspect import cluster_id, list_groups
from cutover.kafka.offsets import GroupInfo, commit_groups, group_info, groups_info
from cutover.mirror import state as st
from cutover.mirror.offsetmap import NotYetMirrored, PartitionMap
from cutover.plan import Plan

log = logging.getLogger("cutover.mirror")


class Translator:
    def __init__(self, own: Mapping[TP, PartitionMap], prior: Mapping[TP, PartitionMap] | None = None) -> None:
        self.own, self.prior = own, prior

    def translate(self, tp: TP, offset: int) -> int:
        """Exact target position of a source position; raises NotYetMirrored with the reason."""
        pm = self.own.get(tp)
        if self.prior is None:
            if pm is None:
                raise NotYetMirrored("the mirror has not started on this partition")
            return pm.translate(offset)
        if pm is not None and offset >= pm.start_src:
            return pm.translate(offset)
        fwd = self.prior.get(tp)
        if fwd is None:
            raise NotYetMirrored("neither mirror has copied this partition")
        return fwd.invert(offset)


@dataclass(frozen=True)
class Translation:
    topic: str
    partition: int
    source_offset: int
    target_offset: int | None
    #: Why there is no target offset (None when translated exactly).
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "source_offset": self.source_offset,
                "target_offset": self.target_offset, "reason": self.reason}


def translate(tr: Translator, offsets: Mapping[TP, int]) -> list[Translation]:
    out = []
    for tp, off in sorted(offsets.items()):
        try:
            out.append(Translation(tp[0], tp[1], off, tr.translate(tp, off)))
        except NotYetMirrored as exc:
            out.append(Translation(tp[0], tp[1], off, None, str(exc)))
    return out


def translator(rt: st.Route, plan: Plan, timeout: float = DEFAULT_TIMEOUT, source_cluster: str | None = None
               ) -> Translator:
    """Load the committed maps this direction needs from the clusters (`source_cluster`: the source's id, when
    the caller has read it with st.cluster_ids)."""
    own = st.load(rt, source_cluster or st.cluster_ids(rt, timeout)[0]).partitions
    if rt.direction == "forward":
        return Translator(own)
    fwd = st.route(plan, "forward")
    return Translator(own, st.load(fwd, cluster_id(fwd.source, timeout)).partitions)


def translate_group(plan: Plan, group: str, direction: st.Direction = "forward",
                    timeout: float = DEFAULT_TIMEOUT) -> list[Translation]:
    """The library form of `cutover offsets translate`: per partition, source and exact target offset."""
    rt = st.route(plan, direction)
    if not plan.spec.groups.matches(group):
        sel = plan.spec.groups
        raise UsageError(f"consumer group {group} is not in the plan's selection (groups.include {sel.include}, "
                         f"exclude {sel.exclude}): the mirror never translates it",
                         fix="name a selected group, or add it to groups.include in the plan")
    source_cluster, _target = st.cluster_ids(rt, timeout)  # one cluster under two addresses: said first
    info = group_info(rt.source, group, timeout)
    if not info.offsets:
        known = list_groups(rt.source, timeout)
        raise UsageError(f"consumer group {group} has no committed offsets on {rt.source.describe()}; groups "
                         f"there: {', '.join(known[:30]) or '(none)'}",
                         fix="--reverse translates the new cluster's offsets back, for after a promote; before it, "
                             "drop --reverse" if direction == "reverse" else "name a group that has committed")
    out = translate(translator(rt, plan, timeout, source_cluster), info.offsets)
    return [t if t.target_offset is not None or plan.spec.topics.matches(t.topic) else
            dataclasses.replace(t, reason=f"topic {t.topic} is not in the plan's topic selection: never mirrored")
            for t in out]


@dataclass
class GroupOutcome:
    group: str
    #: Partitions whose target offset now equals the translation (committed now or before).
    committed: dict[TP, int] = field(default_factory=dict)
    skipped: dict[TP, str] = field(default_factory=dict)
    #: Why the whole group was left alone (None when it was synced).
    reason: str | None = None
    #: Partitions the group has offsets on, of topics the plan does not mirror: left alone.
    unmirrored: list[TP] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"group": self.group, "reason": self.reason,
                "committed": [{"topic": t, "partition": p, "offset": o}
                              for (t, p), o in sorted(self.committed.items())],
                "skipped": [{"topic": t, "partition": p, "reason": r} for (t, p), r in sorted(self.skipped.items())],
                "unmirrored": unmirrored_topics(self.unmirrored)}


def unmirrored_topics(tps: list[TP]) -> list[dict[str, Any]]:
    """[{"topic", "partitions"}] of partitions a group reads on topics the plan does not mirror."""
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        by_topic.setdefault(t, []).append(p)
    return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]


def mirrored(plan: Plan) -> Callable[[str], bool]:
    """Whether the plan mirrors a topic (its selection, never an internal topic)."""
    prefix = plan.spec.mirror.state_prefix
    return lambda t: plan.spec.topics.matches(t) and not t.startswith("__") and not t.startswith(prefix)


def outside(plan: Plan, direction: st.Direction = "forward",
            timeout: float = DEFAULT_TIMEOUT) -> dict[str, list[TP]]:
    """Read-only: per selected group on the source, its partitions of topics the plan does not mirror."""
    rt = st.route(plan, direction)
    keep = mirrored(plan)
    sources = groups_info(rt.source, [g for g in list_groups(rt.source, timeout) if plan.spec.groups.matches(g)],
                          timeout)
    found = {g: sorted(tp for tp in info.offsets if not keep(tp[0])) for g, info in sources.items()}
    return {g: tps for g, tps in sorted(found.items()) if tps}


def sync(rt: st.Route, matches: Callable[[str], bool], tr: Translator, owned: Callable[[TP], bool],
         allow_rewind: bool = False, timeout: float = DEFAULT_TIMEOUT,
         keep: Callable[[str], bool] = lambda _t: True,
         clients: tuple[AdminClient, AdminClient] | None = None) -> list[GroupOutcome]:
    """Commit every selected group's translated offsets on the target, where that is safe.

    Only partitions of topics the plan mirrors (`keep`) are translated; a selected group's
    offsets on any other topic are left alone and reported as `unmirrored`. `clients`: admin
    clients of the source and the target to use (a running mirror's own), else new ones.
    """
    source_client, target_client = clients or (admin(rt.source), admin(rt.target))
    sources = groups_info(rt.source, [g for g in list_groups(rt.source, timeout, source_client) if matches(g)],
                          timeout, source_client)
    mine = {g: {tp: o for tp, o in info.offsets.items() if keep(tp[0]) and owned(tp)} for g, info in sources.items()}
    targets = groups_info(rt.target, [g for g, m in mine.items() if m], timeout, target_client)
    out, changes = [], {}
    for group, info in sources.items():
        outcome, changed = _decide(rt, group, mine[group], targets.get(group), tr, allow_rewind)
        outcome.unmirrored = sorted(tp for tp in info.offsets if not keep(tp[0]))
        out.append(outcome)
        changes[group] = changed
    refused = commit_groups(rt.target, changes, timeout, target_client)
    for outcome in out:
        exc = refused.get(outcome.group)
        if exc is not None:  # e.g. a member joined since the check: next sync tries again
            outcome.reason, outcome.committed = exc.message, {}
            log.warning("group %s not synced: %s", outcome.group, exc.message)
        elif changes[outcome.group]:
            log.info("group %s: committed %d partitions on %s", outcome.group, len(changes[outcome.group]),
                     rt.target.name)
    return out


def _decide(rt: st.Route, group: str, mine: dict[TP, int], target: GroupInfo | None, tr: Translator,
            allow_rewind: bool) -> tuple[GroupOutcome, dict[TP, int]]:
    """A group's outcome before committing, and the partitions whose target offset must change."""
    out = GroupOutcome(group)
    if not mine or target is None:
        return out, {}
    if target.active:
        out.reason = f"the group has {target.members} active members on {rt.target.describe()}"
        log.warning("group %s not synced: %s", group, out.reason)
        return out, {}
    for t in translate(tr, mine):
        tp = (t.topic, t.partition)
        current = target.offsets.get(tp)
        if t.target_offset is None:
            out.skipped[tp] = t.reason or "not translatable"
        elif current is not None and current > t.target_offset and not allow_rewind:
            out.skipped[tp] = (f"the target group is further ({current}) than the translation "
                               f"({t.target_offset}); not moved back without --allow-rewind")
        else:
            out.committed[tp] = t.target_offset
    return out, {tp: o for tp, o in out.committed.items() if target.offsets.get(tp) != o}


def record(outcomes: list[GroupOutcome]) -> list[st.GroupSync]:
    now = time.time()
    return [st.GroupSync(o.group, now, {f"{t}/{p}": off for (t, p), off in o.committed.items()})
            for o in outcomes if o.reason is None]


def sync_now(plan: Plan, direction: st.Direction, allow_rewind: bool = False,
             timeout: float = DEFAULT_TIMEOUT) -> list[GroupOutcome]:
    """On-demand sync (all partitions), recorded in the mirror state like a running mirror's."""
    rt = st.route(plan, direction)
    outcomes = sync(rt, plan.spec.groups.matches, translator(rt, plan, timeout), lambda _tp: True,
                    allow_rewind, timeout, mirrored(plan))
    source = cluster_id(rt.source, timeout)
    st.ensure_topics(rt, plan.spec.mirror.replication_factor, timeout)
    st.note(rt, [st.group_record(source, sync_) for sync_ in record(outcomes)], timeout)
    return outcomes
