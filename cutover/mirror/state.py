"""Mirror state kept in the target cluster, beside the records it describes.

Two compacted, single-partition internal topics per target cluster:

- `<prefix>.mirror.offsets`: the log of the offset map and the progress. Each mirror
  transaction adds one *delta* record per shard (for every partition it touched: the
  next source offset, the target position, retention gaps, the record count, and the
  new segments), written in the same transaction as the copied records. When the
  deltas since a shard's last *checkpoint* outweigh it, the transaction writes a new
  checkpoint instead: the shard's whole folded state, compressed, in parts.
- `<prefix>.mirror.progress`: small: per shard a pointer to its newest checkpoint
  (written in the checkpoint's transaction), per consumer group its last sync, the
  switch's marker for a plan's forward mirror, the topics the mirror created, and per
  shard the process that last took it (its owner: mirror/owner.py).

A reader takes the progress topic, then the offsets topic only from the oldest
checkpoint it still needs: reading costs the map's size plus at most as much again in
deltas, whatever the history. Deltas and checkpoint parts reuse their keys and the
folded ones are tombstoned, so compaction keeps the topics' disk use bounded too.

Every read first waits until the topics' last stable offset reaches the high watermark
seen at its start (bounded by the transaction timeout): another shard's open
transaction must not hide this shard's own later commits. Keys start with the source
cluster's id, so a map never applies to another cluster. Values carry a version; this
cutover writes version 2, reads 1 and 2, and refuses anything newer.
"""

from __future__ import annotations

import json
import logging
import time
import zlib
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from cutover.common import TP, iso_z
from cutover.errors import CutoverError, UnreachableError
from cutover.kafka.clients import DEFAULT_TIMEOUT, ClusterRef, admin, metadata
from cutover.kafka.offsets import log_offsets, wait_all
from cutover.mirror.offsetmap import Gap, PartitionMap, Segment
from cutover.output import progress
from cutover.plan import Plan

log = logging.getLogger("cutover.mirror")

STATE_VERSION = 2
READABLE = (1, 2)
Direction = Literal["forward", "reverse"]
#: (topic, key, value); a None value is a tombstone.
StateRecord = tuple[str, bytes, bytes | None]

#: A checkpoint is due when the deltas since the last one reach its size (and at least this much).
CHECKPOINT_MIN_BYTES = 1 << 20
#: Segments per checkpoint piece (24 bytes each before compression): pieces stay well below the
#: offsets topic's record limit, STATE_RECORD_BYTES.
PIECE_SEGMENTS = 131_072
STATE_RECORD_BYTES = 16 * 1024 * 1024
#: How long a read waits for transactions open on the state topics when it starts: a mirror's
#: transaction timeout (60 s) plus the broker's check for timed-out transactions (10 s), and a margin.
OPEN_TRANSACTION_WAIT = 90.0
#: Topic configs of the state topics: compacted, and compacted soon, so history does not pile up.
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.ms": "600000", "min.cleanable.dirty.ratio": "0.1",
                 "max.compaction.lag.ms": "3600000", "delete.retention.ms": "3600000",
                 "max.message.bytes": str(STATE_RECORD_BYTES)}


class StateError(CutoverError):
    """The mirror state in the target cluster cannot be used."""


@dataclass(frozen=True)
class Route:
    """Which way records flow: forward is old to new; reverse (for rollback) is new to old."""

    direction: Direction
    source: ClusterRef
    target: ClusterRef
    prefix: str
    #: Where the state topics are when not on the target (plan mirror.state_cluster: old, idempotent mode only).
    state_on: ClusterRef | None = None

    @property
    def state(self) -> ClusterRef:
        """The cluster that holds the mirror's state topics: its target unless the plan says otherwise."""
        return self.state_on or self.target

    @property
    def progress_topic(self) -> str:
        return f"{self.prefix}.mirror.progress"

    @property
    def offsets_topic(self) -> str:
        return f"{self.prefix}.mirror.offsets"


def route(plan: Plan, direction: Direction = "forward") -> Route:
    old, new = ClusterRef.of(plan, "old"), ClusterRef.of(plan, "new")
    src, tgt = (old, new) if direction == "forward" else (new, old)
    return Route(direction, src, tgt, plan.spec.mirror.state_prefix,
                 old if plan.spec.mirror.state_cluster == "old" and direction == "forward" else None)


