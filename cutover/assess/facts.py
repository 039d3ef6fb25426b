"""The evidence `cutover assess` reads from the live clusters, read-only: each selected topic's
semantics and size, who writes to it, the groups and what they read, and a short read probe.

Every reading is its own call, so that a cluster refusing one Admin call (or a part out of reach)
makes that part of the evidence unknown, with the reason, and the rest is still read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import ConfigResource, OffsetSpec, ResourceType

from cutover.common import TP
from cutover.errors import CutoverError
from cutover.kafka.clients import ClusterRef, admin, metadata
from cutover.kafka.offsets import committed_records, log_offsets, retrying
from cutover.plan import ClusterSide, Plan

T = TypeVar("T")
#: The topic settings that decide its semantics and its replay window.
TOPIC_CONFIGS = ("cleanup.policy", "message.timestamp.type", "max.message.bytes", "retention.ms", "retention.bytes",
                 "min.insync.replicas")
#: Records read from each partition's tail to size the records.
TAIL = 50


@dataclass(frozen=True)
class Unknown:
    """A reading that could not be made, and why."""

    reason: str


def attempt(read: Callable[[], T]) -> T | Unknown:
    """The reading, or Unknown with the error's message (a named CutoverError: no stack trace)."""
    try:
        return read()
    except CutoverError as exc:
        return Unknown(exc.message)


@dataclass
class TopicFacts:
    topic: str
    partitions: int
    configs: dict[str, str]
    #: per partition: (log start, last stable offset)
    offsets: dict[int, tuple[int, int]]
    #: the oldest retained record's timestamp (ms), over all partitions; None: nothing retained
    oldest_ms: int | None
    #: the newest record's timestamp (ms)
    newest_ms: int | None
    #: mean key + value + headers size of the records sampled from the partitions' tails
    record_bytes: float
    #: records written per second over the last `sample` seconds (None: not sampled)
    recent_rate: float | None = None

    @property
    def records(self) -> int:
        return sum(end - start for start, end in self.offsets.values())

    @property
    def bytes(self) -> float:
        return self.records * self.record_bytes

    def setting(self, key: str) -> int | None:
        """A numeric setting; None for -1 (unlimited) or absent."""
        value = self.configs.get(key)
        if value is None or int(value) < 0:
            return None
        return int(value)

    @property
    def average_rate(self) -> float | None:
        """Records a second over what the topic retains (from its records' timestamps)."""
        if self.oldest_ms is None or self.newest_ms is None or self.newest_ms <= self.oldest_ms:
            return None
        return self.records / ((self.newest_ms - self.oldest_ms) / 1000)

    @property
    def rate(self) -> float | None:
        """The produce rate used for sizing: the higher of the recent and the retained average."""
        rates = [r for r in (self.recent_rate, self.average_rate) if r is not None]
        return max(rates) if rates else None


def topics(plan: Plan, side: ClusterSide, names: list[str], timeout: float, sample: float) -> dict[str, TopicFacts]:
    """Each topic's settings, offsets, retained span, record size, and its produce rate over `sample` seconds."""
    ref = ClusterRef.of(plan, side)
    client = admin(ref, warm_for=timeout)
    meta = metadata(ref, client, timeout, "listing topics")
    counts = {t: len(meta.topics[t].partitions) for t in names if t in meta.topics}
    tps = [(t, p) for t, n in counts.items() for p in range(n)]
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in counts]
    configs = retrying(ref, client, lambda c, wait: c.describe_configs(resources, request_timeout=wait),
                       "reading the topics' settings", timeout) if resources else {}
    settings = {r.name: {k: str(v.value) for k, v in entries.items() if k in TOPIC_CONFIGS}
                for r, entries in configs.items()}
    starts = log_offsets(ref, tps, "start", timeout, client)
    before = log_offsets(ref, tps, "high", timeout, client)
    began = time.monotonic()
    ends = log_offsets(ref, tps, "end", timeout, client)
    newest = _newest(ref, client, tps, timeout)
    oldest, sizes = _samples(ref, tps, starts, ends, timeout)
    if sample > 0:
        time.sleep(max(0.0, sample - (time.monotonic() - began)))
    after = log_offsets(ref, tps, "high", timeout, client) if sample > 0 else before
    elapsed = max(time.monotonic() - began, 1e-3)
    out = {}
    for t, n in counts.items():
        mine = [(t, p) for p in range(n)]
        stamps = [oldest[tp] for tp in mine if tp in oldest]
        latest = [newest[tp] for tp in mine if tp in newest]
        sized = [s for tp in mine for s in sizes.get(tp, [])]
        out[t] = TopicFacts(
            t, n, settings.get(t, {}), {p: (starts[(t, p)], ends[(t, p)]) for p in range(n)},
            min(stamps) if stamps else None, max(latest) if latest else None,
            sum(sized) / len(sized) if sized else 0.0,
            sum(after[tp] - before[tp] for tp in mine) / elapsed if sample > 0 else None)
    return out


