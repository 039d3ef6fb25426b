"""Topic and config sync: make the target topics fit the source before any record moves.

Everything is decided first (creations, partition increases, config changes,
refusals) and only then applied, so a refusal leaves the target untouched.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from cutover.errors import Refused, UnreachableError, UsageError
from cutover.kafka import batches
from cutover.kafka.clients import DEFAULT_TIMEOUT, ClusterRef, admin, metadata
from cutover.kafka.offsets import again_while_transient, committed_records, transient, wait_all
from cutover.mirror import state as st
from cutover.mirror.state import Route
from cutover.output import progress

log = logging.getLogger("cutover.mirror")

#: Topic configs that describe a broker or a replica layout, not the data: never copied.
#: Timestamps are kept as the records' own (CreateTime), whatever the source used.
NOT_COPIED = frozenset({
    "follower.replication.throttled.replicas", "leader.replication.throttled.replicas", "min.insync.replicas",
    "unclean.leader.election.enable", "message.timestamp.type", "message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.after.max.ms", "remote.storage.enable",
    "local.retention.ms", "local.retention.bytes",
})
ALWAYS = {"message.timestamp.type": "CreateTime"}
#: Another shard created the topic or added the partitions a moment earlier: the goal is met.
_RACED = frozenset({KafkaError.TOPIC_ALREADY_EXISTS, KafkaError.INVALID_PARTITIONS})


def copied(name: str) -> bool:
    return name not in NOT_COPIED and not name.startswith("confluent.")


@dataclass
class TopicChanges:
    creates: dict[str, tuple[int, dict[str, str]]] = field(default_factory=dict)
    grows: dict[str, int] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    refusals: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.creates or self.grows or self.configs)


def selected_topics(rt: Route, include: list[str], matches: object, prefix: str,
                    timeout: float = DEFAULT_TIMEOUT, client: AdminClient | None = None) -> dict[str, int]:
    """The source topics the plan selects, with partition counts. Refuses an empty selection. `client`: an
    admin client of the source to use (a running mirror's own), else a new one."""
    client = client or admin(rt.source)
    meta = metadata(rt.source, client, timeout, "listing topics")
    names = {n: len(t.partitions) for n, t in meta.topics.items()
             if not n.startswith("__") and not n.startswith(prefix)}
    chosen = {n: c for n, c in names.items() if matches(n)}  # type: ignore[operator]
    if not chosen:
        shown = ", ".join(sorted(names)[:30]) or "(none)"
        raise UsageError(f"the plan's topics selection (include {include}) matches no topic on "
                         f"{rt.source.describe()}; topics there: {shown}",
                         fix="--reverse reads the new cluster, which holds the selected topics only once the "
                             "mirror has copied them: run cutover mirror first (--reverse is for after a promote)"
                         if rt.direction == "reverse" else "correct topics.include / topics.exclude in the plan")
    return dict(sorted(chosen.items()))


def plan_changes(rt: Route, topics: dict[str, int], ours: set[str], progressed: set[tuple[str, int]],
                 allow_existing: bool, owns: Callable[[str, int], bool],
                 timeout: float = DEFAULT_TIMEOUT,
                 clients: tuple[AdminClient, AdminClient] | None = None) -> TopicChanges:
    """What the target needs: creations, partition increases and config changes, every time it runs.

    `ours`: target topics this mirror created or any shard has progress in (never refused,
    whichever shard sees them first grows them). Foreign records are looked for only in
    partitions this process owns and has no progress for (`progressed`): every other
    partition has its own writer. `clients`: admin clients of the source and the target to use (a running
    mirror's own), else new ones."""
    src_admin, tgt_admin = clients or (admin(rt.source), admin(rt.target))
    target_meta = metadata(rt.target, tgt_admin, timeout, "listing topics").topics
    src_configs = _configs(rt.source, src_admin, list(topics), timeout, explicit_only=True)
    present = [t for t in topics if t in target_meta]
    tgt_configs = _configs(rt.target, tgt_admin, present, timeout, explicit_only=False)
    fresh = {t: [p for p in range(n) if owns(t, p) and (t, p) not in progressed] for t, n in topics.items()}
    changes = TopicChanges()
    for topic, count in topics.items():
        wanted = {k: v for k, v in src_configs[topic].items() if copied(k)}
        if topic not in target_meta:
            changes.creates[topic] = (count, {**wanted, **ALWAYS})
            continue
        have = len(target_meta[topic].partitions)
        if topic not in ours and not allow_existing:
            changes.refusals += _foreign(rt.target, topic, have, count, fresh[topic], timeout)
        if have < count:
            changes.grows[topic] = count
        diff = {k: v for k, v in wanted.items() if tgt_configs[topic].get(k) != v}
        if diff:
            changes.configs[topic] = diff
    return changes


def apply(rt: Route, changes: TopicChanges, replication_factor: int, source_cluster: str,
          timeout: float = DEFAULT_TIMEOUT) -> None:
    if changes.refusals:
        raise Refused("the mirror will not write into target topics it did not create: "
                      + "; ".join(changes.refusals) + " (nothing was written)",
                      fix="mirror into empty or absent topics, or pass --allow-existing-target to adopt them")
    if not changes:
        return
    client = admin(rt.target)
    if changes.creates:
        # Recorded first: a topic this mirror created is its own, even before any progress is committed.
        st.ensure_topics(rt, replication_factor, timeout)
        st.note(rt, [st.created_record(source_cluster, t, n) for t, (n, _c) in changes.creates.items()], timeout)
        new = [NewTopic(t, n, replication_factor, config=c) for t, (n, c) in changes.creates.items()]
        for request in batches.split(new, batches.topic_records):  # a KRaft controller takes 10,000 records
            wait_all(rt.target, client, client.create_topics(request, request_timeout=timeout), "creating topics",
                     timeout, already_done=_RACED)
        for t, (n, c) in changes.creates.items():
            log.warning("created topic %s on %s: %d partitions, configs %s", t, rt.target.name, n, c or "{}")
    if changes.grows:
        grow = [NewPartitions(t, n) for t, n in changes.grows.items()]
        for adds in batches.split(grow, lambda g: g.new_total_count):  # at most the partitions added
            wait_all(rt.target, client, client.create_partitions(adds, request_timeout=timeout),
                     "adding partitions", timeout, already_done=_RACED)
        for t, n in changes.grows.items():
            log.warning("topic %s on %s now has %d partitions, like the source", t, rt.target.name, n)
    made = [(t, p) for t, (n, _c) in changes.creates.items() for p in range(n)]
    made += [(t, p) for t, n in changes.grows.items() for p in range(n)]
    if made:
        _until_led(rt.target, made, timeout)
    if changes.configs:
        res = [ConfigResource(ResourceType.TOPIC, t, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in c.items()])
            for t, c in changes.configs.items()]
        for sets in batches.split(res, lambda r: len(r.incremental_configs)):
            wait_all(rt.target, client, client.incremental_alter_configs(sets, request_timeout=timeout),
                     "changing topic configs", timeout)
        for t, c in changes.configs.items():
            log.warning("topic %s on %s: configs set to match the source: %s", t, rt.target.name, c)