def cluster_ids(rt: Route, timeout: float = DEFAULT_TIMEOUT) -> tuple[str, str]:
    """The ids of the route's source and target clusters. Refused (usage) when they are one cluster under two
    addresses (the plan's own check sees equal addresses only): the mirror would copy each topic onto itself,
    and what its state says of the other cluster would be this one's."""
    from cutover.errors import UsageError
    from cutover.kafka.inspect import cluster_id

    source, target = cluster_id(rt.source, timeout), cluster_id(rt.target, timeout)
    if source == target:
        raise UsageError(f"{rt.source.describe()} and {rt.target.describe()} are the same cluster (id {source}): "
                         "the mirror would copy each topic onto itself",
                         fix="give clusters.new the brokers of the cluster you are moving to")
    return source, target


@dataclass
class GroupSync:
    group: str
    at: float
    offsets: dict[str, int] = field(default_factory=dict)  # "topic/partition" -> target offset


@dataclass
class ShardLog:
    """Where a shard's records stand in the offsets topic: what decides its next checkpoint."""

    #: Offset of the shard's newest checkpoint in the offsets topic (None: it has none).
    checkpoint: int | None = None
    parts: int = 0
    checkpoint_bytes: int = 0
    #: Deltas since that checkpoint: how many (the next delta's number) and their bytes.
    deltas: int = 0
    delta_bytes: int = 0
    partitions: set[TP] = field(default_factory=set)