def _newest(ref: ClusterRef, client: Any, tps: list[TP], timeout: float) -> dict[TP, int]:
    """Each partition's largest record timestamp (ListOffsets max-timestamp, KIP-734)."""
    if not tps:
        return {}
    done = retrying(ref, client, lambda c, wait: c.list_offsets(
        {TopicPartition(t, p): OffsetSpec.max_timestamp() for t, p in tps},  # type: ignore[no-untyped-call]
        request_timeout=wait), "reading the newest record timestamps", timeout)
    return {(tp.topic, tp.partition): int(info.timestamp) for tp, info in done.items()
            if info.offset >= 0 and info.timestamp >= 0}


def _samples(ref: ClusterRef, tps: list[TP], starts: dict[TP, int], ends: dict[TP, int], timeout: float,
             ) -> tuple[dict[TP, int], dict[TP, list[int]]]:
    """Each partition's oldest retained record timestamp, and the sizes of the records of its tail."""
    oldest: dict[TP, int] = {}
    first = {tp: starts[tp] for tp in tps if ends[tp] > starts[tp]}
    for msg in committed_records(ref, [(t, p, o) for (t, p), o in first.items()], "reading the oldest records",
                                 timeout, group="cutover-assess", until={tp: starts[tp] + 1 for tp in first}):
        oldest.setdefault((str(msg.topic()), int(msg.partition() or 0)), int(msg.timestamp()[1]))
    for tp in first:  # the first offset was a marker or aborted: the next committed record
        if tp not in oldest:
            for msg in committed_records(ref, [(tp[0], tp[1], starts[tp])], "reading the oldest records", timeout,
                                         group="cutover-assess", until={tp: ends[tp]}):
                oldest[tp] = int(msg.timestamp()[1])
                break
    sizes: dict[TP, list[int]] = {}
    tails = [(t, p, max(starts[(t, p)], ends[(t, p)] - TAIL)) for (t, p) in first]
    for msg in committed_records(ref, tails, "sampling the newest records", timeout, group="cutover-assess",
                                 until={tp: ends[tp] for tp in first}):
        headers: Any = msg.headers() or []
        size = len(msg.key() or b"") + len(msg.value() or b"") + sum(len(k) + len(v or b"") for k, v in headers)
        sizes.setdefault((str(msg.topic()), int(msg.partition() or 0)), []).append(size)
    return oldest, sizes


@dataclass
class GroupFacts:
    group: str
    state: str
    #: classic or consumer (KIP-848), as the broker says
    protocol: str
    members: int
    #: every topic the group commits on or is assigned
    topics: list[str]
    #: records behind, per topic (committed offsets against the last stable offsets)
    lag: dict[str, int] = field(default_factory=dict)


def groups(plan: Plan, side: ClusterSide, timeout: float) -> list[GroupFacts]:
    """Every group of the cluster the plan's group selection takes: protocol, members, topics, lag."""
    from cutover.kafka.inspect import list_groups
    from cutover.kafka.offsets import groups_info

    ref = ClusterRef.of(plan, side)
    client = admin(ref)
    chosen = [g for g in list_groups(ref, timeout) if plan.spec.groups.matches(g)]
    if not chosen:
        return []
    described = retrying(ref, client, lambda c, wait: c.describe_consumer_groups(chosen, request_timeout=wait),
                         "describing the consumer groups", timeout)
    infos = groups_info(ref, chosen, timeout, client)
    committed = sorted({tp for i in infos.values() for tp in i.offsets})
    ends = log_offsets(ref, committed, "end", timeout, client) if committed else {}
    out = []
    for g in chosen:
        d, info = described[g], infos[g]
        assigned = {tp.topic for m in d.members or [] for tp in (m.assignment.topic_partitions if m.assignment else [])}
        lag: dict[str, int] = {}
        for (t, p), offset in info.offsets.items():
            lag[t] = lag.get(t, 0) + max(0, ends.get((t, p), offset) - offset)
        kind = getattr(d, "type", None)
        protocol = str(getattr(kind, "name", kind) or "classic").lower()
        out.append(GroupFacts(g, info.state, "classic" if protocol in ("unknown", "none") else protocol,
                              info.members, sorted(assigned | {t for t, _p in info.offsets}), lag))
    return out


def read_throughput(plan: Plan, side: ClusterSide, names: list[str], seconds: float, timeout: float) -> float:
    """Bytes a second one consumer reads from the topics' starts for up to `seconds` (the read probe)."""
    ref = ClusterRef.of(plan, side)
    consumer = Consumer(ref.config(**{"group.id": "cutover-assess-probe", "enable.auto.commit": False,
                                      "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                                      "enable.partition.eof": False}))
    try:
        meta = metadata(ref, admin(ref), timeout, "listing topics")  # refused credentials named at once
        consumer.assign([TopicPartition(t, p, -2) for t in names if t in meta.topics
                         for p in meta.topics[t].partitions])
        total, began, first = 0, time.monotonic(), None
        while time.monotonic() - began < seconds:
            batch = consumer.consume(10_000, 0.5)
            got = [m for m in batch if m.error() is None]
            if got and first is None:
                first = time.monotonic()
            total += sum(len(m.key() or b"") + len(m.value() or b"") for m in got)
            if not batch and first is not None:
                break  # read everything there is
        spent = time.monotonic() - (first or began)
        return total / spent if spent > 0 and total else 0.0
    finally:
        consumer.close()
