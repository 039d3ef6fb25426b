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

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import ConfigResource, ResourceType

from cutover.common import TP
from cutover.errors import CutoverError
from cutover.kafka.clients import ClusterRef, admin, metadata
from cutover.kafka.offsets import committed_records, log_offsets, retrying
from cutover.plan import ClusterSide, Plan

T = TypeVar("T")
#: The topic settings that decide its semantics and its replay window.
TOPIC_CONFIGS = ("cleanup.policy", "message.timestamp.type", "max.message.bytes", "retention.ms", "retention.bytes",
                 "min.insync.replicas")
#: Records read from each partition's tail to size the records (and, past COUNTED, to estimate their count).
TAIL = 50
#: Offsets read whole, in all, to count the records exactly (the smallest partitions first): markers and aborted
#: records hold offsets but are not records, and only reading tells them apart.
COUNTED = 100_000
#: The least span (seconds) a topic's retained records are taken to have been written over: a burst written
#: within milliseconds is not a produce rate of thousands a second.
RATE_SPAN_FLOOR = 60.0


@dataclass(frozen=True)
class Unknown:
    """A reading that could not be made, and why."""

    reason: str


def attempt(read: Callable[[], T]) -> T | Unknown:
    """The reading, or Unknown with the error's message (a named CutoverError: no stack trace). A Kafka client's
    own error that no caller named is unknown too, with Kafka's words: a scorecard reads many parts, and one that
    fails is a row's unknown, never the end of the whole run."""
    try:
        return read()
    except CutoverError as exc:
        return Unknown(exc.message)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        return Unknown(f"Kafka's client failed: {err.str() if isinstance(err, KafkaError) else exc}")


@dataclass
class TopicFacts:
    topic: str
    partitions: int
    configs: dict[str, str]
    #: per partition: (log start, last stable offset)
    offsets: dict[int, tuple[int, int]]
    #: the oldest retained record's timestamp (ms), over all partitions; None: nothing retained
    oldest_ms: int | None
    #: when the offsets were read (ms): the retained span runs from `oldest_ms` to it
    read_ms: int | None
    #: mean key + value + headers size of the records sampled from the partitions' tails
    record_bytes: float
    #: per partition: (committed records read, the offsets they were read from): its whole range (the count is
    #: exact), or its tail (the share of records among the offsets, for an estimate). A partition not read
    #: counts its offsets.
    counted: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: records written per second over the last `sample` seconds (None: not sampled)
    recent_rate: float | None = None

    def _records(self, partition: int) -> float:
        start, end = self.offsets[partition]
        read, span = self.counted.get(partition, (end - start, end - start))
        return read if span >= end - start else (end - start) * read / span if span else end - start

    @property
    def records(self) -> int:
        """Records, not offsets: transaction markers and aborted records hold offsets too."""
        return round(sum(self._records(p) for p in self.offsets))

    @property
    def exact(self) -> bool:
        """Whether every partition's records were counted one by one (else some are estimated from the tail)."""
        return all(self.counted.get(p, (0, end - start))[1] >= end - start for p, (start, end) in self.offsets.items())

    @property
    def share(self) -> float:
        """Records among the offsets (1.0 without transactions)."""
        offsets = sum(end - start for start, end in self.offsets.values())
        return sum(self._records(p) for p in self.offsets) / offsets if offsets else 1.0

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
        """Records a second over the retained span (from the oldest record's timestamp to the reading), that
        span taken as at least RATE_SPAN_FLOOR: records written in one burst of milliseconds are not a rate of
        thousands a second."""
        if self.oldest_ms is None or self.read_ms is None:
            return None
        return self.records / max(RATE_SPAN_FLOOR, (self.read_ms - self.oldest_ms) / 1000)

    @property
    def rate(self) -> float | None:
        """The produce rate used for sizing: the higher of the recent and the retained average."""
        rates = [r for r in (self.recent_rate, self.average_rate) if r is not None]
        return max(rates) if rates else None


