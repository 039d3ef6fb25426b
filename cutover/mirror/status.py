"""`cutover mirror status`: where the mirror stands, read from the clusters (never a local file)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cutover.common import iso_seconds
from cutover.kafka.offsets import log_offsets
from cutover.mirror import owner, topics
from cutover.mirror import state as st
from cutover.output import table
from cutover.plan import Plan


@dataclass(frozen=True)
class GapStatus:
    start: int
    end: int  # exclusive

    @property
    def records(self) -> int:
        return self.end - self.start

    def as_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "records": self.records}


@dataclass(frozen=True)
class PartitionStatus:
    topic: str
    partition: int
    source_end: int
    #: The mirror's next source offset (None: the mirror never started on this partition).
    position: int | None
    lag: int
    gaps: tuple[GapStatus, ...]
    last_group_sync: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "source_end": self.source_end,
                "position": self.position, "lag": self.lag, "gaps": [g.as_dict() for g in self.gaps],
                "last_group_sync": self.last_group_sync}


@dataclass(frozen=True)
class GroupStatus:
    group: str
    last_sync: str | None
    partitions: int

    def as_dict(self) -> dict[str, Any]:
        return {"group": self.group, "last_sync": self.last_sync, "partitions": self.partitions}


@dataclass(frozen=True)
class MirrorStatus:
    """Where one direction of the mirror stands (`mirror status -o json`, README "The mirror")."""

    direction: st.Direction
    source: str
    target: str
    source_cluster: str
    partitions: tuple[PartitionStatus, ...]
    groups: tuple[GroupStatus, ...]
    #: Per shard layout, the process that last took it (mirror/owner.py: `owner.as_status`).
    owners: tuple[dict[str, Any], ...] = ()

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.partitions)

    @property
    def started(self) -> bool:
        """Whether this direction's mirror has state: a position on some partition, or a group it synced."""
        return any(p.position is not None for p in self.partitions) or bool(self.groups)

    @property
    def gaps(self) -> list[tuple[PartitionStatus, GapStatus]]:
        return [(p, g) for p in self.partitions for g in p.gaps]

    def as_dict(self) -> dict[str, Any]:
        return {"direction": self.direction, "source": self.source, "target": self.target,
                "source_cluster": self.source_cluster, "lag": self.lag,
                "partitions": [p.as_dict() for p in self.partitions],
                "gaps": [{"topic": p.topic, "partition": p.partition, **g.as_dict()} for p, g in self.gaps],
                "groups": [g.as_dict() for g in self.groups], "owners": list(self.owners)}


def status(plan: Plan, direction: st.Direction = "forward", timeout: float = 10.0) -> MirrorStatus:
    rt = st.route(plan, direction)
    source, _target = st.cluster_ids(rt, timeout)
    state = st.load(rt, source, with_map=False, timeout=timeout)
    sel = plan.spec.topics
    selected = topics.selected_topics(rt, sel.include, sel.matches, rt.prefix, timeout)
    tps = [(t, p) for t, n in selected.items() for p in range(n)]
    ends = log_offsets(rt.source, tps, "end", timeout)
    groups = sorted((g for g in state.groups.values() if plan.spec.groups.matches(g.group)), key=lambda g: g.group)
    synced: dict[str, float] = {}
    for g in groups:
        for key in g.offsets:
            synced[key] = max(synced.get(key, 0.0), g.at)
    parts = []
    for tp in tps:
        pm = state.partitions.get(tp)
        parts.append(PartitionStatus(
            tp[0], tp[1], ends[tp], pm.next_src if pm else None,
            max(0, ends[tp] - pm.next_src) if pm else ends[tp],
            tuple(GapStatus(g.start, g.end) for g in (pm.gaps if pm else [])),
            iso_seconds(synced.get(f"{tp[0]}/{tp[1]}"))))
    owners = tuple(owner.as_status(shard, body) for (name, shard), body in sorted(state.owners.items())
                   if name == plan.name)
    return MirrorStatus(direction, rt.source.name, rt.target.name, source, tuple(parts),
                        tuple(GroupStatus(g.group, iso_seconds(g.at), len(g.offsets)) for g in groups), owners)


def render(s: MirrorStatus) -> str:
    rows = [[p.topic, str(p.partition), str(p.source_end), "-" if p.position is None else str(p.position),
             str(p.lag), p.last_group_sync or "-"] for p in s.partitions]
    lines = [f"mirror {s.direction} ({s.source} -> {s.target}): total lag {s.lag:,} records",
             table(rows, ["topic", "partition", "source end", "mirrored", "lag", "last group sync"])]
    for p, g in s.gaps:
        lines.append(f"DATA LOSS: {p.topic}/{p.partition} offsets {g.start}..{g.end - 1} "
                     f"({g.records} records) deleted on the source before they were mirrored")
    if s.groups:
        lines.append(table([[g.group, g.last_sync or "-", str(g.partitions)] for g in s.groups],
                           ["group", "last sync", "partitions"]))
    lines += [f"owner of {line}" for line in owner.render(list(s.owners))]
    return "\n".join(lines)