#: Seconds a partition may take, beyond the timeout, to be made by its broker after the controller created it.
#: A one-broker sandbox on two cores made 10,002 partitions in 40 s (4 ms each); this allows five times that.
MAKE_SECONDS = 0.02


def _until_led(ref: ClusterRef, tps: list[tuple[str, int]], timeout: float) -> None:
    """Wait until the cluster answers the end offset of every partition just created or added. The controller
    answers a CreateTopics as soon as it has written the metadata; each broker then makes its partitions' logs,
    and until it has, it answers NOT_LEADER for them (a one-broker cluster took 40 s for 10,002 partitions).
    Each round asks with a new client, its metadata read first: one that asked too early kept answering from its
    stale metadata."""
    left, total = set(tps), len(tps)
    allowed = timeout + MAKE_SECONDS * total
    deadline = time.monotonic() + allowed
    said = 0.0
    ask = min(timeout, 10.0)  # a round's wait: librdkafka may hold a request for partitions it finds no leader of
    while True:
        asked = {TopicPartition(t, p): OffsetSpec.latest() for t, p in sorted(left)}  # type: ignore[no-untyped-call]
        client = admin(ref, warm_for=ask)  # a cold client's ListOffsets of thousands of new topics went unanswered
        futures = client.list_offsets(asked, request_timeout=ask)
        answered, _ = concurrent.futures.wait(list(futures.values()), timeout=ask + 5)
        for tp, fut in futures.items():
            if fut not in answered:
                continue  # asked again next round
            exc = fut.exception()
            if exc is None:
                left.discard((tp.topic, tp.partition))
                continue
            err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
            # _NOENT: "Failed to query partition leaders: No leaders found" (yet)
            if not (transient(err) or (isinstance(err, KafkaError) and err.code() == KafkaError._NOENT)):
                raise ref.failure(exc, "listing the end offsets of the partitions it created", client) from None
        if not left:
            return
        now = time.monotonic()
        if now > deadline:
            some = ", ".join(f"{t}/{p}" for t, p in sorted(left)[:5])
            raise UnreachableError(
                f"{ref.describe()} has not made {len(left):,} of the {total:,} partitions it was told to create "
                f"after {allowed:.0f} s (it answers no end offset for {some}{', ...' if len(left) > 5 else ''})",
                fix="check the brokers' logs for errors making logs (disk space, open files), then run the "
                    "mirror again: it resumes")
        if now - said >= 5:
            progress(f"waiting for {ref.describe()} to make its new partitions: {total - len(left):,} of "
                     f"{total:,} ready")
            said = now
        time.sleep(0.5)