def topics(plan: Plan, side: ClusterSide, names: list[str], timeout: float, sample: float) -> dict[str, TopicFacts]:
    """Each topic's settings, offsets, records, retained span, record size, and its produce rate over `sample`
    seconds."""
    ref = ClusterRef.of(plan, side)
    client = admin(ref)
    meta = metadata(ref, client, timeout, "listing the selected topics")  # the leaders, for the offsets
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
    read_ms = int(time.time() * 1000)
    read = _read(ref, tps, starts, ends, timeout)
    if sample > 0:
        time.sleep(max(0.0, sample - (time.monotonic() - began)))
    after = log_offsets(ref, tps, "high", timeout, client) if sample > 0 else before
    elapsed = max(time.monotonic() - began, 1e-3)
    out = {}
    for t, n in counts.items():
        mine = [read[(t, p)] for p in range(n) if (t, p) in read]
        stamps = [r.oldest_ms for r in mine if r.oldest_ms is not None]
        sized = [s for r in mine for s in r.sizes]
        facts = TopicFacts(t, n, settings.get(t, {}), {p: (starts[(t, p)], ends[(t, p)]) for p in range(n)},
                           min(stamps) if stamps else None, read_ms, sum(sized) / len(sized) if sized else 0.0,
                           {p: (read[(t, p)].records, read[(t, p)].offsets) for p in range(n) if (t, p) in read})
        if sample > 0:  # the offsets written since, as records (the topic's share of records among its offsets)
            facts.recent_rate = sum(after[(t, p)] - before[(t, p)] for p in range(n)) / elapsed * facts.share
        out[t] = facts
    return out


@dataclass
class _Partition:
    """What was read of one partition."""

    #: the offset the count began at, and the committed records from there to the end (read_committed)
    began: int
    offsets: int
    records: int = 0
    oldest_ms: int | None = None
    #: the sizes of its last TAIL records
    sizes: list[int] = field(default_factory=list)


def _read(ref: ClusterRef, tps: list[TP], starts: dict[TP, int], ends: dict[TP, int], timeout: float,
          ) -> dict[TP, _Partition]:
    """Each non-empty partition's records counted (read_committed: markers and aborted records are not records),
    its oldest record's timestamp and its tail's record sizes. The smallest partitions are read whole, up to
    COUNTED offsets in all (their count is exact); the others from TAIL offsets before their end (their count is
    estimated from the share of records there)."""
    held = sorted((tp for tp in tps if ends[tp] > starts[tp]), key=lambda tp: ends[tp] - starts[tp])
    parts, budget = {}, COUNTED
    for tp in held:
        whole = ends[tp] - starts[tp] <= budget
        budget -= ends[tp] - starts[tp] if whole else 0
        began = starts[tp] if whole else max(starts[tp], ends[tp] - TAIL)
        parts[tp] = _Partition(began, ends[tp] - began)
    for msg in committed_records(ref, [(t, p, r.began) for (t, p), r in parts.items()], "counting the records",
                                 timeout, group="cutover-assess", until={tp: ends[tp] for tp in parts}):
        part = parts[(str(msg.topic()), int(msg.partition() or 0))]
        headers: Any = msg.headers() or []
        part.records += 1
        part.sizes = [*part.sizes[-(TAIL - 1):], len(msg.key() or b"") + len(msg.value() or b"")
                      + sum(len(k) + len(v or b"") for k, v in headers)]
        if part.oldest_ms is None and part.began == starts[(str(msg.topic()), int(msg.partition() or 0))]:
            part.oldest_ms = int(msg.timestamp()[1])
    _oldest(ref, {tp: r for tp, r in parts.items() if r.oldest_ms is None}, starts, ends, timeout)
    return parts


def _oldest(ref: ClusterRef, parts: dict[TP, _Partition], starts: dict[TP, int], ends: dict[TP, int],
            timeout: float) -> None:
    """The oldest record's timestamp of the partitions not read from their start: their first committed record
    (the first offset may be a marker or an aborted record: then the next committed one)."""
    for msg in committed_records(ref, [(t, p, starts[(t, p)]) for t, p in parts], "reading the oldest records",
                                 timeout, group="cutover-assess", until={tp: starts[tp] + 1 for tp in parts}):
        parts[(str(msg.topic()), int(msg.partition() or 0))].oldest_ms = int(msg.timestamp()[1])
    for tp, part in parts.items():
        if part.oldest_ms is None:
            for msg in committed_records(ref, [(tp[0], tp[1], starts[tp])], "reading the oldest records", timeout,
                                         group="cutover-assess", until={tp: ends[tp]}):
                part.oldest_ms = int(msg.timestamp()[1])
                break


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


def read_throughput(plan: Plan, side: ClusterSide, partitions: dict[str, int], seconds: float) -> float:
    """Bytes a second one consumer reads from the topics' starts for up to `seconds` (the read probe);
    `partitions`: each topic's partition count."""
    ref = ClusterRef.of(plan, side)
    consumer = Consumer(ref.config(**{"group.id": "cutover-assess-probe", "enable.auto.commit": False,
                                      "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                                      "enable.partition.eof": False}))
    try:
        consumer.assign([TopicPartition(t, p, -2) for t, n in partitions.items() for p in range(n)])
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
    except KafkaException as exc:
        raise ref.failure(exc, "reading the topics (the read probe)", consumer) from None
    finally:
        consumer.close()