@dataclass
class MirrorState:
    source_cluster: str
    partitions: dict[TP, PartitionMap] = field(default_factory=dict)
    groups: dict[str, GroupSync] = field(default_factory=dict)
    #: Every shard layout ("i/N") that has committed progress: the transactional ids in use.
    shards: set[str] = field(default_factory=set)
    logs: dict[str, ShardLog] = field(default_factory=dict)
    #: The switch's marks per plan name: {"forward": "closed"|"open", "action", "run", "at"}.
    marks: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Target topics this mirror created (so growing them is never refused as someone else's topic).
    created: set[str] = field(default_factory=set)
    #: (plan name, shard layout) -> the process that last took that shard (see mirror/owner.py).
    owners: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    #: Shard layout -> what its last batch in idempotent mode was about to write (see mirror/idempotent.py).
    intents: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Bytes read from the state topics, and how long it took (for benches and progress).
    read_bytes: int = 0
    read_seconds: float = 0.0


def _key(*parts: Any) -> bytes:
    return json.dumps(parts, separators=(",", ":")).encode()


def _value(body: dict[str, Any]) -> bytes:
    return json.dumps({"v": STATE_VERSION, **body}, separators=(",", ":"), sort_keys=True).encode()


def group_record(source_cluster: str, sync: GroupSync) -> tuple[bytes, bytes]:
    return _key("group", source_cluster, sync.group), _value({"at": sync.at, "offsets": sync.offsets})


def mark_record(source_cluster: str, plan_name: str, forward: Literal["open", "closed"], action: str,
                run: str) -> tuple[bytes, bytes]:
    return _key("switch", source_cluster, plan_name), _value(
        {"forward": forward, "action": action, "run": run, "at": time.time()})


def created_record(source_cluster: str, topic: str, partitions: int) -> tuple[bytes, bytes]:
    return _key("topic", source_cluster, topic), _value({"at": time.time(), "partitions": partitions})


def intent_record(source_cluster: str, shard: str, entries: list[list[Any]]) -> tuple[bytes, bytes]:
    """What a shard in idempotent mode is about to write (mirror/idempotent.py): per partition [topic, partition,
    next source offset, the target's end, records]; written and acknowledged before the records are sent."""
    return _key("intent", source_cluster, shard), _value({"p": entries, "at": time.time()})


def owner_record(source_cluster: str, plan_name: str, shard: str, body: dict[str, Any]) -> tuple[bytes, bytes]:
    """Which process took a plan's shard (mirror/owner.py); written in that process's transactions only."""
    return _key("owner", source_cluster, plan_name, shard), _value(body)


# -- the writer ----------------------------------------------------------------------


def _progress(tp: TP, pm: PartitionMap) -> list[Any]:
    return [tp[0], tp[1], pm.start_src, pm.next_src, pm.next_tgt, pm.records, [[g.start, g.end] for g in pm.gaps]]


class StateWriter:
    """The state records of one shard's transactions: a delta each, or a checkpoint when one is due.

    The copier adds them to its transaction; `committed` is called once the transaction
    committed (an aborted one leaves the schedule as it was).
    """

    def __init__(self, rt: Route, source_cluster: str, shard: str, loaded: ShardLog | None,
                 min_checkpoint_bytes: int = CHECKPOINT_MIN_BYTES) -> None:
        self.rt, self.source_cluster, self.shard = rt, source_cluster, shard
        self.log = loaded or ShardLog()
        self.min_checkpoint_bytes = min_checkpoint_bytes
        self._next: ShardLog | None = None

    def due(self, owned: Iterable[TP]) -> bool:
        """A checkpoint is due: none yet for every owned partition, or the deltas since outweigh it."""
        if self.log.checkpoint is None or not set(owned) <= self.log.partitions:
            return True
        return self.log.delta_bytes >= max(self.min_checkpoint_bytes, self.log.checkpoint_bytes)

    def delta(self, updates: dict[TP, tuple[PartitionMap, list[Segment]]]) -> StateRecord:
        entries = [[*_progress(tp, pm), [x for s in segs for x in (s.src, s.tgt, s.length)]]
                   for tp, (pm, segs) in sorted(updates.items())]
        value = _value({"p": entries})
        key = _key("delta", self.source_cluster, self.shard, self.log.deltas)
        self._next = ShardLog(self.log.checkpoint, self.log.parts, self.log.checkpoint_bytes, self.log.deltas + 1,
                              self.log.delta_bytes + len(value), self.log.partitions)
        return self.rt.offsets_topic, key, value

    def checkpoint(self, maps: dict[TP, PartitionMap]) -> list[StateRecord]:
        """The parts of a checkpoint of `maps` (the shard's whole state after this transaction)."""
        parts = encode_checkpoint(maps)
        self._next = ShardLog(None, len(parts), sum(len(p) for p in parts), 0, 0, set(maps))
        return [(self.rt.offsets_topic, _key("ckpt", self.source_cluster, self.shard, i), v)
                for i, v in enumerate(parts)]

    def pointer(self, first_offset: int) -> list[StateRecord]:
        """The pointer to the checkpoint just written, and tombstones for what it folded."""
        assert self._next is not None
        nxt = self._next
        nxt.checkpoint = first_offset
        body = {"offset": first_offset, "parts": nxt.parts, "bytes": nxt.checkpoint_bytes,
                "partitions": sorted([t, p] for t, p in nxt.partitions), "at": time.time()}
        out: list[StateRecord] = [(self.rt.progress_topic, _key("checkpoint", self.source_cluster, self.shard),
                                   _value(body))]
        out += [(self.rt.offsets_topic, _key("delta", self.source_cluster, self.shard, n), None)
                for n in range(self.log.deltas)]
        out += [(self.rt.offsets_topic, _key("ckpt", self.source_cluster, self.shard, i), None)
                for i in range(nxt.parts, self.log.parts)]
        return out

    def committed(self) -> None:
        if self._next is not None:
            self.log, self._next = self._next, None

    def aborted(self) -> None:
        self._next = None


def encode_checkpoint(maps: dict[TP, PartitionMap]) -> list[bytes]:
    """Parts of at most about PIECE_SEGMENTS segments each: a JSON header line, then the pieces'
    segments, delta-encoded (sources and targets as differences) and zlib-compressed."""
    import numpy as np

    parts: list[bytes] = []
    header: list[list[Any]] = []
    blobs: list[bytes] = []
    held = 0

    def flush() -> None:
        nonlocal held
        if header:
            parts.append(json.dumps({"v": STATE_VERSION, "pieces": header}, separators=(",", ":")).encode()
                         + b"\n" + b"".join(blobs))
        header.clear()
        blobs.clear()
        held = 0

    for tp, pm in sorted(maps.items()):
        src, tgt, length = (np.frombuffer(a, dtype=np.int64) if len(a) else np.zeros(0, np.int64)
                            for a in pm.arrays())
        first = 0
        while True:
            end = min(len(src), first + PIECE_SEGMENTS)
            s, t, n = src[first:end], tgt[first:end], length[first:end]
            base = (int(s[0]), int(t[0])) if len(s) else (0, 0)
            raw = np.concatenate([np.diff(s, prepend=base[0]), np.diff(t, prepend=base[1]), n]).astype("<i8")
            blob = zlib.compress(raw.tobytes(), 6) if len(s) else b""
            if held and held + end - first > PIECE_SEGMENTS:
                flush()
            header.append([*_progress(tp, pm), first, end - first, base[0], base[1], len(blob)])
            blobs.append(blob)
            held += end - first
            first = end
            if first >= len(src):
                break
    flush()
    return parts


def _decode_pieces(value: bytes, with_map: bool) -> Iterator[tuple[list[Any], tuple[array[int], ...] | None]]:
    """(header, arrays) of each piece of a checkpoint part; the header is the partition's progress, then
    the piece's first segment index, segment count, base source and target offsets, compressed bytes."""
    import numpy as np

    head, _sep, payload = value.partition(b"\n")
    at = 0
    for piece in json.loads(head)["pieces"]:
        count, base_src, base_tgt, nbytes = piece[8:12]
        arrays = None
        if with_map:
            raw = np.frombuffer(zlib.decompress(payload[at:at + nbytes]), dtype="<i8") if nbytes else \
                np.zeros(0, np.int64)
            src = np.cumsum(raw[:count]) + base_src
            tgt = np.cumsum(raw[count:2 * count]) + base_tgt
            arrays = tuple(array("q", a.astype(np.int64).tobytes()) for a in (src, tgt, raw[2 * count:]))
        at += nbytes
        yield piece, arrays


# -- the reader ----------------------------------------------------------------------


def ensure_topics(rt: Route, replication_factor: int, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Create the internal topics on the target when absent; bring their configs up to date."""
    client = admin(rt.state)
    existing = metadata(rt.state, client, timeout, "listing topics").topics
    topics = (rt.progress_topic, rt.offsets_topic)
    wanted = [NewTopic(t, 1, replication_factor, config=dict(TOPIC_CONFIGS)) for t in topics if t not in existing]
    for topic, fut in (client.create_topics(wanted, request_timeout=timeout).items() if wanted else []):
        try:
            fut.result(timeout=timeout + 5)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise rt.state.failure(exc, f"creating the mirror's state topic {topic}", client) from None
    older = [t for t in topics if t in existing]
    if older:
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in older]
        described = wait_all(rt.state, client, client.describe_configs(resources, request_timeout=timeout),
                             "describing the mirror's state topics", timeout)
        changes = [ConfigResource(ResourceType.TOPIC, res.name, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in TOPIC_CONFIGS.items()
            if getattr(entries.get(k), "value", None) != v]) for res, entries in described.items()]
        changes = [c for c in changes if c.incremental_configs]
        if changes:  # compaction settings only: a principal without the right keeps the topics as they are
            try:
                wait_all(rt.state, client, client.incremental_alter_configs(changes, request_timeout=timeout),
                         "updating the mirror's state topic configs", timeout)
            except CutoverError as exc:
                log.warning("the mirror's state topics keep their configs (%s); compaction may come later",
                            exc.message)


def load(rt: Route, source_cluster: str, with_map: bool = True, timeout: float = 30.0) -> MirrorState:
    """Read the committed state for `source_cluster`.

    `timeout` bounds silence, not the whole read: a large state keeps reading as long as
    records keep coming. Without `with_map` the segments are skipped (progress only).
    """
    started = time.monotonic()
    state = MirrorState(source_cluster)
    client = admin(rt.state)
    existing = metadata(rt.state, client, timeout, "listing topics").topics
    topics = [t for t in (rt.progress_topic, rt.offsets_topic) if t in existing]
    if not topics:
        return state
    goals = _stable_ends(rt.state, topics, timeout, client)  # progress topic first: see _start
    v1: dict[TP, dict[str, Any]] = {}
    latest: dict[bytes, bytes] = {}
    for msg in _scan(rt.state, rt.progress_topic, 0, goals.get(rt.progress_topic, 0), timeout, state):
        key = msg.key()
        if key is not None:
            value = msg.value()
            if value is None:
                latest.pop(key, None)
            else:
                latest[key] = value
    pointers: dict[str, dict[str, Any]] = {}
    for key, value in latest.items():
        kind, cluster, *rest = json.loads(key)
        if cluster != source_cluster:
            continue
        body = _body(key, value, rt)
        if kind == "group":
            state.groups[rest[0]] = GroupSync(rest[0], body["at"], body["offsets"])
        elif kind == "checkpoint":
            pointers[rest[0]] = body
        elif kind == "switch":
            state.marks[rest[0]] = body
        elif kind == "topic":
            state.created.add(rest[0])
        elif kind == "owner":
            state.owners[(rest[0], rest[1])] = body
        elif kind == "intent":
            state.intents[rest[0]] = body
        elif kind == "progress":  # version 1: one record per partition
            v1[(rest[0], rest[1])] = body
            state.shards.add(body.get("shard", "0/1"))
    state.shards |= set(pointers)
    start = _start(pointers, v1)
    fresh: set[TP] = set()
    if rt.offsets_topic in goals:
        fresh = _fold(state, _scan(rt.state, rt.offsets_topic, start, goals[rt.offsets_topic], timeout, state),
                      rt, with_map, set(v1))
    _apply_v1(state, v1, fresh)
    state.read_seconds = time.monotonic() - started
    return state


def _apply_v1(state: MirrorState, v1: dict[TP, dict[str, Any]], fresh: set[TP]) -> None:
    """Version 1 progress (one record per partition), for partitions no version 2 record replaced yet."""
    for tp, body in v1.items():
        if tp not in fresh:
            pm = state.partitions.setdefault(tp, PartitionMap())
            pm.start_src, pm.next_src, pm.next_tgt = body["start_src"], body["next_src"], body["next_tgt"]
            pm.gaps = [Gap(s, e) for s, e in body["gaps"]]
            pm.records = sum(pm.arrays()[2])


def _start(pointers: dict[str, dict[str, Any]], v1: dict[TP, dict[str, Any]]) -> int:
    """Where reading the offsets topic must begin: the oldest of the partitions' newest checkpoints.

    Each partition's state is complete from its newest checkpoint on (a checkpoint
    replaces what came before it). A partition no checkpoint covers (version 1 state)
    needs the whole topic. Checkpoint parts are written before their pointer, and the
    progress topic is read to an end observed before the offsets topic's, so a pointer
    read never points past what the offsets read reaches.
    """
    newest: dict[TP, int] = {}
    for body in pointers.values():
        for t, p in body["partitions"]:
            newest[(t, p)] = max(newest.get((t, p), -1), body["offset"])
    if not newest or any(tp not in newest for tp in v1):
        return 0
    return min(newest.values())


def _fold(state: MirrorState, records: Iterable[Message], rt: Route, with_map: bool, v1: set[TP]) -> set[TP]:
    """Apply the offsets topic in order: a checkpoint replaces its partitions' state, a delta adds to
    it. Returns the partitions that have version 2 records."""
    fresh: set[TP] = set()
    for msg in records:
        key, value = msg.key(), msg.value()
        if key is None or value is None:
            continue
        kind, cluster, *rest = json.loads(key)
        if cluster != state.source_cluster:
            continue
        if kind == "ckpt":
            shard, part = rest
            lg = state.logs.setdefault(shard, ShardLog())
            if part == 0:  # a new checkpoint of this shard begins: the deltas before it are folded in it
                state.logs[shard] = lg = ShardLog(checkpoint=msg.offset())
            lg.parts, lg.checkpoint_bytes = part + 1, lg.checkpoint_bytes + len(value)
            for piece, arrays in _decode_pieces(value, with_map):
                tp = (piece[0], piece[1])
                lg.partitions.add(tp)
                pm = state.partitions.get(tp)
                if pm is None or piece[7] == 0:  # a partition's first piece replaces its state
                    pm = state.partitions[tp] = PartitionMap()
                _set_progress(pm, piece)
                if arrays is not None:
                    _extend(pm, arrays)
                fresh.add(tp)
        elif kind == "delta":
            shard, number = rest
            body = _body(key, value, rt)
            lg = state.logs.setdefault(shard, ShardLog())
            lg.deltas, lg.delta_bytes = max(lg.deltas, number + 1), lg.delta_bytes + len(value)
            for entry in body["p"]:
                tp = (entry[0], entry[1])
                pm = state.partitions.setdefault(tp, PartitionMap())
                _set_progress(pm, entry)
                flat = entry[7]
                if with_map and flat:
                    pm.add(Segment(*flat[i:i + 3]) for i in range(0, len(flat), 3))
                fresh.add(tp)
        elif kind == "segments":  # version 1: always kept, the record counts of version 1 come from them
            tp = (rest[0], rest[1])
            if tp in v1 and tp not in fresh:
                segs = _body(key, value, rt)["segments"]
                state.partitions.setdefault(tp, PartitionMap()).add(Segment(*x) for x in segs)
    state.shards |= set(state.logs)
    return fresh


def _set_progress(pm: PartitionMap, entry: list[Any]) -> None:
    pm.start_src, pm.next_src, pm.next_tgt, pm.records = entry[2], entry[3], entry[4], entry[5]
    pm.gaps = [Gap(s, e) for s, e in entry[6]]


def _extend(pm: PartitionMap, arrays: tuple[array[int], ...]) -> None:
    src, tgt, length = pm.arrays()
    src.extend(arrays[0])
    tgt.extend(arrays[1])
    length.extend(arrays[2])


def _body(key: bytes, value: bytes, rt: Route) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(value)
    if body.get("v") not in READABLE:
        raise StateError(f"mirror state entry {key.decode()} in {rt.state.describe()} has version "
                         f"{body.get('v')}; this cutover reads versions {', '.join(map(str, READABLE))}",
                         fix="run the cutover version that wrote it, or upgrade cutover")
    return body


def carried_back(plan: Plan, timeout: float = DEFAULT_TIMEOUT) -> dict[TP, PartitionMap]:
    """The plan's partitions of which the reverse mirror (new to old) has copied at least one record.

    Counted in records, not positions: a reverse mirror that only stepped over the forward
    mirror's last commit marker has carried nothing back.
    """
    from cutover.kafka.inspect import cluster_id

    back = route(plan, "reverse")
    parts = load(back, cluster_id(back.source, timeout), with_map=False, timeout=timeout).partitions
    return {tp: pm for tp, pm in parts.items() if pm.records > 0 and plan.spec.topics.matches(tp[0])}


@dataclass
class Overview:
    """What the progress topic alone says: cheap to read while mirroring."""

    #: Topics any shard has checkpointed progress for, or the mirror created on the target.
    topics: set[str] = field(default_factory=set)
    marks: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: (plan name, shard layout) -> the process that last took that shard.
    owners: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


def overview(rt: Route, source_cluster: str, timeout: float = DEFAULT_TIMEOUT) -> Overview:
    """The progress topic's view for `source_cluster`, without reading the map."""
    return ProgressReader(rt, source_cluster, timeout).overview()


class ProgressReader:
    """`overview`, asked again and again: a running mirror asks at every group sync. The first call reads
    the progress topic from its start; each later one reads only what was committed since, through the same
    admin client, and folds it in. The topic is compacted, so what is folded in stays the latest per key."""

    def __init__(self, rt: Route, source_cluster: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.rt, self.source_cluster, self.timeout = rt, source_cluster, timeout
        self._client: Any = None
        self._latest: dict[bytes, bytes | None] = {}
        self._read = 0  # the next offset to read
        #: Records read so far, over every call.
        self.records_read = 0

    def overview(self) -> Overview:
        rt = self.rt
        if self._client is None:
            self._client = admin(rt.state)
        client = self._client
        present = rt.progress_topic in metadata(rt.state, client, self.timeout, "listing topics").topics
        if not present:
            self._latest, self._read = {}, 0
            return Overview()
        goal = _stable_ends(rt.state, [rt.progress_topic], self.timeout, client)[rt.progress_topic]
        if goal < self._read:  # shorter than what was read: deleted and created again
            self._latest, self._read = {}, 0
        for msg in _scan(rt.state, rt.progress_topic, self._read, goal, self.timeout,
                         MirrorState(self.source_cluster)):
            self._read = max(self._read, (msg.offset() or 0) + 1)
            self.records_read += 1
            if msg.key() is not None:
                self._latest[msg.key()] = msg.value()  # type: ignore[index]
        self._read = max(self._read, goal)
        return self._fold()

    def _fold(self) -> Overview:
        out = Overview()
        for key, value in self._latest.items():
            kind, cluster, *rest = json.loads(key)
            if cluster != self.source_cluster or value is None:
                continue
            if kind == "switch":
                out.marks[rest[0]] = _body(key, value, self.rt)
            elif kind == "topic":
                out.topics.add(rest[0])
            elif kind == "owner":
                out.owners[(rest[0], rest[1])] = _body(key, value, self.rt)
            elif kind == "checkpoint":
                out.topics |= {t for t, _p in _body(key, value, self.rt)["partitions"]}
            elif kind == "progress":  # version 1
                out.topics.add(rest[0])
        return out


def marks(rt: Route, source_cluster: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, dict[str, Any]]:
    """The switch's marks (plan name -> mark) alone: the progress topic, not the map."""
    return overview(rt, source_cluster, timeout).marks


def set_mark(plan: Plan, forward: Literal["open", "closed"], action: str, run: str,
             timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Record in the forward mirror's state whether it may run: the switch closes it before it drains
    the mirror for a promote, and reopens it when a rollback is done."""
    from cutover.kafka.inspect import cluster_id

    rt = route(plan, "forward")
    ensure_topics(rt, plan.spec.mirror.replication_factor, timeout)
    note(rt, [mark_record(cluster_id(rt.source, timeout), plan.name, forward, action, run)], timeout)
    return {"forward_mirror": forward}


def present(rt: Route, timeout: float = DEFAULT_TIMEOUT) -> list[str]:
    """The route's state topics that exist on its target cluster."""
    client = admin(rt.state)
    listed = metadata(rt.state, client, timeout, "listing topics").topics
    return [t for t in (rt.progress_topic, rt.offsets_topic) if t in listed]


def foreign(state: MirrorState, plan: Plan) -> list[str]:
    """What in the state belongs to another plan with the same state_prefix: topics or groups outside this
    plan's selection, and other plans' switch marks."""
    topics = {t for t, _p in state.partitions} | state.created
    return sorted({f"topic {t}" for t in topics if not plan.spec.topics.matches(t)}
                  | {f"group {g}" for g in state.groups if not plan.spec.groups.matches(g)}
                  | {f"plan {name}" for name in state.marks if name != plan.name})


def retire(plan: Plan, action: str, run: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Record in both mirrors' state that `action` (complete or cancel) ended them: a mirror process that
    is still running, or starts later while the state is kept, exits with CLOSED_BY_SWITCH. The reverse
    mirror's state is marked only where one ever ran (its progress topic exists on the old cluster)."""
    from cutover.kafka.inspect import cluster_id

    marked = []
    directions: tuple[Direction, ...] = ("forward", "reverse")
    for direction in directions:
        rt = route(plan, direction)
        if direction == "reverse" and rt.progress_topic not in present(rt, timeout):
            continue
        ensure_topics(rt, plan.spec.mirror.replication_factor, timeout)
        note(rt, [mark_record(cluster_id(rt.source, timeout), plan.name, "closed", action, run)], timeout)
        marked.append(direction)
    return {"retired": marked}


def closed_by_switch(mark: dict[str, Any] | None) -> str | None:
    """Why a mirror must not run (None when it may)."""
    if not mark or mark.get("forward") != "closed":
        return None
    at = iso_z(mark.get("at", 0))
    if mark.get("action") in ("complete", "cancel"):
        verb = "completed" if mark["action"] == "complete" else "cancelled"
        return (f"cutover {mark['action']} (run {mark.get('run')}, {at}) ended this plan's migration: it is "
                f"{verb}, and neither of its mirrors runs again")
    return (f"{mark.get('action', 'promote')} closed the forward mirror of this plan (run {mark.get('run')}, {at}) "
            "before draining it: clients may be writing to the new cluster, and the reverse mirror carries their "
            "records to the old one, so mirroring old to new now would copy them back a second time")


def note(rt: Route, records: list[tuple[bytes, bytes]], timeout: float = DEFAULT_TIMEOUT) -> None:
    """Write records to the progress topic outside any mirror transaction.

    Every record here is keyed by what it describes (a group, a topic, the switch's mark) and read
    back last-write-wins, so a retried duplicate changes nothing; one request in flight keeps their
    order. Not idempotent on purpose: a fresh idempotent producer first waits about 0.5 s for its
    producer id, and promote writes here inside its freeze window (the mark, the groups' sync)."""
    producer = Producer(rt.state.config(**{"enable.idempotence": False, "acks": "all",
                                            "max.in.flight.requests.per.connection": 1}))
    failures: list[KafkaError] = []
    for key, value in records:
        producer.produce(rt.progress_topic, key=key, value=value, partition=0,
                         on_delivery=lambda err, _m: failures.append(err) if err else None)
    if producer.flush(timeout) > 0 or failures:
        raise rt.state.failure(KafkaException(failures[0]) if failures else None,
                                f"writing to the mirror state topic {rt.progress_topic}", producer)


def _stable_ends(ref: ClusterRef, topics: list[str], timeout: float, client: Any) -> dict[str, int]:
    """The high watermarks now (in the order given), once no transaction open at this moment
    can still add records below them: the last stable offset has caught up with each."""
    goals: dict[str, int] = {}
    for t in topics:  # one at a time, in order: the progress topic's end is seen first
        goals[t] = log_offsets(ref, [(t, 0)], "high", timeout, client)[(t, 0)]
    deadline = time.monotonic() + max(OPEN_TRANSACTION_WAIT, timeout)
    said = time.monotonic()
    while True:
        try:
            stable = log_offsets(ref, [(t, 0) for t in topics], "end", timeout, client)
        except UnreachableError:
            # A broker restarting (a rolling restart) can take longer than one call's timeout to hand its
            # partitions over, and the open transaction may be what waits for it: ask again while the wait lasts.
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
            continue
        behind = {t: (stable[(t, 0)], goals[t]) for t in topics if stable[(t, 0)] < goals[t]}
        if not behind:
            return goals
        if time.monotonic() > deadline:
            t, (lso, hw) = next(iter(behind.items()))
            raise StateError(f"a transaction stays open on the mirror state topic {t} in {ref.describe()} "
                             f"(offsets {lso}..{hw - 1} undecided for {OPEN_TRANSACTION_WAIT:.0f}s)",
                             fix="a mirror process is stuck or the brokers cannot abort it; check the mirror "
                                 "processes and kafka-transactions.sh --bootstrap-server ... list, then retry")
        if time.monotonic() - said > 5:
            progress(f"waiting for a transaction open on {', '.join(behind)} to end (a mirror process that "
                     "died mid-transaction is aborted by Kafka after its transaction timeout)")
            said = time.monotonic()
        time.sleep(0.2)


def _scan(ref: ClusterRef, topic: str, start: int, goal: int, timeout: float,
          state: MirrorState) -> Iterator[Message]:
    """Committed records of `topic` from `start` until at least `goal`, failing only after
    `timeout` seconds in which nothing arrived."""
    if goal <= start:
        return
    consumer = Consumer(ref.config(**{
        "group.id": "cutover-state-reader", "enable.auto.commit": False, "enable.partition.eof": True,
        "isolation.level": "read_committed", "auto.offset.reset": "earliest",
        "fetch.max.bytes": 4 * STATE_RECORD_BYTES, "max.partition.fetch.bytes": 2 * STATE_RECORD_BYTES,
        "fetch.wait.max.ms": 20}))  # at the end the broker answers at once: the end is what we wait for
    try:
        consumer.assign([TopicPartition(topic, 0, start)])
        quiet_until = time.monotonic() + timeout
        while True:
            msgs = consumer.consume(10_000, 0.05)  # short: it waits this long whenever fewer are ready
            for msg in msgs:
                err = msg.error()
                if err is None:
                    state.read_bytes += len(msg.value() or b"") + len(msg.key() or b"")
                    yield msg
                elif err.code() == KafkaError._PARTITION_EOF:
                    if (msg.offset() or 0) >= goal:
                        return
                elif err.fatal() or err.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                   KafkaError._AUTHENTICATION):
                    raise ref.failure(KafkaException(err), f"reading the mirror state {topic}", consumer)
            if msgs:
                quiet_until = time.monotonic() + timeout
            elif time.monotonic() > quiet_until:
                raise ref.failure(None, f"reading the mirror state {topic} (nothing arrived for {timeout:.0f}s)",
                                  consumer)
    finally:
        consumer.close()