def _configs(ref: ClusterRef, client: AdminClient, topics: list[str], timeout: float,
             explicit_only: bool) -> dict[str, dict[str, str]]:
    if not topics:
        return {}
    futures = client.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in topics],
                                      request_timeout=timeout)
    done = wait_all(ref, client, futures, "describing topic configs", timeout)
    return {res.name: {name: entry.value for name, entry in entries.items()
                       if entry.value is not None and not entry.is_sensitive
                       and (not explicit_only or _source(entry) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value)}
            for res, entries in done.items()}


def _foreign(ref: ClusterRef, topic: str, have: int, want: int, partitions: list[int],
             timeout: float) -> list[str]:
    problems = []
    if have < want:
        problems.append(f"{topic} on {ref.describe()} has {have} partitions, the source has {want}")
    consumer = Consumer(ref.config(**{"group.id": "cutover-inspect", "enable.auto.commit": False}))
    try:  # a topic another shard created a moment ago may have no leader yet: asked again until `timeout`
        held = again_while_transient(lambda: {p: consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                                                 timeout=timeout)
                                              for p in partitions if p < have}, timeout, lambda: time.sleep(0.2))
    except KafkaException as exc:
        raise ref.failure(exc, f"reading the offsets of {topic}", consumer) from None
    finally:
        consumer.close()
    # Offsets alone can mislead: a mirror killed inside its first transaction leaves only aborted
    # records (aborted by this process's fencing), and those are not anybody's data.
    busy = {p: hi - lo for p, (lo, hi) in held.items()
            if hi > lo and _committed_record(ref, topic, p, lo, timeout)}
    if busy:
        problems.append(f"{topic} on {ref.describe()} already holds {sum(busy.values())} records "
                        f"(partitions {sorted(busy)}) that this mirror did not write")
    return problems


def _committed_record(ref: ClusterRef, topic: str, partition: int, start: int, timeout: float) -> bool:
    records = committed_records(ref, [(topic, partition, start)], f"reading {topic}/{partition}", timeout)
    try:
        return next(records, None) is not None
    finally:
        records.close()  # type: ignore[attr-defined]


def _source(entry: ConfigEntry) -> int:
    source: Any = entry.source
    return int(getattr(source, "value", source))


def target_limits(rt: Route, topics: list[str], timeout: float = DEFAULT_TIMEOUT) -> dict[str, int]:
    """Each target topic's max.message.bytes (the topic's, or the broker default it inherits)."""
    client = admin(rt.target)
    listed = metadata(rt.target, client, timeout, "listing topics").topics  # once: not once a topic
    present = [t for t in topics if t in listed]
    return {t: int(conf["max.message.bytes"]) for t, conf in
            _configs(rt.target, client, present, timeout, explicit_only=False).items()
            if "max.message.bytes" in conf}


#: Codecs a topic's compression.type can name (the others are "producer" and "uncompressed").
CODECS = ("gzip", "snappy", "lz4", "zstd")


def write_settings(rt: Route, topics: dict[str, int], compression: str = "auto",
                   timeout: float = DEFAULT_TIMEOUT) -> tuple[int, str]:
    """The producer's batch size (no batch of small records may exceed what a target topic accepts)
    and its compression codec (see `codec`)."""
    limit, codecs = 1_000_000, []
    for ref in (rt.source, rt.target):
        client = admin(ref)
        listed = metadata(ref, client, timeout, "listing topics").topics  # once: not once a topic
        present = [t for t in topics if t in listed]
        for conf in _configs(ref, client, present, timeout, explicit_only=False).values():
            limit = min(limit, int(conf.get("max.message.bytes", limit)))
            if ref is rt.source:
                codecs.append(conf.get("compression.type", "producer"))
    return max(1024, limit - 512), codec(compression, codecs)  # leave room for the batch header


def codec(setting: str, topic_codecs: list[str]) -> str:
    """The mirror's one producer codec. A topic that names a codec (or "uncompressed") is stored so by
    the target's broker whatever the producer sent (its compression.type is copied), so the producer
    uses the codec most of the topics name, and the brokers recompress only the others. A "producer" topic stores
    what the producer sent: the consumer API does not tell which codec the source's producers used,
    so those get the same codec (lz4 when no topic names one). `mirror.compression` other than
    "auto" chooses it instead."""
    if setting != "auto":
        return setting
    named = Counter("none" if c == "uncompressed" else c for c in topic_codecs if c in (*CODECS, "uncompressed"))
    return max(sorted(named), key=named.__getitem__) if named else "lz4"
