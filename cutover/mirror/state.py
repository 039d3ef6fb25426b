"""Mirror state kept in the target cluster, beside the records it describes.

Two compacted internal topics per target cluster, written only inside the mirror's
transactions, so state and records commit or vanish together:

- `<prefix>.mirror.progress`: per source partition, the next source offset, the
  target position after the last copied record, and retention gaps; plus one entry
  per consumer group with its last sync.
- `<prefix>.mirror.offsets`: the offset map, one entry per partition and transaction.

Keys start with the source cluster's id, so a map never applies to another cluster.
Values carry a version; an unknown version is refused, never guessed at.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from cutover.errors import CutoverError
from cutover.kafka.clients import DEFAULT_TIMEOUT, ClusterRef, admin
from cutover.kafka.offsets import committed_records
from cutover.mirror.offsetmap import Gap, PartitionMap, Segment

log = logging.getLogger("cutover.mirror")

STATE_VERSION = 1
TP = tuple[str, int]
Direction = Literal["forward", "reverse"]


class StateError(CutoverError):
    """The mirror state in the target cluster cannot be used."""


@dataclass(frozen=True)
class Route:
    """Which way records flow: forward is old to new; reverse (for rollback) is new to old."""

    direction: Direction
    source: ClusterRef
    target: ClusterRef
    prefix: str

    @property
    def progress_topic(self) -> str:
        return f"{self.prefix}.mirror.progress"

    @property
    def offsets_topic(self) -> str:
        return f"{self.prefix}.mirror.offsets"


def route(plan: Any, direction: Direction = "forward") -> Route:
    old, new = ClusterRef("old", plan.cluster("old")), ClusterRef("new", plan.cluster("new"))
    src, tgt = (old, new) if direction == "forward" else (new, old)
    return Route(direction, src, tgt, plan.spec.mirror.state_prefix)


@dataclass
class GroupSync:
    group: str
    at: float
    offsets: dict[str, int] = field(default_factory=dict)  # "topic/partition" -> target offset


@dataclass
class MirrorState:
    source_cluster: str
    partitions: dict[TP, PartitionMap] = field(default_factory=dict)
    groups: dict[str, GroupSync] = field(default_factory=dict)
    #: Every shard layout ("i/N") that has committed progress: the transactional ids in use.
    shards: set[str] = field(default_factory=set)


def _key(*parts: Any) -> bytes:
    return json.dumps(parts, separators=(",", ":")).encode()


def _value(body: dict[str, Any]) -> bytes:
    return json.dumps({"v": STATE_VERSION, **body}, separators=(",", ":"), sort_keys=True).encode()


def progress_record(source_cluster: str, tp: TP, pm: PartitionMap, shard: str, at: float) -> tuple[bytes, bytes]:
    return _key("progress", source_cluster, tp[0], tp[1]), _value({
        "start_src": pm.start_src, "next_src": pm.next_src, "next_tgt": pm.next_tgt, "shard": shard, "at": at,
        "gaps": [[g.start, g.end] for g in pm.gaps]})


def segments_record(source_cluster: str, tp: TP, segs: list[Segment]) -> tuple[bytes, bytes]:
    return _key("segments", source_cluster, tp[0], tp[1], segs[0].src), _value(
        {"segments": [[s.src, s.tgt, s.length] for s in segs]})


def group_record(source_cluster: str, sync: GroupSync) -> tuple[bytes, bytes]:
    return _key("group", source_cluster, sync.group), _value({"at": sync.at, "offsets": sync.offsets})


def ensure_topics(rt: Route, replication_factor: int, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Create the internal topics on the target when absent (compacted, one partition)."""
    client = admin(rt.target)
    try:
        existing = client.list_topics(timeout=timeout).topics
    except KafkaException as exc:
        raise rt.target.failure(exc, "listing topics", client) from None
    wanted = [NewTopic(t, 1, replication_factor, config={"cleanup.policy": "compact"})
              for t in (rt.progress_topic, rt.offsets_topic) if t not in existing]
    for topic, fut in (client.create_topics(wanted, request_timeout=timeout).items() if wanted else []):
        try:
            fut.result(timeout=timeout + 5)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise rt.target.failure(exc, f"creating the mirror's state topic {topic}", client) from None


def load(rt: Route, source_cluster: str, with_map: bool = True, timeout: float = 30.0) -> MirrorState:
    """Read the committed state for `source_cluster` (read_committed, to the end)."""
    state = MirrorState(source_cluster)
    client = admin(rt.target)
    try:
        existing = client.list_topics(timeout=timeout).topics
    except KafkaException as exc:
        raise rt.target.failure(exc, "listing topics", client) from None
    topics = [t for t in [rt.progress_topic] + ([rt.offsets_topic] if with_map else []) if t in existing]
    for key, value in _read(rt.target, topics, timeout):
        kind, cluster, *rest = json.loads(key)
        if cluster != source_cluster:
            continue
        body = json.loads(value)
        if body.get("v") != STATE_VERSION:
            raise StateError(f"mirror state entry {key.decode()} in {rt.target.describe()} has version "
                             f"{body.get('v')}; this cutover reads version {STATE_VERSION}",
                             fix="run the cutover version that wrote it, or upgrade cutover")
        if kind == "group":
            state.groups[rest[0]] = GroupSync(rest[0], body["at"], body["offsets"])
            continue
        pm = state.partitions.setdefault((rest[0], rest[1]), PartitionMap())
        if kind == "progress":
            pm.start_src, pm.next_src, pm.next_tgt = body["start_src"], body["next_src"], body["next_tgt"]
            pm.gaps = [Gap(s, e) for s, e in body["gaps"]]
            state.shards.add(body.get("shard", "0/1"))
        elif kind == "segments":
            pm.add(Segment(*s) for s in body["segments"])
    return state


def carried_back(plan: Any, with_map: bool = False, timeout: float = DEFAULT_TIMEOUT) -> dict[TP, PartitionMap]:
    """The plan's partitions of which the reverse mirror (new to old) has copied records."""
    from cutover.kafka.inspect import cluster_id

    back = route(plan, "reverse")
    parts = load(back, cluster_id(back.source, timeout), with_map=with_map, timeout=timeout).partitions
    return {tp: pm for tp, pm in parts.items() if pm.next_src > pm.start_src and plan.spec.topics.matches(tp[0])}


def _read(ref: ClusterRef, topics: Iterable[str], timeout: float) -> Iterable[tuple[bytes, bytes]]:
    latest: dict[bytes, bytes | None] = {}
    for msg in committed_records(ref, [(t, 0, 0) for t in topics], "reading the mirror state", timeout,
                                 group="cutover-state-reader"):
        key = msg.key()
        if key is not None:
            latest[key] = msg.value()
    yield from ((k, v) for k, v in latest.items() if v is not None)
